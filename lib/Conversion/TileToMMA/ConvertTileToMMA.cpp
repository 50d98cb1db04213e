//===- ConvertTileToMMA.cpp - register-resident mma.sync lowering of attention ----------------===//
//
// convert-tile-to-mma: the sm_80 fast path (FlashAttention-2 style) for the attention class of tile
// programs. Tiles whose rows are the query block live in registers in the accumulator layout of
// mma.sync.m16n8k16 (warp w owns 16 or 32 rows, one or two m16 tiles; in each tile lane l holds
// rows l/4 and l/4+8, columns 2(l%4) and 2(l%4)+1 of every 8-column slab); row vectors hold the two
// rows a thread owns; index tiles (iota/splat/expand_dims/broadcast and arithmetic on them) are
// computed per register from the lane and warp ids, on demand, in the layout their consumer asks
// for. Loads go through XOR-swizzled shared memory with cp.async (zero fill past the bounds) and
// reach the tensor cores through ldmatrix; the loads of a loop body are pipelined across the body
// and the next iteration. docs/dev/codegen-mma.md explains the choices.
//
// This file holds the pass (one gpu.func per program, the fallback to the reference lowering
// with a remark, the shared-memory global) and the builder's entry: thread coordinates, the
// walk over the program that dispatches each op to the part that emits it, scalar helpers.
// MmaKernelBuilder.h lists the other parts.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "tessel/Conversion/Passes.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/Math/IR/Math.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Matchers.h"

#include "llvm/ADT/ScopeExit.h"

namespace tessel {
#define GEN_PASS_DEF_CONVERTTILETOMMA
#include "tessel/Conversion/Passes.h.inc"
} // namespace tessel

