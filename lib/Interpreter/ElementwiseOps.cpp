//===- ElementwiseOps.cpp - arith and math ops in the interpreter ---------===//
//
// Element-wise ops on scalars and tiles: float math computed in double and rounded to the result
// type, integer math wrapped to the bit width, compares, selects, casts and constants. Undefined
// behaviour (division by zero, oversized shifts, out-of-range fptosi) is a located error.
//
//===----------------------------------------------------------------------===//

#include "InterpreterImpl.h"

#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinAttributes.h"

#include "llvm/ADT/TypeSwitch.h"

#include <cmath>
#include <limits>

using namespace mlir;
using namespace tessel::interp;
using namespace tessel::interp::detail;

double tessel::interp::detail::maximumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == 0.0 && b == 0.0)
    return std::signbit(a) ? b : a;
  return a > b ? a : b;
}

double tessel::interp::detail::minimumF(double a, double b) {
  if (std::isnan(a) || std::isnan(b))
    return std::numeric_limits<double>::quiet_NaN();
  if (a == 0.0 && b == 0.0)
    return std::signbit(a) ? a : b;
  return a < b ? a : b;
}

namespace {
// Integer ops report undefined behaviour through `err` instead of computing garbage.
using IntFn = int64_t (*)(int64_t, int64_t, unsigned, const char *&);

int64_t divSI(int64_t a, int64_t b, unsigned w, const char *&err) {
  if (b == 0)
    return err = "divides by zero", 0;
  if (a == minSigned(w) && b == -1)
    return err = "overflows: the quotient of the most negative value by -1", 0;
  return a / b;
}

int64_t floorDivSI(int64_t a, int64_t b, unsigned w, const char *&err) {
  int64_t q = divSI(a, b, w, err);
  if (!err && a % b != 0 && ((a < 0) != (b < 0)))
    --q;
  return q;
}

int64_t ceilDivSI(int64_t a, int64_t b, unsigned w, const char *&err) {
  int64_t q = divSI(a, b, w, err);
  if (!err && a % b != 0 && ((a < 0) == (b < 0)))
    ++q;
  return q;
}

int64_t remSI(int64_t a, int64_t b, unsigned, const char *&err) {
  if (b == 0)
    return err = "divides by zero", 0;
  return b == -1 ? 0 : a % b;
}

int64_t shiftLeft(int64_t a, int64_t b, unsigned w, const char *&err) {
  if (toUnsigned(b, w) >= w)
    return err = "shifts by at least the bit width", 0;
  return static_cast<int64_t>(static_cast<uint64_t>(a) << toUnsigned(b, w));
}

int64_t shiftRightS(int64_t a, int64_t b, unsigned w, const char *&err) {
  if (toUnsigned(b, w) >= w)
    return err = "shifts by at least the bit width", 0;
  return a >> toUnsigned(b, w);
}

int64_t shiftRightU(int64_t a, int64_t b, unsigned w, const char *&err) {
  if (toUnsigned(b, w) >= w)
    return err = "shifts by at least the bit width", 0;
  return static_cast<int64_t>(toUnsigned(a, w) >> toUnsigned(b, w));
}
} // namespace

