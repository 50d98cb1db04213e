//===- BlockedReduce.cpp - reductions along the rows and columns of a row-blocked tile ---===//
//
// A row is spread over `threadsPerRow` consecutive threads: each folds its own elements of the
// row, then butterfly shuffles combine the threads of a warp (every thread ends with the
// row's value, the Row layout's copies); a row wider than a warp exchanges the warps' values
// through shared memory (one barrier to publish them, one before the buffer is reused).
// A column is held by every row of threads: each folds its row slots, shuffles combine the
// rows a warp holds side by side, and groups of warps holding other rows exchange their
// values per column through shared memory; every thread ends with its columns' values (the
// Col layout's copies).
//
//===------------------------------------------------------------------------------------===//

#include "BlockedKernelBuilder.h"

#include <cmath>

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessel::blocked {

namespace {

Value combineOf(OpBuilder &b, Location loc, tile::ReduceKind kind, Value x, Value y) {
  switch (kind) {
  case tile::ReduceKind::Sum: return arith::AddFOp::create(b, loc, x, y);
  case tile::ReduceKind::Max: return arith::MaximumFOp::create(b, loc, x, y);
  case tile::ReduceKind::Min: return arith::MinimumFOp::create(b, loc, x, y);
  }
  return x;
}

} // namespace

FailureOr<SmallVector<Value>> BlockedKernelBuilder::reduceRows(tile::ReduceOp op,
                                                               ArrayRef<Value> in) {
  Location loc = op.getLoc();
  auto combine = [&](Value x, Value y) { return combineOf(b, loc, op.getKind(), x, y); };
  int64_t perRow = L.colChunks * L.vector;
  SmallVector<Value> partial;
  for (int64_t s = 0; s < L.rowSlots; ++s)
    partial.push_back(tessel::conversion::balancedTree(
        SmallVector<Value>(in.begin() + s * perRow, in.begin() + (s + 1) * perRow), combine));
  Value width = ci32(32);
  for (int64_t offset = std::min<int64_t>(L.threadsPerRow, 32) / 2; offset >= 1; offset /= 2)
    for (Value &p : partial) {
      Value other = gpu::ShuffleOp::create(b, loc, p, ci32(offset), width, gpu::ShuffleMode::XOR)
                        .getShuffleResult();
      p = combine(p, other);
    }
  if (L.threadsPerRow <= 32)
    return partial;
  // Rows wider than a warp: lane 0 of each of the row's W warps publishes its value.
  int64_t W = L.threadsPerRow / 32;
  auto index = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v).getResult();
  };
  Value warpInRow = arith::DivUIOp::create(b, loc, tc, width);
  Value lane0 = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq,
                                      arith::RemUIOp::create(b, loc, tc, width), ci32(0));
  auto slotBase = [&](int64_t s) {
    Value row = arith::AddIOp::create(b, loc, tr, ci32(s * L.rowsPerPass));
    return arith::MulIOp::create(b, loc, row, ci32(W)).getResult();
  };
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, lane0, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (int64_t s = 0; s < L.rowSlots; ++s)
      memref::StoreOp::create(
          b, loc, partial[s], scratchBuffer,
          ValueRange{index(arith::AddIOp::create(b, loc, slotBase(s), warpInRow))});
  }
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> out;
  for (int64_t s = 0; s < L.rowSlots; ++s) {
    Value base = slotBase(s);
    Value acc;
    for (int64_t w = 0; w < W; ++w) {
      Value v = memref::LoadOp::create(
          b, loc, scratchBuffer, ValueRange{index(arith::AddIOp::create(b, loc, base, ci32(w)))});
      acc = acc ? combine(acc, v) : v;
    }
    out.push_back(acc);
  }
  gpu::BarrierOp::create(b, loc);
  return out;
}

FailureOr<SmallVector<Value>> BlockedKernelBuilder::reduceColumns(tile::ReduceOp op,
                                                                  ArrayRef<Value> in) {
  Location loc = op.getLoc();
  auto combine = [&](Value x, Value y) { return combineOf(b, loc, op.getKind(), x, y); };
  int64_t perRow = L.colChunks * L.vector;
  // Threads that repeat rows (R below the rows the threads cover) add the identity.
  double identity = op.getKind() == tile::ReduceKind::Sum   ? 0.0
                    : op.getKind() == tile::ReduceKind::Max ? -INFINITY
                                                            : INFINITY;
  Value own = L.rows < L.rowsPerPass ? ownsRows() : Value();
  Value neutral = arith::ConstantOp::create(b, loc, b.getF32FloatAttr(identity));
  // A thread's own rows of each of its columns, then the rows its warp holds side by side
  // (lanes threadsPerRow apart hold the same columns).
  SmallVector<Value> partial;
  for (int64_t i = 0; i < perRow; ++i) {
    SmallVector<Value> column;
    for (int64_t s = 0; s < L.rowSlots; ++s)
      column.push_back(in[s * perRow + i]);
    Value v = tessel::conversion::balancedTree(column, combine);
    partial.push_back(own ? Value(arith::SelectOp::create(b, loc, own, v, neutral)) : v);
  }
  Value width = ci32(32);
  for (int64_t offset = L.threadsPerRow; offset < 32; offset *= 2)
    for (Value &p : partial)
      p = combine(p, gpu::ShuffleOp::create(b, loc, p, ci32(offset), width, gpu::ShuffleMode::XOR)
                         .getShuffleResult());
  int64_t groups = L.columnGroups();
  if (groups == 1)
    return partial;
  // Groups of warps holding other rows: one lane per column of each group publishes its
  // value, [group][column] in shared memory, and every thread folds the groups of its columns.
  auto index = [&](Value v) {
    return arith::IndexCastOp::create(b, loc, b.getIndexType(), v).getResult();
  };
  int64_t warpsPerRow = std::max<int64_t>(1, L.threadsPerRow / 32);
  Value group = arith::DivUIOp::create(b, loc, tid, ci32(32 * warpsPerRow));
  Value lane = arith::RemUIOp::create(b, loc, tid, width);
  Value writer = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, lane,
                                       ci32(std::min<int64_t>(L.threadsPerRow, 32)));
  auto at = [&](Value g, int64_t i) {
    Value col = colOf(i / L.vector, i % L.vector);
    return index(
        arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, g, ci32(L.cols)), col));
  };
  {
    auto ifOp = scf::IfOp::create(b, loc, TypeRange{}, writer, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    for (int64_t i = 0; i < perRow; ++i)
      memref::StoreOp::create(b, loc, partial[i], scratchBuffer, ValueRange{at(group, i)});
  }
  gpu::BarrierOp::create(b, loc);
  SmallVector<Value> out;
  for (int64_t i = 0; i < perRow; ++i) {
    SmallVector<Value> values;
    for (int64_t g = 0; g < groups; ++g)
      values.push_back(memref::LoadOp::create(b, loc, scratchBuffer, ValueRange{at(ci32(g), i)}));
    out.push_back(tessel::conversion::balancedTree(values, combine));
  }
  gpu::BarrierOp::create(b, loc);
  return out;
}

} // namespace tessel::blocked
