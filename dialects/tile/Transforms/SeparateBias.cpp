//===- SeparateBias.cpp - index biases per row and per column, not per element ===//
//
// A score_mod such as ALiBi, `score + slope · (kv_idx − q_idx)`, adds to every score a float
// made from index arithmetic: per element an integer subtract, a conversion (the SM's slow
// conversion pipe, shared with exp2), a multiply and an add, before the online softmax's own
// multiply. Such a bias is `row(i) + col(j)`; these patterns compute each part once per row
// and once per column, fold the column part into the score (one FFMA after lowering) and let
// the row part bypass the softmax entirely (a row constant shifts max and exponent alike).
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/MaskAnalysis.h"
#include "tile/Transforms/Passes.h"

#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"

namespace tessel::tile {
#define GEN_PASS_DEF_TILESEPARATEBIAS
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;
using namespace tessel::tile;

namespace {
// A 2-D tile that is a 1-D vector repeated along one axis: broadcast(expand_dims(vec, axis)).
// `axis` is the expanded one, along which the tile is constant (1: a per-row value).
struct Spread {
  Value vec;
  unsigned axis;
};

std::optional<Spread> matchSpread(Value v) {
  auto bcast = v.getDefiningOp<BroadcastOp>();
  auto type = dyn_cast<RankedTensorType>(v.getType());
  if (!bcast || !type || type.getRank() != 2)
    return std::nullopt;
  auto expand = bcast.getInput().getDefiningOp<ExpandDimsOp>();
  if (!expand || cast<RankedTensorType>(expand.getInput().getType()).getRank() != 1)
    return std::nullopt;
  return Spread{expand.getInput(), expand.getAxis()};
}

Value spread(OpBuilder &b, Location loc, Value vec, unsigned axis, RankedTensorType type) {
  auto vecType = cast<RankedTensorType>(vec.getType());
  SmallVector<int64_t> shape{vecType.getDimSize(0)};
  shape.insert(shape.begin() + axis, 1);
  Value expanded = ExpandDimsOp::create(
      b, loc, RankedTensorType::get(shape, vecType.getElementType()), vec, axis);
  return BroadcastOp::create(b, loc, type.clone(vecType.getElementType()), expanded);
}

// Whether every element of `v` is one scalar (tile.splat or a splat constant); if so, that
// scalar as a 1-D tile of `length` (a splat of the same scalar or a constant).
Value asVectorSplat(OpBuilder &b, Location loc, Value v, int64_t length) {
  auto type = cast<RankedTensorType>(v.getType());
  auto vecType = RankedTensorType::get({length}, type.getElementType());
  if (auto splat = v.getDefiningOp<SplatOp>())
    return SplatOp::create(b, loc, vecType, splat.getValue());
  DenseElementsAttr dense;
  if (matchPattern(v, m_Constant(&dense)) && dense.isSplat())
    return arith::ConstantOp::create(b, loc, dense.resizeSplat(vecType));
  return {};
}

bool isSplat(Value v) {
  DenseElementsAttr dense;
  return v.getDefiningOp<SplatOp>() || (matchPattern(v, m_Constant(&dense)) && dense.isSplat());
}

// `start + step · iota` as a 1-D i32-like tile of `length`.
Value emitRamp(OpBuilder &b, Location loc, Value start, int64_t step, int64_t length) {
  auto type = RankedTensorType::get({length}, start.getType());
  Value ramp = IotaOp::create(b, loc, type);
  if (step != 1)
    ramp = arith::MulIOp::create(
        b, loc, ramp,
        arith::ConstantOp::create(
            b, loc, DenseElementsAttr::get(type, b.getIntegerAttr(start.getType(), step))));
  return arith::AddIOp::create(b, loc, ramp, SplatOp::create(b, loc, type, start));
}

// sitofp(e) with e(i, j) = base + a·i + c·j → sitofp(base + a·i) per row + sitofp(c·j) per column.
// Exact while the parts and their sum stay below 2^24 in magnitude (the f32 integers): for index
// differences that means sequences of up to 16M positions. The column part is independent of
// the loop, so it is computed once; the loop's variables all go to the row part.
struct SeparateIndexConversion : OpRewritePattern<arith::SIToFPOp> {
  SeparateIndexConversion(MLIRContext *ctx, int64_t minRows)
      : OpRewritePattern(ctx), minRows(minRows) {}
  LogicalResult matchAndRewrite(arith::SIToFPOp conv, PatternRewriter &rewriter) const override {
    auto type = dyn_cast<RankedTensorType>(conv.getType());
    if (!type || type.getRank() != 2 || type.getDimSize(0) < minRows || matchSpread(conv.getIn()) ||
        isSplat(conv.getIn()))
      return failure();
    std::optional<IndexTile> index = analyseIndexTile(conv.getIn());
    if (!index || (index->steps[0] == 0 && index->steps[1] == 0))
      return failure();
    Location loc = conv.getLoc();
    Type intType = cast<RankedTensorType>(conv.getIn().getType()).getElementType();
    Value base = emitLinear(rewriter, loc, index->base, intType);
    Value zero = arith::ConstantOp::create(rewriter, loc, rewriter.getIntegerAttr(intType, 0));
    auto part = [&](unsigned dim, Value start) {
      Value ramp = emitRamp(rewriter, loc, start, index->steps[dim], type.getDimSize(dim));
      Value vec = arith::SIToFPOp::create(
          rewriter, loc, RankedTensorType::get({type.getDimSize(dim)}, type.getElementType()),
          ramp);
      return spread(rewriter, loc, vec, /*axis=*/1 - dim, type);
    };
    if (index->steps[1] == 0) {
      rewriter.replaceOp(conv, part(0, base));
      return success();
    }
    if (index->steps[0] == 0) {
      rewriter.replaceOp(conv, part(1, base));
      return success();
    }
    rewriter.replaceOpWithNewOp<arith::AddFOp>(conv, part(1, zero), part(0, base));
    return success();
  }

