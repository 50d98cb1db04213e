//===- ScalarLowering.h - the scalar part shared by the GPU lowerings ----------------------===//
//
// Both lowerings of tile programs (convert-tile-to-gpu, convert-tile-to-mma) emit the scalar
// part of a program the same way: grid queries as i32, descriptors as i64 scalars, scalar
// arith/math cloned, exp/log through
// NVVM's approximate ex2/lg2 on f32. One copy here.
//
//===----------------------------------------------------------------------------------------===//
#ifndef TESSEL_CONVERSION_SCALARLOWERING_H
#define TESSEL_CONVERSION_SCALARLOWERING_H

#include "tile/IR/TileDialect.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "llvm/ADT/DenseMap.h"

#include <optional>

namespace tessel::conversion {

constexpr double kLog2E = 1.4426950408889634;
constexpr double kLn2 = 0.6931471805599453;

/// The page table of a paged descriptor, lowered: entry e is the i32 at element
/// `offset + e · stride` of `base` for 0 ≤ e < `length`; pages are [0, numPages) (i64 values).
struct LoweredPages {
  mlir::Value base, offset, length, stride, numPages;
  int64_t pageSize;
};

/// A tile.make_desc lowered to scalars: the base pointer, and i64 element offset, shape and
/// strides; a paged descriptor also its page table.
struct LoweredDesc {
  mlir::Value base, offset;
  llvm::SmallVector<mlir::Value> shape, strides;
  mlir::Type elementType;
  std::optional<LoweredPages> pages;
};
/// `op`'s descriptor from the lowered scalars its operands map to in `scalars` (and, for a
/// paged one, its page table's descriptor in `descs`).
LoweredDesc lowerMakeDesc(mlir::OpBuilder &b, tile::MakeDescOp op, const mlir::IRMapping &scalars,
                          const llvm::DenseMap<mlir::Value, LoweredDesc> &descs);
/// Row `row` (i64, ≥ 0) of a paged descriptor in its strided view, and whether it exists (its
/// table entry is inside the table and holds a page in [0, numPages)). The table is read only
/// where the entry exists.
std::pair<mlir::Value, mlir::Value> pagedRow(mlir::OpBuilder &b, mlir::Location loc,
                                             const LoweredPages &pages, mlir::Value row);
/// An index or integer as i64 (sign-extended).
mlir::Value toI64(mlir::OpBuilder &b, mlir::Location loc, mlir::Value v);
/// An f32 constant.
mlir::Value constF32(mlir::OpBuilder &b, mlir::Location loc, double v);
/// 2^x on f32 through ex2.approx (FlashAttention's choice); `ftz` flushes subnormals.
mlir::Value approxEx2(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x, bool ftz);
/// log2(x) on f32 through lg2.approx.
mlir::Value approxLg2(mlir::OpBuilder &b, mlir::Location loc, mlir::Value x);
/// tile.program_id / tile.num_programs as an i32 (block index / grid size); null for any other op.
mlir::Value emitGridQuery(mlir::OpBuilder &b, mlir::Operation *op);
/// tile.load_scalar of the lowered descriptor `d`: the element behind a bounds check, the
/// op's padding where an index is out of range (no memory is read then).
mlir::Value emitLoadScalar(mlir::OpBuilder &b, tile::LoadScalarOp op, const LoweredDesc &d,
                           const mlir::IRMapping &scalars);
/// A scalar arith/math op on already lowered `operands`: exp, exp2, log, log2 of f16/bf16/f32
/// through approxEx2/approxLg2 in f32; with `ftz` (the fast paths) an f32 tanh as
/// tanh.approx.f32; anything else cloned with its attributes.
llvm::SmallVector<mlir::Value> emitScalarOp(mlir::OpBuilder &b, mlir::Operation *op,
                                            mlir::ValueRange operands, mlir::TypeRange resultTypes,
                                            bool ftz);

/// `values` folded by `combine` as a balanced tree (pairs, then pairs of those, an odd one
/// carried up): shorter dependency chains than a left fold, so ptxas can combine each value
/// as soon as it exists instead of keeping them all alive for a serial chain.
mlir::Value balancedTree(llvm::SmallVector<mlir::Value> values,
                         llvm::function_ref<mlir::Value(mlir::Value, mlir::Value)> combine);

/// Inline PTX `text` (operands `$0`, `$1`, …; `constraints` comma-separated, outputs first) on
/// `operands`; its results of `results` (one as itself, several as a struct's fields). With
/// `sideEffects` LLVM neither moves nor removes it and keeps it in order with the memory
/// accesses around it.
llvm::SmallVector<mlir::Value> inlinePtx(mlir::OpBuilder &b, mlir::Location loc,
                                         mlir::TypeRange results, mlir::ValueRange operands,
                                         llvm::StringRef text, llvm::StringRef constraints,
                                         bool sideEffects = true);

/// `*ptr += value` as one relaxed atomic read-modify-write (fadd for floats, add for integers)
/// whose result is unused: tile.atomic_add's element on the reference and fast paths (PTX
/// atom.global.add, a RED in SASS).
void atomicAddAt(mlir::OpBuilder &b, mlir::Location loc, mlir::Value ptr, mlir::Value value);

} // namespace tessel::conversion

#endif // TESSEL_CONVERSION_SCALARLOWERING_H
