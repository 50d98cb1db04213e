//===- Loops.cpp - loops and stores -----------------------------------------------------------===//
//
// scf.for: the register iter_args (tokens of copies in flight are dropped); for the tile.loads of
// the overlapped schedule, the prologue of its two-stage load ring and the stage flip per
// iteration, the pending state, handover and drain; and tile.store from
// registers (pairs along accumulator rows, or one lane per quad for row vectors) under row and
// column bounds predicates.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

LogicalResult MmaKernelBuilder::emitStore(tile::StoreOp op) {
  Location loc = op.getLoc();
  if (op.getMask())
    return op.emitOpError("has a mask, which convert-tile-to-mma does not handle");
  if (!descs.count(op.getDesc()))
    return op.emitOpError("writes a descriptor convert-tile-to-mma cannot trace to make_desc");
  const Desc &d = descs[op.getDesc()];
  auto type = cast<RankedTensorType>(op.getValue().getType());
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  Value zero = ci64(0);
  auto storeAt = [&](Value row, Value col, int64_t width, Value value) {
    Value grow = arith::AddIOp::create(b, loc, toI64(scalars.lookup(op.getOffsets()[0])),
                                       toI64(row));
    Value in = arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, grow, zero),
                                     cmp(arith::CmpIPredicate::slt, grow, d.shape[0]));
    Value elem = arith::AddIOp::create(b, loc, d.offset,
                                       arith::MulIOp::create(b, loc, grow, d.strides[0]));
    if (col) {
      Value gcol = arith::AddIOp::create(b, loc, toI64(scalars.lookup(op.getOffsets()[1])),
                                         toI64(col));
      in = arith::AndIOp::create(b, loc, in, cmp(arith::CmpIPredicate::sge, gcol, zero));
      in = arith::AndIOp::create(b, loc, in,
                                 cmp(arith::CmpIPredicate::sle,
                                     arith::AddIOp::create(b, loc, gcol, ci64(width)), d.shape[1]));
      elem = arith::AddIOp::create(b, loc, elem, arith::MulIOp::create(b, loc, gcol, d.strides[1]));
    }
    return std::make_pair(in, elem);
  };
  if (type.getRank() == 2) {
    int64_t innerStride = constantOf(
        op.getDesc().getDefiningOp<tile::MakeDescOp>().getStrides()[1]);
    if (innerStride != 1)
      return op.emitOpError("writes a descriptor whose inner stride is not 1 "
                            "(convert-tile-to-mma stores pairs)");
    FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Acc, op);
    if (failed(regs))
      return failure();
    Type elem = type.getElementType();
    auto vt = VectorType::get({2}, elem);
    int64_t slabs = type.getShape()[1] / 8;
    for (int64_t s = 0; s < slabs; ++s) {
      Value col = arith::AddIOp::create(b, loc, quadCol2, ci32(s * 8));
      for (int64_t rr = 0; rr < 2 * mTiles; ++rr) {
        int64_t reg = (rr / 2 * slabs + s) * 4 + rr % 2 * 2;
        auto [in, elemOff] = storeAt(entryRows[rr], col, 2, Value());
        auto ifOp = scf::IfOp::create(b, loc, in, false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value v = LLVM::PoisonOp::create(b, loc, vt);
        v = LLVM::InsertElementOp::create(b, loc, v, (*regs)[reg], ci32(0));
        v = LLVM::InsertElementOp::create(b, loc, v, (*regs)[reg + 1], ci32(1));
        Value ptr = LLVM::GEPOp::create(b, loc, ptr1, elem, d.base, ValueRange{elemOff});
        LLVM::StoreOp::create(b, loc, v, ptr, /*alignment=*/elem.getIntOrFloatBitWidth() / 4);
      }
    }
    return success();
  }
  // A row vector: the first thread of each quad writes its two rows.
  FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Row, op);
  if (failed(regs))
    return failure();
  Value quadLead = cmp(arith::CmpIPredicate::eq, quadCol2, ci32(0));
  for (int64_t h = 0; h < 2 * mTiles; ++h) {
    auto [in, elemOff] = storeAt(entryRows[h], Value(), 1, Value());
    in = arith::AndIOp::create(b, loc, in, quadLead);
    auto ifOp = scf::IfOp::create(b, loc, in, false);
    OpBuilder::InsertionGuard guard(b);
    b.setInsertionPointToStart(ifOp.thenBlock());
    Value ptr = LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{elemOff});
    LLVM::StoreOp::create(b, loc, (*regs)[h], ptr);
  }
  return success();
}

