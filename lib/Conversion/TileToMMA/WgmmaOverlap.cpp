//===- WgmmaOverlap.cpp - FA3's intra-warpgroup overlap ---------------------------------------===//
//
// wgmma-overlap (docs/dev/codegen-wgmma.md): which loops have the shape of the overlapped
// schedule, S_j = Q·K_jᵀ issued beside the previous iteration's P·V, the wait and rescale after
// the softmax, the handover of the pending P·V to the next loop and the drain after the last.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

//===----------------------------------------------------------------------===//
// wgmma-overlap: FA3's intra-warpgroup pipelining (docs/dev/codegen-wgmma.md)
//===----------------------------------------------------------------------===//
//
// Iteration j of a loop with the attention shape (S = Q·K_jᵀ, softmax, O = O·alpha_j + P_j·V_j)
// runs
//   top:   wait cp.async (K_j, V_{j-1}), fence.proxy.async, barrier;
//          issue K_{j+1} into the other stage and V_j into this one
//   fence (O, P_{j-1}); S_j = Q·K_jᵀ; commit; O += P_{j-1}·V_{j-1}; commit
//   wait_group 1                      -- S_j is in; P_{j-1}·V_{j-1} still runs
//   softmax of S_j: m_j, alpha_j, P_j (packed), l_j
//   wait_group 0                      -- O = O_{j-1} + P_{j-1}·V_{j-1} (at max m_{j-1})
//   O = O·alpha_j                     -- now at max m_j, without P_j·V_j
// and after the loop, if it ran: wait cp.async, fence, barrier, O += P_last·V_last, wait 0.
// The source's O_j = alpha_j·O_{j-1} + P_j·V_j is the loop-carried O plus the pending P_j·V_j,
// and the rescale comes after the P·V it scales. Iteration lb has no P·V yet: it issues
// P = 0 against K_lb (landed, same shape), which adds exactly 0 — one spare wgmma group per
// loop instead of a peeled iteration. V_j is loaded one iteration late (issued at the top of j
// into this iteration's stage), so V_{j-1} stays in place while K_{j+1} and V_j land: the same
// two stages, no third.

std::optional<Overlap> MmaKernelBuilder::matchOverlap(scf::ForOp op) {
  SmallVector<tile::DotOp> dots;
  for (Operation &o : op.getBody()->without_terminator())
    if (auto dot = dyn_cast<tile::DotOp>(o))
      dots.push_back(dot);
  if (dots.size() != 2)
    return std::nullopt;
  Overlap ov;
  ov.sDot = dots[0];
  ov.pvDot = dots[1];
  // S = Q·trans(K_j) with Q in registers and a fresh accumulator.
  if (!aFragments.count(ov.sDot.getA()) || !isZeroTile(ov.sDot.getAcc()))
    return std::nullopt;
  auto tr = ov.sDot.getB().getDefiningOp<tile::TransOp>();
  ov.kLoad = tr ? tr.getInput().getDefiningOp<tile::LoadOp>() : tile::LoadOp();
  ov.vLoad = ov.pvDot.getB().getDefiningOp<tile::LoadOp>();
  if (!ov.kLoad || !ov.vLoad || ov.kLoad->getParentOp() != op.getOperation() ||
      ov.vLoad->getParentOp() != op.getOperation() || !ov.vLoad.getResult().hasOneUse())
    return std::nullopt;
  const LoadPlan &kp = loads[ov.kLoad.getOperation()];
  const LoadPlan &vp = loads[ov.vLoad.getOperation()];
  // K is the first load (its wait opens the iteration); the spare first P·V reads K_lb as V.
  if (kp.streamIndex != 0 || vp.streamIndex <= 0 || kp.rows != vp.rows || kp.cols != vp.cols)
    return std::nullopt;
  // P·V's A is computed in the body; its accumulator is the iter_arg O, or O·broadcast(alpha),
  // used only there, and its result is yielded in O's place and used nowhere else.
  if (aFragments.count(ov.pvDot.getA()) || aShared.count(ov.pvDot.getA()))
    return std::nullopt;
  Value acc = ov.pvDot.getAcc();
  if (auto mul = acc.getDefiningOp<arith::MulFOp>()) {
    if (!acc.hasOneUse() || !isRowBroadcast(mul.getRhs()))
      return std::nullopt;
    acc = mul.getLhs();
  }
  auto arg = dyn_cast<BlockArgument>(acc);
  if (!arg || arg.getOwner() != op.getBody() || arg.getArgNumber() == 0 || !arg.hasOneUse())
    return std::nullopt;
  ov.accIndex = arg.getArgNumber() - 1;
  Value result = ov.pvDot.getResult();
  Operation *yield = op.getBody()->getTerminator();
  if (!result.hasOneUse() || *result.getUsers().begin() != yield ||
      yield->getOperand(ov.accIndex) != result)
    return std::nullopt;
  return ov;
}

