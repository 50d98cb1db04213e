//===- MmaClass.cpp - the attention class of the register-resident path ---===//
//
// The class check of the mma.sync/wgmma path and its whole-program plan: the register layout
// and a shared-memory slot per load (MmaClass.h). The reasons for refusing a program are the
// ones users see from codegen=auto's remarks, so their wording is kept stable.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/LoopLoads.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// The load outside loops, among `earlier` (planned before `ld`, in program order), of which
/// `ld`'s block is a whole 64-column slab in wgmma's layout of slabs one after the other, with
/// nothing written between them; and the slab's index.
std::pair<tile::LoadOp, int64_t>
coveringLoad(tile::LoadOp ld, const llvm::MapVector<Operation *, LoadSlot> &earlier) {
  auto type = ld.getResult().getType();
  std::optional<int64_t> col = getConstantIntValue(ld.getOffsets()[1]);
  if (type.getShape()[1] != 64 || !col)
    return {};
  for (auto &[op, slot] : earlier) {
    auto other = cast<tile::LoadOp>(op);
    std::optional<int64_t> otherCol = getConstantIntValue(other.getOffsets()[1]);
    if (slot.streamIndex >= 0 || slot.viewOf || other.getDesc() != ld.getDesc() ||
        other.getOffsets()[0] != ld.getOffsets()[0] || slot.rows != type.getShape()[0] ||
        other->getBlock() != ld->getBlock() || !otherCol)
      continue;
    int64_t slab = *col - *otherCol;
    if (slab < 0 || slab % 64 != 0 || slab + 64 > slot.cols)
      continue;
    bool written = false;
    for (Operation *it = other->getNextNode(); it && it != ld; it = it->getNextNode())
      written |= isa<tile::StoreOp, tile::AtomicAddOp>(it) || it->getNumRegions() > 0;
    if (!written)
      return {other, slab / 64};
  }
  return {};
}

/// Whether wgmma must read the A block `ld` (loaded outside loops) by descriptor: one loop
/// reads it, and a dot there has a computed A operand (P) of as many columns. ptxas 13.0 gave
/// such a Q's registers to P inside the loop, so every S after the first read P: seen on the
/// H100 at d128 128x128 (warp-specialized, 2026-12-06, thirty-seventh session) and at d64 64x64
/// and 128x64 (one warpgroup, forty-third session) with whole key blocks; Q and P of different
/// widths (d128 64x64, d64 64x32) and Q read in two loops were right.
bool readBesideEqualP(tile::LoadOp ld) {
  scf::ForOp loop;
  for (Operation *user : ld.getResult().getUsers()) {
    auto parent = user->getParentOfType<scf::ForOp>();
    if (!parent || isTileLoop(parent) || (loop && parent != loop))
      return false;
    loop = parent;
  }
  if (!loop)
    return false;
  int64_t cols = ld.getResult().getType().getShape()[1];
  bool equal = false;
  loop.walk([&](tile::DotOp dot) {
    equal |= !dot.getA().getDefiningOp<tile::LoadOp>() &&
             cast<ShapedType>(dot.getA().getType()).getShape()[1] == cols;
  });
  return equal;
}

