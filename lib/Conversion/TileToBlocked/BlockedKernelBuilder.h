//===- BlockedKernelBuilder.h - convert-tile-to-blocked's kernel builder -*- C++ -*-===//
//
// Private to lib/Conversion/TileToBlocked. The row-blocked register lowering of tile programs
// without dots (row softmax, layer norm, element-wise chains): every tile of the program's
// [R, C] block lives in registers, each thread holding vectors of V contiguous elements of
// its rows, so loads and stores are 16-byte vector accesses that a warp coalesces, and a
// reduction along a row is a per-thread fold, warp shuffles and, for rows wider than a warp,
// one exchange through shared memory. The parts:
//   ConvertTileToBlocked.cpp  the pass, the layout (planRows), which layouts each tile is
//                             needed in, and the element-wise and shape ops
//   BlockedMemory.cpp         loads and stores (vectorised where aligned and in bounds)
//   BlockedReduce.cpp         reductions along rows
// docs/dev/codegen-blocked.md says why.
//
//===------------------------------------------------------------------------------------===//

#ifndef TESSEL_LIB_CONVERSION_TILETOBLOCKED_BLOCKEDKERNELBUILDER_H
#define TESSEL_LIB_CONVERSION_TILETOBLOCKED_BLOCKEDKERNELBUILDER_H

#include "tessel/Conversion/KernelWalker.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::blocked {

using namespace mlir;

/// How a tile value is spread over the threads: the whole [R, C] block (Tile), a value per
/// row ([R] or [R, 1]: Row) or per column ([C] or [1, C]: Col).
enum class Kind { Tile = 0, Row = 1, Col = 2 };

/// The row-blocked layout of a program's [R, C] block over T threads (docs/dev/codegen-blocked.md):
/// a row is split over `threadsPerRow` threads in vectors of `vector` elements, `rowsPerPass`
/// rows side by side. Thread t = tr · threadsPerRow + tc holds, for row slot s and chunk j,
/// the elements (row s · rowsPerPass + tr, columns ((j · threadsPerRow + tc) · vector + e)).
/// When R < rowsPerPass the extra threads repeat rows (row tr mod R) and store nothing.
struct RowsLayout {
  int64_t rows = 1, cols = 1, threads = 128, vector = 1;
  int64_t threadsPerRow = 1, rowsPerPass = 1, rowSlots = 1, colChunks = 1;
  /// f32 elements of shared memory a cross-warp row reduction exchanges (0: none needed).
  int64_t scratch = 0;

  int64_t count(Kind k) const {
    switch (k) {
    case Kind::Tile: return rowSlots * colChunks * vector;
    case Kind::Row: return rowSlots;
    case Kind::Col: return colChunks * vector;
    }
    return 0;
  }
  /// Tile register (s, j, e).
  int64_t tileIndex(int64_t s, int64_t j, int64_t e) const {
    return (s * colChunks + j) * vector + e;
  }
};

/// The layout of `program` over `threads` threads, or the reason (located) it is outside the
/// class: a dot, a transpose, a gather, a softmax op, loops or branches over tiles, tiles of
/// rank > 2 or of more than one block shape, reductions other than f32 along rows, more than
/// 128 elements a thread.
FailureOr<RowsLayout> planRows(func::FuncOp program, int64_t threads);

class BlockedKernelBuilder : public tessel::conversion::KernelWalker {
public:
  BlockedKernelBuilder(gpu::GPUFuncOp kernel, const RowsLayout &layout)
      : KernelWalker(kernel), L(layout) {}

  /// The kinds each tile is needed in, then the walk.
  LogicalResult build(func::FuncOp program);

private:
  void emitPrologue(Location loc) override;
  LogicalResult emitOp(Operation *op) override;

  /// The kind a tile of `type` has when its shape says it ([R, C], [R, 1], [1, C]); none for
  /// 1-D tiles, whose kind is what their consumers need.
  std::optional<Kind> kindOfShape(RankedTensorType type) const;
  /// The kind a stored 1-D value has: Row when it comes from a row reduction, else Col.
  Kind naturalKind(Value v) const;
  /// Records that `v` is needed in `k`.
  void demand(Value v, Kind k);
  /// Every kind each tile of `program` is needed in, from its consumers (stores first).
  LogicalResult computeKinds(func::FuncOp program);

  /// The registers of `v` in `k` (computed when its op was walked).
  SmallVector<Value> &regsOf(Value v, Kind k) { return regs[{v, static_cast<int>(k)}]; }
  /// The registers of tile op `op`'s result in `k`.
  FailureOr<SmallVector<Value>> compute(Operation *op, Kind k);
  /// One vector of a tile in `k` as this thread holds it: its row and first column inside the
  /// block, its width and its first register.
  struct VectorSlot {
    Value row, col;
    int64_t width, first;
  };
  SmallVector<VectorSlot> vectorSlots(Kind k);
  FailureOr<SmallVector<Value>> loadRegs(tile::LoadOp op, Kind k);
  LogicalResult emitStore(tile::StoreOp op);
  /// Row reduction of the Tile registers `in` into Row registers.
  FailureOr<SmallVector<Value>> reduceRows(tile::ReduceOp op, ArrayRef<Value> in);

  /// The row (inside the block) of row slot `s`, and the column of chunk `j`, element `e`.
  Value rowOf(int64_t s);
  Value colOf(int64_t j, int64_t e);
  /// Whether this thread's rows are its own (not a repeat when R < rowsPerPass).
  Value ownsRows();

  RowsLayout L;
  Value tid, tr, tc, scratchBuffer;
  DenseMap<Value, SmallVector<Kind, 2>> kinds;
  DenseMap<std::pair<Value, int>, SmallVector<Value>> regs;
};

} // namespace tessel::blocked

#endif // TESSEL_LIB_CONVERSION_TILETOBLOCKED_BLOCKEDKERNELBUILDER_H