LogicalResult MmaKernelBuilder::emitOverlapS(tile::DotOp op) {
  Location loc = op.getLoc();
  Overlap &ov = *loop->overlap;
  Type i32 = b.getI32Type();
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto cType = cast<RankedTensorType>(op.getAcc().getType());
  int64_t K = aType.getShape()[1], N = cType.getShape()[1];
  Value oArg = loop->source.getRegionIterArgs()[ov.accIndex];
  SmallVector<Value> o = eager[oArg].second;
  // O (rescaled) and P_{j-1} (packed) were written by ordinary instructions: the fence ties them.
  SmallVector<Value> fenced(o);
  fenced.append(ov.pendingP);
  fenced = tiedAsm(b, loc, "wgmma.fence.sync.aligned;", fenced, {}, {});
  o.assign(fenced.begin(), fenced.begin() + o.size());
  SmallVector<Value> p(fenced.begin() + o.size(), fenced.end());
  SmallVector<Value> q;
  for (Value v : aFragments[op.getA()])
    q.push_back(v.getType() == i32 ? v : Value(LLVM::BitcastOp::create(b, loc, i32, v)));
  const LoadPlan &kp = loads[ov.kLoad.getOperation()];
  const LoadPlan &vp = loads[ov.vLoad.getOperation()];
  Value kOffset = arith::AddIOp::create(b, loc, ci32(kp.smemOffset), loop->stage);
  SmallVector<Value> s = wgmmaChain(q, {}, kOffset, kp, /*transposed=*/true, N, K / 16);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  auto dType = cast<RankedTensorType>(ov.pvDot.getAcc().getType());
  auto pType = cast<RankedTensorType>(ov.pvDot.getA().getType());
  o = wgmmaChain(p, o, ov.pendingV, vp, /*transposed=*/false, dType.getShape()[1],
                 pType.getShape()[1] / 16);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  // The next loads, while both groups run: K_{j+1} goes to the other stage's K slot (last read
  // by S_{j-1}), V_j to this stage's V slot (last read by P_{j-2}·V_{j-2}); the wgmmas in
  // flight read K_j (this stage) and V_{j-1} (the other stage's V slot).
  issueNextLoads(loc);
  // The older group (S) is complete; O and P_{j-1} stay in flight until wait_group 0.
  s = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 1;", s, {}, {});
  ov.inFlight = o;
  ov.pendingP = p;
  eager[op.getResult()] = {Layout::Acc, s};
  return success();
}

