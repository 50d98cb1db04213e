//===- MmaClass.h - the attention class of the register-resident path -*- C++ -*-===//
//
// Which tile programs the mma.sync/wgmma path takes, and the two decisions it makes for the
// whole program: the register layout (warps, rows per warp, instruction family) and where each
// loaded block lives in shared memory. One function decides both, used by the layout and
// shared-memory passes of the tilegpu level and by convert-tile-to-mma, so they cannot drift.
// The entry points of the passes that rewrite a program of the class (layouts, shared memory,
// pipelining) are here too: convert-tile-to-mma runs them on a copy of each program it lowers.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_TRANSFORMS_MMACLASS_H
#define TESSEL_TILEGPU_TRANSFORMS_MMACLASS_H

#include "tilegpu/IR/TileGPUDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/bit.h"

#include <optional>

namespace tessel::tilegpu {

/// What a tile.load feeds, which decides how its block reaches the tensor cores: A operands
/// (read into A fragments), or B operands (read as stored, transposed, or both).
enum class LoadRole { A, B };

/// Where a load's block lives in shared memory.
struct LoadSlot {
  LoadRole role = LoadRole::A;
  /// Bytes from the start of the kernel's shared memory (stage 0 for loop-body loads).
  int64_t smemOffset = 0;
  int64_t rows = 0, cols = 0;
  /// Index among the loads of its loop body; -1 outside loops.
  int streamIndex = -1;
  /// An FP8 B block read as stored (V of P·V): kept transposed in shared memory, [cols, rows]
  /// (`rows`/`cols` are of that layout), since wgmma reads 8-bit operands K-major only; its
  /// copy transposes it (kTransposedAttr).
  bool transposed = false;
  /// A 64-column slab of a block loaded before it (wgmma, outside loops: the same descriptor,
  /// rows and no write between): no copy of its own, its place is that slab's (the backward's
  /// halves of K at d128, read transposed). Null otherwise.
  mlir::Operation *viewOf = nullptr;
  /// wgmma: an A block loaded once that every dot reads by descriptor, not from registers, and
  /// whose slot the ring never reuses: Q where one loop reads it beside a P of as many columns
  /// (kADescriptorAttr; docs/dev/codegen.md, "Known problems").
  bool byDescriptor = false;
};

/// The plan of an attention-class program.
struct MmaClassPlan {
  MmaEncodingAttr layout;
  /// f16 or bf16: the element type of every dot operand.
  mlir::Type operandType;
  /// Every tile.load of a dot operand, in program order (1-D vector loads stay tile.loads,
  /// read into registers by the lowering).
  llvm::MapVector<mlir::Operation *, LoadSlot> loads;
  /// Where the ring of loop-body loads starts, and the bytes of one stage of it.
  int64_t ringStart = 0, stageBytes = 0;
  /// Bytes of shared memory the kernel needs with a ring of two stages.
  int64_t sharedBytes = 0;
};

/// The name of the unit attribute of a tilegpu.alloc whose block is stored transposed: its
/// copies write element (r, c) of the block at (c, r) of the buffer (LoadSlot::transposed).
inline constexpr llvm::StringLiteral kTransposedAttr = "tilegpu.transposed";

/// The name of the unit attribute of a tilegpu.alloc whose A block wgmma reads by descriptor in
/// every dot (LoadSlot::byDescriptor).
inline constexpr llvm::StringLiteral kADescriptorAttr = "tilegpu.a_by_descriptor";

/// The name of the unit attribute that marks a program's tile loop: a persistent kernel's loop
/// over the output tiles a CTA computes (`for tile in range(pid, tiles, num_programs)`), an
/// scf.for without results directly in the function body that holds everything the program
/// computes per tile — its streamed loops, their prologue and epilogue. The passes read its
/// body where they read the function's body in a program without one.
inline constexpr llvm::StringLiteral kTileLoopAttr = "tilegpu.tile_loop";
/// Whether `op` is a tile loop (has kTileLoopAttr).
bool isTileLoop(mlir::Operation *op);

/// The threads among `threads` consumers that deal a block's copies: a power of two, so that a
/// copy step is whole 8-row swizzle groups (192 rows' three warpgroups copy with 256).
inline int64_t copyingThreads(int64_t threads) {
  return static_cast<int64_t>(llvm::bit_floor(static_cast<uint64_t>(threads)));
}

/// The XOR swizzle, in bytes, of a block of `cols` 16-bit columns in shared memory. wgmma's
/// rows are at most 128 bytes (wider blocks are slabs of 128-byte rows); a row of 64 or 32
/// bytes (an FP8 B block of 64 or 32 keys, kept transposed) takes the swizzle of its width, so
/// that it is not padded to 128. The mma.sync path's software swizzle is 128 for rows of any
/// width.
inline int64_t swizzleBytes(int64_t cols, bool wgmma) {
  return wgmma ? std::min<int64_t>(cols * 2, 128) : 128;
}

/// Marks the tile loop of `program` (tilegpu-assign-layouts does): an scf.for in the function
/// body, without results, with a loop inside it. Refuses (located) a loop with a loop inside
/// that is not one.
mlir::LogicalResult markTileLoop(mlir::func::FuncOp program);
/// The loop `op` is streamed by: its nearest scf.for ancestor that is not a tile loop, or null.
mlir::scf::ForOp streamingLoop(mlir::Operation *op);
/// The block of `block` that runs once per output tile: the body of the tile loop in it, or
/// `block` itself.
mlir::Block &tileBlock(mlir::Block &block);
/// tileBlock of the function's body.
mlir::Block &tileBody(mlir::func::FuncOp program);

/// Checks that `program` is in the class (the reason, located, when it is not) and plans it:
/// wgmma layouts or mma.sync ones, `warpRowsOption` rows per warp (0: choose).
mlir::FailureOr<MmaClassPlan> planMmaClass(mlir::func::FuncOp program, bool wgmma,
                                           int64_t warpRowsOption);

/// Gives every tile of `program` its layout (tilegpu-assign-layouts): the class check, then
/// the layouts on the types. On failure (the reason emitted, located) the program is unchanged.
mlir::LogicalResult assignLayouts(mlir::func::FuncOp program, bool wgmma, int64_t warpRowsOption);

/// Places the loaded blocks of `program` (whose tiles have their layouts) in shared memory with
/// explicit copies, waits and local loads, loop-body blocks in a ring of `stages` stages
/// (tilegpu-allocate-shared). With `bulkAdds`, float32 atomic adds of tiles become
/// tilegpu.bulk_add. On failure (the reason emitted, located) nothing has changed.
mlir::LogicalResult allocateShared(mlir::func::FuncOp program, int64_t stages,
                                   bool bulkAdds = false);

/// Software-pipelines the copies of every loop of `program` in allocateShared's form
/// (tilegpu-pipeline-loads).
mlir::LogicalResult pipelineLoads(mlir::func::FuncOp program);

/// Moves each wait for a block loaded before a loop below the loop's prologue copies when they
/// write other bytes (tilegpu-sink-waits); a wait it cannot move stays where it is.
void sinkWaits(mlir::func::FuncOp program);

/// The copies of the loops of a wgmma `program` in allocateShared's form moved to a producer
/// warpgroup of `producerWarps` warps, mbarriers between it and the consumers
/// (tilegpu-warp-specialize). False, with the program unchanged, when it does not apply (not
/// wgmma, no loop in that form, another schedule already there); a failure is an error emitted.
/// Registers a thread of each role gets (setmaxnreg), 0 to choose: the producer 40, the
/// consumers what the CTAs the shared memory allows an SM leave them, then the producer what
/// the consumers leave (up to 56).
mlir::FailureOr<bool> warpSpecialize(mlir::func::FuncOp program, int64_t producerWarps = 4,
                                     int64_t producerRegisters = 0, int64_t consumerRegisters = 0);

/// The blocks the consumers of a warp-specialized `program` load once a tile (Q) copied by the
/// producer too, behind a pair of mbarriers, in two buffers where a tile loop runs and the
/// extra bytes stay within `sharedLimit` (tilegpu-producer-once). False, with the program
/// unchanged, when it does not apply.
mlir::FailureOr<bool> producerOnce(mlir::func::FuncOp program, int64_t sharedLimit);
/// The producer's block copies of a warp-specialized `program` marked to go through TMA, with
/// the shared memory for their tensor maps within `sharedLimit` and past half of it (one CTA
/// an SM: the maps' global slots are the SM's) (tilegpu-tma-producer). False, with the
/// program unchanged, when no copy qualifies or the bytes do not fit.
mlir::FailureOr<bool> tmaProducer(mlir::func::FuncOp program, int64_t sharedLimit);
/// The arrival on an mbarrier that completes a producer's `copy`: the next async_copy_arrive
/// in its block, or null.
AsyncCopyArriveOp arrivalOf(AsyncCopyOp copy);
/// The consumers' proxy fences after waits on rings that only TMA fills dropped (wgmma reads
/// what TMA wrote through the same async proxy); for programs whose TMA-marked copies never
/// fall back to cp.async (tilegpu-drop-tma-fences). The number of fences dropped.
int64_t dropTmaFences(mlir::func::FuncOp program);
/// FA3's intra-warpgroup overlap in the consumers of a warp-specialized `program`
/// (tilegpu-overlap-consumers). False, with the program unchanged, when no consumer loop has
/// the attention shape or its registers would not fit. `rescaleUnderS`: O's rescale made
/// beside the next S's wgmma (Passes.td, `rescale-under-s`).
mlir::FailureOr<bool> overlapConsumers(mlir::func::FuncOp program, bool lateP = false,
                                       bool transposedV = false, bool maskedSynchronous = false,
                                       bool rescaleUnderS = false);
/// The registers a consumer thread of a warp-specialized `program` would have left beside
/// overlapConsumers' schedule (its estimate), the least over the loops it takes; none where
/// no loop would be overlapped in that form (none has the attention shape, or one needs
/// more than the consumers have).
std::optional<int64_t> overlapHeadroom(mlir::func::FuncOp program, bool transposedV = false);

/// The copies tile-split-masked-loops made of one key loop (masked, unmasked, masked) run as
/// the masked one over their range, the mask guarded by the unmasked copy's range
/// (tilegpu-fuse-masked-loops); whether anything changed.
bool fuseMaskedLoops(mlir::func::FuncOp program);

/// FA3's ping-pong between the two consumer warpgroups of a warp-specialized `program` whose
/// loops issue a pair of wgmma groups (tilegpu-pingpong); whether it changed anything.
bool pingPong(mlir::func::FuncOp program);

/// In the synchronous masked key loops of a warp-specialized `program` of two consumer
/// warpgroups or more, each warpgroup branches around the blocks its own rows cannot see
/// (tilegpu-skip-masked-warpgroups); the number of loops changed.
int64_t skipMaskedWarpgroups(mlir::func::FuncOp program);

/// The first S = Q·K₀ᵀ of each tile of a persistent `program` in tilegpu-overlap-consumers'
/// form, with Q from the producer, issued at the end of the previous tile (after its last P·V,
/// before its epilogue) and waited for by the tile's peeled first iteration
/// (tilegpu-pipeline-tiles); whether it applied.
bool pipelineTiles(mlir::func::FuncOp program);

/// FA3's intra-warpgroup overlap on the attention loops of a wgmma `program` in allocateShared's
/// form with two stages (tilegpu-overlap-wgmma); the other loops are left as they are.
mlir::LogicalResult overlapWgmma(mlir::func::FuncOp program);

/// The accumulating wgmma of each GEMM-shaped loop of a wgmma `program` (allocateShared's form,
/// four stages or more) kept in flight into the next iteration (tilegpu-async-accumulate).
mlir::LogicalResult asyncAccumulate(mlir::func::FuncOp program);

/// Every wgmma dot of `program` (allocateShared's form) issued where it stands and waited for
/// before its first use (tilegpu-async-dots); a no-op on mma.sync programs. With `eager`, every
/// one that is left, in any block, is waited for right after it instead (pending 0: a
/// synchronous dot), which is how convert-tile-to-mma lowers the dots nothing scheduled.
mlir::LogicalResult asyncDots(mlir::func::FuncOp program, bool eager = false);

/// Every tile.dot of an mma.sync `program` whose operands have their dot_operand layouts
/// becomes a tilegpu.mma (tilegpu-mma-dots); a no-op on wgmma programs.
void mmaDots(mlir::func::FuncOp program);
/// Bytes [begin, end) of shared memory.
struct SharedBytes {
  int64_t begin, end;
  bool overlaps(const SharedBytes &o) const { return begin < o.end && o.begin < end; }
};
/// The bytes `buffer` occupies at `stage` (every stage when the stage is null or not a
/// constant), or nothing when its place is unknown (not a placed tilegpu.alloc).
std::optional<llvm::SmallVector<SharedBytes>> sharedBytesOf(mlir::Value buffer, mlir::Value stage);
bool anyOverlap(llvm::ArrayRef<SharedBytes> a, llvm::ArrayRef<SharedBytes> b);

/// The mma layout the tiles of `program` were given, or null when they have none.
MmaEncodingAttr programLayout(mlir::func::FuncOp program);

/// Tensor constants whose result type was given (or lost) a layout: the same value, retyped
/// (arith.constant's value must have its result's type). Used by the layout passes.
void retypeConstants(mlir::func::FuncOp program);

/// Takes the layouts off again (a program another lowering will take): encodings dropped,
/// layout conversions bypassed.
void stripLayouts(mlir::func::FuncOp program);

} // namespace tessel::tilegpu

#endif // TESSEL_TILEGPU_TRANSFORMS_MMACLASS_H
