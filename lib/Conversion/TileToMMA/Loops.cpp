//===- Loops.cpp - loops and stores -----------------------------------------------------------===//
//
// scf.for with its iter_args in registers (tokens of copies in flight are dropped), scf.if with
// its results in registers, and tile.store from registers (pairs along accumulator rows, or one
// lane per quad for row vectors) under row and column bounds predicates.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

namespace {
/// The first of the two accumulator registers a thread holds at (row slot rr, column slab s) of
/// a tile of `slabs` 8-column slabs: registers 4·s + 2·(rr mod 2) of m tile rr / 2.
int64_t accPairRegister(int64_t rr, int64_t s, int64_t slabs) {
  return (rr / 2 * slabs + s) * 4 + rr % 2 * 2;
}
} // namespace

std::pair<Value, Value> MmaKernelBuilder::elementAt(Location loc, const Desc &d, Value r0, Value c0,
                                                    Value row, Value col, int64_t width) {
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  Value zero = ci64(0);
  Value grow = arith::AddIOp::create(b, loc, r0, toI64(row));
  Value in = arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::sge, grow, zero),
                                   cmp(arith::CmpIPredicate::slt, grow, d.shape[0]));
  Value elem = arith::AddIOp::create(b, loc, d.offset,
                                     arith::MulIOp::create(b, loc, grow, d.strides[0]));
  if (col) {
    Value gcol = arith::AddIOp::create(b, loc, c0, toI64(col));
    in = arith::AndIOp::create(b, loc, in, cmp(arith::CmpIPredicate::sge, gcol, zero));
    in = arith::AndIOp::create(b, loc, in,
                               cmp(arith::CmpIPredicate::sle,
                                   arith::AddIOp::create(b, loc, gcol, ci64(width)), d.shape[1]));
    elem = arith::AddIOp::create(b, loc, elem, arith::MulIOp::create(b, loc, gcol, d.strides[1]));
  }
  return {in, elem};
}

Value MmaKernelBuilder::blockStart(Location loc, const Desc &d, Value r0, Value c0) {
  Value first = arith::AddIOp::create(
      b, loc, d.offset,
      arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, r0, d.strides[0]),
                            arith::MulIOp::create(b, loc, c0, d.strides[1])));
  return LLVM::GEPOp::create(b, loc, LLVM::LLVMPointerType::get(b.getContext(), 1), d.elementType,
                             d.base, ValueRange{first});
}

void MmaKernelBuilder::atomicAddTile(Location loc, Value desc, ValueRange offsets,
                                     RankedTensorType type, ArrayRef<Value> regs) {
  // Atomic adds element by element: no pair form before sm_90.
  const Desc &d = descs[desc];
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  Value zero = ci64(0);
  int64_t slabs = type.getShape()[1] / 8;
  auto pairReg = [&](int64_t rr, int64_t s) { return accPairRegister(rr, s, slabs); };
  // The whole tile inside the tensor (a uniform condition: every block but a ragged last
  // one): no check per element. Checked per element, the predicates of the rows are
  // loop-invariant and ptxas keeps them live across the loop (the backward's dQ adds).
  Value r0 = toI64(scalars.lookup(offsets[0]));
  Value c0 = toI64(scalars.lookup(offsets[1]));
  auto inside = [&](Value x0, int64_t extent, Value limit) {
    return arith::AndIOp::create(
        b, loc, cmp(arith::CmpIPredicate::sge, x0, zero),
        cmp(arith::CmpIPredicate::sle, arith::AddIOp::create(b, loc, x0, ci64(extent)), limit));
  };
  Value full = arith::AndIOp::create(b, loc, inside(r0, type.getShape()[0], d.shape[0]),
                                     inside(c0, type.getShape()[1], d.shape[1]));
  auto split = scf::IfOp::create(b, loc, full, /*withElseRegion=*/true);
  OpBuilder::InsertionGuard outer(b);
  b.setInsertionPointToStart(split.thenBlock());
  Value blockBase = blockStart(loc, d, r0, c0);
  for (int64_t s = 0; s < slabs; ++s)
    for (int64_t rr = 0; rr < 2 * mTiles; ++rr)
      for (int64_t e = 0; e < 2; ++e) {
        Value col = arith::AddIOp::create(b, loc, quadCol2, ci32(s * 8 + e));
        Value elem = arith::AddIOp::create(
            b, loc, arith::MulIOp::create(b, loc, toI64(entryRows[rr]), d.strides[0]),
            arith::MulIOp::create(b, loc, toI64(col), d.strides[1]));
        tessel::conversion::atomicAddAt(
            b, loc, LLVM::GEPOp::create(b, loc, ptr1, d.elementType, blockBase, ValueRange{elem}),
            regs[pairReg(rr, s) + e]);
      }
  b.setInsertionPointToStart(split.elseBlock());
  for (int64_t s = 0; s < slabs; ++s)
    for (int64_t rr = 0; rr < 2 * mTiles; ++rr)
      for (int64_t e = 0; e < 2; ++e) {
        Value col = arith::AddIOp::create(b, loc, quadCol2, ci32(s * 8 + e));
        auto [in, elem] = elementAt(loc, d, r0, c0, entryRows[rr], col, 1);
        auto ifOp = scf::IfOp::create(b, loc, in, /*withElseRegion=*/false);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        tessel::conversion::atomicAddAt(
            b, loc, LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{elem}),
            regs[pairReg(rr, s) + e]);
      }
}

