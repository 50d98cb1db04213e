//===- AssignBlocked.cpp - the row-blocked layout of programs without dots -----------===//
//
// tilegpu-assign-blocked: the layout of a program of element-wise ops, loads, gathers, stores
// and row reductions (planRows), written on its types. Consumers ask for kinds — a store for its
// value in the kind its shape says, a row reduction for a whole tile, an expand_dims for a row or
// column vector, a broadcast for the kind of its input's shape — and the demands flow back
// through the element-wise ops. A tile demanded in two kinds (an iota indexing both rows and
// columns, a load read as a row and as a column) is computed twice, once per kind, as the
// register path would compute it anyway. layoutOf reads the layout back for the lowering.
//
//===------------------------------------------------------------------------------------===//

#include "tilegpu/Transforms/BlockedLayout.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Builders.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUASSIGNBLOCKED
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

bool isTensor(Type t) { return isa<RankedTensorType>(t); }

/// Whether every region between `op` and `program` is an scf.for body.
bool inLoopsOnly(Operation *op, func::FuncOp program) {
  for (Operation *p = op->getParentOp(); p != program.getOperation(); p = p->getParentOp())
    if (!isa<scf::ForOp>(p))
      return false;
  return true;
}

/// The most elements a thread holds of one block: beyond it the registers spill.
constexpr int64_t kMaxPerThread = 128;

/// The row slots, vectors a row and shared scratch of `L` from its shape and thread split;
/// the reason (at `program`) when the shape does not split evenly.
LogicalResult completeLayout(RowsLayout &L, func::FuncOp program) {
  int64_t chunks = L.cols / L.vector;
  if (L.cols % L.vector != 0 || chunks % L.threadsPerRow != 0)
    return program.emitOpError("has rows of ")
           << L.cols << " elements, which " << L.threadsPerRow
           << " threads a row cannot split evenly in vectors of " << L.vector;
  L.rowsPerPass = L.threads / L.threadsPerRow;
  L.colChunks = chunks / L.threadsPerRow;
  L.rowSlots = 1;
  if (L.rows >= L.rowsPerPass) {
    if (L.rows % L.rowsPerPass != 0)
      return program.emitOpError("has blocks of ")
             << L.rows << " rows, not a multiple of the " << L.rowsPerPass
             << " rows its threads cover at once";
    L.rowSlots = L.rows / L.rowsPerPass;
  } else if (L.rowsPerPass % L.rows != 0) {
    return program.emitOpError("has blocks of ")
           << L.rows << " rows, which do not divide the " << L.rowsPerPass
           << " rows its threads cover at once";
  }
  // Shared floats the reductions exchange: a row's W warps' values per row (rows wider than a
  // warp), or for column reductions each group of warps' values per column (warps holding
  // other rows of the same columns).
  bool rows = false, columns = false;
  program.walk([&](tile::ReduceOp red) { (red.getAxis() == 1 ? rows : columns) = true; });
  L.scratch = 0;
  if (rows && L.threadsPerRow > 32)
    L.scratch = L.rowSlots * L.rowsPerPass * (L.threadsPerRow / 32);
  if (columns && L.columnGroups() > 1)
    L.scratch = std::max(L.scratch, L.columnGroups() * L.cols);
  return success();
}

/// Assigns the kinds of one planned program.
class BlockedAssigner {
public:
  BlockedAssigner(func::FuncOp program, const RowsLayout &L)
      : program(program), L(L), parent(BlockedEncodingAttr::get(program.getContext(), L.threads,
                                                                L.vector, L.threadsPerRow)) {}

