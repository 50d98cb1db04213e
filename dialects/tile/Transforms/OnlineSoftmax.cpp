//===- OnlineSoftmax.cpp - naive streamed softmax to online softmax -------===//
//
// The heart of tessel: attention written with a softmax over the whole key row becomes the
// one-pass FlashAttention recurrence with a running max and sum (see Passes.td for the maths).
// The pass first checks that the softmax is consumed by a sum over the streamed axis — the dot
// with V accumulated in a loop-carried value — and says why when it is not.
//
//===----------------------------------------------------------------------===//

#include "tile/IR/TileDialect.h"
#include "tile/Transforms/Passes.h"

#include "mlir/IR/PatternMatch.h"
#include "llvm/ADT/STLExtras.h"

#include <cmath>
#include <limits>

namespace tessel::tile {
#define GEN_PASS_DEF_TILEONLINESOFTMAX
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;
using namespace tessel::tile;

namespace {
constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

// How a streamed softmax is used, once it is proven legal.
struct StreamedSoftmaxUse {
  SoftmaxOp softmax;
  scf::ForOp loop;
  DotOp dot;                        // P·V: its A operand is (a cast of) the softmax result
  unsigned accIndex;                // iter_arg that the dot accumulates into
  SmallVector<unsigned> lseIndices; // iter_args whose yielded value is the softmax's lse
};

Value splatF32(OpBuilder &b, Location loc, RankedTensorType type, double value) {
  return arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(type, b.getFloatAttr(type.getElementType(), value)));
}

// Expands a per-row vector (M) to the M×N shape of a score tile.
Value rowsToTile(OpBuilder &b, Location loc, Value rows, RankedTensorType tileType) {
  auto rowType = cast<RankedTensorType>(rows.getType());
  auto colType = RankedTensorType::get({rowType.getDimSize(0), 1}, rowType.getElementType());
  Value col = ExpandDimsOp::create(b, loc, colType, rows, 1);
  return BroadcastOp::create(b, loc, tileType, col);
}

// Checks that the rewrite is legal; on refusal emits an error that says why.
FailureOr<StreamedSoftmaxUse> analyse(SoftmaxOp softmax) {
  StreamedSoftmaxUse use;
  use.softmax = softmax;
  use.loop = dyn_cast<scf::ForOp>(softmax->getParentOp());
  if (!use.loop)
    return softmax.emitOpError("is streamed but not directly in an scf.for"), failure();
  auto type = cast<RankedTensorType>(softmax.getInput().getType());
  if (type.getRank() != 2 || softmax.getAxis() != 1 || !type.getElementType().isF32())
    return softmax.emitOpError("cannot be streamed: the online rewrite handles an f32 score tile "
                               "normalised along axis 1 (rows are queries, columns are keys)"),
           failure();

  // The probabilities may pass through casts, then must be the A operand of one dot.
  Value p = softmax.getResult();
  while (p.hasOneUse() && isa<arith::TruncFOp, arith::ExtFOp>(*p.getUsers().begin()))
    p = p.getUsers().begin()->getResult(0);
  if (!p.hasOneUse())
    return softmax.emitOpError("cannot be made online: its result must flow only into one "
                               "tile.dot (the product with V), but it has ")
               << std::distance(p.getUses().begin(), p.getUses().end()) << " uses",
           failure();
  OpOperand &pUse = *p.getUses().begin();
  use.dot = dyn_cast<DotOp>(pUse.getOwner());
  if (!use.dot || pUse.getOperandNumber() != 0)
    return softmax.emitOpError("cannot be made online: its result is used by '")
               << pUse.getOwner()->getName()
               << "', but only the A operand of a tile.dot (a sum over the streamed axis) "
                  "can be rescaled block by block",
           failure();
  if (use.dot->getParentOp() != use.loop)
    return softmax.emitOpError("cannot be made online: the tile.dot it feeds is nested deeper "
                               "than the loop that streams it"),
           failure();

  // The dot must accumulate into a loop-carried value that nothing else reads or writes.
  auto acc = dyn_cast<BlockArgument>(use.dot.getAcc());
  if (!acc || acc.getOwner() != use.loop.getBody() || acc.getArgNumber() == 0)
    return use.dot.emitOpError("accumulates into a value that is not carried by the loop, so "
                               "the softmax it consumes cannot be made online"),
           failure();
  use.accIndex = acc.getArgNumber() - 1;
  auto yield = cast<scf::YieldOp>(use.loop.getBody()->getTerminator());
  if (!acc.hasOneUse() || !use.dot.getResult().hasOneUse() ||
      yield.getOperand(use.accIndex) != use.dot.getResult())
    return use.dot.emitOpError("must be the only reader of its loop-carried accumulator and "
                               "yield straight back into it for the online softmax rewrite"),
           failure();

  // The log-sum-exp may only leave the loop through otherwise unused carried values.
  for (OpOperand &lseUse : softmax.getLse().getUses()) {
    unsigned idx = lseUse.getOperandNumber();
    if (lseUse.getOwner() != yield.getOperation() || !use.loop.getRegionIterArgs()[idx].use_empty())
      return softmax.emitOpError("cannot be made online: its log-sum-exp is only known after the "
                                 "loop, so it may only be yielded into an unused loop-carried "
                                 "value, not used by '")
                 << lseUse.getOwner()->getName() << "'",
             failure();
    use.lseIndices.push_back(idx);
  }
  return use;
}

void rewrite(StreamedSoftmaxUse use) {
  SoftmaxOp softmax = use.softmax;
  Location loc = softmax.getLoc();
  IRRewriter rewriter(softmax.getContext());
  auto scoreType = cast<RankedTensorType>(softmax.getInput().getType());
  auto rowType = cast<RankedTensorType>(softmax.getLse().getType());
  const double inf = std::numeric_limits<double>::infinity();

  rewriter.setInsertionPoint(use.loop);
  Value m0 = splatF32(rewriter, loc, rowType, -inf);
  Value l0 = splatF32(rewriter, loc, rowType, 0.0);

  Value alpha;
  auto newLoopOr =
      cast<LoopLikeOpInterface>(use.loop.getOperation())
          .replaceWithAdditionalYields(
              rewriter, ValueRange{m0, l0}, /*replaceInitOperandUsesInLoop=*/false,
              [&](OpBuilder &b, Location, ArrayRef<BlockArgument> args) {
                // Built where the softmax was: the scores are known there.
                OpBuilder::InsertionGuard guard(b);
                b.setInsertionPoint(softmax);
                Value m = args[0], l = args[1];
                Value t = arith::MulFOp::create(b, loc, softmax.getInput(),
                                                splatF32(b, loc, scoreType, kLog2E));
                Value blockMax = ReduceOp::create(b, loc, rowType, ReduceKind::Max, t, 1);
                Value mNew = arith::MaximumFOp::create(b, loc, m, blockMax);
                // A row with nothing seen yet has m' = -inf: subtract 0 instead so
                // that exp2(-inf - -inf) never makes a NaN.
                Value noneSeen = arith::CmpFOp::create(b, loc, arith::CmpFPredicate::OEQ, mNew,
                                                       splatF32(b, loc, rowType, -inf));
                Value mSafe = arith::SelectOp::create(b, loc, noneSeen,
                                                      splatF32(b, loc, rowType, 0.0), mNew);
                alpha = math::Exp2Op::create(b, loc, arith::SubFOp::create(b, loc, m, mSafe));
                Value p = math::Exp2Op::create(
                    b, loc, arith::SubFOp::create(b, loc, t, rowsToTile(b, loc, mSafe, scoreType)));
                Value rowSum = ReduceOp::create(b, loc, rowType, ReduceKind::Sum, p, 1);
                Value lNew = arith::AddFOp::create(b, loc, arith::MulFOp::create(b, loc, l, alpha),
                                                   rowSum);
                softmax.getResult().replaceAllUsesWith(p);
                return SmallVector<Value>{mNew, lNew};
              });
  auto newLoop = cast<scf::ForOp>(newLoopOr->getOperation());
  unsigned numOld = newLoop.getNumResults() - 2;

  // Rescale the accumulator before this block's P·V is added.
  rewriter.setInsertionPoint(use.dot);
  auto accType = cast<RankedTensorType>(use.dot.getAcc().getType());
  Value scaledAcc = arith::MulFOp::create(rewriter, loc, use.dot.getAcc(),
                                          rowsToTile(rewriter, loc, alpha, accType));
  rewriter.modifyOpInPlace(use.dot, [&] { use.dot.getAccMutable().assign(scaledAcc); });

  // The lse leaves through its carried value unchanged; its real value is built after the loop.
  auto yield = cast<scf::YieldOp>(newLoop.getBody()->getTerminator());
  for (unsigned idx : use.lseIndices)
    rewriter.modifyOpInPlace(yield,
                             [&] { yield->setOperand(idx, newLoop.getRegionIterArgs()[idx]); });
  rewriter.eraseOp(softmax);

  // After the loop: O = acc / l (0 for fully masked rows), lse = (m + log2 l)·ln 2.
  rewriter.setInsertionPointAfter(newLoop);
  Value m = newLoop.getResult(numOld), l = newLoop.getResult(numOld + 1);
  Value empty = arith::CmpFOp::create(rewriter, loc, arith::CmpFPredicate::OEQ, l,
                                      splatF32(rewriter, loc, rowType, 0.0));
  Value lSafe = arith::SelectOp::create(rewriter, loc, empty, splatF32(rewriter, loc, rowType, 1.0),
                                        l);
  Value accOut = newLoop.getResult(use.accIndex);
  Value out = arith::DivFOp::create(rewriter, loc, accOut,
                                    rowsToTile(rewriter, loc, lSafe, accType));
  rewriter.replaceAllUsesExcept(accOut, out, out.getDefiningOp());
  if (!use.lseIndices.empty()) {
    Value lse = arith::MulFOp::create(
        rewriter, loc,
        arith::AddFOp::create(rewriter, loc, m, math::Log2Op::create(rewriter, loc, l)),
        splatF32(rewriter, loc, rowType, kLn2));
    for (unsigned idx : use.lseIndices)
      rewriter.replaceAllUsesWith(newLoop.getResult(idx), lse);
  }
}

struct TileOnlineSoftmaxPass
    : public tessel::tile::impl::TileOnlineSoftmaxBase<TileOnlineSoftmaxPass> {
  void runOnOperation() override {
    SmallVector<SoftmaxOp> streamed;
    getOperation().walk([&](SoftmaxOp op) {
      if (op.getStreamed())
        streamed.push_back(op);
    });
    // Two streamed softmaxes in one loop would each need the other's running state.
    llvm::SmallPtrSet<Operation *, 4> loops;
    for (SoftmaxOp op : streamed)
      if (!loops.insert(op->getParentOp()).second)
        return op.emitOpError("is the second streamed softmax in one loop; tessel streams one "
                              "softmax per loop"),
               signalPassFailure();
    for (SoftmaxOp op : streamed) {
      FailureOr<StreamedSoftmaxUse> use = analyse(op);
      if (failed(use))
        return signalPassFailure();
      rewrite(*use);
    }
  }
};
} // namespace
