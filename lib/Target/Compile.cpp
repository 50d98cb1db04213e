//===- Compile.cpp - compile a tile module to PTX and cubin ---------------===//
//
// One compile (compileOnce): runs tile-to-nvvm in process (to the LLVM dialect, then to PTX with
// gpu-module-to-binary {format=isa}, one LLVM module per kernel, joined into one PTX module), and
// makes the cubin with one `ptxas -v` run so that the cubin and the resource report always come
// from the same ptxas invocation. compileModule, which compiles again where ptxas spills, is in
// SpillFallbacks.cpp.
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Compile.h"
#include "CompileSteps.h"
#include "tessel/Target/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/Timing.h"

#include "llvm/Support/FileSystem.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/Path.h"
#include "llvm/Support/Program.h"
#include "llvm/Support/Regex.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <cstdlib>

#ifndef TESSEL_CUDA_HOME
#define TESSEL_CUDA_HOME "/usr/local/cuda"
#endif

using namespace mlir;

llvm::SmallVector<tessel::KernelResources> tessel::parsePtxasReport(llvm::StringRef log) {
  llvm::SmallVector<KernelResources> kernels;
  llvm::Regex entry("Compiling entry function '([^']+)' for '([^']+)'");
  llvm::Regex frame("([0-9]+) bytes stack frame, ([0-9]+) bytes spill stores, ([0-9]+) bytes "
                    "spill loads");
  llvm::Regex regs("Used ([0-9]+) registers");
  llvm::Regex barriers("used ([0-9]+) barriers");
  llvm::Regex smem("([0-9]+) bytes smem");
  llvm::Regex cmem("([0-9]+) bytes cmem\\[0\\]");
  llvm::SmallVector<llvm::StringRef> lines;
  log.split(lines, '\n');
  for (llvm::StringRef line : lines) {
    llvm::SmallVector<llvm::StringRef> m;
    if (entry.match(line, &m)) {
      kernels.push_back({});
      kernels.back().kernel = m[1].str();
      kernels.back().arch = m[2].str();
      continue;
    }
    if (kernels.empty())
      continue;
    KernelResources &k = kernels.back();
    if (frame.match(line, &m)) {
      m[1].getAsInteger(10, k.stackBytes);
      m[2].getAsInteger(10, k.spillStoreBytes);
      m[3].getAsInteger(10, k.spillLoadBytes);
    }
    if (regs.match(line, &m))
      m[1].getAsInteger(10, k.registers);
    if (barriers.match(line, &m))
      m[1].getAsInteger(10, k.barriers);
    if (smem.match(line, &m))
      m[1].getAsInteger(10, k.sharedBytes);
    if (cmem.match(line, &m))
      m[1].getAsInteger(10, k.constantBytes);
  }
  return kernels;
}

