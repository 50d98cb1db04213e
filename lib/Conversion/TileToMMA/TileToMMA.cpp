//===- TileToMMA.cpp - register-resident mma.sync lowering of attention ---===//
//
// convert-tile-to-mma: the sm_80 fast path (FlashAttention-2 style) for the attention class of
// tile programs. Tiles whose rows are the query block live in registers in the accumulator
// layout of mma.sync.m16n8k16 (warp w owns 16 or 32 rows, one or two m16 tiles; in each tile
// lane l holds rows l/4 and l/4+8, columns 2(l%4) and 2(l%4)+1 of every 8-column slab); row vectors hold the two rows a thread
// owns; index tiles (iota/splat/expand_dims/broadcast and arithmetic on them) are computed per
// register from the lane and warp ids, on demand, in the layout their consumer asks for. Loads
// go through XOR-swizzled shared memory with cp.async (zero fill past the bounds) and reach the
// tensor cores through ldmatrix; the loads of a loop body are pipelined across the body and
// the next iteration. docs/dev/codegen-mma.md explains the choices.
//
//===----------------------------------------------------------------------===//

#include "tessel/Conversion/Passes.h"
#include "tessel/Conversion/ScalarLowering.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/MapVector.h"

namespace tessel {
#define GEN_PASS_DEF_CONVERTTILETOMMA
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

using namespace mlir;
namespace tile = tessel::tile;
using tessel::conversion::approxEx2;

namespace {

constexpr const char *kSharedGlobal = "__tessel_mma_smem";

/// How a tile value is spread over the registers of the CTA (see the file comment).
/// Acc: [BM, N], regs[(n/8)*4 + r]; Row: [BM] or [BM, 1], regs[h]; Col: [N] or [1, N],
/// regs[(n/8)*2 + c].
enum class Layout { Acc = 0, Row = 1, Col = 2 };

/// A descriptor after lowering, all i64.
using Desc = tessel::conversion::LoweredDesc;

/// What a tile.load feeds, which decides how its block reaches the tensor cores.
enum class LoadRole { A, BTransposed, B };

/// Where a load's block lives in shared memory.
struct LoadPlan {
  LoadRole role;
  int64_t smemOffset = 0;
  int64_t rows = 0, cols = 0;
  /// Index among the loads of its loop body; -1 outside loops.
  int streamIndex = -1;
};

/// FA3's intra-warpgroup pipelining of an attention loop (wgmma-overlap,
/// docs/dev/codegen-wgmma.md): the loop's P·V dot is issued one iteration late, as a second
/// commit group beside the next S = Q·Kᵀ, and V is loaded one iteration late to match.
struct Overlap {
  tile::DotOp sDot, pvDot;
  tile::LoadOp kLoad, vLoad;
  /// Position of O among the loop's iter_args and results.
  unsigned accIndex = 0;
  /// The P·V still to issue: P packed (b32 registers) and the byte offset (i32) of its V block
  /// (slot + stage). From the loop's iter_args until the S dot, then from the P·V dot.
  SmallVector<Value> pendingP;
  Value pendingV;
  /// O while that P·V runs: from the S dot (issue) to the P·V dot (wait_group 0).
  SmallVector<Value> inFlight;
};

/// wgmma-overlap: the pending P·V a loop leaves to the next one (see handoverTarget) instead of
/// draining it: P, V's offset, the stage the next loop starts in, whether any loop of the chain
/// ran (else nothing is pending).
struct Handover {
  scf::ForOp next;
  SmallVector<Value> pendingP;
  Value pendingV, stage, ran;
};

/// The loop being emitted and its pipelined loads.
struct LoopContext {
  scf::ForOp source;
  SmallVector<tile::LoadOp> streams;
  Value iv, ub, step;
  /// Byte offset (i32) of the stage the current iteration reads: 0 or streamStageBytes.
  Value stage;
  /// Set when the loop runs the overlapped schedule.
  Overlap *overlap = nullptr;
};

bool isTensor(Type t) { return isa<RankedTensorType>(t); }

/// A [BM, N] tile that is a [BM, 1] column broadcast along the rows.
bool isRowBroadcast(Value v) {
  auto bc = v.getDefiningOp<tile::BroadcastOp>();
  if (!bc)
    return false;
  auto in = cast<RankedTensorType>(bc.getInput().getType());
  return in.getRank() == 2 && in.getShape()[1] == 1 &&
         cast<RankedTensorType>(v.getType()).getShape()[1] != 1;
}

int64_t constantOf(Value v) {
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return c.getSExtValue();
  return INT64_MIN;
}

class MmaKernelBuilder {
public:
  MmaKernelBuilder(gpu::GPUFuncOp kernel, LLVM::GlobalOp smem, int64_t warpRowsOption,
                   bool wgmma, bool overlap = false)
      : kernel(kernel), smemGlobal(smem), b(kernel.getContext()),
        warpRowsOption(warpRowsOption), wgmma(wgmma), overlapOption(wgmma && overlap) {}

  /// Checks that `program` is in the class and plans it; fills the block size and bytes.
  LogicalResult plan(func::FuncOp program);
  LogicalResult build(func::FuncOp program);

  int64_t numThreads() const { return numWarps * 32; }
  int64_t sharedBytes() const { return smemBytes; }

private:
  LogicalResult emitBlock(Block &block);
  LogicalResult emitOp(Operation *op);
  LogicalResult emitLoad(tile::LoadOp op);
  LogicalResult emitStore(tile::StoreOp op);
  LogicalResult emitDot(tile::DotOp op);
  /// sm_90a: the dot as wgmma.mma_async over warpgroups (A from registers, B through a
  /// shared-memory matrix descriptor).
  LogicalResult emitDotWgmma(tile::DotOp op, ArrayRef<Value> a, const LoadPlan &p,
                             bool transposed);
  /// The k steps of one warpgroup dot as wgmma.mma_async (no fence, commit or wait): A as b32
  /// registers, four per k step; `acc` the accumulator registers tied through the chain, or
  /// empty for a fresh one (the first step does not read it); B the block of plan `p` at
  /// `offset` bytes (i32). Returns the accumulator, in flight until a wait re-defines it.
  SmallVector<Value> wgmmaChain(ArrayRef<Value> a, ArrayRef<Value> acc, Value offset,
                                const LoadPlan &p, bool transposed, int64_t n, int64_t kSteps);
  /// wgmma-overlap: whether loop `op` has the shape of the overlapped schedule (see Overlap).
  std::optional<Overlap> matchOverlap(scf::ForOp op);
  /// wgmma-overlap: S_j = Q·K_jᵀ and the previous iteration's O += P·V as two commit groups,
  /// then wait_group 1 (S_j) — the softmax follows while P·V runs.
  LogicalResult emitOverlapS(tile::DotOp op);
  /// wgmma-overlap: packs P_j, wait_group 0 (O), rescales O, and leaves P_j·V_j to the next
  /// iteration (or the loop's drain).
  LogicalResult emitOverlapPV(tile::DotOp op);
  /// wgmma-overlap: the loop that takes over the pending P·V of loop `op` (the next loop, also
  /// overlapped, whose O starts from this loop's O and nothing but pure ops between), or null.
  scf::ForOp handoverTarget(scf::ForOp op, const Overlap &ov);
  /// wgmma-overlap: the last P·V of a loop after it (when it ran at all): O.
  SmallVector<Value> drainOverlap(Overlap &ov, ArrayRef<Value> o, ArrayRef<Value> p,
                                  Value v, Value any);
  /// The A fragments of a dot, a[(mt·K/16 + kt)·4 + i], when they are in registers (a loaded
  /// block read once, or a register tile packed pairwise); empty when they are read from
  /// shared memory at every k step.
  FailureOr<SmallVector<Value>> dotAFragments(tile::DotOp op, int64_t K);
  /// At the first load of a loop body, after its wait and barrier: the next iteration's loads
  /// into the other stage (overlapped: K_{j+1}, and V_j into this stage), one commit group.
  void issueNextLoads(Location loc);
  /// Orders the landed cp.async (generic proxy) writes before wgmma's (async proxy) reads.
  void fenceSharedForAsyncProxy(Location loc);
  LogicalResult emitReduce(tile::ReduceOp op);
  LogicalResult emitFor(scf::ForOp op);

  /// A tile of scaled scores `x = S·c` or `x = select(mask, S·c, -inf)` with `c` a splat scalar
  /// (tile-optimize's scale·log2e) and `product` the S·c tile.
  struct ScaledScores {
    Value scores, scale, mask, product;
  };
  std::optional<ScaledScores> matchScaledScores(Value x);
  /// The single-FFMA softmax (docs/dev/codegen-mma.md): for a match whose S is a register tile
  /// used only by S·c, replaces S's registers by T = (0 < c < inf) ? S : S·c (a uniform branch
  /// that does nothing on the fast side) and records k = (0 < c < inf) ? c : 1, so that
  /// S·c = T·k exactly on both sides; the row max is k·max(T) and exp2(S·c - m) is
  /// ex2(fma(T, k, -m)). Returns the match once that is in place.
  std::optional<ScaledScores> prepareScaled(Value x);
  /// T, or select(mask, T, -inf), per register of the Acc layout.
  FailureOr<SmallVector<Value>> maskedScores(const ScaledScores &m, Operation *user);
  /// The row reduction of Acc registers `in` of a tile of `slabs` 8-column slabs: the thread's
  /// registers of each row, then two quad shuffles.
  SmallVector<Value> reduceRows(ArrayRef<Value> in, int64_t slabs,
                                function_ref<Value(Value, Value)> combine);

  /// The registers of tile `v` in `layout`, computing index/element-wise tiles on demand.
  FailureOr<SmallVector<Value>> materialize(Value v, Layout layout, Operation *user);
  FailureOr<int64_t> regCount(RankedTensorType type, Layout layout, Operation *user);

  /// Issues cp.async for the block of `op` at row offset `row0` (i32) into its smem slot.
  void issueLoad(tile::LoadOp op, Value row0, Value col0, Value stage = {});
  /// Issues the loads of the loop body for iteration `iv` into the stage at `stage` bytes:
  /// every load, or with wgmma-overlap those the schedule does not defer (`deferred` false)
  /// or the deferred V (`deferred` true).
  void issueStreams(Value iv, Value stage, bool deferred = false);
  /// Byte offset of the already swizzled 16-byte chunk `swizzled` of row `row` of a tile of
  /// `cols` 16-bit columns at `base` (+ `stage`, the ring slot's offset, when given). With
  /// `slabBytes` (wgmma, d128: see slabBytes) chunks 8 and up are in the second slab.
  Value swizzledOffset(int64_t base, int64_t cols, Value row, Value swizzled, Value stage,
                       int64_t slabBytes = 0);
  /// The shared-memory address of the 16-byte chunk `chunk` of row `row` of a tile of `cols`
  /// 16-bit columns at `base` bytes (XOR swizzle of the chunk with row % 8).
  Value smemChunk(int64_t base, int64_t cols, Value row, Value chunk, Value stage = {},
                  int64_t slabBytes = 0);
  /// The byte offset (i32) of the ldmatrix row address of this lane inside a tile of `cols`
  /// 16-bit columns: matrix row `row8 + lane%8` (row8 = 0 or 8), chunk `chunkLo` (0 or 1) XOR
  /// the swizzle. Other k/n steps of the same lane are this offset XOR 32·step (chunk + 2·step)
  /// plus a constant row offset: see chunkStep and ldmatrixAt. It depends on the lane alone, so
  /// Q and V (the same matrix order) share it, and the tile's place (slot, stage, warp rows) is
  /// added after.
  Value ldmatrixLaneOffset(int64_t cols, Value row8, Value chunkLo);
  /// Bytes between two rows of a tile of `cols` 16-bit columns: the whole row (mma.sync), or
  /// one 128-byte slab row (wgmma: a [rows, 128] tile is two [rows, 64] slabs).
  int64_t rowBytes(int64_t cols) const { return wgmma ? 128 : cols * 2; }
  /// Bytes between the two 64-column slabs of the tile `p` (wgmma, 128 columns), else 0.
  int64_t slabBytes(const LoadPlan &p) const { return wgmma && p.cols > 64 ? p.rows * 128 : 0; }
  /// 16-column step `step` of a lane's ldmatrix address relative to step 0: {XOR, add} bytes.
  /// Chunk 2·step lies at XOR 32·step inside a 128-byte slab row; past 64 columns (wgmma), in
  /// the next slab.
  std::pair<int64_t, int64_t> chunkStep(const LoadPlan &p, int64_t step) const {
    if (!wgmma)
      return {32 * step, 0};
    return {32 * (step % 4), step / 4 * slabBytes(p)};
  }
  /// ldmatrix.x4 at `laneOffset` XOR `xorBytes`, plus `tileBytes` (where the tile starts, a
  /// multiple of the row bytes and of 128, uniform across the warp), plus `addBytes` (a whole
  /// number of 8-row groups, folded into the instruction's immediate offset).
  Value ldmatrixAt(Value laneOffset, int64_t xorBytes, Value tileBytes, int64_t addBytes,
                   bool transpose);
  Value ldmatrix4(Value addr, bool transpose);
  /// The A fragments (4 registers) of m tile `mt`, k step `kt` of a block in shared memory.
  SmallVector<Value> loadAFragments(const LoadPlan &p, int64_t mt, int64_t kt);
  /// Acc register `i` of a tile of `slabs` 8-column slabs: its Row and Col register.
  int64_t accRow(int64_t i, int64_t slabs) const { return i / (slabs * 4) * 2 + (i % 4) / 2; }
  int64_t accCol(int64_t i, int64_t slabs) const { return (i / 4) % slabs * 2 + i % 2; }
  Value packPair(Value lo, Value hi);
  Value fragmentOf(Value i32reg);

