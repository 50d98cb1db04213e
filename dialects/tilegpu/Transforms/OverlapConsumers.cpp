//===- OverlapConsumers.cpp - FA3's intra-warpgroup overlap beside a producer -----------===//
//
// tilegpu-overlap-consumers (Passes.td says the schedule): in the consumers of a
// tilegpu.warp_specialize, the two dots of an attention loop become wgmma groups whose waits
// are explicit, P·V one iteration late, so that each warpgroup's softmax runs under its own
// P·V. The producer is untouched: the consumers only wait for V one iteration later and release
// K and V on their own barriers (tilegpu-warp-specialize gives each load one).
//
//===--------------------------------------------------------------------------------------===//

#include "tile/Transforms/MaskAnalysis.h"
#include "tilegpu/Transforms/AttentionDots.h"
#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Utils/StaticValueUtils.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "mlir/IR/PatternMatch.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUOVERLAPCONSUMERS
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

namespace {

/// A consumer loop in tilegpu-warp-specialize's form with the attention shape: K's and V's
/// full barriers waited for (then a fence) right before each is read, both released at the end
/// of the body, at the stage `count mod S` of the iteration count the loop carries last.
struct ConsumerLoop : AttentionDots {
  scf::ForOp loop;
  MbarrierWaitOp kWait, vWait;
  FenceAsyncSharedOp vFence;
  MbarrierArriveOp kRelease, vRelease;
  int64_t stages = 0;
};

std::optional<ConsumerLoop> match(scf::ForOp loop, bool transposedV) {
  std::optional<AttentionDots> dots = matchAttentionDots(loop, transposedV);
  if (!dots)
    return std::nullopt;
  ConsumerLoop m;
  static_cast<AttentionDots &>(m) = *dots;
  m.loop = loop;
  Block *body = loop.getBody();
  FenceAsyncSharedOp kFence;
  m.kWait = waitBefore(m.kRead, kFence);
  m.vWait = waitBefore(m.vRead, m.vFence);
  if (!m.kWait || !m.vWait || m.kWait->getBlock() != body || m.vWait->getBlock() != body ||
      !m.kWait->isBeforeInBlock(m.vWait) || m.kWait.getPhase() != m.vWait.getPhase() ||
      m.kWait.getStage() != m.vWait.getStage())
    return std::nullopt;
  // The count: the last iter_arg, yielded plus one; the stage is count mod S.
  BlockArgument count = loop.getRegionIterArgs().back();
  Operation *yield = body->getTerminator();
  auto next = yield->getOperands().back().getDefiningOp<arith::AddIOp>();
  auto stage = m.kWait.getStage().getDefiningOp<arith::RemUIOp>();
  m.stages = m.kWait.getBarriers().getType().getStages();
  if (!count.getType().isInteger(32) || !next || next.getLhs() != count ||
      !matchPattern(next.getRhs(), m_One()) || !stage || stage.getLhs() != count ||
      getConstantIntValue(stage.getRhs()) != m.stages)
    return std::nullopt;
  // The releases: K's then V's, in the order of the loads (tilegpu-warp-specialize's empty[i]).
  SmallVector<MbarrierArriveOp> releases(body->getOps<MbarrierArriveOp>());
  if (releases.size() != 2 || llvm::any_of(releases, [&](MbarrierArriveOp a) {
        return a.getPred() || a.getStage() != m.kWait.getStage();
      }))
    return std::nullopt;
  m.kRelease = releases[0];
  m.vRelease = releases[1];
  return m;
}

/// The registers a consumer thread holds of `tile` (its share of the elements, 32 bits each).
int64_t registersOf(Value tile, int64_t consumerThreads) {
  auto type = cast<RankedTensorType>(tile.getType());
  return type.getNumElements() * type.getElementTypeBitWidth() / 32 / consumerThreads;
}

/// The registers a consumer thread holds across the softmax in the overlapped schedule: S_j,
/// O and P_{j−1} in flight (Q, the A of S, stays in shared memory: the lowering reads a
/// once-loaded A block of a warp-specialized kernel by descriptor); plus about 40 for
/// addresses, row statistics and indices. Where that is more than the consumers get (d256:
/// S 64 + O 128 + P 32), ptxas would spill: the loop keeps the synchronous dots.
int64_t overlapRegisters(ConsumerLoop m, int64_t consumerThreads) {
  return registersOf(m.sDot.getResult(), consumerThreads) +
         registersOf(m.pvDot.getResult(), consumerThreads) +
         registersOf(m.pvDot.getA(), consumerThreads) + 40;
}

/// Whether `masked-synchronous` leaves a masked loop (tile.block_mask "mixed": a split's
/// boundary blocks, or a loop whose every block runs its mask) synchronous. d256 was kept
/// overlapped while its synchronous copy spilled 4-8 bytes (CUDA 13.0, 128x64, before the
/// thirty-second session's register split); it spills nothing now (test_spills.py).
bool leaveSynchronous(scf::ForOp loop) { return tessel::tile::hasBlockMaskKind(loop, "mixed"); }

/// The same with P_j made after the previous P·V is waited for (overlap's `lateP`): S_j, O and
/// one P, and about 32 more (ptxas, CUDA 13.0: d64's 192×128 consumers spill nothing at 160
/// registers a thread and 64–128 bytes at 152).
int64_t lateOverlapRegisters(ConsumerLoop m, int64_t consumerThreads) {
  return overlapRegisters(m, consumerThreads) - 8;
}

/// What a producer that only copies by cp.async keeps (FA3's beside three consumer
/// warpgroups); one that builds TMA maps or transposes blocks through its registers keeps more.
constexpr int64_t kLeanProducerRegisters = 24;

/// The registers of (producer, consumer) threads once a producer that only copies by cp.async
/// (no TMA map, no transposed block) keeps what the consumers leave above
/// kLeanProducerRegisters, the roles' total unchanged (what the launch reserves: a
/// setmaxnreg.inc past it would wait for ever); theirs now where the producer is not of that
/// kind.
std::pair<int64_t, int64_t> withLeanProducer(WarpSpecializeOp ws, int64_t consumerThreads) {
  bool lean = true;
  ws.getProducer().walk([&](AsyncCopyOp copy) {
    auto alloc = copy.getBuffer().getDefiningOp<AllocOp>();
    lean &= !copy->hasAttr("tma_map") && !(alloc && alloc->hasAttr(kTransposedAttr));
  });
  int64_t producerThreads = 32 * static_cast<int64_t>(ws.getProducerWarps());
  int64_t total = producerThreads * ws.getProducerRegisters() +
                  consumerThreads * ws.getConsumerRegisters();
  if (!lean || ws.getProducerRegisters() <= kLeanProducerRegisters)
    return {ws.getProducerRegisters(), ws.getConsumerRegisters()};
  int64_t consumer = std::min<int64_t>(240, (total - producerThreads * kLeanProducerRegisters) /
                                                consumerThreads / 8 * 8);
  return {(total - consumerThreads * consumer) / producerThreads / 8 * 8, consumer};
}

/// Waits (where `pred`, or always when it is null) for the V block of count − 1, the one a
/// P·V issued at count reads; returns its stage.
Value waitForPendingV(OpBuilder &b, Location loc, Value count, Value fullV, int64_t stages,
                      Value pred) {
  Value prev = arith::SubIOp::create(b, loc, count, constI32(b, loc, 1));
  auto [stage, phase] = stageAndPhase(b, loc, prev, stages);
  MbarrierWaitOp::create(b, loc, fullV, stage, phase, pred);
  return stage;
}

/// The first iteration of `m`'s loop, peeled in front of it (a loop of at most one iteration):
/// S_0 and its softmax as the plain schedule has them, without P_0·V_0. It yields P_0 and the
/// stage of V_0 beside the loop's values; V_0 is neither waited for nor released there (the
/// loop's first iteration does both). The loop then starts one step later.
FailureOr<scf::ForOp> peelFirst(IRRewriter &rw, ConsumerLoop &m) {
  scf::ForOp loop = m.loop;
  Location loc = loop.getLoc();
  rw.setInsertionPoint(loop);
  IRMapping copy;
  scf::ForOp peel = peelFirstIteration(rw, loop, copy);
  auto pvDot = cast<tessel::tile::DotOp>(copy.lookup(m.pvDot.getOperation()));
  Value p = pvDot.getA(), stage = copy.lookupOrDefault(m.kWait.getStage());
  pvDot.getResult().replaceAllUsesWith(pvDot.getAcc());
  rw.eraseOp(pvDot);
  for (Operation *op : {m.vRead.getOperation(), m.vRelease.getOperation(), m.vFence.getOperation(),
                        m.vWait.getOperation()})
    rw.eraseOp(copy.lookup(op));
  // Values for a peel that runs no iteration: the loop after it runs none either, and the
  // drain's result is discarded then.
  rw.setInsertionPoint(peel);
  auto pType = cast<RankedTensorType>(p.getType());
  Value p0 = arith::ConstantOp::create(
      rw, loc, DenseElementsAttr::get(pType, rw.getZeroAttr(pType.getElementType())));
  Value stage0 = constI32(rw, loc, 0);
  FailureOr<LoopLikeOpInterface> grown = peel.replaceWithAdditionalYields(
      rw, ValueRange{p0, stage0}, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &, Location, ArrayRef<BlockArgument>) -> SmallVector<Value> {
        return {p, stage};
      });
  if (failed(grown))
    return failure();
  auto peeled = cast<scf::ForOp>(grown->getOperation());
  loop.getInitArgsMutable().assign(peeled.getResults().take_front(loop.getNumRegionIterArgs()));
  return peeled;
}

