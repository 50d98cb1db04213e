//===- MaskAnalysis.cpp - masks as affine predicates on block indices -----===//
//
// Walks the index arithmetic behind a mask (iota, splat, add, sub, multiply by a constant,
// expand_dims, broadcast, cmpi, andi, ori, xori with true) and rebuilds it as and/or combinations
// of affine atoms. Anything else makes the
// analysis give up: the mask is then simply kept, which is always correct.
//
//===----------------------------------------------------------------------===//

#include "tile/Transforms/MaskAnalysis.h"

#include "tile/IR/TileDialect.h"

#include "mlir/IR/Matchers.h"
#include "llvm/Support/MathExtras.h"

#include <numeric>

using namespace mlir;
using namespace tessel::tile;

LinearExpr LinearExpr::scaled(int64_t factor) const {
  LinearExpr out;
  out.constant = constant * factor;
  for (auto [sym, coef] : terms)
    if (coef * factor != 0)
      out.terms[sym] = coef * factor;
  return out;
}

LinearExpr LinearExpr::plus(const LinearExpr &other, int64_t otherFactor) const {
  LinearExpr out = *this;
  out.constant += other.constant * otherFactor;
  for (auto [sym, coef] : other.terms) {
    int64_t sum = out.coefficientOf(sym) + coef * otherFactor;
    if (sum == 0)
      out.terms.erase(sym);
    else
      out.terms[sym] = sum;
  }
  return out;
}

int64_t LinearExpr::coefficientOf(Value symbol) const {
  auto it = terms.find(symbol);
  return it == terms.end() ? 0 : it->second;
}

int64_t IndexTile::minOffset() const {
  int64_t sum = 0;
  for (auto [step, size] : llvm::zip(steps, shape))
    sum += std::min<int64_t>(0, step * (size - 1));
  return sum;
}

int64_t IndexTile::maxOffset() const {
  int64_t sum = 0;
  for (auto [step, size] : llvm::zip(steps, shape))
    sum += std::max<int64_t>(0, step * (size - 1));
  return sum;
}

AffineMask AffineMask::ofAtom(MaskAtom atom) {
  AffineMask m;
  m.kind = Kind::Atom;
  m.atom = std::move(atom);
  return m;
}

AffineMask AffineMask::combine(Kind kind, AffineMask lhs, AffineMask rhs) {
  AffineMask m;
  m.kind = kind;
  m.operands.push_back(std::move(lhs));
  m.operands.push_back(std::move(rhs));
  return m;
}

void AffineMask::forEachAtom(function_ref<void(MaskAtom &)> fn) {
  if (kind == Kind::Atom)
    fn(atom);
  for (AffineMask &operand : operands)
    operand.forEachAtom(fn);
}

void AffineMask::forEachAtom(function_ref<void(const MaskAtom &)> fn) const {
  if (kind == Kind::Atom)
    fn(atom);
  for (const AffineMask &operand : operands)
    operand.forEachAtom(fn);
}

namespace {
std::optional<int64_t> constantInt(Value v) {
  APInt value;
  if (matchPattern(v, m_ConstantInt(&value)))
    return value.getSExtValue();
  return std::nullopt;
}

IndexTile mapSteps(IndexTile tile, function_ref<void(IndexTile &)> fn) {
  fn(tile);
  return tile;
}

std::optional<AffineMask> negateAtom(const MaskAtom &atom) {
  using P = arith::CmpIPredicate;
  P negated;
  switch (atom.predicate) {
  case P::slt: negated = P::sge; break;
  case P::sle: negated = P::sgt; break;
  case P::sgt: negated = P::sle; break;
  case P::sge: negated = P::slt; break;
  default: return std::nullopt;
  }
  return AffineMask::ofAtom(MaskAtom{atom.diff, negated});
}
} // namespace

