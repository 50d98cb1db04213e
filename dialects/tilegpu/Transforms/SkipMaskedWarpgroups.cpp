//===- SkipMaskedWarpgroups.cpp - a warpgroup skips the key blocks its rows cannot see ------===//
//
// tilegpu-skip-masked-warpgroups (Passes.td says what and why). The split's masked loop runs
// the blocks the diagonal crosses for the whole row block; a warpgroup owns 64 of its rows,
// and for those rows a block may be hidden entirely (d64's 192-row tile: the first warpgroup's
// rows end before the last block starts). The mask analysis restricted to the warpgroup's rows
// says so per block. Then the online-softmax step is the identity — every masked score is
// −inf, so m stays, α = 1, P = 0 — and the warpgroup branches around S, the softmax and P·V,
// keeping the waits (the ring's phases) and the turns (ping-pong) in order.
//
//===----------------------------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/MaskAnalysis.h"
#include "tilegpu/Transforms/AttentionDots.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Matchers.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUSKIPMASKEDWARPGROUPS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

constexpr int64_t kWarpgroupRows = 64;

/// The online-softmax step of an attention loop: the masked scores X = select(mask, T, −inf)
/// and the positions of m, l and O among the iter_args.
struct SoftmaxStep {
  arith::SelectOp masked;
  unsigned mIndex, lIndex, accIndex;
};

/// `v` as broadcast(expand_dims(row, axis 1)): the row vector, or null.
Value rowOf(Value v) {
  auto bc = v.getDefiningOp<tile::BroadcastOp>();
  auto ex = bc ? bc.getInput().getDefiningOp<tile::ExpandDimsOp>() : tile::ExpandDimsOp();
  return ex && ex.getAxis() == 1 ? ex.getInput() : Value();
}

/// The reduction of kind `kind` along the rows that makes `v`, or null.
tile::ReduceOp rowReduce(Value v, tile::ReduceKind kind) {
  auto red = v.getDefiningOp<tile::ReduceOp>();
  return red && red.getKind() == kind && red.getAxis() == 1 ? red : tile::ReduceOp();
}

/// One operand of the commutative `op` matched by `first`, the other returned; null otherwise.
template <typename Op>
Value otherOperand(Op op, function_ref<bool(Value)> first) {
  if (!op)
    return {};
  if (first(op.getLhs()))
    return op.getRhs();
  if (first(op.getRhs()))
    return op.getLhs();
  return {};
}

