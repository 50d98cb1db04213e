//===- Wgmma.cpp - tilegpu.wgmma and its wait as wgmma.mma_async (sm_90a) ---------------------===//
//
// The dot of the sm_90a path (docs/dev/codegen-wgmma.md): a chain of wgmma.mma_async k steps with
// A from registers (or a descriptor) and B through a 128-byte-swizzle shared-memory matrix
// descriptor, the fence, commit and wait around it, and the inline-PTX statements that tie the
// registers in flight so that LLVM cannot move their ordinary uses across the fence or the wait.
// Every wgmma dot reaches here as tilegpu.wgmma + tilegpu.wgmma_wait, with the waits where the IR
// puts them: right after the dot (tilegpu-async-dots{eager}), before its first use
// (tilegpu-async-dots) or one iteration later (tilegpu-overlap-wgmma).
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

void MmaKernelBuilder::fenceSharedForAsyncProxy(Location loc) {
  NVVM::FenceProxyOp::create(
      b, loc, NVVM::ProxyKindAttr::get(b.getContext(), NVVM::ProxyKind::async_shared),
      NVVM::SharedSpaceAttr::get(b.getContext(), NVVM::SharedSpace::shared_cta));
}

/// Inline PTX `text` with results of `types` ("=f" for f32, "=h" for i16, "=r" otherwise),
/// each tied to the operand of the same position in `tied` when `tied` is given (the
/// statement reads and writes it in place), then `inputs` read with `inputConstraints`.
SmallVector<Value> asmResults(OpBuilder &b, Location loc, StringRef text, TypeRange types,
                              ValueRange tied, ValueRange inputs,
                              ArrayRef<StringRef> inputConstraints) {
  SmallVector<std::string> constraints;
  for (Type t : types)
    constraints.push_back(t.isF32() ? "=f" : t.isInteger(16) ? "=h" : "=r");
  for (size_t i = 0; i < tied.size(); ++i)
    constraints.push_back(std::to_string(i));
  for (StringRef c : inputConstraints)
    constraints.push_back(c.str());
  SmallVector<Value> operands(tied.begin(), tied.end());
  operands.append(inputs.begin(), inputs.end());
  return tessel::conversion::inlinePtx(b, loc, types, operands, text, llvm::join(constraints, ","));
}

/// Inline PTX `text` that reads and writes `tied` in place and reads `inputs`; the new values
/// of `tied`. Values read by an asynchronous wgmma go through such statements so that LLVM
/// cannot move an ordinary read or write of them across the fence or the wait.
SmallVector<Value> tiedAsm(OpBuilder &b, Location loc, StringRef text, ValueRange tied,
                           ValueRange inputs, ArrayRef<StringRef> inputConstraints) {
  return asmResults(b, loc, text, TypeRange(tied), tied, inputs, inputConstraints);
}

/// Whether `v` is a splat 0.0 tile constant (a dot's accumulator that wgmma need not read).
bool isZeroTile(Value v) {
  auto cst = v.getDefiningOp<arith::ConstantOp>();
  auto dense = cst ? dyn_cast<DenseFPElementsAttr>(cst.getValue()) : DenseFPElementsAttr();
  return dense && dense.isSplat() && dense.getSplatValue<APFloat>().isPosZero();
}

bool isSynchronousDot(Operation *op) {
  if (isa<tilegpu::MmaOp>(op))
    return true;
  auto wait = dyn_cast_or_null<tilegpu::WgmmaWaitOp>(op->getNextNode());
  return isa<tilegpu::WgmmaOp>(op) && wait && wait.getPending() == 0 &&
         wait.getValues() == op->getResults();
}

Value MmaKernelBuilder::wgmmaDescriptor(Value offset, const LoadPlan &p, bool kMajor) {
  // The start address (bits 0-13, bytes >> 4), the leading and stride byte offsets (>> 4) and
  // the swizzle (bits 62-63: 1 for 128 bytes, 2 for 64, 3 for 32). K-major: 8-row core-matrix
  // groups 8 rows apart (SBO: 1024 B, 512 with 64-byte rows, 256 with 32-byte ones), LBO
  // unused with swizzling. N-major (128-byte swizzle only): 8-row groups along k 1024 B apart
  // (SBO), 64-column slabs along n p.rows·128 B apart (LBO).
  Location loc = b.getUnknownLoc();
  Type i64 = b.getI64Type();
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  Value addr = LLVM::PtrToIntOp::create(
      b, loc, i64, LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), smemBase, ValueRange{offset}));
  int64_t swizzle = tilegpu::swizzleBytes(p.cols, wgmma);
  assert((kMajor || swizzle == 128) && "narrow rows are read K-major");
  uint64_t mode = swizzle == 128 ? 1 : swizzle == 64 ? 2 : 3;
  uint64_t lbo = kMajor ? 1 : static_cast<uint64_t>(p.rows * 128 / 16);
  uint64_t sbo = 8 * rowBytes(p.cols) / 16;
  uint64_t fields = (mode << 62) | (sbo << 32) | (lbo << 16);
  Value start = arith::AndIOp::create(b, loc, arith::ShRUIOp::create(b, loc, addr, ci64(4)),
                                      ci64(0x3FFF));
  return arith::OrIOp::create(b, loc, start, ci64(static_cast<int64_t>(fields)));
}

