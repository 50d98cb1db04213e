//===- KernelBuilder.cpp - the IR builder behind the Python DSL -----------===//
//
// Builds tile programs op by op for the Python front end. The front end has already checked types
// and shapes (so it can point at the user's source); the checks here are a second line that turns
// any remaining misuse into std::invalid_argument instead of an assertion inside MLIR.
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "tessel/Registration.h"
#include "tile/IR/TileDialect.h"
#include "tile/Transforms/ElementwiseGrad.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/Support/raw_ostream.h"

#include <stdexcept>

using namespace mlir;
using PyDiagnostic = tessel::python::Diagnostic;
using tessel::python::KernelBuilder;

namespace {
[[noreturn]] void fail(const std::string &message) { throw std::invalid_argument(message); }

std::string typeStr(Type t) {
  std::string s;
  llvm::raw_string_ostream os(s);
  t.print(os);
  return s;
}

Type elementOf(Value v) { return getElementTypeOrSelf(v.getType()); }

std::unique_ptr<MLIRContext> makeContext() {
  DialectRegistry registry;
  tessel::registerDialects(registry);
  tessel::registerPasses();
  // Single-threaded: the machines are small, and IR printing after each pass needs it.
  auto ctx = std::make_unique<MLIRContext>(registry, MLIRContext::Threading::DISABLED);
  ctx->loadAllAvailableDialects();
  // Users get the located message, never a dump of the failing op (a refused kernel's was ~130
  // lines of IR), as from the command-line tools.
  ctx->printOpOnDiagnostic(false);
  return ctx;
}

/// Collects diagnostics for the lifetime of the object instead of printing them.
class DiagnosticCollector {
public:
  explicit DiagnosticCollector(MLIRContext &ctx)
      : handler(&ctx, [this](mlir::Diagnostic &d) {
          PyDiagnostic out = tessel::python::locate(d.getLocation());
          switch (d.getSeverity()) {
          case DiagnosticSeverity::Error: out.severity = "error"; break;
          case DiagnosticSeverity::Warning: out.severity = "warning"; break;
          case DiagnosticSeverity::Note: out.severity = "note"; break;
          case DiagnosticSeverity::Remark: out.severity = "remark"; break;
          }
          out.message = d.str();
          for (mlir::Diagnostic &note : d.getNotes())
            out.message += "\n  note: " + note.str();
          diagnostics.push_back(std::move(out));
          return success();
        }) {}
  std::vector<PyDiagnostic> diagnostics;

private:
  ScopedDiagnosticHandler handler;
};

bool isZeroConstant(Value v) {
  Attribute attr;
  if (!matchPattern(v, m_Constant(&attr)))
    return false;
  if (auto dense = dyn_cast<DenseFPElementsAttr>(attr))
    return dense.isSplat() && dense.getSplatValue<APFloat>().isPosZero();
  return false;
}
} // namespace

PyDiagnostic tessel::python::locate(Location loc) {
  PyDiagnostic out;
  loc->walk([&](Location inner) {
    if (auto file = dyn_cast<FileLineColLoc>(inner)) {
      out.file = file.getFilename().str();
      out.line = file.getLine();
      out.column = file.getColumn();
      return WalkResult::interrupt();
    }
    return WalkResult::advance();
  });
  return out;
}

KernelBuilder::KernelBuilder()
    : ctx(makeContext()), builder(ctx.get()), location(UnknownLoc::get(ctx.get())) {
  moduleOp = ModuleOp::create(location);
  builder.setInsertionPointToEnd(moduleOp->getBody());
}

KernelBuilder::~KernelBuilder() {
  // The module must die before its context.
  moduleOp = nullptr;
}

func::FuncOp KernelBuilder::lookupFunction(const std::string &name) {
  return moduleOp->lookupSymbol<func::FuncOp>(name);
}

void KernelBuilder::setLocation(const std::string &file, unsigned line, unsigned column) {
  location = FileLineColLoc::get(ctx.get(), file, line, column);
}

Type KernelBuilder::elementType(const std::string &dtype) {
  if (dtype == "f32")
    return builder.getF32Type();
  if (dtype == "f16")
    return builder.getF16Type();
  if (dtype == "bf16")
    return builder.getBF16Type();
  if (dtype == "f8e4m3fn")
    return builder.getType<Float8E4M3FNType>();
  if (dtype == "i32")
    return builder.getI32Type();
  if (dtype == "i1")
    return builder.getI1Type();
  fail("unknown element type '" + dtype + "' (expected f8e4m3fn, f16, bf16, f32, i32 or i1)");
}

Type KernelBuilder::withShape(Type element, llvm::ArrayRef<int64_t> shape) {
  if (shape.empty())
    return element;
  for (int64_t d : shape)
    if (d <= 0)
      fail("tile dimensions must be positive");
  return RankedTensorType::get(shape, element);
}

Value KernelBuilder::requireI32Scalar(Value value, const char *what) {
  if (!value.getType().isInteger(32))
    fail(std::string(what) + " must be an i32 scalar, not " + typeStr(value.getType()));
  return value;
}

Type KernelBuilder::paramType(const Param &p) {
  Type element = elementType(p.dtype);
  if (p.kind == "ptr")
    return tile::PtrType::get(ctx.get(), element);
  if (p.kind != "scalar")
    fail("unknown parameter kind '" + p.kind + "'");
  return element;
}