LogicalResult MmaKernelBuilder::emitOverlapPV(tile::DotOp op) {
  Location loc = op.getLoc();
  Overlap &ov = *loop->overlap;
  Type i32 = b.getI32Type();
  int64_t K = cast<RankedTensorType>(op.getA().getType()).getShape()[1];
  FailureOr<SmallVector<Value>> packed = dotAFragments(op, K);
  if (failed(packed))
    return failure();
  SmallVector<Value> newP;
  for (Value v : *packed)
    newP.push_back(v.getType() == i32 ? v : Value(LLVM::BitcastOp::create(b, loc, i32, v)));
  // wait_group 0 re-defines O and P_{j-1} (in flight until here) and ties P_j as well, so that
  // the softmax that makes P_j stays before the wait, under P_{j-1}·V_{j-1}.
  SmallVector<Value> waited(ov.inFlight);
  waited.append(ov.pendingP);
  waited.append(newP);
  waited = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 0;", waited, {}, {});
  size_t nO = ov.inFlight.size(), nP = ov.pendingP.size();
  Value oArg = loop->source.getRegionIterArgs()[ov.accIndex];
  // O_{j-1} + P_{j-1}·V_{j-1} takes the iter_arg's place: the rescale O·alpha_j reads it.
  eager[oArg] = {Layout::Acc, SmallVector<Value>(waited.begin(), waited.begin() + nO)};
  FailureOr<SmallVector<Value>> o = materialize(op.getAcc(), Layout::Acc, op);
  if (failed(o))
    return failure();
  eager[op.getResult()] = {Layout::Acc, *o};
  ov.pendingP.assign(waited.begin() + nO + nP, waited.end());
  const LoadPlan &vp = loads[ov.vLoad.getOperation()];
  ov.pendingV = arith::AddIOp::create(b, loc, ci32(vp.smemOffset), loop->stage);
  ov.inFlight.clear();
  return success();
}

scf::ForOp MmaKernelBuilder::handoverTarget(scf::ForOp op, const Overlap &ov) {
  Value o = op.getResult(ov.accIndex);
  if (!o.hasOneUse())
    return {};
  auto next = dyn_cast<scf::ForOp>(*o.getUsers().begin());
  if (!next || next->getBlock() != op->getBlock())
    return {};
  std::optional<Overlap> nextOv = matchOverlap(next);
  if (!nextOv || next.getInitArgs()[nextOv->accIndex] != o)
    return {};
  for (Operation *it = op->getNextNode(); it && it != next.getOperation(); it = it->getNextNode())
    if (isa<tile::LoadOp, tile::StoreOp, tile::DotOp, scf::ForOp>(it))
      return {};
  return next;
}

SmallVector<Value> MmaKernelBuilder::drainOverlap(Overlap &ov, ArrayRef<Value> o, ArrayRef<Value> p,
                                                  Value v, Value any) {
  Location loc = ov.pvDot.getLoc();
  // V_last was issued at the top of the last iteration: wait for it, make it visible to the
  // async proxy and to every warp.
  NVVM::CpAsyncWaitGroupOp::create(b, loc, 0);
  fenceSharedForAsyncProxy(loc);
  gpu::BarrierOp::create(b, loc);
  auto dType = cast<RankedTensorType>(ov.pvDot.getAcc().getType());
  auto pType = cast<RankedTensorType>(ov.pvDot.getA().getType());
  // A loop that did not run has nothing pending (and its V offset names no landed block).
  auto ifOp = scf::IfOp::create(b, loc, SmallVector<Type>(o.size(), b.getF32Type()), any,
                                /*withElseRegion=*/true);
  {
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    SmallVector<Value> fenced(o.begin(), o.end());
    fenced.append(p.begin(), p.end());
    fenced = tiedAsm(b, loc, "wgmma.fence.sync.aligned;", fenced, {}, {});
    SmallVector<Value> acc(fenced.begin(), fenced.begin() + o.size());
    SmallVector<Value> a(fenced.begin() + o.size(), fenced.end());
    acc = wgmmaChain(a, acc, v, loads[ov.vLoad.getOperation()], /*transposed=*/false,
                     dType.getShape()[1], pType.getShape()[1] / 16);
    NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
    SmallVector<Value> waited(acc);
    waited.append(a);
    waited = tiedAsm(b, loc, "wgmma.wait_group.sync.aligned 0;", waited, {}, {});
    scf::YieldOp::create(b, loc, ValueRange(waited).take_front(o.size()));
    b.setInsertionPointToStart(ifOp.elseBlock());
    scf::YieldOp::create(b, loc, o);
  }
  return SmallVector<Value>(ifOp.getResults());
}

} // namespace tessel::mma
