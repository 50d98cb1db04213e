//===- AllocateShared.cpp - loaded blocks into shared memory, explicitly --===//
//
// tilegpu-allocate-shared: every tile.load of a dot operand becomes a shared-memory buffer at
// the offset MmaClass.h plans, an async copy into it, the wait and barrier that make the copy
// visible, and a local load into the operand's register layout. The form is the unpipelined
// one (each copy waited for where the load was); pipelining moves the copies earlier.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/Builders.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUALLOCATESHARED
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// Shared memory a CTA may take for two to fit an sm_90 SM (228 KiB, 1 KiB reserved each): a
/// bulk_add staging buffer holds all the runs of its tile when the kernel stays within it,
/// else rounds of 32 (8.5 KiB for runs of 64 floats: the backward's key-rows program at d128
/// just fits).
constexpr int64_t kTwoCtaBytes = 228 * 1024 / 2 - 1024;
constexpr int64_t kBulkRuns = 32;

/// Every 2-D float32 tile.atomic_add whose descriptor has a constant unit stride (the runs)
/// and a constant 16-byte-multiple other stride becomes a tilegpu.bulk_add through a staging
/// buffer placed from `end` (one per block and buffer shape: the adds of a block take turns);
/// returns the new end of shared memory.
int64_t placeBulkAdds(func::FuncOp program, Value zero, int64_t end) {
  SmallVector<tile::AtomicAddOp> adds;
  program.walk([&](tile::AtomicAddOp add) { adds.push_back(add); });
  DenseMap<std::pair<Block *, Type>, Value> buffers;
  OpBuilder b(program.getContext());
  for (tile::AtomicAddOp add : adds) {
    auto type = cast<RankedTensorType>(add.getValue().getType());
    auto md = add.getDesc().getDefiningOp<tile::MakeDescOp>();
    if (add.getMask() || type.getRank() != 2 || !type.getElementType().isF32() || !md)
      continue;
    std::optional<int64_t> s0 = getConstantIntValue(md.getStrides()[0]),
                           s1 = getConstantIntValue(md.getStrides()[1]);
    if (!s0 || !s1)
      continue;
    int64_t runDim = *s0 == 1 ? 0 : *s1 == 1 ? 1 : -1;
    if (runDim < 0 || (runDim == 0 ? *s1 : *s0) * 4 % 16 != 0)
      continue;
    int64_t runLength = type.getShape()[runDim], runs = type.getShape()[1 - runDim];
    if (runLength % 4 != 0)
      continue;
    int64_t rowBytes = (runLength + 4) * 4;
    int64_t rows = llvm::alignTo(end, 128) + runs * rowBytes <= kTwoCtaBytes
                       ? runs
                       : std::min(runs, kBulkRuns);
    if (runs % rows != 0)
      continue;
    auto bufferType = SharedBufferType::get(b.getContext(), {rows, runLength + 4},
                                            type.getElementType(), 1, 0);
    Value &buffer = buffers[{add->getBlock(), bufferType}];
    if (!buffer) {
      end = llvm::alignTo(end, 128);
      b.setInsertionPointAfter(zero.getDefiningOp());
      buffer = AllocOp::create(b, add.getLoc(), bufferType, b.getI64IntegerAttr(end), nullptr);
      end += bufferType.getBytes();
    }
    b.setInsertionPoint(add);
    BulkAddOp::create(b, add.getLoc(), add.getDesc(), add.getOffsets(), add.getValue(), buffer,
                      b.getI64IntegerAttr(runDim));
    add.erase();
  }
  return end;
}

} // namespace