  Value ci32(int64_t v) {
    return arith::ConstantOp::create(b, b.getUnknownLoc(), b.getI32IntegerAttr(v));
  }
  Value ci64(int64_t v) {
    return arith::ConstantOp::create(b, b.getUnknownLoc(), b.getI64IntegerAttr(v));
  }
  Value toI64(Value v);
  Value toI32(Value v);

  gpu::GPUFuncOp kernel;
  LLVM::GlobalOp smemGlobal;
  OpBuilder b;

  // The class: query rows, element type of the operands.
  int64_t blockM = 0;
  int64_t numWarps = 0;
  /// 0 (choose), 16 or 32 query rows per warp.
  int64_t warpRowsOption = 0;
  /// sm_90a wgmma dots (16 rows per warp, 128-byte-swizzled slabs in shared memory).
  bool wgmma = false;
  /// wgmma-overlap (with wgmma): the overlapped schedule for the loops that have its shape.
  bool overlapOption = false;
  /// wgmma-overlap: what the loop just emitted hands to the next one.
  std::optional<Handover> handover;
  /// Query rows per warp (16 or 32) and m16 row tiles per warp (1 or 2).
  int64_t warpRows = 16, mTiles = 1;
  Type operandType;
  int64_t smemBytes = 0;
  /// Bytes of one stage of the loop-body loads (two stages: double buffering).
  int64_t streamStageBytes = 0;
  DenseMap<Operation *, LoadPlan> loads;

  // Thread coordinates (i32) and the shared-memory base.
  Value tid, lane, laneRow, quadCol2, rowBase, smemBase;
  /// The query rows of the thread's Row registers ([mt·2 + h] = row of (m tile, half)) and the
  /// first of the thread's two columns of every 8-column slab: computed where they are used,
  /// from the current thread index (see emitFor), not kept from the kernel's entry.
  SmallVector<Value> rowIndices();
  Value quadColumn();
  /// The same, computed at the kernel's entry: what the epilogue's stores use (measured: the
  /// register allocation of the loops is better with these than with ones from the last loop).
  SmallVector<Value, 4> entryRows;

  IRMapping scalars;
  DenseMap<Value, Desc> descs;
  DenseMap<Value, std::pair<Layout, SmallVector<Value>>> eager;
  /// A operands kept in registers for the whole kernel (Q when it fits), by load result.
  DenseMap<Value, SmallVector<Value>> aFragments;
  /// A operands read from shared memory at every k step of every dot (Q when it does not fit).
  DenseMap<Value, LoadPlan> aShared;
  SmallVector<DenseMap<std::pair<Value, int>, SmallVector<Value>>> lazy;
  /// S·c tiles of the single-FFMA softmax whose S registers hold T: S·c = T·k, by S·c.
  DenseMap<Value, Value> scaleFactor;
  LoopContext *loop = nullptr;
};

//===----------------------------------------------------------------------===//
// Planning: is the program in the class, and where does each load's block go?
//===----------------------------------------------------------------------===//

LogicalResult MmaKernelBuilder::plan(func::FuncOp program) {
  // The query block: the A operand of the first dot that comes from a load.
  tile::LoadOp queryLoad;
  program.walk([&](tile::DotOp dot) {
    if (!queryLoad)
      queryLoad = dot.getA().getDefiningOp<tile::LoadOp>();
  });
  if (!queryLoad)
    return program.emitOpError("has no tile.dot whose A operand is a tile.load: not the "
                               "attention class convert-tile-to-mma handles");
  auto qType = queryLoad.getResult().getType();
  blockM = qType.getShape()[0];
  operandType = qType.getElementType();
  if (!operandType.isF16() && !operandType.isBF16())
    return queryLoad.emitOpError("loads ") << operandType
           << ": convert-tile-to-mma needs f16 or bf16 operands";
  if (blockM != 64 && blockM != 128)
    return queryLoad.emitOpError("loads a block of ")
           << blockM << " rows: convert-tile-to-mma handles 64 or 128 (16 or 32 rows per warp)";
  // Rows per warp: 16 (one m16 tile) or 32 (two m16 tiles sharing every K/V ldmatrix, FA2's
  // d128 layout). Chosen: 32 for a 128-row block (4 warps), 16 otherwise.
  warpRows = warpRowsOption ? warpRowsOption : (blockM == 128 && !wgmma ? 32 : 16);
  if (warpRows != 16 && warpRows != 32)
    return program.emitOpError("asks for ")
           << warpRows << " rows per warp: convert-tile-to-mma handles 16 or 32";
  // wgmma: a warpgroup's m64 accumulator is four warps of 16 rows (one m16 tile each).
  if (wgmma && warpRows != 16)
    return program.emitOpError("asks for ")
           << warpRows << " rows per warp: codegen=wgmma runs 16 (a warpgroup of 4 warps per 64 "
           << "query rows)";
  mTiles = warpRows / 16;
  numWarps = blockM / warpRows;

  WalkResult walk = program.walk([&](Operation *op) -> WalkResult {
    if (isa<tile::SoftmaxOp>(op))
      return op->emitOpError("is a softmax: run tile-optimize (online softmax) first"),
             WalkResult::interrupt();
    if (isa<scf::IfOp, scf::WhileOp>(op))
      return op->emitOpError("is not supported by convert-tile-to-mma"), WalkResult::interrupt();
    if (auto forOp = dyn_cast<scf::ForOp>(op)) {
      if (forOp->getParentOfType<scf::ForOp>())
        return op->emitOpError("is a nested loop, which convert-tile-to-mma does not handle"),
               WalkResult::interrupt();
    }
    for (Type t : op->getResultTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!rt)
        continue;
      if (rt.getRank() == 2 && rt.getShape()[0] != blockM && rt.getShape()[0] != 1 &&
          !isa<tile::LoadOp, tile::TransOp>(op))
        return op->emitOpError("makes a tile of ")
                   << rt.getShape()[0] << " rows; convert-tile-to-mma keeps 2-D tiles of "
                   << blockM << " (query) rows in registers",
               WalkResult::interrupt();
      if (rt.getRank() > 2)
        return op->emitOpError("makes a tile of rank > 2"), WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();

  // Shared memory: the A blocks and loads outside loops get their own slots; the loads of a
  // loop body share slots by their position in the body (loops run one after the other).
  SmallVector<int64_t> streamSlotBytes;
  SmallVector<std::pair<Operation *, int>> streamUsers;
  int64_t offset = 0;
  WalkResult lw = program.walk([&](tile::LoadOp ld) -> WalkResult {
    auto type = ld.getResult().getType();
    if (type.getRank() != 2 || type.getElementType() != operandType)
      return ld.emitOpError("loads ") << type
                 << ": convert-tile-to-mma loads 2-D " << operandType << " blocks (dot operands)",
             WalkResult::interrupt();
    LoadPlan p;
    p.rows = type.getShape()[0];
    p.cols = type.getShape()[1];
    if (p.cols != 64 && p.cols != 128)
      return ld.emitOpError("loads a block of ")
                 << p.cols << " columns: convert-tile-to-mma handles head dims 64 and 128",
             WalkResult::interrupt();
    if (p.rows % 16 != 0 || (p.rows * p.cols / 8) % numThreads() != 0)
      return ld.emitOpError("loads a block of ") << p.rows << " rows that the "
                 << numThreads() << " threads cannot split into whole 16-byte chunks",
             WalkResult::interrupt();
    Value result = ld.getResult();
    auto isDotA = [&](OpOperand &use) {
      auto dot = dyn_cast<tile::DotOp>(use.getOwner());
      return dot && use.getOperandNumber() == 0;
    };
    auto isDotB = [&](OpOperand &use) {
      auto dot = dyn_cast<tile::DotOp>(use.getOwner());
      return dot && use.getOperandNumber() == 1;
    };
    if (!result.use_empty() && llvm::all_of(result.getUses(), isDotA)) {
      p.role = LoadRole::A;
      if (p.rows != blockM || ld->getParentOfType<scf::ForOp>())
        return ld.emitOpError("is an A operand inside a loop or of another height than the "
                              "query block"),
               WalkResult::interrupt();
    } else if (!result.use_empty() && llvm::all_of(result.getUses(), isDotB)) {
      p.role = LoadRole::B;
    } else if (result.hasOneUse() && isa<tile::TransOp>(*result.getUsers().begin()) &&
               !result.getUsers().begin()->getResult(0).use_empty() &&
               llvm::all_of(result.getUsers().begin()->getResult(0).getUses(), isDotB)) {
      p.role = LoadRole::BTransposed;
    } else {
      return ld.emitOpError("feeds something other than tile.dot operands, which "
                            "convert-tile-to-mma does not handle"),
             WalkResult::interrupt();
    }
    int64_t bytes = p.rows * p.cols * 2;
    if (auto forOp = dyn_cast<scf::ForOp>(ld->getParentOp())) {
      for (Value o : ld.getOffsets())
        if (o != forOp.getInductionVar() && !forOp.isDefinedOutsideOfLoop(o))
          return ld.emitOpError("has offsets that are neither the loop's induction variable "
                                "nor loop-invariant: convert-tile-to-mma cannot pipeline it"),
                 WalkResult::interrupt();
      int index = 0;
      for (Operation &o : forOp.getBody()->without_terminator()) {
        if (&o == ld.getOperation())
          break;
        if (isa<tile::LoadOp>(o))
          ++index;
      }
      p.streamIndex = index;
      if (static_cast<int>(streamSlotBytes.size()) <= index)
        streamSlotBytes.resize(index + 1, 0);
      streamSlotBytes[index] = std::max(streamSlotBytes[index], bytes);
      streamUsers.push_back({ld.getOperation(), index});
    } else if (!isa<func::FuncOp>(ld->getParentOp())) {
      return ld.emitOpError("is nested in a region convert-tile-to-mma does not handle"),
             WalkResult::interrupt();
    } else {
      p.smemOffset = offset;
      offset += bytes;
    }
    loads[ld.getOperation()] = p;
    return WalkResult::advance();
  });
  if (lw.wasInterrupted())
    return failure();
  SmallVector<int64_t> slotOffset;
  // wgmma: every load outside the loops is an A block (Q) read into registers right after it
  // lands (16 rows per warp: at most 32 registers), and a loop's prologue passes a barrier
  // before it issues anything, so the loops' stages may reuse those slots: d128 64×64 needs
  // 64 KiB instead of 80 (three CTAs per SM instead of two).
  bool onlyResidentA = llvm::all_of(loads, [](auto &entry) {
    return entry.second.streamIndex >= 0 || entry.second.role == LoadRole::A;
  });
  int64_t streamStart = wgmma && onlyResidentA ? 0 : offset;
  int64_t end = streamStart;
  for (int64_t bytes : streamSlotBytes) {
    slotOffset.push_back(end);
    end += bytes;
  }
  for (auto [op, index] : streamUsers)
    loads[op].smemOffset = slotOffset[index];
  // Two stages of the loop-body loads: iteration j reads one while j+1's land in the other.
  streamStageBytes = end - streamStart;
  smemBytes = std::max(offset, end + streamStageBytes);
  return success();
}

//===----------------------------------------------------------------------===//
// Helpers
//===----------------------------------------------------------------------===//

Value MmaKernelBuilder::toI64(Value v) {
  return tessel::conversion::toI64(b, b.getUnknownLoc(), v);
}

Value MmaKernelBuilder::toI32(Value v) {
  Location loc = b.getUnknownLoc();
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  if (v.getType().getIntOrFloatBitWidth() > 32)
    return arith::TruncIOp::create(b, loc, b.getI32Type(), v);
  return v;
}

Value MmaKernelBuilder::smemChunk(int64_t base, int64_t cols, Value row, Value chunk,
                                  Value stage, int64_t slabBytes) {
  Location loc = b.getUnknownLoc();
  Value swz = arith::XOrIOp::create(b, loc, chunk, arith::AndIOp::create(b, loc, row, ci32(7)));
  Value bytes = swizzledOffset(base, cols, row, swz, stage, slabBytes);
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{bytes});
}

Value MmaKernelBuilder::ldmatrixLaneOffset(int64_t cols, Value row8, Value chunkLo) {
  // The tile starts at a multiple of 2·cols bytes (slots and stages are whole tiles), so bits
  // 4 and up of a row's bytes below 2·cols are the swizzled chunk alone: chunk c + 2·step of the
  // lane's row sits at (offset of chunk c) XOR 32·step, as (c + 2·step) XOR r = (c XOR r) XOR
  // 2·step for c < 2. One XOR per ldmatrix instead of a full address, and one live register
  // per operand and lane instead of one per k step. The XOR touches bits below 2·cols only, so
  // it commutes with adding the tile's start: (L + t) XOR x = (L XOR x) + t. The start (slot,
  // stage, the warp's first row) is uniform and ptxas adds it in the ldmatrix's address
  // ([R + UR + imm]): one lane register for Q and V together (the same matrix order), one for K.
  Location loc = b.getUnknownLoc();
  Value lane7 = arith::AndIOp::create(b, loc, lane, ci32(7));
  Value row = arith::AddIOp::create(b, loc, row8, lane7);
  Value swz = arith::XOrIOp::create(b, loc, chunkLo, lane7);
  return swizzledOffset(0, cols, row, swz, Value());
}

Value MmaKernelBuilder::swizzledOffset(int64_t base, int64_t cols, Value row, Value swizzled,
                                       Value stage, int64_t slabBytes) {
  Location loc = b.getUnknownLoc();
  Value chunkBytes = arith::MulIOp::create(b, loc, swizzled, ci32(16));
  if (slabBytes) {
    // wgmma's 128-byte-swizzle canonical layout: 64-column slabs of 128-byte rows one after
    // the other; the XOR keeps bit 3 of the chunk, which is the slab.
    Value slab = arith::ShRUIOp::create(b, loc, swizzled, ci32(3));
    chunkBytes = arith::AddIOp::create(
        b, loc, arith::MulIOp::create(b, loc, slab, ci32(slabBytes)),
        arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, swizzled, ci32(7)),
                              ci32(16)));
  }
  Value bytes = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, row, ci32(rowBytes(cols))), chunkBytes);
  bytes = arith::AddIOp::create(b, loc, bytes, ci32(base));
  if (stage)
    bytes = arith::AddIOp::create(b, loc, bytes, stage);
  return bytes;
}

