//===- BlockedMemory.cpp - loads and stores of row-blocked tiles -------------------===//
//
// Each thread moves its vectors of V contiguous elements: one V-wide load or store where the
// whole vector lies inside the descriptor, the inner stride is 1 and the address is aligned to
// the vector (checked at run time: descriptors carry run-time strides and offsets); element by
// element, with the bounds and the padding of the reference lowering, otherwise. Threads that
// repeat rows (R smaller than the rows the threads cover) and copies of a row or column value
// held by several threads store nothing.
//
//===------------------------------------------------------------------------------------===//

#include "BlockedKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessel::blocked {

namespace {

using tessel::conversion::LoweredDesc;

Value constantOf(OpBuilder &b, Location loc, Type t, double v) {
  if (isa<FloatType>(t))
    return arith::ConstantOp::create(b, loc, b.getFloatAttr(t, v));
  return arith::ConstantOp::create(b, loc, b.getIntegerAttr(t, static_cast<int64_t>(v)));
}

Value elementPtr(OpBuilder &b, Location loc, const LoweredDesc &d, Value address) {
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  return LLVM::GEPOp::create(b, loc, ptrType, d.elementType, d.base, ValueRange{address});
}

Value inRange(OpBuilder &b, Location loc, Value g, Value size) {
  Value zero = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0));
  return arith::AndIOp::create(b, loc,
                               arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, g, zero),
                               arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, g, size));
}

/// One vector of a block: where its first element is and whether the V-wide access may be used.
struct VectorAt {
  Value address;             // i64 element offset of element 0
  Value vectorOk;            // i1: all in bounds, inner stride 1, aligned
  SmallVector<Value> elemOk; // i1 per element: in bounds
  Value innerStride;         // i64
};

/// The vector at block indices (row, col0) of `d` (1-D descriptors: col0 only) plus `offsets`.
VectorAt vectorAt(OpBuilder &b, Location loc, const LoweredDesc &d, ArrayRef<Value> offsets,
                  Value row, Value col0, int64_t V) {
  auto i64 = b.getI64Type();
  auto ext = [&](Value v) { return arith::ExtSIOp::create(b, loc, i64, v); };
  VectorAt at;
  Value ok = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
  at.address = d.offset;
  size_t inner = d.shape.size() - 1;
  if (d.shape.size() == 2) {
    Value g = arith::AddIOp::create(b, loc, offsets[0], ext(row));
    ok = inRange(b, loc, g, d.shape[0]);
    at.address = arith::AddIOp::create(b, loc, at.address,
                                       arith::MulIOp::create(b, loc, g, d.strides[0]));
  }
  Value g = arith::AddIOp::create(b, loc, offsets[inner], ext(col0));
  at.innerStride = d.strides[inner];
  at.address = arith::AddIOp::create(b, loc, at.address,
                                     arith::MulIOp::create(b, loc, g, at.innerStride));
  for (int64_t e = 0; e < V; ++e) {
    Value ge = e ? Value(arith::AddIOp::create(
                       b, loc, g, arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(e))))
                 : g;
    at.elemOk.push_back(arith::AndIOp::create(b, loc, ok, inRange(b, loc, ge, d.shape[inner])));
  }
  if (V == 1) {
    at.vectorOk = arith::ConstantOp::create(b, loc, b.getBoolAttr(false));
    return at;
  }
  int64_t bytes = V * std::max<int64_t>(1, d.elementType.getIntOrFloatBitWidth() / 8);
  Value one = arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(1));
  Value unit = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, at.innerStride, one);
  Value addr = LLVM::PtrToIntOp::create(b, loc, i64, elementPtr(b, loc, d, at.address));
  Value aligned = arith::CmpIOp::create(
      b, loc, arith::CmpIPredicate::eq,
      arith::AndIOp::create(b, loc, addr,
                            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(bytes - 1))),
      arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(0)));
  at.vectorOk = arith::AndIOp::create(
      b, loc, arith::AndIOp::create(b, loc, at.elemOk.front(), at.elemOk.back()),
      arith::AndIOp::create(b, loc, unit, aligned));
  return at;
}

