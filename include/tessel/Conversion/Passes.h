//===- Passes.h - tessel's conversion passes --------------------*- C++ -*-===//
//
// Declarations of the conversions declared in Passes.td (convert-tile-to-gpu, convert-tile-to-mma)
// and their registration.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONVERSION_PASSES_H
#define TESSEL_CONVERSION_PASSES_H

#include "mlir/Pass/Pass.h"

namespace mlir {
class ModuleOp;
namespace gpu {
class GPUDialect;
} // namespace gpu
namespace memref {
class MemRefDialect;
} // namespace memref
namespace LLVM {
class LLVMDialect;
} // namespace LLVM
namespace NVVM {
class NVVMDialect;
} // namespace NVVM
namespace scf {
class SCFDialect;
} // namespace scf
namespace arith {
class ArithDialect;
} // namespace arith
namespace math {
class MathDialect;
} // namespace math
} // namespace mlir

namespace tessel {
#define GEN_PASS_DECL
#include "tessel/Conversion/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

#endif // TESSEL_CONVERSION_PASSES_H
