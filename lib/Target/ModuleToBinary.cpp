//===- ModuleToBinary.cpp - gpu.module to PTX or cubin, two passes skipped -===//
//
// tessel-module-to-binary: upstream's gpu-module-to-binary (gpu::transformGpuModulesToBinaries)
// without two LLVM passes: the SLP vectorizer (kept out by `noimplicitfloat` during the
// optimisation pipeline) and the NVPTX back end's straight-line strength reduction (an
// OptPassGate), a fifth of the first call at d256 (Passes.td says more).
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/IR/Function.h"
#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"

namespace tessel {
#define GEN_PASS_DEF_MODULETOBINARY
#include "tessel/Target/Passes.h.inc"
} // namespace tessel

using namespace mlir;

namespace {

/// Lets every pass of the NVPTX back end's legacy pass manager run but straight-line strength
/// reduction (asked by its argument name). Stateless, so one instance serves every context and
/// thread. (LLVM's optimisation pipeline, which MLIR builds without instrumentation, never asks
/// the gate.)
class SkipStrengthReduction final : public llvm::OptPassGate {
public:
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef) const override {
    return pass != "slsr";
  }
  bool isEnabled() const override { return true; }
};

/// Every function definition of `module` with or without `noimplicitfloat`. The SLP and loop
/// vectorizers return at once on a function that has it; so does the back end's load-store
/// vectorizer, which tessel's kernels need (16-byte loads and stores), hence its removal after
/// the optimisation pipeline.
void setNoImplicitFloat(llvm::Module &module, bool on) {
  for (llvm::Function &f : module)
    if (!f.isDeclaration()) {
      if (on)
        f.addFnAttr(llvm::Attribute::NoImplicitFloat);
      else
        f.removeFnAttr(llvm::Attribute::NoImplicitFloat);
    }
}

struct ModuleToBinary : tessel::impl::ModuleToBinaryBase<ModuleToBinary> {
  using ModuleToBinaryBase::ModuleToBinaryBase;

  void runOnOperation() override {
    std::optional<gpu::CompilationTarget> target =
        llvm::StringSwitch<std::optional<gpu::CompilationTarget>>(format)
            .Case("isa", gpu::CompilationTarget::Assembly)
            .Case("bin", gpu::CompilationTarget::Binary)
            .Default(std::nullopt);
    if (!target) {
      getOperation().emitError() << "tessel-module-to-binary: format must be isa or bin, not '"
                                 << format << "'";
      return signalPassFailure();
    }
    auto beforeOptimization = [](llvm::Module &module) { setNoImplicitFloat(module, true); };
    static SkipStrengthReduction gate;
    auto beforeCodegen = [](llvm::Module &module) {
      setNoImplicitFloat(module, false);
      module.getContext().setOptPassGate(gate);
    };
    std::optional<SymbolTable> table;
    auto symbols = [&]() -> SymbolTable * {
      if (!table)
        table.emplace(getOperation());
      return &*table;
    };
    gpu::TargetOptions options(toolkit, {}, {}, {}, *target, symbols, beforeOptimization, {},
                               beforeCodegen);
    if (failed(gpu::transformGpuModulesToBinaries(getOperation(), nullptr, options)))
      signalPassFailure();
  }
};

} // namespace
