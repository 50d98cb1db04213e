//===- TileOps.cpp - verifiers and folders of the tile ops ----------------===//
//
// What the ODS traits cannot say: shape relations between operands and results, axis ranges,
// and where a streamed softmax may sit.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/OpImplementation.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/IR/TypeUtilities.h"

#include <cmath>

using namespace mlir;
using namespace tessel::tile;

#define GET_OP_CLASSES
#include "tile/IR/TileOps.cpp.inc"

namespace {
// Prints a shape as 128x64 for diagnostics.
std::string shapeStr(ArrayRef<int64_t> shape) {
  std::string s;
  for (auto [i, d] : llvm::enumerate(shape))
    s += (i ? "x" : "") + std::to_string(d);
  return s;
}

// Checks that a load or store addresses as many axes as the descriptor has and that the tile
// has the descriptor's rank and element type.
LogicalResult verifyAccess(Operation *op, DescType desc, size_t numOffsets, RankedTensorType tile) {
  if (numOffsets != desc.getRank())
    return op->emitOpError() << "needs one offset per descriptor axis: expected " << desc.getRank()
                             << ", got " << numOffsets;
  if (tile.getRank() != desc.getRank())
    return op->emitOpError() << "tile rank " << tile.getRank() << " does not match descriptor rank "
                             << desc.getRank();
  if (tile.getElementType() != desc.getElementType())
    return op->emitOpError() << "tile element type " << tile.getElementType()
                             << " does not match descriptor element type " << desc.getElementType();
  return success();
}

// tile.store and tile.atomic_add: an access of the value's shape, a mask of the same shape.
template <typename WriteOp>
LogicalResult verifyWrite(WriteOp op) {
  auto valueType = cast<RankedTensorType>(op.getValue().getType());
  if (failed(verifyAccess(op, op.getDesc().getType(), op.getOffsets().size(), valueType)))
    return failure();
  if (op.getMask() &&
      cast<RankedTensorType>(op.getMask().getType()).getShape() != valueType.getShape())
    return op.emitOpError() << "mask shape "
                            << shapeStr(cast<RankedTensorType>(op.getMask().getType()).getShape())
                            << " does not match value shape " << shapeStr(valueType.getShape());
  return success();
}

LogicalResult verifyAxis(Operation *op, int64_t axis, int64_t rank) {
  if (axis >= rank)
    return op->emitOpError() << "axis " << axis << " is out of range for a tile of rank " << rank;
  return success();
}

SmallVector<int64_t> dropAxis(ArrayRef<int64_t> shape, int64_t axis) {
  SmallVector<int64_t> out(shape);
  out.erase(out.begin() + axis);
  return out;
}
} // namespace

LogicalResult MakeDescOp::verify() {
  DescType desc = getResult().getType();
  if (getBase().getType().getElementType() != desc.getElementType())
    return emitOpError() << "pointer element type " << getBase().getType().getElementType()
                         << " does not match descriptor element type " << desc.getElementType();
  if (getShape().size() != desc.getRank() || getStrides().size() != desc.getRank())
    return emitOpError() << "needs " << desc.getRank() << " sizes and " << desc.getRank()
                         << " strides for a rank-" << desc.getRank() << " descriptor, got "
                         << getShape().size() << " and " << getStrides().size();
  if (!getPages() && !getNumPages() && !getPageSize())
    return success();
  if (!getPages() || !getNumPages() || !getPageSize())
    return emitOpError() << "needs pages, num_pages and page_size together";
  if (desc.getRank() != 2)
    return emitOpError() << "is paged, which needs rank 2 (rows through the page table), not rank "
                         << desc.getRank();
  auto table = cast<DescType>(getPages().getType());
  if (table.getRank() != 1 || !table.getElementType().isInteger(32))
    return emitOpError() << "needs a rank-1 i32 descriptor of page numbers, not " << table;
  if (*getPageSize() <= 0)
    return emitOpError() << "needs a positive page_size, got " << *getPageSize();
  return success();
}

