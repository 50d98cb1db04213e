//===- PipelineLoads.cpp - copies of later iterations in flight ------------===//
//
// tilegpu-pipeline-loads: software pipelining of the shared-memory ring (Passes.td says the
// schedule). The copies of a loop body are moved as a group: one commit group per iteration,
// carried through the loop as a token, so the waits name what they wait for.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/SetVector.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUPIPELINELOADS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// The copies of `loads` (in `loop`) for the iteration at `iv` into `stage`, each only when
/// `iv < ub`, as one commit group; their descriptors and offsets computed for `iv` (`loopIvs`:
/// the induction variable before and after the loop is rebuilt).
Value issueGroup(OpBuilder &b, Location loc, scf::ForOp loop, ArrayRef<UnpipelinedLoad> loads,
                 ArrayRef<Value> loopIvs, Value iv, Value ub, Value stage) {
  auto tokenType = AsyncTokenType::get(b.getContext());
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv, ub);
  SmallVector<Value> tokens;
  IRMapping built;
  for (UnpipelinedLoad l : loads) {
    CopyAddress at = addressAt(b, l.copy, loop, loopIvs, iv, built);
    tokens.push_back(AsyncCopyOp::create(b, loc, tokenType, at.desc, at.offsets, l.copy.getBuffer(),
                                         stage, inRange));
  }
  return AsyncCommitOp::create(b, loc, tokenType, tokens);
}

LogicalResult pipeline(scf::ForOp loop) {
  int64_t stages;
  SmallVector<UnpipelinedLoad> loads = matchUnpipelinedLoads(loop, stages);
  if (loads.empty())
    return success();
  bool fenced = llvm::any_of(loads, [](const UnpipelinedLoad &l) { return bool(l.fence); });
  // Copies go `ahead` iterations ahead: S − 1, less the wgmma groups the loop keeps in flight
  // (whose stages are still being read).
  int64_t dotsInFlight = 0;
  if (auto attr = loop->getAttrOfType<IntegerAttr>("tilegpu.dots_in_flight"))
    dotsInFlight = attr.getInt();
  int64_t ahead = stages - 1 - dotsInFlight;
  if (ahead < 1)
    return loop.emitOpError("keeps ") << dotsInFlight << " wgmma groups in flight over a ring of "
                                      << stages << " stages: no stage is left to copy into";
  Location loc = loop.getLoc();
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound(), step = loop.getStep();
  IRRewriter rw(loop.getContext());
  rw.setInsertionPoint(loop);
  // Every thread is done with the ring (a previous loop may have used the same slots).
  gpu::BarrierOp::create(rw, loc);
  // The stage of the first iteration, then the groups of the first `ahead` iterations.
  SmallVector<Value> carried{constI32(rw, loc, 0)};
  for (int64_t k = 0; k < ahead; ++k) {
    Value iv = k == 0
                   ? lb
                   : Value(arith::AddIOp::create(
                         rw, loc, lb, arith::MulIOp::create(rw, loc, step, constI32(rw, loc, k))));
    carried.push_back(
        issueGroup(rw, loc, loop, loads, {loop.getInductionVar()}, iv, ub, constI32(rw, loc, k)));
  }
  Value oldIv = loop.getInductionVar();
  llvm::SetVector<Value> oldStages;
  for (UnpipelinedLoad &l : loads)
    oldStages.insert(l.copy.getStage());
  FailureOr<LoopLikeOpInterface> replaced = loop.replaceWithAdditionalYields(
      rw, carried, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location, ArrayRef<BlockArgument> args) -> SmallVector<Value> {
        auto newLoop = cast<scf::ForOp>(args.front().getOwner()->getParentOp());
        Value iv = newLoop.getInductionVar();
        Value stage = args.front();
        ArrayRef<BlockArgument> inFlight = args.drop_front();
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(loads.front().copy);
        // This iteration's group (the oldest) has landed; younger ones may still fly.
        AsyncWaitOp::create(b, loc, ValueRange{inFlight.front()}, ahead - 1);
        if (fenced)
          FenceAsyncSharedOp::create(b, loc);
        gpu::BarrierOp::create(b, loc);
        Value aheadIv = arith::AddIOp::create(
            b, loc, iv, arith::MulIOp::create(b, loc, step, constI32(b, loc, ahead)));
        Value next = issueGroup(b, loc, loop, loads, {oldIv, iv}, aheadIv, newLoop.getUpperBound(),
                                addMod(b, loc, stage, ahead, stages));
        // The next iteration's stage, at the end of the body (where it is needed). The body
        // is still the old loop's here: it moves into the new loop after this callback.
        b.setInsertionPoint(loads.front().copy->getBlock()->getTerminator());
        SmallVector<Value> yields{addMod(b, loc, stage, 1, stages)};
        yields.append(inFlight.drop_front().begin(), inFlight.end());
        yields.push_back(next);
        for (UnpipelinedLoad &l : loads)
          l.erase();
        // The local loads read the carried stage.
        for (Value old : oldStages) {
          old.replaceAllUsesWith(stage);
          eraseIfDead(old);
        }
        return yields;
      });
  // No wait after the loop: the groups still in flight there are those of iterations past its
  // end, whose copies were predicated off.
  return failure(failed(replaced));
}

struct PipelineLoads : tessel::tilegpu::impl::TileGPUPipelineLoadsBase<PipelineLoads> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(pipelineLoads(getOperation())))
      signalPassFailure();
  }
};

} // namespace

LogicalResult tessel::tilegpu::pipelineLoads(func::FuncOp program) {
  SmallVector<scf::ForOp> loops;
  program.walk([&](scf::ForOp loop) { loops.push_back(loop); });
  for (scf::ForOp loop : loops)
    if (failed(pipeline(loop)))
      return failure();
  return success();
}