/// Matches the step tile-online-softmax writes (and the DSL's kernels spell out):
///   m' = max(m, rowmax(X)),  m̂ = m' or select(m' == −inf, 0, m'),  α = exp2(m − m̂),
///   P = exp2(X − m̂),  l' = l·α + rowsum(P),  O' = O·α + P·V
/// with m', l', O' yielded in the places of m, l, O. Where every X of a row is −inf, m' = m,
/// α = 1 (or 0 while m = −inf, when l and O are 0 too), P = 0: the step changes nothing.
std::optional<SoftmaxStep> matchSoftmaxStep(scf::ForOp loop, AttentionDots dots) {
  Block *body = loop.getBody();
  auto yield = cast<scf::YieldOp>(body->getTerminator());
  auto iterArg = [&](Value v) -> std::optional<unsigned> {
    auto arg = dyn_cast_if_present<BlockArgument>(v);
    if (!arg || arg.getOwner() != body || arg.getArgNumber() == 0)
      return std::nullopt;
    return arg.getArgNumber() - 1;
  };
  // O·α, α = exp2(m − m̂).
  if (!dots.rescale)
    return std::nullopt;
  Value alpha = rowOf(dots.rescale.getRhs());
  auto alphaExp = alpha ? alpha.getDefiningOp<math::Exp2Op>() : math::Exp2Op();
  auto alphaSub = alphaExp ? alphaExp.getOperand().getDefiningOp<arith::SubFOp>() : arith::SubFOp();
  if (!alphaSub)
    return std::nullopt;
  std::optional<unsigned> mIndex = iterArg(alphaSub.getLhs());
  Value mSafe = alphaSub.getRhs();
  if (!mIndex)
    return std::nullopt;
  // m̂ from m' = max(m, rowmax(X)).
  Value mNext = mSafe;
  if (auto sel = mSafe.getDefiningOp<arith::SelectOp>()) {
    auto cmp = sel.getCondition().getDefiningOp<arith::CmpFOp>();
    if (!cmp || cmp.getPredicate() != arith::CmpFPredicate::OEQ ||
        cmp.getLhs() != sel.getFalseValue() || !tile::isNegInfSplat(cmp.getRhs()) ||
        !isZeroSplat(sel.getTrueValue()))
      return std::nullopt;
    mNext = sel.getFalseValue();
  }
  auto maxOp = mNext.getDefiningOp<arith::MaximumFOp>();
  Value rowMax = otherOperand(maxOp, [&](Value v) { return iterArg(v) == mIndex; });
  tile::ReduceOp maxRed = rowMax ? rowReduce(rowMax, tile::ReduceKind::Max) : tile::ReduceOp();
  auto masked = maxRed ? maxRed.getInput().getDefiningOp<arith::SelectOp>() : arith::SelectOp();
  if (!masked || !tile::isNegInfSplat(masked.getFalseValue()) || yield.getOperand(*mIndex) != mNext)
    return std::nullopt;
  // P = exp2(X − m̂), read by P·V (through its 16-bit conversion) and rowsum(P).
  Value pv = dots.pvDot.getA();
  if (auto convert = pv.getDefiningOp<ConvertLayoutOp>())
    pv = convert.getInput();
  if (auto trunc = pv.getDefiningOp<arith::TruncFOp>())
    pv = trunc.getIn();
  auto pExp = pv.getDefiningOp<math::Exp2Op>();
  auto pSub = pExp ? pExp.getOperand().getDefiningOp<arith::SubFOp>() : arith::SubFOp();
  if (!pSub || pSub.getLhs() != masked.getResult() || rowOf(pSub.getRhs()) != mSafe)
    return std::nullopt;
  // l' = l·α + rowsum(P).
  for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
    auto add = v.getDefiningOp<arith::AddFOp>();
    Value sum = otherOperand(add, [&](Value x) {
      auto mul = x.getDefiningOp<arith::MulFOp>();
      return mul && iterArg(otherOperand(mul, [&](Value y) { return y == alpha; })) == i;
    });
    tile::ReduceOp sumRed = sum ? rowReduce(sum, tile::ReduceKind::Sum) : tile::ReduceOp();
    if (sumRed && sumRed.getInput() == pExp.getResult())
      return SoftmaxStep{masked, *mIndex, static_cast<unsigned>(i), dots.accIndex};
  }
  return std::nullopt;
}

/// Whether the loop's iter_arg `index` starts as a splat `isValue` accepts: a constant, or
/// the result of the loop before it (the split's copies of one key loop) that starts so.
bool startsAs(scf::ForOp loop, unsigned index, bool (*isValue)(Value)) {
  Value init = loop.getInitArgs()[index];
  while (auto prev = init.getDefiningOp<scf::ForOp>())
    init = prev.getInitArgs()[cast<OpResult>(init).getResultNumber()];
  return isValue(init);
}

/// The top-level conjuncts of an i1 tile (`a & b & …`).
void conjuncts(Value mask, SmallVectorImpl<Value> &out) {
  if (auto andOp = mask.getDefiningOp<arith::AndIOp>()) {
    conjuncts(andOp.getLhs(), out);
    conjuncts(andOp.getRhs(), out);
    return;
  }
  out.push_back(mask);
}

/// Emits an i1 that holds where the 2-D `mask`, restricted to the rows [row, row + 64) of the
/// tile, is false everywhere; null where the analysis cannot say so for any conjunct.
struct HiddenRows {
  OpBuilder &b;
  Location loc;
  Value row; // i64

