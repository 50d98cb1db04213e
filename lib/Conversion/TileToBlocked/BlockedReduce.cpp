//===- BlockedReduce.cpp - reductions along the rows of a row-blocked tile ---------===//
//
// A row is spread over `threadsPerRow` consecutive threads: each folds its own elements of the
// row, then butterfly shuffles combine the threads of a warp (every thread ends with the
// row's value, the Row layout's copies); a row wider than a warp exchanges the warps' values
// through shared memory (one barrier to publish them, one before the buffer is reused).
//
//===------------------------------------------------------------------------------------===//

#include "BlockedKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/SCF/IR/SCF.h"

namespace tessel::blocked {

FailureOr<SmallVector<Value>> BlockedKernelBuilder::reduceRows(tile::ReduceOp op,
                                                               ArrayRef<Value> in) {
  Location loc = op.getLoc();
  auto combine = [&](Value x, Value y) -> Value {
    switch (op.getKind()) {
    case tile::ReduceKind::Sum: return arith::AddFOp::create(b, loc, x, y);
    case tile::ReduceKind::Max: return arith::MaximumFOp::create(b, loc, x, y);
    case tile::ReduceKind::Min: return arith::MinimumFOp::create(b, loc, x, y);
    }
    return x;
  };
  int64_t perRow = L.colChunks * L.vector;
  SmallVector<Value> partial;
  for (int64_t s = 0; s < L.rowSlots; ++s) {
    // A balanced tree: shorter dependency chains than a left fold.
    SmallVector<Value> level(in.begin() + s * perRow, in.begin() + (s + 1) * perRow);
    while (level.size() > 1) {
      SmallVector<Value> next;
      for (size_t i = 0; i + 1 < level.size(); i += 2)
        next.push_back(combine(level[i], level[i + 1]));
      if (level.size() % 2)
        next.push_back(level.back());
      level = std::move(next);
    }
    partial.push_back(level.front());
  }
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

} // namespace tessel::blocked