LogicalResult MmaKernelBuilder::emitFor(scf::ForOp op) {
  Location loc = op.getLoc();
  SmallVector<Layout> layouts;
  SmallVector<int64_t> counts;
  SmallVector<Value> inits;
  // counts: registers per iter_arg; -1 a scalar, -2 a token of copies in flight (nothing at
  // run time: the waits name groups by their age).
  for (auto [init, arg] : llvm::zip(op.getInitArgs(), op.getRegionIterArgs())) {
    if (isa<tilegpu::AsyncTokenType>(arg.getType())) {
      layouts.push_back(Layout::Acc);
      counts.push_back(-2);
      continue;
    }
    auto rt = dyn_cast<RankedTensorType>(arg.getType());
    if (!rt) {
      layouts.push_back(Layout::Acc);
      counts.push_back(-1);
      inits.push_back(scalars.lookup(init));
      continue;
    }
    Layout l = rt.getRank() == 2 ? Layout::Acc : Layout::Row;
    FailureOr<SmallVector<Value>> regs = materialize(init, l, op);
    if (failed(regs))
      return failure();
    layouts.push_back(l);
    counts.push_back(regs->size());
    inits.append(regs->begin(), regs->end());
  }
  LoopContext ctx;
  ctx.source = op;
  for (Operation &o : op.getBody()->without_terminator())
    if (auto ld = dyn_cast<tile::LoadOp>(o))
      ctx.streams.push_back(ld);
  Value lb = scalars.lookup(op.getLowerBound());
  ctx.ub = scalars.lookup(op.getUpperBound());
  ctx.step = scalars.lookup(op.getStep());
  bool streamed = !ctx.streams.empty();
  std::optional<Overlap> overlap;
  if (streamed && overlapOption)
    overlap = matchOverlap(op);
  if (overlap)
    ctx.overlap = &*overlap;
  // A loop that takes over the previous loop's pending P·V starts in the stage after that
  // loop's last (V_last stays in the other one until this loop's first iteration reads it).
  std::optional<Handover> taken;
  if (overlap && handover && handover->next == op)
    taken = handover;
  handover.reset();
  Value stage0 = taken ? taken->stage : ci32(0);
  Value ran;
  if (overlap) {
    ran = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ctx.ub);
    if (taken)
      ran = arith::OrIOp::create(b, loc, taken->ran, ran);
  }
  // The loop's own iter_args (flattened registers), then the stage, then (overlapped) the
  // pending P and its V offset.
  size_t sourceRegs = inits.size();
  int64_t pendingRegs = 0;
  if (streamed) {
    // Prologue: every load of the body for the first iteration, into stage 0 (or, overlapped,
    // where the previous loop left off). The barrier first: an earlier loop's last iteration
    // may still be reading that stage.
    gpu::BarrierOp::create(b, loc);
    Value any = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::slt, lb, ctx.ub);
    auto ifOp = scf::IfOp::create(b, loc, any, false);
    {
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      LoopContext *outer = loop;
      loop = &ctx;
      issueStreams(lb, stage0);
      loop = outer;
    }
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    inits.push_back(stage0);
  }
  if (overlap) {
    int64_t k = cast<RankedTensorType>(overlap->pvDot.getA().getType()).getShape()[1];
    pendingRegs = mTiles * (k / 16) * 4;
    if (taken) {
      inits.append(taken->pendingP.begin(), taken->pendingP.end());
      inits.push_back(taken->pendingV);
    } else {
      // Nothing is pending before the first iteration: P = 0 against K_lb (see Overlap).
      inits.append(pendingRegs, ci32(0));
      inits.push_back(ci32(loads[overlap->kLoad.getOperation()].smemOffset));
    }
  }
  auto newFor = scf::ForOp::create(b, loc, lb, ctx.ub, ctx.step, inits);
  Block *body = newFor.getBody();
  OpBuilder::InsertionGuard guard(b);
  if (!body->empty() && body->back().hasTrait<OpTrait::IsTerminator>())
    body->back().erase();
  b.setInsertionPointToEnd(body);
  ctx.iv = newFor.getInductionVar();
  if (streamed)
    ctx.stage = newFor.getRegionIterArgs()[sourceRegs];
  if (overlap) {
    auto args = newFor.getRegionIterArgs();
    overlap->pendingP.assign(args.begin() + sourceRegs + 1,
                             args.begin() + sourceRegs + 1 + pendingRegs);
    overlap->pendingV = args[sourceRegs + 1 + pendingRegs];
  }
  scalars.map(op.getInductionVar(), ctx.iv);
  LoopContext *outer = loop;
  loop = &ctx;
  lazy.emplace_back();
  auto unflatten = [&](ValueRange flat, ValueRange targets) {
    size_t pos = 0;
    for (auto [i, t] : llvm::enumerate(targets)) {
      if (counts[i] == -2)
        continue;
      if (counts[i] < 0) {
        scalars.map(t, flat[pos++]);
        continue;
      }
      SmallVector<Value> regs(flat.begin() + pos, flat.begin() + pos + counts[i]);
      pos += counts[i];
      eager[t] = {layouts[i], regs};
    }
  };
  unflatten(newFor.getRegionIterArgs(), op.getRegionIterArgs());
  LogicalResult result = emitBlock(*op.getBody());
  SmallVector<Value> yielded;
  if (succeeded(result)) {
    auto yield = cast<scf::YieldOp>(op.getBody()->getTerminator());
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      if (counts[i] == -2)
        continue;
      if (counts[i] < 0) {
        yielded.push_back(scalars.lookup(v));
        continue;
      }
      FailureOr<SmallVector<Value>> regs = materialize(v, layouts[i], yield);
      if (failed(regs)) {
        result = failure();
        break;
      }
      yielded.append(regs->begin(), regs->end());
    }
  }
  if (succeeded(result) && streamed)
    yielded.push_back(arith::SubIOp::create(b, loc, ci32(streamStageBytes), ctx.stage));
  if (succeeded(result) && overlap) {
    llvm::append_range(yielded, overlap->pendingP);
    yielded.push_back(overlap->pendingV);
  }
  if (succeeded(result))
    scf::YieldOp::create(b, loc, yielded);
  else
    scf::YieldOp::create(b, loc, ValueRange(newFor.getRegionIterArgs()));
  lazy.pop_back();
  loop = outer;
  b.setInsertionPointAfter(newFor);
  if (failed(result))
    return failure();
  unflatten(newFor.getResults(), op.getResults());
  if (overlap) {
    auto results = newFor.getResults();
    Value o = op.getResult(overlap->accIndex);
    SmallVector<Value> p(results.begin() + sourceRegs + 1,
                         results.begin() + sourceRegs + 1 + pendingRegs);
    Value v = results[sourceRegs + 1 + pendingRegs];
    if (scf::ForOp next = handoverTarget(op, *overlap))
      handover = Handover{next, p, v, results[sourceRegs], ran};
    else
      eager[o] = {Layout::Acc, drainOverlap(*overlap, eager[o].second, p, v, ran)};
  }
  return success();
}

} // namespace tessel::mma