std::optional<LogicalResult> Interpreter::runElementwise(Frame &fr, Operation *op) {
  using llvm::TypeSwitch;
  return TypeSwitch<Operation *, std::optional<LogicalResult>>(op)
      // arith: floats.
      .Case([&](arith::AddFOp) {
        return floatBinary(fr, op, [](double a, double b) { return a + b; });
      })
      .Case([&](arith::SubFOp) {
        return floatBinary(fr, op, [](double a, double b) { return a - b; });
      })
      .Case([&](arith::MulFOp) {
        return floatBinary(fr, op, [](double a, double b) { return a * b; });
      })
      .Case([&](arith::DivFOp) {
        return floatBinary(fr, op, [](double a, double b) { return a / b; });
      })
      .Case([&](arith::MaximumFOp) { return floatBinary(fr, op, maximumF); })
      .Case([&](arith::MinimumFOp) { return floatBinary(fr, op, minimumF); })
      .Case([&](arith::MaxNumFOp) {
        return floatBinary(fr, op, [](double a, double b) { return std::fmax(a, b); });
      })
      .Case([&](arith::MinNumFOp) {
        return floatBinary(fr, op, [](double a, double b) { return std::fmin(a, b); });
      })
      .Case([&](arith::NegFOp) { return floatUnary(fr, op, [](double a) { return -a; }); })
      // arith: integers.
      .Case([&](arith::AddIOp) {
        return intBinary(fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) {
                           return static_cast<int64_t>(uint64_t(a) + uint64_t(b));
                         }));
      })
      .Case([&](arith::SubIOp) {
        return intBinary(fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) {
                           return static_cast<int64_t>(uint64_t(a) - uint64_t(b));
                         }));
      })
      .Case([&](arith::MulIOp) {
        return intBinary(fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) {
                           return static_cast<int64_t>(uint64_t(a) * uint64_t(b));
                         }));
      })
      .Case([&](arith::DivSIOp) { return intBinary(fr, op, IntFn(divSI)); })
      .Case([&](arith::RemSIOp) { return intBinary(fr, op, IntFn(remSI)); })
      .Case([&](arith::FloorDivSIOp) { return intBinary(fr, op, IntFn(floorDivSI)); })
      .Case([&](arith::CeilDivSIOp) { return intBinary(fr, op, IntFn(ceilDivSI)); })
      .Case([&](arith::MaxSIOp) {
        return intBinary(fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) {
                           return std::max(a, b);
                         }));
      })
      .Case([&](arith::MinSIOp) {
        return intBinary(fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) {
                           return std::min(a, b);
                         }));
      })
      .Case([&](arith::AndIOp) {
        return intBinary(
            fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) { return a & b; }));
      })
      .Case([&](arith::OrIOp) {
        return intBinary(
            fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) { return a | b; }));
      })
      .Case([&](arith::XOrIOp) {
        return intBinary(
            fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) { return a ^ b; }));
      })
      .Case([&](arith::ShLIOp) { return intBinary(fr, op, IntFn(shiftLeft)); })
      .Case([&](arith::ShRSIOp) { return intBinary(fr, op, IntFn(shiftRightS)); })
      .Case([&](arith::ShRUIOp) { return intBinary(fr, op, IntFn(shiftRightU)); })
      .Case([&](tile::MulHiUIOp) {
        return intBinary(fr, op, IntFn([](int64_t a, int64_t b, unsigned, const char *&) {
                           return static_cast<int64_t>((uint64_t(uint32_t(a)) * uint32_t(b)) >> 32);
                         }));
      })
      .Case([&](arith::CmpIOp o) { return cmpI(fr, o); })
      .Case([&](arith::CmpFOp o) { return cmpF(fr, o); })
      .Case([&](arith::SelectOp o) { return select(fr, o); })
      .Case([&](arith::ConstantOp o) { return constant(fr, o); })
      .Case<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp, arith::FPToSIOp,
            arith::IndexCastOp, arith::IndexCastUIOp, arith::ExtSIOp, arith::ExtUIOp,
            arith::TruncIOp>([&](auto) { return convert(fr, op); })
      // math.
      .Case([&](math::ExpOp) { return floatUnary(fr, op, [](double a) { return std::exp(a); }); })
      .Case([&](math::Exp2Op) { return floatUnary(fr, op, [](double a) { return std::exp2(a); }); })
      .Case([&](math::LogOp) { return floatUnary(fr, op, [](double a) { return std::log(a); }); })
      .Case([&](math::Log2Op) { return floatUnary(fr, op, [](double a) { return std::log2(a); }); })
      .Case([&](math::SqrtOp) { return floatUnary(fr, op, [](double a) { return std::sqrt(a); }); })
      .Case([&](math::RsqrtOp) {
        return floatUnary(fr, op, [](double a) { return 1.0 / std::sqrt(a); });
      })
      .Case([&](math::TanhOp) { return floatUnary(fr, op, [](double a) { return std::tanh(a); }); })
      .Case([&](math::SinOp) { return floatUnary(fr, op, [](double a) { return std::sin(a); }); })
      .Case([&](math::CosOp) { return floatUnary(fr, op, [](double a) { return std::cos(a); }); })
      .Case([&](math::AbsFOp) { return floatUnary(fr, op, [](double a) { return std::fabs(a); }); })
      .Default([](Operation *) { return std::nullopt; });
}

