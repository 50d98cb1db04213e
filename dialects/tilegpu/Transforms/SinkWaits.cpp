//===- SinkWaits.cpp - a block's copies in flight together ------------------------===//
//
// tilegpu-sink-waits (Passes.td says the rule): a wait for a block loaded before a loop moves
// below the copies that follow it — the loop's prologue — so that the two memory latencies
// overlap instead of adding up.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUSINKWAITS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// Moves `wait` (with its fence and barrier, the local loads of the bytes it completes and
/// their pure users) below the copies that follow it in its block, up to the first op that
/// needs it. Returns whether it moved.
bool sink(AsyncWaitOp wait) {
  // The tail as allocate-shared writes it: wait, [fence], barrier.
  Operation *last = wait->getNextNode();
  if (auto fence = dyn_cast_or_null<FenceAsyncSharedOp>(last))
    last = fence->getNextNode();
  if (!isa_and_nonnull<gpu::BarrierOp>(last))
    return false;
  // What the wait completes: the bytes its groups' copies write.
  SmallVector<SharedBytes> landed;
  for (Value group : wait.getGroups()) {
    auto commit = group.getDefiningOp<AsyncCommitOp>();
    if (!commit || commit->getBlock() != wait->getBlock())
      return false;
    for (Value token : commit.getTokens()) {
      auto copy = token.getDefiningOp<AsyncCopyOp>();
      std::optional<SmallVector<SharedBytes>> bytes =
          copy ? sharedBytesOf(copy.getBuffer(), copy.getStage()) : std::nullopt;
      if (!bytes)
        return false;
      llvm::append_range(landed, *bytes);
    }
  }
  // Walk down from the barrier: reads of those bytes and what is computed from them move
  // with the wait; copies into other bytes, commits, barriers and pure ops stay above it.
  llvm::SetVector<Operation *> moving;
  moving.insert(wait);
  for (Operation *op = wait->getNextNode(); op != last->getNextNode(); op = op->getNextNode())
    moving.insert(op);
  int64_t commits = 0;
  Operation *stop = nullptr;
  for (Operation *op = last->getNextNode(); op; op = op->getNextNode()) {
    bool usesMoving = llvm::any_of(op->getOperands(), [&](Value v) {
      return v.getDefiningOp() && moving.contains(v.getDefiningOp());
    });
    if (auto read = dyn_cast<LocalLoadOp>(op)) {
      std::optional<SmallVector<SharedBytes>> bytes = sharedBytesOf(read.getBuffer(),
                                                                    read.getStage());
      if (!bytes) {
        stop = op;
        break;
      }
      if (anyOverlap(*bytes, landed) || usesMoving)
        moving.insert(op);
      continue;
    }
    if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
      std::optional<SmallVector<SharedBytes>> bytes = sharedBytesOf(copy.getBuffer(),
                                                                    copy.getStage());
      if (!bytes || anyOverlap(*bytes, landed) || usesMoving) {
        stop = op;
        break;
      }
      continue;
    }
    if (isa<AsyncCommitOp>(op)) {
      ++commits;
      continue;
    }
    // A scalar read of global memory (a page table, a block list: the prologue's addresses)
    // does not touch what the wait is about.
    if (isa<gpu::BarrierOp, AllocOp>(op) || (isa<tessel::tile::LoadScalarOp>(op) && !usesMoving))
      continue;
    if (op->getNumRegions() == 0 && isMemoryEffectFree(op) &&
        !op->hasTrait<OpTrait::IsTerminator>()) {
      if (usesMoving)
        moving.insert(op);
      continue;
    }
    stop = op;
    break;
  }
  if (!stop || commits == 0)
    return false;
  for (Operation *op : moving)
    op->moveBefore(stop);
  wait.setPending(wait.getPending() + commits);
  return true;
}

} // namespace

void tessel::tilegpu::sinkWaits(func::FuncOp program) {
  SmallVector<AsyncWaitOp> waits;
  // Waits outside loops: inside one, the pipelined schedule has placed them already.
  program.walk([&](AsyncWaitOp wait) {
    if (!streamingLoop(wait))
      waits.push_back(wait);
  });
  // The last first: an earlier wait then moves below the later ones' copies too.
  for (AsyncWaitOp wait : llvm::reverse(waits))
    sink(wait);
}

namespace {

struct SinkWaits : tessel::tilegpu::impl::TileGPUSinkWaitsBase<SinkWaits> {
  using Base::Base;

  void runOnOperation() override { sinkWaits(getOperation()); }
};

} // namespace