LogicalResult plan(func::FuncOp program, bool wgmma, int64_t warpRowsOption, MmaClassPlan &plan) {
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
  int64_t blockM = qType.getShape()[0];
  Type operandType = qType.getElementType();
  plan.operandType = operandType;
  bool fp8 = isa<Float8E4M3FNType>(operandType);
  if (!operandType.isF16() && !operandType.isBF16() && !fp8)
    return queryLoad.emitOpError("loads ")
           << operandType << ": convert-tile-to-mma needs f16, bf16 or f8E4M3FN operands";
  if (fp8 && !wgmma)
    return queryLoad.emitOpError("loads f8E4M3FN: FP8 operands need wgmma (sm_90a), "
                                 "mma.sync's m16n8k16 takes 16-bit ones");
  // 192 rows: three warpgroups (wgmma only), FlashAttention-3's d64 block.
  if (blockM != 64 && blockM != 128 && !(wgmma && blockM == 192))
    return queryLoad.emitOpError("loads a block of ")
           << blockM << " rows: convert-tile-to-mma handles 64 or 128 (16 or 32 rows per warp), "
           << "or 192 with wgmma";
  // Rows per warp: 16 (one m16 tile) or 32 (two m16 tiles sharing every K/V ldmatrix, FA2's
  // d128 layout). Chosen: 32 for a 128-row block (4 warps), 16 otherwise.
  int64_t warpRows = warpRowsOption ? warpRowsOption : (blockM == 128 && !wgmma ? 32 : 16);
  if (warpRows != 16 && warpRows != 32)
    return program.emitOpError("asks for ")
           << warpRows << " rows per warp: convert-tile-to-mma handles 16 or 32";
  // wgmma: a warpgroup's m64 accumulator is four warps of 16 rows (one m16 tile each).
  if (wgmma && warpRows != 16)
    return program.emitOpError("asks for ")
           << warpRows << " rows per warp: codegen=wgmma runs 16 (a warpgroup of 4 warps per 64 "
           << "query rows)";
  int64_t numWarps = blockM / warpRows;
  int64_t numThreads = numWarps * 32;
  plan.layout = MmaEncodingAttr::get(program.getContext(),
                                     wgmma ? MmaKind::Wgmma : MmaKind::MmaSync, numWarps, warpRows);

  WalkResult walk = program.walk([&](Operation *op) -> WalkResult {
    if (isa<tile::SoftmaxOp>(op))
      return op->emitOpError("is a softmax: run tile-optimize (online softmax) first"),
             WalkResult::interrupt();
    if (isa<scf::IfOp, scf::WhileOp>(op))
      return op->emitOpError("is not supported by convert-tile-to-mma"), WalkResult::interrupt();
    if (auto forOp = dyn_cast<scf::ForOp>(op)) {
      if (streamingLoop(forOp))
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
                   << rt.getShape()[0] << " rows; convert-tile-to-mma keeps 2-D tiles of " << blockM
                   << " (query) rows in registers",
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
    // A row or column vector of 32-bit values (the backward's LSE and Δ): read from global
    // memory straight into the registers of the slice layout its consumers ask for.
    if (type.getRank() == 1 && type.getElementType().getIntOrFloatBitWidth() == 32)
      return WalkResult::advance();
    if (type.getRank() != 2 || type.getElementType() != operandType)
      return ld.emitOpError("loads ") << type << ": convert-tile-to-mma loads 2-D " << operandType
                                      << " blocks (dot operands) and 1-D 32-bit vectors",
             WalkResult::interrupt();
    LoadSlot p;
    p.rows = type.getShape()[0];
    // Columns of 16 bits: an FP8 block of 2n columns is laid out as a 16-bit one of n.
    int64_t elementCols = type.getShape()[1];
    p.cols = elementCols * operandType.getIntOrFloatBitWidth() / 16;
    // Head dims 64, 128 and 256 (FP8: 128 and 256): whole 64-column wgmma slabs and 16-byte
    // chunks that tile a row an even number of times per 128 threads; on wgmma also 192 (three
    // slabs, each copied as a block of its own: its row's 24 chunks do not divide the threads).
    // tessel.attention pads other head dims to the next of these.
    if (p.cols != 64 && p.cols != 128 && p.cols != 256 && !(wgmma && !fp8 && p.cols == 192))
      return ld.emitOpError("loads a block of ")
                 << elementCols << " columns: convert-tile-to-mma handles head dims 64, 128 and "
                 << "256 (" << (fp8 ? "128 and 256 of FP8: 128-byte rows" : "16-bit operands")
                 << ")",
             WalkResult::interrupt();
    int64_t copyThreads = copyingThreads(numThreads);
    if (p.rows % 16 != 0 || (p.rows * p.cols / 8) % copyThreads != 0)
      return ld.emitOpError("loads a block of ")
                 << p.rows << " rows that the " << copyThreads
                 << " threads cannot split into whole 16-byte chunks",
             WalkResult::interrupt();
    if (ld.getPadding().convertToDouble() != 0.0)
      return ld.emitOpError("pads with ") << ld.getPadding().convertToDouble()
                                          << ": convert-tile-to-mma's copies fill zeros",
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
    // A B block may be read as it is stored (V in P·V) and transposed (K in Q·Kᵀ), or both:
    // the backward reads K both ways in dQ's program, Q and dO in dK/dV's.
    auto isBRead = [&](OpOperand &use) {
      if (isDotB(use))
        return true;
      auto trans = dyn_cast<tile::TransOp>(use.getOwner());
      return trans && !trans.getResult().use_empty() &&
             llvm::all_of(trans.getResult().getUses(), isDotB);
    };
    // An A block may also be read transposed (wgmma only, by an MN-major descriptor): the
    // backward's K as the Kᵀ of dQᵀ = Kᵀ·dSᵀ beside its K·Qᵀ.
    auto isTransposedA = [&](OpOperand &use) {
      auto trans = dyn_cast<tile::TransOp>(use.getOwner());
      return trans && !trans.getResult().use_empty() &&
             llvm::all_of(trans.getResult().getUses(), isDotA);
    };
    auto isARead = [&](OpOperand &use) { return isDotA(use) || isTransposedA(use); };
    if (!result.use_empty() && llvm::all_of(result.getUses(), isARead)) {
      p.role = LoadRole::A;
      bool transposed = llvm::any_of(result.getUses(), isTransposedA);
      if (transposed && fp8)
        return ld.emitOpError("is an FP8 block read transposed as an A operand: wgmma reads "
                              "FP8 operands K-major only"),
               WalkResult::interrupt();
      if (transposed && !wgmma)
        return ld.emitOpError("is read transposed as an A operand, which convert-tile-to-mma "
                              "does on wgmma only (sm_90a)"),
               WalkResult::interrupt();
      // Transposed, its columns are the accumulator's rows: warpgroup w reads the 64-column
      // slab w.
      if (transposed && (p.cols != blockM || streamingLoop(ld)))
        return ld.emitOpError("is read transposed as an A operand: convert-tile-to-mma takes a "
                              "block loaded outside loops there, with as many columns as the "
                              "accumulator has rows (")
                   << blockM << ")",
               WalkResult::interrupt();
      // An A block is the query block (Q, read once) or, loaded in a loop, a slice of the
      // rows' reduction axis (a GEMM's A[m, k]); either way as tall as the accumulator.
      if (llvm::any_of(result.getUses(), isDotA) && p.rows != blockM)
        return ld.emitOpError("is an A operand of ")
                   << p.rows << " rows where the first dot's A block has " << blockM,
               WalkResult::interrupt();
      p.byDescriptor = wgmma && !transposed && !streamingLoop(ld) && readBesideEqualP(ld);
    } else if (!result.use_empty() && llvm::all_of(result.getUses(), isBRead)) {
      p.role = LoadRole::B;
      // wgmma reads FP8 operands K-major only. K in Q·Kᵀ is read transposed: K-major as
      // stored. V in P·V, read as stored, is kept transposed in shared memory: its copy
      // transposes it (docs/dev/fp8.md). A block read both ways would need both layouts.
      if (fp8 && llvm::any_of(result.getUses(), isDotB)) {
        if (!llvm::all_of(result.getUses(), isDotB) || !streamingLoop(ld))
          return ld.emitOpError("is an FP8 block read as stored as a B operand, and also "
                                "transposed or outside a loop: convert-tile-to-mma keeps such a "
                                "block transposed in shared memory (wgmma reads FP8 K-major), "
                                "for a loop's dots read as stored only"),
                 WalkResult::interrupt();
        p.transposed = true;
        std::swap(p.rows, elementCols);
        p.cols = elementCols * operandType.getIntOrFloatBitWidth() / 16;
        // 32 and 64 keys make rows of 32 and 64 bytes (swizzled over their width: head dim
        // 256's blocks); 128 and 256 fill 128-byte slabs.
        if (p.cols != 16 && p.cols != 32 && p.cols != 64 && p.cols != 128 && p.cols != 256)
          return ld.emitOpError("is an FP8 block of ")
                     << elementCols << " rows read as stored as a B operand: kept transposed, "
                     << "its rows must be 32 or 64 bytes or fill 128-byte slabs (32, 64, 128 or "
                     << "256 of them)",
                 WalkResult::interrupt();
      }
    } else {
      return ld.emitOpError("feeds something other than tile.dot operands, which "
                            "convert-tile-to-mma does not handle"),
             WalkResult::interrupt();
    }
    int64_t bytes = p.rows * p.cols * 2; // 16-bit columns
    auto forOp = dyn_cast<scf::ForOp>(ld->getParentOp());
    if (forOp && isTileLoop(forOp))
      forOp = nullptr;
    if (forOp) {
      // Copies for later iterations are issued ahead: their offsets must be computable
      // from the induction variable alone (an indirect loop's `list[t] * BLOCK` is).
      for (Value o : ld.getOffsets())
        if (!isIterationAddress(o, forOp))
          return ld.emitOpError("has offsets computed from values carried by the loop: "
                                "convert-tile-to-mma cannot issue its copies ahead"),
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
    } else if (ld->getBlock() != &tileBody(program)) {
      return ld.emitOpError("is nested in a region convert-tile-to-mma does not handle"),
             WalkResult::interrupt();
    } else if (auto [cover, slab] = wgmma && !fp8 ? coveringLoad(ld, plan.loads)
                                                  : std::pair<tile::LoadOp, int64_t>();
               cover) {
      p.viewOf = cover;
      p.smemOffset = plan.loads[cover].smemOffset + slab * p.rows * 128;
    } else {
      p.smemOffset = offset;
      offset += bytes;
    }
    plan.loads[ld.getOperation()] = p;
    return WalkResult::advance();
  });
  if (lw.wasInterrupted())
    return failure();
  SmallVector<int64_t> slotOffset;
  // wgmma: when the one load outside the loops is an A block (Q), it is read into registers
  // right after it lands (16 rows per warp: at most 32 registers), and a loop's prologue
  // passes a barrier before it issues anything, so the loops' stages may reuse its slot: d128
  // 64×64 needs 64 KiB instead of 80 (three CTAs per SM instead of two). A program with
  // several A blocks (the backward's) reads them from shared memory in the loop
  // (convert-tile-to-mma's takeAFragments): their slots stay theirs.
  // (Resident: up to head dim 128, 32 registers of 16 rows a warp; Q at d256 would take 64
  // and is read from its slot by every dot, so the slot stays its own.)
  // A block read by descriptor (LoadSlot::byDescriptor) keeps its slot too.
  int64_t outsideLoads = llvm::count_if(plan.loads,
                                        [](auto &entry) { return entry.second.streamIndex < 0; });
  bool onlyResidentA = outsideLoads == 1 && llvm::all_of(plan.loads, [](auto &entry) {
                         return entry.second.streamIndex >= 0 ||
                                (entry.second.role == LoadRole::A && entry.second.cols <= 128 &&
                                 !entry.second.byDescriptor);
                       });
  int64_t streamStart = wgmma && onlyResidentA ? 0 : offset;
  int64_t end = streamStart;
  for (int64_t bytes : streamSlotBytes) {
    slotOffset.push_back(end);
    end += bytes;
  }
  for (auto [op, index] : streamUsers)
    plan.loads[op].smemOffset = slotOffset[index];
  // Two stages of the loop-body loads: iteration j reads one while j+1's land in the other.
  plan.ringStart = streamStart;
  plan.stageBytes = end - streamStart;
  plan.sharedBytes = std::max(offset, end + plan.stageBytes);
  return success();
}

} // namespace

