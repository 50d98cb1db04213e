//===- ScalarLowering.cpp - the scalar part shared by the GPU lowerings --------------------===//

#include "tessel/Conversion/ScalarLowering.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

using namespace mlir;

namespace tessel::conversion {

Value toI64(OpBuilder &b, Location loc, Value v) {
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, b.getI64Type(), v);
  if (v.getType().getIntOrFloatBitWidth() < 64)
    return arith::ExtSIOp::create(b, loc, b.getI64Type(), v);
  return v;
}

LoweredDesc lowerMakeDesc(OpBuilder &b, tile::MakeDescOp op, const IRMapping &scalars,
                          const llvm::DenseMap<Value, LoweredDesc> &descs) {
  Location loc = op.getLoc();
  LoweredDesc d;
  d.base = scalars.lookup(op.getBase());
  d.offset = op.getOffset() ? toI64(b, loc, scalars.lookup(op.getOffset()))
                            : Value(arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  for (Value v : op.getShape())
    d.shape.push_back(toI64(b, loc, scalars.lookup(v)));
  for (Value v : op.getStrides())
    d.strides.push_back(toI64(b, loc, scalars.lookup(v)));
  // Memory holds FP8 as bytes: LLVM has no 8-bit float type (only conversions read it).
  d.elementType = op.getResult().getType().getElementType();
  if (isa<Float8E4M3FNType>(d.elementType))
    d.elementType = b.getI8Type();
  if (op.isPaged()) {
    const LoweredDesc &t = descs.at(op.getPages());
    d.pages = LoweredPages{t.base,
                           t.offset,
                           t.shape[0],
                           t.strides[0],
                           toI64(b, loc, scalars.lookup(op.getNumPages())),
                           static_cast<int64_t>(*op.getPageSize())};
  }
  return d;
}

std::pair<Value, Value> pagedRow(OpBuilder &b, Location loc, const LoweredPages &pages, Value row) {
  Value size = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(pages.pageSize));
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  Value entry = arith::DivUIOp::create(b, loc, row, size);
  Value hasEntry = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, entry, pages.length);
  // A predicated load (the entry, else -1 with nothing read; the table's base stands in for a
  // missing entry's address): no branch, so the lookups of a block's rows can all be issued
  // before the copies that wait on them, and identical lookups (K's and V's rows) merge. The
  // table is taken as constant during the kernel.
  Value at = arith::AddIOp::create(b, loc, pages.offset,
                                   arith::MulIOp::create(b, loc, entry, pages.stride));
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value ptr = LLVM::GEPOp::create(b, loc, ptrType, b.getI32Type(), pages.base, ValueRange{at});
  Value address = arith::SelectOp::create(b, loc, hasEntry, ptr, pages.base);
  Value page32 = inlinePtx(b, loc, b.getI32Type(), {hasEntry, address},
                           "mov.b32 $0, -1;\n\t@$1 ld.global.b32 $0, [$2];", "=r,b,l",
                           /*sideEffects=*/false)
                     .front();
  Value page = toI64(b, loc, page32);
  // One op per statement: the IR's order does not depend on the C++ compiler's.
  Value nonNegative = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, page, zero);
  Value inCache = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, page, pages.numPages);
  Value valid = arith::AndIOp::create(b, loc, nonNegative, inCache);
  Value first = arith::MulIOp::create(b, loc, page, size);
  Value within = arith::RemUIOp::create(b, loc, row, size);
  return {arith::AddIOp::create(b, loc, first, within), valid};
}

Value constF32(OpBuilder &b, Location loc, double v) {
  return arith::ConstantOp::create(b, loc, b.getF32FloatAttr(static_cast<float>(v)));
}

Value approxEx2(OpBuilder &b, Location loc, Value x, bool ftz) {
  return LLVM::CallIntrinsicOp::create(
             b, loc, b.getF32Type(),
             b.getStringAttr(ftz ? "llvm.nvvm.ex2.approx.ftz.f32" : "llvm.nvvm.ex2.approx.f32"),
             ValueRange{x})
      .getResult(0);
}

