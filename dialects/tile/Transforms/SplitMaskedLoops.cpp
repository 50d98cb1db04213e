//===- SplitMaskedLoops.cpp - skip hidden blocks, unmask full ones --------===//
//
// For a key-block loop whose scores are masked with select(mask, s, -inf), the mask analysis
// gives each atom `d(j) pred 0` with d affine in the induction variable j. Over one block, d
// ranges over [base(j) + minOffset, base(j) + maxOffset], so "all-true" and "all-false" become
// linear inequalities in the iteration number k — each a prefix or a suffix of the iterations.
// The loop is split into three: [a, b) masked, [b, c) unmasked, [c, d) masked, with [0, a) and
// [d, K) skipped as all-false. Bounds are computed in i64 before the loop.
//
// The mask is split on its top-level conjuncts (`a & b & ...`): those the analysis classifies
// decide the bounds, the others stay element-wise. When some conjunct is not classified (a
// modulo, a lookup, an index computed per block), the loop is still split on the rest — the
// causal part of `causal & dilated(...)` keeps its block skipping — and the middle loop runs
// only the unclassified conjuncts (`tile.block_mask = "residual"` instead of "all_true"). A
// remark on the loop names the conjuncts that were and were not classified.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/MaskAnalysis.h"
#include "tile/Transforms/Passes.h"

#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

#include <limits>

namespace tessel::tile {
#define GEN_PASS_DEF_TILESPLITMASKEDLOOPS
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;
using namespace tessel::tile;

namespace {
// Emits i64 arithmetic for the bounds, folding constants as it goes.
struct BoundBuilder {
  OpBuilder &b;
  Location loc;

