//===- SplitKernelModules.cpp - one module per kernel for LLVM ------------===//
//
// tessel-split-kernel-modules: replaces a gpu.module of several kernels by one builtin.module
// per kernel, each holding a copy of the gpu.module with that kernel and what it references, so
// that gpu-module-to-binary makes one LLVM module per kernel. LLVM's optimisation of a module
// whose kernels share a global grows with the square of their number (issue 15, finding 8);
// compileModule joins the PTX of the parts (joinPtxModules).
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace tessel {
#define GEN_PASS_DEF_SPLITKERNELMODULES
#include "tessel/Target/Passes.h.inc"
} // namespace tessel

using namespace mlir;

namespace {

bool isKernel(Operation *op) {
  return op->hasAttr(gpu::GPUDialect::getKernelFuncAttrName()) || op->hasAttr("nvvm.kernel");
}

/// Whether `op` defines something (a body, an initializer) rather than declaring it: two copies
/// of a definition in two LLVM modules may be compiled differently.
bool isDefinition(Operation *op) {
  if (auto fn = dyn_cast<LLVM::LLVMFuncOp>(op))
    return !fn.isExternal();
  if (auto global = dyn_cast<LLVM::GlobalOp>(op))
    return global.getValueOrNull() || !global.getInitializerRegion().empty();
  // Anything else with a region (gpu.func, func.func) counts as a definition.
  return op->getNumRegions() != 0 && !op->getRegion(0).empty();
}

/// The symbols of `gpuModule` that `root` references, transitively, `root` included.
llvm::DenseSet<Operation *> referencedSymbols(Operation *root, SymbolTable &symbols) {
  llvm::DenseSet<Operation *> seen = {root};
  llvm::SmallVector<Operation *> work = {root};
  while (!work.empty()) {
    Operation *from = work.pop_back_val();
    from->walk([&](Operation *op) {
      for (NamedAttribute attr : op->getAttrs())
        attr.getValue().walk([&](SymbolRefAttr ref) {
          Operation *target = symbols.lookup(ref.getRootReference());
          if (target && seen.insert(target).second)
            work.push_back(target);
        });
    });
  }
  return seen;
}

/// Replaces `gpuModule` by one builtin.module per kernel; leaves it whole (and returns false)
/// if it holds fewer than two kernels or a definition that two kernels would share.
bool splitPerKernel(gpu::GPUModuleOp gpuModule) {
  llvm::SmallVector<Operation *> kernels;
  for (Operation &op : gpuModule.getBody()->getOperations())
    if (isKernel(&op))
      kernels.push_back(&op);
  if (kernels.size() < 2)
    return false;

  SymbolTable symbols(gpuModule);
  llvm::SmallVector<llvm::DenseSet<Operation *>> parts;
  llvm::DenseMap<Operation *, unsigned> users;
  for (Operation *kernel : kernels) {
    parts.push_back(referencedSymbols(kernel, symbols));
    for (Operation *op : parts.back())
      if (op != kernel && isDefinition(op) && ++users[op] > 1)
        return false;
  }

  OpBuilder builder(gpuModule);
  Location loc = gpuModule.getLoc();
  for (const llvm::DenseSet<Operation *> &part : parts) {
    auto holder = ModuleOp::create(builder, loc);
    OpBuilder inner = OpBuilder::atBlockEnd(holder.getBody());
    auto copy = cast<gpu::GPUModuleOp>(inner.cloneWithoutRegions(*gpuModule));
    Block &body = copy.getBodyRegion().emplaceBlock();
    inner.setInsertionPointToEnd(&body);
    // Module order, as in the original: what is not a symbol (none today) goes to every part.
    for (Operation &op : gpuModule.getBody()->getOperations())
      if (!isa<SymbolOpInterface>(op) || part.contains(&op))
        inner.clone(op);
  }
  gpuModule->erase();
  return true;
}

struct SplitKernelModules : tessel::impl::SplitKernelModulesBase<SplitKernelModules> {
  void runOnOperation() override {
    for (auto gpuModule :
         llvm::make_early_inc_range(getOperation().getBody()->getOps<gpu::GPUModuleOp>()))
      splitPerKernel(gpuModule);
  }
};

} // namespace
