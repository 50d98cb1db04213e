//===- LoopLoads.h - the loads of a loop body as allocate-shared writes them -*- C++ -*-===//
//
// Private to dialects/tilegpu/Transforms: the unpipelined form of a loop-body load
// (tilegpu-allocate-shared's output) and the small IR helpers of the passes that schedule those
// loads (tilegpu-pipeline-loads, tilegpu-overlap-wgmma).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_TRANSFORMS_LOOPLOADS_H
#define TESSEL_TILEGPU_TRANSFORMS_LOOPLOADS_H

#include "tilegpu/IR/TileGPUDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"

namespace tessel::tilegpu {

/// One load of the unpipelined form: copy → commit → wait(pending 0) → [fence] → barrier, its
/// stage `iteration mod stages`.
struct UnpipelinedLoad {
  AsyncCopyOp copy;
  AsyncCommitOp commit;
  AsyncWaitOp wait;
  FenceAsyncSharedOp fence;
  mlir::gpu::BarrierOp barrier;

  /// Erases the copy and what waits for it (not the local load that reads the buffer), and its
  /// descriptor and address arithmetic when nothing else uses them.
  void erase();
};

/// The loads of `loop`'s body in allocate-shared's form, in body order, and their stage count;
/// empty when the loop has none or is not in that form.
llvm::SmallVector<UnpipelinedLoad> matchUnpipelinedLoads(mlir::scf::ForOp loop, int64_t &stages);

mlir::Value constI32(mlir::OpBuilder &b, mlir::Location loc, int64_t v);

/// The stage of a ring of `stages` that iteration count `i` uses (i mod stages) and the parity
/// of its lap (i / stages & 1), the phase its mbarriers complete: the one rule the producer
/// and the consumers of a warp-specialized ring share.
std::pair<mlir::Value, mlir::Value> stageAndPhase(mlir::OpBuilder &b, mlir::Location loc,
                                                  mlir::Value i, int64_t stages);

/// Peels the first iteration of `loop`: a copy of it, made at `rw`'s insertion point (before
/// the loop), runs from its lower bound to min(lb + step, ub) — at most one iteration — and the
/// loop then starts at lb + step; `copy` maps the loop's ops and values to the copy's. The
/// caller feeds the copy's results to the loop's iter_args (after changing the copy, if it
/// does).
mlir::scf::ForOp peelFirstIteration(mlir::OpBuilder &rw, mlir::scf::ForOp loop,
                                    mlir::IRMapping &copy);
/// Whether `loop` has peelFirstIteration's bounds: from lb to min(lb + step, n).
bool isFirstIterationPeel(mlir::scf::ForOp loop);

/// (x + k) mod stages.
mlir::Value addMod(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, int64_t k,
                   int64_t stages);

/// Whether `v` is an address `loop` can compute for any iteration: loop-invariant, the
/// induction variable, or scalar arithmetic, tile.load_scalar reads (of loop-invariant
/// descriptors) and tile.make_desc on those — an indirect loop's `j = list[t] * BLOCK`, a paged
/// cache's descriptor of the iteration's page. Iteration-carried values are not: a later
/// iteration's address must not depend on this one's.
bool isIterationAddress(mlir::Value v, mlir::scf::ForOp loop);

/// Where a copy reads: its descriptor and offsets.
struct CopyAddress {
  mlir::Value desc;
  llvm::SmallVector<mlir::Value> offsets;
};

/// The descriptor and offsets of a copy in `loop` for another iteration, built at `b`'s
/// insertion point: those that are one of `loopIvs` become `iv`, and those computed in the body
/// from it (isIterationAddress) are computed again from `iv`. `built` keeps what was computed,
/// so that the copies of one iteration share it (a page number read once for K and V).
CopyAddress addressAt(mlir::OpBuilder &b, AsyncCopyOp copy, mlir::scf::ForOp loop,
                      llvm::ArrayRef<mlir::Value> loopIvs, mlir::Value iv, mlir::IRMapping &built);

/// Whether a producer warpgroup may compute `op` itself: scalar arithmetic, descriptors, grid
/// queries and scalar reads of global memory — what a copy's address is made of.
bool producerComputable(mlir::Operation *op);

/// `v` in the producer region of `outside` (a tilegpu.warp_specialize): values from before it
/// as they are, the others computed again at `b` (their defining slice cloned; `map` keeps
/// what was); failure where a value in the slice is not producerComputable.
mlir::FailureOr<mlir::Value> producerValue(mlir::OpBuilder &b, mlir::Value v, mlir::IRMapping &map,
                                           mlir::Operation *outside);

/// Erases the defining ops of `values` and then their operands' when nothing uses them any more.
void eraseIfDead(llvm::ArrayRef<mlir::Value> values);

} // namespace tessel::tilegpu

#endif // TESSEL_TILEGPU_TRANSFORMS_LOOPLOADS_H