  LogicalResult run();

private:
  /// The kind a tile of `type` has when its shape says it ([R, C], [R, 1], [1, C]); none for
  /// 1-D tiles, whose kind is what their consumers need.
  std::optional<BlockedKind> kindOfShape(RankedTensorType type) const;
  /// The kind a stored 1-D value has: Row when it comes from a row reduction, else Col.
  BlockedKind naturalKind(Value v) const;
  /// `use` needs its value in `k` (or the kind its shape says).
  void demand(OpOperand &use, BlockedKind k);
  /// A store's or atomic add's value and mask: in the kind its shape asks for.
  template <typename WriteOp>
  void demandWritten(WriteOp op) {
    auto type = cast<RankedTensorType>(op.getValue().getType());
    BlockedKind k = kindOfShape(type).value_or(naturalKind(op.getValue()));
    demand(op.getValueMutable(), k);
    if (op.getMask())
      demand(op.getMaskMutable()[0], k);
  }
  /// The demands `op`, whose result is in `k`, makes on its operands.
  LogicalResult demandOperands(Operation *op, BlockedKind k);
  /// The kinds of `block`'s ops, consumers before producers.
  LogicalResult assignBlock(Block &block);
  /// A loop: each carried tile has one kind (what its uses after the loop ask for, else its
  /// shape or where its yielded value comes from), which its init, iter_arg and yielded value
  /// share; then the body.
  LogicalResult assignLoop(scf::ForOp loop);
  Attribute encodingOf(BlockedKind k) const;

  func::FuncOp program;
  RowsLayout L;
  BlockedEncodingAttr parent;
  DenseMap<OpOperand *, BlockedKind> useKind;
  DenseMap<Value, SmallVector<BlockedKind, 2>> kinds;
};

std::optional<BlockedKind> BlockedAssigner::kindOfShape(RankedTensorType type) const {
  if (type.getRank() != 2)
    return std::nullopt;
  int64_t r = type.getShape()[0], c = type.getShape()[1];
  if (r == L.rows && c == L.cols)
    return BlockedKind::Tile;
  return c == 1 ? BlockedKind::Row : BlockedKind::Col;
}

BlockedKind BlockedAssigner::naturalKind(Value v) const {
  // The size says it unless R = C; then where the value comes from: a row reduction, or
  // element-wise ops on one.
  int64_t n = cast<RankedTensorType>(v.getType()).getShape()[0];
  if (n == L.rows && n != L.cols)
    return BlockedKind::Row;
  if (n == L.cols && n != L.rows)
    return BlockedKind::Col;
  Operation *def = v.getDefiningOp();
  if (auto red = dyn_cast_or_null<tile::ReduceOp>(def))
    return red.getAxis() == 1 ? BlockedKind::Row : BlockedKind::Col;
  if (def && (isBlockedElementwise(def) || isa<tile::GatherOp>(def)))
    for (Value o : def->getOperands())
      if (isTensor(o.getType()) && naturalKind(o) == BlockedKind::Row)
        return BlockedKind::Row;
  return BlockedKind::Col;
}

void BlockedAssigner::demand(OpOperand &use, BlockedKind k) {
  auto type = dyn_cast<RankedTensorType>(use.get().getType());
  if (!type)
    return;
  if (std::optional<BlockedKind> shaped = kindOfShape(type))
    k = *shaped;
  useKind[&use] = k;
  SmallVector<BlockedKind, 2> &ks = kinds[use.get()];
  if (!llvm::is_contained(ks, k))
    ks.push_back(k);
}

LogicalResult BlockedAssigner::demandOperands(Operation *op, BlockedKind k) {
  if (auto ed = dyn_cast<tile::ExpandDimsOp>(op)) {
    demand(ed->getOpOperand(0), ed.getAxis() == 1 ? BlockedKind::Row : BlockedKind::Col);
  } else if (auto bc = dyn_cast<tile::BroadcastOp>(op)) {
    auto in = cast<RankedTensorType>(bc.getInput().getType());
    demand(bc->getOpOperand(0),
           in.getShape() == bc.getResult().getType().getShape() ? k : kindOfShape(in).value_or(k));
  } else if (auto red = dyn_cast<tile::ReduceOp>(op)) {
    BlockedKind made = red.getAxis() == 1 ? BlockedKind::Row : BlockedKind::Col;
    if (k != made)
      return op->emitOpError(made == BlockedKind::Row
                                 ? "is a row reduction whose result is needed per column: "
                                   "convert-tile-to-blocked does not lower it"
                                 : "is a column reduction whose result is needed per row: "
                                   "convert-tile-to-blocked does not lower it");
    demand(red->getOpOperand(0), BlockedKind::Tile);
  } else if (isBlockedElementwise(op) || isa<tile::GatherOp>(op)) {
    // A gather's index tiles have its shape: each register reads at its own indices.
    for (OpOperand &o : op->getOpOperands())
      demand(o, k);
  }
  return success();
}

