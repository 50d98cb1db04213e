//===- AttentionDots.h - the two dots of an attention loop -------------*- C++ -*-===//
//
// Private to dialects/tilegpu/Transforms: the shape the overlapped schedules rewrite
// (tilegpu-overlap-wgmma on the pipelined ring, tilegpu-overlap-consumers on a producer's).
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_TRANSFORMS_ATTENTIONDOTS_H
#define TESSEL_TILEGPU_TRANSFORMS_ATTENTIONDOTS_H

#include "tilegpu/IR/TileGPUDialect.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include <optional>

namespace tessel::tilegpu {

/// The two dots of an attention loop body on wgmma layouts: S = Q·K_jᵀ (Q from outside the
/// loop, K read transposed from shared memory, a fresh zero accumulator) and O' = f(O) + P·V
/// (P made in the body, V read as stored, f(O) the carried O or O·α, O' yielded in O's place
/// and used nowhere else).
struct AttentionDots {
  tessel::tile::DotOp sDot, pvDot;
  LocalLoadOp kRead, vRead;
  /// O among the iter_args.
  unsigned accIndex = 0;
  /// O·α when f(O) is a product, else null.
  mlir::arith::MulFOp rescale;
};

/// The loop's attention dots, if its body has exactly two dots of that shape; with
/// `transposedV`, V may be read transposed too (FP8's, stored K-major by the producer).
std::optional<AttentionDots> matchAttentionDots(mlir::scf::ForOp loop, bool transposedV = false);

/// Once the overlapped schedule has waited for O (`waited`, at `b`'s insertion point): yields
/// f(O) — `waited`, times α where the accumulator was a product and `applyRescale` — in O's
/// place in `body`'s terminator and erases the two dots, their shared-memory reads and the
/// rescale.
void yieldWaitedO(AttentionDots &m, mlir::OpBuilder &b, mlir::Value waited, mlir::Block *body,
                  bool applyRescale = true);

/// The unpredicated wait on `read`'s stage and the fence right before `read` (a consumer's
/// read of a block the producer copied), or null.
MbarrierWaitOp waitBefore(LocalLoadOp read, FenceAsyncSharedOp &fence);

/// Whether `v` is a constant splat of +0.0.
bool isZeroSplat(mlir::Value v);

} // namespace tessel::tilegpu

#endif // TESSEL_TILEGPU_TRANSFORMS_ATTENTIONDOTS_H
