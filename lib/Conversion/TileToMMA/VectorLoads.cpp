//===- VectorLoads.cpp - global memory read straight into registers
//----------------------------===//
//
// Reads that never pass through shared memory. A 1-D tile.load of 32-bit values (the backward's LSE
// and Δ, a value per query row) is never a dot operand: it goes straight from global memory into
// the registers of the slice layout its type carries (tilegpu-assign-layouts gives it the layout
// its consumers read), each thread reading the rows or columns it holds. Past the descriptor's
// bounds a register gets the load's padding and no address outside the tensor is read.
//
// A tile.gather (a captured tensor read by a mask or score_mod) reads one element per register
// of its layout, at the indices the index tiles hold in the same registers; an element whose
// index is out of range is not read and takes the padding.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"

namespace tessel::mma {

LogicalResult MmaKernelBuilder::emitVectorLoad(tile::LoadOp op) {
  Location loc = op.getLoc();
  auto type = op.getResult().getType();
  auto slice = dyn_cast_or_null<tilegpu::SliceEncodingAttr>(type.getEncoding());
  if (type.getRank() != 1 || !slice)
    return op.emitOpError("loads a tile that is neither placed in shared memory nor a row or "
                          "column vector (run tilegpu-allocate-shared)");
  if (!descs.count(op.getDesc()))
    return op.emitOpError("reads a descriptor convert-tile-to-mma cannot trace to make_desc");
  const Desc &d = descs[op.getDesc()];
  Layout layout = slice.getDim() == 1 ? Layout::Row : Layout::Col;
  FailureOr<int64_t> n = regCount(type, layout, op);
  if (failed(n))
    return failure();
  // The element index inside the vector of each register: the thread's rows, or its two
  // columns of every 8-column slab.
  SmallVector<Value> index;
  if (layout == Layout::Row) {
    index = rowIndices();
  } else {
    Value col = quadColumn();
    for (int64_t i = 0; i < *n; ++i)
      index.push_back(arith::AddIOp::create(b, loc, col, ci32(i / 2 * 8 + i % 2)));
  }
  Type elem = type.getElementType();
  TypedAttr padAttr = isa<FloatType>(elem)
                          ? TypedAttr(b.getFloatAttr(elem, op.getPadding().convertToDouble()))
                          : TypedAttr(b.getIntegerAttr(
                                elem, static_cast<int64_t>(op.getPadding().convertToDouble())));
  Value pad = arith::ConstantOp::create(b, loc, padAttr);
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value start = toI64(scalars.lookup(op.getOffsets()[0]));
  Value zero = ci64(0);
  SmallVector<Value> regs;
  for (Value i : index) {
    Value g = arith::AddIOp::create(b, loc, start, toI64(i));
    Value in = arith::AndIOp::create(
        b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, g, zero),
        arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, g, d.shape[0]));
    // A branch, not an address selected between this element's and a safe one: ptxas makes it
    // a predicated load whose address is one base plus the register's constant offset. The
    // selected addresses took a 64-bit register pair each (a masked loop's LSE and Δ: ~60
    // registers more than its unmasked twin, docs/dev/backward.md).
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{elem}, in, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value elemOff = arith::AddIOp::create(b, loc, d.offset,
                                          arith::MulIOp::create(b, loc, g, d.strides[0]));
    Value ptr = LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{elemOff});
    scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, elem, ptr)));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, pad);
    regs.push_back(ifOp.getResult(0));
  }
  eager[op.getResult()] = {layout, regs};
  return success();
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::gatherRegisters(tile::GatherOp op, Layout layout,
                                                                int64_t n) {
  Location loc = op.getLoc();
  auto it = descs.find(op.getDesc());
  if (it == descs.end())
    return op.emitOpError("reads a descriptor convert-tile-to-mma cannot trace to make_desc");
  const Desc &d = it->second;
  // Per axis, the index of every register: an index tile's registers or a scalar's value.
  SmallVector<SmallVector<Value>> indices;
  for (Value index : op.getIndices()) {
    if (!isa<RankedTensorType>(index.getType())) {
      indices.push_back(SmallVector<Value>(n, toI64(scalars.lookup(index))));
      continue;
    }
    FailureOr<SmallVector<Value>> regs = materialize(index, layout, op);
    if (failed(regs))
      return failure();
    SmallVector<Value> wide;
    for (Value r : *regs)
      wide.push_back(toI64(r));
    indices.push_back(wide);
  }
  Type elem = cast<RankedTensorType>(op.getResult().getType()).getElementType();
  double padding = op.getPadding().convertToDouble();
  TypedAttr padAttr = isa<FloatType>(elem)
                          ? TypedAttr(b.getFloatAttr(elem, padding))
                          : TypedAttr(b.getIntegerAttr(elem, static_cast<int64_t>(padding)));
  Value pad = arith::ConstantOp::create(b, loc, padAttr);
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value zero = ci64(0);
  SmallVector<Value> regs;
  for (int64_t r = 0; r < n; ++r) {
    Value in = arith::ConstantOp::create(b, loc, b.getBoolAttr(true));
    Value address = d.offset;
    for (auto [axis, index] : llvm::enumerate(indices)) {
      Value g = index[r];
      in = arith::AndIOp::create(
          b, loc, in,
          arith::AndIOp::create(
              b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::sge, g, zero),
              arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, g, d.shape[axis])));
      address = arith::AddIOp::create(b, loc, address,
                                      arith::MulIOp::create(b, loc, g, d.strides[axis]));
    }
    // A branch, not a clamped address (the tensor may have no element to clamp to); ptxas
    // turns it into a predicated load.
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{elem}, in, /*withElseRegion=*/true);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value ptr = LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{address});
    scf::YieldOp::create(b, loc, Value(LLVM::LoadOp::create(b, loc, elem, ptr)));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, pad);
    regs.push_back(ifOp.getResult(0));
  }
  return regs;
}

} // namespace tessel::mma
