//===- PipelineLoads.cpp - copies of later iterations in flight ------------===//
//
// tilegpu-pipeline-loads: software pipelining of the shared-memory ring (Passes.td says the
// schedule). The copies of a loop body are moved as a group: one commit group per iteration,
// carried through the loop as a token, so the waits name what they wait for.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUPIPELINELOADS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// One load of the unpipelined form: copy → commit → wait(pending 0) → barrier.
struct UnpipelinedLoad {
  AsyncCopyOp copy;
  AsyncCommitOp commit;
  AsyncWaitOp wait;
  gpu::BarrierOp barrier;
};

/// The loads of `loop`'s body in allocate-shared's form, in body order, and their stage count;
/// empty when the loop has none or is not in that form.
SmallVector<UnpipelinedLoad> matchLoads(scf::ForOp loop, int64_t &stages) {
  SmallVector<UnpipelinedLoad> loads;
  stages = 0;
  for (auto copy : loop.getBody()->getOps<AsyncCopyOp>()) {
    UnpipelinedLoad l{copy, {}, {}, {}};
    if (copy.getToken().hasOneUse())
      l.commit = dyn_cast<AsyncCommitOp>(*copy.getToken().getUsers().begin());
    if (l.commit && l.commit.getTokens().size() == 1 && l.commit.getGroup().hasOneUse())
      l.wait = dyn_cast<AsyncWaitOp>(*l.commit.getGroup().getUsers().begin());
    if (l.wait && l.wait.getPending() == 0 && l.wait.getGroups().size() == 1)
      l.barrier = dyn_cast_or_null<gpu::BarrierOp>(l.wait->getNextNode());
    int64_t s = copy.getBuffer().getType().getStages();
    bool invariant = llvm::all_of(copy.getOffsets(), [&](Value o) {
      return o == loop.getInductionVar() || loop.isDefinedOutsideOfLoop(o);
    });
    if (!l.barrier || !invariant || s < 2 || (stages && s != stages) ||
        !loop.isDefinedOutsideOfLoop(copy.getDesc()) ||
        !loop.isDefinedOutsideOfLoop(copy.getBuffer()))
      return {};
    stages = s;
    loads.push_back(l);
  }
  return loads;
}

Value constI32(OpBuilder &b, Location loc, int64_t v) {
  return arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(v));
}

/// The copies of `loads` for the iteration at `iv` into `stage`, as one commit group; offsets
/// that are the loop's induction variable (`loopIvs`: before and after the loop is rebuilt)
/// become `iv`.
Value issueGroup(OpBuilder &b, Location loc, ArrayRef<UnpipelinedLoad> loads,
                 ArrayRef<Value> loopIvs, Value iv, Value stage) {
  auto tokenType = AsyncTokenType::get(b.getContext());
  SmallVector<Value> tokens;
  for (UnpipelinedLoad l : loads) {
    SmallVector<Value> offsets;
    for (Value o : l.copy.getOffsets())
      offsets.push_back(llvm::is_contained(loopIvs, o) ? iv : o);
    tokens.push_back(AsyncCopyOp::create(b, loc, tokenType, l.copy.getDesc(), offsets,
                                         l.copy.getBuffer(), stage));
  }
  return AsyncCommitOp::create(b, loc, tokenType, tokens);
}

LogicalResult pipeline(scf::ForOp loop) {
  int64_t stages;
  SmallVector<UnpipelinedLoad> loads = matchLoads(loop, stages);
  if (loads.empty())
    return success();
  Location loc = loop.getLoc();
  Value lb = loop.getLowerBound(), step = loop.getStep();
  IRRewriter rw(loop.getContext());
  rw.setInsertionPoint(loop);
  // Every thread is done with the ring (a previous loop may have used the same slots).
  gpu::BarrierOp::create(rw, loc);
  SmallVector<Value> groups;
  for (int64_t k = 0; k + 1 < stages; ++k) {
    Value iv = k == 0
                   ? lb
                   : Value(arith::AddIOp::create(
                         rw, loc, lb, arith::MulIOp::create(rw, loc, step, constI32(rw, loc, k))));
    groups.push_back(
        issueGroup(rw, loc, loads, {loop.getInductionVar()}, iv, constI32(rw, loc, k)));
  }
  Value oldIv = loop.getInductionVar();
  FailureOr<LoopLikeOpInterface> replaced = loop.replaceWithAdditionalYields(
      rw, groups, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location, ArrayRef<BlockArgument> inFlight) -> SmallVector<Value> {
        auto newLoop = cast<scf::ForOp>(inFlight.front().getOwner()->getParentOp());
        Value iv = newLoop.getInductionVar();
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(loads.front().copy);
        // This iteration's group (the oldest) has landed; younger ones may still fly.
        AsyncWaitOp::create(b, loc, ValueRange{inFlight.front()}, stages - 2);
        gpu::BarrierOp::create(b, loc);
        Value ahead = arith::MulIOp::create(b, loc, step, constI32(b, loc, stages - 1));
        Value iteration = arith::DivUIOp::create(b, loc, arith::SubIOp::create(b, loc, iv, lb),
                                                 step);
        Value stage = arith::RemUIOp::create(
            b, loc, arith::AddIOp::create(b, loc, iteration, constI32(b, loc, stages - 1)),
            constI32(b, loc, stages));
        Value next = issueGroup(b, loc, loads, {oldIv, iv},
                                arith::AddIOp::create(b, loc, iv, ahead), stage);
        for (UnpipelinedLoad &l : loads) {
          l.barrier.erase();
          l.wait.erase();
          l.commit.erase();
          l.copy.erase();
        }
        SmallVector<Value> yields(inFlight.drop_front().begin(), inFlight.end());
        yields.push_back(next);
        return yields;
      });
  if (failed(replaced))
    return failure();
  auto newLoop = cast<scf::ForOp>(replaced->getOperation());
  rw.setInsertionPointAfter(newLoop);
  // The copies issued past the last iteration land before the ring is used again.
  AsyncWaitOp::create(rw, loc, newLoop.getResults().take_back(groups.size()), 0);
  return success();
}

struct PipelineLoads : tessel::tilegpu::impl::TileGPUPipelineLoadsBase<PipelineLoads> {
  using Base::Base;

  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) { loops.push_back(loop); });
    for (scf::ForOp loop : loops)
      if (failed(pipeline(loop)))
        return signalPassFailure();
  }
};

} // namespace
