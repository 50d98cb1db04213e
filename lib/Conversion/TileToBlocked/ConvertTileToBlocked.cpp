//===- ConvertTileToBlocked.cpp - tile programs without dots, tiles in registers ---===//
//
// convert-tile-to-blocked: the pass (the layouts from the program's types, or
// tilegpu-assign-blocked when it has none) and the element-wise and shape ops. Loads and stores
// are in BlockedMemory.cpp, reductions in BlockedReduce.cpp.
//
//===------------------------------------------------------------------------------------===//

#include "BlockedKernelBuilder.h"

#include "tessel/Conversion/Passes.h"
#include "tessel/Conversion/ScalarLowering.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/ScopeExit.h"

namespace tessel {
#define GEN_PASS_DEF_CONVERTTILETOBLOCKED
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

namespace tessel::blocked {

namespace {

bool isTensor(Type t) { return isa<RankedTensorType>(t); }

} // namespace

void BlockedKernelBuilder::emitPrologue(Location loc) {
  Value x = gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x);
  tid = arith::IndexCastOp::create(b, loc, b.getI32Type(), x);
  tr = arith::DivUIOp::create(b, loc, tid, ci32(L.threadsPerRow));
  tc = arith::RemUIOp::create(b, loc, tid, ci32(L.threadsPerRow));
  if (L.scratch) {
    auto space = gpu::AddressSpaceAttr::get(b.getContext(), gpu::AddressSpace::Workgroup);
    scratchBuffer = kernel.addWorkgroupAttribution(
        MemRefType::get({L.scratch}, b.getF32Type(), MemRefLayoutAttrInterface(), space), loc);
  }
}

Value BlockedKernelBuilder::rowOf(int64_t s) {
  Location loc = b.getUnknownLoc();
  if (L.rows < L.rowsPerPass)
    return L.rows == 1 ? ci32(0) : Value(arith::RemUIOp::create(b, loc, tr, ci32(L.rows)));
  return arith::AddIOp::create(b, loc, tr, ci32(s * L.rowsPerPass));
}

Value BlockedKernelBuilder::colOf(int64_t j, int64_t e) {
  Location loc = b.getUnknownLoc();
  Value chunk = arith::AddIOp::create(b, loc, tc, ci32(j * L.threadsPerRow));
  return arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, chunk, ci32(L.vector)),
                               ci32(e));
}

Value BlockedKernelBuilder::ownsRows() {
  if (L.rows >= L.rowsPerPass)
    return arith::ConstantOp::create(b, b.getUnknownLoc(), b.getBoolAttr(true));
  return arith::CmpIOp::create(b, b.getUnknownLoc(), arith::CmpIPredicate::ult, tr, ci32(L.rows));
}

LogicalResult BlockedKernelBuilder::build(func::FuncOp program) {
  auto note = [&](Value v) {
    if (std::optional<Kind> k = tessel::tilegpu::blockedKind(v.getType()))
      kinds[v] = *k;
  };
  program.walk([&](Operation *op) {
    for (Value v : op->getResults())
      note(v);
    if (auto loop = dyn_cast<scf::ForOp>(op))
      for (Value arg : loop.getRegionIterArgs())
        note(arg);
  });
  return walk(program);
}

LogicalResult BlockedKernelBuilder::emitFor(scf::ForOp op) {
  // Each iter_arg is carried as its registers (a tile, in its kind) or its scalar.
  SmallVector<int64_t> counts;
  SmallVector<Value> inits;
  for (auto [init, arg] : llvm::zip(op.getInitArgs(), op.getRegionIterArgs())) {
    if (!isTensor(arg.getType())) {
      counts.push_back(1);
      inits.push_back(scalars.lookup(init));
      continue;
    }
    auto k = kinds.find(arg);
    if (k == kinds.end() || !kinds.count(init))
      return op.emitOpError("carries a tile without a blocked layout");
    SmallVector<Value> &r = regsOf(init, k->second);
    if (static_cast<int64_t>(r.size()) != L.count(k->second))
      return op.emitOpError("starts a carried tile in another layout than the one it carries");
    counts.push_back(r.size());
    inits.append(r.begin(), r.end());
  }
  auto bind = [&](ValueRange flat, ValueRange targets) {
    size_t pos = 0;
    for (auto [i, t] : llvm::enumerate(targets)) {
      if (isTensor(t.getType()))
        regsOf(t, kinds.lookup(t)) = SmallVector<Value>(flat.begin() + pos,
                                                        flat.begin() + pos + counts[i]);
      else
        scalars.map(t, flat[pos]);
      pos += counts[i];
    }
  };
  return emitCarriedLoop(op, inits, bind, [&](scf::YieldOp yield) {
    SmallVector<Value> yielded;
    for (auto [v, arg] : llvm::zip(yield.getOperands(), op.getRegionIterArgs())) {
      if (!isTensor(v.getType())) {
        yielded.push_back(scalars.lookup(v));
        continue;
      }
      if (!kinds.count(v))
        return FailureOr<SmallVector<Value>>(
            op.emitOpError("yields a tile without a blocked layout"));
      SmallVector<Value> &r = regsOf(v, kinds.lookup(arg));
      if (static_cast<int64_t>(r.size()) != L.count(kinds.lookup(arg)))
        return FailureOr<SmallVector<Value>>(
            op.emitOpError("yields a tile in another layout than the one it carries"));
      yielded.append(r.begin(), r.end());
    }
    return FailureOr<SmallVector<Value>>(yielded);
  });
}