namespace {
/// Ops that read one element at a time do not take a paged descriptor (the lowerings address
/// only whole rows through a page table).
LogicalResult refusePaged(Operation *op, Value desc) {
  auto md = desc.getDefiningOp<MakeDescOp>();
  if (md && md.isPaged())
    return op->emitOpError() << "does not take a paged descriptor (tile.load, tile.store and "
                                "tile.atomic_add do)";
  return success();
}
} // namespace

LogicalResult LoadOp::verify() {
  return verifyAccess(*this, getDesc().getType(), getOffsets().size(), getResult().getType());
}

LogicalResult LoadScalarOp::verify() {
  DescType desc = getDesc().getType();
  if (getIndices().size() != desc.getRank())
    return emitOpError() << "needs one index per descriptor axis: expected " << desc.getRank()
                         << ", got " << getIndices().size();
  if (getResult().getType() != desc.getElementType())
    return emitOpError() << "result type " << getResult().getType()
                         << " does not match descriptor element type " << desc.getElementType();
  double pad = getPadding().convertToDouble();
  if (getResult().getType().isInteger(32) &&
      (!std::isfinite(pad) || pad != std::trunc(pad) || std::fabs(pad) > 2147483647.0))
    return emitOpError() << "pads an i32 with " << pad << ", which is not an i32 value";
  return refusePaged(*this, getDesc());
}

LogicalResult StoreOp::verify() { return verifyWrite(*this); }

LogicalResult AtomicAddOp::verify() { return verifyWrite(*this); }

LogicalResult DotOp::verify() {
  ArrayRef<int64_t> a = getA().getType().getShape(), b = getB().getType().getShape(),
                    c = getAcc().getType().getShape();
  if (a[1] != b[0])
    return emitOpError() << "contraction sizes differ: a is " << shapeStr(a) << ", b is "
                         << shapeStr(b);
  if (c[0] != a[0] || c[1] != b[1])
    return emitOpError() << "accumulator is " << shapeStr(c) << " but a·b is " << a[0] << "x"
                         << b[1];
  return success();
}

LogicalResult ReduceOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (in.getElementType() != out.getElementType())
    return emitOpError() << "result element type " << out.getElementType()
                         << " differs from input element type " << in.getElementType();
  if (in.getElementType().isInteger(1))
    return emitOpError() << "cannot reduce a mask (i1) tile";
  SmallVector<int64_t> expected = dropAxis(in.getShape(), getAxis());
  if (in.getRank() == 1 || out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "reducing " << shapeStr(in.getShape()) << " along axis " << getAxis()
                         << " gives "
                         << (in.getRank() == 1 ? "a scalar, which tiles cannot hold"
                                               : shapeStr(expected))
                         << ", not " << shapeStr(out.getShape());
  return success();
}

bool tessel::tile::isElementwiseOp(Operation *op) {
  if (isa<MulHiUIOp>(op))
    return true;
  Dialect *dialect = op->getDialect();
  return dialect && (dialect->getNamespace() == "arith" || dialect->getNamespace() == "math") &&
         op->getNumRegions() == 0;
}

LogicalResult ScanOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  if (in.getElementType().isInteger(1))
    return emitOpError() << "cannot scan a mask (i1) tile";
  return success();
}

LogicalResult ExpandDimsOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (getAxis() > in.getRank())
    return emitOpError() << "axis " << getAxis() << " is out of range for expanding a rank-"
                         << in.getRank() << " tile";
  SmallVector<int64_t> expected(in.getShape());
  expected.insert(expected.begin() + getAxis(), 1);
  if (out.getShape() != ArrayRef<int64_t>(expected))
    return emitOpError() << "expected result shape " << shapeStr(expected) << ", got "
                         << shapeStr(out.getShape());
  return success();
}

