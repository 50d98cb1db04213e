//===- KernelWalker.cpp - what both GPU lowerings do around the tile ops ---------------------===//
//
// The kernel module, the kernel's signature and the walk over a program's ops
// (KernelWalker.h), shared by convert-tile-to-gpu and convert-tile-to-mma.
//
//===----------------------------------------------------------------------------------------===//

#include "tessel/Conversion/KernelWalker.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/BuiltinOps.h"

using namespace mlir;
using namespace tessel::conversion;
namespace tile = tessel::tile;

gpu::GPUModuleOp tessel::conversion::getOrCreateKernelModule(ModuleOp module) {
  for (auto m : module.getOps<gpu::GPUModuleOp>())
    if (m.getName() == "tessel_kernels")
      return m;
  OpBuilder b(module.getContext());
  b.setInsertionPointToEnd(module.getBody());
  auto gpuModule = gpu::GPUModuleOp::create(b, module.getLoc(), "tessel_kernels");
  module->setAttr(gpu::GPUDialect::getContainerModuleAttrName(), b.getUnitAttr());
  return gpuModule;
}

FailureOr<gpu::GPUFuncOp> tessel::conversion::createKernel(func::FuncOp program,
                                                           gpu::GPUModuleOp gpuModule) {
  MLIRContext *ctx = program.getContext();
  if (program.getNumResults() != 0)
    return program.emitOpError("is a tile program, so it must return nothing");
  SmallVector<Type> argTypes;
  bool badArg = false;
  for (BlockArgument arg : program.getArguments()) {
    Type t = arg.getType();
    if (isa<tile::PtrType>(t)) {
      argTypes.push_back(LLVM::LLVMPointerType::get(ctx, 1));
    } else if (t.isIntOrIndexOrFloat()) {
      argTypes.push_back(t);
    } else {
      program.emitOpError() << "argument #" << arg.getArgNumber() << " has type " << t
                            << ": a kernel takes !tile.ptr and scalar arguments";
      badArg = true;
    }
  }
  if (badArg)
    return failure();
  OpBuilder b(ctx);
  b.setInsertionPointToEnd(gpuModule.getBody());
  auto kernel = gpu::GPUFuncOp::create(b, program.getLoc(), program.getName(),
                                       FunctionType::get(ctx, argTypes, {}));
  kernel->setAttr(gpu::GPUDialect::getKernelFuncAttrName(), b.getUnitAttr());
  return kernel;
}

KernelWalker::KernelWalker(gpu::GPUFuncOp kernel) : kernel(kernel), b(kernel.getContext()) {}

LogicalResult tessel::conversion::captureFirstError(MLIRContext *ctx, FirstError &error,
                                                    function_ref<LogicalResult()> lower) {
  error.reason.clear();
  ScopedDiagnosticHandler handler(ctx, [&](Diagnostic &diag) {
    if (diag.getSeverity() != DiagnosticSeverity::Error)
      return failure();
    if (error.reason.empty()) {
      error.reason = diag.str();
      error.where = diag.getLocation();
    }
    return success();
  });
  return lower();
}

bool tessel::conversion::reportRefusal(StringRef pass, func::FuncOp program,
                                       const FirstError &error, bool fallback) {
  if (!fallback) {
    emitError(error.where) << error.reason;
    return true;
  }
  emitRemark(error.where) << pass << " leaves @" << program.getName()
                          << " to the reference lowering: " << error.reason;
  return false;
}

KernelWalker::~KernelWalker() = default;

void KernelWalker::emitScalar(Operation *op, bool ftz) {
  if (isa<arith::ConstantOp>(op)) {
    scalars.map(op->getResult(0), b.clone(*op)->getResult(0));
    return;
  }
  SmallVector<Value> operands;
  for (Value v : op->getOperands())
    operands.push_back(scalars.lookup(v));
  SmallVector<Value> results = emitScalarOp(b, op, operands, op->getResultTypes(), ftz);
  for (auto [src, dst] : llvm::zip(op->getResults(), results))
    scalars.map(src, dst);
}

Value KernelWalker::ci32(int64_t v) {
  return arith::ConstantOp::create(b, b.getUnknownLoc(), b.getI32IntegerAttr(v));
}

Value KernelWalker::ci64(int64_t v) {
  return arith::ConstantOp::create(b, b.getUnknownLoc(), b.getI64IntegerAttr(v));
}

LogicalResult KernelWalker::walk(func::FuncOp program) {
  Block &entry = kernel.getBody().front();
  b.setInsertionPointToStart(&entry);
  Location loc = program.getLoc();
  emitPrologue(loc);
  for (auto [src, dst] : llvm::zip(program.getArguments(), entry.getArguments()))
    scalars.map(src, dst);
  if (failed(emitBlock(program.getBody().front())))
    return failure();
  emitEpilogue(loc);
  gpu::ReturnOp::create(b, loc);
  return success();
}

LogicalResult
KernelWalker::emitCarriedLoop(scf::ForOp op, ValueRange inits,
                              function_ref<void(ValueRange, ValueRange)> bind,
                              function_ref<FailureOr<SmallVector<Value>>(scf::YieldOp)> yields) {
  Location loc = op.getLoc();
  auto newFor = scf::ForOp::create(b, loc, scalars.lookup(op.getLowerBound()),
                                   scalars.lookup(op.getUpperBound()), scalars.lookup(op.getStep()),
                                   inits);
  Block *body = newFor.getBody();
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  b.setInsertionPointToEnd(body);
  scalars.map(op.getInductionVar(), newFor.getInductionVar());
  bind(newFor.getRegionIterArgs(), op.getRegionIterArgs());
  FailureOr<SmallVector<Value>> yielded = failure();
  if (succeeded(emitBlock(*op.getBody())))
    yielded = yields(cast<scf::YieldOp>(op.getBody()->getTerminator()));
  // On failure the loop still gets a terminator (its iter_args): the IR stays well formed.
  scf::YieldOp::create(
      b, loc, succeeded(yielded) ? ValueRange(*yielded) : ValueRange(newFor.getRegionIterArgs()));
  b.setInsertionPointAfter(newFor);
  if (failed(yielded))
    return failure();
  bind(newFor.getResults(), op.getResults());
  return success();
}

LogicalResult KernelWalker::emitBlock(Block &block) {
  for (Operation &op : block.without_terminator()) {
    if (Value v = emitGridQuery(b, &op)) {
      scalars.map(op.getResult(0), v);
      continue;
    }
    if (auto md = dyn_cast<tile::MakeDescOp>(op)) {
      descs[md.getResult()] = lowerMakeDesc(b, md, scalars, descs);
      continue;
    }
    if (auto ls = dyn_cast<tile::LoadScalarOp>(op)) {
      auto it = descs.find(ls.getDesc());
      if (it == descs.end())
        return ls.emitOpError("reads a descriptor that cannot be traced to a tile.make_desc");
      scalars.map(ls.getResult(), emitLoadScalar(b, ls, it->second, scalars));
      continue;
    }
    if (failed(emitOp(&op)))
      return failure();
  }
  return success();
}