std::vector<Value> KernelBuilder::beginFunction(const std::string &name,
                                                const std::vector<Param> &params) {
  if (!open.empty())
    fail("functions cannot nest");
  SmallVector<Type> types;
  for (const Param &p : params)
    types.push_back(paramType(p));
  builder.setInsertionPointToEnd(moduleOp->getBody());
  auto fn = func::FuncOp::create(builder, loc(), name, builder.getFunctionType(types, {}));
  Block *entry = fn.addEntryBlock();
  open.push_back({fn, builder.saveInsertionPoint()});
  builder.setInsertionPointToStart(entry);
  return std::vector<Value>(entry->args_begin(), entry->args_end());
}

void KernelBuilder::markModerate(unsigned index) {
  if (open.empty() || !isa<func::FuncOp>(open.front().op))
    fail("markModerate outside a function");
  auto fn = cast<func::FuncOp>(open.front().op);
  if (index >= fn.getNumArguments() || !fn.getArgument(index).getType().isF32())
    fail("markModerate: parameter " + std::to_string(index) + " is not an f32 scalar");
  fn.setArgAttr(index, tile::kModerateAttr, builder.getUnitAttr());
}

Value KernelBuilder::addParam(const Param &param) {
  if (open.empty() || !isa<func::FuncOp>(open.front().op))
    fail("addParam outside a function");
  auto fn = cast<func::FuncOp>(open.front().op);
  unsigned index = fn.getNumArguments();
  if (failed(fn.insertArgument(index, paramType(param), DictionaryAttr(), loc())))
    fail("cannot add a parameter to the function");
  return fn.getArgument(index);
}

void KernelBuilder::endFunction() {
  if (open.size() != 1 || !isa<func::FuncOp>(open.back().op))
    fail("endFunction without a matching beginFunction");
  func::ReturnOp::create(builder, loc());
  builder.setInsertionPointToEnd(moduleOp->getBody());
  open.pop_back();
}

Value KernelBuilder::constInt(int64_t value, const std::string &dtype,
                              const std::vector<int64_t> &shape) {
  Type element = elementType(dtype);
  if (!element.isInteger())
    fail("integer constant of non-integer type " + dtype);
  auto attr = builder.getIntegerAttr(element, value);
  if (shape.empty())
    return arith::ConstantOp::create(builder, loc(), attr);
  auto type = cast<RankedTensorType>(withShape(element, shape));
  return arith::ConstantOp::create(builder, loc(), DenseElementsAttr::get(type, Attribute(attr)));
}

Value KernelBuilder::constFloat(double value, const std::string &dtype,
                                const std::vector<int64_t> &shape) {
  Type element = elementType(dtype);
  if (!isa<FloatType>(element))
    fail("float constant of non-float type " + dtype);
  auto attr = builder.getFloatAttr(element, value);
  if (shape.empty())
    return arith::ConstantOp::create(builder, loc(), attr);
  auto type = cast<RankedTensorType>(withShape(element, shape));
  return arith::ConstantOp::create(builder, loc(), DenseElementsAttr::get(type, Attribute(attr)));
}

Value KernelBuilder::binary(const std::string &op, Value lhs, Value rhs) {
  if (lhs.getType() != rhs.getType())
    fail("operands of '" + op + "' differ in type: " + typeStr(lhs.getType()) + " and " +
         typeStr(rhs.getType()));
  Type element = elementOf(lhs);
  bool isFloat = isa<FloatType>(element);
  if (!isFloat && !element.isInteger())
    fail("'" + op + "' needs numbers, not " + typeStr(lhs.getType()));
  Location l = loc();
  if (op == "add")
    return isFloat ? Value(arith::AddFOp::create(builder, l, lhs, rhs))
                   : Value(arith::AddIOp::create(builder, l, lhs, rhs));
  if (op == "sub")
    return isFloat ? Value(arith::SubFOp::create(builder, l, lhs, rhs))
                   : Value(arith::SubIOp::create(builder, l, lhs, rhs));
  if (op == "mul")
    return isFloat ? Value(arith::MulFOp::create(builder, l, lhs, rhs))
                   : Value(arith::MulIOp::create(builder, l, lhs, rhs));
  if (op == "div")
    return isFloat ? Value(arith::DivFOp::create(builder, l, lhs, rhs))
                   : Value(arith::DivSIOp::create(builder, l, lhs, rhs));
  if (op == "mod")
    return isFloat ? Value(arith::RemFOp::create(builder, l, lhs, rhs))
                   : Value(arith::RemSIOp::create(builder, l, lhs, rhs));
  if (op == "max")
    return isFloat ? Value(arith::MaximumFOp::create(builder, l, lhs, rhs))
                   : Value(arith::MaxSIOp::create(builder, l, lhs, rhs));
  if (op == "min")
    return isFloat ? Value(arith::MinimumFOp::create(builder, l, lhs, rhs))
                   : Value(arith::MinSIOp::create(builder, l, lhs, rhs));
  if (op == "pow") {
    if (!isFloat)
      fail("'**' needs float operands");
    return math::PowFOp::create(builder, l, lhs, rhs);
  }
  if (op == "and" || op == "or" || op == "xor") {
    if (isFloat)
      fail("'" + op + "' needs integer or boolean operands, not " + typeStr(lhs.getType()));
    if (op == "and")
      return arith::AndIOp::create(builder, l, lhs, rhs);
    if (op == "or")
      return arith::OrIOp::create(builder, l, lhs, rhs);
    return arith::XOrIOp::create(builder, l, lhs, rhs);
  }
  fail("unknown binary operation '" + op + "'");
}

