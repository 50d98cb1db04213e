//===- PipelineTiles.cpp - the next tile's first S issued before this tile's epilogue ------===//
//
// tilegpu-pipeline-tiles (Passes.td says the schedule; the design note is
// docs/dev/notes/2026-12-04-tile-pipelining.md): in the consumers of a persistent program
// whose Q comes from the producer, the first S = Q·K₀ᵀ of a tile is issued at the end of the
// previous tile — after its last P·V, before its epilogue — and carried in flight through the
// tile loop; the tile waits for it before its peeled first iteration, which no longer issues
// it. The tensor cores then work under the epilogue and the next tile's head.
//
//===--------------------------------------------------------------------------------------===//

#include "tilegpu/Transforms/AttentionDots.h"
#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/PatternMatch.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUPIPELINETILES
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// The first S of a tile: the first dot of the tile body's first loop, S = Q·Kᵀ with K waited
/// for, fenced and read at the stage of the iteration count the loop carries (from the tile
/// loop's count), Q read in the tile body right after its wait for the producer's copy
/// (tilegpu-producer-once). In tilegpu-overlap-consumers' form that loop is already the peeled
/// first iteration (at most one); synchronous consumers' first loop is peeled here.
struct FirstS {
  scf::ForOp tiles, peel;
  /// Whether `peel` is the whole first loop, still to be peeled.
  bool needsPeel = false;
  tile::DotOp sDot;
  LocalLoadOp kRead, qRead;
  MbarrierWaitOp kWait, qWait;
  FenceAsyncSharedOp kFence;
  BlockArgument peelCount;
  /// The count among the tile loop's iter_args.
  unsigned countIndex = 0;
  /// Where the next tile's S is issued: after the tile body's last loop.
  Operation *issueBefore = nullptr;
};

/// Fills `m`'s S, K and count from `loop` (in the tile body `body`); false if not that shape.
bool matchS(FirstS &m, scf::ForOp loop, Block &body) {
  auto dots = loop.getBody()->getOps<tile::DotOp>();
  if (dots.empty())
    return false;
  m.peel = loop;
  m.sDot = *dots.begin();
  m.kRead = m.sDot.getB().getDefiningOp<LocalLoadOp>();
  m.qRead = m.sDot.getA().getDefiningOp<LocalLoadOp>();
  if (!m.kRead || !m.kRead.getTranspose() || !m.kRead->hasOneUse() ||
      m.kRead->getBlock() != loop.getBody() || !m.qRead || m.qRead->getBlock() != &body ||
      !isZeroSplat(m.sDot.getAcc()))
    return false;
  m.kWait = waitBefore(m.kRead, m.kFence);
  m.qWait = dyn_cast_or_null<MbarrierWaitOp>(m.qRead->getPrevNode());
  if (!m.kWait || !m.qWait || m.qWait.getPred() || m.qWait.getStage() != m.qRead.getStage() ||
      m.kWait->getBlock() != loop.getBody())
    return false;
  // The next tile's Q in a buffer of its own: with one, the producer copies it only once
  // this tile has released Q, after the issue that waits for it.
  if (m.qRead.getBuffer().getType().getStages() < 2)
    return false;
  // K's stage is the loop's count mod S, the count starting from the tile loop's.
  auto stage = m.kWait.getStage().getDefiningOp<arith::RemUIOp>();
  m.peelCount = stage ? dyn_cast<BlockArgument>(stage.getLhs()) : BlockArgument();
  if (!m.peelCount || m.peelCount.getOwner() != loop.getBody() || m.peelCount.getArgNumber() == 0)
    return false;
  auto tileCount = dyn_cast<BlockArgument>(loop.getInitArgs()[m.peelCount.getArgNumber() - 1]);
  if (!tileCount || tileCount.getOwner() != m.tiles.getBody() || tileCount.getArgNumber() == 0)
    return false;
  m.countIndex = tileCount.getArgNumber() - 1;
  return true;
}