Attribute BlockedAssigner::encodingOf(BlockedKind k) const {
  MLIRContext *ctx = parent.getContext();
  switch (k) {
  case BlockedKind::Tile: return parent;
  case BlockedKind::Row: return SliceEncodingAttr::get(ctx, 1, parent);
  case BlockedKind::Col: return SliceEncodingAttr::get(ctx, 0, parent);
  }
  return {};
}

LogicalResult BlockedAssigner::run() {
  if (failed(assignBlock(program.getBody().front())))
    return failure();
  for (auto &[v, ks] : kinds)
    v.setType(withEncoding(cast<RankedTensorType>(v.getType()), encodingOf(ks.front())));
  retypeConstants(program);
  return success();
}

LogicalResult BlockedAssigner::assignBlock(Block &block) {
  SmallVector<Operation *> ops;
  for (Operation &op : block)
    ops.push_back(&op);
  OpBuilder b(program.getContext());
  // Consumers before producers: when an op is reached, every use of its result has asked.
  for (Operation *op : llvm::reverse(ops)) {
    if (auto st = dyn_cast<tile::StoreOp>(op)) {
      demandWritten(st);
      continue;
    }
    if (auto add = dyn_cast<tile::AtomicAddOp>(op)) {
      demandWritten(add);
      continue;
    }
    if (auto loop = dyn_cast<scf::ForOp>(op)) {
      if (failed(assignLoop(loop)))
        return failure();
      continue;
    }
    if (op->getNumResults() != 1 || !isTensor(op->getResult(0).getType()))
      continue;
    Value v = op->getResult(0);
    SmallVector<BlockedKind, 2> needed = kinds.lookup(v);
    if (needed.empty())
      continue;
    kinds[v] = {needed.front()};
    if (failed(demandOperands(op, needed.front())))
      return failure();
    for (BlockedKind k : ArrayRef(needed).drop_front()) {
      b.setInsertionPointAfter(op);
      Operation *copy = b.clone(*op);
      for (OpOperand &use : llvm::make_early_inc_range(v.getUses()))
        if (useKind.lookup(&use) == k)
          use.set(copy->getResult(0));
      kinds[copy->getResult(0)] = {k};
      if (failed(demandOperands(copy, k)))
        return failure();
    }
  }
  return success();
}

LogicalResult BlockedAssigner::assignLoop(scf::ForOp loop) {
  auto yield = cast<scf::YieldOp>(loop.getBody()->getTerminator());
  SmallVector<std::pair<BlockArgument, BlockedKind>> carried;
  for (auto [i, result] : llvm::enumerate(loop.getResults())) {
    auto type = dyn_cast<RankedTensorType>(result.getType());
    if (!type)
      continue;
    SmallVector<BlockedKind, 2> asked = kinds.lookup(result);
    if (asked.size() > 1)
      return loop.emitOpError("carries a tile that is read after the loop in two layouts: "
                              "convert-tile-to-blocked does not convert between them");
    Value yielded = yield.getOperand(i);
    BlockedKind k = !asked.empty() ? asked.front()
                                   : kindOfShape(type).value_or(naturalKind(yielded));
    kinds[result] = {k};
    demand(yield->getOpOperand(i), k);
    demand(loop.getInitArgsMutable()[i], k);
    BlockArgument arg = loop.getRegionIterArg(i);
    kinds[arg] = {k};
    carried.push_back({arg, k});
  }
  if (failed(assignBlock(*loop.getBody())))
    return failure();
  for (auto [arg, k] : carried)
    if (kinds.lookup(arg).size() > 1)
      return loop.emitOpError("carries a tile its body reads in two layouts: "
                              "convert-tile-to-blocked does not convert between them");
  return success();
}

