//===- WarpSpecialize.cpp - a producer warpgroup fills the ring, mbarriers in between --------===//
//
// tilegpu-warp-specialize: on a wgmma program whose loops are in allocate-shared's unpipelined
// form, the loops' copies move to a producer warpgroup of their own that runs ahead of the
// consumers through the ring, and the CTA-wide barrier of every block becomes two mbarriers a
// stage — `full` (its copies have landed) and `empty` (every consumer is done with the block).
// The consumers then never wait for each other: the two warpgroups of a 128-row block drift
// apart, so one's softmax runs while the other's dots keep the tensor cores busy.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUWARPSPECIALIZE
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;
namespace tile = tessel::tile;

namespace {

/// A loop whose blocks the producer copies: its loads in body order.
struct StreamedLoop {
  scf::ForOp loop;
  SmallVector<UnpipelinedLoad> loads;
};

/// Whether the producer can compute `v` (producerValue then succeeds): an argument, `iv`, the
/// tile loop's induction variable `tileIv`, a value defined at or before `start` in the
/// function's block, or one that producerComputable ops make from such values.
bool computable(Value v, Operation *start, Value iv, Value tileIv) {
  if (v == iv || (tileIv && v == tileIv))
    return true;
  Operation *def = v.getDefiningOp();
  if (!def)
    return isa<func::FuncOp>(cast<BlockArgument>(v).getOwner()->getParentOp());
  if (def->getBlock() == start->getBlock() && !start->isBeforeInBlock(def))
    return true;
  return producerComputable(def) && llvm::all_of(def->getOperands(), [&](Value o) {
           return computable(o, start, iv, tileIv);
         });
}

/// The bytes `alloc` spans.
std::pair<int64_t, int64_t> span(AllocOp alloc) {
  int64_t start = *alloc.getOffset();
  SharedBufferType type = alloc.getResult().getType();
  return {start, start + (type.getStages() - 1) * alloc.getStageStride() + type.getStageBytes()};
}

int64_t alignTo(int64_t x, int64_t a) { return (x + a - 1) / a * a; }

/// Whether `buffer`'s block is stored transposed (kTransposedAttr on its alloc).
bool isTransposed(Value buffer) {
  auto alloc = buffer.getDefiningOp<AllocOp>();
  return alloc && alloc->hasAttr(kTransposedAttr);
}

} // namespace

