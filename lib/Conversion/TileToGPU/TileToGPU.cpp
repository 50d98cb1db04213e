//===- TileToGPU.cpp - reference lowering of tile programs to GPU kernels -===//
//
// convert-tile-to-gpu: each tile program (a `func.func`) becomes a `gpu.func` kernel, one CTA per
// program instance. Correct rather than fast: every tile value lives in a shared-memory buffer
// (buffers whose lifetimes are disjoint share bytes, SharedMemoryPlan.h), and every tile op is a
// loop over elements spread over the CTA's threads and closed by a barrier. Scalars are computed
// by every thread alike, so all control flow is uniform and the barriers inside loops and ifs are
// legal. The fast path (convert-tile-to-mma) takes the attention class; this lowering takes every
// other program and is the yardstick the fast path is checked against.
//
//===----------------------------------------------------------------------===//

#include "tessel/Conversion/KernelWalker.h"
#include "tessel/Conversion/Passes.h"

#include "SharedMemoryPlan.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/IRMapping.h"

#include <cmath>

namespace tessel {
#define GEN_PASS_DEF_CONVERTTILETOGPU
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

using namespace mlir;
namespace tile = tessel::tile;
using namespace tessel::conversion;

namespace {

/// The largest static shared-memory allocation of a CTA; more needs dynamic shared memory.
constexpr int64_t kStaticSharedLimit = 48 * 1024;
/// Every buffer starts at a multiple of this many bytes of the arena (room for 16-byte vectors).
constexpr int64_t kBufferAlignment = 16;

/// A descriptor after lowering: base pointer, element offset, shape and strides, all i64.

/// Builds one kernel from one tile program, op by op.
class KernelBuilder : public KernelWalker {
public:
  KernelBuilder(gpu::GPUFuncOp kernel, unsigned numThreads)
      : KernelWalker(kernel), numThreads(numThreads) {}

  LogicalResult build(func::FuncOp program) { return walk(program); }
  /// Packs the buffers into one arena (liveness-based reuse) and places it in static shared
  /// memory up to 48 KiB, in dynamic shared memory above that, up to `sharedLimit` bytes.
  LogicalResult placeBuffers(func::FuncOp program, int64_t sharedLimit);

private:
  using ElementBody = function_ref<void(OpBuilder &, Location, ValueRange)>;

  /// The thread index, which every element loop starts from.
  void emitPrologue(Location loc) override;
  LogicalResult emitOp(Operation *op) override;
  LogicalResult emitFor(scf::ForOp op);
  LogicalResult emitIf(scf::IfOp op);
  LogicalResult emitElementwise(Operation *op);
  LogicalResult emitConstant(arith::ConstantOp op);
  LogicalResult emitLoad(tile::LoadOp op);
  LogicalResult emitGather(tile::GatherOp op);
  /// tile.store, or tile.atomic_add (each element an atomicrmw add).
  template <typename WriteOp>
  LogicalResult emitStore(WriteOp op);
  LogicalResult emitDot(tile::DotOp op);
  LogicalResult emitReduce(tile::ReduceOp op);
  LogicalResult emitScan(tile::ScanOp op);
  LogicalResult emitSoftmax(tile::SoftmaxOp op);
  LogicalResult emitShapeOp(Operation *op);

  /// A fresh shared-memory buffer for a value of tile type `type`: a placeholder until
  /// placeBuffers gives it its bytes in the arena.
  Value newBuffer(RankedTensorType type, Location loc);
  /// The buffer of a tile value, or an error at `user` if it has none.
  FailureOr<Value> bufferOf(Value tileValue, Operation *user);
  /// Runs `body` once per element index of `shape`, spread over the CTA's threads, then waits
  /// at a barrier so that every thread sees every element.
  void forEachElement(Location loc, ArrayRef<int64_t> shape, ElementBody body);
  void copyTile(Location loc, Value from, Value to);