Value MmaKernelBuilder::ldmatrixAt(Value laneOffset, int64_t xorBytes, Value tileBytes,
                                   int64_t addBytes, bool transpose) {
  Location loc = b.getUnknownLoc();
  Value bytes = xorBytes ? Value(arith::XOrIOp::create(b, loc, laneOffset, ci32(xorBytes)))
                         : laneOffset;
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value addr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{tileBytes});
  addr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), addr, ValueRange{bytes});
  if (addBytes)
    addr = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), addr,
                               ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(addBytes)});
  return ldmatrix4(addr, transpose);
}

Value MmaKernelBuilder::ldmatrix4(Value addr, bool transpose) {
  Location loc = b.getUnknownLoc();
  Type i32 = b.getI32Type();
  auto structType = LLVM::LLVMStructType::getLiteral(b.getContext(), {i32, i32, i32, i32});
  return NVVM::LdMatrixOp::create(
      b, loc, structType, addr, 4, transpose ? NVVM::MMALayout::col : NVVM::MMALayout::row,
      NVVM::LdStMatrixShapeAttr::get(b.getContext(), 8, 8), NVVM::LdStMatrixEltType::B16);
}

/// An i32 register from ldmatrix as an mma operand: vector<2xf16> for f16, i32 for bf16.
Value MmaKernelBuilder::fragmentOf(Value reg) {
  if (operandType.isBF16())
    return reg;
  return LLVM::BitcastOp::create(b, b.getUnknownLoc(),
                                 VectorType::get({2}, operandType), reg);
}

/// Two 16-bit scalars as one mma operand register (lo in the low half).
Value MmaKernelBuilder::packPair(Value lo, Value hi) {
  Location loc = b.getUnknownLoc();
  auto vt = VectorType::get({2}, operandType);
  Value v = LLVM::PoisonOp::create(b, loc, vt);
  v = LLVM::InsertElementOp::create(b, loc, v, lo, ci32(0));
  v = LLVM::InsertElementOp::create(b, loc, v, hi, ci32(1));
  if (operandType.isBF16())
    return LLVM::BitcastOp::create(b, loc, b.getI32Type(), v);
  return v;
}

//===----------------------------------------------------------------------===//
// Registers of a tile value
//===----------------------------------------------------------------------===//

FailureOr<int64_t> MmaKernelBuilder::regCount(RankedTensorType type, Layout layout,
                                              Operation *user) {
  ArrayRef<int64_t> s = type.getShape();
  switch (layout) {
  case Layout::Acc:
    if (type.getRank() == 2 && s[0] == blockM && s[1] % 8 == 0)
      return mTiles * (s[1] / 8 * 4);
    break;
  case Layout::Row:
    if ((type.getRank() == 1 && s[0] == blockM) ||
        (type.getRank() == 2 && s[0] == blockM && s[1] == 1))
      return 2 * mTiles;
    break;
  case Layout::Col: {
    int64_t n = type.getRank() == 1 ? s[0] : (s[0] == 1 ? s[1] : -1);
    if (n > 0 && n % 8 == 0)
      return n / 8 * 2;
    break;
  }
  }
  return user->emitOpError("uses a tile of type ")
         << type << " in a way convert-tile-to-mma cannot place in registers";
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::materialize(Value v, Layout layout,
                                                            Operation *user) {
  auto type = cast<RankedTensorType>(v.getType());
  auto e = eager.find(v);
  if (e != eager.end()) {
    if (e->second.first != layout)
      return user->emitOpError("needs a register tile in another layout than the one it has");
    return e->second.second;
  }
  std::pair<Value, int> key{v, static_cast<int>(layout)};
  for (auto &scope : llvm::reverse(lazy)) {
    auto it = scope.find(key);
    if (it != scope.end())
      return it->second;
  }
  FailureOr<int64_t> n = regCount(type, layout, user);
  if (failed(n))
    return failure();
  Operation *def = v.getDefiningOp();
  if (!def)
    return user->emitOpError("reads a tile block argument convert-tile-to-mma did not place");
  Location loc = def->getLoc();
  SmallVector<Value> regs;
  if (auto splat = dyn_cast<tile::SplatOp>(def)) {
    regs.assign(*n, scalars.lookup(splat.getValue()));
  } else if (auto cst = dyn_cast<arith::ConstantOp>(def)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!dense || !dense.isSplat())
      return def->emitOpError("is a non-splat tile constant (convert-tile-to-mma)");
    Value s = arith::ConstantOp::create(b, loc, cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    regs.assign(*n, s);
  } else if (isa<tile::IotaOp>(def)) {
    if (layout == Layout::Row) {
      regs = rowIndices();
    } else if (layout == Layout::Col) {
      for (int64_t i = 0; i < *n; ++i)
        regs.push_back(arith::AddIOp::create(b, loc, quadColumn(), ci32((i / 2) * 8 + (i % 2))));
    } else {
      return def->emitOpError("is an iota used as a 2-D tile");
    }
  } else if (auto ed = dyn_cast<tile::ExpandDimsOp>(def)) {
    Layout want = ed.getAxis() == 1 ? Layout::Row : Layout::Col;
    if (want != layout)
      return user->emitOpError("uses an expand_dims along the other axis than it broadcasts");
    FailureOr<SmallVector<Value>> in = materialize(ed.getInput(), layout, def);
    if (failed(in))
      return failure();
    regs = *in;
  } else if (auto bc = dyn_cast<tile::BroadcastOp>(def)) {
    auto inType = cast<RankedTensorType>(bc.getInput().getType());
    if (inType.getShape() == type.getShape()) {
      FailureOr<SmallVector<Value>> in = materialize(bc.getInput(), layout, def);
      if (failed(in))
        return failure();
      regs = *in;
    } else if (layout == Layout::Acc && inType.getShape()[1] == 1) {
      FailureOr<SmallVector<Value>> in = materialize(bc.getInput(), Layout::Row, def);
      if (failed(in))
        return failure();
      for (int64_t i = 0; i < *n; ++i)
        regs.push_back((*in)[accRow(i, type.getShape()[1] / 8)]);
    } else if (layout == Layout::Acc && inType.getShape()[0] == 1) {
      FailureOr<SmallVector<Value>> in = materialize(bc.getInput(), Layout::Col, def);
      if (failed(in))
        return failure();
      for (int64_t i = 0; i < *n; ++i)
        regs.push_back((*in)[accCol(i, type.getShape()[1] / 8)]);
    } else {
      return def->emitOpError("is a broadcast convert-tile-to-mma cannot place in registers");
    }
  } else if (auto div = dyn_cast<arith::DivFOp>(def);
             div && layout == Layout::Acc && isRowBroadcast(div.getRhs())) {
    // x / broadcast(l): one reciprocal per row (two per thread), then a multiply per element
    // (the epilogue's acc / l), instead of an IEEE division per element.
    FailureOr<SmallVector<Value>> num = materialize(div.getLhs(), Layout::Acc, def);
    if (failed(num))
      return failure();
    FailureOr<SmallVector<Value>> den = materialize(
        div.getRhs().getDefiningOp<tile::BroadcastOp>().getInput(), Layout::Row, def);
    if (failed(den))
      return failure();
    Value one = arith::ConstantOp::create(b, loc, b.getFloatAttr(type.getElementType(), 1.0));
    SmallVector<Value> inv;
    for (Value d : *den)
      inv.push_back(arith::DivFOp::create(b, loc, one, d));
    for (int64_t i = 0; i < *n; ++i)
      regs.push_back(
          arith::MulFOp::create(b, loc, (*num)[i], inv[accRow(i, type.getShape()[1] / 8)]));
  } else if (auto sub = isa<math::Exp2Op>(def) && layout == Layout::Acc
                            ? def->getOperand(0).getDefiningOp<arith::SubFOp>()
                            : arith::SubFOp();
             sub && isRowBroadcast(sub.getRhs()) && prepareScaled(sub.getLhs())) {
    // exp2(S·c - m) with a row-broadcast m: one FFMA per element, ex2(fma(T, k, -m)).
    ScaledScores m = *prepareScaled(sub.getLhs());
    FailureOr<SmallVector<Value>> rows = materialize(
        sub.getRhs().getDefiningOp<tile::BroadcastOp>().getInput(), Layout::Row, def);
    FailureOr<SmallVector<Value>> x = maskedScores(m, def);
    if (failed(rows) || failed(x))
      return failure();
    Value k = scaleFactor.lookup(m.product);
    int64_t slabs = type.getShape()[1] / 8;
    for (int64_t i = 0; i < *n; ++i) {
      Value negM = arith::NegFOp::create(b, loc, (*rows)[accRow(i, slabs)]);
      regs.push_back(approxEx2(b, loc, LLVM::FMAOp::create(b, loc, (*x)[i], k, negM), /*ftz=*/true));
    }
  } else if (auto mul = dyn_cast<arith::MulFOp>(def);
             mul && layout == Layout::Acc && v.hasOneUse() &&
             isa<tile::DotOp>(*v.getUsers().begin()) && isRowBroadcast(mul.getRhs()) &&
             eager.count(mul.getLhs())) {
    // The accumulator rescale O·alpha of the online softmax, skipped by the whole warp when
    // every alpha of its rows is exactly 1 (no row max moved: most iterations once the maxima
    // have settled): O·1 = O, so the skip is exact. A warp-uniform branch (vote.any).
    FailureOr<SmallVector<Value>> acc = materialize(mul.getLhs(), Layout::Acc, def);
    FailureOr<SmallVector<Value>> alpha = materialize(
        mul.getRhs().getDefiningOp<tile::BroadcastOp>().getInput(), Layout::Row, def);
    if (failed(acc) || failed(alpha))
      return failure();
    Value one = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(1.0f));
    Value moved;
    for (Value a : *alpha) {
      Value ne = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::UNE, a, one);
      moved = moved ? Value(arith::OrIOp::create(b, loc, moved, ne)) : ne;
    }
    Value any = NVVM::VoteSyncOp::create(b, loc, b.getI1Type(), ci32(-1), moved,
                                         NVVM::VoteSyncKind::any);
    int64_t slabs = type.getShape()[1] / 8;
    SmallVector<Type> types(*n, b.getF32Type());
    auto ifOp = scf::IfOp::create(b, loc, types, any, /*withElseRegion=*/true);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      SmallVector<Value> scaled;
      for (int64_t i = 0; i < *n; ++i)
        scaled.push_back(
            arith::MulFOp::create(b, loc, (*acc)[i], (*alpha)[accRow(i, slabs)]));
      scf::YieldOp::create(b, loc, scaled);
      b.setInsertionPointToStart(ifOp.elseBlock());
      scf::YieldOp::create(b, loc, *acc);
    }
    regs.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  } else if (auto mul = dyn_cast<arith::MulFOp>(def); mul && scaleFactor.count(v)) {
    // S·c for another consumer: T·k (the same value bit for bit).
    FailureOr<SmallVector<Value>> t = materialize(
        matchScaledScores(v)->scores, layout, def);
    if (failed(t))
      return failure();
    Value k = scaleFactor.lookup(v);
    for (Value x : *t)
      regs.push_back(arith::MulFOp::create(b, loc, x, k));
  } else if (def->getDialect() &&
             isa<arith::ArithDialect, math::MathDialect>(def->getDialect()) &&
             def->getNumRegions() == 0) {
    SmallVector<SmallVector<Value>> ins;
    for (Value o : def->getOperands()) {
      if (isTensor(o.getType())) {
        FailureOr<SmallVector<Value>> in = materialize(o, layout, def);
        if (failed(in))
          return failure();
        ins.push_back(*in);
      } else {
        ins.push_back(SmallVector<Value>(*n, scalars.lookup(o)));
      }
    }
    if (def->getNumResults() != 1)
      return def->emitOpError("has several results (convert-tile-to-mma)");
    Type elem = type.getElementType();
    for (int64_t i = 0; i < *n; ++i) {
      SmallVector<Value> operands;
      for (auto &in : ins)
        operands.push_back(in[i]);
      regs.push_back(tessel::conversion::emitScalarOp(b, def, operands, TypeRange{elem}, /*ftz=*/true)[0]);
    }
  } else {
    return def->emitOpError("makes a tile convert-tile-to-mma cannot compute in registers");
  }
  lazy.back()[key] = regs;
  return regs;
}