template <typename Fn>
LogicalResult Interpreter::floatUnary(Frame &fr, Operation *op, Fn fn) {
  FailureOr<const Tile *> a = tile(fr, op, op->getOperand(0));
  FailureOr<Tile> r = newTile(op, op->getResult(0).getType());
  if (failed(a) || failed(r))
    return failure();
  if (!(*a)->isFloat() || !r->isFloat() || (*a)->size() != r->size())
    return op->emitOpError() << "expects float operands shaped like its result";
  for (int64_t k = 0; k < r->size(); ++k)
    r->f[k] = roundFloat(r->elementType, fn((*a)->f[k]));
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op->getResult(0), std::move(*r));
  return success();
}

template <typename Fn>
LogicalResult Interpreter::floatBinary(Frame &fr, Operation *op, Fn fn) {
  FailureOr<const Tile *> a = tile(fr, op, op->getOperand(0));
  FailureOr<const Tile *> b = tile(fr, op, op->getOperand(1));
  FailureOr<Tile> r = newTile(op, op->getResult(0).getType());
  if (failed(a) || failed(b) || failed(r))
    return failure();
  if (!(*a)->isFloat() || !(*b)->isFloat() || !r->isFloat() || (*a)->size() != r->size() ||
      (*b)->size() != r->size())
    return op->emitOpError() << "expects float operands shaped like its result";
  for (int64_t k = 0; k < r->size(); ++k)
    r->f[k] = roundFloat(r->elementType, fn((*a)->f[k], (*b)->f[k]));
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op->getResult(0), std::move(*r));
  return success();
}

template <typename Fn>
LogicalResult Interpreter::intBinary(Frame &fr, Operation *op, Fn fn) {
  FailureOr<const Tile *> a = tile(fr, op, op->getOperand(0));
  FailureOr<const Tile *> b = tile(fr, op, op->getOperand(1));
  FailureOr<Tile> r = newTile(op, op->getResult(0).getType());
  if (failed(a) || failed(b) || failed(r))
    return failure();
  if ((*a)->isFloat() || (*b)->isFloat() || r->isFloat() || (*a)->size() != r->size() ||
      (*b)->size() != r->size())
    return op->emitOpError() << "expects integer operands shaped like its result";
  unsigned w = bitWidth(r->elementType);
  for (int64_t k = 0; k < r->size(); ++k) {
    const char *err = nullptr;
    int64_t v = fn((*a)->i[k], (*b)->i[k], w, err);
    if (err)
      return op->emitOpError() << err << " (operands " << (*a)->i[k] << " and " << (*b)->i[k]
                               << ")";
    r->i[k] = wrapInt(r->elementType, v);
  }
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op->getResult(0), std::move(*r));
  return success();
}