int64_t MmaKernelBuilder::wgmmaDescriptorStep(const LoadPlan &p, bool kMajor, int64_t kt) {
  // The start address of the other k steps is a constant further (the slab base is 1024-byte
  // aligned, so adding inside the 128-byte atom is what the hardware's address-based swizzle
  // expects): 32 B a step inside the atom, the next slab past 64 columns (K-major); 16 rows
  // (N-major).
  if (!kMajor)
    return kt * 16 * 128 >> 4;
  auto [xorBytes, addBytes] = chunkStep(p, kt);
  return (xorBytes + addBytes) >> 4;
}

SmallVector<Value> MmaKernelBuilder::wgmmaChain(ArrayRef<Value> a, ArrayRef<Value> accIn,
                                                Value offset, const LoadPlan &p, bool transposed,
                                                int64_t N, int64_t kSteps,
                                                const SharedView *aView) {
  Location loc = b.getUnknownLoc();
  Type f32 = b.getF32Type();
  SmallVector<Value> acc(accIn);
  bool zeroAcc = acc.empty();
  Value desc0 = wgmmaDescriptor(offset, p, transposed);
  // A from shared memory: a K-major block, read from its slot or the stage of a ring; each
  // warpgroup's 64 rows start 64 rows of 128 bytes further in every slab (rowBase rounded down
  // to the warpgroup).
  const LoadPlan *aPlan = aView ? &aView->plan : nullptr;
  Value aDesc0;
  if (aPlan) {
    Value aStart = ci32(aPlan->smemOffset);
    if (aView->stage)
      aStart = arith::AddIOp::create(b, loc, aStart, aView->stage);
    // Transposed (MN-major), the warpgroup's 64 rows are the block's 64-column slab w.
    if (blockM > 64)
      aStart = arith::AddIOp::create(
          b, loc, aStart,
          aView->transposed
              ? Value(arith::MulIOp::create(b, loc,
                                            arith::ShRUIOp::create(b, loc, rowBase, ci32(6)),
                                            ci32(slabBytes(*aPlan))))
              : Value(arith::MulIOp::create(
                    b, loc, arith::AndIOp::create(b, loc, rowBase, ci32(~63)), ci32(128))));
    aDesc0 = wgmmaDescriptor(aStart, *aPlan, !aView->transposed);
  }
  bool fp8 = isa<Float8E4M3FNType>(operandType);
  StringRef ptxType = fp8 ? "e4m3" : operandType.isBF16() ? "bf16" : "f16";
  int64_t nAcc = N / 2;
  int64_t aOperands = aPlan ? 1 : 4;
  for (int64_t kt = 0; kt < kSteps; ++kt) {
    auto at = [&](Value d0, int64_t step) {
      return step ? Value(arith::AddIOp::create(b, loc, d0, ci64(step))) : d0;
    };
    Value desc = at(desc0, wgmmaDescriptorStep(p, transposed, kt));
    bool readAcc = !(zeroAcc && kt == 0);
    // Operands: the nAcc outputs, then (when read) the nAcc tied inputs, then A (four
    // registers or a descriptor), desc, scale-d.
    int64_t first = readAcc ? 2 * nAcc : nAcc;
    std::string text;
    llvm::raw_string_ostream os(text);
    os << "{\n.reg .pred p;\nsetp.ne.b32 p, $" << first + aOperands + 1 << ", 0;\n"
       << "wgmma.mma_async.sync.aligned.m64n" << N << "k" << kPerStep() << ".f32." << ptxType << "."
       << ptxType << " {";
    for (int64_t i = 0; i < nAcc; ++i)
      os << (i ? ", " : "") << "$" << i;
    os << "}, ";
    if (aPlan)
      os << "$" << first;
    else
      os << "{$" << first << ", $" << first + 1 << ", $" << first + 2 << ", $" << first + 3 << "}";
    // scale-d, imm-scale-a, imm-scale-b, [imm-trans-a (0: A K-major),] imm-trans-b. FP8 has
    // no transpose immediates: its operands are K-major (MmaClass refuses the others).
    os << ", $" << first + aOperands << ", p, 1, 1";
    if (!fp8)
      os << ", " << (aPlan ? (aView->transposed ? "1, " : "0, ") : "") << (transposed ? 0 : 1);
    os << ";\n}";
    SmallVector<Value> inputs;
    SmallVector<StringRef> cons;
    if (aPlan) {
      inputs.push_back(at(aDesc0, wgmmaDescriptorStep(*aPlan, !aView->transposed, kt)));
      cons.push_back("l");
    } else {
      inputs.append(a.begin() + kt * 4, a.begin() + kt * 4 + 4);
      cons.append({"r", "r", "r", "r"});
    }
    inputs.push_back(desc);
    inputs.push_back(ci32(readAcc ? 1 : 0));
    cons.append({"l", "r"});
    // The first step of a zero accumulator writes it without reading it (scale-d false).
    acc = readAcc ? tiedAsm(b, loc, text, acc, inputs, cons)
                  : asmResults(b, loc, text, SmallVector<Type>(nAcc, f32), {}, inputs, cons);
  }
  return acc;
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::wgmmaA(Value a, Operation *user) {
  auto type = cast<RankedTensorType>(a.getType());
  int64_t K = type.getShape()[1];
  Type i32 = b.getI32Type();
  // Nothing pending before an overlapped loop's first iteration: P = 0.
  if (isZeroTile(a))
    return SmallVector<Value>(mTiles * (K / kPerStep()) * 4, ci32(0));
  FailureOr<SmallVector<Value>> frags = aFragmentsOf(a, K, user);
  if (failed(frags))
    return failure();
  if (frags->empty())
    return user->emitOpError("reads its A operand from shared memory at every k step, which "
                             "codegen=wgmma does not do");
  SmallVector<Value> regs;
  for (Value v : *frags)
    regs.push_back(v.getType() == i32 ? v
                                      : Value(LLVM::BitcastOp::create(b, user->getLoc(), i32, v)));
  return regs;
}

LogicalResult MmaKernelBuilder::emitWgmma(tilegpu::WgmmaOp op) {
  Location loc = op.getLoc();
  if (!isa_and_nonnull<tilegpu::WgmmaOp>(op->getPrevNode())) {
    // The first of a run of wgmmas: one fence for the registers of the whole run that
    // ordinary instructions wrote (a computed or carried A, an accumulator that is not a
    // fresh zero), tied through it so that every such write is ordered before it.
    SmallVector<tilegpu::WgmmaOp> run;
    for (Operation *it = op; it && isa<tilegpu::WgmmaOp>(it); it = it->getNextNode())
      run.push_back(cast<tilegpu::WgmmaOp>(it));
    SmallVector<Value> tied;
    SmallVector<std::pair<size_t, size_t>> spans;
    for (tilegpu::WgmmaOp w : run) {
      // An A block in shared memory is read by descriptor (wgmmaChain): no registers.
      FailureOr<SmallVector<Value>> a = aShared.count(w.getA()) ? SmallVector<Value>()
                                                                : wgmmaA(w.getA(), w);
      if (failed(a))
        return failure();
      SmallVector<Value> acc;
      if (!isZeroTile(w.getAcc())) {
        FailureOr<SmallVector<Value>> c = materialize(w.getAcc(), Layout::Acc, w);
        if (failed(c))
          return failure();
        acc = *c;
      }
      bool loadedA = w.getA().getDefiningOp<tilegpu::LocalLoadOp>() != nullptr;
      spans.push_back({tied.size(), acc.size()});
      llvm::append_range(tied, acc);
      if (!loadedA)
        llvm::append_range(tied, *a);
      wgmmaInputs[w] = {*a, acc};
    }
    if (tied.empty()) {
      NVVM::WgmmaFenceAlignedOp::create(b, loc);
    } else {
      tied = tiedAsm(b, loc, "wgmma.fence.sync.aligned;", tied, {}, {});
      for (auto [w, span] : llvm::zip(run, spans)) {
        auto &[a, acc] = wgmmaInputs[w];
        std::copy(tied.begin() + span.first, tied.begin() + span.first + span.second, acc.begin());
        if (!w.getA().getDefiningOp<tilegpu::LocalLoadOp>())
          std::copy(tied.begin() + span.first + span.second,
                    tied.begin() + span.first + span.second + a.size(), a.begin());
      }
    }
  }
  // The entry stays: the wait that names this wgmma's result ties its A registers.
  auto [a, acc] = wgmmaInputs.lookup(op);
  FailureOr<LoadPlan> p = bufferPlan(op.getB(), op);
  if (failed(p))
    return failure();
  int64_t K = op.getA().getType().getShape()[1], N = op.getAcc().getType().getShape()[1];
  if (N % 8 != 0 || N > 256)
    return op.emitOpError("makes ") << N << " columns: wgmma.mma_async.m64nNk" << kPerStep()
                                    << " takes N a multiple of 8 up to 256";
  auto aInShared = aShared.find(op.getA());
  const SharedView *aView = aInShared == aShared.end() ? nullptr : &aInShared->second;
  if (aView && mTiles != 1)
    return op.emitOpError("reads an A block from shared memory with ")
           << mTiles << " m tiles a warp: codegen=wgmma reads 16 rows a warp";
  // Read as stored (P·V's V), B's columns are the output's: where its copies fill fewer than N
  // (trimOutputColumns), the wgmma's N is theirs (a multiple of 8) and the accumulator's other
  // registers (the last of each row's) keep their values — B's zero columns add nothing.
  int64_t nRun = op.getTransposeB() ? N : dotNColumns(op.getB(), N, 8);
  SmallVector<Value> tail;
  if (nRun < N) {
    tail = acc.empty()
               ? SmallVector<Value>((N - nRun) / 2,
                                    arith::ConstantOp::create(b, loc, b.getF32FloatAttr(0.0f)))
               : SmallVector<Value>(acc.begin() + nRun / 2, acc.end());
    acc.resize(std::min<size_t>(acc.size(), nRun / 2));
  }
  acc = wgmmaChain(a, acc, bufferBytes(op.getB(), op.getStage()), *p, op.getTransposeB(), nRun,
                   dotKSteps(op.getB(), /*alongColumns=*/op.getTransposeB(), K, kPerStep()), aView);
  llvm::append_range(acc, tail);
  NVVM::WgmmaGroupSyncAlignedOp::create(b, loc);
  eager[op.getResult()] = {Layout::Acc, acc};
  return success();
}

LogicalResult MmaKernelBuilder::emitWgmmaWait(tilegpu::WgmmaWaitOp op) {
  SmallVector<Value> tied;
  SmallVector<size_t> sizes;
  for (Value v : op.getValues()) {
    bool operandA = isa<tilegpu::DotOperandEncodingAttr>(
        cast<RankedTensorType>(v.getType()).getEncoding());
    FailureOr<SmallVector<Value>> regs = operandA ? wgmmaA(v, op) : materialize(v, Layout::Acc, op);
    if (failed(regs))
      return failure();
    sizes.push_back(regs->size());
    llvm::append_range(tied, *regs);
  }
  // A registers that ordinary instructions wrote (P) are read by their wgmma until this wait:
  // tied through it, they stay live and unchanged until then (else ptxas, seeing them
  // redefined while the group runs, serializes the wgmmas: advisory C7513).
  for (Value v : op.getValues()) {
    auto wgmmaOp = v.getDefiningOp<tilegpu::WgmmaOp>();
    auto entry = wgmmaOp ? wgmmaInputs.find(wgmmaOp) : wgmmaInputs.end();
    if (entry == wgmmaInputs.end())
      continue;
    if (!wgmmaOp.getA().getDefiningOp<tilegpu::LocalLoadOp>())
      llvm::append_range(tied, entry->second.first);
    wgmmaInputs.erase(entry);
  }
  std::string text = "wgmma.wait_group.sync.aligned " + std::to_string(op.getPending()) + ";";
  tied = tiedAsm(b, op.getLoc(), text, tied, {}, {});
  size_t pos = 0;
  for (auto [result, size] : llvm::zip(op.getResults(), sizes)) {
    SmallVector<Value> regs(tied.begin() + pos, tied.begin() + pos + size);
    pos += size;
    if (isa<tilegpu::DotOperandEncodingAttr>(
            cast<RankedTensorType>(result.getType()).getEncoding()))
      aFragments[result] = regs;
    else
      eager[result] = {Layout::Acc, regs};
  }
  return success();
}

} // namespace tessel::mma
