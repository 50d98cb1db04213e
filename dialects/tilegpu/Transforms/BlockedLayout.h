//===- BlockedLayout.h - the row-blocked layout of programs without dots -*- C++ -*-===//
//
// Which tile programs take the row-blocked register path (element-wise ops, loads, stores and
// row reductions: softmax, layer norm, fused element-wise chains), the layout it gives them
// (`#tilegpu.blocked` and its row and column slices) and the numbers the lowering derives from
// it. tilegpu-assign-blocked writes the layouts on the types; convert-tile-to-blocked reads
// them back (layoutOf), so the decision is made once, in IR, where lit can see it.
//
//===------------------------------------------------------------------------------------===//

#ifndef TESSEL_TILEGPU_TRANSFORMS_BLOCKEDLAYOUT_H
#define TESSEL_TILEGPU_TRANSFORMS_BLOCKEDLAYOUT_H

#include "tilegpu/IR/TileGPUDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <algorithm>
#include <optional>

namespace tessel::tilegpu {

/// How a tile is spread over the threads: the whole [R, C] block (#tilegpu.blocked: Tile), a
/// value per row ([R] or [R, 1], its dim-1 slice: Row) or per column ([C] or [1, C], its dim-0
/// slice: Col).
enum class BlockedKind { Tile = 0, Row = 1, Col = 2 };

/// A program's blocked layout over its [R, C] block (docs/dev/codegen-blocked.md): a row split
/// over `threadsPerRow` threads in vectors of `vector` elements, `rowsPerPass` rows side by
/// side, `rowSlots` passes down the block and `colChunks` vectors a thread along a row. When
/// R < rowsPerPass the extra threads repeat rows (row tr mod R) and store nothing.
struct RowsLayout {
  int64_t rows = 1, cols = 1, threads = 128, vector = 1;
  int64_t threadsPerRow = 1, rowsPerPass = 1, rowSlots = 1, colChunks = 1;
  /// f32 elements of shared memory a cross-warp row reduction exchanges (0: none needed).
  int64_t scratch = 0;

  /// Registers a thread holds of a tile in `k`.
  int64_t count(BlockedKind k) const {
    switch (k) {
    case BlockedKind::Tile: return rowSlots * colChunks * vector;
    case BlockedKind::Row: return rowSlots;
    case BlockedKind::Col: return colChunks * vector;
    }
    return 0;
  }
  /// Groups of warps that hold other rows of the same columns (what a column reduction
  /// combines through shared memory after its shuffles): one unless rows sit side by side
  /// across warps.
  int64_t columnGroups() const {
    int64_t warps = std::max<int64_t>(1, threads / 32);
    return warps / std::max<int64_t>(1, threadsPerRow / 32);
  }
  /// Tile register (s, j, e).
  int64_t tileIndex(int64_t s, int64_t j, int64_t e) const {
    return (s * colChunks + j) * vector + e;
  }
};

/// The layout of `program` over `threads` threads, or the reason (located) it is outside the
/// class: a dot, a transpose, a gather, a softmax op, tiles inside regions, tiles of rank > 2
/// or of more than one block shape, reductions other than of 2-D f32 tiles, rows the threads
/// cannot split evenly, more than 128 elements a thread.
mlir::FailureOr<RowsLayout> planRows(mlir::func::FuncOp program, int64_t threads);

/// tilegpu-assign-blocked: plans `program` and writes the layouts on its types, each tile in
/// the kind its consumers need; a tile needed in two kinds is computed twice, once per kind.
/// On failure the reason is emitted, located.
mlir::LogicalResult assignBlocked(mlir::func::FuncOp program, int64_t threads);

/// Whether `op` is an element-wise op of the blocked path (arith or math, no regions, not a
/// constant): one register of the result from the same register of each operand.
bool isBlockedElementwise(mlir::Operation *op);

/// The kind of a tile type with a blocked layout (none without one).
std::optional<BlockedKind> blockedKind(mlir::Type type);

/// The layout a lowering reads back from `program`'s types (tilegpu-assign-blocked's, or
/// written by hand in a lit test); null when the program has none, the reason (located) when
/// its types disagree with one another or with a blocked layout.
mlir::FailureOr<std::optional<RowsLayout>> layoutOf(mlir::func::FuncOp program);

} // namespace tessel::tilegpu

#endif // TESSEL_TILEGPU_TRANSFORMS_BLOCKEDLAYOUT_H