/// α's row vector where O's rescale is O·broadcast(expand_dims(α)) (tile-online-softmax's
/// form), with the two ops that make the tile of it; null otherwise.
struct RowRescale {
  Value alpha;
  tessel::tile::ExpandDimsOp expand;
  tessel::tile::BroadcastOp broadcast;
};
std::optional<RowRescale> rowRescale(ConsumerLoop &m) {
  if (!m.rescale)
    return std::nullopt;
  auto broadcast = m.rescale.getRhs().getDefiningOp<tessel::tile::BroadcastOp>();
  auto expand = broadcast ? broadcast.getInput().getDefiningOp<tessel::tile::ExpandDimsOp>()
                          : tessel::tile::ExpandDimsOp();
  if (!expand)
    return std::nullopt;
  return RowRescale{expand.getInput(), expand, broadcast};
}

/// O·α as a tile, α's tile made again from the row vector `alpha` at `b`.
Value rescaled(OpBuilder &b, Location loc, Value o, RowRescale r, Value alpha) {
  IRMapping map;
  map.map(r.alpha, alpha);
  Operation *expand = b.clone(*r.expand, map);
  map.map(r.expand.getResult(), expand->getResult(0));
  Operation *broadcast = b.clone(*r.broadcast, map);
  return arith::MulFOp::create(b, loc, o, broadcast->getResult(0));
}