template <typename WriteOp>
LogicalResult MmaKernelBuilder::emitStore(WriteOp op) {
  constexpr bool add = std::is_same_v<WriteOp, tile::AtomicAddOp>;
  Location loc = op.getLoc();
  if (op.getMask())
    return op.emitOpError("has a mask, which convert-tile-to-mma does not handle");
  if (!descs.count(op.getDesc()))
    return op.emitOpError("writes a descriptor convert-tile-to-mma cannot trace to make_desc");
  const Desc &d = descs[op.getDesc()];
  if (d.pages)
    return op.emitOpError("writes through a paged descriptor, which convert-tile-to-mma does "
                          "not handle (the reference lowering does)");
  auto type = cast<RankedTensorType>(op.getValue().getType());
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  Value zero = ci64(0);
  auto storeAt = [&](Value row, Value col, int64_t width, Value) {
    Value c0 = col ? toI64(scalars.lookup(op.getOffsets()[1])) : Value();
    return elementAt(loc, d, toI64(scalars.lookup(op.getOffsets()[0])), c0, row, col, width);
  };
  // One element: a plain store, or for tile.atomic_add an atomic add.
  auto writeOne = [&](Value value, Value ptr) {
    if constexpr (add)
      tessel::conversion::atomicAddAt(b, loc, ptr, value);
    else
      LLVM::StoreOp::create(b, loc, value, ptr);
  };
  int64_t slabs = type.getRank() == 2 ? type.getShape()[1] / 8 : 0;
  auto pairReg = [&](int64_t rr, int64_t s) { return accPairRegister(rr, s, slabs); };
  if (type.getRank() == 2 && add) {
    FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Acc, op);
    if (failed(regs))
      return failure();
    atomicAddTile(loc, op.getDesc(), op.getOffsets(), type, *regs);
    return success();
  }
  if (type.getRank() == 2) {
    // Pairs along a row are stored as one 2-element access. Known at compile time to be whole
    // and aligned (unit inner stride, even row stride and width: attention's outputs), they are
    // stored as such; otherwise each pair checks at run time and falls back to its elements.
    auto md = op.getDesc().template getDefiningOp<tile::MakeDescOp>();
    int64_t rowStride = constantOf(md.getStrides()[0]), width = constantOf(md.getShape()[1]);
    bool staticPairs = constantOf(md.getStrides()[1]) == 1 && rowStride != INT64_MIN &&
                       rowStride % 2 == 0 && width != INT64_MIN && width % 2 == 0;
    FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Acc, op);
    if (failed(regs))
      return failure();
    Type elem = type.getElementType();
    auto vt = VectorType::get({2}, elem);
    int64_t pairBytes = elem.getIntOrFloatBitWidth() / 4;
    // 16 bytes a thread where every 8-column chunk is whole (the width a multiple of 8) and,
    // checked once at run time, the block's first column starts a 16-byte chunk; else (the
    // else branch) pairs as below.
    scf::IfOp split;
    if (vectorStores && staticPairs && pairBytes == 4 && rowStride % 8 == 0 && width % 8 == 0 &&
        slabs % 4 == 0) {
      Value r0 = toI64(scalars.lookup(op.getOffsets()[0]));
      Value c0 = toI64(scalars.lookup(op.getOffsets()[1]));
      Value first = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), blockStart(loc, d, zero, c0));
      Value aligned = arith::AndIOp::create(
          b, loc,
          cmp(arith::CmpIPredicate::eq, arith::AndIOp::create(b, loc, first, ci64(15)), zero),
          cmp(arith::CmpIPredicate::eq, arith::AndIOp::create(b, loc, c0, ci64(7)), zero));
      split = scf::IfOp::create(b, loc, aligned, /*withElseRegion=*/true);
      b.setInsertionPointToStart(split.thenBlock());
      storeQuadVectors(loc, d, r0, c0, elem, slabs, *regs);
      b.setInsertionPointToStart(split.elseBlock());
    }
    for (int64_t s = 0; s < slabs; ++s) {
      Value col = arith::AddIOp::create(b, loc, quadCol2, ci32(s * 8));
      for (int64_t rr = 0; rr < 2 * mTiles; ++rr) {
        int64_t reg = pairReg(rr, s);
        auto [in, elemOff] = storeAt(entryRows[rr], col, 2, Value());
        auto pairPtr = [&] {
          return LLVM::GEPOp::create(b, loc, ptr1, elem, d.base, ValueRange{elemOff});
        };
        Value ptr = staticPairs ? Value() : Value(pairPtr());
        if (!staticPairs) {
          Value addr = LLVM::PtrToIntOp::create(b, loc, b.getI64Type(), ptr);
          in = arith::AndIOp::create(
              b, loc, in,
              arith::AndIOp::create(b, loc, cmp(arith::CmpIPredicate::eq, d.strides[1], ci64(1)),
                                    cmp(arith::CmpIPredicate::eq,
                                        arith::AndIOp::create(b, loc, addr, ci64(pairBytes - 1)),
                                        zero)));
        }
        auto ifOp = scf::IfOp::create(b, loc, in, /*withElseRegion=*/!staticPairs);
        OpBuilder::InsertionGuard guard(b);
        b.setInsertionPointToStart(ifOp.thenBlock());
        Value v = LLVM::PoisonOp::create(b, loc, vt);
        v = LLVM::InsertElementOp::create(b, loc, v, (*regs)[reg], ci32(0));
        v = LLVM::InsertElementOp::create(b, loc, v, (*regs)[reg + 1], ci32(1));
        LLVM::StoreOp::create(b, loc, v, staticPairs ? Value(pairPtr()) : ptr,
                              /*alignment=*/pairBytes);
        if (staticPairs)
          continue;
        b.setInsertionPointToStart(ifOp.elseBlock());
        for (int64_t e = 0; e < 2; ++e) {
          auto [one, oneOff] = storeAt(entryRows[rr], arith::AddIOp::create(b, loc, col, ci32(e)),
                                       1, Value());
          auto single = scf::IfOp::create(b, loc, one, /*withElseRegion=*/false);
          OpBuilder::InsertionGuard inner(b);
          b.setInsertionPointToStart(single.thenBlock());
          LLVM::StoreOp::create(
              b, loc, (*regs)[reg + e],
              LLVM::GEPOp::create(b, loc, ptr1, elem, d.base, ValueRange{oneOff}));
        }
      }
    }
    if (split)
      b.setInsertionPointAfter(split);
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
    writeOne((*regs)[h],
             LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{elemOff}));
  }
  return success();
}

