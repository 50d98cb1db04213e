//===- ModuleToBinary.cpp - gpu.module to PTX or cubin, two passes skipped -===//
//
// tessel-module-to-binary: upstream's gpu-module-to-binary (gpu::transformGpuModulesToBinaries)
// with two LLVM passes skipped by an OptPassGate: the SLP vectorizer and the NVPTX back end's
// straight-line strength reduction, a fifth of the first call at d256 (Passes.td says more).
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Passes.h"

#include "mlir/Dialect/GPU/IR/CompilationInterfaces.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/SymbolTable.h"

#include "llvm/IR/LLVMContext.h"
#include "llvm/IR/Module.h"
#include "llvm/IR/OptBisect.h"

namespace tessel {
#define GEN_PASS_DEF_MODULETOBINARY
#include "tessel/Target/Passes.h.inc"
} // namespace tessel

using namespace mlir;

namespace {

/// Lets every pass run but two that cost much and do little for tessel's kernels (Passes.td):
/// LLVM's SLP vectorizer (the new pass manager asks by class name) and the NVPTX back end's
/// straight-line strength reduction (the legacy one asks by argument name). Stateless, so one
/// instance serves every context and thread.
class SkipIdlePasses final : public llvm::OptPassGate {
public:
  bool shouldRunPass(llvm::StringRef pass, llvm::StringRef) const override {
    return pass != "slsr" && pass != "SLPVectorizerPass";
  }
  bool isEnabled() const override { return true; }
};

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
    static const SkipIdlePasses gate;
    // Before LLVM's optimisation pipeline, which asks the context's gate when it is built.
    auto beforeOptimization = [](llvm::Module &module) {
      module.getContext().setOptPassGate(const_cast<SkipIdlePasses &>(gate));
    };
    std::optional<SymbolTable> table;
    auto symbols = [&]() -> SymbolTable * {
      if (!table)
        table.emplace(getOperation());
      return &*table;
    };
    gpu::TargetOptions options(toolkit, {}, {}, {}, *target, symbols, beforeOptimization);
    if (failed(gpu::transformGpuModulesToBinaries(getOperation(), nullptr, options)))
      signalPassFailure();
  }
};

} // namespace