std::optional<FirstS> match(WarpSpecializeOp ws) {
  FirstS m;
  Block &body = tileBlock(ws.getConsumers().front());
  m.tiles = dyn_cast<scf::ForOp>(body.getParentOp());
  if (!m.tiles || !isTileLoop(m.tiles) || !m.tiles.getInductionVar().getType().isInteger(32))
    return std::nullopt;
  auto loops = body.getOps<scf::ForOp>();
  if (loops.empty() || !matchS(m, *loops.begin(), body))
    return std::nullopt;
  m.needsPeel = !isFirstIterationPeel(m.peel);
  // The next tile's S goes after the last loop (its last P·V waited for); the epilogue after
  // it issues no dot, and the count it starts from is known there.
  scf::ForOp last;
  for (scf::ForOp loop : loops)
    last = loop;
  m.issueBefore = last->getNextNode();
  for (Operation *op = m.issueBefore; op; op = op->getNextNode())
    if (isa<tile::DotOp, WgmmaOp, WgmmaWaitOp, scf::ForOp>(op))
      return std::nullopt;
  Value countEnd = m.tiles.getBody()->getTerminator()->getOperand(m.countIndex);
  if (Operation *def = countEnd.getDefiningOp();
      !def || (def->getBlock() == &body && !def->isBeforeInBlock(m.issueBefore)))
    return std::nullopt;
  return m;
}

/// Peels `m`'s first loop: a copy of it runs its first iteration (at most one), the loop the
/// rest; `m` then names the copy's S, K and count.
void peelFirst(IRRewriter &rw, FirstS &m) {
  scf::ForOp loop = m.peel;
  rw.setInsertionPoint(loop);
  IRMapping copy;
  scf::ForOp peel = peelFirstIteration(rw, loop, copy);
  loop.getInitArgsMutable().assign(peel.getResults());
  m.peel = peel;
  m.sDot = cast<tile::DotOp>(copy.lookup(m.sDot.getOperation()));
  m.kRead = cast<LocalLoadOp>(copy.lookup(m.kRead.getOperation()));
  m.kWait = cast<MbarrierWaitOp>(copy.lookup(m.kWait.getOperation()));
  m.kFence = cast<FenceAsyncSharedOp>(copy.lookup(m.kFence.getOperation()));
  m.peelCount = cast<BlockArgument>(copy.lookup(Value(m.peelCount)));
  m.needsPeel = false;
}

/// Whether the next tile's values that issueFirstS computes again (the peel's bounds, Q's and
/// K's stages and phases) are made of what it may compute: scalar arithmetic of the tile loop's
/// index and the count, descriptors, scalar reads (a schedule).
bool computable(FirstS &m) {
  OpBuilder probe(m.tiles.getContext());
  Block scratch;
  probe.setInsertionPointToStart(&scratch);
  IRMapping map;
  map.map(m.tiles.getInductionVar(), m.tiles.getInductionVar());
  map.map(m.peelCount, m.peelCount);
  bool ok = true;
  for (Value v : SmallVector<Value>{m.peel.getLowerBound(), m.peel.getUpperBound(),
                                    m.peel.getStep(), m.qWait.getStage(), m.qWait.getPhase(),
                                    m.kWait.getStage(), m.kWait.getPhase()})
    ok &= succeeded(producerValue(probe, v, map, m.tiles));
  for (Operation &op : llvm::make_early_inc_range(llvm::reverse(scratch)))
    op.erase();
  return ok;
}