  int64_t minRows;
};

// A float element-wise op whose tile operands are all spread along one axis (or splats):
// computed on the vectors, then spread. Masks and integers are left to the mask analysis.
struct ComputeOnVectors : RewritePattern {
  ComputeOnVectors(MLIRContext *ctx) : RewritePattern(MatchAnyOpTypeTag(), 1, ctx) {}
  LogicalResult matchAndRewrite(Operation *op, PatternRewriter &rewriter) const override {
    if (!op->hasTrait<OpTrait::Elementwise>() || op->getNumResults() != 1 ||
        op->getNumRegions() != 0 || !isa<arith::ArithDialect>(op->getDialect()))
      return failure();
    auto type = dyn_cast<RankedTensorType>(op->getResult(0).getType());
    if (!type || type.getRank() != 2 || !isa<FloatType>(type.getElementType()))
      return failure();
    std::optional<unsigned> axis;
    for (Value operand : op->getOperands()) {
      if (std::optional<Spread> s = matchSpread(operand)) {
        if (axis && *axis != s->axis)
          return failure();
        axis = s->axis;
      } else if (!isSplat(operand)) {
        return failure();
      }
    }
    if (!axis)
      return failure();
    int64_t length = type.getDimSize(1 - *axis);
    SmallVector<Value> vecs;
    for (Value operand : op->getOperands())
      vecs.push_back(matchSpread(operand) ? matchSpread(operand)->vec
                                          : asVectorSplat(rewriter, op->getLoc(), operand, length));
    OperationState state(op->getLoc(), op->getName(), vecs,
                         RankedTensorType::get({length}, type.getElementType()), op->getAttrs());
    Operation *vecOp = rewriter.create(state);
    rewriter.replaceOp(op, spread(rewriter, op->getLoc(), vecOp->getResult(0), *axis, type));
    return success();
  }
};

// x − (p + q) → x + (−p + −q) for spread p, q (exact), so that a separated bias subtracted from
// the score reaches the patterns below as a sum. A single spread subtrahend stays: it is the
// softmax's row max.
struct SubtractAsAdd : OpRewritePattern<arith::SubFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::SubFOp sub, PatternRewriter &rewriter) const override {
    auto add = sub.getRhs().getDefiningOp<arith::AddFOp>();
    if (!isa<RankedTensorType>(sub.getType()) || matchSpread(sub.getLhs()) || !add ||
        !add->hasOneUse() || !matchSpread(add.getLhs()) || !matchSpread(add.getRhs()))
      return failure();
    Location loc = sub.getLoc();
    Value neg = arith::AddFOp::create(rewriter, loc,
                                      arith::NegFOp::create(rewriter, loc, add.getLhs()),
                                      arith::NegFOp::create(rewriter, loc, add.getRhs()));
    rewriter.replaceOpWithNewOp<arith::AddFOp>(sub, sub.getLhs(), neg);
    return success();
  }
};