LogicalResult BroadcastOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto out = cast<RankedTensorType>(getResult().getType());
  if (in.getRank() != out.getRank())
    return emitOpError() << "input rank " << in.getRank() << " differs from result rank "
                         << out.getRank() << "; use tile.expand_dims first";
  for (auto [i, pair] : llvm::enumerate(llvm::zip(in.getShape(), out.getShape())))
    if (std::get<0>(pair) != std::get<1>(pair) && std::get<0>(pair) != 1)
      return emitOpError() << "axis " << i << " has size " << std::get<0>(pair)
                           << ", which broadcasts only to itself, not to " << std::get<1>(pair);
  return success();
}

// A splat constant keeps its value under reshaping: fold it to a constant of the new shape.
static OpFoldResult reshapeSplat(Attribute input, Type resultType) {
  if (auto dense = dyn_cast_if_present<SplatElementsAttr>(input))
    return DenseElementsAttr::get(cast<ShapedType>(resultType), dense.getSplatValue<Attribute>());
  return {};
}

OpFoldResult SplatOp::fold(FoldAdaptor adaptor) {
  if (auto value = dyn_cast_if_present<TypedAttr>(adaptor.getValue()))
    return DenseElementsAttr::get(getResult().getType(), value);
  return {};
}

OpFoldResult ExpandDimsOp::fold(FoldAdaptor adaptor) {
  return reshapeSplat(adaptor.getInput(), getResult().getType());
}

OpFoldResult BroadcastOp::fold(FoldAdaptor adaptor) {
  if (getInput().getType() == getResult().getType())
    return getInput();
  return reshapeSplat(adaptor.getInput(), getResult().getType());
}

LogicalResult TransOp::verify() {
  ArrayRef<int64_t> in = cast<RankedTensorType>(getInput().getType()).getShape();
  ArrayRef<int64_t> out = cast<RankedTensorType>(getResult().getType()).getShape();
  if (in[0] != out[1] || in[1] != out[0])
    return emitOpError() << "transposing " << shapeStr(in) << " gives " << in[1] << "x" << in[0]
                         << ", not " << shapeStr(out);
  return success();
}

LogicalResult SoftmaxOp::verify() {
  auto in = cast<RankedTensorType>(getInput().getType());
  auto lse = cast<RankedTensorType>(getLse().getType());
  if (failed(verifyAxis(*this, getAxis(), in.getRank())))
    return failure();
  SmallVector<int64_t> expected = dropAxis(in.getShape(), getAxis());
  if (in.getRank() < 2 || lse.getShape() != ArrayRef<int64_t>(expected) ||
      lse.getElementType() != in.getElementType())
    return emitOpError() << "log-sum-exp of " << shapeStr(in.getShape()) << " along axis "
                         << getAxis() << " must be "
                         << RankedTensorType::get(expected, in.getElementType());
  if (getStreamed()) {
    auto loop = dyn_cast<scf::ForOp>((*this)->getParentOp());
    if (!loop)
      return emitOpError() << "is streamed, so it must sit directly in the body of an scf.for "
                              "whose iterations walk along the softmax axis";
    // The row must be known before the loop runs: its input may not read loop-carried values.
    SmallVector<Value> work{getInput()};
    llvm::SmallPtrSet<Operation *, 16> seen;
    while (!work.empty()) {
      Value v = work.pop_back_val();
      if (auto arg = dyn_cast<BlockArgument>(v)) {
        if (arg.getOwner() == loop.getBody() && arg.getArgNumber() > 0)
          return emitOpError() << "is streamed, so its input may not depend on the loop-carried "
                                  "value #"
                               << arg.getArgNumber() - 1 << " of the enclosing scf.for";
        continue;
      }
      Operation *def = v.getDefiningOp();
      if (!def || !loop->isProperAncestor(def) || !seen.insert(def).second)
        continue;
      llvm::append_range(work, def->getOperands());
      def->walk([&](Operation *nested) { llvm::append_range(work, nested->getOperands()); });
    }
  }
  return success();
}

