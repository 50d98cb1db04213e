//===- Registration.cpp - every dialect and pass tessel uses --------------===//
//
// Upstream passes are registered one by one: the catch-all registration functions pull in
// ROCDL, SPIR-V and Arm and cost ~10 MB of binary (TOOLCHAIN.md, pitfall 8).
//
//===----------------------------------------------------------------------===//

#include "tessel/Registration.h"

#include "tessel/Target/Pipeline.h"

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/Passes.h"
#include "tilegpu/IR/TileGPUDialect.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Dialect/Func/Extensions/InlinerExtension.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Transforms/Passes.h"

#include <mutex>

void tessel::registerDialects(mlir::DialectRegistry &registry) {
  registry.insert<tile::TileDialect, tilegpu::TileGPUDialect, mlir::arith::ArithDialect,
                  mlir::func::FuncDialect, mlir::math::MathDialect, mlir::scf::SCFDialect>();
  mlir::func::registerInlinerExtension(registry);
  tessel::registerTargetDialects(registry);
}

void tessel::registerPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    mlir::registerCanonicalizerPass();
    mlir::registerCSEPass();
    mlir::registerInlinerPass();
    mlir::registerSymbolDCEPass();
    mlir::registerLoopInvariantCodeMotionPass();
    mlir::arith::registerArithIntRangeOpts();
    tile::registerTilePasses();
    tile::registerTileOptimizationPipeline();
    tilegpu::registerTileGPUPasses();
    tessel::registerTargetPasses();
  });
}