void MmaKernelBuilder::storeQuadVectors(Location loc, const Desc &d, Value r0, Value c0, Type elem,
                                        int64_t slabs, ArrayRef<Value> regs) {
  auto i32 = b.getI32Type();
  auto cmp = [&](arith::CmpIPredicate pred, Value x, Value y) {
    return arith::CmpIOp::create(b, loc, pred, x, y);
  };
  // The thread's place q in its quad, and its two bits: the butterfly stage on bit k swaps
  // word i of thread q with word i ^ 2^k of thread q ^ 2^k where bit k of i and of q differ,
  // so that after both stages thread q holds word q of every thread (a 4×4 transpose).
  Value q = arith::ShRUIOp::create(b, loc, quadCol2, ci32(1));
  Value bits[2] = {
      cmp(arith::CmpIPredicate::ne, arith::AndIOp::create(b, loc, q, ci32(1)), ci32(0)),
      cmp(arith::CmpIPredicate::ne, arith::AndIOp::create(b, loc, q, ci32(2)), ci32(0))};
  auto pairType = VectorType::get({2}, elem);
  auto quadType = VectorType::get({4}, i32);
  auto ptr1 = LLVM::LLVMPointerType::get(b.getContext(), 1);
  Value full = ci32(-1), clamp = ci32(31);
  for (int64_t rr = 0; rr < 2 * mTiles; ++rr)
    for (int64_t g = 0; g < slabs / 4; ++g) {
      // Word i: the thread's two columns of slab 4g + i, as one 32-bit value.
      SmallVector<Value, 4> w;
      for (int64_t i = 0; i < 4; ++i) {
        int64_t reg = accPairRegister(rr, 4 * g + i, slabs);
        Value v = LLVM::PoisonOp::create(b, loc, pairType);
        v = LLVM::InsertElementOp::create(b, loc, v, regs[reg], ci32(0));
        v = LLVM::InsertElementOp::create(b, loc, v, regs[reg + 1], ci32(1));
        w.push_back(LLVM::BitcastOp::create(b, loc, i32, v));
      }
      for (int64_t k = 0; k < 2; ++k)
        for (int64_t a = 0; a < 4; ++a) {
          int64_t c = a | (1 << k);
          if (a & (1 << k))
            continue;
          // The thread with bit k set keeps w[c] and receives its partner's w[c] into w[a];
          // the other keeps w[a] and receives its partner's w[a] into w[c].
          Value send = arith::SelectOp::create(b, loc, bits[k], w[a], w[c]);
          Value got = NVVM::ShflOp::create(b, loc, i32, full, send, ci32(1 << k), clamp,
                                           NVVM::ShflKind::bfly, UnitAttr());
          w[a] = arith::SelectOp::create(b, loc, bits[k], got, w[a]);
          w[c] = arith::SelectOp::create(b, loc, bits[k], w[c], got);
        }
      Value v = LLVM::PoisonOp::create(b, loc, quadType);
      for (int64_t i = 0; i < 4; ++i)
        v = LLVM::InsertElementOp::create(b, loc, v, w[i], ci32(i));
      // Thread q now holds columns 8·(4g + q) … 8·(4g + q) + 7 of its row.
      Value col = arith::AddIOp::create(b, loc, arith::MulIOp::create(b, loc, q, ci32(8)),
                                        ci32(32 * g));
      auto [in, off] = elementAt(loc, d, r0, c0, entryRows[rr], col, 8);
      auto ifOp = scf::IfOp::create(b, loc, in, /*withElseRegion=*/false);
      OpBuilder::InsertionGuard guard(b);
      b.setInsertionPointToStart(ifOp.thenBlock());
      LLVM::StoreOp::create(
          b, loc, v, LLVM::GEPOp::create(b, loc, ptr1, d.elementType, d.base, ValueRange{off}),
          /*alignment=*/16);
    }
}

