//===- AsyncAccumulate.cpp - a loop's accumulating wgmma kept in flight ---===//
//
// tilegpu-async-accumulate (Passes.td says the schedule): in a GEMM's loop the only dot
// accumulates into the carried value, so its wgmma need not be waited for before the next
// iteration issues its own; waiting with one group in flight at the end of each iteration
// frees the stage read two iterations back, and tilegpu-pipeline-loads copies into that one.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUASYNCACCUMULATE
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// The dot of `loop` to keep in flight and the position of its accumulator among the carried
/// values, when the loop has the GEMM shape.
std::optional<std::pair<tile::DotOp, unsigned>> accumulatingDot(scf::ForOp loop) {
  int64_t stages;
  // Copies go S − 2 iterations ahead with a group in flight: at least two, else the copies
  // of the next iteration wait in the open (measured on the H200: three stages at 128x128
  // lost 7 %, 1000³ lost 30 %).
  if (matchUnpipelinedLoads(loop, stages).empty() || stages < 4)
    return std::nullopt;
  tile::DotOp found;
  for (Operation &op : *loop.getBody()) {
    if (isa<WgmmaOp, WgmmaWaitOp>(op))
      return std::nullopt;
    if (auto dot = dyn_cast<tile::DotOp>(op)) {
      if (found)
        return std::nullopt;
      found = dot;
    }
  }
  if (!found || !found.getB().getDefiningOp<LocalLoadOp>() ||
      !isa_and_nonnull<DotOperandEncodingAttr>(
          cast<RankedTensorType>(found.getA().getType()).getEncoding()))
    return std::nullopt;
  auto acc = dyn_cast<BlockArgument>(found.getAcc());
  if (!acc || acc.getOwner() != loop.getBody() || acc.getArgNumber() == 0 || !acc.hasOneUse() ||
      !found.getResult().hasOneUse())
    return std::nullopt;
  unsigned index = acc.getArgNumber() - 1;
  Operation *yield = loop.getBody()->getTerminator();
  OpOperand &use = *found.getResult().getUses().begin();
  if (use.getOwner() != yield || use.getOperandNumber() != index)
    return std::nullopt;
  return std::make_pair(found, index);
}

struct AsyncAccumulate : tessel::tilegpu::impl::TileGPUAsyncAccumulateBase<AsyncAccumulate> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(asyncAccumulate(getOperation())))
      signalPassFailure();
  }
};

} // namespace

LogicalResult tessel::tilegpu::asyncAccumulate(func::FuncOp program) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout || layout.getKind() != MmaKind::Wgmma)
    return success();
  SmallVector<scf::ForOp> loops;
  program.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops) {
    auto match = accumulatingDot(loop);
    if (!match)
      continue;
    auto [dot, index] = *match;
    auto read = dot.getB().getDefiningOp<LocalLoadOp>();
    OpBuilder b(dot);
    Location loc = dot.getLoc();
    auto wgmma = WgmmaOp::create(b, loc, dot.getResult().getType(), dot.getA(), read.getBuffer(),
                                 read.getStage(), dot.getAcc(), read.getTranspose());
    // The previous iteration's group is done: its stages may be overwritten.
    WgmmaWaitOp::create(b, loc, TypeRange{}, ValueRange{}, b.getI32IntegerAttr(1));
    dot.getResult().replaceAllUsesWith(wgmma.getResult());
    dot.erase();
    if (read->use_empty())
      read.erase();
    // The last iteration's group, drained after the loop.
    b.setInsertionPointAfter(loop);
    Value result = loop.getResult(index);
    auto drain = WgmmaWaitOp::create(b, loc, TypeRange{result.getType()}, ValueRange{result},
                                     b.getI32IntegerAttr(0));
    result.replaceUsesWithIf(drain.getResult(0),
                             [&](OpOperand &use) { return use.getOwner() != drain; });
    loop->setAttr("tilegpu.dots_in_flight", b.getI64IntegerAttr(1));
  }
  return success();
}
