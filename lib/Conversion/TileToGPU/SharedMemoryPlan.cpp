//===- SharedMemoryPlan.cpp - liveness-based shared-memory packing --------===//
//
// Live intervals over a pre/post numbering of the kernel's ops, then first-fit packing of the
// buffers in decreasing size. The intervals are computed on the lowered kernel (memref loads and
// stores), not on the tile program, so the buffers the lowering adds itself (loop-carried copies,
// swap temporaries, scf.if results) are planned like any other.
//
//===----------------------------------------------------------------------===//

#include "SharedMemoryPlan.h"

#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Operation.h"
#include "mlir/Interfaces/LoopLikeInterface.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/MathExtras.h"

#include <algorithm>

using namespace mlir;

namespace {

/// Numbers every op twice, before and after its regions, so that an op's interval
/// [start, end] holds the intervals of all ops nested in it.
class OpNumbering {
public:
  explicit OpNumbering(Region &body) {
    for (Block &block : body)
      for (Operation &op : block)
        number(&op);
  }
  int64_t start(Operation *op) const { return positions.lookup(op).first; }
  int64_t end(Operation *op) const { return positions.lookup(op).second; }

private:
  void number(Operation *op) {
    int64_t first = next++;
    for (Region &region : op->getRegions())
      for (Block &block : region)
        for (Operation &nested : block)
          number(&nested);
    positions[op] = {first, next++};
  }

  int64_t next = 0;
  llvm::DenseMap<Operation *, std::pair<int64_t, int64_t>> positions;
};

bool writes(Operation *user, Value buffer) {
  auto store = dyn_cast<memref::StoreOp>(user);
  return store && store.getMemRef() == buffer;
}

/// The loops around `op` inside `body`, innermost first.
SmallVector<Operation *> enclosingLoops(Operation *op, Region &body) {
  SmallVector<Operation *> loops;
  for (Operation *p = op->getParentOp();
       p && p->getParentRegion() && body.isAncestor(p->getParentRegion()); p = p->getParentOp())
    if (isa<LoopLikeOpInterface>(p))
      loops.push_back(p);
  return loops;
}

/// The live interval of `buffer`: from its first to its last use, grown over every loop that it
/// must survive (a loop holding only some of the uses: the value crosses the loop's iterations).
std::pair<int64_t, int64_t> liveInterval(Value buffer, Region &body, const OpNumbering &n) {
  int64_t lo = INT64_MAX, hi = INT64_MIN;
  Operation *first = nullptr;
  SmallVector<Operation *> loops;
  for (Operation *user : buffer.getUsers()) {
    if (n.start(user) < lo) {
      lo = n.start(user);
      first = user;
    }
    hi = std::max(hi, n.end(user));
    for (Operation *loop : enclosingLoops(user, body))
      if (!llvm::is_contained(loops, loop))
        loops.push_back(loop);
  }
  if (!first)
    return {0, -1};
  // A first use that reads sees a value from an earlier iteration of every loop around it.
  if (!writes(first, buffer))
    for (Operation *loop : enclosingLoops(first, body)) {
      lo = std::min(lo, n.start(loop));
      hi = std::max(hi, n.end(loop));
    }
  // Growing over one loop can leave the interval no longer inside another: repeat to a fixpoint.
  bool changed = true;
  while (changed) {
    changed = false;
    for (Operation *loop : loops) {
      int64_t ls = n.start(loop), le = n.end(loop);
      bool inside = ls <= lo && hi <= le;
      if (!inside && (lo > ls || hi < le)) {
        lo = std::min(lo, ls);
        hi = std::max(hi, le);
        changed = true;
      }
    }
  }
  return {lo, hi};
}

bool overlaps(const tessel::BufferPlacement &a, const tessel::BufferPlacement &b) {
  return a.start <= b.end && b.start <= a.end;
}

} // namespace

tessel::SharedMemoryPlan tessel::planSharedMemory(Region &body, ArrayRef<Value> buffers,
                                                  ArrayRef<int64_t> bytes, int64_t alignment) {
  OpNumbering numbering(body);
  SharedMemoryPlan plan;
  for (auto [buffer, size] : llvm::zip(buffers, bytes)) {
    BufferPlacement p;
    p.bytes = static_cast<int64_t>(llvm::alignTo(size, alignment));
    std::tie(p.start, p.end) = liveInterval(buffer, body, numbering);
    plan.buffers.push_back(p);
  }

  // First fit, largest buffers first (earliest first among equals): each buffer takes the lowest
  // aligned offset that no already-placed buffer with an overlapping interval occupies.
  SmallVector<size_t> order(plan.buffers.size());
  for (size_t i = 0; i < order.size(); ++i)
    order[i] = i;
  llvm::stable_sort(order, [&](size_t a, size_t b) {
    const BufferPlacement &pa = plan.buffers[a], &pb = plan.buffers[b];
    if (pa.bytes != pb.bytes)
      return pa.bytes > pb.bytes;
    return pa.start < pb.start;
  });
  SmallVector<size_t> placed;
  for (size_t i : order) {
    BufferPlacement &p = plan.buffers[i];
    SmallVector<std::pair<int64_t, int64_t>> taken;
    for (size_t j : placed)
      if (overlaps(p, plan.buffers[j]))
        taken.push_back({plan.buffers[j].offset, plan.buffers[j].offset + plan.buffers[j].bytes});
    llvm::sort(taken);
    int64_t offset = 0;
    for (auto [lo, hi] : taken) {
      if (offset + p.bytes <= lo)
        break;
      offset = std::max(offset, hi);
    }
    p.offset = offset;
    placed.push_back(i);
    plan.arenaBytes = std::max(plan.arenaBytes, offset + p.bytes);
  }
  return plan;
}
