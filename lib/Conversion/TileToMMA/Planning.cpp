//===- Planning.cpp - the plan convert-tile-to-mma takes from the tilegpu level ---------------===//
//
// MmaKernelBuilder::plan: the builder takes its decisions from the tilegpu level: the kernel's
// shape and instruction family from the tiles' layouts (tilegpu-assign-layouts); the shared
// memory from the buffers tilegpu-allocate-shared placed, or, for the tile.loads the overlapped
// schedule places itself, each load's role and slot and the ring's size from
// tilegpu::planMmaClass — the one place that checks the attention class and plans it, shared with
// the tilegpu passes.
//
//===------------------------------------------------------------------------------------------===//

#include "MmaKernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"

namespace tessel::mma {

LogicalResult MmaKernelBuilder::plan(func::FuncOp program) {
  tilegpu::MmaEncodingAttr layout = tilegpu::programLayout(program);
  if (!layout)
    return program.emitOpError("has no tilegpu layouts: run tilegpu-assign-layouts first");
  wgmma = layout.getKind() == tilegpu::MmaKind::Wgmma;
  blockM = layout.getBlockRows();
  numWarps = layout.getWarps();
  warpRows = layout.getWarpRows();
  mTiles = layout.getMTiles();
  // Loads already placed (tilegpu-allocate-shared): the schedule is in the IR, and the
  // kernel's shared memory is what the buffers span.
  SmallVector<tilegpu::AllocOp> allocs(program.getOps<tilegpu::AllocOp>());
  if (!allocs.empty()) {
    overlapOption = false;
    for (tilegpu::AllocOp alloc : allocs) {
      tilegpu::SharedBufferType type = alloc.getResult().getType();
      operandType = type.getElementType();
      int64_t end = alloc.getOffset().value_or(0) +
                    (type.getStages() - 1) * alloc.getStageStride() + type.getStageBytes();
      smemBytes = std::max(smemBytes, end);
    }
    if (!operandType.isF16() && !operandType.isBF16())
      return program.emitOpError("has shared buffers of ")
             << operandType << ": convert-tile-to-mma takes f16 or bf16 operands";
    return success();
  }
  overlapOption = overlapOption && wgmma;
  FailureOr<tilegpu::MmaClassPlan> planned = tilegpu::planMmaClass(program, wgmma,
                                                                   layout.getWarpRows());
  if (failed(planned))
    return failure();
  if (planned->layout != layout)
    return program.emitOpError("has the tile layout ")
           << layout << ", but its query block needs " << planned->layout;
  operandType = planned->operandType;
  for (auto &[op, slot] : planned->loads)
    loads[op] = slot;
  streamStageBytes = planned->stageBytes;
  smemBytes = planned->sharedBytes;
  return success();
}

} // namespace tessel::mma
