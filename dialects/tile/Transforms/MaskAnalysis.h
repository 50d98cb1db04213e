//===- MaskAnalysis.h - masks as affine predicates on block indices -*- C++ -*-===//
//
// Attention masks are i1 tiles built from index arithmetic: q_idx = splat(start) + iota, compared
// with kv_idx. This analysis recognises such masks as conjunctions of signed comparisons of an
// affine index tile with zero, so that a pass can decide, per key block, whether the mask is
// all-true, all-false or mixed by interval arithmetic over the block's index ranges.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TILE_TRANSFORMS_MASKANALYSIS_H
#define TESSEL_TILE_TRANSFORMS_MASKANALYSIS_H

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/IR/Value.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <optional>
#include <vector>

namespace tessel::tile {

/// The attribute tile-split-masked-loops sets on the copies of a key loop it makes: "mixed"
/// (boundary blocks, the mask kept), "all_true" (no mask left) or "residual" (the conjuncts
/// it could not classify kept); and "mixed" on a loop it cannot split whose every block
/// evaluates its mask; tilegpu-fuse-masked-loops marks the loop it fuses them into
/// "guarded". Later passes (tilegpu-overlap-consumers) read it.
inline constexpr llvm::StringLiteral kBlockMaskAttr = "tile.block_mask";

/// Whether `op` is a copy tile-split-masked-loops marked `kind`.
inline bool hasBlockMaskKind(mlir::Operation *op, llvm::StringRef kind) {
  auto attr = op ? op->getAttrOfType<mlir::StringAttr>(kBlockMaskAttr) : mlir::StringAttr();
  return attr && attr.getValue() == kind;
}

/// constant + Σ coefficient · symbol, over scalar integer SSA values.
struct LinearExpr {
  int64_t constant = 0;
  llvm::MapVector<mlir::Value, int64_t> terms;

  LinearExpr scaled(int64_t factor) const;
  LinearExpr plus(const LinearExpr &other, int64_t otherFactor = 1) const;
  int64_t coefficientOf(mlir::Value symbol) const;
};

/// An integer tile whose element at (i_0, …, i_{r−1}) is base + Σ_k steps[k] · i_k.
struct IndexTile {
  LinearExpr base;
  llvm::SmallVector<int64_t> steps;
  llvm::SmallVector<int64_t> shape;

  /// Smallest and largest value of Σ_k steps[k]·i_k over the tile.
  int64_t minOffset() const;
  int64_t maxOffset() const;
};

/// `diff pred 0` for every element, with pred one of slt, sle, sgt, sge.
struct MaskAtom {
  IndexTile diff;
  mlir::arith::CmpIPredicate predicate;
};

/// A boolean combination of atoms: all-true, one atom, or the and / or of two masks.
struct AffineMask {
  enum class Kind { True, Atom, And, Or };
  Kind kind = Kind::True;
  MaskAtom atom;                    // Kind::Atom
  std::vector<AffineMask> operands; // Kind::And and Kind::Or: two masks

  static AffineMask ofAtom(MaskAtom atom);
  static AffineMask combine(Kind kind, AffineMask lhs, AffineMask rhs);
  /// Calls `fn` on every atom of the mask.
  void forEachAtom(llvm::function_ref<void(MaskAtom &)> fn);
  void forEachAtom(llvm::function_ref<void(const MaskAtom &)> fn) const;
};

/// Python's floor division x // c (c > 0) of an index tile x = Σ a_i·s_i + k + offset, with
/// offsets in [minOffset, maxOffset], as one value for the whole tile: with g = gcd(c, a_i),
/// x // c = (Σ (a_i / g)·s_i + constant) // (c / g) for every element and any scalars s_i.
/// None where the tile's offsets straddle a multiple of g (tile-fold-index-division).
struct UniformQuotient {
  int64_t g;
  int64_t constant;
};
std::optional<UniformQuotient> uniformFloorQuotient(llvm::ArrayRef<int64_t> coefficients, int64_t k,
                                                    int64_t minOffset, int64_t maxOffset,
                                                    int64_t c);

/// Python's `x // c` for a constant c > 0 as the DSL builds it (frontend.floor_divmod):
/// `select(remsi(x, c) < 0, divsi(x, c) − 1, divsi(x, c))`; {x, c}, or nullopt for another
/// value.
struct FloorDivision {
  mlir::Value dividend;
  int64_t divisor;
};
std::optional<FloorDivision> matchFloorDivision(mlir::Value v);

/// Whether `x // c` is the same over the tile (uniformFloorQuotient of x's IndexTile).
bool hasUniformFloorQuotient(mlir::Value x, int64_t c);

/// The scalar every element of `x // c` equals (uniformFloorQuotient), emitted at `b`'s
/// insertion point in the element type `type`; nullopt where the quotient differs across the
/// tile or x is no IndexTile.
std::optional<mlir::Value> emitUniformFloorQuotient(mlir::OpBuilder &b, mlir::Location loc,
                                                    mlir::Value x, int64_t c, mlir::Type type);

/// Decomposes a scalar integer into a linear expression; what cannot be decomposed is a symbol.
LinearExpr analyseScalar(mlir::Value scalar);
/// `e` as scalar arithmetic of `type` at `b`'s insertion point (symbols sign-extended, truncated
/// or index-cast to it).
mlir::Value emitLinear(mlir::OpBuilder &b, mlir::Location loc, const LinearExpr &e,
                       mlir::Type type);
/// Whether `v` is a constant tile of −inf: the other value of a masking select.
bool isNegInfSplat(mlir::Value v);
/// The integer every element of a tile equals, if it is a constant splat or a splat of a
/// constant.
std::optional<int64_t> splatConstantInt(mlir::Value tile);
/// Recognises an integer tile as an IndexTile, or returns nullopt.
std::optional<IndexTile> analyseIndexTile(mlir::Value tile);
/// Recognises an i1 tile as an AffineMask, or returns nullopt.
std::optional<AffineMask> analyseMask(mlir::Value mask);

} // namespace tessel::tile

#endif // TESSEL_TILE_TRANSFORMS_MASKANALYSIS_H
