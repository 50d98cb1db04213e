//===- Passes.h - rewrite passes of the tile dialect ------------*- C++ -*-===//
//
// Declarations generated from Passes.td, plus the pipeline that runs them in order.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_TRANSFORMS_PASSES_H
#define TESSEL_TILE_TRANSFORMS_PASSES_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Pass/Pass.h"

namespace mlir {
class OpPassManager;
} // namespace mlir

namespace tessel::tile {
#define GEN_PASS_DECL
#include "tile/Transforms/Passes.h.inc"

#define GEN_PASS_REGISTRATION
#include "tile/Transforms/Passes.h.inc"

/// The tile-level optimisation pipeline: inline, online softmax, scale folding, mask splitting,
/// each followed by canonicalisation and CSE. Registered as `tile-optimize`.
void buildTileOptimizationPipeline(mlir::OpPassManager &pm);
void registerTileOptimizationPipeline();
} // namespace tessel::tile

#endif // TESSEL_TILE_TRANSFORMS_PASSES_H