LinearExpr tessel::tile::analyseScalar(Value scalar) {
  if (std::optional<int64_t> c = constantInt(scalar))
    return LinearExpr{*c, {}};
  Operation *def = scalar.getDefiningOp();
  if (auto add = dyn_cast_or_null<arith::AddIOp>(def))
    return analyseScalar(add.getLhs()).plus(analyseScalar(add.getRhs()));
  if (auto sub = dyn_cast_or_null<arith::SubIOp>(def))
    return analyseScalar(sub.getLhs()).plus(analyseScalar(sub.getRhs()), -1);
  if (auto mul = dyn_cast_or_null<arith::MulIOp>(def)) {
    if (std::optional<int64_t> c = constantInt(mul.getRhs()))
      return analyseScalar(mul.getLhs()).scaled(*c);
    if (std::optional<int64_t> c = constantInt(mul.getLhs()))
      return analyseScalar(mul.getRhs()).scaled(*c);
  }
  LinearExpr symbol;
  symbol.terms[scalar] = 1;
  return symbol;
}

Value tessel::tile::emitLinear(OpBuilder &b, Location loc, const LinearExpr &e, Type type) {
  auto cast = [&](Value v) -> Value {
    if (v.getType() == type)
      return v;
    if (v.getType().isIndex() || type.isIndex())
      return arith::IndexCastOp::create(b, loc, type, v);
    if (v.getType().getIntOrFloatBitWidth() < type.getIntOrFloatBitWidth())
      return arith::ExtSIOp::create(b, loc, type, v);
    return arith::TruncIOp::create(b, loc, type, v);
  };
  auto constant = [&](int64_t c) {
    return arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, c));
  };
  Value sum = constant(e.constant);
  for (auto [sym, coef] : e.terms)
    sum = arith::AddIOp::create(b, loc, sum,
                                arith::MulIOp::create(b, loc, cast(sym), constant(coef)));
  return sum;
}

bool tessel::tile::isNegInfSplat(Value v) {
  DenseFPElementsAttr dense;
  return matchPattern(v, m_Constant(&dense)) && dense.isSplat() &&
         dense.getSplatValue<APFloat>().isInfinity() && dense.getSplatValue<APFloat>().isNegative();
}

std::optional<int64_t> tessel::tile::splatConstantInt(Value v) {
  if (auto splat = v.getDefiningOp<SplatOp>())
    return constantInt(splat.getValue());
  DenseIntElementsAttr dense;
  if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
    return dense.getSplatValue<APInt>().getSExtValue();
  return std::nullopt;
}

std::optional<IndexTile> tessel::tile::analyseIndexTile(Value tile) {
  auto type = dyn_cast<RankedTensorType>(tile.getType());
  if (!type || !type.getElementType().isSignlessInteger() || type.getElementType().isInteger(1))
    return std::nullopt;
  SmallVector<int64_t> shape(type.getShape());
  SmallVector<int64_t> zeros(shape.size(), 0);
  if (std::optional<int64_t> c = splatConstantInt(tile))
    return IndexTile{LinearExpr{*c, {}}, zeros, shape};
  Operation *def = tile.getDefiningOp();
  if (!def)
    return std::nullopt;
  if (isa<IotaOp>(def))
    return IndexTile{LinearExpr{}, {1}, shape};
  if (auto splat = dyn_cast<SplatOp>(def))
    return IndexTile{analyseScalar(splat.getValue()), zeros, shape};
  if (isa<arith::AddIOp, arith::SubIOp>(def)) {
    std::optional<IndexTile> lhs = analyseIndexTile(def->getOperand(0));
    std::optional<IndexTile> rhs = analyseIndexTile(def->getOperand(1));
    if (!lhs || !rhs)
      return std::nullopt;
    int64_t sign = isa<arith::AddIOp>(def) ? 1 : -1;
    IndexTile out{lhs->base.plus(rhs->base, sign), lhs->steps, shape};
    for (auto [s, r] : llvm::zip(out.steps, rhs->steps))
      s += sign * r;
    return out;
  }
  if (auto mul = dyn_cast<arith::MulIOp>(def)) {
    for (unsigned i = 0; i < 2; ++i)
      if (std::optional<int64_t> c = splatConstantInt(mul->getOperand(1 - i)))
        if (std::optional<IndexTile> t = analyseIndexTile(mul->getOperand(i)))
          return mapSteps(*t, [&](IndexTile &x) {
            x.base = x.base.scaled(*c);
            for (int64_t &s : x.steps)
              s *= *c;
          });
    return std::nullopt;
  }
  if (auto expand = dyn_cast<ExpandDimsOp>(def)) {
    std::optional<IndexTile> in = analyseIndexTile(expand.getInput());
    if (!in)
      return std::nullopt;
    in->steps.insert(in->steps.begin() + expand.getAxis(), 0);
    in->shape = shape;
    return in;
  }
  if (auto bcast = dyn_cast<BroadcastOp>(def)) {
    std::optional<IndexTile> in = analyseIndexTile(bcast.getInput());
    if (!in)
      return std::nullopt;
    // A broadcast axis had size 1, so its index was always 0: its step no longer matters.
    for (auto [step, from, to] : llvm::zip(in->steps, in->shape, shape))
      if (from != to)
        step = 0;
    in->shape = shape;
    return in;
  }
  return std::nullopt;
}

