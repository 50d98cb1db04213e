//===- ConvertTileToBlocked.cpp - tile programs without dots, tiles in registers ---===//
//
// convert-tile-to-blocked: the pass, the row-blocked layout of a program (planRows), which
// layouts each tile is needed in (computeKinds) and the element-wise and shape ops. Loads and
// stores are in BlockedMemory.cpp, reductions in BlockedReduce.cpp.
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

namespace tessel {
#define GEN_PASS_DEF_CONVERTTILETOBLOCKED
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

namespace tessel::blocked {

namespace {

bool isTensor(Type t) { return isa<RankedTensorType>(t); }

bool isElementwise(Operation *op) {
  Dialect *dialect = op->getDialect();
  return dialect && isa<arith::ArithDialect, math::MathDialect>(dialect) &&
         op->getNumRegions() == 0 && !isa<arith::ConstantOp>(op);
}

/// The most elements a thread holds of one block: beyond it the registers spill.
constexpr int64_t kMaxPerThread = 128;

} // namespace

FailureOr<RowsLayout> planRows(func::FuncOp program, int64_t threads) {
  RowsLayout L;
  L.threads = threads;
  std::optional<std::pair<int64_t, int64_t>> block;
  int64_t oneD = 0, minBytes = 16;
  // Which block: the [R, C] of the 2-D tiles, or [1, N] for a program of 1-D tiles.
  WalkResult walk = program.walk([&](Operation *op) -> WalkResult {
    if (isa<tile::DotOp, tile::TransOp, tile::GatherOp, tile::SoftmaxOp>(op))
      return op->emitOpError("is outside convert-tile-to-blocked's class (programs of "
                             "element-wise ops, loads, stores and row reductions)"),
             WalkResult::interrupt();
    bool tiles = llvm::any_of(op->getResultTypes(), isTensor) ||
                 llvm::any_of(op->getOperandTypes(), isTensor);
    if (tiles && op->getParentOp() != program.getOperation())
      return op->emitOpError("uses tiles inside a region: convert-tile-to-blocked lowers "
                             "straight-line tile code"),
             WalkResult::interrupt();
    if (isa<tile::LoadOp, tile::StoreOp>(op)) {
      Type t = isa<tile::LoadOp>(op) ? op->getResult(0).getType() : op->getOperand(0).getType();
      if (auto st = dyn_cast<tile::StoreOp>(op))
        t = st.getValue().getType();
      minBytes = std::min<int64_t>(
          minBytes, std::max<int64_t>(1, cast<RankedTensorType>(t).getElementTypeBitWidth() / 8));
    }
    if (auto red = dyn_cast<tile::ReduceOp>(op)) {
      auto in = cast<RankedTensorType>(red.getInput().getType());
      if (in.getRank() != 2 || red.getAxis() != 1 || !in.getElementType().isF32())
        return op->emitOpError("is a reduction convert-tile-to-blocked does not lower (it "
                               "reduces f32 tiles along rows)"),
               WalkResult::interrupt();
    }
    for (Type t : op->getResultTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!rt)
        continue;
      if (rt.getRank() > 2)
        return op->emitOpError("makes a tile of rank > 2"), WalkResult::interrupt();
      if (rt.getRank() == 1) {
        oneD = std::max(oneD, rt.getShape()[0]);
        continue;
      }
      int64_t r = rt.getShape()[0], c = rt.getShape()[1];
      if (r == 1 || c == 1)
        continue;
      if (block && *block != std::make_pair(r, c))
        return op->emitOpError("makes a ")
                   << r << "x" << c << " tile beside " << block->first << "x" << block->second
                   << " ones: convert-tile-to-blocked lowers one block shape",
               WalkResult::interrupt();
      block = std::make_pair(r, c);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!block) {
    // [R, 1] / [1, C] tiles without a full block are rare; 1-D programs are one row.
    block = std::pair<int64_t, int64_t>(1, std::max<int64_t>(oneD, 1));
    program.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        if (auto rt = dyn_cast<RankedTensorType>(t); rt && rt.getRank() == 2)
          block = std::make_pair(rt.getShape()[0], rt.getShape()[1]);
    });
  }
  L.rows = block->first;
  L.cols = block->second;
  // 16-byte vectors of the narrowest element the program moves, as long as they divide a row.
  L.vector = 16 / minBytes;
  while (L.vector > 1 && L.cols % L.vector != 0)
    L.vector /= 2;
  int64_t chunks = L.cols / L.vector;
  if (!llvm::isPowerOf2_64(threads) ||
      (chunks < threads ? !llvm::isPowerOf2_64(chunks) : chunks % threads != 0))
    return program.emitOpError("has rows of ")
           << L.cols << " elements, which " << threads
           << " threads cannot split evenly in vectors of " << L.vector;
  L.threadsPerRow = std::min(threads, chunks);
  L.rowsPerPass = threads / L.threadsPerRow;
  L.colChunks = chunks / L.threadsPerRow;
  if (L.rows >= L.rowsPerPass) {
    if (L.rows % L.rowsPerPass != 0)
      return program.emitOpError("has blocks of ")
             << L.rows << " rows, not a multiple of the " << L.rowsPerPass
             << " rows its threads cover at once";
    L.rowSlots = L.rows / L.rowsPerPass;
  } else if (L.rowsPerPass % L.rows != 0) {
    return program.emitOpError("has blocks of ")
           << L.rows << " rows, which do not divide the " << L.rowsPerPass
           << " rows its threads cover at once";
  }
  if (L.count(Kind::Tile) > kMaxPerThread)
    return program.emitOpError("holds ")
           << L.count(Kind::Tile) << " elements of a " << L.rows << "x" << L.cols
           << " block a thread with " << threads << " threads: convert-tile-to-blocked keeps "
           << "at most " << kMaxPerThread << " in registers";
  if (L.threadsPerRow > 32 && !program.getOps<tile::ReduceOp>().empty())
    L.scratch = L.rowSlots * L.rowsPerPass * (L.threadsPerRow / 32);
  return L;
}

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

std::optional<Kind> BlockedKernelBuilder::kindOfShape(RankedTensorType type) const {
  if (type.getRank() != 2)
    return std::nullopt;
  int64_t r = type.getShape()[0], c = type.getShape()[1];
  if (r == L.rows && c == L.cols)
    return Kind::Tile;
  if (c == 1)
    return Kind::Row;
  return Kind::Col;
}

Kind BlockedKernelBuilder::naturalKind(Value v) const {
  // The size says it unless R = C; then where the value comes from: a row reduction, or
  // element-wise ops on one.
  int64_t n = cast<RankedTensorType>(v.getType()).getShape()[0];
  if (n == L.rows && n != L.cols)
    return Kind::Row;
  if (n == L.cols && n != L.rows)
    return Kind::Col;
  Operation *def = v.getDefiningOp();
  if (def && isa<tile::ReduceOp>(def))
    return Kind::Row;
  if (def && isElementwise(def))
    for (Value o : def->getOperands())
      if (isTensor(o.getType()) && naturalKind(o) == Kind::Row)
        return Kind::Row;
  return Kind::Col;
}

void BlockedKernelBuilder::demand(Value v, Kind k) {
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!type)
    return;
  if (std::optional<Kind> shaped = kindOfShape(type))
    k = *shaped;
  SmallVector<Kind, 2> &ks = kinds[v];
  if (!llvm::is_contained(ks, k))
    ks.push_back(k);
}

