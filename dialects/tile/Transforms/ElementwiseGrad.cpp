//===- ElementwiseGrad.cpp - derivatives of element-wise tile code --------===//
//
// Forward-mode differentiation of the element-wise ops between a tile x and a tile y computed
// from it: each value on a path from x to y gets a tangent (its derivative with respect to x,
// element by element), built from the primal values already in the IR. A null tangent stands for
// zero, so code that does not depend on x (index arithmetic, masks, biases) costs nothing.
//
//===----------------------------------------------------------------------===//

#include "tile/Transforms/ElementwiseGrad.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/BuiltinTypes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/TypeUtilities.h"
#include "llvm/ADT/DenseMap.h"

#include <cmath>

using namespace mlir;

namespace {
class TangentBuilder {
public:
  TangentBuilder(OpBuilder &b, Location loc, Value x) : b(b), loc(loc), x(x) {}

  /// The tangent of v; a null Value means 0.
  FailureOr<Value> tangent(Value v);

private:
  bool dependsOnX(Value v);
  FailureOr<Value> derive(Operation *op, Value result);
  LogicalResult refuse(Operation *op, StringRef why);

  Value constant(Type type, double c) {
    Attribute attr = b.getFloatAttr(getElementTypeOrSelf(type), c);
    if (auto shaped = dyn_cast<ShapedType>(type))
      return arith::ConstantOp::create(b, loc, DenseElementsAttr::get(shaped, attr));
    return arith::ConstantOp::create(b, loc, cast<TypedAttr>(attr));
  }
  Value orZero(Value t, Type type) { return t ? t : constant(type, 0.0); }
  Value add(Value p, Value q) {
    if (!p || !q)
      return p ? p : q;
    return arith::AddFOp::create(b, loc, p, q);
  }
  Value sub(Value p, Value q) {
    if (!q)
      return p;
    if (!p)
      return arith::NegFOp::create(b, loc, q);
    return arith::SubFOp::create(b, loc, p, q);
  }
  /// t·f for a tangent t (maybe zero) and a primal factor f.
  Value mul(Value t, Value f) { return t ? Value(arith::MulFOp::create(b, loc, t, f)) : Value(); }
  Value div(Value t, Value f) { return t ? Value(arith::DivFOp::create(b, loc, t, f)) : Value(); }
  Value pick(Value cond, Value t, Value f, Type type) {
    if (!t && !f)
      return Value();
    return arith::SelectOp::create(b, loc, cond, orZero(t, type), orZero(f, type));
  }