  Value c(int64_t v) { return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v); }
  Value toI64(Value v) {
    if (v.getType().isIndex())
      return arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
    if (v.getType().getIntOrFloatBitWidth() < 64)
      return arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
    return v;
  }
  Value fromI64(Value v, Type type) {
    if (type.isIndex())
      return arith::IndexCastOp::create(b, loc, type, v);
    if (type.getIntOrFloatBitWidth() < 64)
      return arith::TruncIOp::create(b, loc, type, v);
    return v;
  }
  Value add(Value x, Value y) { return arith::AddIOp::create(b, loc, x, y); }
  Value mul(Value x, int64_t k) { return arith::MulIOp::create(b, loc, x, c(k)); }
  Value max(Value x, Value y) { return arith::MaxSIOp::create(b, loc, x, y); }
  Value min(Value x, Value y) { return arith::MinSIOp::create(b, loc, x, y); }
  Value clamp(Value x, Value lo, Value hi) { return min(max(x, lo), hi); }
  Value linear(const LinearExpr &e) { return emitLinear(b, loc, e, b.getI64Type()); }
};

// The iterations k in [0, K) where `a·k + b >= 0`, as [lo, hi) clamped to [0, K).
std::pair<Value, Value> solve(BoundBuilder &bb, int64_t a, Value b, Value zero, Value count) {
  if (a > 0) { // k >= ceil(-b / a): a suffix
    Value lo = arith::CeilDivSIOp::create(bb.b, bb.loc, bb.mul(b, -1), bb.c(a));
    return {bb.clamp(lo, zero, count), count};
  }
  if (a < 0) { // k <= floor(b / -a): a prefix
    Value last = arith::FloorDivSIOp::create(bb.b, bb.loc, b, bb.c(-a));
    return {zero, bb.clamp(bb.add(last, bb.c(1)), zero, count)};
  }
  // Same answer for every iteration: everything or nothing, as a prefix.
  Value holds = arith::CmpIOp::create(bb.b, bb.loc, arith::CmpIPredicate::sge, b, zero);
  return {zero, arith::SelectOp::create(bb.b, bb.loc, holds, count, zero)};
}

// Iterations [lo, hi) of the loop, clamped to [0, K); lo >= hi is empty.
struct Interval {
  Value lo, hi;
};

// For a mask: iterations where it is proven all-true over the block (an under-approximation),
// and iterations where it may be true somewhere (an over-approximation of the complement of
// all-false). Skipping outside `live` and dropping the mask inside `allTrue` are then both safe.
struct IterationSets {
  Interval allTrue, live;
};

// The union of two intervals is not always one interval: the hull over-approximates it, so it is
// used for `live`; for `allTrue` it is used only when the two overlap or touch, else the longer
// one stands for both (an under-approximation). Empty operands never widen the result.
Interval unite(BoundBuilder &bb, Interval a, Interval c, bool overApproximate) {
  auto empty = [&](Interval x) {
    return arith::CmpIOp::create(bb.b, bb.loc, arith::CmpIPredicate::sge, x.lo, x.hi);
  };
  auto pick = [&](Value cond, Interval x, Interval y) {
    return Interval{arith::SelectOp::create(bb.b, bb.loc, cond, x.lo, y.lo),
                    arith::SelectOp::create(bb.b, bb.loc, cond, x.hi, y.hi)};
  };
  Interval hull{bb.min(a.lo, c.lo), bb.max(a.hi, c.hi)};
  Interval joined = hull;
  if (!overApproximate) {
    Value touch = arith::CmpIOp::create(bb.b, bb.loc, arith::CmpIPredicate::sle, bb.max(a.lo, c.lo),
                                        bb.min(a.hi, c.hi));
    Value aLonger = arith::CmpIOp::create(bb.b, bb.loc, arith::CmpIPredicate::sge,
                                          arith::SubIOp::create(bb.b, bb.loc, a.hi, a.lo),
                                          arith::SubIOp::create(bb.b, bb.loc, c.hi, c.lo));
    joined = pick(touch, hull, pick(aLonger, a, c));
  }
  return pick(empty(a), c, pick(empty(c), a, joined));
}

IterationSets classify(BoundBuilder &bb, const AffineMask &mask, Value iv, Value lb, int64_t step,
                       Value zero, Value count) {
  using K = AffineMask::Kind;
  if (mask.kind == K::True)
    return {{zero, count}, {zero, count}};
  if (mask.kind == K::And || mask.kind == K::Or) {
    IterationSets l = classify(bb, mask.operands[0], iv, lb, step, zero, count);
    IterationSets r = classify(bb, mask.operands[1], iv, lb, step, zero, count);
    auto meet = [&](Interval a, Interval c) {
      return Interval{bb.max(a.lo, c.lo), bb.min(a.hi, c.hi)};
    };
    if (mask.kind == K::And) // all-true of both; live only where both may be true
      return {meet(l.allTrue, r.allTrue), meet(l.live, r.live)};
    return {unite(bb, l.allTrue, r.allTrue, /*overApproximate=*/false),
            unite(bb, l.live, r.live, /*overApproximate=*/true)};
  }
  const MaskAtom &atom = mask.atom;
  int64_t cj = atom.diff.base.coefficientOf(iv);
  LinearExpr rest = atom.diff.base;
  rest.terms.erase(iv);
  // d over the block, at iteration k: cj·(lb + k·step) + rest + offset.
  auto condition = [&](int64_t sign, int64_t offset, int64_t extra) {
    Value b0 = bb.add(bb.add(bb.mul(lb, cj), bb.linear(rest)), bb.c(offset));
    return solve(bb, sign * cj * step, bb.add(bb.mul(b0, sign), bb.c(extra)), zero, count);
  };
  int64_t dmin = atom.diff.minOffset(), dmax = atom.diff.maxOffset();
  using P = arith::CmpIPredicate;
  std::pair<Value, Value> allTrue, allFalse;
  int64_t falseSign; // the sign of k's coefficient in the all-false inequality
  switch (atom.predicate) {
  case P::sge:
    allTrue = condition(1, dmin, 0);
    allFalse = condition(-1, dmax, -1);
    falseSign = -1;
    break;
  case P::sgt:
    allTrue = condition(1, dmin, -1);
    allFalse = condition(-1, dmax, 0);
    falseSign = -1;
    break;
  case P::sle:
    allTrue = condition(-1, dmax, 0);
    allFalse = condition(1, dmin, -1);
    falseSign = 1;
    break;
  default:
    allTrue = condition(-1, dmax, -1);
    allFalse = condition(1, dmin, 0);
    falseSign = 1;
    break;
  }
  // All-false is a suffix [first, K) when its inequality grows with k, else a prefix [0, second);
  // the iterations that may be true are the rest.
  Interval live = falseSign * cj > 0 ? Interval{zero, allFalse.first}
                                     : Interval{allFalse.second, count};
  return {{allTrue.first, allTrue.second}, live};
}

// The top-level conjuncts of an i1 tile: the leaves of its tree of arith.andi.
void collectConjuncts(Value mask, SmallVectorImpl<Value> &out) {
  if (auto andOp = mask.getDefiningOp<arith::AndIOp>()) {
    collectConjuncts(andOp.getLhs(), out);
    collectConjuncts(andOp.getRhs(), out);
    return;
  }
  out.push_back(mask);
}

// Whether a classified mask still depends on something computed per block (then the loop
// cannot be split on it) or uses a predicate the split cannot solve.
bool dependsPerBlock(const AffineMask &mask, scf::ForOp loop) {
  Value iv = loop.getInductionVar();
  bool perBlock = false;
  mask.forEachAtom([&](const MaskAtom &atom) {
    for (auto [sym, coef] : atom.diff.base.terms)
      perBlock |= sym != iv && !loop.isDefinedOutsideOfLoop(sym);
    perBlock |= !llvm::is_contained({arith::CmpIPredicate::slt, arith::CmpIPredicate::sle,
                                     arith::CmpIPredicate::sgt, arith::CmpIPredicate::sge},
                                    atom.predicate);
  });
  return perBlock;
}

// Whether `conjunct` is `splat(iv != lb) | x` (either order): true after the loop's first
// iteration, as the DSL writes a block run first (attention_rows' DIAGONAL_FIRST, TAIL_FIRST).
// Not a split: the overlapped consumers peel the first iteration and LLVM folds the rest.
bool firstIterationOnly(Value conjunct, scf::ForOp loop) {
  auto orOp = conjunct.getDefiningOp<arith::OrIOp>();
  if (!orOp)
    return false;
  auto notFirst = [&](Value v) {
    auto splat = v.getDefiningOp<SplatOp>();
    auto cmp = splat ? splat.getValue().getDefiningOp<arith::CmpIOp>() : arith::CmpIOp();
    if (!cmp || cmp.getPredicate() != arith::CmpIPredicate::ne)
      return false;
    Value iv = loop.getInductionVar(), lb = loop.getLowerBound();
    auto same = [&](Value a, Value b) {
      std::optional<int64_t> x = getConstantIntValue(a), y = getConstantIntValue(b);
      return a == b || (x && y && *x == *y);
    };
    return (cmp.getLhs() == iv && same(cmp.getRhs(), lb)) ||
           (cmp.getRhs() == iv && same(cmp.getLhs(), lb));
  };
  return notFirst(orOp.getLhs()) || notFirst(orOp.getRhs());
}

/// Whether `conjunct` reads a tensor element by element in `loop`'s body (a tile.gather or a
/// block's tile.load among the ops it is computed from there): a mask read from tensors, like
/// a document mask's ids (a scalar read, such as a prefix length, is not).
bool readsTensor(Value conjunct, scf::ForOp loop) {
  SmallVector<Value> work{conjunct};
  llvm::SmallPtrSet<Operation *, 16> seen;
  while (!work.empty()) {
    Operation *def = work.pop_back_val().getDefiningOp();
    if (!def || !loop->isProperAncestor(def) || !seen.insert(def).second)
      continue;
    if (isa<GatherOp, LoadOp>(def))
      return true;
    llvm::append_range(work, def->getOperands());
  }
  return false;
}

// "arith.cmpi at file:line:col" for a remark.
std::string describe(Value conjunct) {
  std::string text;
  llvm::raw_string_ostream os(text);
  Operation *def = conjunct.getDefiningOp();
  if (!def) {
    os << "a block argument";
    return text;
  }
  os << def->getName();
  if (auto file = dyn_cast<FileLineColLoc>(def->getLoc()))
    os << " at " << file.getFilename().getValue() << ":" << file.getLine() << ":"
       << file.getColumn();
  return text;
}

struct TileSplitMaskedLoopsPass
    : public tessel::tile::impl::TileSplitMaskedLoopsBase<TileSplitMaskedLoopsPass> {
  void runOnOperation() override {
    SmallVector<scf::ForOp> loops;
    getOperation().walk([&](scf::ForOp loop) {
      if (!loop->hasAttr(kBlockMaskAttr))
        loops.push_back(loop);
    });
    for (scf::ForOp loop : loops)
      splitLoop(loop);
  }

  void splitLoop(scf::ForOp loop) {
    // A streamed softmax normalises over all iterations of its loop: cutting the loop would
    // change what it computes. tile-online-softmax must run first.
    for (Operation &op : loop.getBody()->without_terminator())
      if (auto softmax = dyn_cast<SoftmaxOp>(op); softmax && softmax.getStreamed())
        return;
    // The masking selects directly in the body, all on one mask.
    Value mask;
    SmallVector<arith::SelectOp> selects;
    for (Operation &op : loop.getBody()->without_terminator()) {
      auto select = dyn_cast<arith::SelectOp>(op);
      if (!select || !isa<RankedTensorType>(select.getCondition().getType()) ||
          !isNegInfSplat(select.getFalseValue()))
        continue;
      if (mask && select.getCondition() != mask)
        return;
      mask = select.getCondition();
      selects.push_back(select);
    }
    std::optional<int64_t> step = getConstantIntValue(loop.getStep());
    if (!mask || !step || *step <= 0)
      return;
    Value iv = loop.getInductionVar();
    // The whole mask when it is classified; else the conjunction of its classified conjuncts,
    // the others (`residual`) kept element-wise.
    std::optional<AffineMask> affine = analyseMask(mask);
    SmallVector<Value> classified, residual;
    if (!affine || dependsPerBlock(*affine, loop)) {
      affine.reset();
      SmallVector<Value> conjuncts;
      collectConjuncts(mask, conjuncts);
      for (Value c : conjuncts) {
        std::optional<AffineMask> m = analyseMask(c);
        if (!m || dependsPerBlock(*m, loop)) {
          residual.push_back(c);
          continue;
        }
        classified.push_back(c);
        affine = affine
                     ? AffineMask::combine(AffineMask::Kind::And, std::move(*affine), std::move(*m))
                     : std::move(*m);
      }
      auto remark = mlir::emitRemark(loop.getLoc())
                    << "tile-split-masked-loops: " << classified.size() << " of "
                    << conjuncts.size() << " mask conjuncts classified";
      for (Value c : classified)
        remark << "; classified: " << describe(c);
      bool firstOnly = !residual.empty();
      for (Value c : residual) {
        remark << "; kept element-wise: " << describe(c);
        if (firstIterationOnly(c, loop))
          remark << " (true after the first iteration)";
        else
          firstOnly = false;
      }
      remark << (affine      ? "; blocks where the classified ones are false are skipped, where "
                               "they are true only the rest is masked"
                 : firstOnly ? "; only the first iteration is masked (a peel of it leaves the "
                               "rest unmasked)"
                             : "; every block runs the whole mask");
      if (!affine) {
        // Every block evaluates a mask read from tensors (a document mask in a block-sparse
        // kernel's partial blocks): a masked loop, which tilegpu-overlap-consumers leaves
        // synchronous beside an overlapped one — the values it loads, live beside the
        // overlap's S, O and P, made ptxas spill.
        if (!firstOnly && llvm::any_of(residual, [&](Value c) { return readsTensor(c, loop); }))
          loop->setAttr(kBlockMaskAttr, StringAttr::get(loop.getContext(), "mixed"));
        return;
      }
    }

    OpBuilder b(loop);
    BoundBuilder bb{b, loop.getLoc()};
    Value lb = bb.toI64(loop.getLowerBound()), ub = bb.toI64(loop.getUpperBound());
    Value zero = bb.c(0);
    Value count = bb.max(zero, arith::CeilDivSIOp::create(b, bb.loc,
                                                          arith::SubIOp::create(b, bb.loc, ub, lb),
                                                          bb.c(*step)));
    IterationSets sets = classify(bb, *affine, iv, lb, *step, zero, count);
    Value trueLo = sets.allTrue.lo, trueHi = sets.allTrue.hi;
    Value liveLo = sets.live.lo, liveHi = sets.live.hi;
    Value k0 = liveLo, k3 = bb.max(liveHi, liveLo);
    Value k1 = bb.clamp(trueLo, k0, k3);
    Value k2 = bb.clamp(trueHi, k1, k3);

    // Three copies of the loop over [k0,k1) masked, [k1,k2) unmasked, [k2,k3) masked.
    Type ivType = loop.getInductionVar().getType();
    auto bound = [&](Value k) { return bb.fromI64(bb.add(lb, bb.mul(k, *step)), ivType); };
    Value bounds[4] = {bound(k0), bound(k1), bound(k2), bound(k3)};
    ValueRange inits = loop.getInitArgs();
    SmallVector<Value> carried(inits.begin(), inits.end());
    const char *kinds[3] = {"mixed", residual.empty() ? "all_true" : "residual", "mixed"};
    for (int part = 0; part < 3; ++part) {
      IRMapping mapping;
      auto copy = cast<scf::ForOp>(b.clone(*loop, mapping));
      copy.getLowerBoundMutable().assign(bounds[part]);
      copy.getUpperBoundMutable().assign(bounds[part + 1]);
      copy.getInitArgsMutable().assign(carried);
      copy->setAttr(kBlockMaskAttr, b.getStringAttr(kinds[part]));
      if (part == 1) {
        // Proven all-true: the selects keep their scores; canonicalisation drops the mask.
        // With residual conjuncts, the mask becomes their conjunction (computed where the
        // mask was, so every conjunct is defined).
        OpBuilder inner(copy.getBody(), copy.getBody()->begin());
        Value allTrue = arith::ConstantOp::create(
            inner, loop.getLoc(), DenseElementsAttr::get(cast<ShapedType>(mask.getType()), true));
        if (!residual.empty()) {
          Value copiedMask = mapping.lookupOrDefault(mask);
          if (Operation *def = copiedMask.getDefiningOp())
            inner.setInsertionPointAfter(def);
          allTrue = mapping.lookupOrDefault(residual.front());
          for (Value c : ArrayRef<Value>(residual).drop_front())
            allTrue = arith::AndIOp::create(inner, loop.getLoc(), allTrue,
                                            mapping.lookupOrDefault(c));
        }
        for (Operation &op : copy.getBody()->without_terminator())
          if (auto select = dyn_cast<arith::SelectOp>(op))
            if (isNegInfSplat(select.getFalseValue()) && isa<RankedTensorType>(select.getType()))
              select.getConditionMutable().assign(allTrue);
      }
      carried.assign(copy.getResults().begin(), copy.getResults().end());
    }
    loop.replaceAllUsesWith(carried);
    loop.erase();
  }
};
} // namespace
