//===- OverlapWgmma.cpp - FA3's intra-warpgroup overlap as IR -------------===//
//
// tilegpu-overlap-wgmma (Passes.td says the schedule): the two dots of an attention loop become
// tilegpu.wgmma groups whose waits are explicit, P·V one iteration late, and its V copy with it.
// docs/dev/codegen-wgmma.md ("Overlap inside a warpgroup") explains why it pays.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/AttentionDots.h"
#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/SetVector.h"

#include <optional>

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUOVERLAPWGMMA
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// A loop with the attention shape, in allocate-shared's form.
struct AttentionLoop : AttentionDots {
  scf::ForOp loop;
  UnpipelinedLoad k, v;
};

/// What a loop leaves to the next one: the stage it starts in, the pending P·V, and the copy
/// group still in flight (V_last's, which the drain waits for).
struct Pending {
  Value stage, p, vBuffer, vStage, group;
};

std::optional<AttentionLoop> match(scf::ForOp loop) {
  int64_t stages;
  SmallVector<UnpipelinedLoad> loads = matchUnpipelinedLoads(loop, stages);
  if (loads.size() != 2 || stages != 2)
    return std::nullopt;
  std::optional<AttentionDots> dots = matchAttentionDots(loop);
  if (!dots || dots->kRead.getBuffer() != loads[0].copy.getBuffer() ||
      dots->vRead.getBuffer() != loads[1].copy.getBuffer())
    return std::nullopt;
  // The first iteration's spare P·V reads the K block as V: the buffers must be alike.
  auto kAlloc = dots->kRead.getBuffer().getDefiningOp<AllocOp>();
  auto vAlloc = dots->vRead.getBuffer().getDefiningOp<AllocOp>();
  if (!kAlloc || !vAlloc || kAlloc.getType() != vAlloc.getType() ||
      kAlloc.getStageStride() != vAlloc.getStageStride())
    return std::nullopt;
  AttentionLoop m;
  static_cast<AttentionDots &>(m) = *dots;
  m.loop = loop;
  m.k = loads[0];
  m.v = loads[1];
  return m;
}

/// Whether loop `next` can take over the pending P·V of loop `m`: it overlaps too, starts from
/// m's O, follows with nothing between that touches memory, and its K and V blocks live where
/// m's do (so its first copies cannot overwrite the V block still to be read).
bool takesOver(AttentionLoop m, AttentionLoop next) {
  Value o = m.loop.getResult(m.accIndex);
  if (!o.hasOneUse() || next.loop.getInitArgs()[next.accIndex] != o ||
      next.loop->getBlock() != m.loop->getBlock())
    return false;
  for (Operation *it = m.loop->getNextNode(); it && it != next.loop.getOperation();
       it = it->getNextNode())
    if (!isMemoryEffectFree(it))
      return false;
  auto offset = [](Value buffer) { return buffer.getDefiningOp<AllocOp>().getOffset(); };
  return offset(m.k.copy.getBuffer()) == offset(next.k.copy.getBuffer()) &&
         offset(m.v.copy.getBuffer()) == offset(next.v.copy.getBuffer()) &&
         m.k.copy.getBuffer().getType() == next.k.copy.getBuffer().getType();
}