LogicalResult tessel::tilegpu::allocateShared(func::FuncOp program, int64_t stages, bool bulkAdds) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout)
    return program.emitOpError("has no tilegpu layouts: run tilegpu-assign-layouts first");
  if (stages < 1)
    return program.emitOpError("asks for ") << stages << " stages: the ring needs at least one";
  bool wgmma = layout.getKind() == MmaKind::Wgmma;
  FailureOr<MmaClassPlan> plan = planMmaClass(program, wgmma, layout.getWarpRows());
  if (failed(plan))
    return failure();
  OpBuilder b(program.getContext());
  b.setInsertionPointToStart(&program.getBody().front());
  Value zero = arith::ConstantOp::create(b, program.getLoc(), b.getI32IntegerAttr(0));
  int64_t outside = 0;
  for (auto [op, slot] : plan->loads) {
    auto load = cast<tile::LoadOp>(op);
    auto type = load.getResult().getType();
    bool streamed = slot.streamIndex >= 0;
    // A block kept transposed (LoadSlot::transposed) is stored [cols, rows].
    SmallVector<int64_t> shape(type.getShape());
    if (slot.transposed)
      std::reverse(shape.begin(), shape.end());
    auto bufferType = SharedBufferType::get(b.getContext(), shape, type.getElementType(),
                                            streamed ? stages : 1, swizzleBytes(slot.cols, wgmma));
    // A block the ring reuses (Q, read into registers once) sits in its last stage: the
    // prologue fills the others, so its copies fly while Q lands (tilegpu-sink-waits).
    int64_t lastStage = plan->ringStart + (stages - 1) * plan->stageBytes;
    if (!streamed && stages > 1 && slot.smemOffset < plan->ringStart + plan->stageBytes &&
        plan->ringStart < slot.smemOffset + bufferType.getBytes() &&
        bufferType.getBytes() <= plan->stageBytes && lastStage % 1024 == 0)
      slot.smemOffset = lastStage;
    if (!streamed)
      outside = std::max(outside, slot.smemOffset + bufferType.getBytes());
    b.setInsertionPointAfter(zero.getDefiningOp());
    // The ring's stages are whole: stage s of every loop-body buffer is one block of
    // stageBytes, so a buffer's stages are that far apart.
    auto alloc = AllocOp::create(b, load.getLoc(), bufferType, b.getI64IntegerAttr(slot.smemOffset),
                                 streamed ? b.getI64IntegerAttr(plan->stageBytes) : nullptr);
    if (slot.transposed)
      alloc->setAttr(kTransposedAttr, b.getUnitAttr());
    if (slot.byDescriptor)
      alloc->setAttr(kADescriptorAttr, b.getUnitAttr());
    Value buffer = alloc.getResult();
    b.setInsertionPoint(load);
    Location loc = load.getLoc();
    Value stage = zero;
    if (auto forOp = dyn_cast<scf::ForOp>(load->getParentOp()); forOp && !isTileLoop(forOp)) {
      // Iteration (iv - lb) / step reads stage iteration % stages.
      Value iteration = arith::DivUIOp::create(
          b, loc, arith::SubIOp::create(b, loc, forOp.getInductionVar(), forOp.getLowerBound()),
          forOp.getStep());
      stage = arith::RemUIOp::create(
          b, loc, iteration, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(stages)));
      // One stage: the previous iteration's reads of the buffer come before this copy.
      if (stages == 1)
        gpu::BarrierOp::create(b, loc);
    }
    // A slab of a block copied before (MmaClass.h, LoadSlot::viewOf) is read where that
    // block's copy landed: no copy of its own.
    if (!slot.viewOf) {
      // Once a tile: the previous tile's reads of the buffer (and of the ring's stages where
      // the buffer reuses them) come before this tile's copy.
      if (isTileLoop(load->getParentOp()))
        gpu::BarrierOp::create(b, loc);
      auto tokenType = AsyncTokenType::get(b.getContext());
      Value token = AsyncCopyOp::create(b, loc, tokenType, load.getDesc(), load.getOffsets(),
                                        buffer, stage, Value());
      Value group = AsyncCommitOp::create(b, loc, tokenType, ValueRange{token});
      AsyncWaitOp::create(b, loc, ValueRange{group}, 0);
      // wgmma reads B, and A blocks a loop streams, through the async proxy (by descriptor):
      // cp.async's writes (generic proxy) first. (An A block loaded once is fenced where the
      // lowering decides whether it stays in shared memory.)
      if (wgmma && (slot.role != LoadRole::A || streamed))
        FenceAsyncSharedOp::create(b, loc);
      gpu::BarrierOp::create(b, loc);
    }
    // One local load per way the block is read: as stored, and transposed (each tile.trans
    // of it becomes a read of the buffer with transpose).
    Value direct;
    for (OpOperand &use : llvm::make_early_inc_range(load.getResult().getUses())) {
      Operation *user = use.getOwner();
      if (auto trans = dyn_cast<tile::TransOp>(user)) {
        Value read = LocalLoadOp::create(b, loc, trans.getResult().getType(), buffer, stage, true);
        trans.getResult().replaceAllUsesWith(read);
        trans.erase();
        continue;
      }
      // Stored transposed, the block as loaded is the buffer read transposed.
      if (!direct)
        direct = LocalLoadOp::create(b, loc, type, buffer, stage, slot.transposed);
      use.set(direct);
    }
    load.erase();
  }
  int64_t end = std::max(outside, plan->ringStart + stages * plan->stageBytes);
  // B operands computed in registers (AssignLayouts' conversions to a B layout): each its own
  // buffer past the others (1024-byte aligned for the swizzle), written where the value is
  // made. Before the write, a barrier: the previous iteration's wgmma of every warp has read
  // the buffer (each warp waited for its own); after it, the fence and barrier of any block
  // a wgmma reads.
  SmallVector<ConvertLayoutOp> computedB;
  program.walk([&](ConvertLayoutOp cvt) {
    auto operand = dyn_cast_or_null<DotOperandEncodingAttr>(
        cvt.getResult().getType().getEncoding());
    if (operand && operand.getOperand() == 1)
      computedB.push_back(cvt);
  });
  for (ConvertLayoutOp cvt : computedB) {
    auto type = cvt.getResult().getType();
    auto bufferType = SharedBufferType::get(b.getContext(), type.getShape(), type.getElementType(),
                                            1, 128);
    end = llvm::alignTo(end, 1024);
    b.setInsertionPointAfter(zero.getDefiningOp());
    Value buffer = AllocOp::create(b, cvt.getLoc(), bufferType, b.getI64IntegerAttr(end), nullptr);
    end += bufferType.getBytes();
    b.setInsertionPoint(cvt);
    Location loc = cvt.getLoc();
    gpu::BarrierOp::create(b, loc);
    LocalStoreOp::create(b, loc, cvt.getInput(), buffer, zero);
    if (wgmma)
      FenceAsyncSharedOp::create(b, loc);
    gpu::BarrierOp::create(b, loc);
    Value read = LocalLoadOp::create(b, loc, type, buffer, zero, false);
    cvt.getResult().replaceAllUsesWith(read);
    cvt.erase();
  }
  if (wgmma && bulkAdds)
    end = placeBulkAdds(program, zero, end);
  program->setAttr("tilegpu.shared_bytes", b.getI64IntegerAttr(end));
  return success();
}

namespace {

struct AllocateShared : tessel::tilegpu::impl::TileGPUAllocateSharedBase<AllocateShared> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp program = getOperation();
    if (!program.isExternal() && failed(allocateShared(program, stages, bulkAdds)))
      signalPassFailure();
  }
};

} // namespace