Value KernelBuilder::compare(const std::string &predicate, Value lhs, Value rhs) {
  if (lhs.getType() != rhs.getType())
    fail("compared values differ in type: " + typeStr(lhs.getType()) + " and " +
         typeStr(rhs.getType()));
  Type element = elementOf(lhs);
  if (isa<FloatType>(element)) {
    arith::CmpFPredicate p;
    if (predicate == "lt")
      p = arith::CmpFPredicate::OLT;
    else if (predicate == "le")
      p = arith::CmpFPredicate::OLE;
    else if (predicate == "gt")
      p = arith::CmpFPredicate::OGT;
    else if (predicate == "ge")
      p = arith::CmpFPredicate::OGE;
    else if (predicate == "eq")
      p = arith::CmpFPredicate::OEQ;
    else if (predicate == "ne")
      p = arith::CmpFPredicate::UNE;
    else
      fail("unknown comparison '" + predicate + "'");
    return arith::CmpFOp::create(builder, loc(), p, lhs, rhs);
  }
  if (!element.isInteger())
    fail("cannot compare " + typeStr(lhs.getType()));
  arith::CmpIPredicate p;
  if (predicate == "lt")
    p = arith::CmpIPredicate::slt;
  else if (predicate == "le")
    p = arith::CmpIPredicate::sle;
  else if (predicate == "gt")
    p = arith::CmpIPredicate::sgt;
  else if (predicate == "ge")
    p = arith::CmpIPredicate::sge;
  else if (predicate == "eq")
    p = arith::CmpIPredicate::eq;
  else if (predicate == "ne")
    p = arith::CmpIPredicate::ne;
  else
    fail("unknown comparison '" + predicate + "'");
  return arith::CmpIOp::create(builder, loc(), p, lhs, rhs);
}

Value KernelBuilder::select(Value cond, Value ifTrue, Value ifFalse) {
  if (ifTrue.getType() != ifFalse.getType())
    fail("select between different types: " + typeStr(ifTrue.getType()) + " and " +
         typeStr(ifFalse.getType()));
  if (!elementOf(cond).isInteger(1))
    fail("select condition must be boolean, not " + typeStr(cond.getType()));
  if (isa<RankedTensorType>(cond.getType()) &&
      cast<ShapedType>(cond.getType()).getShape() != cast<ShapedType>(ifTrue.getType()).getShape())
    fail("select condition and values differ in shape");
  return arith::SelectOp::create(builder, loc(), cond, ifTrue, ifFalse);
}

Value KernelBuilder::unary(const std::string &fn, Value value) {
  Type element = elementOf(value);
  bool isFloat = isa<FloatType>(element);
  Location l = loc();
  if (fn == "abs")
    return isFloat ? Value(math::AbsFOp::create(builder, l, value))
                   : Value(math::AbsIOp::create(builder, l, value));
  if (fn == "neg") {
    if (isFloat)
      return arith::NegFOp::create(builder, l, value);
    Value zero = isa<RankedTensorType>(value.getType())
                     ? constInt(0, dtypeOf(value), shapeOf(value))
                     : constInt(0, dtypeOf(value), {});
    return arith::SubIOp::create(builder, l, zero, value);
  }
  if (fn == "not") {
    if (!element.isInteger(1))
      fail("'not' needs a boolean, not " + typeStr(value.getType()));
    Value one = constInt(1, "i1", shapeOf(value));
    return arith::XOrIOp::create(builder, l, value, one);
  }
  if (!isFloat)
    fail("'" + fn + "' needs a float operand, not " + typeStr(value.getType()));
  if (fn == "exp")
    return math::ExpOp::create(builder, l, value);
  if (fn == "exp2")
    return math::Exp2Op::create(builder, l, value);
  if (fn == "log")
    return math::LogOp::create(builder, l, value);
  if (fn == "log2")
    return math::Log2Op::create(builder, l, value);
  if (fn == "sqrt")
    return math::SqrtOp::create(builder, l, value);
  if (fn == "tanh")
    return math::TanhOp::create(builder, l, value);
  if (fn == "sin")
    return math::SinOp::create(builder, l, value);
  if (fn == "cos")
    return math::CosOp::create(builder, l, value);
  fail("unknown function '" + fn + "'");
}