LogicalResult Interpreter::convert(Frame &fr, Operation *op) {
  FailureOr<const Tile *> a = tile(fr, op, op->getOperand(0));
  FailureOr<Tile> r = newTile(op, op->getResult(0).getType());
  if (failed(a) || failed(r))
    return failure();
  const Tile &in = **a;
  if (in.size() != r->size())
    return op->emitOpError() << "expects an operand shaped like its result";
  if (auto trunc = dyn_cast<arith::TruncFOp>(op))
    if (trunc.getRoundingmodeAttr() &&
        *trunc.getRoundingmode() != arith::RoundingMode::to_nearest_even)
      return op->emitOpError() << "rounds " << trunc.getRoundingmodeAttr()
                               << "; the interpreter supports only to_nearest_even";
  unsigned inWidth = in.isFloat() ? 0 : bitWidth(in.elementType);
  bool wantFloatIn = isa<arith::ExtFOp, arith::TruncFOp, arith::FPToSIOp>(op);
  if (wantFloatIn != in.isFloat() ||
      r->isFloat() != isa<arith::ExtFOp, arith::TruncFOp, arith::SIToFPOp, arith::UIToFPOp>(op))
    return op->emitOpError() << "has operand or result types the interpreter cannot cast";
  for (int64_t k = 0; k < r->size(); ++k) {
    if (isa<arith::ExtFOp, arith::TruncFOp>(op)) {
      r->f[k] = roundFloat(r->elementType, in.f[k]);
    } else if (isa<arith::SIToFPOp>(op)) {
      r->f[k] = roundFloat(r->elementType, static_cast<double>(in.i[k]));
    } else if (isa<arith::UIToFPOp>(op)) {
      r->f[k] = roundFloat(r->elementType, static_cast<double>(toUnsigned(in.i[k], inWidth)));
    } else if (isa<arith::FPToSIOp>(op)) {
      double t = std::trunc(in.f[k]);
      unsigned w = bitWidth(r->elementType);
      double lo = std::ldexp(-1.0, w - 1), hi = std::ldexp(1.0, w - 1);
      if (std::isnan(t) || t < lo || t >= hi)
        return op->emitOpError() << "converts " << in.f[k] << ", which does not fit in "
                                 << r->elementType;
      r->i[k] = static_cast<int64_t>(t);
    } else if (isa<arith::IndexCastUIOp, arith::ExtUIOp>(op)) {
      r->i[k] = wrapInt(r->elementType, static_cast<int64_t>(toUnsigned(in.i[k], inWidth)));
    } else { // index_cast, extsi, trunci: sign-extend or truncate
      r->i[k] = wrapInt(r->elementType, in.i[k]);
    }
  }
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op->getResult(0), std::move(*r));
  return success();
}

LogicalResult Interpreter::cmpI(Frame &fr, arith::CmpIOp op) {
  FailureOr<const Tile *> a = tile(fr, op, op.getLhs());
  FailureOr<const Tile *> b = tile(fr, op, op.getRhs());
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(a) || failed(b) || failed(r))
    return failure();
  if ((*a)->isFloat() || (*b)->isFloat() || (*a)->size() != r->size() || (*b)->size() != r->size())
    return op.emitOpError() << "expects integer operands shaped like its result";
  unsigned w = bitWidth((*a)->elementType);
  for (int64_t k = 0; k < r->size(); ++k) {
    int64_t x = (*a)->i[k], y = (*b)->i[k];
    uint64_t ux = toUnsigned(x, w), uy = toUnsigned(y, w);
    bool v = false;
    switch (op.getPredicate()) {
    case arith::CmpIPredicate::eq: v = x == y; break;
    case arith::CmpIPredicate::ne: v = x != y; break;
    case arith::CmpIPredicate::slt: v = x < y; break;
    case arith::CmpIPredicate::sle: v = x <= y; break;
    case arith::CmpIPredicate::sgt: v = x > y; break;
    case arith::CmpIPredicate::sge: v = x >= y; break;
    case arith::CmpIPredicate::ult: v = ux < uy; break;
    case arith::CmpIPredicate::ule: v = ux <= uy; break;
    case arith::CmpIPredicate::ugt: v = ux > uy; break;
    case arith::CmpIPredicate::uge: v = ux >= uy; break;
    }
    r->i[k] = v ? -1 : 0; // i1 true, sign-extended
  }
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op.getResult(), std::move(*r));
  return success();
}

