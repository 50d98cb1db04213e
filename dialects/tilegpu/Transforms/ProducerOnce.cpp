//===- ProducerOnce.cpp - the producer copies the blocks loaded once a tile too -------------===//
//
// tilegpu-producer-once: in a warp-specialized program, the blocks the consumers load once a
// tile (Q) are copied by the producer as well, ahead of the tile's K/V, through buffers
// guarded by two mbarriers: `once_full` (the copies have landed) and `once_empty` (every
// consumer is past its last read of the block or of a value loaded from it). The consumers'
// copy, its wait and the CTA barriers around it become a wait for `once_full`. In a tile loop
// each block gets a second buffer where the shared memory allows, so the next tile's Q lands
// while this tile runs and the producer goes on into its K/V.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/SetVector.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUPRODUCERONCE
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// A block the consumers load once a tile, in allocate-shared's form: [barrier] copy, commit,
/// wait (pending 0), [fence], barrier.
struct OnceLoad {
  gpu::BarrierOp before;
  AsyncCopyOp copy;
  AsyncCommitOp commit;
  AsyncWaitOp wait;
  FenceAsyncSharedOp fence;
  gpu::BarrierOp after;
};

std::optional<OnceLoad> matchOnce(AsyncCopyOp copy) {
  OnceLoad l{};
  l.copy = copy;
  l.before = dyn_cast_or_null<gpu::BarrierOp>(copy->getPrevNode());
  if (!copy.getToken().hasOneUse())
    return std::nullopt;
  l.commit = dyn_cast<AsyncCommitOp>(*copy.getToken().getUsers().begin());
  if (!l.commit || l.commit.getTokens().size() != 1 || !l.commit.getGroup().hasOneUse())
    return std::nullopt;
  l.wait = dyn_cast<AsyncWaitOp>(*l.commit.getGroup().getUsers().begin());
  if (!l.wait || l.wait.getPending() != 0 || l.wait->getBlock() != copy->getBlock())
    return std::nullopt;
  Operation *next = l.wait->getNextNode();
  if ((l.fence = dyn_cast_or_null<FenceAsyncSharedOp>(next)))
    next = next->getNextNode();
  l.after = dyn_cast_or_null<gpu::BarrierOp>(next);
  if (!l.after)
    return std::nullopt;
  return l;
}

/// The index of the tile `block` runs for: (iv − lb) / step of its tile loop, or 0.
Value tileIndex(OpBuilder &b, Location loc, Block &block) {
  auto loop = dyn_cast<scf::ForOp>(block.getParentOp());
  if (!loop || !isTileLoop(loop))
    return constI32(b, loc, 0);
  Value from = arith::SubIOp::create(b, loc, loop.getInductionVar(), loop.getLowerBound());
  return arith::DivUIOp::create(b, loc, from, loop.getStep());
}

} // namespace