  unsigned numThreads;
  Value threadId;
  /// The placeholders of newBuffer and their sizes in bytes.
  SmallVector<Value> buffers;
  SmallVector<int64_t> bufferBytes;
  DenseMap<Value, Value> tiles;
};

bool isTile(Type t) { return isa<RankedTensorType>(t); }

Value constIndex(OpBuilder &ob, Location loc, int64_t v) {
  return arith::ConstantIndexOp::create(ob, loc, v);
}

Value toF32(OpBuilder &ob, Location loc, Value v) {
  if (v.getType().isF32())
    return v;
  return arith::ExtFOp::create(ob, loc, ob.getF32Type(), v);
}

Value fromF32(OpBuilder &ob, Location loc, Value v, Type to) {
  if (to.isF32())
    return v;
  return arith::TruncFOp::create(ob, loc, to, v);
}

/// A typed scalar constant from a double (the padding value of a load).
Value scalarConstant(OpBuilder &ob, Location loc, Type type, double v) {
  if (isa<FloatType>(type))
    return arith::ConstantOp::create(ob, loc, ob.getFloatAttr(type, v));
  if (type.isInteger(1))
    return arith::ConstantOp::create(ob, loc, ob.getBoolAttr(v != 0.0));
  return arith::ConstantOp::create(ob, loc, ob.getIntegerAttr(type, static_cast<int64_t>(v)));
}

Value combine(OpBuilder &ob, Location loc, tile::ReduceKind kind, Value x, Value y) {
  bool isFloat = isa<FloatType>(x.getType());
  switch (kind) {
  case tile::ReduceKind::Sum:
    return isFloat ? Value(arith::AddFOp::create(ob, loc, x, y))
                   : Value(arith::AddIOp::create(ob, loc, x, y));
  case tile::ReduceKind::Max:
    return isFloat ? Value(arith::MaximumFOp::create(ob, loc, x, y))
                   : Value(arith::MaxSIOp::create(ob, loc, x, y));
  case tile::ReduceKind::Min:
    return isFloat ? Value(arith::MinimumFOp::create(ob, loc, x, y))
                   : Value(arith::MinSIOp::create(ob, loc, x, y));
  }
  llvm_unreachable("unknown reduction kind");
}

/// `idx` with `k` inserted at position `axis`.
SmallVector<Value> insertAt(ValueRange idx, unsigned axis, Value k) {
  SmallVector<Value> out(idx.begin(), idx.end());
  out.insert(out.begin() + axis, k);
  return out;
}

Value KernelBuilder::newBuffer(RankedTensorType type, Location loc) {
  auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  auto memrefType = MemRefType::get(type.getShape(), type.getElementType(),
                                    MemRefLayoutAttrInterface(), space);
  int64_t bits = std::max<int64_t>(8, type.getElementTypeBitWidth());
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(&kernel.getBody().front());
  Value placeholder =
      UnrealizedConversionCastOp::create(b, loc, TypeRange{memrefType}, ValueRange{}).getResult(0);
  buffers.push_back(placeholder);
  bufferBytes.push_back(type.getNumElements() * bits / 8);
  return placeholder;
}

LogicalResult KernelBuilder::placeBuffers(func::FuncOp program, int64_t sharedLimit) {
  tessel::SharedMemoryPlan plan = tessel::planSharedMemory(kernel.getBody(), buffers, bufferBytes,
                                                           kBufferAlignment);
  int64_t total = 0;
  for (int64_t bytes : bufferBytes)
    total += bytes;
  if (plan.arenaBytes > sharedLimit)
    return program.emitOpError()
           << "needs " << plan.arenaBytes << " bytes of shared memory for its tiles (" << total
           << " before reuse), more than the " << sharedLimit
           << " a CTA may use on this target (the reference lowering keeps every live tile "
              "value in shared memory)";
  kernel->setAttr("tessel.shared_bytes", b.getI64IntegerAttr(plan.arenaBytes));
  if (buffers.empty())
    return success();

  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  Location loc = kernel.getLoc();
  auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
  Value arena;
  if (plan.arenaBytes <= kStaticSharedLimit) {
    arena = kernel.addWorkgroupAttribution(
        MemRefType::get({plan.arenaBytes}, b.getI8Type(), MemRefLayoutAttrInterface(), space), loc);
    kernel.setWorkgroupAttributionAttr(kernel.getNumWorkgroupAttributions() - 1,
                                       LLVM::LLVMDialect::getAlignAttrName(),
                                       b.getI64IntegerAttr(kBufferAlignment));
  } else {
    arena = gpu::DynamicSharedMemoryOp::create(
        b, loc,
        MemRefType::get({ShapedType::kDynamic}, b.getI8Type(), MemRefLayoutAttrInterface(), space));
    kernel->setAttr("tessel.dynamic_shared_bytes", b.getI64IntegerAttr(plan.arenaBytes));
  }
  // One index constant per distinct offset, then one view per buffer, in creation order.
  DenseMap<int64_t, Value> offsets;
  for (const tessel::BufferPlacement &p : plan.buffers)
    if (!offsets.count(p.offset))
      offsets[p.offset] = constIndex(b, loc, p.offset);
  for (auto [placeholder, p] : llvm::zip(buffers, plan.buffers)) {
    Value view = memref::ViewOp::create(b, loc, placeholder.getType(), arena, offsets[p.offset],
                                        ValueRange{});
    placeholder.replaceAllUsesWith(view);
    placeholder.getDefiningOp()->erase();
  }
  return success();
}

FailureOr<Value> KernelBuilder::bufferOf(Value tileValue, Operation *user) {
  auto it = tiles.find(tileValue);
  if (it == tiles.end())
    return user->emitOpError("uses a tile that convert-tile-to-gpu could not place in memory");
  return it->second;
}

void KernelBuilder::forEachElement(Location loc, ArrayRef<int64_t> shape, ElementBody body) {
  int64_t numElements = 1;
  for (int64_t d : shape)
    numElements *= d;
  Value lb = numThreads == 1 ? constIndex(b, loc, 0) : threadId;
  Value ub = constIndex(b, loc, numElements);
  Value step = constIndex(b, loc, numThreads);
  SmallVector<int64_t> shapeCopy(shape.begin(), shape.end());
  scf::ForOp::create(b, loc, lb, ub, step, ValueRange{},
                     [&](OpBuilder &ob, Location l, Value linear, ValueRange) {
                       SmallVector<Value> idx(shapeCopy.size());
                       Value rest = linear;
                       for (int i = static_cast<int>(shapeCopy.size()) - 1; i >= 0; --i) {
                         Value size = constIndex(ob, l, shapeCopy[i]);
                         idx[i] = i == 0 ? rest : Value(arith::RemUIOp::create(ob, l, rest, size));
                         if (i > 0)
                           rest = arith::DivUIOp::create(ob, l, rest, size);
                       }
                       body(ob, l, idx);
                       scf::YieldOp::create(ob, l);
                     });
  gpu::BarrierOp::create(b, loc);
}

void KernelBuilder::copyTile(Location loc, Value from, Value to) {
  forEachElement(loc, cast<MemRefType>(from.getType()).getShape(),
                 [&](OpBuilder &ob, Location l, ValueRange idx) {
                   Value v = memref::LoadOp::create(ob, l, from, idx);
                   memref::StoreOp::create(ob, l, v, to, idx);
                 });
}

void KernelBuilder::emitPrologue(Location loc) {
  threadId = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
}

LogicalResult KernelBuilder::emitOp(Operation *op) {
  if (auto ld = dyn_cast<tile::LoadOp>(op))
    return emitLoad(ld);
  if (auto st = dyn_cast<tile::StoreOp>(op))
    return emitStore(st);
  if (auto add = dyn_cast<tile::AtomicAddOp>(op))
    return emitStore(add);
  if (auto g = dyn_cast<tile::GatherOp>(op))
    return emitGather(g);
  if (auto dot = dyn_cast<tile::DotOp>(op))
    return emitDot(dot);
  if (auto red = dyn_cast<tile::ReduceOp>(op))
    return emitReduce(red);
  if (auto scan = dyn_cast<tile::ScanOp>(op))
    return emitScan(scan);
  if (auto sm = dyn_cast<tile::SoftmaxOp>(op))
    return emitSoftmax(sm);
  if (isa<tile::SplatOp, tile::IotaOp, tile::ExpandDimsOp, tile::BroadcastOp, tile::TransOp>(op))
    return emitShapeOp(op);
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return emitIf(ifOp);
  if (auto cst = dyn_cast<arith::ConstantOp>(op))
    return emitConstant(cst);

  if (!tile::isElementwiseOp(op))
    return op->emitOpError("is not supported by convert-tile-to-gpu");
  if (llvm::any_of(op->getResultTypes(), isTile))
    return emitElementwise(op);
  for (Type t : op->getOperandTypes())
    if (isTile(t))
      return op->emitOpError("mixes tiles and scalars in a way convert-tile-to-gpu cannot lower");
  emitScalar(op, /*ftz=*/false);
  return success();
}

LogicalResult KernelBuilder::emitElementwise(Operation *op) {
  Location loc = op->getLoc();
  RankedTensorType shapeType;
  for (Type t : op->getResultTypes())
    if (auto rt = dyn_cast<RankedTensorType>(t))
      shapeType = rt;
  SmallVector<Value> inputs;
  SmallVector<bool> inputIsTile;
  for (Value v : op->getOperands()) {
    if (isTile(v.getType())) {
      FailureOr<Value> buf = bufferOf(v, op);
      if (failed(buf))
        return failure();
      inputs.push_back(*buf);
      inputIsTile.push_back(true);
    } else {
      inputs.push_back(scalars.lookup(v));
      inputIsTile.push_back(false);
    }
  }
  SmallVector<Type> elementTypes;
  SmallVector<Value> outputs;
  for (Value r : op->getResults()) {
    auto rt = dyn_cast<RankedTensorType>(r.getType());
    if (!rt || rt.getShape() != shapeType.getShape())
      return op->emitOpError("has results of different shapes");
    elementTypes.push_back(rt.getElementType());
    outputs.push_back(newBuffer(rt, loc));
    tiles[r] = outputs.back();
  }
  forEachElement(loc, shapeType.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    SmallVector<Value> operands;
    for (auto [in, tiled] : llvm::zip(inputs, inputIsTile))
      operands.push_back(tiled ? Value(memref::LoadOp::create(ob, l, in, idx)) : in);
    SmallVector<Value> results = emitScalarOp(ob, op, operands, elementTypes, /*ftz=*/false);
    for (auto [res, out] : llvm::zip(results, outputs))
      memref::StoreOp::create(ob, l, res, out, idx);
  });
  return success();
}

LogicalResult KernelBuilder::emitConstant(arith::ConstantOp op) {
  auto type = dyn_cast<RankedTensorType>(op.getType());
  if (!type) {
    scalars.map(op.getResult(), b.clone(*op, scalars)->getResult(0));
    return success();
  }
  auto dense = dyn_cast<DenseElementsAttr>(op.getValue());
  if (!dense || !dense.isSplat())
    return op.emitOpError("is a non-splat tile constant, which convert-tile-to-gpu does not "
                          "support; build it with tile.splat/tile.iota");
  Location loc = op.getLoc();
  Value scalar = arith::ConstantOp::create(b, loc,
                                           cast<TypedAttr>(dense.getSplatValue<Attribute>()));
  Value buf = newBuffer(type, loc);
  tiles[op.getResult()] = buf;
  forEachElement(loc, type.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    memref::StoreOp::create(ob, l, scalar, buf, idx);
  });
  return success();
}