/// Rewrites `m` into the overlapped schedule, its first iteration peeled, and drains its last
/// P·V after it. `lateP`: P_j is converted to 16 bits after P_{j−1}·V_{j−1} is waited for, so
/// that one P is live at a time instead of two (FA3's order; the float exponentials are tied
/// through the wait, so that the conversion cannot move above it). `rescaleUnderS`: O's rescale
/// by α_j is made in iteration j+1, between S_{j+1}'s group and P_j·V_j's, where S's wgmma
/// runs beside it, not after O's wait, where the warpgroup's tensor work has ended; the loop
/// carries α_j's row vector (1 into its first iteration, the peel's O being scaled) and the
/// drain makes O·α_last before its P·V. The same products of the same values: the results are
/// bit for bit the same.
LogicalResult overlap(ConsumerLoop &m, bool lateP, bool rescaleUnderS) {
  scf::ForOp loop = m.loop;
  Location loc = loop.getLoc();
  IRRewriter rw(loop.getContext());
  Value vBuffer = m.vRead.getBuffer();
  bool vTransposed = m.vRead.getTranspose();
  Value fullV = m.vWait.getBarriers(), emptyK = m.kRelease.getBarriers(),
        emptyV = m.vRelease.getBarriers();
  Value first = loop.getInitArgs().back();
  FailureOr<scf::ForOp> peeled = peelFirst(rw, m);
  if (failed(peeled))
    return failure();
  unsigned n0 = loop.getNumRegionIterArgs();
  rw.setInsertionPoint(loop);
  SmallVector<Value> carried{peeled->getResult(n0), vBuffer, peeled->getResult(n0 + 1)};
  std::optional<RowRescale> rowScale = rescaleUnderS ? rowRescale(m) : std::nullopt;
  if (rowScale) {
    auto rowType = cast<RankedTensorType>(rowScale->alpha.getType());
    carried.push_back(arith::ConstantOp::create(
        rw, loc, DenseElementsAttr::get(rowType, rw.getFloatAttr(rowType.getElementType(), 1.0))));
  }
  unsigned countIndex = n0 - 1;
  FailureOr<LoopLikeOpInterface> replaced = loop.replaceWithAdditionalYields(
      rw, carried, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location, ArrayRef<BlockArgument> args) -> SmallVector<Value> {
        // The body is still the old loop's here: it moves into the new loop afterwards.
        Value p = args[0], pvBuffer = args[1], pvStage = args[2];
        Value count = loop.getRegionIterArgs()[countIndex];
        Value stage = m.kWait.getStage();
        Value o = loop.getRegionIterArgs()[m.accIndex];
        OpBuilder::InsertionGuard guard(b);
        // V_{j−1} has landed too before the dots.
        b.setInsertionPointAfter(m.kWait);
        Value vStage = waitForPendingV(b, loc, count, fullV, m.stages, Value());
        // S_j and P_{j−1}·V_{j−1} as two groups.
        b.setInsertionPoint(m.kRead);
        Value s = WgmmaOp::create(b, m.sDot.getLoc(), m.sDot.getResult().getType(), m.sDot.getA(),
                                  m.kRead.getBuffer(), stage, m.sDot.getAcc(),
                                  /*transpose_b=*/true);
        if (rowScale)
          o = rescaled(b, loc, o, *rowScale, args[3]);
        Value pv = WgmmaOp::create(b, m.pvDot.getLoc(), m.pvDot.getResult().getType(), p, pvBuffer,
                                   pvStage, o, /*transpose_b=*/vTransposed);
        // S_j is in: K_j is free.
        auto sWait = WgmmaWaitOp::create(b, loc, TypeRange{s.getType()}, ValueRange{s}, 1);
        MbarrierArriveOp::create(b, loc, emptyK, stage, Value());
        m.sDot.getResult().replaceAllUsesWith(sWait.getResult(0));
        // O is complete before f(O); the wait also ties P_j, so that what makes it stays above
        // (or, late, the exponentials P_j is made of, below).
        b.setInsertionPoint(m.pvDot);
        Value pj = m.pvDot.getA();
        auto cvt = pj.getDefiningOp<ConvertLayoutOp>();
        auto trunc = cvt ? cvt.getInput().getDefiningOp<arith::TruncFOp>() : arith::TruncFOp();
        bool late = lateP && trunc && cvt->hasOneUse() && trunc->hasOneUse();
        Value tied = late ? trunc.getIn() : pj;
        auto oWait = WgmmaWaitOp::create(b, loc, TypeRange{pv.getType(), tied.getType()},
                                         ValueRange{pv, tied}, 0);
        Value next = oWait.getResult(1);
        if (late) {
          next = ConvertLayoutOp::create(
              b, loc, cvt.getType(),
              arith::TruncFOp::create(b, loc, trunc.getType(), oWait.getResult(1)));
        }
        MbarrierArriveOp::create(b, loc, emptyV, vStage, Value());
        yieldWaitedO(m, b, oWait.getResult(0), loop.getBody(), /*applyRescale=*/!rowScale);
        if (late) {
          cvt.erase();
          trunc.erase();
        }
        m.vFence.erase();
        m.vWait.erase();
        m.kRelease.erase();
        m.vRelease.erase();
        if (!rowScale)
          return {next, vBuffer, stage};
        return {next, vBuffer, stage, rowScale->alpha};
      });
  if (failed(replaced))
    return failure();
  auto grown = cast<scf::ForOp>(replaced->getOperation());
  unsigned n = grown.getNumResults() - carried.size();
  Value p = grown.getResult(n), pvBuffer = grown.getResult(n + 1), pvStage = grown.getResult(n + 2),
        end = grown.getResult(countIndex);
  // The drain: V_last lands, then the last P·V, in a loop of at most one iteration. A loop that
  // ran no iteration (not even the peeled one: a tile's masked key blocks where it has none)
  // has nothing pending, and issues no P·V: O is kept as it was. (A P·V of P = 0 against a
  // stale stage, selected away afterwards, cost every dense tile a ninth P·V at 1k keys.)
  OpBuilder b(grown.getContext());
  b.setInsertionPointAfter(grown);
  Value real = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::ne, end, first);
  Value zero = constI32(b, loc, 0), one = constI32(b, loc, 1);
  Value trips = arith::SelectOp::create(b, loc, real, one, zero);
  Value o = grown.getResult(m.accIndex);
  auto drain = scf::ForOp::create(b, loc, zero, trips, one, ValueRange{o});
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(drain.getBody());
    Value lastStage = waitForPendingV(b, loc, end, fullV, m.stages, Value());
    FenceAsyncSharedOp::create(b, loc);
    Value in = drain.getRegionIterArgs()[0];
    // The last α, in the drain: where it runs no iteration nothing is pending and α is 1 (the
    // loop ran none) or already applied (the peel's). O' in place, not a copy beside it: ptxas
    // (CUDA 13.0) serialized the wgmmas for registers with the product made before the drain.
    if (rowScale)
      in = rescaled(b, loc, in, *rowScale, grown.getResult(n + 3));
    auto pv = WgmmaOp::create(b, loc, o.getType(), p, pvBuffer, pvStage, in,
                              /*transpose_b=*/vTransposed);
    auto wait = WgmmaWaitOp::create(b, loc, TypeRange{o.getType()}, ValueRange{pv}, 0);
    MbarrierArriveOp::create(b, loc, emptyV, lastStage, Value());
    scf::YieldOp::create(b, loc, wait.getResult(0));
  }
  o.replaceAllUsesExcept(drain.getResult(0), drain);
  // The body's own α tile fed only the rescale it no longer makes.
  if (rowScale && rowScale->broadcast->use_empty())
    rowScale->broadcast.erase();
  if (rowScale && rowScale->expand->use_empty())
    rowScale->expand.erase();
  return success();
}

