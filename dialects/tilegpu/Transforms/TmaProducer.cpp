//===- TmaProducer.cpp - the producer's block copies through the tensor memory accelerator ---===//
//
// tilegpu-tma-producer: in a warp-specialized program, the producer's copies of whole blocks
// into 128-byte-swizzled rings are marked to go through TMA (`tma_map`: the index of the
// tensor map of their descriptor) instead of 128 threads' cp.async. The maps are built by the
// kernel (docs/dev/notes/2026-12-04-tma-ptx.md): each descriptor gets as many map slots as
// its ring has stages, in shared memory (the images tensormap.replace writes) beside a 64-byte
// record of what the current slot describes; a map is rebuilt into the next slot only at the
// first copy that finds it changed (a map spans a tensor's heads: not at every tile), after
// that copy's `empty` wait, which makes
// every copy through the slot it overwrites landed. The program gets `tilegpu.tma` (where the
// records and images sit) and the bytes it needs. The lowering keeps cp.async for copies
// whose descriptor fails TMA's rules at run time.
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/LoopLoads.h"
#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUTMAPRODUCER
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

AsyncCopyArriveOp tessel::tilegpu::arrivalOf(AsyncCopyOp copy) {
  for (Operation *op = copy->getNextNode(); op; op = op->getNextNode())
    if (auto arrive = dyn_cast<AsyncCopyArriveOp>(op))
      return arrive;
  return {};
}

namespace {

/// Whether TMA can copy `copy`'s block as the lowering lays it out: a 2-D block of 16-bit
/// floats in 64-column slabs of 128-byte-swizzled rows (at most 256 rows: a box's limit) from
/// a strided, unpaged 2-D descriptor whose rows are contiguous; unpredicated, followed in its
/// block by the arrival that completes it.
bool tmaCopyable(AsyncCopyOp copy) {
  SharedBufferType t = copy.getBuffer().getType();
  auto md = copy.getDesc().getDefiningOp<tessel::tile::MakeDescOp>();
  if (!md || md.getPages() || md.getShape().size() != 2 || copy.getPredicate() || !arrivalOf(copy))
    return false;
  APInt inner;
  if (!matchPattern(md.getStrides()[1], m_ConstantInt(&inner)) || inner != 1)
    return false;
  return t.getShape().size() == 2 && t.getElementType().getIntOrFloatBitWidth() == 16 &&
         isa<FloatType>(t.getElementType()) && t.getSwizzle() == 128 && t.getShape()[1] % 64 == 0 &&
         t.getShape()[0] <= 256 && t.getShape()[0] % 8 == 0;
}

} // namespace

FailureOr<bool> tessel::tilegpu::tmaProducer(func::FuncOp program, int64_t sharedLimit) {
  WarpSpecializeOp ws;
  program.walk([&](WarpSpecializeOp op) { ws = op; });
  auto bytes = program->getAttrOfType<IntegerAttr>("tilegpu.shared_bytes");
  if (!ws || !bytes)
    return false;
  // A map per descriptor, whose copies must all complete on one ring of `full` barriers: the
  // slot rule counts that ring's stages (copies in its order, whichever buffers they fill).
  llvm::MapVector<Value, SmallVector<AsyncCopyOp>> byDesc;
  ws.getProducer().walk([&](AsyncCopyOp copy) { byDesc[copy.getDesc()].push_back(copy); });
  SmallVector<SmallVector<AsyncCopyOp>> maps;
  int64_t slots = 0;
  for (auto &[desc, copies] : byDesc) {
    // The producer's warp 0 zeroes the records, 16 bytes a lane (64 a map).
    if (maps.size() == 8)
      break;
    if (!llvm::all_of(copies, tmaCopyable))
      continue;
    Value ring = arrivalOf(copies.front()).getBarriers();
    if (!llvm::all_of(copies, [&](AsyncCopyOp c) { return arrivalOf(c).getBarriers() == ring; }))
      continue;
    maps.push_back(copies);
    slots = std::max(slots, cast<SharedBufferType>(ring.getType()).getStages());
  }
  if (maps.empty())
    return false;
  // Records (64 bytes a map), then the images (128 bytes, 128-byte aligned) past the end.
  int64_t records = (bytes.getInt() + 127) / 128 * 128;
  int64_t images = (records + 64 * static_cast<int64_t>(maps.size()) + 127) / 128 * 128;
  int64_t end = images + 128 * slots * static_cast<int64_t>(maps.size());
  // The maps' global slots are indexed by the SM: one CTA an SM, which shared memory past
  // half of what an SM has guarantees; in a persistent kernel (where the maps were measured to
  // pay, built once a kernel) registers past half of its 64K guarantee it too (a CTA reserves
  // its roles' total at launch: three consumer warpgroups at d64 need little shared memory).
  int64_t consumerWarps = programLayout(program).getWarps();
  int64_t registers = 32 * (ws.getProducerWarps() * int64_t(ws.getProducerRegisters()) +
                            consumerWarps * int64_t(ws.getConsumerRegisters()));
  bool persistent = isTileLoop(tileBlock(ws.getConsumers().front()).getParentOp());
  bool oneBySharedMemory = 2 * end > sharedLimit;
  bool oneByRegisters = persistent && 2 * registers > 65536;
  if (end > sharedLimit || !(oneBySharedMemory || oneByRegisters))
    return false;
  Builder b(program.getContext());
  // The copy sites' map bookkeeping (a record check each copy, a head and a map start a tile)
  // spills at a cp.async producer's 40 registers: the consumers give 8 each (setmaxnreg counts
  // in eights), the producer takes them — the block's total, what its launch reserves, stays
  // the same (a consumer's setmaxnreg.inc waits for registers the pool has).
  if (ws.getProducerRegisters() < 48 && (8 * consumerWarps) % ws.getProducerWarps() == 0 &&
      ws.getConsumerRegisters() >= 8) {
    ws.setProducerRegisters(ws.getProducerRegisters() + 8 * consumerWarps / ws.getProducerWarps());
    ws.setConsumerRegisters(ws.getConsumerRegisters() - 8);
  }
  for (auto [index, copies] : llvm::enumerate(maps))
    for (AsyncCopyOp copy : copies)
      copy->setAttr("tma_map", b.getI64IntegerAttr(static_cast<int64_t>(index)));
  program->setAttr("tilegpu.tma",
                   b.getDictionaryAttr({b.getNamedAttr("maps", b.getI64IntegerAttr(maps.size())),
                                        b.getNamedAttr("slots", b.getI64IntegerAttr(slots)),
                                        b.getNamedAttr("records", b.getI64IntegerAttr(records)),
                                        b.getNamedAttr("images", b.getI64IntegerAttr(images))}));
  program->setAttr("tilegpu.shared_bytes", b.getI64IntegerAttr(end));
  return true;
}

namespace {

struct TmaProducer : tessel::tilegpu::impl::TileGPUTmaProducerBase<TmaProducer> {
  using Base::Base;

  void runOnOperation() override {
    if (failed(tmaProducer(getOperation(), sharedLimit)))
      signalPassFailure();
  }
};

} // namespace