/// The i64 element offset of `idx` + `offsets` in `d`, and whether it lies inside `d`'s shape.
static std::pair<Value, Value> globalAddress(OpBuilder &ob, Location loc, const LoweredDesc &d,
                                             ArrayRef<Value> offsets, ValueRange idx) {
  Value zero = arith::ConstantOp::create(ob, loc, ob.getI64IntegerAttr(0));
  Value inBounds = arith::ConstantOp::create(ob, loc, ob.getBoolAttr(true));
  Value address = d.offset;
  for (size_t k = 0; k < idx.size(); ++k) {
    Value g = arith::AddIOp::create(ob, loc, offsets[k], toI64(ob, loc, idx[k]));
    Value lo = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::sge, g, zero);
    Value hi = arith::CmpIOp::create(ob, loc, arith::CmpIPredicate::slt, g, d.shape[k]);
    inBounds = arith::AndIOp::create(ob, loc, inBounds, arith::AndIOp::create(ob, loc, lo, hi));
    if (k == 0 && d.pages) {
      auto [row, exists] = pagedRow(ob, loc, *d.pages, g);
      g = row;
      inBounds = arith::AndIOp::create(ob, loc, inBounds, exists);
    }
    address = arith::AddIOp::create(ob, loc, address,
                                    arith::MulIOp::create(ob, loc, g, d.strides[k]));
  }
  return {address, inBounds};
}

