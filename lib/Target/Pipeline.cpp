//===- Pipeline.cpp - the pipeline from tile IR to PTX and cubin ----------===//
//
// Builds and registers `tile-to-nvvm`. This is the one file that includes
// mlir/Conversion/Passes.h (22 s to compile, TOOLCHAIN.md): every upstream conversion pass and
// interface tessel uses is named here, one by one, never through the catch-all registrations.
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Pipeline.h"

#include "tessel/Conversion/Passes.h"
#include "tessel/Target/Passes.h"

#include "mlir/Conversion/ArithToLLVM/ArithToLLVM.h"
#include "mlir/Conversion/ControlFlowToLLVM/ControlFlowToLLVM.h"
#include "mlir/Conversion/FuncToLLVM/ConvertFuncToLLVM.h"
#include "mlir/Conversion/IndexToLLVM/IndexToLLVM.h"
#include "mlir/Conversion/MemRefToLLVM/MemRefToLLVM.h"
#include "mlir/Conversion/NVVMToLLVM/NVVMToLLVM.h"
#include "mlir/Conversion/Passes.h"
#include "mlir/Conversion/UBToLLVM/UBToLLVM.h"
#include "mlir/Dialect/ControlFlow/IR/ControlFlow.h"
#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/GPU/Transforms/Passes.h"
#include "mlir/Dialect/Index/IR/IndexDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/Dialect/LLVMIR/NVVMDialect.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/UB/IR/UBOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"
#include "mlir/Target/LLVM/NVVM/Target.h"
#include "mlir/Target/LLVMIR/Dialect/Builtin/BuiltinToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/GPU/GPUToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/LLVMIR/LLVMToLLVMIRTranslation.h"
#include "mlir/Target/LLVMIR/Dialect/NVVM/NVVMToLLVMIRTranslation.h"
#include "mlir/Transforms/GreedyPatternRewriteDriver.h"
#include "mlir/Transforms/Passes.h"

#include <mutex>

using namespace mlir;