Value KernelBuilder::convert(Value value, const std::string &dtype) {
  Type from = elementOf(value);
  Type to = elementType(dtype);
  if (from == to)
    return value;
  Type result = withShape(to, shapeOf(value));
  Location l = loc();
  auto fromF = dyn_cast<FloatType>(from);
  auto toF = dyn_cast<FloatType>(to);
  if (fromF && toF) {
    // f16 <-> bf16 goes through f32, and so does every conversion of FP8 (what the hardware
    // converts: cvt's e4m3x2 <-> f16x2 and f32 pairs).
    bool fp8 = fromF.getWidth() == 8 || toF.getWidth() == 8;
    if (fromF.getWidth() == toF.getWidth() || (fp8 && !fromF.isF32() && !toF.isF32())) {
      Value wide = arith::ExtFOp::create(builder, l,
                                         withShape(builder.getF32Type(), shapeOf(value)), value);
      return arith::TruncFOp::create(builder, l, result, wide);
    }
    if (fromF.getWidth() < toF.getWidth())
      return arith::ExtFOp::create(builder, l, result, value);
    return arith::TruncFOp::create(builder, l, result, value);
  }
  if (from.isInteger() && toF) {
    if (from.isInteger(1))
      return arith::UIToFPOp::create(builder, l, result, value);
    return arith::SIToFPOp::create(builder, l, result, value);
  }
  if (to.isInteger(1)) { // "is non-zero"
    Value zero = fromF ? constFloat(0.0, dtypeOf(value), shapeOf(value))
                       : constInt(0, dtypeOf(value), shapeOf(value));
    return compare("ne", value, zero);
  }
  if (fromF && to.isInteger())
    return arith::FPToSIOp::create(builder, l, result, value);
  if (from.isInteger() && to.isInteger()) {
    if (from.getIntOrFloatBitWidth() < to.getIntOrFloatBitWidth())
      return from.isInteger(1) ? Value(arith::ExtUIOp::create(builder, l, result, value))
                               : Value(arith::ExtSIOp::create(builder, l, result, value));
    return arith::TruncIOp::create(builder, l, result, value);
  }
  fail("cannot convert " + typeStr(value.getType()) + " to " + dtype);
}

Value KernelBuilder::programId(int axis) {
  if (axis < 0 || axis > 2)
    fail("grid axis must be 0, 1 or 2");
  return tile::ProgramIdOp::create(builder, loc(), builder.getI32Type(), uint32_t(axis));
}

Value KernelBuilder::numPrograms(int axis) {
  if (axis < 0 || axis > 2)
    fail("grid axis must be 0, 1 or 2");
  return tile::NumProgramsOp::create(builder, loc(), builder.getI32Type(), uint32_t(axis));
}

Value KernelBuilder::makeDesc(Value ptr, std::optional<Value> offset,
                              const std::vector<Value> &shape, const std::vector<Value> &strides,
                              std::optional<Value> pages, std::optional<Value> numPages,
                              int64_t pageSize) {
  auto ptrType = dyn_cast<tile::PtrType>(ptr.getType());
  if (!ptrType)
    fail("a descriptor needs a pointer argument, not " + typeStr(ptr.getType()));
  if (shape.empty() || shape.size() != strides.size())
    fail("a descriptor needs as many strides as dimensions (and at least one)");
  for (Value v : shape)
    requireI32Scalar(v, "descriptor shape");
  for (Value v : strides)
    requireI32Scalar(v, "descriptor stride");
  if (offset)
    requireI32Scalar(*offset, "descriptor offset");
  auto type = tile::DescType::get(ctx.get(), shape.size(), ptrType.getElementType());
  if (!pages)
    return tile::MakeDescOp::create(builder, loc(), type, ptr, offset ? *offset : Value(), shape,
                                    strides, Value(), Value(), IntegerAttr());
  auto table = dyn_cast<tile::DescType>(pages->getType());
  if (!table || table.getRank() != 1 || !table.getElementType().isInteger(32))
    fail("pages must be a rank-1 int32 descriptor of page numbers, not " +
         typeStr(pages->getType()));
  if (shape.size() != 2)
    fail("a paged descriptor has rank 2 (rows through the page table), not " +
         std::to_string(shape.size()));
  if (!numPages)
    fail("a paged descriptor needs num_pages (page numbers outside [0, num_pages) read as 0)");
  requireI32Scalar(*numPages, "num_pages");
  if (pageSize <= 0)
    fail("page_size must be a positive compile-time integer, got " + std::to_string(pageSize));
  return tile::MakeDescOp::create(builder, loc(), type, ptr, offset ? *offset : Value(), shape,
                                  strides, *pages, *numPages, builder.getI64IntegerAttr(pageSize));
}

Value KernelBuilder::load(Value desc, const std::vector<Value> &offsets,
                          const std::vector<int64_t> &shape, double padding) {
  auto descType = dyn_cast<tile::DescType>(desc.getType());
  if (!descType)
    fail("load needs a descriptor, not " + typeStr(desc.getType()));
  if (offsets.size() != descType.getRank() || shape.size() != descType.getRank())
    fail("a rank-" + std::to_string(descType.getRank()) +
         " descriptor needs that many offsets and tile dimensions");
  for (Value v : offsets)
    requireI32Scalar(v, "load offset");
  Type result = withShape(descType.getElementType(), shape);
  return tile::LoadOp::create(builder, loc(), result, desc, offsets,
                              builder.getF64FloatAttr(padding));
}