/// The element of `d` at element offset `address` when `inBounds`, else `padding`: a global read
/// only where it is in bounds.
static Value readOrPad(OpBuilder &ob, Location l, const LoweredDesc &d, Value address,
                       Value inBounds, double padding) {
  auto ifOp = scf::IfOp::create(ob, l, TypeRange{d.elementType}, inBounds, true);
  OpBuilder::InsertionGuard guard(ob);
  ob.setInsertionPointToStart(ifOp.thenBlock());
  auto ptrType = LLVM::LLVMPointerType::get(ob.getContext(), 1);
  Value ptr = LLVM::GEPOp::create(ob, l, ptrType, d.elementType, d.base, ValueRange{address});
  scf::YieldOp::create(ob, l, Value(LLVM::LoadOp::create(ob, l, d.elementType, ptr)));
  ob.setInsertionPointToStart(ifOp.elseBlock());
  scf::YieldOp::create(ob, l, scalarConstant(ob, l, d.elementType, padding));
  return ifOp.getResult(0);
}

LogicalResult KernelBuilder::emitLoad(tile::LoadOp op) {
  Location loc = op.getLoc();
  auto it = descs.find(op.getDesc());
  if (it == descs.end())
    return op.emitOpError("reads a descriptor that convert-tile-to-gpu cannot trace to a "
                          "tile.make_desc");
  LoweredDesc d = it->second;
  SmallVector<Value> offsets;
  for (Value v : op.getOffsets())
    offsets.push_back(toI64(b, loc, scalars.lookup(v)));
  auto type = op.getResult().getType();
  Value buf = newBuffer(type, loc);
  tiles[op.getResult()] = buf;
  double padding = op.getPadding().convertToDouble();
  forEachElement(loc, type.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    auto [address, inBounds] = globalAddress(ob, l, d, offsets, idx);
    memref::StoreOp::create(ob, l, readOrPad(ob, l, d, address, inBounds, padding), buf, idx);
  });
  return success();
}

// Each element computes its address from its own indices (a scalar index is the same for all),
// reads global memory only when every index lies inside the descriptor's shape, and takes the
// padding otherwise.
LogicalResult KernelBuilder::emitGather(tile::GatherOp op) {
  Location loc = op.getLoc();
  auto it = descs.find(op.getDesc());
  if (it == descs.end())
    return op.emitOpError("reads a descriptor that convert-tile-to-gpu cannot trace to a "
                          "tile.make_desc");
  LoweredDesc d = it->second;
  // Per axis: the buffer of an index tile, or the i64 value of a scalar index.
  SmallVector<Value> indexTiles, indexScalars;
  for (Value v : op.getIndices()) {
    if (isTile(v.getType())) {
      FailureOr<Value> buf = bufferOf(v, op);
      if (failed(buf))
        return failure();
      indexTiles.push_back(*buf);
      indexScalars.push_back(Value());
    } else {
      indexTiles.push_back(Value());
      indexScalars.push_back(toI64(b, loc, scalars.lookup(v)));
    }
  }
  auto type = op.getResult().getType();
  Value buf = newBuffer(type, loc);
  tiles[op.getResult()] = buf;
  double padding = op.getPadding().convertToDouble();
  forEachElement(loc, type.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    Value zero = arith::ConstantOp::create(ob, l, ob.getI64IntegerAttr(0));
    Value inBounds = arith::ConstantOp::create(ob, l, ob.getBoolAttr(true));
    Value address = d.offset;
    for (auto [k, tileBuf] : llvm::enumerate(indexTiles)) {
      Value g = tileBuf ? toI64(ob, l, memref::LoadOp::create(ob, l, tileBuf, idx))
                        : indexScalars[k];
      Value lo = arith::CmpIOp::create(ob, l, arith::CmpIPredicate::sge, g, zero);
      Value hi = arith::CmpIOp::create(ob, l, arith::CmpIPredicate::slt, g, d.shape[k]);
      inBounds = arith::AndIOp::create(ob, l, inBounds, arith::AndIOp::create(ob, l, lo, hi));
      address = arith::AddIOp::create(ob, l, address,
                                      arith::MulIOp::create(ob, l, g, d.strides[k]));
    }
    memref::StoreOp::create(ob, l, readOrPad(ob, l, d, address, inBounds, padding), buf, idx);
  });
  return success();
}