FailureOr<bool> tessel::tilegpu::warpSpecialize(func::FuncOp program, int64_t producerWarps,
                                                int64_t producerRegisters,
                                                int64_t consumerRegisters) {
  MmaEncodingAttr layout = programLayout(program);
  if (!layout || layout.getKind() != MmaKind::Wgmma || !program.getBody().hasOneBlock())
    return false;
  Block &body = program.getBody().front();
  // The loops whose copies move: the loops of the tile's block (the function's, or a
  // persistent kernel's tile loop's) in the unpipelined form, one ring.
  Block &perTile = tileBlock(body);
  auto tileLoop = perTile.getParentOp() != program ? cast<scf::ForOp>(perTile.getParentOp())
                                                   : scf::ForOp();
  SmallVector<StreamedLoop> loops;
  int64_t stages = 0;
  for (auto loop : perTile.getOps<scf::ForOp>()) {
    int64_t s = 0;
    SmallVector<UnpipelinedLoad> loads = matchUnpipelinedLoads(loop, s);
    if (loads.empty())
      continue;
    if (stages && s != stages)
      return false;
    stages = s;
    loops.push_back({loop, std::move(loads)});
  }
  if (loops.empty())
    return false;
  // Every other copy is outside loops (Q), and no dot is in flight yet (the overlapped
  // schedule keeps its own ring).
  bool other = false;
  program.walk([&](Operation *op) {
    if (isa<WgmmaOp, WgmmaWaitOp, BulkAddOp, LocalStoreOp>(op))
      other = true;
    if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
      scf::ForOp loop = streamingLoop(op);
      other |= loop && !llvm::any_of(loops, [&](const StreamedLoop &l) { return l.loop == loop; });
    }
  });
  if (other)
    return false;
  auto returnOp = dyn_cast<func::ReturnOp>(body.getTerminator());
  if (!returnOp || returnOp.getNumOperands() != 0)
    return false;
  SmallVector<AllocOp> allocs(body.getOps<AllocOp>());
  if (allocs.empty() || llvm::any_of(allocs, [](AllocOp a) { return !a.getOffset(); }))
    return false;
  // What the producer computes again — each loop's bounds, its copies' descriptors and
  // offsets — must be computable from what precedes the split (after the last buffer): a
  // bound or address read from a tile stays with the pipelined schedule.
  Operation *split = allocs.back();
  Value tileIv = tileLoop ? tileLoop.getInductionVar() : Value();
  if (tileLoop && !llvm::all_of(ValueRange{tileLoop.getLowerBound(), tileLoop.getUpperBound(),
                                           tileLoop.getStep()},
                                [&](Value v) { return computable(v, split, Value(), Value()); }))
    return false;
  for (StreamedLoop &l : loops) {
    Value iv = l.loop.getInductionVar();
    SmallVector<Value> needed{l.loop.getLowerBound(), l.loop.getUpperBound(), l.loop.getStep()};
    for (UnpipelinedLoad &load : l.loads) {
      needed.push_back(load.copy.getDesc());
      llvm::append_range(needed, load.copy.getOffsets());
    }
    if (!llvm::all_of(needed, [&](Value v) { return computable(v, split, iv, tileIv); }))
      return false;
  }

  // Shared memory: the ring's buffers stay; a buffer outside loops that overlaps the ring (Q,
  // reused by the ring once read) gets bytes of its own, since the producer now fills the
  // ring while the consumers may not have read it; then the two rings of barriers.
  llvm::SmallDenseSet<Operation *> ringAllocs;
  int64_t end = 0;
  for (StreamedLoop &l : loops)
    for (UnpipelinedLoad &load : l.loads)
      ringAllocs.insert(load.copy.getBuffer().getDefiningOp());
  for (AllocOp alloc : allocs)
    end = std::max(end, span(alloc).second);
  for (AllocOp alloc : allocs) {
    if (ringAllocs.contains(alloc))
      continue;
    auto [lo, hi] = span(alloc);
    bool overlaps = llvm::any_of(ringAllocs, [&](Operation *r) {
      auto [rlo, rhi] = span(cast<AllocOp>(r));
      return lo < rhi && rlo < hi;
    });
    if (!overlaps)
      continue;
    int64_t at = alignTo(end, 1024);
    alloc.setOffset(at);
    end = at + (hi - lo);
  }
  Location loc = program.getLoc();
  int64_t consumerThreads = layout.getWarps() * 32, producerThreads = producerWarps * 32;
  OpBuilder b(program.getContext());
  b.setInsertionPointAfter(allocs.back());
  auto barrierType = SharedBufferType::get(b.getContext(), {1}, b.getI64Type(), stages, 0);
  int64_t loadsPerIteration = 0;
  for (const StreamedLoop &l : loops)
    loadsPerIteration = std::max<int64_t>(loadsPerIteration, l.loads.size());
  end = alignTo(end, 8);
  auto newBarriers = [&] {
    auto alloc = AllocOp::create(b, loc, barrierType, b.getI64IntegerAttr(end), IntegerAttr());
    end += barrierType.getBytes();
    return alloc.getResult();
  };
  // full[i]: load i of an iteration has landed (one arrival per producer thread); empty[i]:
  // every consumer thread is done with load i's block in the stage (one barrier a load, so that
  // tilegpu-overlap-consumers can release K before V).
  SmallVector<Value> full, empty;
  for (int64_t i = 0; i < loadsPerIteration; ++i)
    full.push_back(newBarriers());
  for (int64_t i = 0; i < loadsPerIteration; ++i)
    empty.push_back(newBarriers());
  for (Value f : full)
    MbarrierInitOp::create(b, loc, f, b.getI32IntegerAttr(producerThreads));
  for (Value e : empty)
    MbarrierInitOp::create(b, loc, e, b.getI32IntegerAttr(consumerThreads));
  gpu::BarrierOp::create(b, loc);
  program->setAttr("tilegpu.shared_bytes", b.getI64IntegerAttr(end));
  // Registers: the CTAs an SM holds by their shared memory (228 KiB on sm_90, one reserved per
  // CTA) share its 64K; the producer keeps few (it only copies), the consumers get the rest.
  // A producer that transposes blocks through its registers (FP8 V) keeps 56: a unit's 16
  // words and their addresses. One that copies rows wider than 256 bytes (d256 fp16) keeps 48
  // where there is no tile loop (ptxas, CUDA 13.0, d256 128×64 in one key loop: its chunks'
  // swizzled addresses spilled 12 bytes at 40, none at 48); a persistent kernel's consumers,
  // which carry the tile loop, keep their 232 (the causal one spilled 12–24 bytes at 224).
  bool transposes = false, wideRows = false;
  for (StreamedLoop &l : loops)
    for (UnpipelinedLoad &u : l.loads) {
      transposes |= isTransposed(u.copy.getBuffer());
      SharedBufferType t = u.copy.getBuffer().getType();
      wideRows |= t.getShape().back() * t.getElementType().getIntOrFloatBitWidth() > 256 * 8;
    }
  bool chooseProducer = producerRegisters == 0;
  if (chooseProducer)
    producerRegisters = transposes ? 56 : wideRows && !tileLoop ? 48 : 40;
  if (consumerRegisters == 0) {
    // Fewer CTAs where more would leave a consumer under 168 registers (what the attention
    // loop of one warpgroup takes without a producer beside it).
    int64_t threads = consumerThreads + producerThreads, atLaunch = 0;
    for (int64_t ctas = std::max<int64_t>(1, (228 * 1024) / (end + 1024)); ctas >= 1; --ctas) {
      atLaunch = std::min<int64_t>(255, 65536 / (ctas * threads)) / 8 * 8;
      consumerRegisters = std::min<int64_t>(
          240,
          (atLaunch * threads - producerThreads * producerRegisters) / consumerThreads / 8 * 8);
      if (consumerRegisters >= 168)
        break;
    }
    // The producer keeps what the consumers leave of the launch's registers (up to 56): the
    // roles' total must not exceed what the launch reserves, which is a multiple of 8 a
    // thread (three consumer warpgroups at 152 leave the producer 56, not 40).
    int64_t left = (atLaunch * threads - consumerThreads * consumerRegisters) / producerThreads;
    if (chooseProducer)
      producerRegisters = std::max<int64_t>(producerRegisters, std::min<int64_t>(56, left / 8 * 8));
  }

  // Everything after it is the consumers' region.
  auto ws = WarpSpecializeOp::create(b, loc, b.getI32IntegerAttr(producerWarps),
                                     b.getI32IntegerAttr(producerRegisters),
                                     b.getI32IntegerAttr(consumerRegisters));
  Block *consumers = &ws.getConsumers().emplaceBlock();
  Block *producer = &ws.getProducer().emplaceBlock();
  consumers->getOperations().splice(consumers->end(), body.getOperations(),
                                    std::next(Block::iterator(ws)), Block::iterator(returnOp));

  // The producer: per loop, the same iterations, each block waiting for its part of the stage
  // to be empty, then copied, then its arrival on full[i].
  b.setInsertionPointToStart(producer);
  IRMapping map;
  Value it = constI32(b, loc, 0);
  // A persistent kernel's producer walks the same tiles, its count carried from tile to tile
  // (the ring's phases go on): it runs into the next tile's blocks while the consumers finish
  // this one.
  scf::ForOp producerTiles;
  if (tileLoop) {
    FailureOr<Value> lb = producerValue(b, tileLoop.getLowerBound(), map, ws);
    FailureOr<Value> ub = producerValue(b, tileLoop.getUpperBound(), map, ws);
    FailureOr<Value> step = producerValue(b, tileLoop.getStep(), map, ws);
    if (failed(lb) || failed(ub) || failed(step))
      return ws.emitOpError("cannot compute the tile loop's bounds in the producer");
    producerTiles = scf::ForOp::create(b, loc, *lb, *ub, *step, ValueRange{it});
    producerTiles->setAttr(kTileLoopAttr, b.getUnitAttr());
    map.map(tileLoop.getInductionVar(), producerTiles.getInductionVar());
    it = producerTiles.getRegionIterArgs()[0];
    b.setInsertionPointToStart(producerTiles.getBody());
  }
  for (StreamedLoop &l : loops) {
    FailureOr<Value> lb = producerValue(b, l.loop.getLowerBound(), map, ws);
    FailureOr<Value> ub = producerValue(b, l.loop.getUpperBound(), map, ws);
    FailureOr<Value> step = producerValue(b, l.loop.getStep(), map, ws);
    if (failed(lb) || failed(ub) || failed(step))
      return ws.emitOpError("cannot compute a loop's bounds in the producer");
    // A descriptor made before the loop is made once, before the producer's loop too.
    SmallVector<Value> descs;
    for (UnpipelinedLoad &load : l.loads) {
      Value desc = load.copy.getDesc();
      FailureOr<Value> made = l.loop.isDefinedOutsideOfLoop(desc) ? producerValue(b, desc, map, ws)
                                                                  : FailureOr<Value>(Value());
      if (failed(made))
        return load.copy.emitOpError("has a descriptor the producer cannot compute");
      descs.push_back(*made);
    }
    auto copies = scf::ForOp::create(b, loc, *lb, *ub, *step, ValueRange{it});
    OpBuilder ib = OpBuilder::atBlockBegin(copies.getBody());
    IRMapping iterMap = map;
    iterMap.map(l.loop.getInductionVar(), copies.getInductionVar());
    Value i = copies.getRegionIterArgs()[0];
    auto [s, phase] = stageAndPhase(ib, loc, i, stages);
    Value freed = arith::XOrIOp::create(ib, loc, phase, constI32(ib, loc, 1));
    for (auto [index, load] : llvm::enumerate(l.loads)) {
      MbarrierWaitOp::create(ib, loc, empty[index], s, freed, Value());
      AsyncCopyOp copy = load.copy;
      FailureOr<Value> desc = descs[index] ? descs[index]
                                           : producerValue(ib, copy.getDesc(), iterMap, ws);
      SmallVector<Value> offsets;
      for (Value o : copy.getOffsets()) {
        FailureOr<Value> v = producerValue(ib, o, iterMap, ws);
        if (failed(v))
          return copy.emitOpError("has an address the producer cannot compute");
        offsets.push_back(*v);
      }
      if (failed(desc))
        return copy.emitOpError("has a descriptor the producer cannot compute");
      AsyncCopyOp::create(ib, loc, AsyncTokenType::get(ib.getContext()), *desc, offsets,
                          copy.getBuffer(), s, Value());
      // A block kept transposed is written by the thread itself (through its registers), and
      // fenced: a plain arrival publishes it. Others arrive when their cp.async lands.
      if (isTransposed(copy.getBuffer()))
        MbarrierArriveOp::create(ib, loc, full[index], s, Value());
      else
        AsyncCopyArriveOp::create(ib, loc, full[index], s);
    }
    Value next = arith::AddIOp::create(ib, loc, i, constI32(ib, loc, 1));
    scf::YieldOp::create(ib, loc, next);
    it = copies.getResult(0);
  }
  if (producerTiles) {
    scf::YieldOp::create(b, loc, it);
    b.setInsertionPointAfter(producerTiles);
  }

  // The consumers: each loop counts iterations on from the last, waits for full[i] where its
  // load i waited for the copy, reads the stage of that count, and arrives on every empty[i]
  // at the end of the body.
  Value count = nullptr;
  scf::ForOp consumerTiles;
  if (tileLoop) {
    // The count goes on from tile to tile, as the producer's does.
    IRRewriter rewriter(b.getContext());
    rewriter.setInsertionPoint(tileLoop);
    Value zero = constI32(rewriter, loc, 0);
    FailureOr<LoopLikeOpInterface> replaced = tileLoop.replaceWithAdditionalYields(
        rewriter, ValueRange{zero}, /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &, Location, ArrayRef<BlockArgument> args) -> SmallVector<Value> {
          return {args[0]};
        });
    if (failed(replaced))
      return tileLoop.emitOpError("could not carry the iteration count");
    consumerTiles = cast<scf::ForOp>(replaced->getOperation());
    consumerTiles->setAttr(kTileLoopAttr, rewriter.getUnitAttr());
    count = consumerTiles.getRegionIterArgs().back();
  }
  for (StreamedLoop &l : loops) {
    OpBuilder ob(l.loop);
    if (!count)
      count = constI32(ob, loc, 0);
    IRRewriter rewriter(b.getContext());
    FailureOr<LoopLikeOpInterface> replaced = l.loop.replaceWithAdditionalYields(
        rewriter, ValueRange{count}, /*replaceInitOperandUsesInLoop=*/false,
        [&](OpBuilder &yb, Location yl, ArrayRef<BlockArgument> args) -> SmallVector<Value> {
          return {arith::AddIOp::create(yb, yl, args[0], constI32(yb, yl, 1))};
        });
    if (failed(replaced))
      return l.loop.emitOpError("could not carry the iteration count");
    auto grown = cast<scf::ForOp>(replaced->getOperation());
    Block *loopBody = grown.getBody();
    Value i = grown.getRegionIterArgs().back();
    OpBuilder sb = OpBuilder::atBlockBegin(loopBody);
    auto [s, phase] = stageAndPhase(sb, loc, i, stages);
    for (auto [index, load] : llvm::enumerate(l.loads)) {
      OpBuilder wb(load.wait);
      MbarrierWaitOp::create(wb, loc, full[index], s, phase, Value());
      Value buffer = load.copy.getBuffer();
      for (Operation *user : llvm::make_early_inc_range(buffer.getUsers()))
        if (auto read = dyn_cast<LocalLoadOp>(user); read && loopBody->findAncestorOpInBlock(*read))
          read.getStageMutable().assign(s);
      Value oldStage = load.copy.getStage();
      load.barrier.erase();
      load.wait.erase();
      load.commit.erase();
      SmallVector<Value> address{load.copy.getDesc(), oldStage};
      llvm::append_range(address, load.copy.getOffsets());
      load.copy.erase();
      eraseIfDead(address);
    }
    OpBuilder eb(loopBody->getTerminator());
    for (size_t index = 0; index < l.loads.size(); ++index)
      MbarrierArriveOp::create(eb, loc, empty[index], s, Value());
    count = grown.getResults().back();
  }
  if (consumerTiles) {
    auto yield = cast<scf::YieldOp>(consumerTiles.getBody()->getTerminator());
    yield->setOperand(yield->getNumOperands() - 1, count);
  }
  return true;
}

namespace {

struct WarpSpecialize : tessel::tilegpu::impl::TileGPUWarpSpecializeBase<WarpSpecialize> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(warpSpecialize(getOperation(), producerWarps, producerRegisters, consumerRegisters)))
      signalPassFailure();
  }
};

} // namespace