LogicalResult BlockedKernelBuilder::computeKinds(func::FuncOp program) {
  SmallVector<Operation *> ops;
  for (Operation &op : program.getBody().front())
    ops.push_back(&op);
  for (Operation *op : llvm::reverse(ops)) {
    if (auto st = dyn_cast<tile::StoreOp>(op)) {
      auto type = cast<RankedTensorType>(st.getValue().getType());
      Kind k = kindOfShape(type).value_or(naturalKind(st.getValue()));
      demand(st.getValue(), k);
      if (st.getMask())
        demand(st.getMask(), k);
      continue;
    }
    if (op->getNumResults() != 1 || !isTensor(op->getResult(0).getType()))
      continue;
    SmallVector<Kind, 2> needed = kinds.lookup(op->getResult(0));
    for (Kind k : needed) {
      if (auto ed = dyn_cast<tile::ExpandDimsOp>(op)) {
        demand(ed.getInput(), ed.getAxis() == 1 ? Kind::Row : Kind::Col);
      } else if (auto bc = dyn_cast<tile::BroadcastOp>(op)) {
        auto in = cast<RankedTensorType>(bc.getInput().getType());
        demand(bc.getInput(), in.getShape() == bc.getResult().getType().getShape()
                                  ? k
                                  : kindOfShape(in).value_or(k));
      } else if (auto red = dyn_cast<tile::ReduceOp>(op)) {
        demand(red.getInput(), Kind::Tile);
      } else if (isElementwise(op)) {
        for (Value o : op->getOperands())
          demand(o, k);
      }
    }
  }
  return success();
}