template <typename WriteOp>
LogicalResult KernelBuilder::emitStore(WriteOp op) {
  Location loc = op.getLoc();
  auto it = descs.find(op.getDesc());
  if (it == descs.end())
    return op.emitOpError("writes a descriptor that convert-tile-to-gpu cannot trace to a "
                          "tile.make_desc");
  LoweredDesc d = it->second;
  SmallVector<Value> offsets;
  for (Value v : op.getOffsets())
    offsets.push_back(toI64(b, loc, scalars.lookup(v)));
  FailureOr<Value> value = bufferOf(op.getValue(), op);
  if (failed(value))
    return failure();
  Value mask;
  if (op.getMask()) {
    FailureOr<Value> m = bufferOf(op.getMask(), op);
    if (failed(m))
      return failure();
    mask = *m;
  }
  auto ptrType = LLVM::LLVMPointerType::get(b.getContext(), 1);
  forEachElement(
      loc, op.getValue().getType().getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
        auto [address, doStore] = globalAddress(ob, l, d, offsets, idx);
        if (mask)
          doStore = arith::AndIOp::create(ob, l, doStore, memref::LoadOp::create(ob, l, mask, idx));
        auto ifOp = scf::IfOp::create(ob, l, TypeRange{}, doStore, false);
        OpBuilder::InsertionGuard guard(ob);
        ob.setInsertionPointToStart(ifOp.thenBlock());
        Value v = memref::LoadOp::create(ob, l, *value, idx);
        Value ptr = LLVM::GEPOp::create(ob, l, ptrType, d.elementType, d.base, ValueRange{address});
        if constexpr (std::is_same_v<WriteOp, tile::AtomicAddOp>)
          tessel::conversion::atomicAddAt(ob, l, ptr, v);
        else
          LLVM::StoreOp::create(ob, l, v, ptr);
      });
  return success();
}

LogicalResult KernelBuilder::emitDot(tile::DotOp op) {
  Location loc = op.getLoc();
  FailureOr<Value> a = bufferOf(op.getA(), op), bm = bufferOf(op.getB(), op),
                   acc = bufferOf(op.getAcc(), op);
  if (failed(a) || failed(bm) || failed(acc))
    return failure();
  auto type = op.getResult().getType();
  int64_t k = op.getA().getType().getShape()[1];
  Value out = newBuffer(type, loc);
  tiles[op.getResult()] = out;
  forEachElement(loc, type.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    Value init = memref::LoadOp::create(ob, l, *acc, idx);
    auto loop = scf::ForOp::create(
        ob, l, constIndex(ob, l, 0), constIndex(ob, l, k), constIndex(ob, l, 1), ValueRange{init},
        [&](OpBuilder &ib, Location il, Value kk, ValueRange sum) {
          Value x = toF32(ib, il, memref::LoadOp::create(ib, il, *a, ValueRange{idx[0], kk}));
          Value y = toF32(ib, il, memref::LoadOp::create(ib, il, *bm, ValueRange{kk, idx[1]}));
          Value s = arith::AddFOp::create(ib, il, sum[0], arith::MulFOp::create(ib, il, x, y));
          scf::YieldOp::create(ib, il, s);
        });
    memref::StoreOp::create(ob, l, loop.getResult(0), out, idx);
  });
  return success();
}

LogicalResult KernelBuilder::emitReduce(tile::ReduceOp op) {
  Location loc = op.getLoc();
  FailureOr<Value> in = bufferOf(op.getInput(), op);
  if (failed(in))
    return failure();
  auto inType = op.getInput().getType();
  auto type = cast<RankedTensorType>(op.getResult().getType());
  unsigned axis = op.getAxis();
  int64_t n = inType.getShape()[axis];
  Value out = newBuffer(type, loc);
  tiles[op.getResult()] = out;
  tile::ReduceKind kind = op.getKind();
  forEachElement(loc, type.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    Value first = memref::LoadOp::create(ob, l, *in, insertAt(idx, axis, constIndex(ob, l, 0)));
    auto loop = scf::ForOp::create(
        ob, l, constIndex(ob, l, 1), constIndex(ob, l, n), constIndex(ob, l, 1), ValueRange{first},
        [&](OpBuilder &ib, Location il, Value kk, ValueRange acc) {
          Value x = memref::LoadOp::create(ib, il, *in, insertAt(idx, axis, kk));
          scf::YieldOp::create(ib, il, combine(ib, il, kind, acc[0], x));
        });
    memref::StoreOp::create(ob, l, loop.getResult(0), out, idx);
  });
  return success();
}