Value approxLg2(OpBuilder &b, Location loc, Value x) {
  return LLVM::CallIntrinsicOp::create(b, loc, b.getF32Type(),
                                       b.getStringAttr("llvm.nvvm.lg2.approx.f"), ValueRange{x})
      .getResult(0);
}

Value emitGridQuery(OpBuilder &b, Operation *op) {
  Location loc = op->getLoc();
  Value index;
  if (auto pid = dyn_cast<tile::ProgramIdOp>(op))
    index = gpu::BlockIdOp::create(b, loc, static_cast<gpu::Dimension>(pid.getAxis()));
  else if (auto np = dyn_cast<tile::NumProgramsOp>(op))
    index = gpu::GridDimOp::create(b, loc, static_cast<gpu::Dimension>(np.getAxis()));
  else
    return Value();
  return arith::IndexCastOp::create(b, loc, b.getI32Type(), index);
}

Value emitLoadScalar(OpBuilder &b, tile::LoadScalarOp op, const LoweredDesc &d,
                     const IRMapping &scalars) {
  Location loc = op.getLoc();
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  Value inBounds = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  Value address = d.offset;
  for (auto [k, iv] : llvm::enumerate(op.getIndices())) {
    Value i = toI64(b, loc, scalars.lookup(iv));
    Value lo = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, i, zero);
    Value hi = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, i, d.shape[k]);
    inBounds = arith::AndIOp::create(b, loc, inBounds, arith::AndIOp::create(b, loc, lo, hi));
    address = arith::AddIOp::create(b, loc, address,
                                    arith::MulIOp::create(b, loc, i, d.strides[k]));
  }
  // A branch, not a clamped address: with an empty descriptor even element 0 may not exist.
  Type type = d.elementType;
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{type}, inBounds, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value ptr = LLVM::GEPOp::create(b, loc, ptrType, type, d.base, ValueRange{address});
  scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, type, ptr)));
  b.setInsertionPointToStart(ifOp.elseBlock());
  double pad = op.getPadding().convertToDouble();
  Value padding = isa<FloatType>(type)
                      ? Value(arith::ConstantOp::create(b, loc, b.getFloatAttr(type, pad)))
                      : Value(arith::ConstantOp::create(
                            b, loc, b.getIntegerAttr(type, static_cast<int64_t>(pad))));
  scf::YieldOp::create(b, loc, padding);
  return ifOp.getResult(0);
}

Value balancedTree(SmallVector<Value> values, function_ref<Value(Value, Value)> combine) {
  while (values.size() > 1) {
    SmallVector<Value> next;
    for (size_t i = 0; i + 1 < values.size(); i += 2)
      next.push_back(combine(values[i], values[i + 1]));
    if (values.size() % 2)
      next.push_back(values.back());
    values = std::move(next);
  }
  return values.front();
}

SmallVector<Value> inlinePtx(OpBuilder &b, Location loc, TypeRange results, ValueRange operands,
                             StringRef text, StringRef constraints, bool sideEffects) {
  SmallVector<Type> resultTypes;
  if (results.size() == 1)
    resultTypes.push_back(results.front());
  else if (!results.empty())
    resultTypes.push_back(
        LLVM::LLVMStructType::getLiteral(b.getContext(), SmallVector<Type>(results)));
  auto asmOp = LLVM::InlineAsmOp::create(
      b, loc, resultTypes, operands, text, constraints, sideEffects, /*is_align_stack=*/false,
      LLVM::TailCallKind::None, LLVM::AsmDialectAttr::get(b.getContext(), LLVM::AsmDialect::AD_ATT),
      /*operand_attrs=*/ArrayAttr());
  if (results.size() == 1)
    return {asmOp.getResult(0)};
  SmallVector<Value> out;
  for (size_t i = 0; i < results.size(); ++i)
    out.push_back(LLVM::ExtractValueOp::create(b, loc, asmOp.getResult(0), i));
  return out;
}