LogicalResult GatherOp::verify() {
  DescType desc = getDesc().getType();
  auto result = cast<RankedTensorType>(getResult().getType());
  if (getIndices().size() != desc.getRank())
    return emitOpError() << "needs one index per descriptor axis: expected " << desc.getRank()
                         << ", got " << getIndices().size();
  if (result.getElementType() != desc.getElementType())
    return emitOpError() << "result element type " << result.getElementType()
                         << " does not match descriptor element type " << desc.getElementType();
  for (auto [axis, index] : llvm::enumerate(getIndices()))
    if (auto tile = dyn_cast<RankedTensorType>(index.getType());
        tile && tile.getShape() != result.getShape())
      return emitOpError() << "index " << axis << " is a tile of shape "
                           << shapeStr(tile.getShape()) << "; index tiles have the result's shape "
                           << shapeStr(result.getShape());
  return refusePaged(*this, getDesc());
}

namespace {
// gather(d, [broadcast(x), s]) = broadcast(gather(d, [x, s])) when every index tile broadcasts
// from one shape: a document mask's `doc[b, q_idx]` reads a row vector once, not a whole tile.
// A splat index tile is its scalar. With scalar indices only, the gather is a splat of one
// load_scalar (a block table's `blocks[q_idx // G, kv_idx // G]` once
// tile-fold-index-division made the quotients scalars).
struct GatherOfBroadcasts : OpRewritePattern<GatherOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(GatherOp op, PatternRewriter &rewriter) const override {
    auto type = cast<RankedTensorType>(op.getResult().getType());
    RankedTensorType from;
    SmallVector<Value> indices;
    for (Value index : op.getIndices()) {
      if (!isa<RankedTensorType>(index.getType())) {
        indices.push_back(index);
        continue;
      }
      if (auto splat = index.getDefiningOp<SplatOp>()) {
        indices.push_back(splat.getValue());
        continue;
      }
      auto bc = index.getDefiningOp<BroadcastOp>();
      if (!bc)
        return failure();
      auto inType = cast<RankedTensorType>(bc.getInput().getType());
      if (from && inType.getShape() != from.getShape())
        return failure();
      from = inType;
      indices.push_back(bc.getInput());
    }
    if (!from) {
      // Every index a scalar (`slopes[h]`): one element, read once.
      Value one = LoadScalarOp::create(rewriter, op.getLoc(), type.getElementType(), op.getDesc(),
                                       indices, op.getPaddingAttr());
      rewriter.replaceOpWithNewOp<SplatOp>(op, type, one);
      return success();
    }
    auto small = RankedTensorType::get(from.getShape(), type.getElementType());
    auto gather = GatherOp::create(rewriter, op.getLoc(), small, op.getDesc(), indices,
                                   op.getPaddingAttr());
    rewriter.replaceOpWithNewOp<BroadcastOp>(op, type, gather.getResult());
    return success();
  }
};

// broadcast(expand_dims*(splat(x))) = splat(x): what a scalar-indexed gather leaves behind.
struct BroadcastOfSplat : OpRewritePattern<BroadcastOp> {
  using OpRewritePattern::OpRewritePattern;

  LogicalResult matchAndRewrite(BroadcastOp op, PatternRewriter &rewriter) const override {
    Value input = op.getInput();
    while (auto ed = input.getDefiningOp<ExpandDimsOp>())
      input = ed.getInput();
    auto splat = input.getDefiningOp<SplatOp>();
    if (!splat)
      return failure();
    rewriter.replaceOpWithNewOp<SplatOp>(op, op.getResult().getType(), splat.getValue());
    return success();
  }
};
} // namespace

void BroadcastOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<BroadcastOfSplat>(context);
}

void GatherOp::getCanonicalizationPatterns(RewritePatternSet &results, MLIRContext *context) {
  results.add<GatherOfBroadcasts>(context);
}