FailureOr<bool> tessel::tilegpu::producerOnce(func::FuncOp program, int64_t sharedLimit) {
  WarpSpecializeOp ws;
  program.walk([&](WarpSpecializeOp op) { ws = op; });
  if (!ws)
    return false;
  Block &consumers = tileBlock(ws.getConsumers().front());
  Block &producer = tileBlock(ws.getProducer().front());
  SmallVector<OnceLoad> loads;
  for (auto copy : consumers.getOps<AsyncCopyOp>()) {
    std::optional<OnceLoad> l = matchOnce(copy);
    if (!l || !l.value().copy.getBuffer().getDefiningOp<AllocOp>() ||
        l.value().copy.getBuffer().getType().getStages() != 1)
      return false;
    loads.push_back(*l);
  }
  if (loads.empty())
    return false;
  // The consumers' last op reading a once buffer: one that reads it (a load into registers, a
  // loop whose dots read it), or a value loaded from it as a dot operand, which the lowering
  // may read from shared memory at its use (takeAFragments) and loops may carry.
  llvm::SmallPtrSet<Value, 8> once;
  for (OnceLoad &l : loads)
    once.insert(l.copy.getBuffer());
  auto readsOnce = [&](Operation &top) {
    bool reads = top.walk([&](Operation *op) {
                      if (isa<AsyncCopyOp>(op))
                        return WalkResult::advance();
                      for (Value v : op->getOperands())
                        if (once.contains(v))
                          return WalkResult::interrupt();
                      return WalkResult::advance();
                    })
                     .wasInterrupted();
    if (reads)
      for (Value r : top.getResults())
        if (auto t = dyn_cast<RankedTensorType>(r.getType());
            t && isa_and_nonnull<DotOperandEncodingAttr>(t.getEncoding()))
          once.insert(r);
    return reads;
  };
  Operation *lastRead = nullptr;
  for (Operation &op : consumers.without_terminator())
    if (readsOnce(op))
      lastRead = &op;
  if (!lastRead)
    return false;
  // The producer must be able to compute every address (a descriptor of the tile's row).
  {
    OpBuilder probe(program.getContext());
    Block scratch;
    probe.setInsertionPointToStart(&scratch);
    IRMapping map;
    for (Block *b = &consumers; b->getParentOp() != ws; b = b->getParentOp()->getBlock())
      if (auto loop = dyn_cast<scf::ForOp>(b->getParentOp()))
        map.map(loop.getInductionVar(), loop.getInductionVar());
    bool ok = true;
    for (OnceLoad &l : loads) {
      ok &= succeeded(producerValue(probe, l.copy.getDesc(), map, ws));
      for (Value o : l.copy.getOffsets())
        ok &= succeeded(producerValue(probe, o, map, ws));
    }
    for (Operation &op : llvm::make_early_inc_range(llvm::reverse(scratch)))
      op.erase();
    if (!ok)
      return false;
  }

  Location loc = ws.getLoc();
  auto bytes = program->getAttrOfType<IntegerAttr>("tilegpu.shared_bytes");
  auto initBarrier = dyn_cast_or_null<gpu::BarrierOp>(ws->getPrevNode());
  if (!bytes || !initBarrier)
    return false;
  OpBuilder b(initBarrier);
  int64_t end = bytes.getInt();
  // In a tile loop, a second buffer each where the shared memory allows: the producer copies
  // the next tile's block while the consumers still read this one's. Each second stage goes
  // past the end, 1024-byte aligned (the 128-byte swizzle's period).
  int64_t buffers = 1;
  SmallVector<int64_t> second;
  int64_t past = end;
  for (OnceLoad &l : loads) {
    past = (past + 1023) / 1024 * 1024;
    second.push_back(past);
    past += l.copy.getBuffer().getType().getStageBytes();
  }
  if (isTileLoop(consumers.getParentOp()) && past + 64 <= sharedLimit) {
    buffers = 2;
    for (auto [l, at] : llvm::zip(loads, second)) {
      auto alloc = l.copy.getBuffer().getDefiningOp<AllocOp>();
      SharedBufferType t = alloc.getType();
      alloc.getResult().setType(SharedBufferType::get(b.getContext(), t.getShape(),
                                                      t.getElementType(), 2, t.getSwizzle()));
      alloc.setStrideAttr(b.getI64IntegerAttr(at - *alloc.getOffset()));
    }
    end = past;
  }
  // Two mbarriers (a stage per buffer) past the kernel's shared memory, initialised beside the
  // ring's.
  end = (end + 7) / 8 * 8;
  auto type = SharedBufferType::get(b.getContext(), {1}, b.getI64Type(), buffers, 0);
  auto barrier = [&](int64_t count) {
    Value v = AllocOp::create(b, loc, type, b.getI64IntegerAttr(end), IntegerAttr());
    end += type.getBytes();
    MbarrierInitOp::create(b, loc, v, b.getI32IntegerAttr(count));
    return v;
  };
  int64_t producerThreads = static_cast<int64_t>(ws.getProducerWarps()) * 32;
  int64_t consumerThreads = programLayout(program).getWarps() * 32;
  Value onceFull = barrier(producerThreads), onceEmpty = barrier(consumerThreads);
  program->setAttr("tilegpu.shared_bytes", b.getI64IntegerAttr(end));
  // Tile i uses buffer i mod buffers, in lap (i / buffers) mod 2 of its barriers.
  auto slotAndLap = [&](OpBuilder &at, Block &block) -> std::pair<Value, Value> {
    Value i = tileIndex(at, loc, block), n = constI32(at, loc, buffers), one = constI32(at, loc, 1);
    Value slot = arith::RemUIOp::create(at, loc, i, n);
    Value lap = arith::AndIOp::create(at, loc, arith::DivUIOp::create(at, loc, i, n), one);
    return {slot, lap};
  };

  // The producer: each tile, once the consumers are past their last read of the buffer (the
  // previous tile's with one buffer, the one before with two), the copies, then one arrival
  // as they land.
  OpBuilder pb = OpBuilder::atBlockBegin(&producer);
  auto [slot, lap] = slotAndLap(pb, producer);
  MbarrierWaitOp::create(pb, loc, onceEmpty, slot,
                         arith::XOrIOp::create(pb, loc, lap, constI32(pb, loc, 1)), Value());
  IRMapping map;
  for (OnceLoad &l : loads) {
    // The consumers' tile loop variable is the producer's (both walk the same tiles).
    for (Block *cb = &consumers, *pbk = &producer; cb->getParentOp() != ws;
         cb = cb->getParentOp()->getBlock(), pbk = pbk->getParentOp()->getBlock())
      if (auto loop = dyn_cast<scf::ForOp>(cb->getParentOp()))
        map.map(loop.getInductionVar(), cast<scf::ForOp>(pbk->getParentOp()).getInductionVar());
    FailureOr<Value> desc = producerValue(pb, l.copy.getDesc(), map, ws);
    SmallVector<Value> offsets;
    for (Value o : l.copy.getOffsets())
      offsets.push_back(*producerValue(pb, o, map, ws));
    AsyncCopyOp::create(pb, loc, AsyncTokenType::get(pb.getContext()), *desc, offsets,
                        l.copy.getBuffer(), slot, Value());
  }
  AsyncCopyArriveOp::create(pb, loc, onceFull, slot);

  // The consumers: a wait for the copies where the first was waited for, reads from the tile's
  // buffer, an arrival on once_empty after the last read.
  OpBuilder cb(loads.front().wait);
  auto [cslot, clap] = slotAndLap(cb, consumers);
  MbarrierWaitOp::create(cb, loc, onceFull, cslot, clap, Value());
  for (OnceLoad &l : loads)
    for (Operation *user : l.copy.getBuffer().getUsers())
      if (auto read = dyn_cast<LocalLoadOp>(user);
          read && consumers.getParentOp()->isAncestor(read))
        read.getStageMutable().assign(cslot);
  OpBuilder ab(&consumers, std::next(Block::iterator(lastRead)));
  MbarrierArriveOp::create(ab, loc, onceEmpty, cslot, Value());
  // The barriers around the copies go (one may be both another load's `after` and this one's
  // `before`).
  llvm::SetVector<Operation *> barriers;
  for (OnceLoad &l : loads) {
    if (l.before && isTileLoop(consumers.getParentOp()))
      barriers.insert(l.before);
    barriers.insert(l.after);
  }
  for (Operation *op : barriers)
    op->erase();
  for (OnceLoad &l : loads) {
    SmallVector<Value> address{l.copy.getDesc()};
    llvm::append_range(address, l.copy.getOffsets());
    if (l.fence)
      l.fence.erase();
    l.wait.erase();
    l.commit.erase();
    l.copy.erase();
    eraseIfDead(address);
  }
  return true;
}

namespace {

struct ProducerOnce : tessel::tilegpu::impl::TileGPUProducerOnceBase<ProducerOnce> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(producerOnce(getOperation(), sharedLimit)))
      signalPassFailure();
  }
};

} // namespace
