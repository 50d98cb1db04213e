//===- Planning.cpp - the plan convert-tile-to-mma takes from the tilegpu level ---------------===//
//
// MmaKernelBuilder::plan: the builder takes its decisions from the tilegpu level: the kernel's
// shape and instruction family from the tiles' layouts (tilegpu-assign-layouts), the shared
// memory from the buffers tilegpu-allocate-shared placed.
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
  // The loads are placed (tilegpu-allocate-shared): the schedule is in the IR, and the
  // kernel's shared memory is what the buffers span.
  SmallVector<tilegpu::AllocOp> allocs(program.getOps<tilegpu::AllocOp>());
  if (trimZeroColumns || trimOutputColumns)
    planColumnReach(program);
  if (allocs.empty())
    return program.emitOpError("has no shared buffers: run tilegpu-allocate-shared first");
  for (tilegpu::AllocOp alloc : allocs) {
    tilegpu::SharedBufferType type = alloc.getResult().getType();
    // Rings of mbarriers (warp specialization) hold no operands.
    if (!type.getElementType().isInteger(64))
      operandType = type.getElementType();
    int64_t end = alloc.getOffset().value_or(0) + (type.getStages() - 1) * alloc.getStageStride() +
                  type.getStageBytes();
    smemBytes = std::max(smemBytes, end);
  }
  // tilegpu-tma-producer's maps: their records and images past the buffers, and a global
  // array of map slots for every SM.
  if (auto tma = program->getAttrOfType<DictionaryAttr>("tilegpu.tma")) {
    auto field = [&](StringRef name) { return cast<IntegerAttr>(tma.get(name)).getInt(); };
    tmaMaps = field("maps");
    tmaSlots = field("slots");
    tmaRecords = field("records");
    tmaImages = field("images");
    smemBytes = std::max(smemBytes, tmaImages + 128 * tmaSlots * tmaMaps);
    auto module = kernel->getParentOfType<gpu::GPUModuleOp>();
    OpBuilder at(module.getBody(), module.getBody()->begin());
    auto type = LLVM::LLVMArrayType::get(at.getI8Type(), kTmaSms * tmaMaps * tmaSlots * 128);
    tmaGlobal = LLVM::GlobalOp::create(at, program.getLoc(), type, /*isConstant=*/false,
                                       LLVM::Linkage::Internal,
                                       ("__tessel_tma_maps_" + kernel.getName()).str(), Attribute(),
                                       /*alignment=*/128, /*addrSpace=*/1);
    Block *init = at.createBlock(&tmaGlobal.getInitializerRegion());
    at.setInsertionPointToStart(init);
    LLVM::ReturnOp::create(at, program.getLoc(),
                           LLVM::ZeroOp::create(at, program.getLoc(), type).getResult());
  }
  program.walk([&](tilegpu::WarpSpecializeOp ws) {
    producerThreads = static_cast<int64_t>(ws.getProducerWarps()) * 32;
    int64_t registers = producerThreads * ws.getProducerRegisters() +
                        numThreads() * ws.getConsumerRegisters();
    launchRegs = registers / blockThreads() / 8 * 8;
    // Overlapped consumers (a wgmma waited for with another in flight) read a once-loaded A
    // block by descriptor (takeAFragments).
    ws.getConsumers().walk(
        [&](tilegpu::WgmmaWaitOp wait) { overlappedConsumers |= wait.getPending() > 0; });
  });
  program.walk([&](tilegpu::LocalLoadOp read) {
    auto operand = dyn_cast<tilegpu::DotOperandEncodingAttr>(
        read.getResult().getType().getEncoding());
    if (operand && operand.getOperand() == 0)
      ++aBlocks;
  });
  bool fp8 = isa<Float8E4M3FNType>(operandType);
  if (!operandType.isF16() && !operandType.isBF16() && !(fp8 && wgmma))
    return program.emitOpError("has shared buffers of ")
           << operandType << ": convert-tile-to-mma takes f16 or bf16 operands (f8E4M3FN with "
           << "wgmma)";
  return success();
}

} // namespace tessel::mma