struct OverlapConsumers : tessel::tilegpu::impl::TileGPUOverlapConsumersBase<OverlapConsumers> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(
            overlapConsumers(getOperation(), lateP, transposedV, maskedSynchronous, rescaleUnderS)))
      signalPassFailure();
  }
};

} // namespace

std::optional<int64_t> tessel::tilegpu::overlapHeadroom(func::FuncOp program, bool transposedV) {
  std::optional<int64_t> least;
  program.walk([&](WarpSpecializeOp ws) {
    int64_t threads = programLayout(program).getWarps() * 32;
    for (auto loop : tileBlock(ws.getConsumers().front()).getOps<scf::ForOp>())
      if (std::optional<ConsumerLoop> m = match(loop, transposedV)) {
        int64_t left = ws.getConsumerRegisters() - overlapRegisters(*m, threads);
        least = std::min(least.value_or(left), left);
      }
  });
  return least && *least >= 0 ? least : std::nullopt;
}

FailureOr<bool> tessel::tilegpu::overlapConsumers(func::FuncOp program, bool lateP,
                                                  bool transposedV, bool maskedSynchronous,
                                                  bool rescaleUnderS) {
  SmallVector<ConsumerLoop> loops;
  WarpSpecializeOp ws;
  int64_t threads = programLayout(program).getWarps() * 32, need = 0, needLate = 0;
  program.walk([&](WarpSpecializeOp op) {
    ws = op;
    SmallVector<std::pair<ConsumerLoop, bool>> matched;
    for (auto loop : tileBlock(ws.getConsumers().front()).getOps<scf::ForOp>())
      if (std::optional<ConsumerLoop> m = match(loop, transposedV))
        matched.push_back({*m, maskedSynchronous && leaveSynchronous(loop)});
    // The masked loops (the split's boundary blocks: a pipeline of one or two steps is all
    // peel and drain; a block-sparse kernel's partial blocks) are left synchronous beside a
    // loop that keeps the overlap; a kernel of masked loops alone keeps it on them.
    bool besideOverlapped = llvm::any_of(matched, [](auto &lm) { return !lm.second; });
    for (auto &[m, synchronous] : matched) {
      if (synchronous && besideOverlapped)
        continue;
      need = std::max(need, overlapRegisters(m, threads));
      needLate = std::max(needLate, lateOverlapRegisters(m, threads));
      loops.push_back(m);
    }
  });
  if (loops.empty())
    return false;
  // Where the schedule does not fit (d64's three consumer warpgroups: 152 registers each
  // beside a 56-register TMA producer), its late-P form may, with the registers a cp.async
  // producer can give (FA3's d64 kernel: 160 and 32).
  if (need <= ws.getConsumerRegisters())
    lateP = false;
  else if (!lateP)
    return false;
  else {
    auto [producer, consumer] = withLeanProducer(ws, threads);
    if (needLate > consumer)
      return false;
    ws.setProducerRegisters(producer);
    ws.setConsumerRegisters(consumer);
  }
  for (ConsumerLoop &m : loops)
    if (failed(overlap(m, lateP, rescaleUnderS)))
      return m.loop.emitOpError("could not be overlapped");
  return true;
}