//===----------------------------------------------------------------------===//
// Kernel body
//===----------------------------------------------------------------------===//

SmallVector<Value> MmaKernelBuilder::rowIndices() {
  Location loc = b.getUnknownLoc();
  Value t = tid;
  Value row0 = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, arith::ShRUIOp::create(b, loc, t, ci32(5)),
                                    ci32(warpRows)),
      arith::ShRUIOp::create(b, loc, arith::AndIOp::create(b, loc, t, ci32(31)), ci32(2)));
  SmallVector<Value> rows;
  for (int64_t i = 0; i < 2 * mTiles; ++i)
    rows.push_back(i == 0 ? row0 : Value(arith::AddIOp::create(b, loc, row0, ci32(8 * i))));
  return rows;
}

Value MmaKernelBuilder::quadColumn() {
  Location loc = b.getUnknownLoc();
  return arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, tid, ci32(3)), ci32(2));
}

LogicalResult MmaKernelBuilder::build(func::FuncOp program) {
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  Location loc = program.getLoc();
  lazy.emplace_back();
  tid = toI32(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  lane = arith::AndIOp::create(b, loc, tid, ci32(31));
  // The warp index through a shuffle from lane 0: the same value, but ptxas then knows it is
  // uniform across the warp and keeps what derives from it (the warp's first row, the start of
  // its Q rows in shared memory) in uniform registers.
  Value warp = NVVM::ShflOp::create(b, loc, b.getI32Type(), ci32(-1),
                                    arith::ShRUIOp::create(b, loc, tid, ci32(5)), ci32(0),
                                    ci32(31), NVVM::ShflKind::idx, UnitAttr());
  laneRow = arith::ShRUIOp::create(b, loc, lane, ci32(2));
  quadCol2 = arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, lane, ci32(3)), ci32(2));
  rowBase = arith::MulIOp::create(b, loc, warp, ci32(warpRows));
  Value row0 = arith::AddIOp::create(b, loc, rowBase, laneRow);
  for (int64_t i = 0; i < 2 * mTiles; ++i)
    entryRows.push_back(i == 0 ? row0
                               : Value(arith::AddIOp::create(b, loc, row0, ci32(8 * i))));
  smemBase = LLVM::AddressOfOp::create(b, loc, smemGlobal);
  for (auto [src, dst] : llvm::zip(program.getArguments(), entry.getArguments()))
    scalars.map(src, dst);
  if (failed(emitBlock(program.getBody().front())))
    return failure();
  gpu::ReturnOp::create(b, loc);
  return success();
}

LogicalResult MmaKernelBuilder::emitBlock(Block &block) {
  for (Operation &op : block.without_terminator())
    if (failed(emitOp(&op)))
      return failure();
  return success();
}

LogicalResult MmaKernelBuilder::emitOp(Operation *op) {
  if (Value v = tessel::conversion::emitGridQuery(b, op)) {
    scalars.map(op->getResult(0), v);
    return success();
  }
  if (auto md = dyn_cast<tile::MakeDescOp>(op)) {
    descs[md.getResult()] = tessel::conversion::lowerMakeDesc(b, md, scalars);
    return success();
  }
  if (auto ld = dyn_cast<tile::LoadOp>(op))
    return emitLoad(ld);
  if (auto st = dyn_cast<tile::StoreOp>(op))
    return emitStore(st);
  if (auto dot = dyn_cast<tile::DotOp>(op))
    return emitDot(dot);
  if (auto red = dyn_cast<tile::ReduceOp>(op))
    return emitReduce(red);
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  // Tile-valued pure ops are computed where a consumer needs them, in its layout.
  if (llvm::any_of(op->getResultTypes(), isTensor)) {
    if (isa<tile::SplatOp, tile::IotaOp, tile::ExpandDimsOp, tile::BroadcastOp, tile::TransOp,
            arith::ConstantOp>(op))
      return success();
    Dialect *dialect = op->getDialect();
    if (dialect && isa<arith::ArithDialect, math::MathDialect>(dialect) &&
        op->getNumRegions() == 0)
      return success();
    return op->emitOpError("is not supported by convert-tile-to-mma");
  }
  Dialect *dialect = op->getDialect();
  bool scalarOp = dialect && isa<arith::ArithDialect, math::MathDialect>(dialect) &&
                  op->getNumRegions() == 0 && !llvm::any_of(op->getOperandTypes(), isTensor);
  if (!scalarOp)
    return op->emitOpError("is not supported by convert-tile-to-mma");
  SmallVector<Value> operands;
  for (Value v : op->getOperands())
    operands.push_back(scalars.lookup(v));
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    scalars.map(cst.getResult(), b.clone(*op)->getResult(0));
    return success();
  }
  SmallVector<Value> results = tessel::conversion::emitScalarOp(b, op, operands, op->getResultTypes(),
                                                                /*ftz=*/true);
  for (auto [src, dst] : llvm::zip(op->getResults(), results))
    scalars.map(src, dst);
  return success();
}

void MmaKernelBuilder::issueLoad(tile::LoadOp op, Value row0, Value col0, Value stage) {
  Location loc = op.getLoc();
  const LoadPlan &p = loads[op.getOperation()];
  const Desc &d = descs[op.getDesc()];
  // Thread t copies chunk t % cpr of rows t / cpr + i·rps (rps = threads / cpr rows per step):
  // the chunk and the row's swizzle bits are the same for every step when rps is a multiple of
  // 8, so one shared and one global address per thread serve every step with constant offsets.
  int64_t chunksPerRow = p.cols / 8;
  int64_t rowsPerStep = numThreads() / chunksPerRow;
  int64_t steps = p.rows / rowsPerStep;
  int64_t rowStride =
      constantOf(op.getDesc().getDefiningOp<tile::MakeDescOp>().getStrides()[0]);
  Value r0 = toI64(row0), c0 = toI64(col0);
  Value zero = ci64(0);
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) -> Value {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  auto andi = [&](Value x, Value y) -> Value { return arith::AndIOp::create(b, loc, x, y); };
  auto gep1 = [&](Value base, Value elems) -> Value {
    return LLVM::GEPOp::create(b, loc, ptr1, d.elementType, base, ValueRange{elems});
  };
  Value rowT = arith::DivUIOp::create(b, loc, tid, ci32(chunksPerRow));
  Value chunk = arith::RemUIOp::create(b, loc, tid, ci32(chunksPerRow));
  // The block's first element (uniform: the same for every thread, so ptxas keeps it in uniform
  // registers) and the thread's element offset inside the block (loop-invariant, the same for
  // every load of the same row stride: K and V share it). Two live values instead of one 64-bit
  // address per load that LLVM would strength-reduce into a loop-carried pointer per load.
  Value blockElem = arith::AddIOp::create(
      b, loc, d.offset,
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, r0, d.strides[0]),
                            arith::MulIOp::create(b, loc, c0, d.strides[1])));
  Value threadElem = arith::AddIOp::create(
      b, loc, arith::MulIOp::create(b, loc, rowT, ci32(rowStride)),
      arith::MulIOp::create(b, loc, chunk, ci32(8)));
  Value src0 = gep1(gep1(d.base, blockElem), arith::ExtUIOp::create(b, loc, b.getI64Type(),
                                                                   threadElem));
  bool sameSwizzle = rowsPerStep % 8 == 0;
  Value dst0 = smemChunk(p.smemOffset, p.cols, rowT, chunk, stage, slabBytes(p));
  auto dstAt = [&](int64_t i) -> Value {
    if (i == 0)
      return dst0;
    if (sameSwizzle)
      return LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), dst0,
                                 ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i * rowsPerStep * rowBytes(p.cols))});
    Value row = arith::AddIOp::create(b, loc, rowT, ci32(i * rowsPerStep));
    return smemChunk(p.smemOffset, p.cols, row, chunk, stage, slabBytes(p));
  };
  auto srcAt = [&](int64_t i) -> Value {
    if (i == 0)
      return src0;
    return LLVM::GEPOp::create(b, loc, ptr1, d.elementType, src0,
                               ArrayRef<LLVM::GEPArg>{static_cast<int32_t>(i * rowsPerStep * rowStride)});
  };
  // The whole block inside the tensor (every block but the last of a ragged loop): plain copies.
  // A uniform condition (rows and columns of the block, not of the thread's chunk), so the
  // branch is uniform.
  Value full = andi(andi(cmp(arith::CmpIPredicate::sge, r0, zero),
                         cmp(arith::CmpIPredicate::sle,
                             arith::AddIOp::create(b, loc, r0, ci64(p.rows)), d.shape[0])),
                    andi(cmp(arith::CmpIPredicate::sge, c0, zero),
                         cmp(arith::CmpIPredicate::sle,
                             arith::AddIOp::create(b, loc, c0, ci64(p.cols)), d.shape[1])));
  auto ifOp = scf::IfOp::create(b, loc, full, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  for (int64_t i = 0; i < steps; ++i)
    NVVM::CpAsyncOp::create(b, loc, dstAt(i), srcAt(i), 16, NVVM::LoadCacheModifierKind::CG,
                            Value());
  // Otherwise each chunk is checked; out of bounds it reads nothing (src-size 0 zero-fills)
  // from an address that is valid (the descriptor's base). Everything here is computed inside
  // the branch, in 32 bits where it can be: the block's rows inside the tensor are the local
  // rows x with lo <= x < hi (lo, hi clamped to [0, rows], uniform).
  b.setInsertionPointToStart(ifOp.elseBlock());
  auto clampRows = [&](Value v) -> Value {
    Value c = arith::MinSIOp::create(b, loc, arith::MaxSIOp::create(b, loc, v, zero),
                                     ci64(p.rows));
    return arith::TruncIOp::create(b, loc, b.getI32Type(), c);
  };
  Value lo = clampRows(arith::SubIOp::create(b, loc, zero, r0));
  Value hi = clampRows(arith::SubIOp::create(b, loc, d.shape[0], r0));
  Value gcol = arith::AddIOp::create(b, loc, c0,
                                     toI64(arith::MulIOp::create(b, loc, chunk, ci32(8))));
  Value colIn = andi(cmp(arith::CmpIPredicate::sge, gcol, zero),
                     cmp(arith::CmpIPredicate::sle,
                         arith::AddIOp::create(b, loc, gcol, ci64(8)), d.shape[1]));
  Value origin = gep1(d.base, d.offset);
  // Step i of the thread (row rowT + i·rps) is inside iff first <= i < end, with
  // first = ceil((lo - rowT) / rps), end = ceil((hi - rowT) / rps): two values per block, and
  // per step a compare with a constant. (Written as rowT + i·rps against lo and hi, LLVM
  // hoists the thread's rows out of the loop: one loop-invariant register per step.)
  Value first = arith::CeilDivSIOp::create(b, loc, arith::SubIOp::create(b, loc, lo, rowT),
                                           ci32(rowsPerStep));
  Value end = arith::CeilDivSIOp::create(b, loc, arith::SubIOp::create(b, loc, hi, rowT),
                                         ci32(rowsPerStep));
  for (int64_t i = 0; i < steps; ++i) {
    Value in = andi(andi(cmp(arith::CmpIPredicate::sle, first, ci32(i)),
                         cmp(arith::CmpIPredicate::sgt, end, ci32(i))),
                    colIn);
    Value src = arith::SelectOp::create(b, loc, in, srcAt(i), origin);
    Value srcBytes = arith::SelectOp::create(b, loc, in, ci32(16), ci32(0));
    NVVM::CpAsyncOp::create(b, loc, dstAt(i), src, 16, NVVM::LoadCacheModifierKind::CG,
                            srcBytes);
  }
}