  Value c(int64_t v) { return arith::ConstantIntOp::create(b, loc, b.getI64Type(), v); }
  Value orI(Value x, Value y) { return x ? arith::OrIOp::create(b, loc, x, y) : y; }
  Value andI(Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); }

  // The atom `d pred 0` is false over the rows where d's range lies on the other side. An
  // atom of the columns alone hides a warpgroup's rows only where it hides the block's, which
  // the split has already left out: no condition.
  Value atom(const tile::MaskAtom &a) {
    const tile::IndexTile &d = a.diff;
    if (d.shape.size() != 2 || d.steps[0] == 0)
      return {};
    tile::IndexTile rows = d;
    rows.shape[0] = std::min<int64_t>(kWarpgroupRows, d.shape[0]);
    Value base = arith::AddIOp::create(b, loc, tile::emitLinear(b, loc, d.base, b.getI64Type()),
                                       arith::MulIOp::create(b, loc, row, c(d.steps[0])));
    auto cmp = [&](arith::CmpIPredicate pred, int64_t offset, int64_t bound) {
      return arith::CmpIOp::create(b, loc, pred, arith::AddIOp::create(b, loc, base, c(offset)),
                                   c(bound));
    };
    using P = arith::CmpIPredicate;
    switch (a.predicate) {
    case P::sge: return cmp(P::slt, rows.maxOffset(), 0);
    case P::sgt: return cmp(P::sle, rows.maxOffset(), 0);
    case P::sle: return cmp(P::sgt, rows.minOffset(), 0);
    case P::slt: return cmp(P::sge, rows.minOffset(), 0);
    default: return {};
    }
  }

  Value mask(const tile::AffineMask &m) {
    using K = tile::AffineMask::Kind;
    switch (m.kind) {
    case K::True: return {};
    case K::Atom: return atom(m.atom);
    case K::And: {
      Value l = mask(m.operands[0]), r = mask(m.operands[1]);
      return l && r ? orI(l, r) : (l ? l : r);
    }
    case K::Or: {
      Value l = mask(m.operands[0]), r = mask(m.operands[1]);
      return l && r ? andI(l, r) : Value();
    }
    }
    return {};
  }
};

/// Whether every symbol of the mask's index tiles is available at `point` (defined outside
/// `loop`, or before `point` in its body).
bool symbolsAvailable(const tile::AffineMask &m, scf::ForOp loop, Operation *point) {
  bool ok = true;
  m.forEachAtom([&](const tile::MaskAtom &a) {
    for (auto [sym, coef] : a.diff.base.terms) {
      Operation *def = sym.getDefiningOp();
      if (def && loop->isProperAncestor(def) &&
          (def->getBlock() != point->getBlock() || !def->isBeforeInBlock(point)))
        ok = false;
    }
  });
  return ok;
}