std::string tessel::codeOptionsKey(const TargetOptions &options) {
  // Five strings, three unsigneds and eighteen bools (in five words). A new field of
  // TargetOptions lands here first: put it in the key if it can change the PTX or the cubin,
  // then update the size.
  static_assert(sizeof(TargetOptions) == 5 * sizeof(std::string) + 5 * alignof(std::string),
                "TargetOptions changed: decide whether the new field belongs in the cache key");
  return "chip=" + options.chip + ";features=" + options.features +
         ";num-threads=" + std::to_string(options.numThreads) + ";codegen=" + options.codegen +
         (options.wgmmaOverlap ? ";wgmma-overlap" : "") +
         (options.wgmmaAsyncDots ? ";wgmma-async-dots" : "") +
         (options.occupancyHints ? "" : ";no-occupancy-hints") +
         (options.occupancySpillBytes
              ? ";occupancy-spill-bytes=" + std::to_string(options.occupancySpillBytes)
              : "") +
         (options.sinkWaits ? "" : ";no-sink-waits") +
         (options.warpSpecialize ? "" : ";no-warp-specialize") +
         (options.overlapConsumers ? "" : ";no-overlap-consumers") +
         (options.pingpong ? "" : ";no-pingpong") + (options.producerOnce ? ";producer-once" : "") +
         (options.pipelineTiles ? ";pipeline-tiles" : "") + (options.lateP ? ";late-p" : "") +
         (options.rescaleUnderS ? ";rescale-under-s" : "") +
         (options.dropTmaFences ? "" : ";no-drop-tma-fences") +
         (options.fp8Overlap ? ";fp8-overlap" : "") +
         (options.fuseMaskedLoops ? ";fuse-masked-loops" : "") +
         (options.syncMaskedLoops ? "" : ";no-sync-masked-loops") +
         (options.skipMaskedWarpgroups ? ";skip-masked-warpgroups" : "") +
         (options.tmaProducer ? "" : ";no-tma-producer") + (options.tmaOnly ? ";tma-only" : "") +
         (options.vectorStores ? "" : ";no-vector-stores") +
         (options.trimZeroColumns ? "" : ";no-trim-zero-columns") +
         (options.trimOutputColumns ? "" : ";no-trim-output-columns") +
         (options.spillFallbacks ? "" : ";no-spill-fallbacks") +
         (options.numStages != 2 ? ";num-stages=" + std::to_string(options.numStages) : "");
}

std::string tessel::findPtxas(llvm::StringRef toolkit) {
  llvm::SmallVector<std::string> homes;
  if (!toolkit.empty())
    homes.push_back(toolkit.str());
  for (const char *var : {"CUDA_HOME", "CUDA_PATH", "CUDA_ROOT"})
    if (const char *v = std::getenv(var))
      homes.push_back(v);
  homes.push_back(TESSEL_CUDA_HOME);
  for (const std::string &home : homes) {
    llvm::SmallString<256> path(home);
    llvm::sys::path::append(path, "bin", "ptxas");
    if (llvm::sys::fs::can_execute(path))
      return std::string(path);
  }
  if (llvm::ErrorOr<std::string> p = llvm::sys::findProgramByName("ptxas"))
    return *p;
  return {};
}

bool tessel::runPtxas(llvm::StringRef ptx, llvm::StringRef chip, llvm::StringRef toolkit,
                      CompiledModule &out, std::string &error) {
  std::string ptxas = findPtxas(toolkit);
  if (ptxas.empty()) {
    error = "no ptxas found: pass a toolkit or set CUDA_HOME";
    return false;
  }
  llvm::SmallString<128> ptxPath, cubinPath, logPath;
  int fd;
  if (llvm::sys::fs::createTemporaryFile("tessel", "ptx", fd, ptxPath) ||
      llvm::sys::fs::createTemporaryFile("tessel", "cubin", cubinPath) ||
      llvm::sys::fs::createTemporaryFile("tessel", "log", logPath)) {
    error = "cannot create temporary files for ptxas";
    return false;
  }
  {
    llvm::raw_fd_ostream os(fd, /*shouldClose=*/true);
    os << ptx;
  }
  std::string arch = ("-arch=" + chip).str();
  llvm::SmallVector<llvm::StringRef> args = {ptxas, arch, "-v", "-o", cubinPath, ptxPath};
  std::optional<llvm::StringRef> redirects[] = {std::nullopt, llvm::StringRef(logPath),
                                                llvm::StringRef(logPath)};
  std::string execError;
  int rc = llvm::sys::ExecuteAndWait(ptxas, args, std::nullopt, redirects, 0, 0, &execError);
  auto log = llvm::MemoryBuffer::getFile(logPath);
  out.ptxasLog = log ? (*log)->getBuffer().str() : std::string();
  if (rc == 0) {
    if (auto cubin = llvm::MemoryBuffer::getFile(cubinPath, false, false))
      out.cubin = (*cubin)->getBuffer().str();
    out.resources = parsePtxasReport(out.ptxasLog);
  }
  llvm::sys::fs::remove(ptxPath);
  llvm::sys::fs::remove(cubinPath);
  llvm::sys::fs::remove(logPath);
  if (rc != 0) {
    error = "ptxas failed (" + (execError.empty() ? "exit " + std::to_string(rc) : execError) +
            "):\n" + out.ptxasLog;
    return false;
  }
  return true;
}

