//===- PipelineLoads.cpp - copies of later iterations in flight ------------===//
//
// tilegpu-pipeline-loads: software pipelining of the shared-memory ring (Passes.td says the
// schedule). The copies of a loop body are moved as a group: one commit group per iteration,
// carried through the loop as a token, so the waits name what they wait for.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUPIPELINELOADS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// One load of the unpipelined form: copy → commit → wait(pending 0) → [fence] → barrier.
struct UnpipelinedLoad {
  AsyncCopyOp copy;
  AsyncCommitOp commit;
  AsyncWaitOp wait;
  FenceAsyncSharedOp fence;
  gpu::BarrierOp barrier;
};

/// Whether `stage` is `iteration mod stages` as allocate-shared writes it: a remui by the
/// constant `stages`.
bool isIterationModStages(Value stage, int64_t stages) {
  auto rem = stage.getDefiningOp<arith::RemUIOp>();
  APInt c;
  return rem && matchPattern(rem.getRhs(), m_ConstantInt(&c)) && c.getSExtValue() == stages;
}

/// The loads of `loop`'s body in allocate-shared's form, in body order, and their stage count;
/// empty when the loop has none or is not in that form.
SmallVector<UnpipelinedLoad> matchLoads(scf::ForOp loop, int64_t &stages) {
  SmallVector<UnpipelinedLoad> loads;
  stages = 0;
  for (auto copy : loop.getBody()->getOps<AsyncCopyOp>()) {
    UnpipelinedLoad l{copy, {}, {}, {}, {}};
    if (copy.getToken().hasOneUse())
      l.commit = dyn_cast<AsyncCommitOp>(*copy.getToken().getUsers().begin());
    if (l.commit && l.commit.getTokens().size() == 1 && l.commit.getGroup().hasOneUse())
      l.wait = dyn_cast<AsyncWaitOp>(*l.commit.getGroup().getUsers().begin());
    Operation *next = l.wait ? l.wait->getNextNode() : nullptr;
    if ((l.fence = dyn_cast_or_null<FenceAsyncSharedOp>(next)))
      next = next->getNextNode();
    if (l.wait && l.wait.getPending() == 0 && l.wait.getGroups().size() == 1)
      l.barrier = dyn_cast_or_null<gpu::BarrierOp>(next);
    int64_t s = copy.getBuffer().getType().getStages();
    bool invariant = llvm::all_of(copy.getOffsets(), [&](Value o) {
      return o == loop.getInductionVar() || loop.isDefinedOutsideOfLoop(o);
    });
    if (!l.barrier || !invariant || s < 2 || (stages && s != stages) || copy.getPredicate() ||
        !isIterationModStages(copy.getStage(), s) || !loop.isDefinedOutsideOfLoop(copy.getDesc()) ||
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

/// The copies of `loads` for the iteration at `iv` into `stage`, each only when `iv < ub`, as
/// one commit group; offsets that are the loop's induction variable (`loopIvs`: before and
/// after the loop is rebuilt) become `iv`.
Value issueGroup(OpBuilder &b, Location loc, ArrayRef<UnpipelinedLoad> loads,
                 ArrayRef<Value> loopIvs, Value iv, Value ub, Value stage) {
  auto tokenType = AsyncTokenType::get(b.getContext());
  Value inRange = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv, ub);
  SmallVector<Value> tokens;
  for (UnpipelinedLoad l : loads) {
    SmallVector<Value> offsets;
    for (Value o : l.copy.getOffsets())
      offsets.push_back(llvm::is_contained(loopIvs, o) ? iv : o);
    tokens.push_back(AsyncCopyOp::create(b, loc, tokenType, l.copy.getDesc(), offsets,
                                         l.copy.getBuffer(), stage, inRange));
  }
  return AsyncCommitOp::create(b, loc, tokenType, tokens);
}

/// (x + k) mod stages.
Value addMod(OpBuilder &b, Location loc, Value x, int64_t k, int64_t stages) {
  return arith::RemUIOp::create(b, loc, arith::AddIOp::create(b, loc, x, constI32(b, loc, k)),
                                constI32(b, loc, stages));
}

/// Erases `v`'s defining op and then its operands' when nothing uses them any more.
void eraseIfDead(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isOpTriviallyDead(op))
    return;
  SmallVector<Value> operands(op->getOperands());
  op->erase();
  for (Value o : operands)
    eraseIfDead(o);
}

LogicalResult pipeline(scf::ForOp loop) {
  int64_t stages;
  SmallVector<UnpipelinedLoad> loads = matchLoads(loop, stages);
  if (loads.empty())
    return success();
  bool fenced = llvm::any_of(loads, [](const UnpipelinedLoad &l) { return bool(l.fence); });
  Location loc = loop.getLoc();
  Value lb = loop.getLowerBound(), ub = loop.getUpperBound(), step = loop.getStep();
  IRRewriter rw(loop.getContext());
  rw.setInsertionPoint(loop);
  // Every thread is done with the ring (a previous loop may have used the same slots).
  gpu::BarrierOp::create(rw, loc);
  // The stage of the first iteration, then the groups of the first S - 1 iterations.
  SmallVector<Value> carried{constI32(rw, loc, 0)};
  for (int64_t k = 0; k + 1 < stages; ++k) {
    Value iv = k == 0
                   ? lb
                   : Value(arith::AddIOp::create(
                         rw, loc, lb, arith::MulIOp::create(rw, loc, step, constI32(rw, loc, k))));
    carried.push_back(
        issueGroup(rw, loc, loads, {loop.getInductionVar()}, iv, ub, constI32(rw, loc, k)));
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
        AsyncWaitOp::create(b, loc, ValueRange{inFlight.front()}, stages - 2);
        if (fenced)
          FenceAsyncSharedOp::create(b, loc);
        gpu::BarrierOp::create(b, loc);
        Value ahead = arith::AddIOp::create(
            b, loc, iv, arith::MulIOp::create(b, loc, step, constI32(b, loc, stages - 1)));
        Value next = issueGroup(b, loc, loads, {oldIv, iv}, ahead, newLoop.getUpperBound(),
                                addMod(b, loc, stage, stages - 1, stages));
        // The next iteration's stage, at the end of the body (where it is needed). The body
        // is still the old loop's here: it moves into the new loop after this callback.
        b.setInsertionPoint(loads.front().copy->getBlock()->getTerminator());
        SmallVector<Value> yields{addMod(b, loc, stage, 1, stages)};
        yields.append(inFlight.drop_front().begin(), inFlight.end());
        yields.push_back(next);
        for (UnpipelinedLoad &l : loads) {
          l.barrier.erase();
          if (l.fence)
            l.fence.erase();
          l.wait.erase();
          l.commit.erase();
          l.copy.erase();
        }
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
