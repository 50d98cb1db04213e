//===- BulkReduce.cpp - tilegpu.bulk_add as cp.reduce.async.bulk (sm_90) ----------------------===//
//
// An atomic add of an accumulator tile through shared memory: the threads write the tile into
// the staging buffer in runs (a run: the elements of one row or column of the block that are
// contiguous in global memory), then one thread a run adds it to global memory with one bulk
// reduction, which the L2 performs a line at a time — where element-wise atomics send one
// request per element (the backward's dQ: 4,096 a 64×64 tile). FlashAttention-3 adds dQ the
// same way (its TMA reduce-add of a tile staged in shared memory).
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

// The staged writes before a bulk reduction, the next round's writes after its wait; the
// tensor maps' builds and TMA copies (TmaCopies.cpp).
void ptxStatement(OpBuilder &b, Location loc, StringRef text, ValueRange operands,
                  StringRef constraints) {
  std::string all = constraints.empty() ? "~{memory}" : (constraints + ",~{memory}").str();
  tessel::conversion::inlinePtx(b, loc, TypeRange(), operands, text, all, /*sideEffects=*/true);
}

LogicalResult MmaKernelBuilder::emitBulkAdd(tilegpu::BulkAddOp op) {
  Location loc = op.getLoc();
  if (!wgmma || mTiles != 1)
    return op.emitOpError("stages an accumulator tile for bulk reductions, which "
                          "convert-tile-to-mma does on wgmma (sm_90a)");
  if (!descs.count(op.getDesc()))
    return op.emitOpError("writes a descriptor convert-tile-to-mma cannot trace to make_desc");
  if (descs[op.getDesc()].pages)
    return op.emitOpError("writes through a paged descriptor, which convert-tile-to-mma does "
                          "not handle (the reference lowering does)");
  auto type = cast<RankedTensorType>(op.getValue().getType());
  FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Acc, op);
  if (failed(regs))
    return failure();
  const Desc &d = descs[op.getDesc()];
  int64_t runDim = op.getRunDim();
  int64_t runLength = type.getShape()[runDim], runs = type.getShape()[1 - runDim];
  tilegpu::SharedBufferType bufferType = op.getBuffer().getType();
  int64_t perRound = bufferType.getShape()[0];
  int64_t bufferRowBytes = (runLength + 4) * 4;
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  auto andi = [&](Value x, Value y) { return arith::AndIOp::create(b, loc, x, y); };
  Value zero = ci64(0);
  Value r0 = toI64(scalars.lookup(op.getOffsets()[0]));
  Value c0 = toI64(scalars.lookup(op.getOffsets()[1]));
  Value along = runDim == 0 ? r0 : c0, across = runDim == 0 ? c0 : r0;
  // Bulk reductions need every run whole inside the tensor and its first element 16-byte
  // aligned (the stride between runs is a multiple of 16 bytes: AllocateShared checked it).
  Value first = blockStart(loc, d, r0, c0);
  Value aligned = cmp(arith::CmpIPredicate::eq,
                      arith::AndIOp::create(b, loc,
                                            LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), first),
                                            ci64(15)),
                      zero);
  Value whole = andi(cmp(arith::CmpIPredicate::sge, along, zero),
                     cmp(arith::CmpIPredicate::sle,
                         arith::AddIOp::create(b, loc, along, ci64(runLength)), d.shape[runDim]));
  auto split = scf::IfOp::create(b, loc, andi(aligned, whole), /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPointToStart(split.elseBlock());
  atomicAddTile(loc, op.getDesc(), op.getOffsets(), type, *regs);
  b.setInsertionPointToStart(split.thenBlock());
  bulkReductions = true;
  Value buffer = scalars.lookup(op.getBuffer());
  SmallVector<Value> rows = rowIndices();
  Value quad = quadColumn();
  int64_t slabs = type.getShape()[1] / 8;
  for (int64_t round = 0; round < runs / perRound; ++round) {
    // The buffer is free once the reductions issued from it have read it (each issuing thread
    // waits for its own, the barrier for all of them).
    ptxStatement(b, loc, "cp.async.bulk.wait_group.read 0;", {}, "");
    emitBarrier(loc);
    // Acc register 4·s + 2·h + e is element (rows[h], 8·s + quad + e).
    {
      OpBuilder::InsertionGuard inRound(b);
      if (runDim == 1) {
        // Runs are rows: a warp's 16 rows lie in one round.
        Value mine = cmp(arith::CmpIPredicate::eq,
                         arith::DivUIOp::create(b, loc, rows[0], ci32(perRound)), ci32(round));
        auto ifOp = scf::IfOp::create(b, loc, mine, /*withElseRegion=*/false);
        b.setInsertionPointToStart(ifOp.thenBlock());
      }
      for (int64_t s = 0; s < slabs; ++s) {
        if (runDim == 0 && (s * 8 / perRound) != round)
          continue;
        for (int64_t h = 0; h < 2; ++h)
          for (int64_t e = 0; e < 2; ++e) {
            Value col = arith::AddIOp::create(b, loc, quad, ci32(s * 8 + e));
            Value run = runDim == 0 ? col : rows[h];
            Value pos = runDim == 0 ? rows[h] : col;
            Value bytes = arith::AddIOp::create(
                b, loc,
                arith::MulIOp::create(b, loc,
                                      arith::SubIOp::create(b, loc, run, ci32(round * perRound)),
                                      ci32(bufferRowBytes)),
                arith::MulIOp::create(b, loc, pos, ci32(4)));
            bytes = arith::AddIOp::create(b, loc, bytes, buffer);
            Value at = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase,
                                           ValueRange{bytes});
            LLVM::StoreOp::create(b, loc, (*regs)[4 * s + 2 * h + e], at, /*alignment=*/4);
          }
      }
    }
    fenceSharedForAsyncProxy(loc);
    emitBarrier(loc);
    // Thread t adds run round·perRound + t, when that run is inside the tensor.
    Value run = arith::AddIOp::create(b, loc, tid, ci32(round * perRound));
    Value grun = arith::AddIOp::create(b, loc, across, toI64(run));
    Value issue = andi(cmp(arith::CmpIPredicate::ult, tid, ci32(perRound)),
                       andi(cmp(arith::CmpIPredicate::sge, grun, zero),
                            cmp(arith::CmpIPredicate::slt, grun, d.shape[1 - runDim])));
    auto ifOp = scf::IfOp::create(b, loc, issue, /*withElseRegion=*/false);
    OpBuilder::InsertionGuard inIssue(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value runElem = arith::MulIOp::create(b, loc, toI64(run), d.strides[1 - runDim]);
    Value global = LLVM::GEPOp::create(b, loc, ptr1, d.elementType, first, ValueRange{runElem});
    Value sbytes = arith::AddIOp::create(b, loc, buffer,
                                         arith::MulIOp::create(b, loc, tid, ci32(bufferRowBytes)));
    Value shared = LLVM::PtrToIntOp::create(
        b, loc, b.getI32Type(),
        LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{sbytes}));
    ptxStatement(b, loc,
                 "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;",
                 {global, shared, ci32(runLength * 4)}, "l,r,r");
    ptxStatement(b, loc, "cp.async.bulk.commit_group;", {}, "");
  }
  return success();
}

void MmaKernelBuilder::emitEpilogue(Location loc) {
  // Shared memory must outlive the bulk reductions that read it.
  if (bulkReductions)
    ptxStatement(b, loc, "cp.async.bulk.wait_group 0;", {}, "");
}

} // namespace tessel::mma