SmallVector<Value> emitScalarOp(OpBuilder &b, Operation *op, ValueRange operands,
                                TypeRange resultTypes, bool ftz) {
  Location loc = op->getLoc();
  if (ftz && isa<math::TanhOp>(op) && resultTypes[0].isF32()) {
    // The fast paths' scores come from f16/bf16 operands: tanh.approx.f32 (one MUFU op, relative
    // error about 2^-11, FlashAttention-3's softcap) instead of upstream's rational expansion.
    return inlinePtx(b, loc, b.getF32Type(), operands, "tanh.approx.f32 $0, $1;", "=f,f",
                     /*sideEffects=*/false);
  }
  if (isa<tile::MulHiUIOp>(op)) {
    // The high word of the 64-bit product: NVPTX selects mul.hi.u32.
    auto wide = [&](Value v) { return arith::ExtUIOp::create(b, loc, b.getI64Type(), v); };
    Value product = arith::MulIOp::create(b, loc, wide(operands[0]), wide(operands[1]));
    Value high = arith::ShRUIOp::create(b, loc, product,
                                        arith::ConstantIntOp::create(b, loc, b.getI64Type(), 32));
    return {arith::TruncIOp::create(b, loc, b.getI32Type(), high)};
  }
  if (isa<math::SinOp, math::CosOp>(op) &&
      isa<Float16Type, BFloat16Type, Float32Type>(resultTypes[0])) {
    // sin.approx / cos.approx (one MUFU op, CUDA's __sinf: absolute error about 2^-21 on
    // [-pi, pi], larger farther out): no libdevice in the kernels. 16-bit operands via f32.
    Value x = operands[0];
    if (!x.getType().isF32())
      x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
    std::string text = std::string(isa<math::SinOp>(op) ? "sin" : "cos") + ".approx" +
                       (ftz ? ".ftz" : "") + ".f32 $0, $1;";
    Value r = inlinePtx(b, loc, b.getF32Type(), ValueRange{x}, text, "=f,f",
                        /*sideEffects=*/false)[0];
    if (!resultTypes[0].isF32())
      r = arith::TruncFOp::create(b, loc, resultTypes[0], r);
    return {r};
  }
  if (isa<math::ExpOp, math::Exp2Op, math::LogOp, math::Log2Op>(op) &&
      isa<Float16Type, BFloat16Type, Float32Type>(resultTypes[0])) {
    Value x = operands[0];
    if (!x.getType().isF32())
      x = arith::ExtFOp::create(b, loc, b.getF32Type(), x);
    Value r;
    if (isa<math::ExpOp>(op))
      r = approxEx2(b, loc, arith::MulFOp::create(b, loc, x, constF32(b, loc, kLog2E)), ftz);
    else if (isa<math::Exp2Op>(op))
      r = approxEx2(b, loc, x, ftz);
    else if (isa<math::LogOp>(op))
      r = arith::MulFOp::create(b, loc, approxLg2(b, loc, x), constF32(b, loc, kLn2));
    else
      r = approxLg2(b, loc, x);
    if (!resultTypes[0].isF32())
      r = arith::TruncFOp::create(b, loc, resultTypes[0], r);
    return {r};
  }
  SmallVector<NamedAttribute> discardable(op->getDiscardableAttrs());
  OperationState state(loc, op->getName(), operands, resultTypes, discardable);
  state.propertiesAttr = op->getPropertiesAsAttribute();
  return SmallVector<Value>(b.create(state)->getResults());
}

void atomicAddAt(OpBuilder &b, Location loc, Value ptr, Value value) {
  LLVM::AtomicRMWOp::create(
      b, loc, isa<FloatType>(value.getType()) ? LLVM::AtomicBinOp::fadd : LLVM::AtomicBinOp::add,
      ptr, value, LLVM::AtomicOrdering::monotonic);
}

} // namespace tessel::conversion
