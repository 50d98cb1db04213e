//===- CompileSteps.h - what compileModule's driver shares with one compile ---------------===//
//
// Internal to lib/Target: Compile.cpp makes one compile (lowering, NVPTX, ptxas);
// SpillFallbacks.cpp drives it again where the module spills (compileModule).
//
//===------------------------------------------------------------------------------------------===//

#ifndef TESSEL_LIB_TARGET_COMPILESTEPS_H
#define TESSEL_LIB_TARGET_COMPILESTEPS_H

#include "tessel/Target/Compile.h"

#include <chrono>

namespace tessel {

/// Wall time of the steps of one compile, appended to CompiledModule::timings.
class StageClock {
public:
  explicit StageClock(llvm::SmallVector<StageTime> &out) : out(out) {}
  void lap(llvm::StringRef name) {
    auto now = std::chrono::steady_clock::now();
    out.push_back({name.str(), std::chrono::duration<double>(now - last).count()});
    last = now;
  }

private:
  llvm::SmallVector<StageTime> &out;
  std::chrono::steady_clock::time_point last = std::chrono::steady_clock::now();
};

/// compileModule without its fallbacks: one lowering, one NVPTX and (for Stage::Cubin) one
/// ptxas run.
mlir::FailureOr<CompiledModule> compileOnce(mlir::ModuleOp module, const TargetOptions &options,
                                            Stage stage, const CompileFlags &flags);

} // namespace tessel

#endif // TESSEL_LIB_TARGET_COMPILESTEPS_H
