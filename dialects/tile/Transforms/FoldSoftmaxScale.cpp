//===- FoldSoftmaxScale.cpp - one multiply per score before exp2 ----------===//
//
// Attention scales its scores twice after the online-softmax rewrite: by the user's softmax
// scale, then by log2(e) for exp2. These patterns move positive constant factors through the
// `-inf` masking select and merge multiplications by splatted scalars into one multiply whose
// factor is computed once, as a scalar, outside the per-element work.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessel::tile {
#define GEN_PASS_DEF_TILEFOLDSOFTMAXSCALE
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;
using namespace tessel::tile;

namespace {
// Whether every element of `v` is one float scalar: a splat constant or a tile.splat.
bool isSplattedScalar(Value v) {
  DenseElementsAttr dense;
  return v.getDefiningOp<SplatOp>() || (matchPattern(v, m_Constant(&dense)) && dense.isSplat() &&
                                        isa<FloatType>(dense.getElementType()));
}

// The scalar of a value for which isSplattedScalar holds; constants are materialised as scalar
// arith.constant at `b`'s insertion point.
Value splattedScalar(OpBuilder &b, Value v) {
  if (auto splat = v.getDefiningOp<SplatOp>())
    return splat.getValue();
  DenseElementsAttr dense;
  if (matchPattern(v, m_Constant(&dense)) && dense.isSplat() &&
      isa<FloatType>(dense.getElementType()))
    return arith::ConstantOp::create(b, v.getLoc(), dense.getSplatValue<FloatAttr>());
  return {};
}

bool isSplatConstant(Value v, function_ref<bool(const APFloat &)> pred) {
  DenseElementsAttr dense;
  return matchPattern(v, m_Constant(&dense)) && dense.isSplat() &&
         isa<FloatType>(dense.getElementType()) && pred(dense.getSplatValue<APFloat>());
}

// mulf(select(c, x, -inf), k) with k > 0 → select(c, mulf(x, k), -inf): masking commutes with
// positive scaling, and it brings the two multiplies next to each other.
struct MulThroughMaskingSelect : OpRewritePattern<arith::MulFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::MulFOp mul, PatternRewriter &rewriter) const override {
    for (unsigned i = 0; i < 2; ++i) {
      auto select = mul->getOperand(i).getDefiningOp<arith::SelectOp>();
      Value factor = mul->getOperand(1 - i);
      if (!select || !select->hasOneUse() || !isa<RankedTensorType>(select.getType()))
        continue;
      auto positive = [](const APFloat &f) { return f.isFiniteNonZero() && !f.isNegative(); };
      auto negInf = [](const APFloat &f) { return f.isInfinity() && f.isNegative(); };
      if (!isSplatConstant(factor, positive) || !isSplatConstant(select.getFalseValue(), negInf))
        continue;
      Value scaled = arith::MulFOp::create(rewriter, mul.getLoc(), select.getTrueValue(), factor,
                                           mul.getFastmathAttr());
      rewriter.replaceOpWithNewOp<arith::SelectOp>(mul, select.getCondition(), scaled,
                                                   select.getFalseValue());
      return success();
    }
    return failure();
  }
};

// mulf(mulf(x, splat a), splat b) → mulf(x, splat(a·b)).
struct MergeSplatMultiplies : OpRewritePattern<arith::MulFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::MulFOp outer, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(outer.getType());
    if (!type)
      return failure();
    for (unsigned i = 0; i < 2; ++i) {
      auto inner = outer->getOperand(i).getDefiningOp<arith::MulFOp>();
      if (!inner || !inner->hasOneUse())
        continue;
      for (unsigned j = 0; j < 2; ++j) {
        if (!isSplattedScalar(outer->getOperand(1 - i)) ||
            !isSplattedScalar(inner->getOperand(1 - j)))
          continue;
        OpBuilder::InsertionGuard guard(rewriter);
        rewriter.setInsertionPoint(outer);
        Value b = splattedScalar(rewriter, outer->getOperand(1 - i));
        Value a = splattedScalar(rewriter, inner->getOperand(1 - j));
        Value ab = arith::MulFOp::create(rewriter, outer.getLoc(), a, b);
        Value factor = SplatOp::create(rewriter, outer.getLoc(), type, ab);
        rewriter.replaceOpWithNewOp<arith::MulFOp>(outer, inner->getOperand(j), factor);
        return success();
      }
    }
    return failure();
  }
};

struct TileFoldSoftmaxScalePass
    : public tessel::tile::impl::TileFoldSoftmaxScaleBase<TileFoldSoftmaxScalePass> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<MulThroughMaskingSelect, MergeSplatMultiplies>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
