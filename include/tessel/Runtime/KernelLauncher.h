//===- KernelLauncher.h - compile a tile kernel and run it on the GPU -*- C++ -*-===//
//
// The GPU counterpart of the interpreter's runKernel: the same kernel, the same host buffers
// (interp::KernelArg), run through the compiler to a cubin for the device's chip and launched
// through the CUDA driver. Tools use it to check GPU results against the interpreter, the oracle.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_KERNELLAUNCHER_H
#define TESSEL_RUNTIME_KERNELLAUNCHER_H

#include "tessel/Interpreter/Interpreter.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <array>
#include <string>

namespace tessel::runtime {

struct GpuRunOptions {
  /// sm_80 or sm_90a; empty: chosen from the device (sm_90a from compute capability 9.0 on).
  std::string chip;
  /// Which lowering makes the kernel: auto, reference or mma (TargetOptions::codegen).
  std::string codegen = "auto";
  /// TargetOptions::wgmmaOverlap.
  bool wgmmaOverlap = false;
  /// TargetOptions::occupancyHints.
  bool occupancyHints = true;
  /// Buffer arguments the kernel writes: they are filled with 0xFF bytes (NaN for floats) on the
  /// device instead of being copied in, so an element the kernel forgets cannot look right.
  llvm::SmallVector<unsigned> outputs;
  /// Timed launches after `warmup` untimed ones; 0 times nothing.
  unsigned warmup = 0, repeats = 0;
};

struct GpuRunResult {
  std::string device;
  std::string chip;
  unsigned blockSize = 0;
  int64_t dynamicSharedBytes = 0;
  int registers = 0;
  int64_t spillBytes = 0;
  /// Median of the timed launches, in milliseconds (0 when none were timed).
  double medianMs = 0;
};

/// Compiles `module` for the GPU, runs kernel `name` over `grid` on `args` (buffers are copied
/// back into `args` afterwards). Failures — no GPU, compile errors, CUDA errors — are emitted as
/// diagnostics on the module.
mlir::FailureOr<GpuRunResult> runOnGpu(mlir::ModuleOp module, llvm::StringRef name,
                                       llvm::MutableArrayRef<interp::KernelArg> args,
                                       std::array<int64_t, 3> grid, const GpuRunOptions &options);

} // namespace tessel::runtime

#endif // TESSEL_RUNTIME_KERNELLAUNCHER_H
