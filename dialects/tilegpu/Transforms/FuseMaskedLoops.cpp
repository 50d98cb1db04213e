//===- FuseMaskedLoops.cpp - one key loop for tile-split-masked-loops' copies -----------===//
//
// tilegpu-fuse-masked-loops (Passes.td says what and why): the chain [mixed] all_true [mixed]
// that tile-split-masked-loops made of one key loop becomes the masked copy run over the
// chain's range, its mask or-ed with "this block is in the all_true range". The masked body
// is the original loop's, so it is right for every block; the guard only says where the
// mask is known to be all true, which the split proved. Half the code of an attention kernel
// on the fast paths (each copy is a pipeline of dots and softmax) for a uniform branch a block.
//
//===--------------------------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/MaskAnalysis.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Dominance.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUFUSEMASKEDLOOPS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
namespace tile = tessel::tile;

namespace {

/// The loop that continues `from` (its results carried into it and used nowhere else), with
/// only ops without memory effects between them; null if there is none.
scf::ForOp continuation(scf::ForOp from) {
  if (from.getNumResults() == 0 || from->getResult(0).use_empty())
    return {};
  auto next = dyn_cast<scf::ForOp>(*from->getResult(0).getUsers().begin());
  if (!next || next->getBlock() != from->getBlock() ||
      next.getLowerBound() != from.getUpperBound() || next.getStep() != from.getStep() ||
      next.getInitArgs() != ValueRange(from.getResults()))
    return {};
  for (Value r : from.getResults())
    for (Operation *user : r.getUsers())
      if (user != next)
        return {};
  for (Operation *op = from->getNextNode(); op != next; op = op->getNextNode())
    if (!isMemoryEffectFree(op))
      return {};
  return next;
}

/// The masked copies around the unmasked `middle`, as continuation() sees them; null where
/// there is none.
scf::ForOp maskedAfter(scf::ForOp middle) {
  scf::ForOp next = continuation(middle);
  return tile::hasBlockMaskKind(next, "mixed") ? next : scf::ForOp();
}
scf::ForOp maskedBefore(scf::ForOp middle) {
  if (middle.getInitArgs().empty())
    return {};
  auto prev = middle.getInitArgs().front().getDefiningOp<scf::ForOp>();
  return tile::hasBlockMaskKind(prev, "mixed") && continuation(prev) == middle ? prev
                                                                               : scf::ForOp();
}

/// The one mask of the `select(mask, s, -inf)`s in `loop`'s body, and those selects.
Value bodyMask(scf::ForOp loop, SmallVectorImpl<arith::SelectOp> &selects) {
  Value mask;
  for (Operation &op : loop.getBody()->without_terminator()) {
    auto select = dyn_cast<arith::SelectOp>(op);
    DenseElementsAttr other;
    if (!select || !isa<RankedTensorType>(select.getCondition().getType()) ||
        !matchPattern(select.getFalseValue(), m_Constant(&other)) || !other.isSplat() ||
        !isa<FloatType>(other.getElementType()) || !other.getSplatValue<APFloat>().isNegInfinity())
      continue;
    if (mask && select.getCondition() != mask)
      return {};
    mask = select.getCondition();
    selects.push_back(select);
  }
  return mask;
}

/// Whether the masked scores `select` feed the softmax as they are: select(mask, S·c, -inf)
/// with S a dot, read only by the row max and by exp2(x - m). convert-tile-to-mma branches
/// around the mask of that form. Other forms (a separated bias added after the select) would
/// compute the guard per element in every block, and ran wrong on the H200 in the 128×128
/// warp-specialized kernel (twenty-seventh session, cause not found), so they stay split.
bool feedsSoftmax(arith::SelectOp select) {
  auto mul = select.getTrueValue().getDefiningOp<arith::MulFOp>();
  if (!mul || !llvm::any_of(mul->getOperands(),
                            [](Value v) { return v.getDefiningOp<tile::DotOp>() != nullptr; }))
    return false;
  for (Operation *user : select->getUsers()) {
    if (auto reduce = dyn_cast<tile::ReduceOp>(user);
        reduce && reduce.getKind() == tile::ReduceKind::Max)
      continue;
    auto sub = dyn_cast<arith::SubFOp>(user);
    if (sub && sub.getLhs() == select.getResult() && !sub->use_empty() &&
        llvm::all_of(sub->getUsers(), [](Operation *u) { return isa<math::Exp2Op>(u); }))
      continue;
    return false;
  }
  return true;
}

/// Fuses the chain around the unmasked copy `middle`; whether it did.
bool fuseAround(scf::ForOp middle, DominanceInfo &dom) {
  scf::ForOp after = maskedAfter(middle), before = maskedBefore(middle);
  scf::ForOp keep = after ? after : before;
  if (!keep)
    return false;
  SmallVector<arith::SelectOp> selects;
  Value mask = bodyMask(keep, selects);
  if (!mask || !llvm::all_of(selects, feedsSoftmax) ||
      !dom.properlyDominates(middle.getLowerBound(), keep) ||
      !dom.properlyDominates(middle.getUpperBound(), keep))
    return false;
  // The guard, in the body: lb(middle) <= j (with a copy before) and j < ub(middle) (with
  // one after); the fused loop starts or ends at the middle's bounds otherwise.
  Location loc = middle.getLoc();
  OpBuilder b(keep.getBody(), keep.getBody()->begin());
  Value iv = keep.getInductionVar();
  Value guard;
  if (before)
    guard = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, iv, middle.getLowerBound());
  if (after) {
    Value below = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv,
                                        middle.getUpperBound());
    guard = guard ? Value(arith::AndIOp::create(b, loc, guard, below)) : below;
  }
  if (Operation *def = mask.getDefiningOp(); def && keep->isProperAncestor(def))
    b.setInsertionPointAfter(def);
  Value shown = tile::SplatOp::create(b, loc, mask.getType(), guard);
  Value guarded = arith::OrIOp::create(b, loc, mask, shown);
  for (arith::SelectOp select : selects)
    select.getConditionMutable().assign(guarded);

  // The range and the carried values of the chain.
  scf::ForOp first = before ? before : middle;
  scf::ForOp last = after ? after : middle;
  keep.getLowerBoundMutable().assign(first.getLowerBound());
  keep.getUpperBoundMutable().assign(last.getUpperBound());
  SmallVector<Value> inits(first.getInitArgs());
  keep.getInitArgsMutable().assign(inits);
  keep->setAttr(tile::kBlockMaskAttr, b.getStringAttr("guarded"));
  // Only `keep`'s results leave the chain; the other copies' feed the next copy only.
  if (!after) // keep is `before`: the chain's results are its own now
    middle->replaceAllUsesWith(keep->getResults());
  middle.erase();
  if (after && before)
    before.erase();
  return true;
}

struct TileGPUFuseMaskedLoopsPass
    : public tessel::tilegpu::impl::TileGPUFuseMaskedLoopsBase<TileGPUFuseMaskedLoopsPass> {
  void runOnOperation() override { tessel::tilegpu::fuseMaskedLoops(getOperation()); }
};

} // namespace

bool tessel::tilegpu::fuseMaskedLoops(func::FuncOp program) {
  SmallVector<scf::ForOp> middles;
  program.walk([&](scf::ForOp loop) {
    if (tile::hasBlockMaskKind(loop, "all_true"))
      middles.push_back(loop);
  });
  DominanceInfo dom(program);
  bool changed = false;
  for (scf::ForOp middle : middles)
    changed |= fuseAround(middle, dom);
  return changed;
}
