//===- FoldIndexDivision.cpp - floor divisions uniform over an index tile ----------------===//
//
// A mask that reads a table of blocks, `blocks[q_idx // G, kv_idx // G]`, divides every
// score's indices and gathers one table entry per score: per thread dozens of address
// computations and loads, and the registers for them (the 128×128 block-sparse kernel spilled
// 48 bytes). Where G is a multiple of the kernel's block and the block starts on a multiple of
// G, the quotient is the same for the whole tile: the block's number. This pass proves that
// with the mask analysis's IndexTile and makes the quotient a scalar; the gather's
// canonicalization then reads the table once a block.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/MaskAnalysis.h"
#include "tile/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessel::tile {
#define GEN_PASS_DEF_TILEFOLDINDEXDIVISION
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;
using namespace tessel::tile;

namespace {

// Python's `x // c` for a constant c > 0 as the DSL builds it (frontend.floor_divmod):
//   select(remsi(x, c) < 0, divsi(x, c) − 1, divsi(x, c)).
// Where the quotient is the same over the tile (uniformFloorQuotient: with g = gcd(c, every
// scalar's coefficient), it is (L + m) // (c / g)), the select becomes a splat of one scalar
// floor division, or of L + m itself where g = c (kernel blocks that divide the table's G).
// Exact for any value of the scalars.
struct UniformFloorDivision : OpRewritePattern<arith::SelectOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::SelectOp op, PatternRewriter &rewriter) const override {
    std::optional<FloorDivision> div = matchFloorDivision(op.getResult());
    if (!div)
      return failure();
    auto type = cast<RankedTensorType>(op.getType());
    std::optional<Value> scalar = emitUniformFloorQuotient(rewriter, op.getLoc(), div->dividend,
                                                           div->divisor, type.getElementType());
    if (!scalar)
      return failure();
    rewriter.replaceOpWithNewOp<SplatOp>(op, type, *scalar);
    return success();
  }
};

struct TileFoldIndexDivision
    : tessel::tile::impl::TileFoldIndexDivisionBase<TileFoldIndexDivision> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<UniformFloorDivision>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
