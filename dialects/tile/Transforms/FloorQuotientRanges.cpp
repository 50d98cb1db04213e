//===- FloorQuotientRanges.cpp - compares of floor quotients as index ranges ----------===//
//
// Chunked local attention (Llama 4; FlashAttention-3's attention_chunk) masks with
// `q_idx // C == kv_idx // C`: a floor division is no affine index, so tile-split-masked-loops
// kept the mask element-wise and every key block of a row ran. Where one side's quotient is
// the same over the tile (the query block lies in one chunk: C a multiple of BLOCK_M), it is a
// scalar s, and `x // c == s` is `c·s <= x < c·s + c`: two affine atoms the split classifies,
// so the key loop visits the chunk's blocks only. The other orders likewise (x // c < s is
// x < c·s, ...). Exact for integers; the index arithmetic is assumed not to wrap.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/MaskAnalysis.h"
#include "tile/Transforms/Passes.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessel::tile {
#define GEN_PASS_DEF_TILEFLOORQUOTIENTRANGES
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;
using namespace tessel::tile;

namespace {

using P = arith::CmpIPredicate;

// `x // c pred y` with y an index tile (a splat of a scalar, or another floor division whose
// quotient is the same over the tile) rewritten on x: eq and ne as a range of x, the orders as
// one bound.
struct FloorQuotientCompare : OpRewritePattern<arith::CmpIOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(arith::CmpIOp op, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(op.getLhs().getType());
    if (!type)
      return failure();
    P pred = op.getPredicate();
    if (!llvm::is_contained({P::eq, P::ne, P::slt, P::sle, P::sgt, P::sge}, pred))
      return failure();
    Value lhs = op.getLhs(), rhs = op.getRhs();
    std::optional<FloorDivision> div = matchFloorDivision(lhs);
    if (!div || !bound(rhs)) { // the quotient to range over on the right: swap the sides
      std::swap(lhs, rhs);
      pred = swapped(pred);
      div = matchFloorDivision(lhs);
      if (!div)
        return failure();
    }
    Location loc = op.getLoc();
    Type element = type.getElementType();
    Value s = rhs;
    if (std::optional<FloorDivision> other = matchFloorDivision(rhs)) {
      // The quotient and its bounds before the loops it does not vary in: the split computes
      // its bounds before the key loop, from values defined outside it.
      std::optional<IndexTile> tile = analyseIndexTile(other->dividend);
      if (!tile)
        return failure();
      OpBuilder::InsertionGuard guard(rewriter);
      rewriter.setInsertionPoint(outsideLoops(op, tile->base));
      std::optional<Value> scalar = emitUniformFloorQuotient(rewriter, loc, other->dividend,
                                                             other->divisor, element);
      if (!scalar)
        return failure();
      s = SplatOp::create(rewriter, loc, type, *scalar);
    } else if (!analyseIndexTile(rhs)) {
      return failure();
    }
    auto constant = [&](int64_t v) {
      return arith::ConstantOp::create(
          rewriter, loc, DenseElementsAttr::get(type, rewriter.getIntegerAttr(element, v)));
    };
    Value x = div->dividend;
    Value low = arith::MulIOp::create(rewriter, loc, s, constant(div->divisor)); // c·s
    Value high = arith::AddIOp::create(rewriter, loc, low, constant(div->divisor));
    auto cmp = [&](P p, Value bound) { return arith::CmpIOp::create(rewriter, loc, p, x, bound); };
    Value result;
    switch (pred) {
    case P::eq:
      result = arith::AndIOp::create(rewriter, loc, cmp(P::sge, low), cmp(P::slt, high));
      break;
    case P::ne:
      result = arith::OrIOp::create(rewriter, loc, cmp(P::slt, low), cmp(P::sge, high));
      break;
    case P::slt: result = cmp(P::slt, low); break;  // x // c < s   ⇔ x < c·s
    case P::sle: result = cmp(P::slt, high); break; // x // c <= s  ⇔ x < c·s + c
    case P::sgt: result = cmp(P::sge, high); break; // x // c > s   ⇔ x >= c·s + c
    case P::sge: result = cmp(P::sge, low); break;  // x // c >= s  ⇔ x >= c·s
    default: return failure();
    }
    rewriter.replaceOp(op, result);
    return success();
  }

  // Whether v can stand on the right: not a floor division whose quotient differs across the
  // tile (then the other side is tried).
  static bool bound(Value v) {
    std::optional<FloorDivision> d = matchFloorDivision(v);
    return !d || hasUniformFloorQuotient(d->dividend, d->divisor);
  }

  // The outermost op around `op` (itself, or an enclosing scf.for) before which every symbol
  // of `e` is defined.
  static Operation *outsideLoops(Operation *op, const LinearExpr &e) {
    Operation *at = op;
    for (auto loop = op->getParentOfType<scf::ForOp>(); loop;
         loop = loop->getParentOfType<scf::ForOp>()) {
      if (!llvm::all_of(e.terms,
                        [&](auto term) { return loop.isDefinedOutsideOfLoop(term.first); }))
        break;
      at = loop;
    }
    return at;
  }

  static P swapped(P p) {
    switch (p) {
    case P::slt: return P::sgt;
    case P::sle: return P::sge;
    case P::sgt: return P::slt;
    case P::sge: return P::sle;
    default: return p; // eq, ne
    }
  }
};

struct TileFloorQuotientRanges
    : tessel::tile::impl::TileFloorQuotientRangesBase<TileFloorQuotientRanges> {
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<FloorQuotientCompare>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};

} // namespace