/// The first S of the tile at `iv` (a tile loop index that may be past the end), whose K
/// block is the ring's at `count`, issued at `b` unconditionally: ptxas serializes every wgmma
/// of a kernel where one is in flight out of a branch (advisory C7518). Its waits for Q and K
/// are predicated on the tile existing and its peel running; otherwise the product is of
/// whatever the buffers hold, and nobody reads it.
Value issueFirstS(OpBuilder &b, FirstS &m, Value iv, Value count) {
  Location loc = m.sDot.getLoc();
  Value exists = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, iv,
                                       m.tiles.getUpperBound());
  // A tile index in range for the address arithmetic (a schedule read) of a tile not run.
  Value at = arith::SelectOp::create(b, loc, exists, iv, constI32(b, loc, 0));
  IRMapping head;
  head.map(m.tiles.getInductionVar(), at);
  auto valueAt = [&](Value v, IRMapping &map) { return *producerValue(b, v, map, m.tiles); };
  Value lb = valueAt(m.peel.getLowerBound(), head), ub = valueAt(m.peel.getUpperBound(), head);
  Value qStage = valueAt(m.qWait.getStage(), head), qPhase = valueAt(m.qWait.getPhase(), head);
  IRMapping ring = head;
  ring.map(m.peelCount, count);
  Value kStage = valueAt(m.kWait.getStage(), ring), kPhase = valueAt(m.kWait.getPhase(), ring);
  Value runs = arith::AndIOp::create(
      b, loc, exists, arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ub));
  // Q landed (the producer copies it ahead of the tile's K/V), then K₀; one fence for both
  // (a copy the lowering kept on cp.async wrote through the generic proxy).
  MbarrierWaitOp::create(b, loc, m.qWait.getBarriers(), qStage, qPhase, runs);
  MbarrierWaitOp::create(b, loc, m.kWait.getBarriers(), kStage, kPhase, runs);
  FenceAsyncSharedOp::create(b, loc);
  // Q is read by descriptor: the lowering reads every A block of a program that loads more
  // than one from shared memory (takeAFragments), so no register this wgmma reads needs to
  // outlive the tile (its wait names the carried value, not the wgmma).
  Value q = LocalLoadOp::create(b, loc, m.qRead.getResult().getType(), m.qRead.getBuffer(), qStage,
                                m.qRead.getTranspose());
  auto sType = cast<RankedTensorType>(m.sDot.getResult().getType());
  Value zeros = arith::ConstantOp::create(
      b, loc, DenseElementsAttr::get(sType, b.getZeroAttr(sType.getElementType())));
  return WgmmaOp::create(b, loc, sType, q, m.kRead.getBuffer(), kStage, zeros,
                         /*transpose_b=*/true);
}

void pipeline(FirstS &m) {
  IRRewriter rw(m.tiles.getContext());
  Location loc = m.tiles.getLoc();
  if (m.needsPeel)
    peelFirst(rw, m);
  // The first tile's S before the tile loop; the next tile's after this tile's last P·V.
  rw.setInsertionPoint(m.tiles);
  Value first = issueFirstS(rw, m, m.tiles.getLowerBound(), m.tiles.getInitArgs()[m.countIndex]);
  rw.setInsertionPoint(m.issueBefore);
  Value iv = arith::AddIOp::create(rw, loc, m.tiles.getInductionVar(), m.tiles.getStep());
  Value next = issueFirstS(rw, m, iv, m.tiles.getBody()->getTerminator()->getOperand(m.countIndex));
  FailureOr<LoopLikeOpInterface> grown = m.tiles.replaceWithAdditionalYields(
      rw, ValueRange{first}, /*replaceInitOperandUsesInLoop=*/false,
      [&](OpBuilder &b, Location, ArrayRef<BlockArgument> args) -> SmallVector<Value> {
        // This tile's S, in flight since the previous tile, waited for before the peel (not
        // in it: a wait in a branch serializes as an issue there does).
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPoint(m.peel);
        auto wait = WgmmaWaitOp::create(b, m.sDot.getLoc(), TypeRange{m.sDot.getType()},
                                        ValueRange{args[0]}, 0);
        m.sDot.getResult().replaceAllUsesWith(wait.getResult(0));
        m.sDot.erase();
        m.kRead.erase();
        m.kFence.erase();
        m.kWait.erase();
        return {next};
      });
  assert(succeeded(grown) && "an scf.for takes more iter_args");
  // The last tile's issue (of no tile) completes before the program ends.
  rw.setInsertionPointAfter(grown->getOperation());
  WgmmaWaitOp::create(rw, loc, TypeRange{}, ValueRange{}, 0);
}

struct PipelineTiles : tessel::tilegpu::impl::TileGPUPipelineTilesBase<PipelineTiles> {
  using Base::Base;

  void runOnOperation() override { pipelineTiles(getOperation()); }
};

} // namespace

bool tessel::tilegpu::pipelineTiles(func::FuncOp program) {
  WarpSpecializeOp ws;
  program.walk([&](WarpSpecializeOp op) { ws = op; });
  if (!ws)
    return false;
  std::optional<FirstS> m = match(ws);
  if (!m || !computable(*m))
    return false;
  pipeline(*m);
  return true;
}
