//===- LoopLoads.cpp - the loads of a loop body as allocate-shared writes them ---===//

#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/IRMapping.h"
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
  SmallVector<Value> address{copy.getDesc()};
  llvm::append_range(address, copy.getOffsets());
  copy.erase();
  eraseIfDead(address);
}

SmallVector<UnpipelinedLoad> matchUnpipelinedLoads(scf::ForOp loop, int64_t &stages) {
  SmallVector<UnpipelinedLoad> loads;
  stages = 0;
  // A tile loop's copies (a persistent kernel's Q) are once a tile, not a stream.
  if (isTileLoop(loop))
    return loads;
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
    bool addressable = llvm::all_of(copy.getOffsets(),
                                    [&](Value o) { return isIterationAddress(o, loop); });
    if (!l.barrier || !addressable || s < 2 || (stages && s != stages) || copy.getPredicate() ||
        !isIterationModStages(copy.getStage(), s) || !isIterationAddress(copy.getDesc(), loop) ||
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

scf::ForOp peelFirstIteration(OpBuilder &rw, scf::ForOp loop, IRMapping &copy) {
  Location loc = loop.getLoc();
  Value second = arith::AddIOp::create(rw, loc, loop.getLowerBound(), loop.getStep());
  Value end = arith::MinSIOp::create(rw, loc, second, loop.getUpperBound());
  auto peel = cast<scf::ForOp>(rw.clone(*loop, copy));
  peel.getUpperBoundMutable().assign(end);
  loop.getLowerBoundMutable().assign(second);
  return peel;
}

bool isFirstIterationPeel(scf::ForOp loop) {
  auto ub = loop.getUpperBound().getDefiningOp<arith::MinSIOp>();
  auto second = ub ? ub.getLhs().getDefiningOp<arith::AddIOp>() : arith::AddIOp();
  return second && second.getLhs() == loop.getLowerBound() && second.getRhs() == loop.getStep();
}

std::pair<Value, Value> stageAndPhase(OpBuilder &b, Location loc, Value i, int64_t stages) {
  Value s = arith::RemUIOp::create(b, loc, i, constI32(b, loc, stages));
  Value lap = arith::DivUIOp::create(b, loc, i, constI32(b, loc, stages));
  return {s, arith::AndIOp::create(b, loc, lap, constI32(b, loc, 1))};
}

Value addMod(OpBuilder &b, Location loc, Value x, int64_t k, int64_t stages) {
  return arith::RemUIOp::create(b, loc, arith::AddIOp::create(b, loc, x, constI32(b, loc, k)),
                                constI32(b, loc, stages));
}

bool isIterationAddress(Value v, scf::ForOp loop) {
  if (v == loop.getInductionVar() || loop.isDefinedOutsideOfLoop(v))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def || def->getNumRegions() != 0 || def->getNumResults() != 1 ||
      isa<ShapedType>(v.getType()))
    return false;
  if (auto ls = dyn_cast<tile::LoadScalarOp>(def)) {
    if (!loop.isDefinedOutsideOfLoop(ls.getDesc()))
      return false;
  } else if (!isa<arith::ArithDialect>(def->getDialect()) && !isa<tile::MakeDescOp>(def)) {
    return false;
  }
  return llvm::all_of(def->getOperands(), [&](Value o) { return isIterationAddress(o, loop); });
}

namespace {

/// `v` (isIterationAddress in `loop`) for the iteration at `iv`, cloning its body slice once
/// per call (`done` keeps what was built).
Value valueAt(OpBuilder &b, Value v, scf::ForOp loop, ArrayRef<Value> loopIvs, Value iv,
              IRMapping &done) {
  if (llvm::is_contained(loopIvs, v))
    return iv;
  if (Value built = done.lookupOrNull(v))
    return built;
  Operation *def = v.getDefiningOp();
  if (!def || !loop->isAncestor(def))
    return v;
  for (Value o : def->getOperands())
    done.map(o, valueAt(b, o, loop, loopIvs, iv, done));
  Value copy = b.clone(*def, done)->getResult(0);
  done.map(v, copy);
  return copy;
}

} // namespace

CopyAddress addressAt(OpBuilder &b, AsyncCopyOp copy, scf::ForOp loop, ArrayRef<Value> loopIvs,
                      Value iv, IRMapping &built) {
  CopyAddress at{valueAt(b, copy.getDesc(), loop, loopIvs, iv, built), {}};
  for (Value o : copy.getOffsets())
    at.offsets.push_back(valueAt(b, o, loop, loopIvs, iv, built));
  return at;
}

void eraseIfDead(ArrayRef<Value> values) {
  // Operations, not values: a value whose op was erased on the way (reached twice, as a copy's
  // offset and through its descriptor) must not be looked at again.
  SmallVector<Operation *> work;
  for (Value v : values)
    if (Operation *op = v.getDefiningOp())
      work.push_back(op);
  llvm::SmallPtrSet<Operation *, 16> erased;
  while (!work.empty()) {
    Operation *op = work.pop_back_val();
    if (erased.contains(op) || !isOpTriviallyDead(op))
      continue;
    for (Value o : op->getOperands())
      if (Operation *def = o.getDefiningOp())
        work.push_back(def);
    erased.insert(op);
    op->erase();
  }
}

/// Whether the producer may compute `op` itself: scalar arithmetic, descriptors, grid queries
/// and scalar reads of global memory — what a copy's address is made of.
bool producerComputable(Operation *op) {
  if (op->getNumRegions() != 0 ||
      llvm::any_of(op->getResultTypes(), [](Type t) { return isa<RankedTensorType>(t); }))
    return false;
  if (isa<tile::MakeDescOp, tile::ProgramIdOp, tile::NumProgramsOp, tile::LoadScalarOp>(op))
    return true;
  return isMemoryEffectFree(op) &&
         !llvm::any_of(op->getOperandTypes(), [](Type t) { return isa<RankedTensorType>(t); });
}

/// `v` in the producer region: values from before the warp_specialize op as they are, the
/// others computed again there (their defining slice cloned; `map` keeps what was).
FailureOr<Value> producerValue(OpBuilder &b, Value v, IRMapping &map, Operation *outside) {
  if (Value known = map.lookupOrNull(v))
    return known;
  Operation *def = v.getDefiningOp();
  if (!def)
    return outside->isAncestor(v.getParentBlock()->getParentOp()) ? FailureOr<Value>(failure())
                                                                  : FailureOr<Value>(v);
  if (!outside->isAncestor(def))
    return v;
  if (!producerComputable(def))
    return failure();
  for (Value operand : def->getOperands())
    if (failed(producerValue(b, operand, map, outside)))
      return failure();
  Operation *clone = b.clone(*def, map);
  return clone->getResult(cast<OpResult>(v).getResultNumber());
}

} // namespace tessel::tilegpu
