//===- DropTmaFences.cpp - no proxy fence after a wait for what TMA wrote -------------------===//
//
// tilegpu-drop-tma-fences (Passes.td says the rule): a consumer's `fence.proxy.async` after its
// `full` wait orders the producer's cp.async writes (generic proxy) before wgmma's reads (async
// proxy). A stage that only TMA fills was written through the async proxy and completed on the
// mbarrier the consumer waited for: CUTLASS's and FlashAttention-3's consumers read it without
// a fence. Where every TMA-marked copy goes through TMA (convert-tile-to-mma's tma-only), the
// fences after waits on such rings go (convert-tile-to-mma's drop-tma-fences).
//
//===----------------------------------------------------------------------===//

#include "tilegpu/Transforms/MmaClass.h"
#include "tilegpu/Transforms/Passes.h"

#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace tessel::tilegpu {
#define GEN_PASS_DEF_TILEGPUDROPTMAFENCES
#include "tilegpu/Transforms/Passes.h.inc"
} // namespace tessel::tilegpu

using namespace mlir;
using namespace tessel::tilegpu;

int64_t tessel::tilegpu::dropTmaFences(func::FuncOp program) {
  // The rings (their `full` barriers) TMA copies complete on, with the bytes they fill, and
  // the bytes any generic-proxy write reaches: another copy (cp.async or the producer's
  // transposing stores), a local store, a bulk add's staging.
  llvm::MapVector<Value, SmallVector<SharedBytes>> tmaRings;
  llvm::DenseSet<Value> mixedRings;
  SmallVector<SharedBytes> generic;
  bool unknown = false;
  auto addWrite = [&](Value buffer, SmallVector<SharedBytes> &into) {
    std::optional<SmallVector<SharedBytes>> bytes = sharedBytesOf(buffer, Value());
    if (!bytes)
      unknown = true;
    else
      llvm::append_range(into, *bytes);
  };
  program.walk([&](Operation *op) {
    if (auto copy = dyn_cast<AsyncCopyOp>(op)) {
      AsyncCopyArriveOp arrive = arrivalOf(copy);
      if (copy->hasAttr("tma_map") && arrive) {
        addWrite(copy.getBuffer(), tmaRings[arrive.getBarriers()]);
        return;
      }
      if (arrive)
        mixedRings.insert(arrive.getBarriers());
      addWrite(copy.getBuffer(), generic);
    } else if (auto store = dyn_cast<LocalStoreOp>(op)) {
      addWrite(store.getBuffer(), generic);
    } else if (auto add = dyn_cast<BulkAddOp>(op)) {
      addWrite(add.getBuffer(), generic);
    }
  });
  if (unknown)
    return 0;
  llvm::DenseSet<Value> tmaOnly;
  for (auto &[ring, bytes] : tmaRings)
    if (!mixedRings.contains(ring) && !anyOverlap(bytes, generic))
      tmaOnly.insert(ring);
  // A fence goes where the ops right above it are waits on such rings (and the pure ops that
  // compute their stages and phases); a fence after anything else stays.
  SmallVector<FenceAsyncSharedOp> dropped;
  program.walk([&](FenceAsyncSharedOp fence) {
    int64_t waits = 0;
    for (Operation *op = fence->getPrevNode(); op; op = op->getPrevNode()) {
      if (auto wait = dyn_cast<MbarrierWaitOp>(op)) {
        if (!tmaOnly.contains(wait.getBarriers()))
          return;
        ++waits;
        continue;
      }
      if (!isPure(op))
        break;
    }
    if (waits)
      dropped.push_back(fence);
  });
  for (FenceAsyncSharedOp fence : dropped)
    fence.erase();
  return static_cast<int64_t>(dropped.size());
}

namespace {

struct DropTmaFences : tessel::tilegpu::impl::TileGPUDropTmaFencesBase<DropTmaFences> {
  void runOnOperation() override { dropTmaFences(getOperation()); }
};

} // namespace
