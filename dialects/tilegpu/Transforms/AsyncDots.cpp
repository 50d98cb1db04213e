//===- AsyncDots.cpp - wgmma dots issued where they stand, waited for where used ------===//
//
// tilegpu-async-dots: on a wgmma program in allocate-shared's form, every tile.dot whose B is a
// local load becomes a tilegpu.wgmma where it stands, and a tilegpu.wgmma_wait goes before the
// first op that uses its result. Commit groups complete in the order they were issued, so the
// wait names every group up to the one needed and leaves the younger ones in flight
// (`pending`). Independent dots that follow each other then run back to back on the tensor
// cores, and the code between a dot and its first use runs under it (the backward's dSᵀ under
// dV's wgmma). Blocks that already hold tilegpu.wgmma (tilegpu-overlap-wgmma's loops) are left
// alone. With `eager` (tilegpu-async-dots{eager}), every dot left anywhere becomes a wgmma
// waited for at once: the form convert-tile-to-mma lowers a wgmma dot in, so that one pattern
// (tilegpu.wgmma, tilegpu.wgmma_wait) emits every wgmma.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/IR/Builders.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUASYNCDOTS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// The local load of `dot`'s B operand, when the dot can be a tilegpu.wgmma.
LocalLoadOp bRead(tile::DotOp dot) {
  auto read = dot.getB().getDefiningOp<LocalLoadOp>();
  auto aType = cast<RankedTensorType>(dot.getA().getType());
  if (!read || !isa_and_nonnull<DotOperandEncodingAttr>(aType.getEncoding()))
    return {};
  return read;
}

/// Whether `op` or an op nested in it reads `v`.
bool reads(Operation *op, Value v) {
  bool found = false;
  op->walk([&](Operation *inner) {
    if (llvm::is_contained(inner->getOperands(), v))
      found = true;
  });
  return found;
}

void scheduleBlock(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  // The groups in flight, oldest first: the value each wgmma's result is known by.
  SmallVector<Value> inFlight;
  OpBuilder b(block.getParentOp()->getContext());
  for (Operation *op : ops) {
    // Wait for the youngest group this op reads, with every older one.
    int64_t needed = -1;
    for (auto [i, v] : llvm::enumerate(inFlight))
      if (reads(op, v))
        needed = i;
    if (op->hasTrait<OpTrait::IsTerminator>() && !inFlight.empty())
      needed = inFlight.size() - 1;
    if (needed >= 0) {
      b.setInsertionPoint(op);
      SmallVector<Value> done(inFlight.begin(), inFlight.begin() + needed + 1);
      auto wait = WgmmaWaitOp::create(b, op->getLoc(), TypeRange(ValueRange(done)), done,
                                      b.getI32IntegerAttr(inFlight.size() - needed - 1));
      for (auto [old, now] : llvm::zip(done, wait.getResults()))
        old.replaceUsesWithIf(now, [&](OpOperand &use) { return use.getOwner() != wait; });
      inFlight.erase(inFlight.begin(), inFlight.begin() + needed + 1);
    }
    auto dot = dyn_cast<tile::DotOp>(op);
    if (!dot)
      continue;
    LocalLoadOp read = bRead(dot);
    b.setInsertionPoint(dot);
    auto wgmma = WgmmaOp::create(b, dot.getLoc(), dot.getResult().getType(), dot.getA(),
                                 read.getBuffer(), read.getStage(), dot.getAcc(),
                                 read.getTranspose());
    dot.getResult().replaceAllUsesWith(wgmma.getResult());
    dot.erase();
    if (read->use_empty())
      read.erase();
    inFlight.push_back(wgmma.getResult());
  }
}

/// `dot` as a tilegpu.wgmma waited for right after it (pending 0).
void issueAndWait(tile::DotOp dot, LocalLoadOp read) {
  OpBuilder b(dot);
  auto wgmma = WgmmaOp::create(b, dot.getLoc(), dot.getResult().getType(), dot.getA(),
                               read.getBuffer(), read.getStage(), dot.getAcc(),
                               read.getTranspose());
  auto wait = WgmmaWaitOp::create(b, dot.getLoc(), TypeRange{wgmma.getResult().getType()},
                                  ValueRange{wgmma.getResult()}, b.getI32IntegerAttr(0));
  dot.getResult().replaceAllUsesWith(wait.getResult(0));
  dot.erase();
  if (read->use_empty())
    read.erase();
}

struct AsyncDots : tessel::tilegpu::impl::TileGPUAsyncDotsBase<AsyncDots> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(asyncDots(getOperation(), eager)))
      signalPassFailure();
  }
};

} // namespace

LogicalResult tessel::tilegpu::asyncDots(func::FuncOp program, bool eager) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout || layout.getKind() != MmaKind::Wgmma)
    return success();
  if (eager) {
    SmallVector<std::pair<tile::DotOp, LocalLoadOp>> dots;
    program.walk([&](tile::DotOp dot) {
      if (LocalLoadOp read = bRead(dot))
        dots.push_back({dot, read});
    });
    for (auto [dot, read] : dots)
      issueAndWait(dot, read);
    return success();
  }
  SmallVector<Block *> blocks;
  program.walk([&](Block *block) {
    bool hasDot = false, convertible = true, scheduled = false;
    for (Operation &op : *block) {
      if (auto dot = dyn_cast<tile::DotOp>(op)) {
        hasDot = true;
        convertible &= bool(bRead(dot));
      }
      scheduled |= isa<WgmmaOp, WgmmaWaitOp>(op);
    }
    if (hasDot && convertible && !scheduled)
      blocks.push_back(block);
  });
  for (Block *block : blocks)
    scheduleBlock(*block);
  return success();
}