// Sums of a tile x and spread vectors in the order ((x + columns) + rows): the column part joins
// the score, the row part stays outermost for the softmax patterns.
//   x + (p + q)          → (x + p) + q   (p, q spread; p the column part)
//   (x + row) + column   → (x + column) + row
struct OrderBiasSum : OpRewritePattern<arith::AddFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::AddFOp add, PatternRewriter &rewriter) const override {
    if (!isa<RankedTensorType>(add.getType()))
      return failure();
    for (unsigned i = 0; i < 2; ++i) {
      Value x = add->getOperand(i), other = add->getOperand(1 - i);
      if (matchSpread(x))
        continue;
      auto inner = other.getDefiningOp<arith::AddFOp>();
      if (inner && inner->hasOneUse()) {
        std::optional<Spread> p = matchSpread(inner.getLhs()), q = matchSpread(inner.getRhs());
        if (p && q && p->axis != q->axis) {
          Value col = p->axis == 0 ? inner.getLhs() : inner.getRhs();
          Value row = p->axis == 0 ? inner.getRhs() : inner.getLhs();
          Value xc = arith::AddFOp::create(rewriter, add.getLoc(), x, col);
          rewriter.replaceOpWithNewOp<arith::AddFOp>(add, xc, row);
          return success();
        }
      }
      std::optional<Spread> col = matchSpread(other);
      auto xr = x.getDefiningOp<arith::AddFOp>();
      if (col && col->axis == 0 && xr && xr->hasOneUse()) {
        for (unsigned j = 0; j < 2; ++j) {
          std::optional<Spread> row = matchSpread(xr->getOperand(j));
          if (!row || row->axis != 1 || matchSpread(xr->getOperand(1 - j)))
            continue;
          Value xc = arith::AddFOp::create(rewriter, add.getLoc(), xr->getOperand(1 - j), other);
          rewriter.replaceOpWithNewOp<arith::AddFOp>(add, xc, xr->getOperand(j));
          return success();
        }
      }
    }
    return failure();
  }
};

// (x + spread(v)) · k → x·k + spread(v)·k for a splat k (and / k likewise): the softmax's
// log2(e) multiply moves to the score (where it merges with the scale) and to the vector; a
// bias's own factor (ALiBi's slope) to its row and column parts.
template <typename ScaleOp>
struct DistributeScale : OpRewritePattern<ScaleOp> {
  using OpRewritePattern<ScaleOp>::OpRewritePattern;
  LogicalResult matchAndRewrite(ScaleOp op, PatternRewriter &rewriter) const override {
    if (!isa<RankedTensorType>(op.getType()))
      return failure();
    // A product either way round; a quotient only with the sum as the dividend.
    constexpr unsigned sides = std::is_same_v<ScaleOp, arith::MulFOp> ? 2 : 1;
    for (unsigned i = 0; i < sides; ++i) {
      auto add = op->getOperand(i).template getDefiningOp<arith::AddFOp>();
      Value k = op->getOperand(1 - i);
      if (!add || !add->hasOneUse() || !isSplat(k))
        continue;
      for (unsigned j = 0; j < 2; ++j) {
        if (!matchSpread(add->getOperand(j)))
          continue;
        Location loc = op.getLoc();
        Value x = ScaleOp::create(rewriter, loc, add->getOperand(1 - j), k);
        Value v = ScaleOp::create(rewriter, loc, add->getOperand(j), k);
        rewriter.replaceOpWithNewOp<arith::AddFOp>(op, x, v);
        return success();
      }
    }
    return failure();
  }
};