std::optional<AffineMask> tessel::tile::analyseMask(Value mask) {
  auto type = dyn_cast<RankedTensorType>(mask.getType());
  if (!type || !type.getElementType().isInteger(1))
    return std::nullopt;
  DenseIntElementsAttr dense;
  if (matchPattern(mask, m_Constant(&dense)) && dense.isSplat()) {
    if (dense.getSplatValue<bool>())
      return AffineMask{};
    return std::nullopt; // an all-false constant mask: nothing to split, the loop is dead
  }
  Operation *def = mask.getDefiningOp();
  if (auto cmp = dyn_cast_or_null<arith::CmpIOp>(def)) {
    std::optional<IndexTile> lhs = analyseIndexTile(cmp.getLhs());
    std::optional<IndexTile> rhs = analyseIndexTile(cmp.getRhs());
    using P = arith::CmpIPredicate;
    P pred = cmp.getPredicate();
    if (!lhs || !rhs || !llvm::is_contained({P::slt, P::sle, P::sgt, P::sge}, pred))
      return std::nullopt;
    IndexTile diff{lhs->base.plus(rhs->base, -1), lhs->steps, lhs->shape};
    for (auto [s, r] : llvm::zip(diff.steps, rhs->steps))
      s -= r;
    return AffineMask::ofAtom(MaskAtom{diff, pred});
  }
  if (isa_and_nonnull<arith::AndIOp, arith::OrIOp>(def)) {
    std::optional<AffineMask> lhs = analyseMask(def->getOperand(0));
    std::optional<AffineMask> rhs = analyseMask(def->getOperand(1));
    if (!lhs || !rhs)
      return std::nullopt;
    return AffineMask::combine(isa<arith::AndIOp>(def) ? AffineMask::Kind::And
                                                       : AffineMask::Kind::Or,
                               std::move(*lhs), std::move(*rhs));
  }
  // not(a) for a single atom: xori with an all-true constant.
  if (auto xorOp = dyn_cast_or_null<arith::XOrIOp>(def)) {
    for (unsigned i = 0; i < 2; ++i) {
      DenseIntElementsAttr ones;
      if (matchPattern(xorOp->getOperand(1 - i), m_Constant(&ones)) && ones.isSplat() &&
          ones.getSplatValue<bool>())
        if (std::optional<AffineMask> in = analyseMask(xorOp->getOperand(i)))
          if (in->kind == AffineMask::Kind::Atom)
            return negateAtom(in->atom);
    }
    return std::nullopt;
  }
  if (isa_and_nonnull<ExpandDimsOp, BroadcastOp>(def)) {
    std::optional<AffineMask> in = analyseMask(def->getOperand(0));
    if (!in)
      return std::nullopt;
    auto inType = cast<RankedTensorType>(def->getOperand(0).getType());
    in->forEachAtom([&](MaskAtom &atom) {
      if (auto expand = dyn_cast<ExpandDimsOp>(def)) {
        atom.diff.steps.insert(atom.diff.steps.begin() + expand.getAxis(), 0);
      } else {
        for (auto [step, from, to] : llvm::zip(atom.diff.steps, inType.getShape(), type.getShape()))
          if (from != to)
            step = 0;
      }
      atom.diff.shape.assign(type.getShape().begin(), type.getShape().end());
    });
    return in;
  }
  return std::nullopt;
}

