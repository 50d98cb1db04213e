//===- Pipeline.cpp - the tile-level optimisation pipeline ----------------===//
//
// The order matters: the online-softmax rewrite must see the naive form whole; scale folding
// wants the exp2 form it creates; loop splitting is only legal once the softmax is streamed;
// bias separation reads the split loops' bodies.
//
//===----------------------------------------------------------------------===//

#include "tile/Transforms/Passes.h"

#include "mlir/Dialect/Arith/Transforms/Passes.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Transforms/Passes.h"

using namespace mlir;

void tessel::tile::buildTileOptimizationPipeline(OpPassManager &pm) {
  pm.addPass(createInlinerPass());
  pm.addPass(createCanonicalizerPass());
  OpPassManager &fn = pm.nest<func::FuncOp>();
  fn.addPass(createTileOnlineSoftmax());
  fn.addPass(createCanonicalizerPass());
  fn.addPass(createTileFoldSoftmaxScale());
  // Chunked masks (`q_idx // C == kv_idx // C`) as index ranges the split classifies.
  fn.addPass(createTileFloorQuotientRanges());
  fn.addPass(createTileSplitMaskedLoops());
  fn.addPass(createCanonicalizerPass());
  // Proves split bounds equal where they are (e.g. min(x, 0) with x >= 0), so empty loops fold.
  fn.addPass(arith::createArithIntRangeOpts());
  fn.addPass(createCanonicalizerPass());
  // After the split (it reads the same index arithmetic in masks); fold again what it separates.
  fn.addPass(createTileSeparateBias());
  // Block-table masks (`blocks[q_idx // G, kv_idx // G]`) read once a block, not once a score.
  fn.addPass(createTileFoldIndexDivision());
  fn.addPass(createTileFoldSoftmaxScale());
  fn.addPass(createLoopInvariantCodeMotionPass());
  fn.addPass(createCSEPass());
  fn.addPass(createCanonicalizerPass());
}

void tessel::tile::registerTileOptimizationPipeline() {
  PassPipelineRegistration<>(
      "tile-optimize",
      "Inline, make softmax online, fold the softmax scale, split masked loops, clean up.",
      buildTileOptimizationPipeline);
}