namespace tessel::mma {

bool isTensor(Type t) { return isa<RankedTensorType>(t); }

/// A broadcast whose input has extent 1 along `unitDim` and whose result does not.
static bool isBroadcastAlong(Value v, unsigned unitDim) {
  auto bc = v.getDefiningOp<tile::BroadcastOp>();
  if (!bc)
    return false;
  auto in = cast<RankedTensorType>(bc.getInput().getType());
  return in.getRank() == 2 && in.getShape()[unitDim] == 1 &&
         cast<RankedTensorType>(v.getType()).getShape()[unitDim] != 1;
}

bool isRowBroadcast(Value v) { return isBroadcastAlong(v, 1); }

bool isColBroadcast(Value v) { return isBroadcastAlong(v, 0); }

int64_t constantOf(Value v) {
  APInt c;
  if (matchPattern(v, m_ConstantInt(&c)))
    return c.getSExtValue();
  return INT64_MIN;
}

int64_t knownMultipleOf(Value v) {
  int64_t c = constantOf(v);
  if (c != INT64_MIN)
    return c == 0 ? INT64_MAX : (c < 0 ? -c : c);
  if (auto mul = v.getDefiningOp<arith::MulIOp>()) {
    int64_t x = knownMultipleOf(mul.getLhs()), y = knownMultipleOf(mul.getRhs());
    return x > (INT64_MAX >> 32) || y > (INT64_MAX >> 32) ? std::max(x, y) : x * y;
  }
  if (auto ext = v.getDefiningOp<arith::ExtSIOp>())
    return knownMultipleOf(ext.getIn());
  return 1;
}

Value MmaKernelBuilder::toI64(Value v) {
  return tessel::conversion::toI64(b, b.getUnknownLoc(), v);
}

Value MmaKernelBuilder::toI32(Value v) {
  Location loc = b.getUnknownLoc();
  if (v.getType().isIndex())
    return arith::IndexCastOp::create(b, loc, b.getI32Type(), v);
  if (v.getType().getIntOrFloatBitWidth() > 32)
    return arith::TruncIOp::create(b, loc, b.getI32Type(), v);
  return v;
}

//===----------------------------------------------------------------------===//
// Kernel body
//===----------------------------------------------------------------------===//

void MmaKernelBuilder::emitPrologue(Location loc) {
  lazy.emplace_back();
  tid = toI32(gpu::ThreadIdOp::create(b, loc, gpu::Dimension::x));
  lane = arith::AndIOp::create(b, loc, tid, ci32(31));
  // The warp index through a shuffle from lane 0: the same value, but ptxas then knows it is
  // uniform across the warp and keeps what derives from it (the warp's first row, the start of
  // its Q rows in shared memory) in uniform registers.
  Value warp = NVVM::ShflOp::create(b, loc, b.getI32Type(), ci32(-1),
                                    arith::ShRUIOp::create(b, loc, tid, ci32(5)), ci32(0), ci32(31),
                                    NVVM::ShflKind::idx, UnitAttr());
  laneRow = arith::ShRUIOp::create(b, loc, lane, ci32(2));
  quadCol2 = arith::MulIOp::create(b, loc, arith::AndIOp::create(b, loc, lane, ci32(3)), ci32(2));
  rowBase = arith::MulIOp::create(b, loc, warp, ci32(warpRows));
  Value row0 = arith::AddIOp::create(b, loc, rowBase, laneRow);
  for (int64_t i = 0; i < 2 * mTiles; ++i)
    entryRows.push_back(i == 0 ? row0 : Value(arith::AddIOp::create(b, loc, row0, ci32(8 * i))));
  smemBase = LLVM::AddressOfOp::create(b, loc, smemGlobal);
}

LogicalResult MmaKernelBuilder::emitOp(Operation *op) {
  if (auto st = dyn_cast<tile::StoreOp>(op))
    return emitStore(st);
  if (auto add = dyn_cast<tile::AtomicAddOp>(op))
    return emitStore(add);
  if (auto bulk = dyn_cast<tilegpu::BulkAddOp>(op))
    return emitBulkAdd(bulk);
  if (auto ld = dyn_cast<tile::LoadOp>(op))
    return emitVectorLoad(ld);
  if (auto mma = dyn_cast<tilegpu::MmaOp>(op))
    return emitMma(mma);
  if (isa<tile::DotOp>(op))
    return op->emitOpError("is left for the lowering as a tile-level dot: convert-tile-to-mma "
                           "lowers tilegpu.mma and tilegpu.wgmma (tilegpu-mma-dots, "
                           "tilegpu-async-dots{eager})");
  if (auto red = dyn_cast<tile::ReduceOp>(op))
    return emitReduce(red);
  if (auto forOp = dyn_cast<scf::ForOp>(op))
    return emitFor(forOp);
  if (auto ifOp = dyn_cast<scf::IfOp>(op))
    return emitIf(ifOp);
  if (auto row = dyn_cast<tilegpu::WarpgroupRowOp>(op)) {
    // The warp's first row (uniform: from the shuffled warp index) rounded down to its
    // warpgroup's four warps.
    if (!wgmma)
      return op->emitOpError("needs wgmma layouts: a warpgroup's rows are a wgmma tile's");
    scalars.map(row.getResult(),
                arith::AndIOp::create(b, op->getLoc(), rowBase, ci32(~(4 * warpRows - 1))));
    return success();
  }
  if (auto wgmmaOp = dyn_cast<tilegpu::WgmmaOp>(op))
    return emitWgmma(wgmmaOp);
  if (auto wait = dyn_cast<tilegpu::WgmmaWaitOp>(op))
    return emitWgmmaWait(wait);
  if (isSharedMemoryOp(op))
    return emitSharedMemoryOp(op);
  if (isMbarrierOp(op))
    return emitMbarrierOp(op);
  if (isa<tilegpu::TurnStartOp, tilegpu::TurnWaitOp, tilegpu::TurnPassOp>(op))
    return emitTurn(op);
  if (auto ws = dyn_cast<tilegpu::WarpSpecializeOp>(op))
    return emitWarpSpecialize(ws);
  // Tile-valued pure ops are computed where a consumer needs them, in its layout.
  if (llvm::any_of(op->getResultTypes(), isTensor)) {
    if (isa<tile::SplatOp, tile::IotaOp, tile::ExpandDimsOp, tile::BroadcastOp, tile::TransOp,
            tile::GatherOp, arith::ConstantOp, tilegpu::ConvertLayoutOp>(op))
      return success();
    if (tile::isElementwiseOp(op))
      return success();
    return op->emitOpError("is not supported by convert-tile-to-mma");
  }
  if (!tile::isElementwiseOp(op) || llvm::any_of(op->getOperandTypes(), isTensor))
    return op->emitOpError("is not supported by convert-tile-to-mma");
  emitScalar(op, /*ftz=*/true);
  return success();
}

} // namespace tessel::mma