bool tessel::tilegpu::isTileLoop(Operation *op) {
  return isa<scf::ForOp>(op) && op->hasAttr(kTileLoopAttr);
}

LogicalResult tessel::tilegpu::markTileLoop(func::FuncOp program) {
  if (!program.getBody().hasOneBlock())
    return success();
  int found = 0;
  for (auto loop : program.getBody().front().getOps<scf::ForOp>()) {
    bool holdsLoops = false;
    loop.getBody()->walk([&](scf::ForOp) { holdsLoops = true; });
    if (!holdsLoops)
      continue;
    // A loop of loops carrying values is not a walk over independent tiles.
    if (loop.getNumResults() != 0)
      return loop.emitOpError("is a nested loop, which convert-tile-to-mma does not handle");
    if (++found > 1)
      return loop.emitOpError("is a second loop of loops: convert-tile-to-mma takes one tile "
                              "loop a program");
    loop->setAttr(kTileLoopAttr, UnitAttr::get(program.getContext()));
  }
  return success();
}

scf::ForOp tessel::tilegpu::streamingLoop(Operation *op) {
  for (auto loop = op->getParentOfType<scf::ForOp>(); loop;
       loop = loop->getParentOfType<scf::ForOp>())
    if (!isTileLoop(loop))
      return loop;
  return nullptr;
}

