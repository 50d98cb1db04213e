//===- TestElementwiseGrad.cpp - lit access to buildElementwiseGrad -------===//
//
// The derivative of a score_mod is built by the Python front end while it traces a backward
// kernel (tl.elementwise_grad). This pass makes the same C++ step reachable from tessel-opt, so
// lit can show what it builds and what it refuses: a function marked `tile.test_elementwise_grad`
// gets ∂(first result)/∂(first argument) as an extra result.
//
//===----------------------------------------------------------------------===//

#include "tile/Transforms/ElementwiseGrad.h"
#include "tile/Transforms/Passes.h"

namespace tessel::tile {
#define GEN_PASS_DEF_TILETESTELEMENTWISEGRAD
#include "tile/Transforms/Passes.h.inc"
} // namespace tessel::tile

using namespace mlir;

namespace {
struct TileTestElementwiseGradPass
    : public tessel::tile::impl::TileTestElementwiseGradBase<TileTestElementwiseGradPass> {
  void runOnOperation() override {
    func::FuncOp fn = getOperation();
    if (!fn->hasAttr("tile.test_elementwise_grad") || fn.isExternal())
      return;
    auto ret = cast<func::ReturnOp>(fn.getBody().front().getTerminator());
    if (fn.getNumArguments() == 0 || ret.getNumOperands() == 0) {
      fn.emitError("tile.test_elementwise_grad needs an argument and a result");
      return signalPassFailure();
    }
    OpBuilder b(ret);
    FailureOr<Value> grad = tessel::tile::buildElementwiseGrad(b, ret.getLoc(), ret.getOperand(0),
                                                               fn.getArgument(0));
    if (failed(grad))
      return signalPassFailure();
    ret.getOperandsMutable().append(*grad);
    SmallVector<Type> results(fn.getResultTypes());
    results.push_back(grad->getType());
    fn.setType(FunctionType::get(fn.getContext(), fn.getArgumentTypes(), results));
    fn->removeAttr("tile.test_elementwise_grad");
  }
};
} // namespace