namespace {

/// The options of `tile-to-nvvm`, mirroring tessel::TargetOptions.
struct TileToNVVMOptions : public PassPipelineOptions<TileToNVVMOptions> {
  Option<std::string> chip{*this, "chip", llvm::cl::desc("GPU to compile for: sm_80 or sm_90a."),
                           llvm::cl::init("sm_90a")};
  Option<std::string> features{*this, "features", llvm::cl::desc("PTX features, e.g. +ptx80."),
                               llvm::cl::init("+ptx80")};
  Option<unsigned> numThreads{*this, "num-threads",
                              llvm::cl::desc("Threads per CTA of the reference lowering."),
                              llvm::cl::init(128)};
  Option<std::string> format{*this, "format",
                             llvm::cl::desc("Stop at llvm (LLVM dialect), isa (PTX) or bin "
                                            "(cubin)."),
                             llvm::cl::init("isa")};
  Option<std::string> codegen{*this, "codegen",
                              llvm::cl::desc("Lowering of tile programs: reference, mma (the "
                                             "mma.sync fast path), wgmma (sm_90a: the same "
                                             "class with wgmma.mma_async) or auto (wgmma on "
                                             "sm_90a, else mma, where the program fits; "
                                             "else reference)."),
                              llvm::cl::init("reference")};
  Option<bool> wgmmaOverlap{*this, "wgmma-overlap",
                            llvm::cl::desc("With wgmma: overlap the softmax with the previous "
                                           "block's P·V inside a warpgroup."),
                            llvm::cl::init(false)};
  Option<unsigned> numStages{*this, "num-stages",
                             llvm::cl::desc("Stages of the fast paths' ring of loop-body loads "
                                            "(2 to 4)."),
                             llvm::cl::init(2)};
  Option<bool> wgmmaAsyncDots{*this, "wgmma-async-dots",
                              llvm::cl::desc("With wgmma: the other dots issued where they "
                                             "stand, waited for before their first use."),
                              llvm::cl::init(false)};
  Option<bool> sinkWaits{*this, "sink-waits",
                         llvm::cl::desc("The wait for a block loaded before a loop below the "
                                        "loop's first copies (tilegpu-sink-waits)."),
                         llvm::cl::init(true)};
  Option<bool> warpSpecialize{*this, "warp-specialize",
                              llvm::cl::desc("With wgmma, on 128-row attention blocks: a producer "
                                             "warpgroup copies the loops' blocks "
                                             "(tilegpu-warp-specialize)."),
                              llvm::cl::init(true)};
  Option<bool> overlapConsumers{*this, "overlap-consumers",
                                llvm::cl::desc("In a producer's consumers, the softmax under the "
                                               "previous block's P·V "
                                               "(tilegpu-overlap-consumers)."),
                                llvm::cl::init(true)};
  Option<bool> pingpong{*this, "pingpong",
                        llvm::cl::desc("Overlapped consumers take turns issuing their dots "
                                       "(tilegpu-pingpong)."),
                        llvm::cl::init(true)};
  Option<bool> producerOnce{*this, "producer-once",
                            llvm::cl::desc("The producer copies the blocks loaded once a tile "
                                           "(tilegpu-producer-once)."),
                            llvm::cl::init(false)};
  Option<bool> lateP{*this, "late-p",
                     llvm::cl::desc("Overlapped consumers short of registers make P_j after the "
                                    "previous P·V's wait (tilegpu-overlap-consumers late-p)."),
                     llvm::cl::init(false)};
  Option<bool> rescaleUnderS{*this, "rescale-under-s",
                             llvm::cl::desc("Overlapped consumers rescale O beside the next S's "
                                            "wgmma (tilegpu-overlap-consumers "
                                            "rescale-under-s)."),
                             llvm::cl::init(false)};
  Option<bool> dropTmaFences{*this, "drop-tma-fences",
                             llvm::cl::desc("With tma-only, no proxy fence after the consumers' "
                                            "waits on rings only TMA fills "
                                            "(tilegpu-drop-tma-fences)."),
                             llvm::cl::init(true)};
  Option<bool> fp8Overlap{*this, "fp8-overlap",
                          llvm::cl::desc("FP8 kernels' consumers overlapped too "
                                         "(tilegpu-overlap-consumers transposed-v)."),
                          llvm::cl::init(false)};
  Option<bool> pipelineTiles{*this, "pipeline-tiles",
                             llvm::cl::desc("The next tile's first S issued before this tile's "
                                            "epilogue (tilegpu-pipeline-tiles)."),
                             llvm::cl::init(false)};
  Option<bool> fuseMaskedLoops{*this, "fuse-masked-loops",
                               llvm::cl::desc("A key loop's masked and unmasked copies as one "
                                              "loop (tilegpu-fuse-masked-loops)."),
                               llvm::cl::init(false)};
  Option<bool> syncMaskedLoops{*this, "sync-masked-loops",
                               llvm::cl::desc("The split's masked loops left synchronous "
                                              "(tilegpu-overlap-consumers masked-synchronous)."),
                               llvm::cl::init(true)};
  Option<bool> skipMaskedWarpgroups{
      *this, "skip-masked-warpgroups",
      llvm::cl::desc("Each consumer warpgroup skips the masked loop's blocks its rows cannot "
                     "see (tilegpu-skip-masked-warpgroups)."),
      llvm::cl::init(false)};
  Option<bool> tmaProducer{*this, "tma-producer",
                           llvm::cl::desc("The producer's block copies through TMA "
                                          "(tilegpu-tma-producer)."),
                           llvm::cl::init(true)};
  Option<bool> tmaOnly{*this, "tma-only",
                       llvm::cl::desc("TMA copies without the run-time check and cp.async copy "
                                      "beside them (the launcher guarantees what TMA needs)."),
                       llvm::cl::init(false)};
  Option<bool> vectorStores{*this, "vector-stores",
                            llvm::cl::desc("16-bit accumulator tiles stored 16 bytes a thread "
                                           "after a quad transpose."),
                            llvm::cl::init(true)};
  Option<bool> trimZeroColumns{*this, "trim-zero-columns",
                               llvm::cl::desc("Dots summed along a B block's columns run k "
                                              "steps only over the columns its copies fill."),
                               llvm::cl::init(true)};
  Option<bool> trimOutputColumns{*this, "trim-output-columns",
                                 llvm::cl::desc("Dots of a B block read as stored compute only "
                                                "the output columns its copies fill."),
                                 llvm::cl::init(true)};
  Option<std::string> toolkit{*this, "toolkit",
                              llvm::cl::desc("CUDA toolkit whose ptxas makes cubins."),
                              llvm::cl::init("")};
};

} // namespace

bool tessel::isSupportedCodegen(const std::string &codegen) {
  return codegen == "auto" || codegen == "reference" || codegen == "mma" || codegen == "wgmma";
}

