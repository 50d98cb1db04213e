//===- MmaSync.cpp - tile.dot as mma.sync.m16n8k16 --------------------------------------------===//
//
// The dot of the sm_80 path: the A fragments (a loaded block read once with ldmatrix, or a
// register tile packed pairwise from the accumulator layout, shared with wgmma), the B fragments
// by ldmatrix (.trans for V) and mma.sync.m16n8k16 per m tile, k step and pair of n slabs, for
// each tilegpu.mma (tilegpu-mma-dots makes them of the program's tile.dots). On the wgmma path
// every dot is a tilegpu.wgmma (Wgmma.cpp).
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

/// An i32 register from ldmatrix as an mma operand: vector<2xf16> for f16, i32 for bf16 (and
/// FP8, which only wgmma reads).
Value MmaKernelBuilder::fragmentOf(Value reg) {
  if (!operandType.isF16())
    return reg;
  return LLVM::BitcastOp::create(b, b.getUnknownLoc(), VectorType::get({2}, operandType), reg);
}

/// Two 16-bit scalars as one mma operand register (lo in the low half).
Value MmaKernelBuilder::packPair(Value lo, Value hi) {
  Location loc = b.getUnknownLoc();
  auto vt = VectorType::get({2}, operandType);
  Value v = LLVM::PoisonOp::create(b, loc, vt);
  v = LLVM::InsertElementOp::create(b, loc, v, lo, ci32(0));
  v = LLVM::InsertElementOp::create(b, loc, v, hi, ci32(1));
  if (operandType.isBF16())
    return LLVM::BitcastOp::create(b, loc, b.getI32Type(), v);
  return v;
}

FailureOr<SmallVector<Value>> MmaKernelBuilder::aFragmentsOf(Value a, int64_t K, Operation *user) {
  // A loaded block read once into registers, or a register tile packed pairwise (the
  // accumulator layout of two adjacent 8-column slabs is the A layout of one 16-column step).
  auto resident = aFragments.find(a);
  if (resident != aFragments.end())
    return resident->second;
  if (aShared.count(a))
    return SmallVector<Value>();
  // The P re-pack (tilegpu.convert_layout from the accumulator layout): pairs of adjacent
  // columns of the accumulator registers, packed below.
  Value source = a;
  if (auto repack = source.getDefiningOp<tilegpu::ConvertLayoutOp>())
    source = repack.getInput();
  if (isa<Float8E4M3FNType>(operandType)) {
    // FP8 P: its f32 registers, converted and moved into the k32 layout four slabs at a time.
    auto trunc = source.getDefiningOp<arith::TruncFOp>();
    if (!trunc || !getElementTypeOrSelf(trunc.getIn().getType()).isF32())
      return user->emitOpError("reads an FP8 A operand that is neither loaded nor an f32 tile "
                               "converted to FP8, which convert-tile-to-mma cannot place");
    FailureOr<SmallVector<Value>> regs = materialize(trunc.getIn(), Layout::Acc, user);
    if (failed(regs))
      return failure();
    SmallVector<Value> frags;
    for (int64_t mt = 0; mt < mTiles; ++mt)
      for (int64_t kt = 0; kt < K / 32; ++kt)
        llvm::append_range(
            frags, fp8Fragments(ArrayRef<Value>(*regs).slice((mt * (K / 8) + 4 * kt) * 4, 16)));
    return frags;
  }
  FailureOr<SmallVector<Value>> regs = materialize(source, Layout::Acc, user);
  if (failed(regs))
    return failure();
  SmallVector<Value> frags;
  for (int64_t mt = 0; mt < mTiles; ++mt) {
    for (int64_t kt = 0; kt < K / 16; ++kt) {
      auto at = [&](int64_t slab, int64_t r) {
        return (*regs)[(mt * (K / 8) + 2 * kt + slab) * 4 + r];
      };
      frags.push_back(packPair(at(0, 0), at(0, 1)));
      frags.push_back(packPair(at(0, 2), at(0, 3)));
      frags.push_back(packPair(at(1, 0), at(1, 1)));
      frags.push_back(packPair(at(1, 2), at(1, 3)));
    }
  }
  return frags;
}