/// The launch needs of every kernel in a module lowered to the LLVM dialect: the block size that
/// convert-tile-to-gpu fixed (gpu.known_block_size, else nvvm.maxntid) and the dynamic shared
/// memory it planned (tessel.dynamic_shared_bytes).
static llvm::SmallVector<tessel::KernelLaunchInfo> collectLaunchInfo(ModuleOp lowered) {
  llvm::SmallVector<tessel::KernelLaunchInfo> kernels;
  lowered->walk([&](LLVM::LLVMFuncOp func) {
    if (!func->hasAttr(gpu::GPUDialect::getKernelFuncAttrName()) && !func->hasAttr("nvvm.kernel"))
      return;
    tessel::KernelLaunchInfo info;
    info.name = func.getSymName().str();
    auto block = func->getAttrOfType<DenseI32ArrayAttr>("gpu.known_block_size");
    if (!block)
      block = func->getAttrOfType<DenseI32ArrayAttr>("nvvm.maxntid");
    if (block)
      for (auto [i, v] : llvm::enumerate(block.asArrayRef()))
        if (i < 3)
          info.blockSize[i] = static_cast<unsigned>(v);
    if (auto bytes = func->getAttrOfType<IntegerAttr>("tessel.dynamic_shared_bytes"))
      info.dynamicSharedBytes = bytes.getInt();
    kernels.push_back(std::move(info));
  });
  return kernels;
}