bool tessel::isSupportedChip(const std::string &chip) {
  return chip == "sm_80" || chip == "sm_90a";
}

int64_t tessel::maxSharedBytesPerBlock(const std::string &chip) {
  // cudaDevAttrMaxSharedMemoryPerBlockOptin: 163 KiB on A100 (sm_80), 227 KiB on H100 (sm_90).
  return chip == "sm_80" ? 163 * 1024 : 227 * 1024;
}

void tessel::buildTileToLLVMPipeline(OpPassManager &pm, const TargetOptions &options) {
  if (options.codegen != "reference") {
    // The fast path takes the programs of its class; the reference lowering the rest (with
    // codegen=mma there is no rest: the fast path fails on programs outside its class).
    ConvertTileToMMAOptions mmaOptions;
    mmaOptions.fallback = options.codegen == "auto";
    mmaOptions.sharedLimit = maxSharedBytesPerBlock(options.chip);
    // wgmma is sm_90a only; the pass refuses other chips with a located error. auto takes it
    // on sm_90a (1.5x the mma.sync path on the H200, docs/dev/codegen-wgmma.md), falling back
    // to mma.sync, then to the reference lowering, program by program.
    mmaOptions.wgmma = options.codegen == "wgmma" ||
                       (options.codegen == "auto" && options.chip == "sm_90a");
    mmaOptions.wgmmaOverlap = options.wgmmaOverlap;
    mmaOptions.wgmmaAsyncDots = options.wgmmaAsyncDots;
    mmaOptions.sinkWaits = options.sinkWaits;
    mmaOptions.warpSpecialize = options.warpSpecialize;
    mmaOptions.overlapConsumers = options.overlapConsumers;
    mmaOptions.pingpong = options.pingpong;
    mmaOptions.producerOnce = options.producerOnce;
    mmaOptions.pipelineTiles = options.pipelineTiles;
    mmaOptions.lateP = options.lateP;
    mmaOptions.rescaleUnderS = options.rescaleUnderS;
    mmaOptions.dropTmaFences = options.dropTmaFences;
    mmaOptions.fp8Overlap = options.fp8Overlap;
    mmaOptions.fuseMaskedLoops = options.fuseMaskedLoops;
    mmaOptions.syncMaskedLoops = options.syncMaskedLoops;
    mmaOptions.skipMaskedWarpgroups = options.skipMaskedWarpgroups;
    mmaOptions.tmaProducer = options.tmaProducer;
    mmaOptions.tmaOnly = options.tmaOnly;
    mmaOptions.vectorStores = options.vectorStores;
    mmaOptions.trimZeroColumns = options.trimZeroColumns;
    mmaOptions.trimOutputColumns = options.trimOutputColumns;
    mmaOptions.stages = options.numStages;
    mmaOptions.chip = options.chip;
    pm.addPass(createConvertTileToMMA(mmaOptions));
  }
  if (options.codegen == "auto") {
    // Programs without dots: tiles in registers in a row-blocked layout where they fit.
    ConvertTileToBlockedOptions blockedOptions;
    blockedOptions.fallback = true;
    blockedOptions.numThreads = options.numThreads;
    pm.addPass(createConvertTileToBlocked(blockedOptions));
  }
  ConvertTileToGPUOptions tileOptions;
  tileOptions.numThreads = options.numThreads;
  tileOptions.sharedLimit = maxSharedBytesPerBlock(options.chip);
  pm.addPass(createConvertTileToGPU(tileOptions));
  // The canonicalizer seeds its worklist bottom-up here: on the unrolled mma.sync kernels the
  // default top-down order revisits the scf.for with its dozens of accumulators after every
  // fold in its body (RegionBranchOpInterface patterns), 2.4x slower for the same fixpoint.
  // The PTX of every kernel checked is byte-identical (docs/dev/cold-compile.md).
  GreedyRewriteConfig canonicalize;
  canonicalize.setUseTopDownTraversal(false);
  canonicalize.setRegionSimplificationLevel(GreedySimplifyRegionLevel::Normal);
  pm.addPass(createCanonicalizerPass(canonicalize));
  pm.addPass(createCSEPass());

  GpuNVVMAttachTargetOptions target;
  target.chip = options.chip;
  // In-kernel tensor maps (tensormap.replace, sm_90a only) need PTX ISA 8.3.
  bool tensorMaps = options.tmaProducer && options.chip == "sm_90a";
  target.features = tensorMaps && options.features == "+ptx80" ? "+ptx83" : options.features;
  target.optLevel = 3;
  pm.addPass(createGpuNVVMAttachTarget(target));

  OpPassManager &kernels = pm.nest<gpu::GPUModuleOp>();
  kernels.addPass(createSCFToControlFlowPass());
  kernels.addPass(createConvertGpuOpsToNVVMOps());
  kernels.addPass(createConvertNVVMToLLVMPass());
  kernels.addPass(createExternDynamicSharedMemory());
  kernels.addPass(createCanonicalizerPass());
  kernels.addPass(createCSEPass());
  pm.addPass(createReconcileUnrealizedCastsPass());
}