/// Rewrites loop `m` into the overlapped schedule, starting from `from` (the previous loop's
/// pending P·V) or from nothing; returns what it leaves pending after its last iteration.
FailureOr<Pending> overlap(AttentionLoop &m, std::optional<Pending> from) {
  scf::ForOp loop = m.loop;
  Location loc = loop.getLoc();
  IRRewriter rw(loop.getContext());
  rw.setInsertionPoint(loop);
  Value kBuffer = m.k.copy.getBuffer(), vBuffer = m.v.copy.getBuffer();
  auto tokenType = AsyncTokenType::get(rw.getContext());
  Pending start;
  if (from) {
    start = *from;
  } else {
    Value zero = constI32(rw, loc, 0);
    auto pType = cast<RankedTensorType>(m.pvDot.getA().getType());
    Value p = arith::ConstantOp::create(
        rw, loc, DenseElementsAttr::get(pType, rw.getZeroAttr(pType.getElementType())));
    start = {zero, p, kBuffer, zero, Value()};
  }
  // Every thread is done with the ring; then K of the first iteration, unconditionally: the
  // spare first P·V reads it.
  gpu::BarrierOp::create(rw, loc);
  IRMapping firstBuilt;
  CopyAddress firstK = addressAt(rw, m.k.copy, loop, {loop.getInductionVar()}, loop.getLowerBound(),
                                 firstBuilt);
  Value first = AsyncCopyOp::create(rw, loc, tokenType, firstK.desc, firstK.offsets, kBuffer,
                                    start.stage, Value());
  Value group = AsyncCommitOp::create(rw, loc, tokenType, ValueRange{first});
  SmallVector<Value> carried{start.stage, group, start.p, start.vBuffer, start.vStage};
  Value oldIv = loop.getInductionVar();
  llvm::SetVector<Value> oldStages;
  for (Value stage :
       {m.k.copy.getStage(), m.kRead.getStage(), m.v.copy.getStage(), m.vRead.getStage()})
    oldStages.insert(stage);
  FailureOr<LoopLikeOpInterface> replaced = loop.replaceWithAdditionalYields(
      rw, carried, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location, ArrayRef<BlockArgument> args) -> SmallVector<Value> {
        auto newLoop = cast<scf::ForOp>(args.front().getOwner()->getParentOp());
        Value iv = newLoop.getInductionVar();
        Value stage = args[0], inFlight = args[1], p = args[2], pvBuffer = args[3],
              pvStage = args[4];
        Value o = loop.getRegionIterArgs()[m.accIndex];
        // The body is still the old loop's here: it moves into the new loop afterwards.
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(m.k.copy);
        // K_j and V_{j-1} have landed, for the async proxy and for every thread.
        AsyncWaitOp::create(b, loc, ValueRange{inFlight}, 0);
        FenceAsyncSharedOp::create(b, loc);
        gpu::BarrierOp::create(b, loc);
        Value s = WgmmaOp::create(b, m.sDot.getLoc(), m.sDot.getResult().getType(), m.sDot.getA(),
                                  kBuffer, stage, m.sDot.getAcc(), /*transpose_b=*/true);
        Value pv = WgmmaOp::create(b, m.pvDot.getLoc(), m.pvDot.getResult().getType(), p, pvBuffer,
                                   pvStage, o, /*transpose_b=*/false);
        // While both run: K_{j+1} into the other stage (last read by S_{j-1}, complete), V_j
        // into this one (last read by P_{j-2}·V_{j-2}, complete).
        Value next = arith::AddIOp::create(b, loc, iv, newLoop.getStep());
        Value more = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, next,
                                           newLoop.getUpperBound());
        Value otherStage = addMod(b, loc, stage, 1, 2);
        IRMapping nextBuilt, thisBuilt; // two iterations: nothing shared
        CopyAddress kAt = addressAt(b, m.k.copy, loop, {oldIv, iv}, next, nextBuilt);
        CopyAddress vAt = addressAt(b, m.v.copy, loop, {oldIv, iv}, iv, thisBuilt);
        Value kCopy = AsyncCopyOp::create(b, loc, tokenType, kAt.desc, kAt.offsets, kBuffer,
                                          otherStage, more);
        Value vCopy = AsyncCopyOp::create(b, loc, tokenType, vAt.desc, vAt.offsets, vBuffer, stage,
                                          Value());
        Value nextGroup = AsyncCommitOp::create(b, loc, tokenType, ValueRange{kCopy, vCopy});
        // S_j is in; P_{j-1}·V_{j-1} still runs under the softmax.
        auto sWait = WgmmaWaitOp::create(b, loc, TypeRange{s.getType()}, ValueRange{s}, 1);
        m.sDot.getResult().replaceAllUsesWith(sWait.getResult(0));
        // O is complete before f(O); the wait also ties P_j, so that what makes it stays above.
        b.setInsertionPoint(m.pvDot);
        Value pj = m.pvDot.getA();
        auto oWait = WgmmaWaitOp::create(b, loc, TypeRange{pv.getType(), pj.getType()},
                                         ValueRange{pv, pj}, 0);
        yieldWaitedO(m, b, oWait.getResult(0), loop.getBody());
        m.k.erase();
        m.v.erase();
        for (Value old : oldStages) {
          old.replaceAllUsesWith(stage);
          eraseIfDead(old);
        }
        return {otherStage, nextGroup, oWait.getResult(1), vBuffer, stage};
      });
  if (failed(replaced))
    return failure();
  auto newLoop = cast<scf::ForOp>(replaced->getOperation());
  unsigned n = newLoop.getNumResults() - carried.size();
  auto results = newLoop.getResults();
  return Pending{results[n], results[n + 2], results[n + 3], results[n + 4], results[n + 1]};
}

/// After the last overlapped loop of a chain: V_last lands, then the last P·V.
void drain(scf::ForOp loop, unsigned accIndex, const Pending &pending) {
  Location loc = loop.getLoc();
  OpBuilder b(loop.getContext());
  b.setInsertionPointAfter(loop);
  AsyncWaitOp::create(b, loc, ValueRange{pending.group}, 0);
  FenceAsyncSharedOp::create(b, loc);
  gpu::BarrierOp::create(b, loc);
  Value o = loop.getResult(accIndex);
  Value pv = WgmmaOp::create(b, loc, o.getType(), pending.p, pending.vBuffer, pending.vStage, o,
                             /*transpose_b=*/false);
  auto wait = WgmmaWaitOp::create(b, loc, TypeRange{o.getType()}, ValueRange{pv}, 0);
  o.replaceAllUsesExcept(wait.getResult(0), pv.getDefiningOp());
}

struct OverlapWgmma : tessel::tilegpu::impl::TileGPUOverlapWgmmaBase<OverlapWgmma> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(overlapWgmma(getOperation())))
      signalPassFailure();
  }
};

} // namespace

LogicalResult tessel::tilegpu::overlapWgmma(func::FuncOp program) {
  SmallVector<AttentionLoop> loops;
  program.walk([&](scf::ForOp loop) {
    if (std::optional<AttentionLoop> m = match(loop))
      loops.push_back(*m);
  });
  std::optional<Pending> pending;
  Value kShared, vShared;
  for (size_t i = 0; i < loops.size(); ++i) {
    AttentionLoop &m = loops[i];
    bool handOver = i + 1 < loops.size() && takesOver(m, loops[i + 1]);
    Value kBuffer = m.k.copy.getBuffer(), vBuffer = m.v.copy.getBuffer();
    if (pending) {
      // The loop reads the buffers of the loop it takes over (they are placed alike).
      for (auto [own, shared] : {std::pair(kBuffer, kShared), std::pair(vBuffer, vShared)}) {
        if (own == shared)
          continue;
        Operation *alloc = own.getDefiningOp();
        own.replaceAllUsesWith(shared);
        alloc->erase();
      }
    } else {
      kShared = kBuffer;
      vShared = vBuffer;
    }
    FailureOr<Pending> left = overlap(m, pending);
    if (failed(left))
      return failure();
    auto loop = cast<scf::ForOp>(left->stage.getDefiningOp());
    if (handOver) {
      pending = *left;
      // The next loop starts from the stage after this one's last.
      continue;
    }
    drain(loop, m.accIndex, *left);
    pending.reset();
  }
  return success();
}
