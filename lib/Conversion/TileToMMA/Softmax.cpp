//===- Softmax.cpp - row reductions and the scaled scores -------------------------------------===//
//
// The softmax's row work on the accumulator layout: tile.reduce along rows (the thread's
// registers of a row, then two quad shuffles, as balanced trees), and the single-FFMA softmax
// (docs/dev/codegen-mma.md): the match of scaled scores S·c, the uniform branch on the scale that
// lets exp2(S·c - m) be one FFMA (none where c is known positive and finite: a tile.moderate
// argument), and the masked scores.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/IR/Matchers.h"

#include <cmath>

namespace tessel::mma {

SmallVector<Value> MmaKernelBuilder::reduceRows(ArrayRef<Value> in, int64_t slabs,
                                                function_ref<Value(Value, Value)> combine) {
  Location loc = b.getUnknownLoc();
  SmallVector<Value> out;
  Value full = ci32(-1), clamp = ci32(31);
  for (int64_t rr = 0; rr < 2 * mTiles; ++rr) {
    int64_t base = rr / 2 * slabs * 4 + rr % 2 * 2;
    // A balanced tree over the row's slab pairs, not a chain: ptxas can then fold each
    // exponential into the row sum as soon as it is computed instead of keeping them all
    // alive until a serial chain reaches them (it interleaves the exponentials with P·V),
    // which was what pushed the 128×64 d128 kernel over 255 registers. Max is associative,
    // so only the rounding order of a sum changes.
    SmallVector<Value> parts;
    for (int64_t s = 0; s < slabs; ++s)
      parts.push_back(combine(in[base + s * 4], in[base + s * 4 + 1]));
    Value r = tessel::conversion::balancedTree(std::move(parts), combine);
    // The four threads of a quad hold the other columns of the same rows.
    for (int64_t off : {1, 2}) {
      Value other = NVVM::ShflOp::create(b, loc, r.getType(), full, r, ci32(off), clamp,
                                         NVVM::ShflKind::bfly, UnitAttr());
      r = combine(r, other);
    }
    out.push_back(r);
  }
  return out;
}

std::optional<MmaKernelBuilder::ScaledScores> MmaKernelBuilder::matchScaledScores(Value x) {
  ScaledScores m;
  if (auto sel = x.getDefiningOp<arith::SelectOp>()) {
    DenseElementsAttr other;
    if (!isTensor(sel.getCondition().getType()) ||
        !matchPattern(sel.getFalseValue(), m_Constant(&other)) || !other.isSplat() ||
        !other.getElementType().isF32() || !other.getSplatValue<APFloat>().isNegInfinity())
      return std::nullopt;
    m.mask = sel.getCondition();
    m.selected = sel.getResult();
    x = sel.getTrueValue();
  }
  auto mul = x.getDefiningOp<arith::MulFOp>();
  if (!mul || !cast<RankedTensorType>(mul.getType()).getElementType().isF32())
    return std::nullopt;
  for (int i = 0; i < 2; ++i) {
    auto splat = mul->getOperand(1 - i).getDefiningOp<tile::SplatOp>();
    if (splat && splat.getValue().getType().isF32() && scalars.contains(splat.getValue())) {
      m.scores = mul->getOperand(i);
      m.scale = splat.getValue();
      m.product = mul.getResult();
      return m;
    }
  }
  return std::nullopt;
}

namespace {
/// Bounds on log2 of the f32 scalar `v` where the IR proves it positive and finite: a constant,
/// a tile.moderate kernel argument (2^-64..2^64: the JIT's float specialisation), or a product
/// or quotient of such values.
std::optional<std::pair<double, double>> log2Bounds(Value v) {
  if (auto arg = dyn_cast<BlockArgument>(v)) {
    auto fn = dyn_cast<func::FuncOp>(arg.getOwner()->getParentOp());
    if (fn && arg.getOwner()->isEntryBlock() &&
        fn.getArgAttr(arg.getArgNumber(), tile::kModerateAttr))
      return std::pair(-64.0, 64.0);
    return std::nullopt;
  }
  FloatAttr constant;
  if (matchPattern(v, m_Constant(&constant))) {
    double x = constant.getValueAsDouble();
    if (!(x > 0) || !std::isfinite(x))
      return std::nullopt;
    return std::pair(std::log2(x), std::log2(x));
  }
  Operation *op = v.getDefiningOp();
  if (!isa_and_nonnull<arith::MulFOp, arith::DivFOp>(op))
    return std::nullopt;
  auto a = log2Bounds(op->getOperand(0)), b = log2Bounds(op->getOperand(1));
  if (!a || !b)
    return std::nullopt;
  if (isa<arith::MulFOp>(op))
    return std::pair(a->first + b->first, a->second + b->second);
  return std::pair(a->first - b->second, a->second - b->first);
}

/// Whether the f32 scalar `c` is known to satisfy 0 < c < inf at run time (a margin below the
/// normal range's ends absorbs the rounding of the products).
bool knownPositiveFinite(Value c) {
  std::optional<std::pair<double, double>> bounds = log2Bounds(c);
  return bounds && bounds->first > -120 && bounds->second < 120;
}
} // namespace

std::optional<MmaKernelBuilder::ScaledScores> MmaKernelBuilder::prepareScaled(Value x) {
  std::optional<ScaledScores> m = matchScaledScores(x);
  if (!m)
    return std::nullopt;
  if (scaleFactor.count(m->product))
    return m;
  // S must be a register tile placed where it stands (a dot's result) whose only use is S·c,
  // in the block being emitted: then T can take S's place.
  auto e = eager.find(m->scores);
  if (!m->scores.hasOneUse() || e == eager.end() || e->second.first != Layout::Acc ||
      e->second.second.empty() || !e->second.second.front().getDefiningOp() ||
      e->second.second.front().getDefiningOp()->getBlock() != b.getInsertionBlock())
    return std::nullopt;
  // For 0 < c < inf, x -> round(c·x) is non-decreasing, so max(c·S) = c·max(S) bit for bit
  // (NaN and -inf included). c = 0 (0·-inf = NaN for a fully masked row), c < 0 (the max
  // becomes a min), c = inf and NaN take the other side, which scales S in place and keeps
  // k = 1: the exact code, as fma(x, 1, -m) = x - m and max(x)·1 = max(x).
  Location loc = b.getUnknownLoc();
  Value c = scalars.lookup(m->scale);
  // Known 0 < c < inf (a moderate kernel argument times log2(e)): no branch in the loop, whose
  // join would cost ptxas's schedule 2-3 % of the d128 forward (H200, 2026-12-04).
  if (knownPositiveFinite(m->scale)) {
    scaleFactor[m->product] = c;
    return m;
  }
  auto f = [&](float v) { return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(v)); };
  Value fast = arith::AndIOp::create(
      b, loc, arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OGT, c, f(0.0f)),
      arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, c,
                            f(std::numeric_limits<float>::infinity())));
  SmallVector<Value> &regs = e->second.second;
  SmallVector<Type> types(regs.size(), b.getF32Type());
  auto ifOp = scf::IfOp::create(b, loc, types, fast, /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, regs);
    b.setInsertionPointToStart(ifOp.elseBlock());
    SmallVector<Value> scaled;
    for (Value r : regs)
      scaled.push_back(arith::MulFOp::create(b, loc, r, c));
    scf::YieldOp::create(b, loc, scaled);
  }
  regs.assign(ifOp.getResults().begin(), ifOp.getResults().end());
  scaleFactor[m->product] = arith::SelectOp::create(b, loc, fast, c, f(1.0f));
  return m;
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::maskedScores(const ScaledScores &m,
                                                             Operation *user) {
  FailureOr<SmallVector<Value>> s = materialize(m.scores, Layout::Acc, user);
  if (failed(s) || !m.mask)
    return s;
  Location loc = b.getUnknownLoc();
  auto select = [&](Value maskTile) -> FailureOr<SmallVector<Value>> {
    FailureOr<SmallVector<Value>> mask = materialize(maskTile, Layout::Acc, user);
    if (failed(mask))
      return failure();
    Value ninf = arith::ConstantOp::create(
        b, loc, b.getF32FloatAttr(-std::numeric_limits<float>::infinity()));
    SmallVector<Value> out;
    for (auto [keep, x] : llvm::zip(*mask, *s))
      out.push_back(arith::SelectOp::create(b, loc, keep, x, ninf));
    return out;
  };
  auto guard = m.mask.getDefiningOp<arith::OrIOp>();
  tile::SplatOp shown;
  Value inner;
  for (int i = 0; guard && !shown && i < 2; ++i)
    if ((shown = guard->getOperand(i).getDefiningOp<tile::SplatOp>()))
      inner = guard->getOperand(1 - i);
  if (!shown || !scalars.contains(shown.getValue()))
    return select(m.mask);
  // A guarded mask (tilegpu-fuse-masked-loops): where the block-uniform guard holds the mask
  // is all true, so the warp branches around its arithmetic. Both uses of the masked scores
  // (the row max and the exponentials) share the one branch.
  std::pair<Value, int> key{m.selected, -1};
  if (auto it = lazy.back().find(key); it != lazy.back().end())
    return it->second;
  SmallVector<Type> types(s->size(), b.getF32Type());
  auto ifOp = scf::IfOp::create(b, loc, types, scalars.lookup(shown.getValue()),
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard insertion(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    scf::YieldOp::create(b, loc, *s);
    b.setInsertionPointToStart(ifOp.elseBlock());
    lazy.emplace_back();
    FailureOr<SmallVector<Value>> masked = select(inner);
    lazy.pop_back();
    if (failed(masked))
      return failure();
    scf::YieldOp::create(b, loc, *masked);
  }
  SmallVector<Value> out(ifOp.getResults().begin(), ifOp.getResults().end());
  lazy.back()[key] = out;
  return out;
}

LogicalResult MmaKernelBuilder::emitReduce(tile::ReduceOp op) {
  Location loc = op.getLoc();
  auto inType = cast<RankedTensorType>(op.getInput().getType());
  if (inType.getRank() != 2 || op.getAxis() != 1)
    return op.emitOpError("reduces along another axis than the rows' (convert-tile-to-mma)");
  auto combine = [&](Value x, Value y) -> Value {
    bool isFloat = isa<FloatType>(x.getType());
    switch (op.getKind()) {
    case tile::ReduceKind::Sum:
      return isFloat ? Value(arith::AddFOp::create(b, loc, x, y))
                     : Value(arith::AddIOp::create(b, loc, x, y));
    case tile::ReduceKind::Max:
      return isFloat ? Value(arith::MaximumFOp::create(b, loc, x, y))
                     : Value(arith::MaxSIOp::create(b, loc, x, y));
    case tile::ReduceKind::Min:
      return isFloat ? Value(arith::MinimumFOp::create(b, loc, x, y))
                     : Value(arith::MinSIOp::create(b, loc, x, y));
    }
    llvm_unreachable("reduction kind");
  };
  Type elem = inType.getElementType();
  if (!elem.isF32() && !elem.isInteger(32))
    return op.emitOpError("reduces ") << elem << ": convert-tile-to-mma shuffles f32 or i32";
  int64_t slabs = inType.getShape()[1] / 8;
  std::optional<ScaledScores> scaled;
  if (op.getKind() == tile::ReduceKind::Max)
    scaled = prepareScaled(op.getInput());
  if (scaled) {
    // The row max of S·c as k·(row max of T): no scaled tile, one multiply per row.
    FailureOr<SmallVector<Value>> x = maskedScores(*scaled, op);
    if (failed(x))
      return failure();
    SmallVector<Value> rows = reduceRows(*x, slabs, combine);
    Value k = scaleFactor.lookup(scaled->product);
    for (Value &r : rows)
      r = arith::MulFOp::create(b, loc, r, k);
    eager[op.getResult()] = {Layout::Row, rows};
    return success();
  }
  FailureOr<SmallVector<Value>> in = materialize(op.getInput(), Layout::Acc, op);
  if (failed(in))
    return failure();
  eager[op.getResult()] = {Layout::Row, reduceRows(*in, slabs, combine)};
  return success();
}

} // namespace tessel::mma