namespace tessel {
/// compileModule without its fallbacks: one lowering, one NVPTX and (for Stage::Cubin) one
/// ptxas run.
FailureOr<CompiledModule> compileOnce(ModuleOp module, const TargetOptions &options, Stage stage,
                                      const CompileFlags &flags) {
  if (!isSupportedChip(options.chip))
    return module.emitError() << "unsupported chip '" << options.chip
                              << "': tessel compiles for sm_80 and sm_90a";
  CompiledModule result;
  StageClock clock(result.timings);
  auto cancelled = [&] { return flags.cancelled && flags.cancelled->load(); };
  // One timing manager for both pass managers: its report lists the lowering and
  // gpu-module-to-binary together. Disabled, it costs nothing.
  llvm::raw_string_ostream passTimingStream(result.passTimingReport);
  DefaultTimingManager timingManager;
  timingManager.setEnabled(flags.passTiming);
  timingManager.setOutput(
      createOutputStrategy(DefaultTimingManager::OutputFormat::Text, passTimingStream));
  TimingScope timingRoot = timingManager.getRootScope();

  // The lowering runs once, on a copy (the caller's tile module stays as it is: it may be
  // compiled again for another chip); gpu-module-to-binary then runs on the lowered copy. This
  // is the same pass list as tile-to-nvvm{format=isa} (buildTileToNVVMPipeline is these two
  // parts) but for the split into one LLVM module per kernel below, so the PTX of a module of
  // one kernel is the same as running the named pipeline.
  OwningOpRef<ModuleOp> work(cast<ModuleOp>(module->clone()));
  clock.lap("clone");
  PassManager pm(module.getContext(), ModuleOp::getOperationName());
  pm.enableVerifier(flags.verifyEachPass);
  if (flags.passTiming)
    pm.enableTiming(timingRoot);
  buildTileToLLVMPipeline(pm, options);
  if (failed(pm.run(*work)) || cancelled())
    return failure();
  clock.lap("lowering");
  if (!flags.verifyEachPass) {
    // The one verification of the lowered module, before it is translated to LLVM IR.
    if (failed(verify(*work)))
      return failure();
    clock.lap("verify lowered");
  }
  if (flags.printLLVMDialect || stage == Stage::LLVM) {
    llvm::raw_string_ostream os(result.llvmDialect);
    work->print(os);
    clock.lap("print llvm dialect");
  }
  result.kernels = collectLaunchInfo(*work);
  if (stage == Stage::LLVM) {
    timingRoot.stop();
    timingManager.print();
    return result;
  }

  // Each kernel becomes an LLVM module of its own (tessel-split-kernel-modules: LLVM's
  // optimisation of one module of N kernels that share a global grows as N^2), compiled in
  // parallel when the context has threads; the PTX of the parts is then joined. A module of one
  // kernel is not split: its PTX is what gpu-module-to-binary makes of the whole module.
  TargetOptions toPTX = options;
  toPTX.format = "isa";
  OwningOpRef<ModuleOp> whole;
  if (result.kernels.size() > 1)
    whole = cast<ModuleOp>(work->clone());
  PassManager pmIsa(module.getContext(), ModuleOp::getOperationName());
  pmIsa.enableVerifier(flags.verifyEachPass);
  if (flags.passTiming)
    pmIsa.enableTiming(timingRoot);
  pmIsa.addPass(createSplitKernelModules());
  buildLLVMToBinaryPipeline(pmIsa.nest<ModuleOp>(), toPTX);
  buildLLVMToBinaryPipeline(pmIsa, toPTX);
  if (failed(pmIsa.run(*work)))
    return failure();
  int64_t isaMs = -1;
  llvm::SmallVector<std::string> parts;
  auto collectPtx = [&](ModuleOp compiled) {
    parts.clear();
    isaMs = -1;
    compiled->walk([&](gpu::BinaryOp binary) {
      for (Attribute object : binary.getObjects())
        if (auto obj = dyn_cast<gpu::ObjectAttr>(object)) {
          parts.push_back(obj.getObject().getValue().str());
          if (DictionaryAttr props = obj.getProperties())
            if (auto ms = props.getAs<IntegerAttr>("LLVMIRToISATimeInMs"))
              isaMs = std::max<int64_t>(isaMs, 0) + ms.getInt();
        }
    });
  };
  collectPtx(*work);
  std::string why;
  if (parts.size() == 1) {
    result.ptx = std::move(parts.front());
  } else if (!joinPtxModules(parts, result.ptx, why)) {
    // Not expected of what tessel lowers; correct but slow for many kernels.
    emitRemark(module.getLoc()) << "compiling the kernels as one LLVM module: the PTX of the "
                                   "kernels compiled apart cannot be joined ("
                                << why << ")";
    if (whole) {
      PassManager pmWhole(module.getContext(), ModuleOp::getOperationName());
      buildLLVMToBinaryPipeline(pmWhole, toPTX);
      if (failed(pmWhole.run(*whole)))
        return failure();
      collectPtx(*whole);
    }
    result.ptx.clear();
    for (const std::string &part : parts)
      result.ptx += part;
  }
  clock.lap("llvm ir + opt + nvptx");
  if (isaMs >= 0 && !result.timings.empty()) {
    // gpu-module-to-binary reports how long LLVM IR → PTX (the NVPTX back end) took; the rest
    // of the step is the translation to LLVM IR and LLVM's optimisation pipeline.
    StageTime whole = result.timings.pop_back_val();
    double isa = std::min(whole.seconds, isaMs / 1000.0);
    result.timings.push_back({"llvm ir + opt", whole.seconds - isa});
    result.timings.push_back({"nvptx", isa});
  }
  timingRoot.stop();
  timingManager.print();
  if (result.ptx.empty())
    return module.emitError("the pipeline produced no PTX (the module holds no tile program?)");
  if (stage == Stage::PTX)
    return result;
  if (cancelled())
    return failure();

  std::string error;
  if (!runPtxas(result.ptx, options.chip, options.toolkit, result, error))
    return module.emitError() << error;
  clock.lap("ptxas");
  return result;
}

} // namespace tessel
