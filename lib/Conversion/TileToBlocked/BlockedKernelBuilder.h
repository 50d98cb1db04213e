//===- BlockedKernelBuilder.h - convert-tile-to-blocked's kernel builder -*- C++ -*-===//
//
// Private to lib/Conversion/TileToBlocked. The row-blocked register lowering of tile programs
// without dots (row softmax, layer norm, element-wise chains): every tile of the program's
// [R, C] block lives in registers, each thread holding vectors of V contiguous elements of
// its rows, so loads and stores are 16-byte vector accesses that a warp coalesces, and a
// reduction along a row is a per-thread fold, warp shuffles and, for rows wider than a warp,
// one exchange through shared memory. The layout is decided at the tilegpu level
// (tilegpu-assign-blocked, dialects/tilegpu/Transforms/AssignBlocked.cpp) and read back from
// the types here. The parts:
//   ConvertTileToBlocked.cpp  the pass and the element-wise and shape ops
//   BlockedMemory.cpp         loads and stores (vectorised where aligned and in bounds), gathers
//   BlockedReduce.cpp         reductions along rows and columns
// docs/dev/codegen-blocked.md says why.
//
//===------------------------------------------------------------------------------------===//

#ifndef TESSEL_LIB_CONVERSION_TILETOBLOCKED_BLOCKEDKERNELBUILDER_H
#define TESSEL_LIB_CONVERSION_TILETOBLOCKED_BLOCKEDKERNELBUILDER_H

#include "tessel/Conversion/KernelWalker.h"
#include "tilegpu/Transforms/BlockedLayout.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

namespace tessel::blocked {

using namespace mlir;

using Kind = tessel::tilegpu::BlockedKind;
using tessel::tilegpu::RowsLayout;

class BlockedKernelBuilder : public tessel::conversion::KernelWalker {
public:
  BlockedKernelBuilder(gpu::GPUFuncOp kernel, const RowsLayout &layout)
      : KernelWalker(kernel), L(layout) {}

  /// The walk of `program`, whose tiles have their blocked layouts (tilegpu-assign-blocked).
  LogicalResult build(func::FuncOp program);

private:
  void emitPrologue(Location loc) override;
  LogicalResult emitOp(Operation *op) override;

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
  /// tile.gather in `k`: each register a predicated scalar load of its element, where every
  /// index is inside the descriptor's shape; the padding elsewhere.
  FailureOr<SmallVector<Value>> gatherRegs(tile::GatherOp op, Kind k);
  /// An scf.for: its carried tiles as registers (iter_args of the new loop), its body walked.
  LogicalResult emitFor(scf::ForOp op);
  /// tile.store, or tile.atomic_add (element by element, red.global.add).
  template <typename WriteOp>
  LogicalResult emitStore(WriteOp op);
  /// Row reduction of the Tile registers `in` into Row registers.
  FailureOr<SmallVector<Value>> reduceRows(tile::ReduceOp op, ArrayRef<Value> in);
  /// Column reduction of the Tile registers `in` into Col registers.
  FailureOr<SmallVector<Value>> reduceColumns(tile::ReduceOp op, ArrayRef<Value> in);

  /// The row (inside the block) of row slot `s`, and the column of chunk `j`, element `e`.
  Value rowOf(int64_t s);
  Value colOf(int64_t j, int64_t e);
  /// Whether this thread's rows are its own (not a repeat when R < rowsPerPass).
  Value ownsRows();

  RowsLayout L;
  Value tid, tr, tc, scratchBuffer;
  /// The kind of each tile, from its type's layout (none for a tile nothing uses).
  DenseMap<Value, Kind> kinds;
  DenseMap<std::pair<Value, int>, SmallVector<Value>> regs;
};

} // namespace tessel::blocked

#endif // TESSEL_LIB_CONVERSION_TILETOBLOCKED_BLOCKEDKERNELBUILDER_H