std::optional<tessel::tile::UniformQuotient>
tessel::tile::uniformFloorQuotient(llvm::ArrayRef<int64_t> coefficients, int64_t k,
                                   int64_t minOffset, int64_t maxOffset, int64_t c) {
  // x = g·L + r with r = (k mod g) + offset. g·L is a multiple of g, as c is, so adding an r
  // in [m·g, m·g + g) never crosses a multiple of c beyond g·(L + m)'s own: x // c =
  // (g·(L + m)) // c = (L + m) // (c / g).
  int64_t g = c;
  for (int64_t a : coefficients)
    g = std::gcd(g, a);
  int64_t kq = llvm::divideFloorSigned(k, g);
  int64_t kr = k - kq * g;
  int64_t m = llvm::divideFloorSigned(kr + minOffset, g);
  if (llvm::divideFloorSigned(kr + maxOffset, g) != m)
    return std::nullopt;
  return UniformQuotient{g, kq + m};
}

std::optional<FloorDivision> tessel::tile::matchFloorDivision(Value v) {
  auto op = v.getDefiningOp<arith::SelectOp>();
  if (!op || !isa<RankedTensorType>(op.getType()))
    return std::nullopt;
  auto cmp = op.getCondition().getDefiningOp<arith::CmpIOp>();
  auto quotient = op.getFalseValue().getDefiningOp<arith::DivSIOp>();
  auto minusOne = op.getTrueValue().getDefiningOp<arith::SubIOp>();
  if (!cmp || !quotient || !minusOne || cmp.getPredicate() != arith::CmpIPredicate::slt ||
      splatConstantInt(cmp.getRhs()) != 0 || minusOne.getLhs() != quotient.getResult() ||
      splatConstantInt(minusOne.getRhs()) != 1)
    return std::nullopt;
  // The quotient and the remainder of the same x by the same c > 0.
  auto remainder = cmp.getLhs().getDefiningOp<arith::RemSIOp>();
  std::optional<int64_t> divisor = splatConstantInt(quotient.getRhs());
  if (!remainder || remainder.getLhs() != quotient.getLhs() || !divisor || *divisor <= 0 ||
      splatConstantInt(remainder.getRhs()) != divisor)
    return std::nullopt;
  return FloorDivision{quotient.getLhs(), *divisor};
}

namespace {
// x's IndexTile and the quotient x // c where it is the same over the tile.
std::optional<std::pair<IndexTile, UniformQuotient>> uniformQuotientOf(Value x, int64_t c) {
  std::optional<IndexTile> tile = analyseIndexTile(x);
  if (!tile)
    return std::nullopt;
  SmallVector<int64_t> coefficients;
  for (auto [symbol, coefficient] : tile->base.terms)
    coefficients.push_back(coefficient);
  std::optional<UniformQuotient> q = uniformFloorQuotient(coefficients, tile->base.constant,
                                                          tile->minOffset(), tile->maxOffset(), c);
  if (!q)
    return std::nullopt;
  return std::make_pair(*tile, *q);
}
} // namespace

bool tessel::tile::hasUniformFloorQuotient(Value x, int64_t c) {
  return uniformQuotientOf(x, c).has_value();
}

std::optional<Value> tessel::tile::emitUniformFloorQuotient(OpBuilder &b, Location loc, Value x,
                                                            int64_t c, Type type) {
  auto found = uniformQuotientOf(x, c);
  if (!found)
    return std::nullopt;
  auto &[tile, q] = *found;
  LinearExpr l;
  for (auto [symbol, coefficient] : tile.base.terms)
    l.terms[symbol] = coefficient / q.g;
  l.constant = q.constant;
  Value scalar = emitLinear(b, loc, l, type);
  if (q.g != c)
    scalar = arith::FloorDivSIOp::create(
        b, loc, scalar, arith::ConstantOp::create(b, loc, b.getIntegerAttr(type, c / q.g)));
  return scalar;
}