LogicalResult KernelBuilder::emitScan(tile::ScanOp op) {
  // One thread a line along the axis, the running value carried (floats in f32).
  Location loc = op.getLoc();
  FailureOr<Value> in = bufferOf(op.getInput(), op);
  if (failed(in))
    return failure();
  auto type = cast<RankedTensorType>(op.getResult().getType());
  unsigned axis = op.getAxis();
  int64_t n = type.getShape()[axis];
  Value out = newBuffer(type, loc);
  tiles[op.getResult()] = out;
  Type elementType = type.getElementType();
  bool isFloat = isa<FloatType>(elementType);
  SmallVector<int64_t> lines(type.getShape());
  lines.erase(lines.begin() + axis);
  forEachElement(loc, lines, [&](OpBuilder &ob, Location l, ValueRange idx) {
    auto at = [&](OpBuilder &ib, Location il, Value t) {
      if (!op.getReverse())
        return insertAt(idx, axis, t);
      return insertAt(idx, axis,
                      arith::SubIOp::create(ib, il, constIndex(ib, il, n - 1), t).getResult());
    };
    auto load = [&](OpBuilder &ib, Location il, Value t) {
      Value x = memref::LoadOp::create(ib, il, *in, at(ib, il, t));
      return isFloat ? toF32(ib, il, x) : x;
    };
    auto store = [&](OpBuilder &ib, Location il, Value acc, Value t) {
      memref::StoreOp::create(ib, il, isFloat ? fromF32(ib, il, acc, elementType) : acc, out,
                              at(ib, il, t));
    };
    Value c0 = constIndex(ob, l, 0);
    Value first = load(ob, l, c0);
    store(ob, l, first, c0);
    scf::ForOp::create(ob, l, constIndex(ob, l, 1), constIndex(ob, l, n), constIndex(ob, l, 1),
                       ValueRange{first}, [&](OpBuilder &ib, Location il, Value t, ValueRange acc) {
                         Value next = combine(ib, il, op.getKind(), acc[0], load(ib, il, t));
                         store(ib, il, next, t);
                         scf::YieldOp::create(ib, il, next);
                       });
  });
  return success();
}

LogicalResult KernelBuilder::emitSoftmax(tile::SoftmaxOp op) {
  if (op.getStreamed())
    return op.emitOpError("is streamed: run tile-online-softmax before convert-tile-to-gpu");
  Location loc = op.getLoc();
  FailureOr<Value> in = bufferOf(op.getInput(), op);
  if (failed(in))
    return failure();
  auto inType = op.getInput().getType();
  auto lseType = cast<RankedTensorType>(op.getLse().getType());
  unsigned axis = op.getAxis();
  int64_t n = inType.getShape()[axis];
  Value out = newBuffer(cast<RankedTensorType>(op.getResult().getType()), loc);
  Value lse = newBuffer(lseType, loc);
  tiles[op.getResult()] = out;
  tiles[op.getLse()] = lse;
  Type elementType = inType.getElementType();
  forEachElement(loc, lseType.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    Value ninf = constF32(ob, l, -INFINITY);
    Value zero = constF32(ob, l, 0.0);
    Value log2e = constF32(ob, l, kLog2E);
    Value c0 = constIndex(ob, l, 0), cn = constIndex(ob, l, n), c1 = constIndex(ob, l, 1);
    auto element = [&](OpBuilder &ib, Location il, Value k) {
      return toF32(ib, il, memref::LoadOp::create(ib, il, *in, insertAt(idx, axis, k)));
    };
    // exp(x - M), with masked elements (x = -inf) giving 0 even when M = -inf.
    auto expShifted = [&](OpBuilder &ib, Location il, Value x, Value m) {
      Value e = approxEx2(ib, il,
                          arith::MulFOp::create(ib, il, arith::SubFOp::create(ib, il, x, m), log2e),
                          /*ftz=*/false);
      Value masked = arith::CmpFOp::create(ib, il, arith::CmpFPredicate::OEQ, x, ninf);
      return Value(arith::SelectOp::create(ib, il, masked, zero, e));
    };
    auto maxLoop = scf::ForOp::create(
        ob, l, c0, cn, c1, ValueRange{ninf},
        [&](OpBuilder &ib, Location il, Value k, ValueRange m) {
          scf::YieldOp::create(ib, il,
                               Value(arith::MaximumFOp::create(ib, il, m[0], element(ib, il, k))));
        });
    Value rowMax = maxLoop.getResult(0);
    auto sumLoop = scf::ForOp::create(ob, l, c0, cn, c1, ValueRange{zero},
                                      [&](OpBuilder &ib, Location il, Value k, ValueRange s) {
                                        Value e = expShifted(ib, il, element(ib, il, k), rowMax);
                                        scf::YieldOp::create(
                                            ib, il, Value(arith::AddFOp::create(ib, il, s[0], e)));
                                      });
    Value rowSum = sumLoop.getResult(0);
    // An all-masked row has L = 0: its elements are already 0; keep 0/0 out of the division.
    Value empty = arith::CmpFOp::create(ob, l, arith::CmpFPredicate::OEQ, rowSum, zero);
    Value divisor = arith::SelectOp::create(ob, l, empty, constF32(ob, l, 1.0), rowSum);
    scf::ForOp::create(ob, l, c0, cn, c1, ValueRange{},
                       [&](OpBuilder &ib, Location il, Value k, ValueRange) {
                         Value p = arith::DivFOp::create(
                             ib, il, expShifted(ib, il, element(ib, il, k), rowMax), divisor);
                         memref::StoreOp::create(ib, il, fromF32(ib, il, p, elementType), out,
                                                 insertAt(idx, axis, k));
                         scf::YieldOp::create(ib, il);
                       });
    // lse = M + log(L); -inf for an all-masked row (M = -inf, log 0 = -inf).
    Value logSum = arith::MulFOp::create(ob, l, approxLg2(ob, l, rowSum), constF32(ob, l, kLn2));
    Value lseValue = arith::AddFOp::create(ob, l, rowMax, logSum);
    lseValue = arith::SelectOp::create(ob, l, empty, ninf, lseValue);
    memref::StoreOp::create(ob, l, fromF32(ob, l, lseValue, lseType.getElementType()), lse, idx);
  });
  return success();
}

