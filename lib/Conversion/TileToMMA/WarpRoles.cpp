//===- WarpRoles.cpp - tilegpu.warp_specialize and the mbarriers between the roles ----------===//
//
// The consumers are the threads the layouts count (tid < numThreads()); the producer's warps
// follow them. One uniform branch splits the CTA; setmaxnreg moves registers from the
// producer, which only copies, to the consumers. Inside the consumers' region a barrier is the
// named barrier 1 over the consumers (the producer, looping ahead, never reaches one); inside
// the producer's region the copies of a block are dealt among the producer's threads.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

bool MmaKernelBuilder::isMbarrierOp(Operation *op) {
  return isa<tilegpu::MbarrierInitOp, tilegpu::MbarrierArriveOp, tilegpu::MbarrierWaitOp,
             tilegpu::AsyncCopyArriveOp>(op);
}

LogicalResult MmaKernelBuilder::emitTurn(Operation *op) {
  // Warpgroup w's turn is named barrier 2 + w over the two consumer warpgroups (barrier 1 is
  // the consumers' CTA barrier, emitBarrier).
  Location loc = op->getLoc();
  if (numThreads() != 256)
    return op->emitOpError("takes turns between two consumer warpgroups, not ")
           << numThreads() / 128;
  Value w = arith::ShRUIOp::create(b, loc, tid, ci32(7));
  Value both = ci32(256);
  if (isa<tilegpu::TurnWaitOp>(op)) {
    NVVM::BarrierOp::create(b, loc, TypeRange(), arith::AddIOp::create(b, loc, w, ci32(2)), both,
                            {}, Value());
    return success();
  }
  if (isa<tilegpu::TurnPassOp>(op)) {
    // The other warpgroup's turn: 2 + (1 − w).
    NVVM::BarrierArriveOp::create(b, loc, arith::SubIOp::create(b, loc, ci32(3), w), both);
    return success();
  }
  auto second = scf::IfOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, w, ci32(1)),
      /*withElseRegion=*/false);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(second.thenBlock()->getTerminator());
  NVVM::BarrierArriveOp::create(b, loc, ci32(2), both);
  return success();
}

void MmaKernelBuilder::emitBarrier(Location loc) {
  if (!consumerBarriers) {
    gpu::BarrierOp::create(b, loc);
    return;
  }
  NVVM::BarrierOp::create(b, loc, TypeRange(), ci32(1), ci32(numThreads()), {}, Value());
}

Value MmaKernelBuilder::barrierAddress(Value bytes) {
  return LLVM::GEPOp::create(b, b.getUnknownLoc(), LLVM::LLVMPointerType::get(b.getContext(), 3),
                             b.getI8Type(), smemBase, ValueRange{bytes});
}

Value MmaKernelBuilder::sharedAddress(Value bytes) {
  return LLVM::PtrToIntOp::create(b, b.getUnknownLoc(), b.getI32Type(), barrierAddress(bytes));
}

LogicalResult MmaKernelBuilder::emitMbarrierOp(Operation *op) {
  Location loc = op->getLoc();
  if (auto init = dyn_cast<tilegpu::MbarrierInitOp>(op)) {
    // One thread sets every stage up; the gpu.barrier after it publishes them.
    auto first = scf::IfOp::create(
        b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::eq, tid, ci32(0)),
        /*withElseRegion=*/false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPoint(first.thenBlock()->getTerminator());
    int64_t stages = init.getBarriers().getType().getStages();
    for (int64_t s = 0; s < stages; ++s) {
      Value bytes = arith::AddIOp::create(b, loc, scalars.lookup(init.getBarriers()),
                                          ci32(s * init.getBarriers().getType().getStageBytes()));
      NVVM::MBarrierInitOp::create(b, loc, barrierAddress(bytes), ci32(init.getCount()), Value());
    }
    return success();
  }
  // A predicated arrive or wait: a uniform branch around it.
  Value pred;
  if (auto arrive = dyn_cast<tilegpu::MbarrierArriveOp>(op))
    pred = arrive.getPred();
  if (auto wait = dyn_cast<tilegpu::MbarrierWaitOp>(op))
    pred = wait.getPred();
  OpBuilder::InsertionGuard guard(b);
  if (pred) {
    auto ifOp = scf::IfOp::create(b, loc, scalars.lookup(pred), /*withElseRegion=*/false);
    b.setInsertionPoint(ifOp.thenBlock()->getTerminator());
  }
  if (auto arrive = dyn_cast<tilegpu::MbarrierArriveOp>(op)) {
    NVVM::MBarrierArriveOp::create(
        b, loc, TypeRange(), barrierAddress(bufferBytes(arrive.getBarriers(), arrive.getStage())),
        Value());
    return success();
  }
  if (auto arrive = dyn_cast<tilegpu::AsyncCopyArriveOp>(op)) {
    NVVM::CpAsyncMBarrierArriveOp::create(
        b, loc, barrierAddress(bufferBytes(arrive.getBarriers(), arrive.getStage())),
        /*noinc=*/true);
    return success();
  }
  auto wait = cast<tilegpu::MbarrierWaitOp>(op);
  NVVM::MBarrierTryWaitParityOp::create(
      b, loc, barrierAddress(bufferBytes(wait.getBarriers(), wait.getStage())),
      toI32(scalars.lookup(wait.getPhase())), ci32(1000000));
  return success();
}

LogicalResult MmaKernelBuilder::emitWarpSpecialize(tilegpu::WarpSpecializeOp op) {
  Location loc = op.getLoc();
  auto split = scf::IfOp::create(
      b, loc, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ult, tid, ci32(numThreads())),
      /*withElseRegion=*/true);
  OpBuilder::InsertionGuard guard(b);
  b.setInsertionPoint(split.thenBlock()->getTerminator());
  NVVM::SetMaxRegisterOp::create(b, loc, op.getConsumerRegisters(),
                                 NVVM::SetMaxRegisterAction::increase);
  consumerBarriers = true;
  LogicalResult consumers = emitBlock(op.getConsumers().front());
  consumerBarriers = false;
  if (failed(consumers))
    return failure();
  b.setInsertionPoint(split.elseBlock()->getTerminator());
  NVVM::SetMaxRegisterOp::create(b, loc, op.getProducerRegisters(),
                                 NVVM::SetMaxRegisterAction::decrease);
  copyTid = arith::SubIOp::create(b, loc, tid, ci32(numThreads()));
  copyThreads = producerThreads;
  emitTmaSetup(loc);
  LogicalResult producer = emitBlock(op.getProducer().front());
  copyTid = Value();
  copyThreads = 0;
  return producer;
}

} // namespace tessel::mma