FailureOr<SmallVector<Value>> BlockedKernelBuilder::compute(Operation *op, Kind k) {
  Location loc = op->getLoc();
  int64_t n = L.count(k);
  if (auto cst = dyn_cast<arith::ConstantOp>(op)) {
    auto dense = dyn_cast<DenseElementsAttr>(cst.getValue());
    if (!dense || !dense.isSplat())
      return op->emitOpError("is a non-splat tile constant (convert-tile-to-blocked)");
    Value scalar = arith::ConstantOp::create(b, loc,
                                             cast<TypedAttr>(dense.getSplatValue<Attribute>()));
    return SmallVector<Value>(n, scalar);
  }
  if (auto splat = dyn_cast<tile::SplatOp>(op))
    return SmallVector<Value>(n, scalars.lookup(splat.getValue()));
  if (isa<tile::IotaOp>(op)) {
    SmallVector<Value> out;
    if (k == Kind::Row) {
      for (int64_t s = 0; s < L.rowSlots; ++s)
        out.push_back(rowOf(s));
    } else {
      for (int64_t j = 0; j < L.colChunks; ++j)
        for (int64_t e = 0; e < L.vector; ++e)
          out.push_back(colOf(j, e));
    }
    return out;
  }
  if (auto ed = dyn_cast<tile::ExpandDimsOp>(op))
    return SmallVector<Value>(regsOf(ed.getInput(), ed.getAxis() == 1 ? Kind::Row : Kind::Col));
  if (auto bc = dyn_cast<tile::BroadcastOp>(op)) {
    Kind from = kinds.lookup(bc.getInput());
    SmallVector<Value> &src = regsOf(bc.getInput(), from);
    if (from == k)
      return SmallVector<Value>(src);
    if (k != Kind::Tile)
      return op->emitOpError("broadcasts in a way convert-tile-to-blocked does not lower");
    SmallVector<Value> out;
    for (int64_t s = 0; s < L.rowSlots; ++s)
      for (int64_t j = 0; j < L.colChunks; ++j)
        for (int64_t e = 0; e < L.vector; ++e)
          out.push_back(from == Kind::Row ? src[s] : src[j * L.vector + e]);
    return out;
  }
  if (auto ld = dyn_cast<tile::LoadOp>(op))
    return loadRegs(ld, k);
  if (auto gather = dyn_cast<tile::GatherOp>(op))
    return gatherRegs(gather, k);
  if (auto red = dyn_cast<tile::ReduceOp>(op))
    return red.getAxis() == 1 ? reduceRows(red, regsOf(red.getInput(), Kind::Tile))
                              : reduceColumns(red, regsOf(red.getInput(), Kind::Tile));
  if (tessel::tilegpu::isBlockedElementwise(op)) {
    SmallVector<Value> out;
    Type resultType = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
    for (Value o : op->getOperands())
      if (isTensor(o.getType()) ? static_cast<int64_t>(regsOf(o, k).size()) != n ||
                                      llvm::is_contained(regsOf(o, k), Value())
                                : !scalars.lookupOrNull(o))
        return op->emitOpError("reads an operand convert-tile-to-blocked has not computed in "
                               "the layout of its result");
    for (int64_t i = 0; i < n; ++i) {
      SmallVector<Value> operands;
      for (Value o : op->getOperands())
        operands.push_back(isTensor(o.getType()) ? regsOf(o, k)[i] : scalars.lookup(o));
      out.push_back(
          tessel::conversion::emitScalarOp(b, op, operands, resultType, /*ftz=*/true).front());
    }
    return out;
  }
  return op->emitOpError("is not supported by convert-tile-to-blocked");
}