Value KernelBuilder::gather(Value desc, const std::vector<Value> &indices, double padding) {
  auto descType = dyn_cast<tile::DescType>(desc.getType());
  if (!descType)
    fail("gather needs a descriptor, not " + typeStr(desc.getType()));
  if (indices.size() != descType.getRank())
    fail("a rank-" + std::to_string(descType.getRank()) + " descriptor needs that many indices");
  std::optional<llvm::SmallVector<int64_t>> shape;
  for (Value v : indices) {
    auto tileType = dyn_cast<RankedTensorType>(v.getType());
    Type element = tileType ? tileType.getElementType() : v.getType();
    if (!element.isInteger(32))
      fail("gather indices must be i32 scalars or tiles, not " + typeStr(v.getType()));
    if (!tileType)
      continue;
    if (shape && ArrayRef<int64_t>(*shape) != tileType.getShape())
      fail("gather index tiles must have one shape");
    shape = llvm::SmallVector<int64_t>(tileType.getShape());
  }
  // All indices scalar: a one-element tile (a scalar read is another op's job).
  Type result = withShape(descType.getElementType(),
                          shape ? ArrayRef<int64_t>(*shape) : ArrayRef<int64_t>{1});
  return tile::GatherOp::create(builder, loc(), result, desc, indices,
                                builder.getF64FloatAttr(padding));
}

Value KernelBuilder::loadScalar(Value desc, const std::vector<Value> &indices, double padding) {
  auto descType = dyn_cast<tile::DescType>(desc.getType());
  if (!descType)
    fail("load_scalar needs a descriptor, not " + typeStr(desc.getType()));
  if (indices.size() != descType.getRank())
    fail("a rank-" + std::to_string(descType.getRank()) + " descriptor needs that many indices");
  for (Value v : indices)
    requireI32Scalar(v, "load_scalar index");
  if (auto md = desc.getDefiningOp<tile::MakeDescOp>(); md && md.isPaged())
    fail("load_scalar does not take a paged descriptor (tl.load and tl.store do)");
  return tile::LoadScalarOp::create(builder, loc(), descType.getElementType(), desc, indices,
                                    builder.getF64FloatAttr(padding));
}

void KernelBuilder::store(Value desc, const std::vector<Value> &offsets, Value value,
                          std::optional<Value> mask) {
  checkWrite("store", desc, offsets, value);
  tile::StoreOp::create(builder, loc(), desc, offsets, value, mask ? *mask : Value());
}

void KernelBuilder::atomicAdd(Value desc, const std::vector<Value> &offsets, Value value,
                              std::optional<Value> mask) {
  checkWrite("atomic_add", desc, offsets, value);
  Type element = cast<RankedTensorType>(value.getType()).getElementType();
  if (!element.isF32() && !element.isInteger(32))
    fail("atomic_add adds f32 or i32 tiles, not " + typeStr(element));
  tile::AtomicAddOp::create(builder, loc(), desc, offsets, value, mask ? *mask : Value());
}

void KernelBuilder::checkWrite(const std::string &what, Value desc,
                               const std::vector<Value> &offsets, Value value) {
  auto descType = dyn_cast<tile::DescType>(desc.getType());
  if (!descType)
    fail(what + " needs a descriptor, not " + typeStr(desc.getType()));
  if (!isa<RankedTensorType>(value.getType()))
    fail(what + " needs a tile value");
  if (offsets.size() != descType.getRank())
    fail("wrong number of " + what + " offsets");
  for (Value v : offsets)
    requireI32Scalar(v, (what + " offset").c_str());
}

Value KernelBuilder::dot(Value a, Value b, std::optional<Value> acc) {
  auto at = dyn_cast<RankedTensorType>(a.getType());
  auto bt = dyn_cast<RankedTensorType>(b.getType());
  if (!at || !bt || at.getRank() != 2 || bt.getRank() != 2)
    fail("dot needs two 2-D tiles");
  if (at.getElementType() != bt.getElementType())
    fail("dot operands differ in element type");
  if (at.getShape()[1] != bt.getShape()[0])
    fail("dot contraction sizes differ");
  auto resultType = RankedTensorType::get({at.getShape()[0], bt.getShape()[1]},
                                          builder.getF32Type());
  Value c = acc ? *acc : constFloat(0.0, "f32", resultType.getShape());
  if (c.getType() != resultType)
    fail("dot accumulator must be " + typeStr(resultType));
  return tile::DotOp::create(builder, loc(), resultType, a, b, c);
}

std::optional<Value> KernelBuilder::fuseDotAdd(Value product, Value addend) {
  auto dotOp = product.getDefiningOp<tile::DotOp>();
  if (!dotOp || !product.use_empty() || !isZeroConstant(dotOp.getAcc()) ||
      addend.getType() != product.getType())
    return std::nullopt;
  // Built at the current insertion point, after both the old dot and the addend.
  Value zero = dotOp.getAcc();
  Value fused = tile::DotOp::create(builder, dotOp.getLoc(), product.getType(), dotOp.getA(),
                                    dotOp.getB(), addend);
  dotOp.erase();
  if (zero.use_empty())
    zero.getDefiningOp()->erase();
  return fused;
}

static ::tessel::tile::ReduceKind reduceKind(const std::string &kind) {
  if (kind == "sum")
    return ::tessel::tile::ReduceKind::Sum;
  if (kind == "max")
    return ::tessel::tile::ReduceKind::Max;
  if (kind != "min")
    fail("unknown reduction '" + kind + "'");
  return ::tessel::tile::ReduceKind::Min;
}