SmallVector<Value> MmaKernelBuilder::fp8Fragments(ArrayRef<Value> acc) {
  // acc: slabs s = 0..3 of one m tile, register 4s + r at row g + 8(r/2), column 8s + 2t + r%2
  // (g = lane/4, t = lane%4). The k32 A fragment wants, in register 2·half + rowHalf, the
  // four bytes of columns 16·half + 4t .. +3 of its row: two pairs held by quad threads
  // 2(t%2) and 2(t%2)+1, in slab 2·half + t/2. Each thread packs its two pairs of a (row,
  // half) into one word (slab 2·half low, 2·half+1 high), takes the words of the two threads
  // that hold its bytes (shfl.idx) and keeps the half selected by t/2 of each (prmt).
  Location loc = b.getUnknownLoc();
  Type i16 = b.getI16Type(), i32 = b.getI32Type();
  auto cvt = [&](Value lo, Value hi) { // e4m3x2: the first operand goes to the high byte
    return asmResults(b, loc, "cvt.rn.satfinite.e4m3x2.f32 $0, $1, $2;", TypeRange{i16}, {},
                      ValueRange{hi, lo}, {"f", "f"})
        .front();
  };
  Value t = arith::AndIOp::create(b, loc, lane, ci32(3));
  Value quad = arith::AndIOp::create(b, loc, lane, ci32(~3));
  Value src0 = arith::OrIOp::create(
      b, loc, quad,
      arith::ShLIOp::create(b, loc, arith::AndIOp::create(b, loc, t, ci32(1)), ci32(1)));
  Value src1 = arith::OrIOp::create(b, loc, src0, ci32(1));
  // prmt selector: bytes 0-1 of the first word and 0-1 of the second (t/2 = 0), or 2-3 of each.
  Value upper = arith::CmpIOp::create(b, loc, arith::CmpIPredicate::uge, t, ci32(2));
  Value selector = arith::SelectOp::create(b, loc, upper, ci32(0x7632), ci32(0x5410));
  Value full = ci32(-1);
  SmallVector<Value> frags(4);
  for (int64_t half = 0; half < 2; ++half) {
    for (int64_t rowHalf = 0; rowHalf < 2; ++rowHalf) {
      auto pairOf = [&](int64_t slab) {
        return cvt(acc[4 * slab + 2 * rowHalf], acc[4 * slab + 2 * rowHalf + 1]);
      };
      Value lo = arith::ExtUIOp::create(b, loc, i32, pairOf(2 * half));
      Value hi = arith::ExtUIOp::create(b, loc, i32, pairOf(2 * half + 1));
      Value word = arith::OrIOp::create(b, loc, lo, arith::ShLIOp::create(b, loc, hi, ci32(16)));
      auto take = [&](Value src) {
        return NVVM::ShflOp::create(b, loc, i32, full, word, src, ci32(0x1f), NVVM::ShflKind::idx,
                                    UnitAttr())
            .getResult();
      };
      frags[2 * half + rowHalf] = asmResults(b, loc, "prmt.b32 $0, $1, $2, $3;", TypeRange{i32}, {},
                                             ValueRange{take(src0), take(src1), selector},
                                             {"r", "r", "r"})
                                      .front();
    }
  }
  return frags;
}