/// The address of element `e` of the vector `at`.
Value elementAddress(OpBuilder &b, Location loc, const VectorAt &at, int64_t e) {
  if (e == 0)
    return at.address;
  return arith::AddIOp::create(
      b, loc, at.address,
      arith::MulIOp::create(b, loc, at.innerStride,
                            arith::ConstantOp::create(b, loc, b.getI64IntegerAttr(e))));
}

/// The V elements of `at`: one vector load when it may be used, else element by element with
/// the padding where out of bounds (nothing read there).
SmallVector<Value> readVector(OpBuilder &b, Location loc, const LoweredDesc &d, const VectorAt &at,
                              int64_t V, double padding) {
  Type t = d.elementType;
  SmallVector<Type> types(V, t);
  auto ifOp = scf::IfOp::create(b, loc, types, at.vectorOk, true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    SmallVector<Value> out;
    if (V > 1) {
      auto vt = VectorType::get({V}, t);
      int64_t bytes = V * std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
      Value vec = LLVM::LoadOp::create(b, loc, vt, elementPtr(b, loc, d, at.address), bytes);
      for (int64_t e = 0; e < V; ++e)
        out.push_back(LLVM::ExtractElementOp::create(
            b, loc, vec, arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(e))));
    } else {
      out.push_back(constantOf(b, loc, t, padding));
    }
    scf::YieldOp::create(b, loc, out);
    b.setInsertionPointToStart(ifOp.elseBlock());
    out.clear();
    for (int64_t e = 0; e < V; ++e) {
      auto one = scf::IfOp::create(b, loc, TypeRange{t}, at.elemOk[e], true);
      OpBuilder::InsertionGuard inner(b);
      b.setInsertionPointToStart(one.thenBlock());
      scf::YieldOp::create(b, loc,
                           Value(LLVM::LoadOp::create(
                               b, loc, t, elementPtr(b, loc, d, elementAddress(b, loc, at, e)))));
      b.setInsertionPointToStart(one.elseBlock());
      scf::YieldOp::create(b, loc, constantOf(b, loc, t, padding));
      out.push_back(one.getResult(0));
    }
    scf::YieldOp::create(b, loc, out);
  }
  return SmallVector<Value>(ifOp.getResults());
}

/// Writes `values` at `at` where `store` (i1) holds: one vector store when it may be used
/// (and no element is masked off), else each in-bounds element whose `mask` bit is set.
void writeVector(OpBuilder &b, Location loc, const LoweredDesc &d, const VectorAt &at,
                 ArrayRef<Value> values, ArrayRef<Value> mask, Value store) {
  int64_t V = values.size();
  Type t = d.elementType;
  Value whole = arith::AndIOp::create(b, loc, store, at.vectorOk);
  for (Value m : mask)
    whole = arith::AndIOp::create(b, loc, whole, m);
  auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, whole, true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(ifOp.thenBlock());
  if (V > 1) {
    auto vt = VectorType::get({V}, t);
    Value vec = LLVM::PoisonOp::create(b, loc, vt);
    for (int64_t e = 0; e < V; ++e)
      vec = LLVM::InsertElementOp::create(
          b, loc, vec, values[e], arith::ConstantOp::create(b, loc, b.getI32IntegerAttr(e)));
    int64_t bytes = V * std::max<int64_t>(1, t.getIntOrFloatBitWidth() / 8);
    LLVM::StoreOp::create(b, loc, vec, elementPtr(b, loc, d, at.address), bytes);
  }
  b.setInsertionPointToStart(ifOp.elseBlock());
  for (int64_t e = 0; e < V; ++e) {
    Value ok = arith::AndIOp::create(b, loc, store, at.elemOk[e]);
    if (!mask.empty())
      ok = arith::AndIOp::create(b, loc, ok, mask[e]);
    auto one = scf::IfOp::create(b, loc, TypeRange{}, ok, false);
    OpBuilder::InsertionGuard inner(b);
    b.setInsertionPointToStart(one.thenBlock());
    LLVM::StoreOp::create(b, loc, values[e], elementPtr(b, loc, d, elementAddress(b, loc, at, e)));
  }
}

} // namespace