Value KernelBuilder::reduce(const std::string &kind, Value value, int axis) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() < 2)
    fail("reductions need a tile of rank 2 or more (tiles cannot hold a scalar)");
  if (axis < 0 || axis >= type.getRank())
    fail("reduction axis out of range");
  tile::ReduceKind k = reduceKind(kind);
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + axis);
  auto result = RankedTensorType::get(shape, type.getElementType());
  return tile::ReduceOp::create(builder, loc(), result, k, value, uint32_t(axis));
}

Value KernelBuilder::scan(const std::string &kind, Value value, int axis, bool reverse) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type)
    fail("scans need a tile");
  if (axis < 0 || axis >= type.getRank())
    fail("scan axis out of range");
  return tile::ScanOp::create(builder, loc(), type, reduceKind(kind), value, uint32_t(axis),
                              reverse);
}

std::vector<Value> KernelBuilder::philox(Value seed, std::optional<Value> seedHi, Value offset,
                                         int rounds) {
  auto type = dyn_cast<RankedTensorType>(offset.getType());
  if (!type || !type.getElementType().isInteger(32))
    fail("random offsets must be an int32 tile");
  if (!seed.getType().isInteger(32) || (seedHi && !seedHi->getType().isInteger(32)))
    fail("a random seed must be an int32 scalar");
  if (rounds < 1 || rounds > 64)
    fail("Philox takes 1 to 64 rounds (10 is the standard)");
  Location l = loc();
  auto scalar = [&](uint32_t v) {
    return arith::ConstantIntOp::create(builder, l, builder.getI32Type(), static_cast<int32_t>(v))
        .getResult();
  };
  auto tileOf = [&](Value s) { return tile::SplatOp::create(builder, l, type, s).getResult(); };
  auto cst = [&](uint32_t v) { return tileOf(scalar(v)); };
  auto add = [&](Value x, Value y) { return arith::AddIOp::create(builder, l, x, y).getResult(); };
  auto mul = [&](Value x, uint32_t m) { return arith::MulIOp::create(builder, l, x, cst(m)); };
  auto xorI = [&](Value x, Value y) { return arith::XOrIOp::create(builder, l, x, y); };
  auto umulhi = [&](uint32_t m, Value x) {
    return tile::MulHiUIOp::create(builder, l, x, cst(m)).getResult();
  };
  constexpr uint32_t kRoundA = 0xD2511F53, kRoundB = 0xCD9E8D57;
  constexpr uint32_t kKeyA = 0x9E3779B9, kKeyB = 0xBB67AE85;
  Value k0 = seed, k1 = seedHi ? *seedHi : arith::ShRSIOp::create(builder, l, seed, scalar(31));
  Value c0 = offset, c1 = cst(0), c2 = cst(0), c3 = cst(0);
  for (int r = 0; r < rounds; ++r) {
    Value n0 = xorI(xorI(umulhi(kRoundB, c2), c1), tileOf(k0));
    Value n2 = xorI(xorI(umulhi(kRoundA, c0), c3), tileOf(k1));
    Value n1 = mul(c2, kRoundB), n3 = mul(c0, kRoundA);
    c0 = n0, c1 = n1, c2 = n2, c3 = n3;
    k0 = add(k0, scalar(kKeyA));
    k1 = add(k1, scalar(kKeyB));
  }
  return {c0, c1, c2, c3};
}

Value KernelBuilder::umulhi(Value lhs, Value rhs) {
  auto type = dyn_cast<RankedTensorType>(lhs.getType());
  if (!type || type != rhs.getType() || !type.getElementType().isInteger(32))
    fail("umulhi needs two int32 tiles of one shape");
  return tile::MulHiUIOp::create(builder, loc(), lhs, rhs);
}

Value KernelBuilder::splat(Value scalar, const std::vector<int64_t> &shape) {
  if (isa<ShapedType>(scalar.getType()) || !scalar.getType().isIntOrFloat())
    fail("splat needs a scalar");
  return tile::SplatOp::create(builder, loc(), withShape(scalar.getType(), shape), scalar);
}

Value KernelBuilder::iota(int64_t size) {
  return tile::IotaOp::create(builder, loc(), withShape(builder.getI32Type(), {size}));
}

Value KernelBuilder::expandDims(Value value, int axis) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || axis < 0 || axis > type.getRank())
    fail("expand_dims axis out of range");
  SmallVector<int64_t> shape(type.getShape());
  shape.insert(shape.begin() + axis, 1);
  return tile::ExpandDimsOp::create(builder, loc(), withShape(type.getElementType(), shape), value,
                                    uint32_t(axis));
}

Value KernelBuilder::broadcast(Value value, const std::vector<int64_t> &shape) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || size_t(type.getRank()) != shape.size())
    fail("broadcast needs a tile of the target rank");
  for (size_t i = 0; i < shape.size(); ++i)
    if (type.getShape()[i] != shape[i] && type.getShape()[i] != 1)
      fail("cannot broadcast an axis of size " + std::to_string(type.getShape()[i]) + " to " +
           std::to_string(shape[i]));
  if (type.getShape() == ArrayRef<int64_t>(shape))
    return value;
  return tile::BroadcastOp::create(builder, loc(), withShape(type.getElementType(), shape), value);
}

Value KernelBuilder::trans(Value value) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() != 2)
    fail("trans needs a 2-D tile");
  return tile::TransOp::create(
      builder, loc(), withShape(type.getElementType(), {type.getShape()[1], type.getShape()[0]}),
      value);
}