LogicalResult KernelBuilder::emitShapeOp(Operation *op) {
  Location loc = op->getLoc();
  auto type = cast<RankedTensorType>(op->getResult(0).getType());
  Value in;
  if (op->getNumOperands() == 1 && isTile(op->getOperand(0).getType())) {
    FailureOr<Value> buf = bufferOf(op->getOperand(0), op);
    if (failed(buf))
      return failure();
    in = *buf;
  }
  Value out = newBuffer(type, loc);
  tiles[op->getResult(0)] = out;
  Value splatValue;
  if (auto splat = dyn_cast<tile::SplatOp>(op))
    splatValue = scalars.lookup(splat.getValue());
  forEachElement(loc, type.getShape(), [&](OpBuilder &ob, Location l, ValueRange idx) {
    Value v;
    if (isa<tile::SplatOp>(op)) {
      v = splatValue;
    } else if (isa<tile::IotaOp>(op)) {
      v = arith::IndexCastOp::create(ob, l, type.getElementType(), idx[0]);
    } else if (auto ed = dyn_cast<tile::ExpandDimsOp>(op)) {
      SmallVector<Value> src(idx.begin(), idx.end());
      src.erase(src.begin() + ed.getAxis());
      v = memref::LoadOp::create(ob, l, in, src);
    } else if (auto bc = dyn_cast<tile::BroadcastOp>(op)) {
      SmallVector<Value> src(idx.begin(), idx.end());
      ArrayRef<int64_t> inShape = bc.getInput().getType().getShape();
      for (size_t k = 0; k < src.size(); ++k)
        if (inShape[k] == 1)
          src[k] = constIndex(ob, l, 0);
      v = memref::LoadOp::create(ob, l, in, src);
    } else {
      v = memref::LoadOp::create(ob, l, in, ValueRange{idx[1], idx[0]});
    }
    memref::StoreOp::create(ob, l, v, out, idx);
  });
  return success();
}