LogicalResult MmaKernelBuilder::emitLoad(tile::LoadOp op) {
  Location loc = op.getLoc();
  if (!descs.count(op.getDesc()))
    return op.emitOpError("reads a descriptor convert-tile-to-mma cannot trace to make_desc");
  const Desc &d = descs[op.getDesc()];
  // The inner dimension must be contiguous and rows 16-byte aligned for cp.async.
  int64_t innerStride = constantOf(op.getDesc().getDefiningOp<tile::MakeDescOp>().getStrides()[1]);
  int64_t rowStride = constantOf(op.getDesc().getDefiningOp<tile::MakeDescOp>().getStrides()[0]);
  if (innerStride != 1 || rowStride == INT64_MIN || rowStride % 8 != 0)
    return op.emitOpError("reads a descriptor whose strides are not [8k (constant), 1]: "
                          "convert-tile-to-mma copies 16-byte chunks");
  (void)d;
  const LoadPlan &p = loads[op.getOperation()];
  if (p.streamIndex < 0) {
    issueLoad(op, scalars.lookup(op.getOffsets()[0]), scalars.lookup(op.getOffsets()[1]));
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
    if (wgmma && p.role != LoadRole::A)
      fenceSharedForAsyncProxy(loc);
    gpu::BarrierOp::create(b, loc);
    if (p.role == LoadRole::A) {
      // A fragments for every m tile and 16-column step, kept in registers when they take at
      // most 32 (d64, or d128 with one m tile per warp); else each dot reads them from shared
      // memory at every k step (d128 with two m tiles: 64 registers would not fit beside the
      // 128 of the accumulator and the 64 of the scores).
      if (mTiles * (p.cols / 16) * 4 > 32) {
        aShared[op.getResult()] = p;
        return success();
      }
      SmallVector<Value> frags;
      for (int64_t mt = 0; mt < mTiles; ++mt)
        for (int64_t kt = 0; kt < p.cols / 16; ++kt)
          llvm::append_range(frags, loadAFragments(p, mt, kt));
      aFragments[op.getResult()] = frags;
    }
    return success();
  }
  // A load of a loop body: its block (all of the body's loads, one commit group) was issued
  // one iteration earlier, or by the prologue, into this iteration's stage. At the first load
  // of the body: wait for it; the barrier makes it visible to every warp and proves every warp
  // finished the previous iteration, which read the other stage; then issue the next
  // iteration's loads into that stage, so they land while this iteration computes. One wait
  // and one barrier per iteration; the other loads of the body find their blocks in place.
  if (p.streamIndex != 0)
    return success();
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  if (wgmma)
    fenceSharedForAsyncProxy(loc);
  gpu::BarrierOp::create(b, loc);
  // Overlapped: the issue comes after the iteration's wgmmas (issueNextLoads from
  // emitOverlapS), so that the tensor cores start right after the barrier.
  if (loop->overlap)
    return success();
  issueNextLoads(loc);
  return success();
}

void MmaKernelBuilder::issueNextLoads(Location loc) {
  LoopContext &l = *loop;
  Value nextIv = arith::AddIOp::create(b, loc, l.iv, l.step);
  Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, nextIv, l.ub);
  {
    auto ifOp = scf::IfOp::create(b, loc, more, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    issueStreams(nextIv, arith::SubIOp::create(b, loc, ci32(streamStageBytes), l.stage));
  }
  // Overlapped: V_j goes into this iteration's stage now, read by P_j·V_j in the next
  // iteration. The slot's last reader, P_{j-2}·V_{j-2}, was waited for (wait_group 0) in
  // iteration j-1, before every warp passed the barrier above.
  if (l.overlap)
    issueStreams(l.iv, l.stage, /*deferred=*/true);
  NVVM::CpAsyncCommitGroupOp::create(b, loc);
}

SmallVector<Value> MmaKernelBuilder::loadAFragments(const LoadPlan &p, int64_t mt, int64_t kt) {
  // Matrix q = lane/8 of the ldmatrix.x4 holds rows +8·(q&1) and columns +8·(q>>1) of the
  // 16×16 slab of m tile mt at k step kt.
  Location loc = b.getUnknownLoc();
  Value q = arith::ShRUIOp::create(b, loc, lane, ci32(3));
  Value row8 = arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, q, ci32(1)), ci32(8));
  Value laneOffset =
      ldmatrixLaneOffset(p.cols, row8, arith::ShRUIOp::create(b, loc, q, ci32(1)));
  Value tile = arith::AddIOp::create(
      b, loc, ci32(p.smemOffset), arith::MulIOp::create(b, loc, rowBase, ci32(rowBytes(p.cols))));
  auto [xorBytes, addBytes] = chunkStep(p, kt);
  Value x4 = ldmatrixAt(laneOffset, xorBytes, tile, 16 * mt * rowBytes(p.cols) + addBytes, false);
  SmallVector<Value> frags;
  for (int64_t i = 0; i < 4; ++i)
    frags.push_back(fragmentOf(LLVM::ExtractValueOp::create(b, loc, x4, i)));
  return frags;
}