template LogicalResult MmaKernelBuilder::emitStore(tile::StoreOp);
template LogicalResult MmaKernelBuilder::emitStore(tile::AtomicAddOp);

LogicalResult MmaKernelBuilder::emitFor(scf::ForOp op) {
  // How each iter_arg is carried: registers in a layout (Acc, Row), the b32 registers of a
  // wgmma A operand (P of the overlapped schedule), a scalar (also a shared buffer: its byte
  // offset), or nothing at run time (a token of copies in flight: the waits name groups by
  // their age).
  enum class Carried { Registers, OperandA, Scalar, Token };
  SmallVector<Carried> kinds;
  SmallVector<Layout> layouts;
  SmallVector<int64_t> counts;
  SmallVector<Value> inits;
  for (auto [init, arg] : llvm::zip(op.getInitArgs(), op.getRegionIterArgs())) {
    layouts.push_back(Layout::Acc);
    counts.push_back(1);
    if (isa<tilegpu::AsyncTokenType>(arg.getType())) {
      kinds.push_back(Carried::Token);
      counts.back() = 0;
      continue;
    }
    auto rt = dyn_cast<RankedTensorType>(arg.getType());
    if (!rt) {
      kinds.push_back(Carried::Scalar);
      inits.push_back(scalars.lookup(init));
      continue;
    }
    FailureOr<SmallVector<Value>> regs;
    if (isa_and_nonnull<tilegpu::DotOperandEncodingAttr>(rt.getEncoding())) {
      kinds.push_back(Carried::OperandA);
      regs = wgmmaA(init, op);
    } else {
      kinds.push_back(Carried::Registers);
      layouts.back() = rt.getRank() == 2 ? Layout::Acc : Layout::Row;
      regs = materialize(init, layouts.back(), op);
    }
    if (failed(regs))
      return failure();
    counts.back() = regs->size();
    inits.append(regs->begin(), regs->end());
  }
  auto bind = [&](ValueRange flat, ValueRange targets) {
    size_t pos = 0;
    for (auto [i, t] : llvm::enumerate(targets)) {
      SmallVector<Value> regs(flat.begin() + pos, flat.begin() + pos + counts[i]);
      pos += counts[i];
      switch (kinds[i]) {
      case Carried::Token: break;
      case Carried::Scalar: scalars.map(t, regs.front()); break;
      case Carried::OperandA: aFragments[t] = regs; break;
      case Carried::Registers: eager[t] = {layouts[i], regs}; break;
      }
    }
  };
  // Values the body computes lazily are kept to its scope.
  lazy.emplace_back();
  LogicalResult result = emitCarriedLoop(op, inits, bind, [&](scf::YieldOp yield) {
    SmallVector<Value> yielded;
    for (auto [i, v] : llvm::enumerate(yield.getOperands())) {
      FailureOr<SmallVector<Value>> regs = SmallVector<Value>();
      switch (kinds[i]) {
      case Carried::Token: break;
      case Carried::Scalar: regs->push_back(scalars.lookup(v)); break;
      case Carried::OperandA: regs = wgmmaA(v, yield); break;
      case Carried::Registers: regs = materialize(v, layouts[i], yield); break;
      }
      if (failed(regs))
        return FailureOr<SmallVector<Value>>(failure());
      yielded.append(regs->begin(), regs->end());
    }
    return FailureOr<SmallVector<Value>>(yielded);
  });
  lazy.pop_back();
  return result;
}

