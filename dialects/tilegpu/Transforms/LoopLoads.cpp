//===- LoopLoads.cpp - the loads of a loop body as allocate-shared writes them ---===//

#include "tilegpu/Transforms/LoopLoads.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

using namespace mlir;

namespace tessel::tilegpu {

namespace {

/// Whether `stage` is `iteration mod stages` as allocate-shared writes it: a remui by the
/// constant `stages`.
bool isIterationModStages(Value stage, int64_t stages) {
  auto rem = stage.getDefiningOp<arith::RemUIOp>();
  APInt c;
  return rem && matchPattern(rem.getRhs(), m_ConstantInt(&c)) && c.getSExtValue() == stages;
}

} // namespace

void UnpipelinedLoad::erase() {
  barrier.erase();
  if (fence)
    fence.erase();
  wait.erase();
  commit.erase();
  copy.erase();
}

SmallVector<UnpipelinedLoad> matchUnpipelinedLoads(scf::ForOp loop, int64_t &stages) {
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

Value addMod(OpBuilder &b, Location loc, Value x, int64_t k, int64_t stages) {
  return arith::RemUIOp::create(b, loc, arith::AddIOp::create(b, loc, x, constI32(b, loc, k)),
                                constI32(b, loc, stages));
}

SmallVector<Value> offsetsAt(AsyncCopyOp copy, ArrayRef<Value> loopIvs, Value iv) {
  SmallVector<Value> offsets;
  for (Value o : copy.getOffsets())
    offsets.push_back(llvm::is_contained(loopIvs, o) ? iv : o);
  return offsets;
}

void eraseIfDead(Value v) {
  Operation *op = v.getDefiningOp();
  if (!op || !isOpTriviallyDead(op))
    return;
  SmallVector<Value> operands(op->getOperands());
  op->erase();
  for (Value o : operands)
    eraseIfDead(o);
}

} // namespace tessel::tilegpu