void tessel::buildLLVMToBinaryPipeline(OpPassManager &pm, const TargetOptions &options) {
  if (options.format == "llvm")
    return;
  ModuleToBinaryOptions binary;
  binary.format = options.format;
  binary.toolkit = options.toolkit;
  pm.addPass(createModuleToBinary(binary));
}

void tessel::buildTileToNVVMPipeline(OpPassManager &pm, const TargetOptions &options) {
  buildTileToLLVMPipeline(pm, options);
  buildLLVMToBinaryPipeline(pm, options);
}

void tessel::registerTargetDialects(DialectRegistry &registry) {
  registry.insert<gpu::GPUDialect, LLVM::LLVMDialect, NVVM::NVVMDialect, memref::MemRefDialect,
                  cf::ControlFlowDialect, index::IndexDialect, ub::UBDialect>();
  arith::registerConvertArithToLLVMInterface(registry);
  cf::registerConvertControlFlowToLLVMInterface(registry);
  registerConvertFuncToLLVMInterface(registry);
  index::registerConvertIndexToLLVMInterface(registry);
  registerConvertMemRefToLLVMInterface(registry);
  registerConvertNVVMToLLVMInterface(registry);
  ub::registerConvertUBToLLVMInterface(registry);
  NVVM::registerNVVMTargetInterfaceExternalModels(registry);
  registerBuiltinDialectTranslation(registry);
  registerLLVMDialectTranslation(registry);
  registerNVVMDialectTranslation(registry);
  registerGPUDialectTranslation(registry);
}

void tessel::registerTargetPasses() {
  static std::once_flag once;
  std::call_once(once, [] {
    registerConvertTileToGPU();
    registerConvertTileToMMA();
    registerConvertTileToBlocked();
    registerExternDynamicSharedMemory();
    registerSplitKernelModules();
    registerGpuNVVMAttachTarget();
    registerGpuModuleToBinaryPass();
    registerModuleToBinary();
    registerSCFToControlFlowPass();
    registerConvertGpuOpsToNVVMOps();
    registerConvertNVVMToLLVMPass();
    registerReconcileUnrealizedCastsPass();
    PassPipelineRegistration<TileToNVVMOptions>(
        "tile-to-nvvm",
        "Lower tile programs to GPU kernels, NVVM and LLVM, then to PTX (format=isa) or a cubin "
        "(format=bin).",
        [](OpPassManager &pm, const TileToNVVMOptions &o) {
          TargetOptions options;
          options.chip = o.chip;
          options.features = o.features;
          options.numThreads = o.numThreads;
          options.format = o.format;
          options.toolkit = o.toolkit;
          options.codegen = o.codegen;
          options.wgmmaOverlap = o.wgmmaOverlap;
          options.wgmmaAsyncDots = o.wgmmaAsyncDots;
          options.sinkWaits = o.sinkWaits;
          options.warpSpecialize = o.warpSpecialize;
          options.overlapConsumers = o.overlapConsumers;
          options.pingpong = o.pingpong;
          options.producerOnce = o.producerOnce;
          options.pipelineTiles = o.pipelineTiles;
          options.lateP = o.lateP;
          options.rescaleUnderS = o.rescaleUnderS;
          options.dropTmaFences = o.dropTmaFences;
          options.fp8Overlap = o.fp8Overlap;
          options.fuseMaskedLoops = o.fuseMaskedLoops;
          options.syncMaskedLoops = o.syncMaskedLoops;
          options.skipMaskedWarpgroups = o.skipMaskedWarpgroups;
          options.tmaProducer = o.tmaProducer;
          options.tmaOnly = o.tmaOnly;
          options.vectorStores = o.vectorStores;
          options.trimZeroColumns = o.trimZeroColumns;
          options.trimOutputColumns = o.trimOutputColumns;
          options.numStages = o.numStages;
          buildTileToNVVMPipeline(pm, options);
        });
  });
}
