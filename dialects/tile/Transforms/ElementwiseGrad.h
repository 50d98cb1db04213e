//===- ElementwiseGrad.h - derivatives of element-wise tile code -*- C++ -*-===//
//
// The chain rule of the attention backward goes through the user's score_mod: dS_raw = dS ·
// ∂mod/∂s. A score_mod is element-wise code on the score tile (arith and math ops on tensors,
// plus index arithmetic and selects that do not depend on the score), so its Jacobian is diagonal
// and forward-mode differentiation with the seed 1 gives it as one tile. This builds that tile as
// new ops, from the ops between the score and the score_mod's result.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_TRANSFORMS_ELEMENTWISEGRAD_H
#define TESSEL_TILE_TRANSFORMS_ELEMENTWISEGRAD_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "mlir/Support/LLVM.h"

namespace tessel::tile {

/// Builds, at `builder`'s insertion point, the element-wise derivative ∂y/∂x: a tile of y's type
/// whose element i is the derivative of y_i with respect to x_i, where y is computed from the
/// float tile x by element-wise ops (forward mode, seeded with 1). The insertion point must be
/// dominated by y. Values that do not depend on x have derivative 0; integer and boolean values
/// (compares, fptosi) are piecewise constant and have derivative 0 too.
///
/// Differentiated: arith addf subf mulf divf negf maximumf minimumf maxnumf minnumf select extf
/// truncf, math exp exp2 log log2 sqrt rsqrt tanh absf powf. Any other op on a path from x to y
/// (e.g. tile.reduce or tile.trans, which mix elements, or math.sin) is refused with an error at
/// that op's location and a note at `loc`; the function then returns failure.
mlir::FailureOr<mlir::Value> buildElementwiseGrad(mlir::OpBuilder &builder, mlir::Location loc,
                                                  mlir::Value y, mlir::Value x);

} // namespace tessel::tile

#endif // TESSEL_TILE_TRANSFORMS_ELEMENTWISEGRAD_H