Block &tessel::tilegpu::tileBlock(Block &block) {
  for (auto loop : block.getOps<scf::ForOp>())
    if (isTileLoop(loop))
      return *loop.getBody();
  return block;
}

Block &tessel::tilegpu::tileBody(func::FuncOp program) {
  return tileBlock(program.getBody().front());
}

FailureOr<MmaClassPlan> tessel::tilegpu::planMmaClass(func::FuncOp program, bool wgmma,
                                                      int64_t warpRowsOption) {
  MmaClassPlan result;
  if (failed(plan(program, wgmma, warpRowsOption, result)))
    return failure();
  return result;
}

std::optional<SmallVector<tessel::tilegpu::SharedBytes>>
tessel::tilegpu::sharedBytesOf(Value buffer, Value stage) {
  auto alloc = buffer.getDefiningOp<AllocOp>();
  if (!alloc || !alloc.getOffset())
    return std::nullopt;
  SharedBufferType type = alloc.getResult().getType();
  std::optional<int64_t> only = stage ? getConstantIntValue(stage) : std::nullopt;
  SmallVector<SharedBytes> out;
  for (int64_t s = 0; s < type.getStages(); ++s)
    if (!only || *only == s) {
      int64_t begin = *alloc.getOffset() + s * alloc.getStageStride();
      out.push_back({begin, begin + type.getStageBytes()});
    }
  return out;
}

bool tessel::tilegpu::anyOverlap(ArrayRef<SharedBytes> a, ArrayRef<SharedBytes> b) {
  return llvm::any_of(a, [&](const SharedBytes &x) {
    return llvm::any_of(b, [&](const SharedBytes &y) { return x.overlaps(y); });
  });
}