  OpBuilder &b;
  Location loc;
  Value x;
  Value seed; // ∂x/∂x = 1, built once
  llvm::DenseMap<Value, bool> depends;
  llvm::DenseMap<Value, Value> tangents;
};

bool TangentBuilder::dependsOnX(Value v) {
  if (v == x)
    return true;
  auto it = depends.find(v);
  if (it != depends.end())
    return it->second;
  bool result = false;
  if (Operation *op = v.getDefiningOp()) {
    for (Value operand : op->getOperands())
      if ((result = dependsOnX(operand)))
        break;
    // Ops with regions: anything inside that reads x from outside makes the results depend on it.
    if (!result && op->getNumRegions())
      op->walk([&](Operation *inner) {
        for (Value operand : inner->getOperands())
          if (!op->isAncestor(operand.getParentBlock()->getParentOp()) && dependsOnX(operand)) {
            result = true;
            return WalkResult::interrupt();
          }
        return WalkResult::advance();
      });
  }
  depends[v] = result;
  return result;
}

LogicalResult TangentBuilder::refuse(Operation *op, StringRef why) {
  InFlightDiagnostic d = op->emitError() << "cannot differentiate '" << op->getName()
                                         << "' with respect to the score: " << why;
  d.attachNote(loc) << "the derivative of the score_mod is needed here (the backward pass)";
  return failure();
}

FailureOr<Value> TangentBuilder::tangent(Value v) {
  if (v == x) {
    if (!seed)
      seed = constant(x.getType(), 1.0);
    return seed;
  }
  if (!dependsOnX(v) || !isa<FloatType>(getElementTypeOrSelf(v.getType())))
    return Value();
  auto it = tangents.find(v);
  if (it != tangents.end())
    return it->second;
  Operation *op = v.getDefiningOp(); // v != x depends on x, so it is an op's result
  FailureOr<Value> t = derive(op, v);
  if (succeeded(t))
    tangents[v] = *t;
  return t;
}

FailureOr<Value> TangentBuilder::derive(Operation *op, Value y) {
  Type type = y.getType();
  // Element-wise ops only: tile ops reshape, move or combine elements of the score.
  if (isa_and_nonnull<tessel::tile::TileDialect>(op->getDialect()))
    return refuse(op, "it is not element-wise (a score_mod may only apply element-wise ops to "
                      "the score)");
  if (op->getNumRegions())
    return refuse(op, "control flow on the score is not supported; use tl.where");
  auto operand = [&](unsigned i) { return tangent(op->getOperand(i)); };

  if (auto select = dyn_cast<arith::SelectOp>(op)) {
    // The condition is piecewise constant (a compare, a mask): the tangent of the value taken.
    FailureOr<Value> t = tangent(select.getTrueValue());
    FailureOr<Value> f = tangent(select.getFalseValue());
    if (failed(t) || failed(f))
      return failure();
    return pick(select.getCondition(), *t, *f, type);
  }
  if (isa<arith::AddFOp, arith::SubFOp, arith::MulFOp, arith::DivFOp, arith::MaximumFOp,
          arith::MinimumFOp, arith::MaxNumFOp, arith::MinNumFOp, math::PowFOp>(op)) {
    Value a = op->getOperand(0), c = op->getOperand(1);
    FailureOr<Value> ta = operand(0), tc = operand(1);
    if (failed(ta) || failed(tc))
      return failure();
    if (isa<arith::AddFOp>(op))
      return add(*ta, *tc);
    if (isa<arith::SubFOp>(op))
      return sub(*ta, *tc);
    if (isa<arith::MulFOp>(op)) // (a·c)' = a'·c + a·c'
      return add(mul(*ta, c), mul(*tc, a));
    if (isa<arith::DivFOp>(op)) // (a/c)' = (a' − y·c') / c
      return div(sub(*ta, mul(*tc, y)), c);
    if (isa<math::PowFOp>(op)) {
      // (a^c)' = c·a^(c−1)·a' + y·ln(a)·c'
      // (Ops are created one statement at a time: the order of arguments' evaluation is
      // unspecified in C++, and the IR should not depend on the compiler.)
      Value da, dc;
      if (*ta) {
        Value cm1 = arith::SubFOp::create(b, loc, c, constant(type, 1.0));
        Value power = math::PowFOp::create(b, loc, a, cm1);
        da = mul(mul(*ta, c), power);
      }
      if (*tc) {
        Value logA = math::LogOp::create(b, loc, a);
        dc = mul(mul(*tc, y), logA);
      }
      return add(da, dc);
    }
    // max/min: the derivative of the operand that is taken (the first one on ties).
    bool isMax = isa<arith::MaximumFOp, arith::MaxNumFOp>(op);
    Value takesA = arith::CmpFOp::create(
        b, loc, isMax ? arith::CmpFPredicate::OGE : arith::CmpFPredicate::OLE, a, c);
    return pick(takesA, *ta, *tc, type);
  }

  if (op->getNumOperands() != 1)
    return refuse(
        op, "not supported (supported: arith addf subf mulf divf negf maximumf minimumf "
            "maxnumf minnumf select extf truncf; math exp exp2 log log2 sqrt rsqrt tanh sin cos "
            "absf powf)");
  Value a = op->getOperand(0);
  FailureOr<Value> ta = operand(0);
  if (failed(ta))
    return failure();
  if (!*ta)
    return Value();
  if (isa<arith::NegFOp>(op))
    return Value(arith::NegFOp::create(b, loc, *ta));
  if (isa<arith::ExtFOp>(op))
    return Value(arith::ExtFOp::create(b, loc, type, *ta));
  if (isa<arith::TruncFOp>(op))
    return Value(arith::TruncFOp::create(b, loc, type, *ta));
  if (isa<math::ExpOp>(op)) // y·a'
    return mul(*ta, y);
  if (isa<math::Exp2Op>(op)) { // y·ln2·a'
    Value ty = mul(*ta, y);
    return mul(ty, constant(type, M_LN2));
  }
  if (isa<math::LogOp>(op)) // a'/a
    return div(*ta, a);
  if (isa<math::Log2Op>(op)) // a'/(a·ln2)
    return div(*ta, arith::MulFOp::create(b, loc, a, constant(type, M_LN2)));
  if (isa<math::SqrtOp>(op)) // a'/(2y)
    return div(*ta, arith::MulFOp::create(b, loc, y, constant(type, 2.0)));
  if (isa<math::RsqrtOp>(op)) // −a'·y/(2a)
    return div(mul(*ta, arith::MulFOp::create(b, loc, y, constant(type, -0.5))), a);
  if (isa<math::TanhOp>(op)) { // (1 − y²)·a'
    Value one = constant(type, 1.0);
    Value square = arith::MulFOp::create(b, loc, y, y);
    return mul(*ta, arith::SubFOp::create(b, loc, one, square));
  }
  if (isa<math::SinOp>(op)) // cos(a)·a'
    return mul(*ta, math::CosOp::create(b, loc, a));
  if (isa<math::CosOp>(op)) // −sin(a)·a'
    return mul(*ta, arith::NegFOp::create(b, loc, math::SinOp::create(b, loc, a)));
  if (isa<math::AbsFOp>(op)) { // sign(a)·a'
    Value negative = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OLT, a,
                                           constant(type, 0.0));
    return Value(
        arith::SelectOp::create(b, loc, negative, arith::NegFOp::create(b, loc, *ta), *ta));
  }
  return refuse(
      op, "not supported (supported: arith addf subf mulf divf negf maximumf minimumf "
          "maxnumf minnumf select extf truncf; math exp exp2 log log2 sqrt rsqrt tanh sin cos "
          "absf powf)");
}
} // namespace

FailureOr<Value> tessel::tile::buildElementwiseGrad(OpBuilder &builder, Location loc, Value y,
                                                    Value x) {
  auto xType = dyn_cast<RankedTensorType>(x.getType());
  if (!xType || !isa<FloatType>(xType.getElementType()) || y.getType() != x.getType())
    return emitError(loc) << "an element-wise derivative needs two float tiles of one type, got "
                          << x.getType() << " and " << y.getType();
  TangentBuilder tb(builder, loc, x);
  FailureOr<Value> t = tb.tangent(y);
  if (failed(t))
    return failure();
  if (!*t)
    return Value(arith::ConstantOp::create(
        builder, loc,
        DenseElementsAttr::get(xType, builder.getFloatAttr(xType.getElementType(), 0.0))));
  return *t;
}