LogicalResult BlockedKernelBuilder::build(func::FuncOp program) {
  if (failed(computeKinds(program)))
    return failure();
  return walk(program);
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
    auto in = cast<RankedTensorType>(bc.getInput().getType());
    Kind from = in.getShape() == bc.getResult().getType().getShape() ? k
                                                                     : kindOfShape(in).value_or(k);
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
  if (auto red = dyn_cast<tile::ReduceOp>(op))
    return reduceRows(red, regsOf(red.getInput(), Kind::Tile));
  if (isElementwise(op)) {
    SmallVector<Value> out;
    Type resultType = cast<RankedTensorType>(op->getResult(0).getType()).getElementType();
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
  if (op->getNumResults() == 1 && isTensor(op->getResult(0).getType())) {
    for (Kind k : kinds.lookup(op->getResult(0))) {
      FailureOr<SmallVector<Value>> r = compute(op, k);
      if (failed(r))
        return failure();
      if (static_cast<int64_t>(r->size()) != L.count(k))
        return op->emitOpError("has a layout convert-tile-to-blocked got wrong (")
               << r->size() << " registers, " << L.count(k) << " expected)";
      regsOf(op->getResult(0), k) = std::move(*r);
    }
    return success();
  }
  if (llvm::any_of(op->getResultTypes(), isTensor) || llvm::any_of(op->getOperandTypes(), isTensor))
    return op->emitOpError("is not supported by convert-tile-to-blocked");
  Dialect *dialect = op->getDialect();
  if (!dialect || !isa<arith::ArithDialect, math::MathDialect>(dialect) || op->getNumRegions())
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
    FailureOr<tessel::blocked::RowsLayout> layout = tessel::blocked::planRows(program, numThreads);
    if (failed(layout))
      return failure();
    if (!gpuModule)
      gpuModule = tessel::conversion::getOrCreateKernelModule(getOperation());
    FailureOr<gpu::GPUFuncOp> made = tessel::conversion::createKernel(program, gpuModule);
    if (failed(made))
      return failure();
    kernel = *made;
    OpBuilder b(&getContext());
    kernel.setKnownBlockSizeAttr(b.getDenseI32ArrayAttr({static_cast<int32_t>(numThreads), 1, 1}));
    kernel->setAttr("tessel.shared_bytes", b.getI64IntegerAttr(layout->scratch * 4));
    kernel->setAttr("tessel.codegen", b.getStringAttr("blocked"));
    BlockedKernelBuilder builder(kernel, *layout);
    return builder.build(program);
  }
};

} // namespace