void MmaKernelBuilder::issueStreams(Value iv, Value stage, bool deferred) {
  LoopContext &l = *loop;
  for (tile::LoadOp ld : l.streams) {
    if ((l.overlap && ld == l.overlap->vLoad) != deferred)
      continue;
    SmallVector<Value> offs;
    for (Value o : ld.getOffsets())
      offs.push_back(o == l.source.getInductionVar() ? iv : scalars.lookup(o));
    issueLoad(ld, offs[0], offs[1], stage);
  }
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::dotAFragments(tile::DotOp op, int64_t K) {
  // A loaded block read once into registers, or a register tile packed pairwise (the
  // accumulator layout of two adjacent 8-column slabs is the A layout of one 16-column step).
  auto resident = aFragments.find(op.getA());
  if (resident != aFragments.end())
    return resident->second;
  if (aShared.count(op.getA()))
    return SmallVector<Value>();
  FailureOr<SmallVector<Value>> regs = materialize(op.getA(), Layout::Acc, op);
  if (failed(regs))
    return failure();
  SmallVector<Value> a;
  for (int64_t mt = 0; mt < mTiles; ++mt) {
    for (int64_t kt = 0; kt < K / 16; ++kt) {
      auto at = [&](int64_t slab, int64_t r) {
        return (*regs)[(mt * (K / 8) + 2 * kt + slab) * 4 + r];
      };
      a.push_back(packPair(at(0, 0), at(0, 1)));
      a.push_back(packPair(at(0, 2), at(0, 3)));
      a.push_back(packPair(at(1, 0), at(1, 1)));
      a.push_back(packPair(at(1, 2), at(1, 3)));
    }
  }
  return a;
}

LogicalResult MmaKernelBuilder::emitDot(tile::DotOp op) {
  if (loop && loop->overlap && op == loop->overlap->sDot)
    return emitOverlapS(op);
  if (loop && loop->overlap && op == loop->overlap->pvDot)
    return emitOverlapPV(op);
  Location loc = op.getLoc();
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto cType = cast<RankedTensorType>(op.getAcc().getType());
  int64_t K = aType.getShape()[1], N = cType.getShape()[1];
  if (aType.getShape()[0] != blockM || aType.getElementType() != operandType ||
      K % 16 != 0 || N % 16 != 0)
    return op.emitOpError("is a dot convert-tile-to-mma cannot map onto m16n8k16 (A must be ")
           << blockM << "xK " << operandType << ", K and N multiples of 16)";
  // A fragments, a[(mt·K/16 + kt)·4 + i]; read from shared memory at each k step (filled in
  // below) when dotAFragments leaves them there.
  int64_t kSteps = K / 16;
  FailureOr<SmallVector<Value>> aRegs = dotAFragments(op, K);
  if (failed(aRegs))
    return failure();
  SmallVector<Value> a = *aRegs;
  auto shared = aShared.find(op.getA());
  if (a.empty())
    a.resize(mTiles * kSteps * 4);
  // B from shared memory.
  Value bSource = op.getB();
  bool transposed = false;
  if (auto tr = bSource.getDefiningOp<tile::TransOp>()) {
    bSource = tr.getInput();
    transposed = true;
  }
  auto ld = bSource.getDefiningOp<tile::LoadOp>();
  if (!ld || !loads.count(ld.getOperation()))
    return op.emitOpError("has a B operand that is not a loaded block (convert-tile-to-mma)");
  const LoadPlan &p = loads[ld.getOperation()];
  if (wgmma)
    return emitDotWgmma(op, a, p, transposed);
  FailureOr<SmallVector<Value>> c = materialize(op.getAcc(), Layout::Acc, op);
  if (failed(c))
    return failure();
  SmallVector<Value> acc = *c;
  // A loop-body load lives in the stage of the current iteration.
  Value stage = p.streamIndex >= 0 && loop ? loop->stage : Value();
  Value q = arith::ShRUIOp::create(b, loc, lane, ci32(3));
  Value qLo = arith::AndIOp::create(b, loc, q, ci32(1));
  Value qHi = arith::ShRUIOp::create(b, loc, q, ci32(1));
  // K rows are the n index: matrices (n, k), (n, k+8), (n+8, k), (n+8, k+8); V rows are the k
  // index, read transposed: (k, n), (k+8, n), (k, n+8), (k+8, n+8).
  // So for K matrix q = lane/8 is at rows +8·(q>>1), chunk +(q&1); for V, as for an A block
  // (loadAFragments), rows +8·(q&1), chunk +(q>>1): V and Q share a lane offset, K does not.
  Value laneOffset = transposed
      ? ldmatrixLaneOffset(p.cols, arith::MulIOp::create(b, loc, qHi, ci32(8)), qLo)
      : ldmatrixLaneOffset(p.cols, arith::MulIOp::create(b, loc, qLo, ci32(8)), qHi);
  // The tile's start (slot and, in a loop, the stage) is uniform: ptxas adds it in the
  // ldmatrix's address. (Tried: the stage in the lane offset, to keep LLVM from hoisting the
  // offset's XORs out of the loop; ptxas spilled more.)
  Value tile = ci32(p.smemOffset);
  if (stage)
    tile = arith::AddIOp::create(b, loc, tile, stage);
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptxType = operandType.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  for (int64_t kt = 0; kt < kSteps; ++kt) {
    if (shared != aShared.end())
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        SmallVector<Value> frags = loadAFragments(shared->second, mt, kt);
        std::copy(frags.begin(), frags.end(), a.begin() + (mt * kSteps + kt) * 4);
      }
    for (int64_t np = 0; np < N / 16; ++np) {
      int64_t rowBytes = p.cols * 2;
      Value x4 = transposed
          ? ldmatrixAt(laneOffset, 32 * kt, tile, np * 16 * rowBytes, /*transpose=*/false)
          : ldmatrixAt(laneOffset, 32 * np, tile, kt * 16 * rowBytes, /*transpose=*/true);
      Value regs[4];
      for (int64_t i = 0; i < 4; ++i)
        regs[i] = fragmentOf(LLVM::ExtractValueOp::create(b, loc, x4, i));
      // Every m tile of the warp uses the same B fragments.
      for (int64_t mt = 0; mt < mTiles; ++mt) {
      for (int64_t half = 0; half < 2; ++half) {
        int64_t nt = mt * (N / 8) + np * 2 + half;
        int64_t ai = (mt * kSteps + kt) * 4;
        SmallVector<Value> cIn(acc.begin() + nt * 4, acc.begin() + nt * 4 + 4);
        SmallVector<Value> aIn(a.begin() + ai, a.begin() + ai + 4);
        Value mma = NVVM::MmaOp::create(
            b, loc, resultType, aIn, ValueRange{regs[half * 2], regs[half * 2 + 1]}, cIn,
            ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt,
            std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
            std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
        for (int64_t i = 0; i < 4; ++i)
          acc[nt * 4 + i] = LLVM::ExtractValueOp::create(b, loc, mma, i);
      }
      }
    }
  }
  eager[op.getResult()] = {Layout::Acc, acc};
  return success();
}

void MmaKernelBuilder::fenceSharedForAsyncProxy(Location loc) {
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
}

/// Inline PTX `text` with results of `types` ("=f" for f32, "=r" otherwise), each tied to the
/// operand of the same position in `tied` when `tied` is given (the statement reads and
/// writes it in place), then `inputs` read with `inputConstraints`.
SmallVector<Value> asmResults(OpBuilder &b, Location loc, StringRef text,
                              TypeRange types, ValueRange tied, ValueRange inputs,
                              ArrayRef<StringRef> inputConstraints) {
  SmallVector<std::string> constraints;
  for (Type t : types)
    constraints.push_back(t.isF32() ? "=f" : "=r");
  for (size_t i = 0; i < tied.size(); ++i)
    constraints.push_back(std::to_string(i));
  for (StringRef c : inputConstraints)
    constraints.push_back(c.str());
  SmallVector<Value> operands(tied.begin(), tied.end());
  operands.append(inputs.begin(), inputs.end());
  SmallVector<Type> resultTypes;
  if (!types.empty())
    resultTypes.push_back(LLVM::LLVMStructType::getLiteral(b.getContext(),
                                                           SmallVector<Type>(types)));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, resultTypes, operands, text, llvm::join(constraints, ","),
      /*has_side_effects=*/true, /*is_align_stack=*/false, LLVM::TailCallKind::None,
      LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  SmallVector<Value> out;
  for (size_t i = 0; i < types.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
  return out;
}

/// Inline PTX `text` that reads and writes `tied` in place and reads `inputs`; the new values
/// of `tied`. Values read by an asynchronous wgmma go through such statements so that LLVM
/// cannot move an ordinary read or write of them across the fence or the wait.
SmallVector<Value> tiedAsm(OpBuilder &b, Location loc, StringRef text, ValueRange tied,
                           ValueRange inputs, ArrayRef<StringRef> inputConstraints) {
  return asmResults(b, loc, text, TypeRange(tied), tied, inputs, inputConstraints);
}

/// Whether `v` is a splat 0.0 tile constant (a dot's accumulator that wgmma need not read).
bool isZeroTile(Value v) {
  auto cst = v.getDefiningOp<arith::ConstantOp>();
  auto dense = cst ? dyn_cast<DenseFPElementsAttr>(cst.getValue()) : DenseFPElementsAttr();
  return dense && dense.isSplat() && dense.getSplatValue<APFloat>().isPosZero();
}

SmallVector<Value> MmaKernelBuilder::wgmmaChain(ArrayRef<Value> a, ArrayRef<Value> accIn,
                                                Value offset, const LoadPlan &p,
                                                bool transposed, int64_t N, int64_t kSteps) {
  Location loc = b.getUnknownLoc();
  Type f32 = b.getF32Type(), i64 = b.getI64Type();
  SmallVector<Value> acc(accIn);
  bool zeroAcc = acc.empty();
  // The descriptor of k step 0; the start address (bits 0-13, bytes >> 4) of the others is a
  // constant further (the slab base is 1024-byte aligned, so adding inside the 128-byte
  // atom is what the hardware's address-based swizzle expects).
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value addr = LLVM::PtrToIntOp::create(
      b, loc, i64, LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{offset}));
  uint64_t lbo = transposed ? 1 : static_cast<uint64_t>(p.rows * 128 / 16);
  uint64_t sbo = 1024 / 16;
  uint64_t fields = (uint64_t{1} << 62) | (sbo << 32) | (lbo << 16);
  Value start = arith::AndIOp::create(
      b, loc, arith::ShRUIOp::create(b, loc, addr, ci64(4)), ci64(0x3FFF));
  Value desc0 = arith::OrIOp::create(b, loc, start, ci64(static_cast<int64_t>(fields)));
  StringRef ptxType = operandType.isBF16() ? "bf16" : "f16";
  int64_t nAcc = N / 2;
  for (int64_t kt = 0; kt < kSteps; ++kt) {
    int64_t bytes;
    if (transposed) {
      auto [xorBytes, addBytes] = chunkStep(p, kt);
      bytes = xorBytes + addBytes;
    } else {
      bytes = kt * 16 * 128;
    }
    Value desc = bytes ? Value(arith::AddIOp::create(b, loc, desc0, ci64(bytes >> 4))) : desc0;
    bool readAcc = !(zeroAcc && kt == 0);
    // Operands: the nAcc outputs, then (when read) the nAcc tied inputs, then A, desc, scale-d.
    int64_t first = readAcc ? 2 * nAcc : nAcc;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << first + 5 << ", 0;\n"
       << "wgmma.mma_async.sync.aligned.m64n" << N << "k16.f32." << ptxType << "." << ptxType
       << " {";
    for (int64_t i = 0; i < nAcc; ++i)
      os << (i ? ", " : "") << "$" << i;
    os << "}, {$" << first << ", $" << first + 1 << ", $" << first + 2 << ", $" << first + 3
       << "}, $" << first + 4 << ", p, 1, 1, " << (transposed ? 0 : 1) << ";\n}";
    SmallVector<Value> inputs(a.begin() + kt * 4, a.begin() + kt * 4 + 4);
    inputs.push_back(desc);
    inputs.push_back(ci32(readAcc ? 1 : 0));
    SmallVector<StringRef> cons = {"r", "r", "r", "r", "l", "r"};
    // The first step of a zero accumulator writes it without reading it (scale-d false).
    acc = readAcc ? tiedAsm(b, loc, text, acc, inputs, cons)
                  : asmResults(b, loc, text, SmallVector<Type>(nAcc, f32), {}, inputs, cons);
  }
  return acc;
}

LogicalResult MmaKernelBuilder::emitDotWgmma(tile::DotOp op, ArrayRef<Value> aIn,
                                             const LoadPlan &p, bool transposed) {
  // One warpgroup (4 warps × 16 rows) per 64 query rows; per k step of 16 one
  // wgmma.mma_async.m64nNk16 whose per-warp A fragment is the m16n8k16 A fragment (aIn) and
  // whose f32 accumulator is the Acc layout with one m tile. B is the loaded block in shared
  // memory in the 128-byte-swizzle canonical layout, named by a matrix descriptor:
  //   K of S = Q·Kᵀ: the block [N, K] is K-major (no transpose): 8-row core-matrix groups
  //     1024 B apart (SBO); LBO unused with swizzling; k step = 32 B inside the 128-byte
  //     atom, next slab past 64 columns.
  //   V of O += P·V: the block [K, N] is N-major (transpose-B 1): 8-row groups along k 1024 B
  //     apart (SBO), 64-column slabs along n p.rows·128 B apart (LBO); k step = 16 rows.
  Location loc = op.getLoc();
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto cType = cast<RankedTensorType>(op.getAcc().getType());
  int64_t K = aType.getShape()[1], N = cType.getShape()[1];
  if (aShared.count(op.getA()))
    return op.emitOpError("reads its A operand from shared memory at every k step, which "
                          "codegen=wgmma does not do");
  if (N % 8 != 0 || N > 256)
    return op.emitOpError("makes ") << N << " columns: wgmma.mma_async.m64nNk16 takes N a "
                                    << "multiple of 8 up to 256";
  int64_t kSteps = K / 16;
  Type i32 = b.getI32Type();
  bool zeroAcc = isZeroTile(op.getAcc());
  SmallVector<Value> acc;
  if (!zeroAcc) {
    FailureOr<SmallVector<Value>> c = materialize(op.getAcc(), Layout::Acc, op);
    if (failed(c))
      return failure();
    acc = *c;
  }
  // A as b32 registers. A packed here (P) is written by ordinary instructions just before the
  // wgmmas read it, and so is an accumulator that is not a fresh zero (O·alpha): the fence
  // ties them, so that every such write is ordered before it.
  SmallVector<Value> a;
  for (Value v : aIn)
    a.push_back(v.getType() == i32 ? v : Value(LLVM::BitcastOp::create(b, loc, i32, v)));
  bool aPacked = !aFragments.count(op.getA());
  SmallVector<Value> fenced(acc);
  if (aPacked)
    fenced.append(a);
  if (fenced.empty()) {
    NVVM::WgmmaFenceAlignedOp::create(b, loc);
  } else {
    fenced = tiedAsm(b, loc, "wgmma.fence.sync.aligned;", fenced, {}, {});
    std::copy(fenced.begin(), fenced.begin() + acc.size(), acc.begin());
    if (aPacked)
      std::copy(fenced.begin() + acc.size(), fenced.end(), a.begin());
  }
  Value stage = p.streamIndex >= 0 && loop ? loop->stage : Value();
  Value offset = ci32(p.smemOffset);
  if (stage)
    offset = arith::AddIOp::create(b, loc, offset, stage);
  acc = wgmmaChain(a, acc, offset, p, transposed, N, kSteps);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  // The accumulator (and packed A) registers are in flight until the wait: it re-defines
  // them, so every use of the result is after it.
  SmallVector<Value> waited(acc);
  if (aPacked)
    waited.append(a);
  waited = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 0;", waited, {}, {});
  acc.assign(waited.begin(), waited.begin() + N / 2);
  eager[op.getResult()] = {Layout::Acc, acc};
  return success();
}

//===----------------------------------------------------------------------===//
// wgmma-overlap: FA3's intra-warpgroup pipelining (docs/dev/codegen-wgmma.md)
//===----------------------------------------------------------------------===//
//
// Iteration j of a loop with the attention shape (S = Q·K_jᵀ, softmax, O = O·alpha_j + P_j·V_j)
// runs
//   top:   wait cp.async (K_j, V_{j-1}), fence.proxy.async, barrier;
//          issue K_{j+1} into the other stage and V_j into this one
//   fence (O, P_{j-1}); S_j = Q·K_jᵀ; commit; O += P_{j-1}·V_{j-1}; commit
//   wait_group 1                      -- S_j is in; P_{j-1}·V_{j-1} still runs
//   softmax of S_j: m_j, alpha_j, P_j (packed), l_j
//   wait_group 0                      -- O = O_{j-1} + P_{j-1}·V_{j-1} (at max m_{j-1})
//   O = O·alpha_j                     -- now at max m_j, without P_j·V_j
// and after the loop, if it ran: wait cp.async, fence, barrier, O += P_last·V_last, wait 0.
// The source's O_j = alpha_j·O_{j-1} + P_j·V_j is the loop-carried O plus the pending P_j·V_j,
// and the rescale comes after the P·V it scales. Iteration lb has no P·V yet: it issues
// P = 0 against K_lb (landed, same shape), which adds exactly 0 — one spare wgmma group per
// loop instead of a peeled iteration. V_j is loaded one iteration late (issued at the top of j
// into this iteration's stage), so V_{j-1} stays in place while K_{j+1} and V_j land: the same
// two stages, no third.

std::optional<Overlap> MmaKernelBuilder::matchOverlap(scf::ForOp op) {
  SmallVector<tile::DotOp> dots;
  for (Operation &o : op.getBody()->without_terminator())
    if (auto dot = dyn_cast<tile::DotOp>(o))
      dots.push_back(dot);
  if (dots.size() != 2)
    return std::nullopt;
  Overlap ov;
  ov.sDot = dots[0];
  ov.pvDot = dots[1];
  // S = Q·trans(K_j) with Q in registers and a fresh accumulator.
  if (!aFragments.count(ov.sDot.getA()) || !isZeroTile(ov.sDot.getAcc()))
    return std::nullopt;
  auto tr = ov.sDot.getB().getDefiningOp<tile::TransOp>();
  ov.kLoad = tr ? tr.getInput().getDefiningOp<tile::LoadOp>() : tile::LoadOp();
  ov.vLoad = ov.pvDot.getB().getDefiningOp<tile::LoadOp>();
  if (!ov.kLoad || !ov.vLoad || ov.kLoad->getParentOp() != op.getOperation() ||
      ov.vLoad->getParentOp() != op.getOperation() || !ov.vLoad.getResult().hasOneUse())
    return std::nullopt;
  const LoadPlan &kp = loads[ov.kLoad.getOperation()];
  const LoadPlan &vp = loads[ov.vLoad.getOperation()];
  // K is the first load (its wait opens the iteration); the spare first P·V reads K_lb as V.
  if (kp.streamIndex != 0 || vp.streamIndex <= 0 || kp.rows != vp.rows || kp.cols != vp.cols)
    return std::nullopt;
  // P·V's A is computed in the body; its accumulator is the iter_arg O, or O·broadcast(alpha),
  // used only there, and its result is yielded in O's place and used nowhere else.
  if (aFragments.count(ov.pvDot.getA()) || aShared.count(ov.pvDot.getA()))
    return std::nullopt;
  Value acc = ov.pvDot.getAcc();
  if (auto mul = acc.getDefiningOp<arith::MulFOp>()) {
    if (!acc.hasOneUse() || !isRowBroadcast(mul.getRhs()))
      return std::nullopt;
    acc = mul.getLhs();
  }
  auto arg = dyn_cast<BlockArgument>(acc);
  if (!arg || arg.getOwner() != op.getBody() || arg.getArgNumber() == 0 || !arg.hasOneUse())
    return std::nullopt;
  ov.accIndex = arg.getArgNumber() - 1;
  Value result = ov.pvDot.getResult();
  Operation *yield = op.getBody()->getTerminator();
  if (!result.hasOneUse() || *result.getUsers().begin() != yield ||
      yield->getOperand(ov.accIndex) != result)
    return std::nullopt;
  return ov;
}

LogicalResult MmaKernelBuilder::emitOverlapS(tile::DotOp op) {
  Location loc = op.getLoc();
  Overlap &ov = *loop->overlap;
  Type i32 = b.getI32Type();
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto cType = cast<RankedTensorType>(op.getAcc().getType());
  int64_t K = aType.getShape()[1], N = cType.getShape()[1];
  Value oArg = loop->source.getRegionIterArgs()[ov.accIndex];
  SmallVector<Value> o = eager[oArg].second;
  // O (rescaled) and P_{j-1} (packed) were written by ordinary instructions: the fence ties them.
  SmallVector<Value> fenced(o);
  fenced.append(ov.pendingP);
  fenced = tiedAsm(b, loc, "wgmma.fence.sync.aligned;", fenced, {}, {});
  o.assign(fenced.begin(), fenced.begin() + o.size());
  SmallVector<Value> p(fenced.begin() + o.size(), fenced.end());
  SmallVector<Value> q;
  for (Value v : aFragments[op.getA()])
    q.push_back(v.getType() == i32 ? v : Value(LLVM::BitcastOp::create(b, loc, i32, v)));
  const LoadPlan &kp = loads[ov.kLoad.getOperation()];
  const LoadPlan &vp = loads[ov.vLoad.getOperation()];
  Value kOffset = arith::AddIOp::create(b, loc, ci32(kp.smemOffset), loop->stage);
  SmallVector<Value> s = wgmmaChain(q, {}, kOffset, kp, /*transposed=*/true, N, K / 16);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  auto dType = cast<RankedTensorType>(ov.pvDot.getAcc().getType());
  auto pType = cast<RankedTensorType>(ov.pvDot.getA().getType());
  o = wgmmaChain(p, o, ov.pendingV, vp, /*transposed=*/false, dType.getShape()[1],
                 pType.getShape()[1] / 16);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  // The next loads, while both groups run: K_{j+1} goes to the other stage's K slot (last read
  // by S_{j-1}), V_j to this stage's V slot (last read by P_{j-2}·V_{j-2}); the wgmmas in
  // flight read K_j (this stage) and V_{j-1} (the other stage's V slot).
  issueNextLoads(loc);
  // The older group (S) is complete; O and P_{j-1} stay in flight until wait_group 0.
  s = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 1;", s, {}, {});
  ov.inFlight = o;
  ov.pendingP = p;
  eager[op.getResult()] = {Layout::Acc, s};
  return success();
}

LogicalResult MmaKernelBuilder::emitOverlapPV(tile::DotOp op) {
  Location loc = op.getLoc();
  Overlap &ov = *loop->overlap;
  Type i32 = b.getI32Type();
  int64_t K = cast<RankedTensorType>(op.getA().getType()).getShape()[1];
  FailureOr<SmallVector<Value>> packed = dotAFragments(op, K);
  if (failed(packed))
    return failure();
  SmallVector<Value> newP;
  for (Value v : *packed)
    newP.push_back(v.getType() == i32 ? v : Value(LLVM::BitcastOp::create(b, loc, i32, v)));
  // wait_group 0 re-defines O and P_{j-1} (in flight until here) and ties P_j as well, so that
  // the softmax that makes P_j stays before the wait, under P_{j-1}·V_{j-1}.
  SmallVector<Value> waited(ov.inFlight);
  waited.append(ov.pendingP);
  waited.append(newP);
  waited = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 0;", waited, {}, {});
  size_t nO = ov.inFlight.size(), nP = ov.pendingP.size();
  Value oArg = loop->source.getRegionIterArgs()[ov.accIndex];
  // O_{j-1} + P_{j-1}·V_{j-1} takes the iter_arg's place: the rescale O·alpha_j reads it.
  eager[oArg] = {Layout::Acc, SmallVector<Value>(waited.begin(), waited.begin() + nO)};
  FailureOr<SmallVector<Value>> o = materialize(op.getAcc(), Layout::Acc, op);
  if (failed(o))
    return failure();
  eager[op.getResult()] = {Layout::Acc, *o};
  ov.pendingP.assign(waited.begin() + nO + nP, waited.end());
  const LoadPlan &vp = loads[ov.vLoad.getOperation()];
  ov.pendingV = arith::AddIOp::create(b, loc, ci32(vp.smemOffset), loop->stage);
  ov.inFlight.clear();
  return success();
}

scf::ForOp MmaKernelBuilder::handoverTarget(scf::ForOp op, const Overlap &ov) {
  Value o = op.getResult(ov.accIndex);
  if (!o.hasOneUse())
    return {};
  auto next = dyn_cast<scf::ForOp>(*o.getUsers().begin());
  if (!next || next->getBlock() != op->getBlock())
    return {};
  std::optional<Overlap> nextOv = matchOverlap(next);
  if (!nextOv || next.getInitArgs()[nextOv->accIndex] != o)
    return {};
  for (Operation *it = op->getNextNode(); it && it != next.getOperation();
       it = it->getNextNode())
    if (isa<tile::LoadOp, tile::StoreOp, tile::DotOp, scf::ForOp>(it))
      return {};
  return next;
}

SmallVector<Value> MmaKernelBuilder::drainOverlap(Overlap &ov, ArrayRef<Value> o,
                                                  ArrayRef<Value> p, Value v, Value any) {
  Location loc = ov.pvDot.getLoc();
  // V_last was issued at the top of the last iteration: wait for it, make it visible to the
  // async proxy and to every warp.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  fenceSharedForAsyncProxy(loc);
  gpu::BarrierOp::create(b, loc);
  auto dType = cast<RankedTensorType>(ov.pvDot.getAcc().getType());
  auto pType = cast<RankedTensorType>(ov.pvDot.getA().getType());
  // A loop that did not run has nothing pending (and its V offset names no landed block).
  auto ifOp = scf::IfOp::create(b, loc, SmallVector<Type>(o.size(), b.getF32Type()), any,
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    SmallVector<Value> fenced(o.begin(), o.end());
    fenced.append(p.begin(), p.end());
    fenced = tiedAsm(b, loc, "wgmma.fence.sync.aligned;", fenced, {}, {});
    SmallVector<Value> acc(fenced.begin(), fenced.begin() + o.size());
    SmallVector<Value> a(fenced.begin() + o.size(), fenced.end());
    acc = wgmmaChain(a, acc, v, loads[ov.vLoad.getOperation()], /*transposed=*/false,
                     dType.getShape()[1], pType.getShape()[1] / 16);
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    SmallVector<Value> waited(acc);
    waited.append(a);
    waited = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 0;", waited, {}, {});
    scf::YieldOp::create(b, loc, ValueRange(waited).take_front(o.size()));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, o);
  }
  return SmallVector<Value>(ifOp.getResults());
}