SmallVector<BlockedKernelBuilder::VectorSlot> BlockedKernelBuilder::vectorSlots(Kind k) {
  SmallVector<VectorSlot> slots;
  if (k == Kind::Row) {
    for (int64_t s = 0; s < L.rowSlots; ++s)
      slots.push_back({rowOf(s), ci32(0), 1, s});
    return slots;
  }
  for (int64_t s = 0; s < (k == Kind::Tile ? L.rowSlots : 1); ++s) {
    Value row = k == Kind::Tile ? rowOf(s) : ci32(0);
    for (int64_t j = 0; j < L.colChunks; ++j)
      slots.push_back(
          {row, colOf(j, 0), L.vector, k == Kind::Tile ? L.tileIndex(s, j, 0) : j * L.vector});
  }
  return slots;
}

namespace {

/// The lowered descriptor of `op` and its offsets as i64, or the error at `op`.
FailureOr<std::pair<LoweredDesc, SmallVector<Value>>>
placeOf(OpBuilder &b, Operation *op, Value desc, ValueRange offsets,
        const DenseMap<Value, LoweredDesc> &descs, const IRMapping &scalars) {
  auto it = descs.find(desc);
  if (it == descs.end())
    return op->emitOpError("uses a descriptor convert-tile-to-blocked cannot trace to a "
                           "tile.make_desc");
  SmallVector<Value> out;
  for (Value v : offsets)
    out.push_back(tessel::conversion::toI64(b, op->getLoc(), scalars.lookup(v)));
  return std::make_pair(it->second, out);
}

/// The vector `slot` of a tile of rank `rank` in `k`: a 1-D descriptor is indexed by the row
/// (Row) or the column.
VectorAt slotAt(OpBuilder &b, Location loc, const LoweredDesc &d, ArrayRef<Value> offsets,
                int64_t rank, Kind k, Value row, Value col, int64_t width) {
  if (rank == 2)
    return vectorAt(b, loc, d, offsets, row, col, width);
  return vectorAt(b, loc, d, offsets, Value(), k == Kind::Row ? row : col, width);
}

} // namespace

FailureOr<SmallVector<Value>> BlockedKernelBuilder::loadRegs(tile::LoadOp op, Kind k) {
  Location loc = op.getLoc();
  auto place = placeOf(b, op, op.getDesc(), op.getOffsets(), descs, scalars);
  if (failed(place))
    return failure();
  auto &[d, offsets] = *place;
  double padding = op.getPadding().convertToDouble();
  int64_t rank = op.getResult().getType().getRank();
  SmallVector<Value> out;
  for (const VectorSlot &v : vectorSlots(k))
    llvm::append_range(out, readVector(b, loc, d,
                                       slotAt(b, loc, d, offsets, rank, k, v.row, v.col, v.width),
                                       v.width, padding));
  return out;
}

LogicalResult BlockedKernelBuilder::emitStore(tile::StoreOp op) {
  Location loc = op.getLoc();
  auto place = placeOf(b, op, op.getDesc(), op.getOffsets(), descs, scalars);
  if (failed(place))
    return failure();
  auto &[d, offsets] = *place;
  int64_t rank = cast<RankedTensorType>(op.getValue().getType()).getRank();
  SmallVector<Kind, 2> ks = kinds.lookup(op.getValue());
  if (ks.empty())
    return op.emitOpError("stores a tile convert-tile-to-blocked did not compute");
  Kind k = ks.front();
  SmallVector<Value> &values = regsOf(op.getValue(), k);
  SmallVector<Value> noMask;
  SmallVector<Value> &mask = op.getMask() ? regsOf(op.getMask(), k) : noMask;
  // A value held by several threads is written by one: the first thread of a row (Row), the
  // first row of threads (Col), a thread whose rows are its own (Tile).
  Value zero = ci32(0);
  Value store = ownsRows();
  if (k == Kind::Row)
    store = arith::AndIOp::create(
        b, loc, store, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tc, zero));
  else if (k == Kind::Col)
    store = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tr, zero);
  for (const VectorSlot &v : vectorSlots(k)) {
    ArrayRef<Value> vals(values.begin() + v.first, v.width);
    ArrayRef<Value> bits = mask.empty() ? ArrayRef<Value>()
                                        : ArrayRef<Value>(mask).slice(v.first, v.width);
    writeVector(b, loc, d, slotAt(b, loc, d, offsets, rank, k, v.row, v.col, v.width), vals, bits,
                store);
  }
  return success();
}

} // namespace tessel::blocked