/// Skips the block for the warpgroups whose rows it hides, in `loop` (a masked copy of a key
/// loop in a consumer region); whether it changed.
bool skipHidden(scf::ForOp loop) {
  std::optional<AttentionDots> dots = matchAttentionDots(loop);
  if (!dots)
    return false;
  // While m = −inf the identity needs l = 0 and O = 0: the start of every softmax.
  std::optional<SoftmaxStep> step = matchSoftmaxStep(loop, *dots);
  if (!step || !startsAs(loop, step->mIndex, tile::isNegInfSplat) ||
      !startsAs(loop, step->lIndex, isZeroSplat) || !startsAs(loop, step->accIndex, isZeroSplat))
    return false;
  auto maskType = dyn_cast<RankedTensorType>(step->masked.getCondition().getType());
  if (!maskType || maskType.getRank() != 2 || maskType.getShape()[0] <= kWarpgroupRows)
    return false;
  // The ops from K's read to P·V go under the branch. Those with effects other than reads are
  // the ring's waits (repeated on the skipping side, so its phases stay in step) and the
  // ping-pong's turns (repeated too); a fence may be dropped. Nothing else may be there, and
  // nothing made there may be used after P·V but m', l' and O' by the yield.
  Operation *first = dots->kRead, *last = dots->pvDot;
  if (first->getBlock() != loop.getBody() || !first->isBeforeInBlock(last))
    return false;
  SmallVector<Operation *> region, kept;
  for (Operation *op = first;; op = op->getNextNode()) {
    region.push_back(op);
    if (isa<MbarrierWaitOp, TurnWaitOp, TurnPassOp>(op))
      kept.push_back(op);
    else if (op->getNumRegions() || (!isMemoryEffectFree(op) && !isa<FenceAsyncSharedOp>(op) &&
                                     !hasSingleEffect<MemoryEffects::Read>(op)))
      return false;
    if (op == last)
      break;
  }
  llvm::SmallPtrSet<Operation *, 32> inRegion(region.begin(), region.end());
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<unsigned> positions = {step->accIndex, step->mIndex, step->lIndex};
  for (Operation *op : region)
    for (OpOperand &use : op->getUses()) {
      if (inRegion.contains(use.getOwner()))
        continue;
      if (use.getOwner() != yield || !llvm::is_contained(positions, use.getOperandNumber()))
        return false;
    }
  for (Operation *op : kept)
    for (Value operand : op->getOperands())
      if (Operation *def = operand.getDefiningOp(); def && inRegion.contains(def))
        return false;
  // The conjuncts the analysis reads; the others only make more scores −inf.
  SmallVector<Value> parts;
  conjuncts(step->masked.getCondition(), parts);
  SmallVector<tile::AffineMask> masks;
  for (Value part : parts)
    if (std::optional<tile::AffineMask> m = tile::analyseMask(part);
        m && symbolsAvailable(*m, loop, first))
      masks.push_back(*m);
  if (masks.empty())
    return false;

  Location loc = loop.getLoc();
  OpBuilder b(first);
  Value row = arith::ExtSIOp::create(b, loc, b.getI64Type(),
                                     WarpgroupRowOp::create(b, loc, b.getI32Type()));
  HiddenRows hidden{b, loc, row};
  Value hiddenAll;
  for (const tile::AffineMask &m : masks)
    if (Value h = hidden.mask(m))
      hiddenAll = hidden.orI(hiddenAll, h);
  if (!hiddenAll)
    return false;
  Value visible = arith::XOrIOp::create(b, loc, hiddenAll,
                                        arith::ConstantIntOp::create(b, loc, b.getI1Type(), 1));
  SmallVector<Value> carried, stepped;
  for (unsigned p : positions) {
    carried.push_back(loop.getRegionIterArgs()[p]);
    stepped.push_back(yield.getOperand(p));
  }
  auto ifOp = scf::IfOp::create(b, loc, ValueRange(stepped).getTypes(), visible,
                                /*withElseRegion=*/true);
  // The skipping side: the waits and turns, in their order.
  b.setInsertionPointToStart(ifOp.elseBlock());
  for (Operation *op : kept)
    b.clone(*op);
  scf::YieldOp::create(b, loc, carried);
  // The visible side: the step as it was.
  b.setInsertionPointToStart(ifOp.thenBlock());
  auto thenYield = scf::YieldOp::create(b, loc, stepped);
  for (Operation *op : region)
    op->moveBefore(thenYield);
  for (auto [i, p] : llvm::enumerate(positions))
    yield.setOperand(p, ifOp.getResult(i));
  return true;
}

struct SkipMaskedWarpgroups
    : tessel::tilegpu::impl::TileGPUSkipMaskedWarpgroupsBase<SkipMaskedWarpgroups> {
  using Base::Base;

  void runOnOperation() override { skipMaskedWarpgroups(getOperation()); }
};

} // namespace

int64_t tessel::tilegpu::skipMaskedWarpgroups(func::FuncOp program) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout || layout.getKind() != MmaKind::Wgmma || layout.getWarps() < 8)
    return 0;
  int64_t changed = 0;
  program.walk([&](WarpSpecializeOp ws) {
    for (auto loop : tileBlock(ws.getConsumers().front()).getOps<scf::ForOp>())
      if (tile::hasBlockMaskKind(loop, "mixed") && skipHidden(loop))
        ++changed;
  });
  return changed;
}