SmallVector<Value> MmaKernelBuilder::reduceRows(ArrayRef<Value> in, int64_t slabs,
                                                function_ref<Value(Value, Value)> combine) {
  Location loc = b.getUnknownLoc();
  SmallVector<Value> out;
  Value full = ci32(-1), clamp = ci32(31);
  for (int64_t rr = 0; rr < 2 * mTiles; ++rr) {
    int64_t base = rr / 2 * slabs * 4 + rr % 2 * 2;
    // A balanced tree over the row's slab pairs, not a chain: ptxas can then fold each
    // exponential into the row sum as soon as it is computed instead of keeping them all
    // alive until a serial chain reaches them (it interleaves the exponentials with P·V),
    // which was what pushed the 128×64 d128 kernel over 255 registers. Max is associative,
    // so only the rounding order of a sum changes.
    SmallVector<Value> parts;
    for (int64_t s = 0; s < slabs; ++s)
      parts.push_back(combine(in[base + s * 4], in[base + s * 4 + 1]));
    while (parts.size() > 1) {
      SmallVector<Value> next;
      for (size_t i = 0; i + 1 < parts.size(); i += 2)
        next.push_back(combine(parts[i], parts[i + 1]));
      if (parts.size() % 2)
        next.push_back(parts.back());
      parts = std::move(next);
    }
    Value r = parts.front();
    // The four threads of a quad hold the other columns of the same rows.
    for (int64_t off : {1, 2}) {
      Value other = NVVM::ShflOp::create(b, loc, r.getType(), full, r, ci32(off), clamp,
                                         NVVM::ShflKind::bfly, UnitAttr());
      r = combine(r, other);
    }
    out.push_back(r);
  }
  return out;
}

std::optional<MmaKernelBuilder::ScaledScores> MmaKernelBuilder::matchScaledScores(Value x) {
  ScaledScores m;
  if (auto sel = x.getDefiningOp<arith::SelectOp>()) {
    DenseElementsAttr other;
    if (!isTensor(sel.getCondition().getType()) ||
        !matchPattern(sel.getFalseValue(), m_Constant(&other)) || !other.isSplat() ||
        !other.getElementType().isF32() ||
        !other.getSplatValue<APFloat>().isNegInfinity())
      return std::nullopt;
    m.mask = sel.getCondition();
    x = sel.getTrueValue();
  }
  auto mul = x.getDefiningOp<arith::MulFOp>();
  if (!mul || !cast<RankedTensorType>(mul.getType()).getElementType().isF32())
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    auto splat = mul->getOperand(1 - i).getDefiningOp<tile::SplatOp>();
    if (splat && splat.getValue().getType().isF32() && scalars.contains(splat.getValue())) {
      m.scores = mul->getOperand(i);
      m.scale = splat.getValue();
      m.product = mul.getResult();
      return m;
    }
  }
  return std::nullopt;
}

std::optional<MmaKernelBuilder::ScaledScores> MmaKernelBuilder::prepareScaled(Value x) {
  std::optional<ScaledScores> m = matchScaledScores(x);
  if (!m)
    return std::nullopt;
  if (scaleFactor.count(m->product))
    return m;
  // S must be a register tile placed where it stands (a dot's result) whose only use is S·c,
  // in the block being emitted: then T can take S's place.
  auto e = eager.find(m->scores);
  if (!m->scores.hasOneUse() || e == eager.end() || e->second.first != Layout::Acc ||
      e->second.second.empty() || !e->second.second.front().getDefiningOp() ||
      e->second.second.front().getDefiningOp()->getBlock() != b.getInsertionBlock())
    return std::nullopt;
  // For 0 < c < inf, x -> round(c·x) is non-decreasing, so max(c·S) = c·max(S) bit for bit
  // (NaN and -inf included). c = 0 (0·-inf = NaN for a fully masked row), c < 0 (the max
  // becomes a min), c = inf and NaN take the other side, which scales S in place and keeps
  // k = 1: the exact code, as fma(x, 1, -m) = x - m and max(x)·1 = max(x).
  Location loc = b.getUnknownLoc();
  Value c = scalars.lookup(m->scale);
  auto f = [&](float v) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v)); };
  Value fast = arith::AndIOp::create(
      b, loc, arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, c, f(0.0f)),
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, c,
                            f(std::numeric_limits<float>::infinity())));
  SmallVector<Value> &regs = e->second.second;
  SmallVector<Type> types(regs.size(), b.getF32Type());
  auto ifOp = scf::IfOp::create(b, loc, types, fast, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, regs);
    b.setInsertionPointToStart(ifOp.elseBlock());
    SmallVector<Value> scaled;
    for (Value r : regs)
      scaled.push_back(arith::MulFOp::create(b, loc, r, c));
    scf::YieldOp::create(b, loc, scaled);
  }
  regs.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  scaleFactor[m->product] = arith::SelectOp::create(b, loc, fast, c, f(1.0f));
  return m;
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::maskedScores(const ScaledScores &m,
                                                             Operation *user) {
  FailureOr<SmallVector<Value>> s = materialize(m.scores, Layout::Acc, user);
  if (failed(s) || !m.mask)
    return s;
  FailureOr<SmallVector<Value>> mask = materialize(m.mask, Layout::Acc, user);
  if (failed(mask))
    return failure();
  Location loc = b.getUnknownLoc();
  Value ninf = arith::ConstantOp::create(
      b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
  SmallVector<Value> out;
  for (auto [keep, x] : llvm::zip(*mask, *s))
    out.push_back(arith::SelectOp::create(b, loc, keep, x, ninf));
  return out;
}

LogicalResult MmaKernelBuilder::emitReduce(tile::ReduceOp op) {
  Location loc = op.getLoc();
  auto inType = cast<RankedTensorType>(op.getInput().getType());
  if (inType.getRank() != 2 || op.getAxis() != 1)
    return op.emitOpError("reduces along another axis than the rows' (convert-tile-to-mma)");
  auto combine = [&](Value x, Value y) -> Value {
    bool isFloat = isa<FloatType>(x.getType());
    switch (op.getKind()) {
    case tile::ReduceKind::Sum:
      return isFloat ? Value(arith::AddFOp::create(b, loc, x, y))
                     : Value(arith::AddIOp::create(b, loc, x, y));
    case tile::ReduceKind::Max:
      return isFloat ? Value(arith::MaximumFOp::create(b, loc, x, y))
                     : Value(arith::MaxSIOp::create(b, loc, x, y));
    case tile::ReduceKind::Min:
      return isFloat ? Value(arith::MinimumFOp::create(b, loc, x, y))
                     : Value(arith::MinSIOp::create(b, loc, x, y));
    }
    llvm_unreachable("reduction kind");
  };
  Type elem = inType.getElementType();
  if (!elem.isF32() && !elem.isInteger(32))
    return op.emitOpError("reduces ") << elem << ": convert-tile-to-mma shuffles f32 or i32";
  int64_t slabs = inType.getShape()[1] / 8;
  std::optional<ScaledScores> scaled;
  if (op.getKind() == tile::ReduceKind::Max)
    scaled = prepareScaled(op.getInput());
  if (scaled) {
    // The row max of S·c as k·(row max of T): no scaled tile, one multiply per row.
    FailureOr<SmallVector<Value>> x = maskedScores(*scaled, op);
    if (failed(x))
      return failure();
    SmallVector<Value> rows = reduceRows(*x, slabs, combine);
    Value k = scaleFactor.lookup(scaled->product);
    for (Value &r : rows)
      r = arith::MulFOp::create(b, loc, r, k);
    eager[op.getResult()] = {Layout::Row, rows};
    return success();
  }
  FailureOr<SmallVector<Value>> in = materialize(op.getInput(), Layout::Acc, op);
  if (failed(in))
    return failure();
  eager[op.getResult()] = {Layout::Row, reduceRows(*in, slabs, combine)};
  return success();
}

LogicalResult MmaKernelBuilder::emitStore(tile::StoreOp op) {
  Location loc = op.getLoc();
  if (op.getMask())
    return op.emitOpError("has a mask, which convert-tile-to-mma does not handle");
  if (!descs.count(op.getDesc()))
    return op.emitOpError("writes a descriptor convert-tile-to-mma cannot trace to make_desc");
  const Desc &d = descs[op.getDesc()];
  auto type = cast<RankedTensorType>(op.getValue().getType());
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  Value zero = ci64(0);
  auto storeAt = [&](Value row, Value col, int64_t width, Value value) {
    Value grow = arith::AddIOp::create(b, loc, toI64(scalars.lookup(op.getOffsets()[0])),
                                       toI64(row));
    Value in = arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, grow, zero),
                                     cmp(arith::CmpIPredicate::slt, grow, d.shape[0]));
    Value elem = arith::AddIOp::create(b, loc, d.offset,
                                       arith::MulIOp::create(b, loc, grow, d.strides[0]));
    if (col) {
      Value gcol = arith::AddIOp::create(b, loc, toI64(scalars.lookup(op.getOffsets()[1])),
                                         toI64(col));
      in = arith::AndIOp::create(b, loc, in, cmp(arith::CmpIPredicate::sge, gcol, zero));
      in = arith::AndIOp::create(
          b, loc, in,
          cmp(arith::CmpIPredicate::sle, arith::AddIOp::create(b, loc, gcol, ci64(width)),
              d.shape[1]));
      elem = arith::AddIOp::create(b, loc, elem, arith::MulIOp::create(b, loc, gcol, d.strides[1]));
    }
    return std::make_pair(in, elem);
  };
  if (type.getRank() == 2) {
    int64_t innerStride =
        constantOf(op.getDesc().getDefiningOp<tile::MakeDescOp>().getStrides()[1]);
    if (innerStride != 1)
      return op.emitOpError("writes a descriptor whose inner stride is not 1 "
                            "(convert-tile-to-mma stores pairs)");
    FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Acc, op);
    if (failed(regs))
      return failure();
    Type elem = type.getElementType();
    auto vt = VectorType::get({2}, elem);
    int64_t slabs = type.getShape()[1] / 8;
    for (int64_t s = 0; s < slabs; ++s) {
      Value col = arith::AddIOp::create(b, loc, quadCol2, ci32(s * 8));
      for (int64_t rr = 0; rr < 2 * mTiles; ++rr) {
        int64_t reg = (rr / 2 * slabs + s) * 4 + rr % 2 * 2;
        auto [in, elemOff] = storeAt(entryRows[rr], col, 2, Value());
        auto ifOp = scf::IfOp::create(b, loc, in, false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value v = LLVM::PoisonOp::create(b, loc, vt);
        v = LLVM::InsertElementOp::create(b, loc, v, (*regs)[reg], ci32(0));
        v = LLVM::InsertElementOp::create(b, loc, v, (*regs)[reg + 1], ci32(1));
        Value ptr = LLVM::GEPOp::create(b, loc, ptr1, elem, d.base, ValueRange{elemOff});
        LLVM::StoreOp::create(b, loc, v, ptr, /*alignment=*/elem.getIntOrFloatBitWidth() / 4);
      }
    }
    return success();
  }
  // A row vector: the first thread of each quad writes its two rows.
  FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Row, op);
  if (failed(regs))
    return failure();
  Value quadLead = cmp(arith::CmpIPredicate::eq, quadCol2, ci32(0));
  for (int64_t h = 0; h < 2 * mTiles; ++h) {
    auto [in, elemOff] = storeAt(entryRows[h], Value(), 1, Value());
    in = arith::AndIOp::create(b, loc, in, quadLead);
    auto ifOp = scf::IfOp::create(b, loc, in, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value ptr = LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{elemOff});
    LLVM::StoreOp::create(b, loc, (*regs)[h], ptr);
  }
  return success();
}