std::pair<Value, Value> KernelBuilder::softmax(Value value, int axis, bool streamed) {
  auto type = dyn_cast<RankedTensorType>(value.getType());
  if (!type || type.getRank() < 2 || !isa<FloatType>(type.getElementType()))
    fail("softmax needs a float tile of rank 2 or more");
  if (axis < 0 || axis >= type.getRank())
    fail("softmax axis out of range");
  SmallVector<int64_t> shape(type.getShape());
  shape.erase(shape.begin() + axis);
  auto op = tile::SoftmaxOp::create(builder, loc(), type,
                                    RankedTensorType::get(shape, type.getElementType()), value,
                                    uint32_t(axis), streamed);
  return {op.getResult(), op.getLse()};
}

std::pair<Value, std::vector<Value>> KernelBuilder::beginFor(Value lo, Value hi, Value step,
                                                             const std::vector<Value> &inits) {
  requireI32Scalar(lo, "loop start");
  requireI32Scalar(hi, "loop end");
  requireI32Scalar(step, "loop step");
  auto loop = scf::ForOp::create(builder, loc(), lo, hi, step, inits);
  open.push_back({loop, builder.saveInsertionPoint()});
  Block *body = loop.getBody();
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  builder.setInsertionPointToEnd(body);
  std::vector<Value> carried(loop.getRegionIterArgs().begin(), loop.getRegionIterArgs().end());
  return {loop.getInductionVar(), carried};
}

std::vector<Value> KernelBuilder::endFor(const std::vector<Value> &yields) {
  if (open.empty() || !isa<scf::ForOp>(open.back().op))
    fail("endFor without a matching beginFor");
  auto loop = cast<scf::ForOp>(open.back().op);
  if (yields.size() != loop.getNumResults())
    fail("a loop must yield one value per carried variable");
  for (size_t i = 0; i < yields.size(); ++i)
    if (yields[i].getType() != loop.getResult(i).getType())
      fail("carried value " + std::to_string(i) + " changes type from " +
           typeStr(loop.getResult(i).getType()) + " to " + typeStr(yields[i].getType()));
  builder.setInsertionPointToEnd(loop.getBody());
  scf::YieldOp::create(builder, loc(), yields);
  builder.restoreInsertionPoint(open.back().after);
  builder.setInsertionPointAfter(loop);
  open.pop_back();
  return std::vector<Value>(loop.getResults().begin(), loop.getResults().end());
}

void KernelBuilder::beginIf(Value cond) {
  if (!cond.getType().isInteger(1))
    fail("an if condition must be a boolean scalar, not " + typeStr(cond.getType()));
  auto ifOp = scf::IfOp::create(builder, loc(), TypeRange{}, cond, /*withElseRegion=*/true);
  open.push_back({ifOp, builder.saveInsertionPoint()});
  enterThen();
}

void KernelBuilder::enterThen() {
  if (open.empty() || !isa<scf::IfOp>(open.back().op))
    fail("not inside an if");
  auto ifOp = cast<scf::IfOp>(open.back().op);
  builder.setInsertionPoint(ifOp.thenBlock()->getTerminator());
}

void KernelBuilder::enterElse() {
  if (open.empty() || !isa<scf::IfOp>(open.back().op))
    fail("not inside an if");
  auto ifOp = cast<scf::IfOp>(open.back().op);
  builder.setInsertionPoint(ifOp.elseBlock()->getTerminator());
}

std::vector<Value> KernelBuilder::endIf(const std::vector<Value> &thenValues,
                                        const std::vector<Value> &elseValues) {
  if (open.empty() || !isa<scf::IfOp>(open.back().op))
    fail("endIf without a matching beginIf");
  if (thenValues.size() != elseValues.size())
    fail("both branches of an if must yield the same number of values");
  SmallVector<Type> types;
  for (size_t i = 0; i < thenValues.size(); ++i) {
    if (thenValues[i].getType() != elseValues[i].getType())
      fail("branches yield different types: " + typeStr(thenValues[i].getType()) + " and " +
           typeStr(elseValues[i].getType()));
    types.push_back(thenValues[i].getType());
  }
  auto old = cast<scf::IfOp>(open.back().op);
  builder.setInsertionPoint(old);
  auto ifOp = scf::IfOp::create(builder, old.getLoc(), types, old.getCondition(),
                                /*withElseRegion=*/true);
  // Move the branches' ops over and give them the yields.
  for (auto [from, to, values] : {std::tuple{old.thenBlock(), ifOp.thenBlock(), &thenValues},
                                  std::tuple{old.elseBlock(), ifOp.elseBlock(), &elseValues}}) {
    from->getTerminator()->erase();
    if (!to->empty() && to->back().hasTrait<OpTrait::IsTerminator>())
      to->back().erase();
    to->getOperations().splice(to->end(), from->getOperations());
    builder.setInsertionPointToEnd(to);
    scf::YieldOp::create(builder, loc(), *values);
  }
  old.erase();
  builder.setInsertionPointAfter(ifOp);
  open.pop_back();
  return std::vector<Value>(ifOp.getResults().begin(), ifOp.getResults().end());
}