LogicalResult BlockedKernelBuilder::emitOp(Operation *op) {
  if (auto st = dyn_cast<tile::StoreOp>(op))
    return emitStore(st);
  if (auto add = dyn_cast<tile::AtomicAddOp>(op))
    return emitStore(add);
  if (auto loop = dyn_cast<scf::ForOp>(op))
    return emitFor(loop);
  if (op->getNumResults() == 1 && isTensor(op->getResult(0).getType())) {
    auto found = kinds.find(op->getResult(0));
    if (found == kinds.end()) {
      // A tile nothing reads has no layout; one that is read must have one.
      if (op->getResult(0).use_empty())
        return success();
      return op->emitOpError("makes a tile without a blocked layout");
    }
    Kind k = found->second;
    for (Value o : op->getOperands())
      if (isTensor(o.getType()) && !kinds.count(o))
        return op->emitOpError("reads a tile without a blocked layout");
    FailureOr<SmallVector<Value>> r = compute(op, k);
    if (failed(r))
      return failure();
    if (static_cast<int64_t>(r->size()) != L.count(k))
      return op->emitOpError("has a layout convert-tile-to-blocked got wrong (")
             << r->size() << " registers, " << L.count(k) << " expected)";
    regsOf(op->getResult(0), k) = std::move(*r);
    return success();
  }
  if (llvm::any_of(op->getResultTypes(), isTensor) || llvm::any_of(op->getOperandTypes(), isTensor))
    return op->emitOpError("is not supported by convert-tile-to-blocked");
  if (!tile::isElementwiseOp(op))
    return op->emitOpError("is not supported by convert-tile-to-blocked");
  emitScalar(op, /*ftz=*/true);
  return success();
}

} // namespace tessel::blocked

using namespace mlir;
using tessel::blocked::BlockedKernelBuilder;

namespace {

struct ConvertTileToBlocked : tessel::impl::ConvertTileToBlockedBase<ConvertTileToBlocked> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> programs;
    for (func::FuncOp f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        programs.push_back(f);
    MLIRContext *ctx = &getContext();
    gpu::GPUModuleOp gpuModule;
    bool failedAny = false;
    for (func::FuncOp program : programs) {
      tessel::conversion::FirstError error{"", program.getLoc()};
      gpu::GPUFuncOp kernel;
      LogicalResult built = tessel::conversion::captureFirstError(
          ctx, error, [&] { return lowerProgram(program, gpuModule, kernel); });
      if (succeeded(built)) {
        program.erase();
        continue;
      }
      if (kernel)
        kernel.erase();
      failedAny |= tessel::conversion::reportRefusal("convert-tile-to-blocked", program, error,
                                                     fallback);
    }
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult lowerProgram(func::FuncOp program, gpu::GPUModuleOp &gpuModule,
                             gpu::GPUFuncOp &kernel) {
    // The layouts decide the kernel: given in the input (a lit test or another pass may choose
    // them), or assigned here as tilegpu-assign-blocked does, on a copy, so that a refusal
    // leaves the program as it was for the reference lowering.
    func::FuncOp work = cast<func::FuncOp>(program->clone());
    llvm::scope_exit dropCopy([&] { work.erase(); });
    FailureOr<std::optional<tessel::tilegpu::RowsLayout>> layout = tessel::tilegpu::layoutOf(work);
    if (succeeded(layout) && !*layout) {
      if (failed(tessel::tilegpu::assignBlocked(work, numThreads)))
        return failure();
      layout = tessel::tilegpu::layoutOf(work);
    }
    if (failed(layout))
      return failure();
    if (!gpuModule)
      gpuModule = tessel::conversion::getOrCreateKernelModule(getOperation());
    FailureOr<gpu::GPUFuncOp> made = tessel::conversion::createKernel(program, gpuModule);
    if (failed(made))
      return failure();
    kernel = *made;
    OpBuilder b(&getContext());
    const tessel::tilegpu::RowsLayout &L = **layout;
    kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(L.threads), 1, 1}));
    kernel->setAttr("tessel.shared_bytes", b.getI64IntegerAttr(L.scratch * 4));
    kernel->setAttr("tessel.codegen", b.getStringAttr("blocked"));
    BlockedKernelBuilder builder(kernel, L);
    return builder.build(work);
  }
};

} // namespace