LogicalResult MmaKernelBuilder::emitFor(scf::ForOp op) {
  Location loc = op.getLoc();
  SmallVector<Layout> layouts;
  SmallVector<int64_t> counts;
  SmallVector<Value> inits;
  for (auto [init, arg] : llvm::zip(op.getInitArgs(), op.getRegionIterArgs())) {
    auto rt = dyn_cast<RankedTensorType>(arg.getType());
    if (!rt) {
      layouts.push_back(Layout::Acc);
      counts.push_back(-1);
      inits.push_back(scalars.lookup(init));
      continue;
    }
    Layout l = rt.getRank() == 2 ? Layout::Acc : Layout::Row;
    FailureOr<SmallVector<Value>> regs = materialize(init, l, op);
    if (failed(regs))
      return failure();
    layouts.push_back(l);
    counts.push_back(regs->size());
    inits.append(regs->begin(), regs->end());
  }
  LoopContext ctx;
  ctx.source = op;
  for (Operation &o : op.getBody()->without_terminator())
    if (auto ld = dyn_cast<tile::LoadOp>(o))
      ctx.streams.push_back(ld);
  Value lb = scalars.lookup(op.getLowerBound());
  ctx.ub = scalars.lookup(op.getUpperBound());
  ctx.step = scalars.lookup(op.getStep());
  bool streamed = !ctx.streams.empty();
  std::optional<Overlap> overlap;
  if (streamed && overlapOption)
    overlap = matchOverlap(op);
  if (overlap)
    ctx.overlap = &*overlap;
  // A loop that takes over the previous loop's pending P·V starts in the stage after that
  // loop's last (V_last stays in the other one until this loop's first iteration reads it).
  std::optional<Handover> taken;
  if (overlap && handover && handover->next == op)
    taken = handover;
  handover.reset();
  Value stage0 = taken ? taken->stage : ci32(0);
  Value ran;
  if (overlap) {
    ran = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ctx.ub);
    if (taken)
      ran = arith::OrIOp::create(b, loc, taken->ran, ran);
  }
  // The loop's own iter_args (flattened registers), then the stage, then (overlapped) the
  // pending P and its V offset.
  size_t sourceRegs = inits.size();
  int64_t pendingRegs = 0;
  if (streamed) {
    // Prologue: every load of the body for the first iteration, into stage 0 (or, overlapped,
    // where the previous loop left off). The barrier first: an earlier loop's last iteration
    // may still be reading that stage.
    gpu::BarrierOp::create(b, loc);
    Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ctx.ub);
    auto ifOp = scf::IfOp::create(b, loc, any, false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      LoopContext *outer = loop;
      loop = &ctx;
      issueStreams(lb, stage0);
      loop = outer;
    }
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    inits.push_back(stage0);
  }
  if (overlap) {
    int64_t k = cast<RankedTensorType>(overlap->pvDot.getA().getType()).getShape()[1];
    pendingRegs = mTiles * (k / 16) * 4;
    if (taken) {
      inits.append(taken->pendingP.begin(), taken->pendingP.end());
      inits.push_back(taken->pendingV);
    } else {
      // Nothing is pending before the first iteration: P = 0 against K_lb (see Overlap).
      inits.append(pendingRegs, ci32(0));
      inits.push_back(ci32(loads[overlap->kLoad.getOperation()].smemOffset));
    }
  }
  auto newFor = scf::ForOp::create(b, loc, lb, ctx.ub, ctx.step, inits);
  Block *body = newFor.getBody();
  OpBuilder::InsertionGuard guard(b);
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  b.setInsertionPointToEnd(body);
  ctx.iv = newFor.getInductionVar();
  if (streamed)
    ctx.stage = newFor.getRegionIterArgs()[sourceRegs];
  if (overlap) {
    auto args = newFor.getRegionIterArgs();
    overlap->pendingP.assign(args.begin() + sourceRegs + 1,
                             args.begin() + sourceRegs + 1 + pendingRegs);
    overlap->pendingV = args[sourceRegs + 1 + pendingRegs];
  }
  scalars.map(op.getInductionVar(), ctx.iv);
  LoopContext *outer = loop;
  loop = &ctx;
  lazy.emplace_back();
  auto unflatten = [&](ValueRange flat, ValueRange targets) {
    size_t pos = 0;
    for (auto [i, t] : llvm::enumerate(targets)) {
      if (counts[i] < 0) {
        scalars.map(t, flat[pos++]);
        continue;
      }
      SmallVector<Value> regs(flat.begin() + pos, flat.begin() + pos + counts[i]);
      pos += counts[i];
      eager[t] = {layouts[i], regs};
    }
  };
  unflatten(newFor.getRegionIterArgs(), op.getRegionIterArgs());
  LogicalResult result = emitBlock(*op.getBody());
  SmallVector<Value> yielded;
  if (succeeded(result)) {
    auto yield = cast<scf::YieldOp>(op.getBody()->getTerminator());
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      if (counts[i] < 0) {
        yielded.push_back(scalars.lookup(v));
        continue;
      }
      FailureOr<SmallVector<Value>> regs = materialize(v, layouts[i], yield);
      if (failed(regs)) {
        result = failure();
        break;
      }
      yielded.append(regs->begin(), regs->end());
    }
  }
  if (succeeded(result) && streamed)
    yielded.push_back(arith::SubIOp::create(b, loc, ci32(streamStageBytes), ctx.stage));
  if (succeeded(result) && overlap) {
    llvm::append_range(yielded, overlap->pendingP);
    yielded.push_back(overlap->pendingV);
  }
  if (succeeded(result))
    scf::YieldOp::create(b, loc, yielded);
  else
    scf::YieldOp::create(b, loc, ValueRange(newFor.getRegionIterArgs()));
  lazy.pop_back();
  loop = outer;
  b.setInsertionPointAfter(newFor);
  if (failed(result))
    return failure();
  unflatten(newFor.getResults(), op.getResults());
  if (overlap) {
    auto results = newFor.getResults();
    Value o = op.getResult(overlap->accIndex);
    SmallVector<Value> p(results.begin() + sourceRegs + 1,
                         results.begin() + sourceRegs + 1 + pendingRegs);
    Value v = results[sourceRegs + 1 + pendingRegs];
    if (scf::ForOp next = handoverTarget(op, *overlap))
      handover = Handover{next, p, v, results[sourceRegs], ran};
    else
      eager[o] = {Layout::Acc, drainOverlap(*overlap, eager[o].second, p, v, ran)};
  }
  return success();
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ConvertTileToMMA : tessel::impl::ConvertTileToMMABase<ConvertTileToMMA> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> programs;
    for (func::FuncOp f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        programs.push_back(f);
    if (programs.empty())
      return;
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    gpu::GPUModuleOp gpuModule;
    LLVM::GlobalOp smem;
    bool failedAny = false;
    for (func::FuncOp program : programs) {
      // Collect the first error of this program; with fallback it becomes a remark. With
      // fallback and wgmma (codegen=auto on sm_90a) a program wgmma refuses is tried on the
      // mma.sync path before it is left to the reference lowering.
      std::string reason;
      Location where = program.getLoc();
      LogicalResult built = failure();
      bool useWgmma = wgmma;
      for (;;) {
        gpu::GPUFuncOp kernel;
        reason.clear();
        where = program.getLoc();
        {
          ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
            if (diag.getSeverity() != DiagnosticSeverity::Error)
              return failure();
            if (reason.empty()) {
              reason = diag.str();
              where = diag.getLocation();
            }
            return success();
          });
          built = lowerProgram(program, gpuModule, smem, kernel, useWgmma);
        }
        if (succeeded(built))
          break;
        if (kernel)
          kernel.erase();
        if (!(fallback && useWgmma))
          break;
        emitRemark(where) << "convert-tile-to-mma lowers @" << program.getName()
                          << " with mma.sync, not wgmma: " << reason;
        useWgmma = false;
      }
      if (succeeded(built)) {
        program.erase();
        continue;
      }
      if (fallback) {
        emitRemark(where) << "convert-tile-to-mma leaves @" << program.getName()
                          << " to the reference lowering: " << reason;
      } else {
        emitError(where) << reason;
        failedAny = true;
      }
    }
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult lowerProgram(func::FuncOp program, gpu::GPUModuleOp &gpuModule,
                             LLVM::GlobalOp &smem, gpu::GPUFuncOp &kernel, bool useWgmma) {
    MLIRContext *ctx = &getContext();
    ModuleOp module = getOperation();
    if (program.getNumResults() != 0)
      return program.emitOpError("is a tile program, so it must return nothing");
    SmallVector<Type> argTypes;
    for (BlockArgument arg : program.getArguments()) {
      Type t = arg.getType();
      if (isa<tile::PtrType>(t))
        argTypes.push_back(LLVM::LLVMPointerType::get(ctx, 1));
      else if (t.isIntOrIndexOrFloat())
        argTypes.push_back(t);
      else
        return program.emitOpError() << "argument #" << arg.getArgNumber() << " has type " << t
                                     << ": a kernel takes !tile.ptr and scalar arguments";
    }
    OpBuilder b(ctx);
    if (!gpuModule) {
      for (auto m : module.getOps<gpu::GPUModuleOp>())
        if (m.getName() == "tessel_kernels")
          gpuModule = m;
      if (!gpuModule) {
        b.setInsertionPointToEnd(module.getBody());
        gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "tessel_kernels");
        module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
      }
    }
    if (useWgmma && !chip.empty() && chip != "sm_90a")
      return program.emitOpError("cannot use codegen=wgmma on ")
             << chip << ": wgmma.mma_async needs sm_90a";
    if (!smem) {
      // wgmma's 128-byte swizzle is a function of the shared address: slabs start at
      // multiples of 1024 bytes, so the block must too.
      b.setInsertionPointToStart(gpuModule.getBody());
      smem = LLVM::GlobalOp::create(b, module.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                                    /*isConstant=*/false, LLVM::Linkage::External, kSharedGlobal,
                                    Attribute(), /*alignment=*/wgmma ? 1024 : 16,
                                    /*addrSpace=*/3);
    }
    b.setInsertionPointToEnd(gpuModule.getBody());
    kernel = gpu::GPUFuncOp::create(b, program.getLoc(), program.getName(),
                                    FunctionType::get(ctx, argTypes, {}));
    kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
    MmaKernelBuilder builder(kernel, smem, warpRows, useWgmma, wgmmaOverlap);
    if (failed(builder.plan(program)))
      return failure();
    if (builder.sharedBytes() > sharedLimit)
      return program.emitOpError("needs ")
             << builder.sharedBytes() << " bytes of shared memory, more than " << sharedLimit;
    kernel.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({static_cast<int32_t>(builder.numThreads()), 1, 1}));
    kernel->setAttr("tessel.dynamic_shared_bytes", b.getI64IntegerAttr(builder.sharedBytes()));
    kernel->setAttr("tessel.shared_bytes", b.getI64IntegerAttr(builder.sharedBytes()));
    kernel->setAttr("tessel.codegen", b.getStringAttr(useWgmma ? "wgmma" : "mma"));
    return builder.build(program);
  }
};

} // namespace