struct AssignBlocked : tessel::tilegpu::impl::TileGPUAssignBlockedBase<AssignBlocked> {
  using Base::Base;

  void runOnOperation() override {
    func::FuncOp program = getOperation();
    if (!program.isExternal() && failed(assignBlocked(program, numThreads)))
      signalPassFailure();
  }
};

} // namespace

FailureOr<RowsLayout> tessel::tilegpu::planRows(func::FuncOp program, int64_t threads) {
  RowsLayout L;
  L.threads = threads;
  std::optional<std::pair<int64_t, int64_t>> block;
  int64_t oneD = 0, minBytes = 16;
  // Which block: the [R, C] of the 2-D tiles, or [1, N] for a program of 1-D tiles.
  WalkResult walk = program.walk([&](Operation *op) -> WalkResult {
    if (isa<tile::DotOp, tile::TransOp, tile::SoftmaxOp>(op))
      return op->emitOpError("is outside convert-tile-to-blocked's class (programs of "
                             "element-wise ops, loads, gathers, stores and reductions)"),
             WalkResult::interrupt();
    bool tiles = llvm::any_of(op->getResultTypes(), isTensor) ||
                 llvm::any_of(op->getOperandTypes(), isTensor);
    if (tiles && !inLoopsOnly(op, program))
      return op->emitOpError("uses tiles inside a region other than a loop's: "
                             "convert-tile-to-blocked lowers straight-line code and scf.for"),
             WalkResult::interrupt();
    if (auto ld = dyn_cast<tile::LoadOp>(op))
      minBytes = std::min<int64_t>(
          minBytes, std::max<int64_t>(1, ld.getResult().getType().getElementTypeBitWidth() / 8));
    if (auto st = dyn_cast<tile::StoreOp>(op))
      minBytes = std::min<int64_t>(
          minBytes,
          std::max<int64_t>(
              1, cast<RankedTensorType>(st.getValue().getType()).getElementTypeBitWidth() / 8));
    if (auto red = dyn_cast<tile::ReduceOp>(op)) {
      auto in = cast<RankedTensorType>(red.getInput().getType());
      if (in.getRank() != 2 || !in.getElementType().isF32())
        return op->emitOpError("is a reduction convert-tile-to-blocked does not lower (it "
                               "reduces 2-D f32 tiles along rows or columns)"),
               WalkResult::interrupt();
    }
    for (Type t : op->getResultTypes()) {
      auto rt = dyn_cast<RankedTensorType>(t);
      if (!rt)
        continue;
      if (rt.getRank() > 2)
        return op->emitOpError("makes a tile of rank > 2"), WalkResult::interrupt();
      if (rt.getRank() == 1) {
        oneD = std::max(oneD, rt.getShape()[0]);
        continue;
      }
      int64_t r = rt.getShape()[0], c = rt.getShape()[1];
      if (r == 1 || c == 1)
        continue;
      if (block && *block != std::make_pair(r, c))
        return op->emitOpError("makes a ")
                   << r << "x" << c << " tile beside " << block->first << "x" << block->second
                   << " ones: convert-tile-to-blocked lowers one block shape",
               WalkResult::interrupt();
      block = std::make_pair(r, c);
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!block) {
    // Without an [R, C] tile the block is one row or one column: the widest [1, C] (a program
    // that works on flattened pairs) or tallest [R, 1] tile, else [1, N] for 1-D programs.
    block = std::pair<int64_t, int64_t>(1, std::max<int64_t>(oneD, 1));
    int64_t most = 0;
    program.walk([&](Operation *op) {
      for (Type t : op->getResultTypes())
        if (auto rt = dyn_cast<RankedTensorType>(t);
            rt && rt.getRank() == 2 && rt.getNumElements() > most) {
          most = rt.getNumElements();
          block = std::make_pair(rt.getShape()[0], rt.getShape()[1]);
        }
    });
  }
  L.rows = block->first;
  L.cols = block->second;
  // 16-byte vectors of the narrowest element the program moves, as long as they divide a row.
  L.vector = 16 / minBytes;
  while (L.vector > 1 && L.cols % L.vector != 0)
    L.vector /= 2;
  int64_t chunks = L.cols / L.vector;
  if (!llvm::isPowerOf2_64(threads) ||
      (chunks < threads ? !llvm::isPowerOf2_64(chunks) : chunks % threads != 0))
    return program.emitOpError("has rows of ")
           << L.cols << " elements, which " << threads
           << " threads cannot split evenly in vectors of " << L.vector;
  L.threadsPerRow = std::min(threads, chunks);
  if (failed(completeLayout(L, program)))
    return failure();
  if (L.count(BlockedKind::Tile) > kMaxPerThread)
    return program.emitOpError("holds ")
           << L.count(BlockedKind::Tile) << " elements of a " << L.rows << "x" << L.cols
           << " block a thread with " << threads << " threads: convert-tile-to-blocked keeps "
           << "at most " << kMaxPerThread << " in registers";
  return L;
}

LogicalResult tessel::tilegpu::assignBlocked(func::FuncOp program, int64_t threads) {
  FailureOr<RowsLayout> L = planRows(program, threads);
  if (failed(L))
    return failure();
  return BlockedAssigner(program, *L).run();
}

bool tessel::tilegpu::isBlockedElementwise(Operation *op) {
  return tessel::tile::isElementwiseOp(op) && !isa<arith::ConstantOp>(op);
}

std::optional<BlockedKind> tessel::tilegpu::blockedKind(Type type) {
  auto rt = dyn_cast<RankedTensorType>(type);
  if (!rt || !getBlockedParent(rt.getEncoding()))
    return std::nullopt;
  if (auto slice = dyn_cast<SliceEncodingAttr>(rt.getEncoding()))
    return slice.getDim() == 1 ? BlockedKind::Row : BlockedKind::Col;
  return BlockedKind::Tile;
}

FailureOr<std::optional<RowsLayout>> tessel::tilegpu::layoutOf(func::FuncOp program) {
  BlockedEncodingAttr parent;
  RowsLayout L;
  bool tile = false;
  WalkResult walk = program.walk([&](Operation *op) -> WalkResult {
    for (Type t : op->getResultTypes()) {
      std::optional<BlockedKind> k = blockedKind(t);
      if (!k)
        continue;
      auto rt = cast<RankedTensorType>(t);
      BlockedEncodingAttr p = getBlockedParent(rt.getEncoding());
      if (parent && p != parent)
        return op->emitOpError("has tiles of two blocked layouts, ")
                   << parent << " and " << p << ": convert-tile-to-blocked lowers one",
               WalkResult::interrupt();
      parent = p;
      ArrayRef<int64_t> shape = rt.getShape();
      int64_t n = rt.getRank() == 1 ? shape[0] : shape[*k == BlockedKind::Row ? 0 : 1];
      if (*k == BlockedKind::Tile) {
        if (rt.getRank() != 2 || (tile && (shape[0] != L.rows || shape[1] != L.cols)))
          return op->emitOpError("has a blocked tile of shape ")
                     << rt << " beside " << L.rows << "x" << L.cols
                     << " ones: convert-tile-to-blocked lowers one 2-D block shape",
                 WalkResult::interrupt();
        tile = true;
        L.rows = shape[0];
        L.cols = shape[1];
      } else if (!tile) {
        (*k == BlockedKind::Row ? L.rows
                                : L.cols) = std::max(*k == BlockedKind::Row ? L.rows : L.cols, n);
      }
    }
    return WalkResult::advance();
  });
  if (walk.wasInterrupted())
    return failure();
  if (!parent)
    return std::optional<RowsLayout>();
  L.threads = parent.getThreads();
  L.vector = parent.getVector();
  L.threadsPerRow = parent.getThreadsPerRow();
  if (failed(completeLayout(L, program)))
    return failure();
  return std::optional<RowsLayout>(L);
}