using namespace mlir;
using tessel::mma::MmaKernelBuilder;
namespace tile = tessel::tile;

namespace {

constexpr const char *kSharedGlobal = "__tessel_mma_smem";

/// Where warp specialization was measured faster (docs/bench/2026-12-03-h200-warp-specialize.md):
/// two consumer warpgroups or more (a 128-row block: +5 to +15 % at d128 and d256; one
/// warpgroup lost 4 to 7 %) whose loops stream only B operands (attention's K and V; a GEMM,
/// which streams A too, keeps tilegpu-async-accumulate's ring).
bool specializes(func::FuncOp program) {
  if (tessel::tilegpu::programLayout(program).getWarps() < 8)
    return false;
  WalkResult streamsA = program.walk([](tile::DotOp dot) {
    auto load = dot.getA().getDefiningOp<tile::LoadOp>();
    return load && tessel::tilegpu::streamingLoop(load) ? WalkResult::interrupt()
                                                        : WalkResult::advance();
  });
  return !streamsA.wasInterrupted();
}

/// The registers the TMA producer's per-tile record costs the consumers (ptxas, CUDA 13.0):
/// d256 128×64 overlapped, with 24 to spare, spilled with TMA and not without; d128 128×128,
/// with 40, spills nothing. Since the thirty-second session's register split d256 compiles
/// with TMA and no spill, but ran 6-9 % slower than with cp.async on an H100
/// (docs/bench/2026-12-05-h100-s32.md, run7), so the threshold stays.
constexpr int64_t kTmaConsumerRegisters = 32;

/// Whether the TMA producer leaves the overlapped consumers the registers they need. Where it
/// does not, compileModule's spill fallback gave TMA up after a whole compile (d256: 1.4 s of
/// the first call); asking first gives the same kernel at half the compile.
bool tmaFitsBesideOverlap(func::FuncOp program, bool overlapConsumers, bool fp8Overlap) {
  if (!overlapConsumers)
    return true;
  std::optional<int64_t> left = tessel::tilegpu::overlapHeadroom(program, fp8Overlap);
  return !left || *left >= kTmaConsumerRegisters;
}

//===----------------------------------------------------------------------===//
// The pass
//===----------------------------------------------------------------------===//

struct ConvertTileToMMA : tessel::impl::ConvertTileToMMABase<ConvertTileToMMA> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    SmallVector<func::FuncOp> programs;
    for (func::FuncOp f : module.getOps<func::FuncOp>())
      if (!f.isExternal())
        programs.push_back(f);
    if (programs.empty())
      return;
    MLIRContext *ctx = &getContext();
    OpBuilder b(ctx);
    gpu::GPUModuleOp gpuModule;
    LLVM::GlobalOp smem;
    bool failedAny = false;
    for (func::FuncOp program : programs) {
      // Collect the first error of this program; with fallback it becomes a remark. With
      // fallback and wgmma (codegen=auto on sm_90a) a program wgmma refuses is tried on the
      // mma.sync path before it is left to the reference lowering.
      tessel::conversion::FirstError error{"", program.getLoc()};
      LogicalResult built = failure();
      bool useWgmma = wgmma;
      for (;;) {
        gpu::GPUFuncOp kernel;
        error.where = program.getLoc();
        built = tessel::conversion::captureFirstError(
            ctx, error, [&] { return lowerProgram(program, gpuModule, smem, kernel, useWgmma); });
        if (succeeded(built))
          break;
        if (kernel)
          kernel.erase();
        if (!(fallback && useWgmma))
          break;
        emitRemark(error.where) << "convert-tile-to-mma lowers @" << program.getName()
                                << " with mma.sync, not wgmma: " << error.reason;
        tessel::tilegpu::stripLayouts(program);
        useWgmma = false;
      }
      if (succeeded(built)) {
        program.erase();
        continue;
      }
      if (fallback)
        tessel::tilegpu::stripLayouts(program);
      failedAny |= tessel::conversion::reportRefusal("convert-tile-to-mma", program, error,
                                                     fallback);
    }
    if (failedAny)
      signalPassFailure();
  }

  LogicalResult lowerProgram(func::FuncOp program, gpu::GPUModuleOp &gpuModule,
                             LLVM::GlobalOp &smem, gpu::GPUFuncOp &kernel, bool useWgmma) {
    ModuleOp module = getOperation();
    if (!gpuModule)
      gpuModule = tessel::conversion::getOrCreateKernelModule(module);
    FailureOr<gpu::GPUFuncOp> made = tessel::conversion::createKernel(program, gpuModule);
    if (failed(made))
      return failure();
    kernel = *made;
    OpBuilder b(&getContext());
    if (useWgmma && !chip.empty() && chip != "sm_90a")
      return program.emitOpError("cannot use codegen=wgmma on ")
             << chip << ": wgmma.mma_async needs sm_90a";
    if (!smem) {
      // wgmma's 128-byte swizzle is a function of the shared address: slabs start at
      // multiples of 1024 bytes, so the block must too.
      b.setInsertionPointToStart(gpuModule.getBody());
      smem = LLVM::GlobalOp::create(b, module.getLoc(), LLVM::LLVMArrayType::get(b.getI8Type(), 0),
                                    /*isConstant=*/false, LLVM::Linkage::External, kSharedGlobal,
                                    Attribute(), /*alignment=*/wgmma ? 1024 : 16,
                                    /*addrSpace=*/3);
    }
    // The tilegpu level's passes run on a copy, so that a refusal anywhere leaves the
    // program as it was for the next lowering to try; a program that comes with its loads
    // placed is lowered as it is.
    bool placed = !program.getOps<tessel::tilegpu::AllocOp>().empty();
    func::FuncOp work = placed ? program : cast<func::FuncOp>(program->clone());
    llvm::scope_exit dropCopy([&] {
      if (work != program)
        work.erase();
    });
    // One loop for the copies of a masked key loop: the boundary blocks' mask under a branch.
    if (!placed && fuseMaskedLoops)
      tessel::tilegpu::fuseMaskedLoops(work);
    // The layouts decide the kernel: given in the input (a lit test or another pass may
    // choose them), or assigned here as tilegpu-assign-layouts does.
    if (!tessel::tilegpu::programLayout(work) &&
        failed(tessel::tilegpu::assignLayouts(work, useWgmma, warpRows)))
      return failure();
    // The schedule of the loads: with warp specialization (wgmma), a producer warpgroup
    // copying the loops' blocks through mbarriers (and the consumers' dots overlapped with
    // their softmax); else FA3's overlap (two stages) on the
    // loops of the attention shape when asked for, a GEMM's accumulating wgmma kept in flight
    // (three stages or more), then software pipelining of the loops, and the block loaded
    // before a loop (Q) waited for below the loop's first copies.
    bool isWgmma = tessel::tilegpu::programLayout(work).getKind() ==
                   tessel::tilegpu::MmaKind::Wgmma;
    bool overlap = wgmmaOverlap && isWgmma;
    bool allocated = false;
    if (!placed && warpSpecialize && isWgmma && !overlap && specializes(work)) {
      if (failed(tessel::tilegpu::allocateShared(work, stages)))
        return failure();
      allocated = true;
      FailureOr<bool> specialized = tessel::tilegpu::warpSpecialize(work);
      if (failed(specialized))
        return failure();
      placed = *specialized;
      if (placed && producerOnce &&
          failed(tessel::tilegpu::producerOnce(work, static_cast<int64_t>(sharedLimit))))
        return failure();
      if (placed && tmaProducer && tmaFitsBesideOverlap(work, overlapConsumers, fp8Overlap) &&
          failed(tessel::tilegpu::tmaProducer(work, static_cast<int64_t>(sharedLimit))))
        return failure();
      if (placed && overlapConsumers) {
        FailureOr<bool> overlapped = tessel::tilegpu::overlapConsumers(
            work, lateP, fp8Overlap, syncMaskedLoops, rescaleUnderS);
        if (failed(overlapped))
          return failure();
        if (*overlapped && pingpong)
          tessel::tilegpu::pingPong(work);
      } else if (placed && pingpong) {
        // Synchronous consumers (asked for: overlap-consumers off) take turns around their
        // softmax, cuDNN's schedule; not yet measured on the H200.
        tessel::tilegpu::pingPong(work);
      }
      // After the turns are in place: a warpgroup that skips a block still takes its turn.
      if (placed && skipMaskedWarpgroups)
        tessel::tilegpu::skipMaskedWarpgroups(work);
      if (placed && pipelineTiles)
        tessel::tilegpu::pipelineTiles(work);
      // Every TMA-marked copy goes through TMA (no cp.async path beside it): wgmma reads what
      // landed without a proxy fence.
      if (placed && tmaOnly && dropTmaFences)
        tessel::tilegpu::dropTmaFences(work);
    }
    if (!placed &&
        ((!allocated && failed(tessel::tilegpu::allocateShared(work, overlap ? 2 : stages))) ||
         (overlap && failed(tessel::tilegpu::overlapWgmma(work))) ||
         failed(tessel::tilegpu::asyncAccumulate(work)) ||
         (wgmmaAsyncDots && failed(tessel::tilegpu::asyncDots(work))) ||
         failed(tessel::tilegpu::pipelineLoads(work))))
      return failure();
    if (!placed && sinkWaits)
      tessel::tilegpu::sinkWaits(work);
    // The dots nothing scheduled become GPU-level ops: tilegpu.wgmma + wait (pending 0), or
    // tilegpu.mma. The lowering sees no tile.dot.
    if (failed(tessel::tilegpu::asyncDots(work, /*eager=*/true)))
      return failure();
    tessel::tilegpu::mmaDots(work);
    MmaKernelBuilder builder(kernel, smem);
    builder.vectorStores = vectorStores;
    builder.tmaOnly = tmaOnly;
    builder.trimZeroColumns = trimZeroColumns;
    builder.trimOutputColumns = trimOutputColumns;
    if (failed(builder.plan(work)))
      return failure();
    if (builder.usesWgmma() && !chip.empty() && chip != "sm_90a")
      return program.emitOpError("has wgmma layouts, which need sm_90a, not ") << chip;
    if (builder.sharedBytes() > sharedLimit)
      return program.emitOpError("needs ")
             << builder.sharedBytes() << " bytes of shared memory, more than the "
             << static_cast<int64_t>(sharedLimit) << " a block may have";
    kernel.setKnownBlockSizeAttr(
        b.getDenseI32ArrayAttr({static_cast<int32_t>(builder.blockThreads()), 1, 1}));
    if (int64_t registers = builder.launchRegisters())
      kernel->setAttr(NVVM::NVVMDialect::getMaxnregAttrName(), b.getI32IntegerAttr(registers));
    kernel->setAttr("tessel.dynamic_shared_bytes", b.getI64IntegerAttr(builder.sharedBytes()));
    kernel->setAttr("tessel.shared_bytes", b.getI64IntegerAttr(builder.sharedBytes()));
    kernel->setAttr("tessel.codegen", b.getStringAttr(builder.usesWgmma() ? "wgmma" : "mma"));
    return builder.build(work);
  }
};

} // namespace