// The value a spread vector is added to, when `v` is `u + spread(r)` with r constant along
// `axis` (operand order either way).
std::optional<std::pair<Value, Value>> splitSpreadSum(Value v, unsigned axis) {
  auto add = v.getDefiningOp<arith::AddFOp>();
  if (!add)
    return std::nullopt;
  for (unsigned j = 0; j < 2; ++j) {
    std::optional<Spread> s = matchSpread(add->getOperand(j));
    if (s && s->axis == axis && !matchSpread(add->getOperand(1 - j)))
      return std::make_pair(add->getOperand(1 - j), add->getOperand(j));
  }
  return std::nullopt;
}

// max/min over an axis of u + spread(r), r constant along it → (max u) + r. Exact: rounding is
// monotone, so the largest rounded sum is the rounded sum with the largest u.
struct ReduceAroundConstant : OpRewritePattern<ReduceOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(ReduceOp reduce, PatternRewriter &rewriter) const override {
    if (reduce.getKind() == ReduceKind::Sum)
      return failure();
    auto sum = splitSpreadSum(reduce.getInput(), reduce.getAxis());
    if (!sum)
      return failure();
    Value inner = ReduceOp::create(rewriter, reduce.getLoc(), reduce.getType(),
                                   reduce.getKindAttr(), sum->first, reduce.getAxisAttr());
    rewriter.replaceOpWithNewOp<arith::AddFOp>(reduce, inner, matchSpread(sum->second)->vec);
    return success();
  }
};

// select(c, u + spread(r), −inf) → select(c, u, −inf) + spread(r): −inf + r = −inf (r finite).
struct MaskAroundConstant : OpRewritePattern<arith::SelectOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::SelectOp select, PatternRewriter &rewriter) const override {
    if (!isNegInfSplat(select.getFalseValue()))
      return failure();
    for (unsigned axis = 0; axis < 2; ++axis) {
      auto sum = splitSpreadSum(select.getTrueValue(), axis);
      if (!sum)
        continue;
      Value masked = arith::SelectOp::create(rewriter, select.getLoc(), select.getCondition(),
                                             sum->first, select.getFalseValue());
      rewriter.replaceOpWithNewOp<arith::AddFOp>(select, masked, sum->second);
      return success();
    }
    return failure();
  }
};

// (u + spread(r)) − spread(m) → u − spread(m − r), both constant along one axis: the online
// softmax's exponent t − m without the per-element add of r.
struct ShiftAroundConstant : OpRewritePattern<arith::SubFOp> {
  using OpRewritePattern::OpRewritePattern;
  LogicalResult matchAndRewrite(arith::SubFOp sub, PatternRewriter &rewriter) const override {
    std::optional<Spread> m = matchSpread(sub.getRhs());
    if (!m)
      return failure();
    auto sum = splitSpreadSum(sub.getLhs(), m->axis);
    if (!sum)
      return failure();
    Location loc = sub.getLoc();
    Value shift = arith::SubFOp::create(rewriter, loc, m->vec, matchSpread(sum->second)->vec);
    rewriter.replaceOpWithNewOp<arith::SubFOp>(
        sub, sum->first,
        spread(rewriter, loc, shift, m->axis, cast<RankedTensorType>(sub.getType())));
    return success();
  }
};

struct TileSeparateBiasPass
    : public tessel::tile::impl::TileSeparateBiasBase<TileSeparateBiasPass> {
  using Base::Base;
  void runOnOperation() override {
    RewritePatternSet patterns(&getContext());
    patterns.add<SeparateIndexConversion>(&getContext(), minRows);
    patterns.add<ComputeOnVectors, SubtractAsAdd, OrderBiasSum, DistributeScale<arith::MulFOp>,
                 DistributeScale<arith::DivFOp>, ReduceAroundConstant, MaskAroundConstant,
                 ShiftAroundConstant>(&getContext());
    if (failed(applyPatternsGreedily(getOperation(), std::move(patterns))))
      signalPassFailure();
  }
};
} // namespace