std::vector<PyDiagnostic> KernelBuilder::verify() {
  DiagnosticCollector collect(*ctx);
  if (failed(mlir::verify(*moduleOp)) && collect.diagnostics.empty())
    collect.diagnostics.push_back({"error", "the module does not verify", "", 0, 0});
  return collect.diagnostics;
}

std::pair<std::optional<Value>, std::vector<PyDiagnostic>> KernelBuilder::elementwiseGrad(Value y,
                                                                                          Value x) {
  if (y.getType() != x.getType() || !isa<RankedTensorType>(x.getType()) ||
      !isa<FloatType>(elementOf(x)))
    fail("tl.elementwise_grad needs two float tiles of one type, got " + typeStr(y.getType()) +
         " and " + typeStr(x.getType()));
  DiagnosticCollector collect(*ctx);
  FailureOr<Value> grad = tessel::tile::buildElementwiseGrad(builder, loc(), y, x);
  if (failed(grad)) {
    if (collect.diagnostics.empty())
      collect.diagnostics.push_back({"error", "cannot differentiate", "", 0, 0});
    return {std::nullopt, collect.diagnostics};
  }
  return {*grad, {}};
}

std::vector<PyDiagnostic> KernelBuilder::runPipeline(const std::string &pipeline, bool dumpIR) {
  DiagnosticCollector collect(*ctx);
  std::string errors;
  llvm::raw_string_ostream errorStream(errors);
  // The FailureOr overload anchors the pass manager on the module itself (TOOLCHAIN.md, pitfall 5).
  FailureOr<OpPassManager> parsed = parsePassPipeline("builtin.module(" + pipeline + ")",
                                                      errorStream);
  if (failed(parsed)) {
    collect.diagnostics.push_back(
        {"error", "invalid pass pipeline '" + pipeline + "': " + errors, "", 0, 0});
    return collect.diagnostics;
  }
  PassManager pm(ctx.get(), parsed->getOpAnchorName());
  static_cast<OpPassManager &>(pm) = *parsed;
  if (dumpIR)
    pm.enableIRPrinting(/*shouldPrintBeforePass=*/[](Pass *, Operation *) { return false; },
                        /*shouldPrintAfterPass=*/[](Pass *, Operation *) { return true; },
                        /*printModuleScope=*/true, /*printAfterOnlyOnChange=*/false,
                        /*printAfterOnlyOnFailure=*/false, llvm::errs());
  if (failed(pm.run(*moduleOp)) && collect.diagnostics.empty())
    collect.diagnostics.push_back({"error", "pass pipeline '" + pipeline + "' failed", "", 0, 0});
  llvm::errs().flush();
  return collect.diagnostics;
}

tessel::python::GpuCompileResult KernelBuilder::compileForGpu(const tessel::TargetOptions &options,
                                                              bool passTiming) {
  GpuCompileResult result;
  DiagnosticCollector collect(*ctx);
  tessel::CompileFlags flags;
  flags.printLLVMDialect = false;
  flags.verifyEachPass = false;
  flags.passTiming = passTiming;
  FailureOr<tessel::CompiledModule> compiled = tessel::compileModule(*moduleOp, options,
                                                                     tessel::Stage::Cubin, flags);
  if (succeeded(compiled)) {
    result.ok = true;
    result.compiled = std::move(*compiled);
  } else if (collect.diagnostics.empty()) {
    collect.diagnostics.push_back({"error", "compiling for " + options.chip + " failed", "", 0, 0});
  }
  result.diagnostics = std::move(collect.diagnostics);
  return result;
}

std::string KernelBuilder::print(bool withLocations) {
  std::string s;
  llvm::raw_string_ostream os(s);
  OpPrintingFlags flags;
  if (withLocations)
    flags.enableDebugInfo();
  moduleOp->print(os, flags);
  return s;
}

std::string KernelBuilder::kindOf(Value value) {
  Type t = value.getType();
  if (isa<tile::PtrType>(t))
    return "ptr";
  if (isa<tile::DescType>(t))
    return "desc";
  if (isa<RankedTensorType>(t))
    return "tile";
  return "scalar";
}

std::string KernelBuilder::dtypeOf(Value value) {
  Type t = value.getType();
  if (auto p = dyn_cast<tile::PtrType>(t))
    t = p.getElementType();
  else if (auto d = dyn_cast<tile::DescType>(t))
    t = d.getElementType();
  else
    t = getElementTypeOrSelf(t);
  if (t.isF32())
    return "f32";
  if (t.isF16())
    return "f16";
  if (t.isBF16())
    return "bf16";
  if (isa<Float8E4M3FNType>(t))
    return "f8e4m3fn";
  if (t.isInteger(32))
    return "i32";
  if (t.isInteger(1))
    return "i1";
  return typeStr(t);
}

std::vector<int64_t> KernelBuilder::shapeOf(Value value) {
  if (auto t = dyn_cast<RankedTensorType>(value.getType()))
    return std::vector<int64_t>(t.getShape().begin(), t.getShape().end());
  return {};
}

int64_t KernelBuilder::rankOf(Value value) {
  if (auto d = dyn_cast<tile::DescType>(value.getType()))
    return d.getRank();
  if (auto t = dyn_cast<RankedTensorType>(value.getType()))
    return t.getRank();
  return 0;
}