LogicalResult MmaKernelBuilder::emitIf(scf::IfOp op) {
  // Results: register tiles (2-D in the Acc layout, 1-D in the Row layout) or scalars.
  for (Type t : op.getResultTypes()) {
    auto rt = dyn_cast<RankedTensorType>(t);
    if (rt &&
        (rt.getRank() > 2 || isa_and_nonnull<tilegpu::DotOperandEncodingAttr>(rt.getEncoding())))
      return op.emitOpError("yields a tile convert-tile-to-mma does not carry in registers");
  }
  if (op.getNumResults() && op.getElseRegion().empty())
    return op.emitOpError("has results but no else branch");
  auto layoutOf = [](Value v) {
    return cast<RankedTensorType>(v.getType()).getRank() == 2 ? Layout::Acc : Layout::Row;
  };
  Location loc = op.getLoc();
  Value cond = scalars.lookup(op.getCondition());
  // The branches are emitted into an scf.if without results first: the registers they yield
  // give the final op's result types.
  auto draft = scf::IfOp::create(b, loc, TypeRange{}, cond, /*withElseRegion=*/true);
  auto emitBranch = [&](Region &region, Block *into) -> FailureOr<SmallVector<Value>> {
    OpBuilder::InsertionGuard guard(b);
    into->getTerminator()->erase();
    b.setInsertionPointToEnd(into);
    SmallVector<Value> flat;
    lazy.emplace_back();
    LogicalResult emitted = region.empty() ? success() : emitBlock(region.front());
    if (succeeded(emitted) && !region.empty()) {
      auto yield = cast<scf::YieldOp>(region.front().getTerminator());
      for (Value v : yield.getOperands()) {
        if (!isTensor(v.getType())) {
          flat.push_back(scalars.lookup(v));
          continue;
        }
        FailureOr<SmallVector<Value>> regs = materialize(v, layoutOf(v), yield);
        if (failed(regs)) {
          emitted = failure();
          break;
        }
        flat.append(regs->begin(), regs->end());
      }
    }
    lazy.pop_back();
    scf::YieldOp::create(b, loc, succeeded(emitted) ? ValueRange(flat) : ValueRange());
    if (failed(emitted))
      return failure();
    return flat;
  };
  FailureOr<SmallVector<Value>> thenRegs = emitBranch(op.getThenRegion(), draft.thenBlock());
  FailureOr<SmallVector<Value>> elseRegs = failure();
  if (succeeded(thenRegs))
    elseRegs = emitBranch(op.getElseRegion(), draft.elseBlock());
  if (failed(thenRegs) || failed(elseRegs) ||
      TypeRange(ValueRange(*thenRegs)) != TypeRange(ValueRange(*elseRegs))) {
    draft.erase();
    if (succeeded(thenRegs) && succeeded(elseRegs))
      return op.emitOpError("yields registers of other types from its two branches");
    return failure();
  }
  auto ifOp = scf::IfOp::create(b, loc, TypeRange(ValueRange(*thenRegs)), cond,
                                /*withElseRegion=*/true);
  ifOp.getThenRegion().takeBody(draft.getThenRegion());
  ifOp.getElseRegion().takeBody(draft.getElseRegion());
  draft.erase();
  size_t pos = 0;
  for (Value result : op.getResults()) {
    if (!isTensor(result.getType())) {
      scalars.map(result, ifOp.getResult(pos++));
      continue;
    }
    FailureOr<int64_t> n = regCount(cast<RankedTensorType>(result.getType()), layoutOf(result), op);
    if (failed(n))
      return failure();
    SmallVector<Value> regs(ifOp.getResults().begin() + pos, ifOp.getResults().begin() + pos + *n);
    pos += *n;
    eager[result] = {layoutOf(result), regs};
  }
  return success();
}

} // namespace tessel::mma