LogicalResult KernelBuilder::emitFor(scf::ForOp op) {
  Location loc = op.getLoc();
  SmallVector<Value> scalarInits;
  SmallVector<Value> carried(op.getNumRegionIterArgs());
  for (auto [i, init] : llvm::enumerate(op.getInitArgs())) {
    if (isa<tile::DescType>(init.getType()))
      return op.emitOpError("carries a descriptor, which convert-tile-to-gpu does not support");
    if (!isTile(init.getType())) {
      scalarInits.push_back(scalars.lookup(init));
      continue;
    }
    FailureOr<Value> buf = bufferOf(init, op);
    if (failed(buf))
      return failure();
    carried[i] = newBuffer(cast<RankedTensorType>(init.getType()), loc);
    copyTile(loc, *buf, carried[i]);
  }
  auto loop = scf::ForOp::create(b, loc, scalars.lookup(op.getLowerBound()),
                                 scalars.lookup(op.getUpperBound()), scalars.lookup(op.getStep()),
                                 scalarInits, nullptr, op.getUnsignedCmp());
  Block *body = loop.getBody();
  if (!body->empty())
    body->back().erase();
  scalars.map(op.getInductionVar(), loop.getInductionVar());
  unsigned s = 0;
  for (auto [i, arg] : llvm::enumerate(op.getRegionIterArgs())) {
    if (carried[i])
      tiles[arg] = carried[i];
    else
      scalars.map(arg, loop.getRegionIterArgs()[s++]);
  }
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToEnd(body);
  if (failed(emitBlock(*op.getBody())))
    return failure();

  // Copy out. A yield that passes another position's carried tile (a swap) reads a buffer that
  // this copy overwrites: then every yielded tile goes through a temporary first.
  auto yield = cast<scf::YieldOp>(op.getBody()->getTerminator());
  bool swaps = false;
  for (auto [j, v] : llvm::enumerate(yield.getOperands()))
    for (auto [i, arg] : llvm::enumerate(op.getRegionIterArgs()))
      if (carried[j] && v == arg && i != j)
        swaps = true;
  SmallVector<Value> scalarYields;
  SmallVector<std::pair<Value, Value>> copies;
  for (auto [j, v] : llvm::enumerate(yield.getOperands())) {
    if (!carried[j]) {
      scalarYields.push_back(scalars.lookup(v));
      continue;
    }
    if (v == op.getRegionIterArgs()[j])
      continue;
    FailureOr<Value> buf = bufferOf(v, yield);
    if (failed(buf))
      return failure();
    copies.push_back({*buf, carried[j]});
  }
  if (swaps) {
    for (auto &[from, to] : copies) {
      Value tmp = newBuffer(
          RankedTensorType::get(cast<MemRefType>(from.getType()).getShape(),
                                cast<MemRefType>(from.getType()).getElementType()),
          loc);
      copyTile(loc, from, tmp);
      from = tmp;
    }
  }
  for (auto &[from, to] : copies)
    copyTile(loc, from, to);
  scf::YieldOp::create(b, loc, scalarYields);

  s = 0;
  for (auto [i, res] : llvm::enumerate(op.getResults())) {
    if (carried[i])
      tiles[res] = carried[i];
    else
      scalars.map(res, loop.getResult(s++));
  }
  return success();
}

LogicalResult KernelBuilder::emitIf(scf::IfOp op) {
  Location loc = op.getLoc();
  SmallVector<Type> scalarTypes;
  SmallVector<Value> outBuffers(op.getNumResults());
  for (auto [i, res] : llvm::enumerate(op.getResults())) {
    if (isa<tile::DescType>(res.getType()))
      return op.emitOpError("yields a descriptor, which convert-tile-to-gpu does not support");
    if (isTile(res.getType()))
      outBuffers[i] = newBuffer(cast<RankedTensorType>(res.getType()), loc);
    else
      scalarTypes.push_back(res.getType());
  }
  bool hasElse = !op.getElseRegion().empty();
  auto ifOp = scf::IfOp::create(b, loc, scalarTypes, scalars.lookup(op.getCondition()), true,
                                hasElse);
  auto emitBranch = [&](Region &src, Block *dst) -> LogicalResult {
    if (!dst->empty())
      dst->back().erase();
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToEnd(dst);
    if (failed(emitBlock(src.front())))
      return failure();
    SmallVector<Value> scalarYields;
    for (auto [i, v] : llvm::enumerate(src.front().getTerminator()->getOperands())) {
      if (!outBuffers[i]) {
        scalarYields.push_back(scalars.lookup(v));
        continue;
      }
      FailureOr<Value> buf = bufferOf(v, op);
      if (failed(buf))
        return failure();
      copyTile(loc, *buf, outBuffers[i]);
    }
    scf::YieldOp::create(b, loc, scalarYields);
    return success();
  };
  if (failed(emitBranch(op.getThenRegion(), ifOp.thenBlock())))
    return failure();
  if (hasElse && failed(emitBranch(op.getElseRegion(), ifOp.elseBlock())))
    return failure();
  unsigned s = 0;
  for (auto [i, res] : llvm::enumerate(op.getResults())) {
    if (outBuffers[i])
      tiles[res] = outBuffers[i];
    else
      scalars.map(res, ifOp.getResult(s++));
  }
  return success();
}

struct ConvertTileToGPU : tessel::impl::ConvertTileToGPUBase<ConvertTileToGPU> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> programs(module.getOps<func::FuncOp>());
    if (programs.empty())
      return;
    if (numThreads == 0) {
      module.emitError("convert-tile-to-gpu needs num-threads >= 1");
      return signalPassFailure();
    }
    OpBuilder b(&getContext());
    // convert-tile-to-mma may have made the kernel module already (for the programs it took).
    gpu::GPUModuleOp gpuModule = getOrCreateKernelModule(module);
    bool failed = false;
    for (func::FuncOp program : programs) {
      if (program.isExternal())
        continue;
      FailureOr<gpu::GPUFuncOp> made = createKernel(program, gpuModule);
      if (mlir::failed(made)) {
        failed = true;
        continue;
      }
      gpu::GPUFuncOp kernel = *made;
      kernel.setKnownBlockSizeAttr(
          b.getDenseI32ArrayAttr({static_cast<int32_t>(numThreads.getValue()), 1, 1}));
      KernelBuilder builder(kernel, numThreads);
      if (mlir::failed(builder.build(program)) ||
          mlir::failed(builder.placeBuffers(program, sharedLimit))) {
        failed = true;
        continue;
      }
      program.erase();
    }
    if (failed)
      signalPassFailure();
  }
};

} // namespace
