//===- SharedMemoryOps.cpp - the tilegpu memory ops -------------------------------------------===//
//
// The schedule of the loads as the tilegpu level writes it (tilegpu-allocate-shared, then
// tilegpu-pipeline-loads): tilegpu.alloc is a place in the kernel's shared memory, async_copy is
// cp.async of a block into a stage of it (predicated copies of one group under one uniform
// branch), async_commit / async_wait are commit_group / wait_group, fence_async_shared and
// gpu.barrier are themselves, and local_load reads a dot operand: A fragments by ldmatrix once,
// a B operand where the dot reads it.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"

namespace tessel::mma {

bool MmaKernelBuilder::isSharedMemoryOp(Operation *op) {
  return isa<tilegpu::AllocOp, tilegpu::AsyncCopyOp, tilegpu::AsyncCommitOp, tilegpu::AsyncWaitOp,
             tilegpu::FenceAsyncSharedOp, tilegpu::LocalLoadOp, tilegpu::LocalStoreOp,
             gpu::BarrierOp>(op);
}

/// The tilegpu.alloc that `buffer` is, or starts as when a loop carries it (its init).
static tilegpu::AllocOp allocOf(Value buffer) {
  for (;;) {
    if (auto alloc = buffer.getDefiningOp<tilegpu::AllocOp>())
      return alloc;
    scf::ForOp loop;
    int64_t index = -1;
    if (auto arg = dyn_cast<BlockArgument>(buffer)) {
      loop = dyn_cast<scf::ForOp>(arg.getOwner()->getParentOp());
      index = static_cast<int64_t>(arg.getArgNumber()) - 1;
    } else if (auto result = dyn_cast<OpResult>(buffer)) {
      loop = dyn_cast<scf::ForOp>(result.getOwner());
      index = result.getResultNumber();
    }
    if (!loop || index < 0)
      return {};
    buffer = loop.getInitArgs()[index];
  }
}

void MmaKernelBuilder::planColumnReach(func::FuncOp program) {
  // A copy's columns past its descriptor's are zero-filled (cp.async's source size, TMA's box
  // past the tensor): a buffer filled only by copies of constant column reach holds zeros
  // after it, which a dot summing over those columns need not multiply.
  llvm::DenseSet<Operation *> unknown;
  bool untraced = false;
  program.walk([&](Operation *op) {
    Value buffer;
    if (auto copy = dyn_cast<tilegpu::AsyncCopyOp>(op))
      buffer = copy.getBuffer();
    else if (auto store = dyn_cast<tilegpu::LocalStoreOp>(op))
      buffer = store.getBuffer();
    else if (auto add = dyn_cast<tilegpu::BulkAddOp>(op))
      buffer = add.getBuffer();
    else
      return;
    tilegpu::AllocOp alloc = allocOf(buffer);
    if (!alloc) {
      untraced = true;
      return;
    }
    auto copy = dyn_cast<tilegpu::AsyncCopyOp>(op);
    auto md = copy ? copy.getDesc().getDefiningOp<tile::MakeDescOp>() : tile::MakeDescOp();
    std::optional<int64_t> cols, col0;
    if (md && md.getShape().size() == 2 && copy.getOffsets().size() == 2) {
      cols = getConstantIntValue(md.getShape()[1]);
      col0 = getConstantIntValue(copy.getOffsets()[1]);
    }
    // (A block kept transposed has the descriptor's rows as its columns.)
    if (!cols || !col0 || *col0 < 0 || alloc->hasAttr(tilegpu::kTransposedAttr)) {
      unknown.insert(alloc);
      return;
    }
    int64_t &reach = columnReach[alloc];
    reach = std::max(reach, *cols - *col0);
  });
  if (untraced)
    columnReach.clear();
  for (Operation *alloc : unknown)
    columnReach.erase(alloc);
}

int64_t MmaKernelBuilder::dotKSteps(Value buffer, bool alongColumns, int64_t K, int64_t perStep) {
  int64_t extent = K;
  if (tilegpu::AllocOp alloc = allocOf(buffer); alloc && alongColumns && trimZeroColumns) {
    auto reach = columnReach.find(alloc);
    if (reach != columnReach.end())
      extent = std::clamp<int64_t>(reach->second, 1, K);
  }
  return (extent + perStep - 1) / perStep;
}

int64_t MmaKernelBuilder::dotNColumns(Value buffer, int64_t N, int64_t unit) {
  if (!trimOutputColumns)
    return N;
  auto reach = columnReach.find(allocOf(buffer));
  if (reach == columnReach.end())
    return N;
  return std::clamp<int64_t>((reach->second + unit - 1) / unit * unit, unit, N);
}

FailureOr<LoadPlan> MmaKernelBuilder::bufferPlan(Value buffer, Operation *user) {
  tilegpu::AllocOp alloc = allocOf(buffer);
  if (!alloc || !alloc.getOffset())
    return user->emitOpError("uses a shared buffer without a place: run tilegpu-allocate-shared");
  tilegpu::SharedBufferType type = alloc.getResult().getType();
  LoadPlan p;
  p.smemOffset = *alloc.getOffset();
  p.byDescriptor = alloc->hasAttr(tilegpu::kADescriptorAttr);
  p.rows = type.getShape()[0];
  // In 16-bit columns: an FP8 row of 2n elements is laid out as a 16-bit row of n (the copies,
  // swizzle and ldmatrix move bytes; wgmma's k32 FP8 step covers a k16 step's 32 bytes).
  p.cols = type.getShape().back() * type.getElementType().getIntOrFloatBitWidth() / 16;
  // The copies and ldmatrix addresses assume the class's blocks: 16-bit columns, whole
  // 8-row swizzle groups per copy step, 64-column slabs for wgmma, 128-byte swizzle — or, on
  // wgmma, a transposed FP8 block of 64- or 32-byte rows (swizzled over their width, read by
  // descriptor only, in whole 8-row swizzle atoms).
  // (A wgmma block whose row of chunks does not divide the threads is copied a slab at a time:
  // issueBlockChunks.)
  int64_t copyCols = wgmma && p.cols % 64 == 0 && copyThreadCount() % (p.cols / 8) ? 64 : p.cols;
  int64_t rowsPerStep = p.cols % 8 == 0 ? copyThreadCount() / (copyCols / 8) : 0;
  int64_t atom = 8 * rowBytes(p.cols);
  bool narrow = wgmma && (p.cols == 16 || p.cols == 32) &&
                alloc->hasAttr(tilegpu::kTransposedAttr) && p.smemOffset % atom == 0 &&
                alloc.getStageStride() % atom == 0;
  if (type.getShape().size() != 2 || type.getElementType() != operandType ||
      type.getSwizzle() != tilegpu::swizzleBytes(p.cols, wgmma) || !rowsPerStep ||
      p.rows % rowsPerStep != 0 || p.rows % 16 != 0 || (wgmma && p.cols % 64 != 0 && !narrow))
    return user->emitOpError("uses the buffer ")
           << type << ", which convert-tile-to-mma does not lay out: [rows, cols] of "
           << operandType << ", swizzle 128, rows a multiple of 16 and of " << rowsPerStep
           << (wgmma ? ", cols a multiple of 64 (or an FP8 block kept transposed of 32- or "
                       "64-byte rows, swizzled over their width, in whole 8-row atoms)"
                     : "");
  return p;
}

Value MmaKernelBuilder::stageBytes(Value buffer, Value stage) {
  if (constantOf(stage) == 0)
    return Value();
  return arith::MulIOp::create(b, b.getUnknownLoc(), toI32(scalars.lookup(stage)),
                               ci32(allocOf(buffer).getStageStride()));
}

Value MmaKernelBuilder::bufferBytes(Value buffer, Value stage) {
  Value offset = scalars.lookup(buffer);
  if (Value bytes = stageBytes(buffer, stage))
    offset = arith::AddIOp::create(b, b.getUnknownLoc(), offset, bytes);
  return offset;
}

FailureOr<std::pair<SharedView, bool>> MmaKernelBuilder::dotB(Value bOperand, Operation *op) {
  if (auto read = bOperand.getDefiningOp<tilegpu::LocalLoadOp>()) {
    auto view = views.find(read.getResult());
    if (view == views.end())
      return op->emitOpError("has a B operand read as an A operand (convert-tile-to-mma)");
    return std::make_pair(view->second, bool(read.getTranspose()));
  }
  return op->emitOpError("has a B operand that is not read from shared memory by "
                         "tilegpu.local_load (convert-tile-to-mma)");
}

LogicalResult MmaKernelBuilder::emitSharedMemoryOp(Operation *op) {
  Location loc = op->getLoc();
  // A place is a byte offset, an i32 that loops may carry (a buffer of the overlapped schedule
  // is read in one iteration and the next).
  if (auto alloc = dyn_cast<tilegpu::AllocOp>(op)) {
    if (!alloc.getOffset())
      return op->emitOpError("has no place: run tilegpu-allocate-shared");
    scalars.map(alloc.getResult(), ci32(*alloc.getOffset()));
    return success();
  }
  if (auto copy = dyn_cast<tilegpu::AsyncCopyOp>(op)) {
    if (failed(checkChunked(op, copy.getDesc())))
      return failure();
    FailureOr<LoadPlan> p = bufferPlan(copy.getBuffer(), op);
    if (failed(p))
      return failure();
    if (copy->hasAttr("tma_map"))
      return emitTmaCopy(copy, *p, stageBytes(copy.getBuffer(), copy.getStage()));
    Value row0 = scalars.lookup(copy.getOffsets()[0]);
    Value col0 = scalars.lookup(copy.getOffsets()[1]);
    OpBuilder::InsertionGuard guard(b);
    if (Value pred = copy.getPredicate()) {
      // The copies of a group share one predicate: one branch for them all.
      Block *block = b.getInsertionBlock();
      bool follows = copyGuard && copyGuardPredicate == pred &&
                     b.getInsertionPoint() != block->begin() &&
                     &*std::prev(b.getInsertionPoint()) == copyGuard.getOperation();
      if (!follows) {
        copyGuard = scf::IfOp::create(b, loc, scalars.lookup(pred), /*withElseRegion=*/false);
        copyGuardPredicate = pred;
      }
      b.setInsertionPoint(copyGuard.thenBlock()->getTerminator());
    }
    Value stage = stageBytes(copy.getBuffer(), copy.getStage());
    if (allocOf(copy.getBuffer())->hasAttr(tilegpu::kTransposedAttr)) {
      // FP8 bytes in units of 4 rows × 16 columns dealt evenly over the copying threads.
      int64_t units = p->cols * 2 / 4 * (p->rows / 16);
      if (copy.getBuffer().getType().getElementType().getIntOrFloatBitWidth() != 8 ||
          units % copyThreadCount() != 0)
        return op->emitOpError("copies a block kept transposed that is not FP8 in whole units "
                               "of 4 rows × 16 columns a copying thread");
      issueTransposedBlock(loc, copy.getDesc(), *p, row0, col0, stage);
      return success();
    }
    issueBlock(loc, copy.getDesc(), *p, row0, col0, stage);
    return success();
  }
  if (isa<tilegpu::AsyncCommitOp>(op)) {
    NVVM::CpAsyncCommitGroupOp::create(b, loc);
    return success();
  }
  if (auto wait = dyn_cast<tilegpu::AsyncWaitOp>(op)) {
    NVVM::CpAsyncWaitGroupOp::create(b, loc, wait.getPending());
    return success();
  }
  if (isa<tilegpu::FenceAsyncSharedOp>(op)) {
    fenceSharedForAsyncProxy(loc);
    return success();
  }
  if (isa<gpu::BarrierOp>(op)) {
    emitBarrier(loc);
    return success();
  }
  if (auto store = dyn_cast<tilegpu::LocalStoreOp>(op))
    return emitLocalStore(store);
  auto read = cast<tilegpu::LocalLoadOp>(op);
  FailureOr<LoadPlan> p = bufferPlan(read.getBuffer(), op);
  if (failed(p))
    return failure();
  auto operand = cast<tilegpu::DotOperandEncodingAttr>(read.getResult().getType().getEncoding());
  if (operand.getOperand() == 1) {
    views[read.getResult()] = SharedView{*p, stageBytes(read.getBuffer(), read.getStage())};
    return success();
  }
  if (read.getTranspose()) {
    // Kᵀ of dQᵀ = Kᵀ·dSᵀ: read by every dot through an MN-major descriptor (wgmma). The block
    // is complete for the async proxy, as takeAFragments makes it for the reads as stored.
    if (!wgmma || tilegpu::streamingLoop(read))
      return op->emitOpError("reads an A operand transposed: convert-tile-to-mma does that on "
                             "wgmma, for a block loaded once");
    fenceSharedForAsyncProxy(loc);
    emitBarrier(loc);
    aShared[read.getResult()] = SharedView{*p, Value(), /*transposed=*/true};
    return success();
  }
  // An A block a loop streams (a GEMM's) is read by its dots from its stage of the ring, at
  // every k step (mma.sync) or by descriptor (wgmma): the loop's copies make it visible.
  if (tilegpu::streamingLoop(read)) {
    aShared[read.getResult()] = SharedView{*p, stageBytes(read.getBuffer(), read.getStage())};
    return success();
  }
  // A block loaded once a tile may sit in one of two stages (tilegpu-producer-once's second
  // buffer: the tile's parity).
  takeAFragments(read.getResult(), *p, stageBytes(read.getBuffer(), read.getStage()));
  return success();
}

LogicalResult MmaKernelBuilder::emitLocalStore(tilegpu::LocalStoreOp op) {
  Location loc = op.getLoc();
  FailureOr<LoadPlan> p = bufferPlan(op.getBuffer(), op);
  if (failed(p))
    return failure();
  if (!wgmma || mTiles != 1)
    return op.emitOpError("stores an accumulator tile into shared memory, which "
                          "convert-tile-to-mma does on wgmma (16 rows a warp)");
  FailureOr<SmallVector<Value>> regs = materialize(op.getValue(), Layout::Acc, op);
  if (failed(regs))
    return failure();
  // Acc register 4·s + 2·h + e is row (warp's first + lane/4 + 8·h), column 8·s + quad + e:
  // the pair (e = 0, 1) is 4 bytes inside the 16-byte chunk s of its row, which the swizzle
  // moves as a whole.
  Value start = bufferBytes(op.getBuffer(), op.getStage());
  Value pairBytes = arith::MulIOp::create(b, loc, quadColumn(), ci32(2));
  SmallVector<Value> rows = rowIndices();
  auto ptr3 = LLVM::LLVMPointerType::get(b.getContext(), 3);
  int64_t slabs = p->cols / 8;
  for (int64_t s = 0; s < slabs; ++s)
    for (int64_t h = 0; h < 2; ++h) {
      Value chunk = smemChunk(0, p->cols, rows[h], ci32(s), start, slabBytes(*p));
      Value at = LLVM::GEPOp::create(b, loc, ptr3, b.getI8Type(), chunk, ValueRange{pairBytes});
      Value pair = packPair((*regs)[4 * s + 2 * h], (*regs)[4 * s + 2 * h + 1]);
      LLVM::StoreOp::create(b, loc, pair, at, /*alignment=*/4);
    }
  return success();
}

} // namespace tessel::mma