LogicalResult Interpreter::cmpF(Frame &fr, arith::CmpFOp op) {
  FailureOr<const Tile *> a = tile(fr, op, op.getLhs());
  FailureOr<const Tile *> b = tile(fr, op, op.getRhs());
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(a) || failed(b) || failed(r))
    return failure();
  if (!(*a)->isFloat() || !(*b)->isFloat() || (*a)->size() != r->size() ||
      (*b)->size() != r->size())
    return op.emitOpError() << "expects float operands shaped like its result";
  using P = arith::CmpFPredicate;
  for (int64_t k = 0; k < r->size(); ++k) {
    double x = (*a)->f[k], y = (*b)->f[k];
    bool unordered = std::isnan(x) || std::isnan(y);
    bool v = false;
    switch (op.getPredicate()) {
    case P::AlwaysFalse: v = false; break;
    case P::OEQ: v = !unordered && x == y; break;
    case P::OGT: v = !unordered && x > y; break;
    case P::OGE: v = !unordered && x >= y; break;
    case P::OLT: v = !unordered && x < y; break;
    case P::OLE: v = !unordered && x <= y; break;
    case P::ONE: v = !unordered && x != y; break;
    case P::ORD: v = !unordered; break;
    case P::UEQ: v = unordered || x == y; break;
    case P::UGT: v = unordered || x > y; break;
    case P::UGE: v = unordered || x >= y; break;
    case P::ULT: v = unordered || x < y; break;
    case P::ULE: v = unordered || x <= y; break;
    case P::UNE: v = unordered || x != y; break;
    case P::UNO: v = unordered; break;
    case P::AlwaysTrue: v = true; break;
    }
    r->i[k] = v ? -1 : 0;
  }
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op.getResult(), std::move(*r));
  return success();
}

LogicalResult Interpreter::select(Frame &fr, arith::SelectOp op) {
  FailureOr<const Tile *> c = tile(fr, op, op.getCondition());
  FailureOr<const Tile *> a = tile(fr, op, op.getTrueValue());
  FailureOr<const Tile *> b = tile(fr, op, op.getFalseValue());
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(c) || failed(a) || failed(b) || failed(r))
    return failure();
  const Tile &cond = **c;
  bool scalarCond = cond.shape.empty();
  if (cond.isFloat() || (*a)->size() != r->size() || (*b)->size() != r->size() ||
      (!scalarCond && cond.size() != r->size()) || (*a)->isFloat() != r->isFloat())
    return op.emitOpError() << "expects operands shaped like its result";
  for (int64_t k = 0; k < r->size(); ++k) {
    bool pick = cond.i[scalarCond ? 0 : k] != 0;
    const Tile &src = pick ? **a : **b;
    if (r->isFloat())
      r->f[k] = src.f[k];
    else
      r->i[k] = src.i[k];
  }
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op.getResult(), std::move(*r));
  return success();
}

LogicalResult Interpreter::constant(Frame &fr, arith::ConstantOp op) {
  FailureOr<Tile> r = newTile(op, op.getType());
  if (failed(r))
    return failure();
  Attribute attr = op.getValue();
  if (auto fa = dyn_cast<FloatAttr>(attr); fa && r->isFloat() && r->size() == 1) {
    r->f[0] = roundFloat(r->elementType, fa.getValueAsDouble());
  } else if (auto ia = dyn_cast<IntegerAttr>(attr); ia && !r->isFloat() && r->size() == 1) {
    r->i[0] = wrapInt(r->elementType, ia.getValue().getSExtValue());
  } else if (auto dense = dyn_cast<DenseIntOrFPElementsAttr>(attr);
             dense && dense.getNumElements() == r->size()) {
    int64_t k = 0;
    if (r->isFloat()) {
      for (const APFloat &v : dense.getValues<APFloat>())
        r->f[k++] = roundFloat(r->elementType, v.convertToDouble());
    } else {
      for (const APInt &v : dense.getValues<APInt>())
        r->i[k++] = wrapInt(r->elementType, v.getSExtValue());
    }
  } else {
    return op.emitOpError() << "has the value " << attr
                            << ", which the interpreter does not support";
  }
  if (failed(step(op, r->size())))
    return failure();
  set(fr, op.getResult(), std::move(*r));
  return success();
}
