//===- PingPong.cpp - the two consumer warpgroups take turns at the tensor cores ------------===//
//
// tilegpu-pingpong (Passes.td says the protocol): in a warp-specialized kernel of two consumer
// warpgroups whose loops issue their dots as a pair of wgmma groups (tilegpu-overlap-consumers),
// each warpgroup waits for its turn before issuing an iteration's pair and passes the turn once
// issued, so that one warpgroup's softmax runs while the other's dots do (FA3's ping-pong).
// Without it the two warpgroups drift into the same phase and their softmaxes collide. Loops
// whose dots stay synchronous take their turns around the softmax instead (from S to P·V), as
// cuDNN's Hopper kernel does (docs/bench/2026-12-04-h200-ncu-profile.md).
//
//===----------------------------------------------------------------------------------------===//

#include "tilegpu/Transforms/AttentionDots.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUPINGPONG
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// The loop body's pair: two wgmmas, with nothing between them but ops free of memory effects
/// (tilegpu-overlap-consumers' rescale of O for the second), then a wait with one group in
/// flight.
std::optional<std::pair<WgmmaOp, WgmmaOp>> issuedPair(scf::ForOp loop) {
  for (auto first : loop.getBody()->getOps<WgmmaOp>()) {
    Operation *next = first->getNextNode();
    while (next && !isa<WgmmaOp>(next) && isMemoryEffectFree(next) && next->getNumRegions() == 0)
      next = next->getNextNode();
    auto second = dyn_cast_or_null<WgmmaOp>(next);
    auto wait = second ? dyn_cast_or_null<WgmmaWaitOp>(second->getNextNode()) : WgmmaWaitOp();
    if (wait && wait.getPending() == 1)
      return std::make_pair(first, second);
  }
  return std::nullopt;
}

struct PingPong : tessel::tilegpu::impl::TileGPUPingPongBase<PingPong> {
  using Base::Base;

  void runOnOperation() override { pingPong(getOperation()); }
};

} // namespace

bool tessel::tilegpu::pingPong(func::FuncOp program) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout || layout.getWarps() != 8)
    return false;
  bool changed = false;
  program.walk([&](WarpSpecializeOp ws) {
    Block &consumers = ws.getConsumers().front();
    // Each turn as the op it starts before and the op it ends after.
    SmallVector<std::pair<Operation *, Operation *>> turns;
    for (auto loop : tileBlock(consumers).getOps<scf::ForOp>()) {
      if (auto pair = issuedPair(loop))
        turns.push_back({pair->first, pair->second});
      else if (std::optional<AttentionDots> dots = matchAttentionDots(loop))
        turns.push_back({dots->sDot->getNextNode(), dots->pvDot->getPrevNode()});
    }
    if (turns.empty())
      return;
    OpBuilder b(program.getContext());
    b.setInsertionPointToStart(&consumers);
    TurnStartOp::create(b, ws.getLoc());
    for (auto [start, end] : turns) {
      b.setInsertionPoint(start);
      TurnWaitOp::create(b, start->getLoc());
      b.setInsertionPointAfter(end);
      TurnPassOp::create(b, end->getLoc());
    }
    changed = true;
  });
  return changed;
}