LogicalResult MmaKernelBuilder::emitMma(tilegpu::MmaOp op) {
  Location loc = op.getLoc();
  auto aType = cast<RankedTensorType>(op.getA().getType());
  auto cType = cast<RankedTensorType>(op.getAcc().getType());
  int64_t K = aType.getShape()[1], N = cType.getShape()[1];
  if (aType.getShape()[0] != blockM || aType.getElementType() != operandType || K % 16 != 0 ||
      N % 16 != 0)
    return op.emitOpError("is a dot convert-tile-to-mma cannot map onto m16n8k16 (A must be ")
           << blockM << "xK " << operandType << ", K and N multiples of 16)";
  // A fragments, a[(mt·K/16 + kt)·4 + i]; read from shared memory at each k step (filled in
  // below) when aFragmentsOf leaves them there.
  int64_t kSteps = K / 16;
  FailureOr<SmallVector<Value>> aRegs = aFragmentsOf(op.getA(), K, op);
  if (failed(aRegs))
    return failure();
  SmallVector<Value> a = *aRegs;
  auto shared = aShared.find(op.getA());
  if (a.empty())
    a.resize(mTiles * kSteps * 4);
  // B from shared memory.
  FailureOr<std::pair<SharedView, bool>> bIn = dotB(op.getB(), op);
  if (failed(bIn))
    return failure();
  auto [bView, transposed] = *bIn;
  const LoadPlan &p = bView.plan;
  FailureOr<SmallVector<Value>> c = materialize(op.getAcc(), Layout::Acc, op);
  if (failed(c))
    return failure();
  SmallVector<Value> acc = *c;
  Value stage = bView.stage;
  Value q = arith::ShRUIOp::create(b, loc, lane, ci32(3));
  Value qLo = arith::AndIOp::create(b, loc, q, ci32(1));
  Value qHi = arith::ShRUIOp::create(b, loc, q, ci32(1));
  // K rows are the n index: matrices (n, k), (n, k+8), (n+8, k), (n+8, k+8); V rows are the k
  // index, read transposed: (k, n), (k+8, n), (k, n+8), (k+8, n+8).
  // So for K matrix q = lane/8 is at rows +8·(q>>1), chunk +(q&1); for V, as for an A block
  // (loadAFragments), rows +8·(q&1), chunk +(q>>1): V and Q share a lane offset, K does not.
  Value laneOffset =
      transposed ? ldmatrixLaneOffset(p.cols, arith::MulIOp::create(b, loc, qHi, ci32(8)), qLo)
                 : ldmatrixLaneOffset(p.cols, arith::MulIOp::create(b, loc, qLo, ci32(8)), qHi);
  // The tile's start (slot and, in a loop, the stage) is uniform: ptxas adds it in the
  // ldmatrix's address. (Tried: the stage in the lane offset, to keep LLVM from hoisting the
  // offset's XORs out of the loop; ptxas spilled more.)
  Value tile = ci32(p.smemOffset);
  if (stage)
    tile = arith::AddIOp::create(b, loc, tile, stage);
  Type f32 = b.getF32Type();
  auto resultType = LLVM::LLVMStructType::getLiteral(b.getContext(), {f32, f32, f32, f32});
  NVVM::MMATypes ptxType = operandType.isBF16() ? NVVM::MMATypes::bf16 : NVVM::MMATypes::f16;
  // (K steps past the columns B's copies fill read zeros: not run, trimZeroColumns. Read
  // transposed, K's block is summed along its columns.)
  int64_t kRun = dotKSteps(op.getB().getDefiningOp<tilegpu::LocalLoadOp>().getBuffer(), transposed,
                           K, 16);
  // (trimOutputColumns leaves the n tiles past the columns B's copies fill be here: without
  // them the d96 backward's key-rows program spilled 72 bytes, with them 16.)
  for (int64_t kt = 0; kt < kRun; ++kt) {
    if (shared != aShared.end())
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        SmallVector<Value> frags = loadAFragments(shared->second.plan, mt, kt,
                                                  shared->second.stage);
        std::copy(frags.begin(), frags.end(), a.begin() + (mt * kSteps + kt) * 4);
      }
    for (int64_t np = 0; np < N / 16; ++np) {
      int64_t rowBytes = p.cols * 2;
      Value x4 =
          transposed
              ? ldmatrixAt(laneOffset, 32 * kt, tile, np * 16 * rowBytes, /*transpose=*/false)
              : ldmatrixAt(laneOffset, 32 * np, tile, kt * 16 * rowBytes, /*transpose=*/true);
      Value regs[4];
      for (int64_t i = 0; i < 4; ++i)
        regs[i] = fragmentOf(LLVM::ExtractValueOp::create(b, loc, x4, i));
      // Every m tile of the warp uses the same B fragments.
      for (int64_t mt = 0; mt < mTiles; ++mt) {
        for (int64_t half = 0; half < 2; ++half) {
          int64_t nt = mt * (N / 8) + np * 2 + half;
          int64_t ai = (mt * kSteps + kt) * 4;
          SmallVector<Value> cIn(acc.begin() + nt * 4, acc.begin() + nt * 4 + 4);
          SmallVector<Value> aIn(a.begin() + ai, a.begin() + ai + 4);
          Value mma = NVVM::MmaOp::create(
              b, loc, resultType, aIn, ValueRange{regs[half * 2], regs[half * 2 + 1]}, cIn,
              ArrayRef<int64_t>{16, 8, 16}, std::nullopt, std::nullopt,
              std::array<NVVM::MMATypes, 2>{ptxType, ptxType},
              std::array<NVVM::MMALayout, 2>{NVVM::MMALayout::row, NVVM::MMALayout::col});
          for (int64_t i = 0; i < 4; ++i)
            acc[nt * 4 + i] = LLVM::ExtractValueOp::create(b, loc, mma, i);
        }
      }
    }
  }
  eager[op.getResult()] = {Layout::Acc, acc};
  return success();
}

} // namespace tessel::mma
