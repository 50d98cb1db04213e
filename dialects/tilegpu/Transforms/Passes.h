//===- Passes.h - passes of the GPU level -----------------------*- C++ -*-===//
//
// Declarations generated from Passes.td.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_TRANSFORMS_PASSES_H
#define TESSEL_TILEGPU_TRANSFORMS_PASSES_H

#include "tilegpu/IR/TileGPUDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/Pass.h"

namespace tessel::tilegpu {
#define GEN_PASS_DECL
#include "tilegpu/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

#endif // TESSEL_TILEGPU_TRANSFORMS_PASSES_H
