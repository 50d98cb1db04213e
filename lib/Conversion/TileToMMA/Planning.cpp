//===- Planning.cpp - the plan convert-tile-to-mma takes from the tilegpu level
//----------------===//
//
// MmaKernelBuilder::plan: the builder takes its decisions from the tilegpu level: the kernel's
// shape and instruction family from the tiles' layouts (tilegpu-assign-layouts), each load's role
// and shared-memory slot and the ring's size from tilegpu::planMmaClass — the one place that
// checks the attention class and plans it, shared with the tilegpu passes.
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
  overlapOption = overlapOption && wgmma;
  FailureOr<tilegpu::MmaClassPlan> planned = tilegpu::planMmaClass(program, wgmma,
                                                                   layout.getWarpRows());
  if (failed(planned))
    return failure();
  if (planned->layout != layout)
    return program.emitOpError("has the tile layout ")
           << layout << ", but its query block needs " << planned->layout;
  blockM = layout.getBlockRows();
  numWarps = layout.getWarps();
  warpRows = layout.getWarpRows();
  mTiles = layout.getMTiles();
  operandType = planned->operandType;
  for (auto &[op, slot] : planned->loads)
    loads[op] = slot;
  streamStageBytes = planned->stageBytes;
  smemBytes = planned->sharedBytes;
  return success();
}

} // namespace tessel::mma
