//===- Passes.h - passes of the target pipeline -----------------*- C++ -*-===//
//
// Declarations of the passes declared in Passes.td (tessel-extern-dynamic-shared-memory,
// tessel-split-kernel-modules, tessel-module-to-binary) and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TARGET_PASSES_H
#define TESSEL_TARGET_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace mlir::gpu {
class GPUModuleOp;
} // namespace mlir::gpu

namespace tessel {
#define GEN_PASS_DECL
#include "tessel/Target/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Target/Passes.h.inc"
} // namespace tessel

#endif // TESSEL_TARGET_PASSES_H
