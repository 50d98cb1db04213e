//===- tesselc.cpp - the ahead-of-time compiler of tessel -----------------===//
//
// tesselc FILE.mlir --chip=sm_80|sm_90a --emit=tile|llvm|ptx|cubin -o OUT [--ptxas-report]
// compiles the tile programs of FILE to the LLVM dialect, PTX or a cubin and can print ptxas'
// resource usage and each kernel's launch needs (block size, dynamic shared memory). The
// tile-level optimisations run first (--tile-optimize, on by default), so attention written the
// naive way compiles as it is. Errors in the input are reported at their file:line:col; every
// failure exits 1.
//
//===----------------------------------------------------------------------===//

#include "tessel/Registration.h"
#include "tessel/Support/InputLimits.h"
#include "tessel/Target/Compile.h"
#include "tile/Transforms/Passes.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/WithColor.h"
#include "llvm/Support/raw_ostream.h"

using namespace llvm;

// --help lists tesselc's options, not the hundreds that LLVM's libraries register.
static cl::OptionCategory tesselcCategory("tesselc options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<tile IR file>"), cl::init("-"),
                                      cl::cat(tesselcCategory));
static cl::opt<std::string> outputFile("o", cl::desc("Output file"), cl::value_desc("file"),
                                       cl::init("-"), cl::cat(tesselcCategory));
static cl::opt<std::string> chip("chip", cl::desc("GPU to compile for: sm_80 or sm_90a"),
                                 cl::init("sm_90a"), cl::cat(tesselcCategory));
static cl::opt<bool> tileOptimize(
    "tile-optimize",
    cl::desc("Run the tile-level optimisation pipeline (online softmax, scale folding, masked-loop "
             "splitting) first; on by default, so naive attention compiles as it is"),
    cl::init(true), cl::cat(tesselcCategory));
enum class Emit { Tile, LLVM, PTX, Cubin };
static cl::opt<Emit>
    emit("emit", cl::desc("What to write"), cl::init(Emit::PTX),
         cl::values(clEnumValN(Emit::Tile, "tile", "the verified tile IR"),
                    clEnumValN(Emit::LLVM, "llvm", "the kernels in the LLVM dialect"),
                    clEnumValN(Emit::PTX, "ptx", "PTX"),
                    clEnumValN(Emit::Cubin, "cubin", "a cubin made by ptxas")),
         cl::cat(tesselcCategory));
static cl::opt<bool> ptxasReport("ptxas-report",
                                 cl::desc("Print ptxas' resource usage of every kernel"),
                                 cl::cat(tesselcCategory));
static cl::opt<unsigned> numThreads("num-threads", cl::desc("Threads per CTA"), cl::init(128),
                                    cl::cat(tesselcCategory));
static cl::opt<std::string> toolkit("cuda-toolkit", cl::desc("CUDA toolkit holding bin/ptxas"),
                                    cl::init(""), cl::cat(tesselcCategory));

static cl::opt<std::string> codegen(
    "codegen",
    cl::desc("Lowering: reference (every tile in shared memory), mma (the mma.sync fast path "
             "for attention; errors outside its class), wgmma (sm_90a: the same class with "
             "wgmma.mma_async) or auto (wgmma on sm_90a, else mma, where the program fits; "
             "else reference, with a remark)"),
    cl::init("auto"), cl::cat(tesselcCategory));

static cl::opt<bool> wgmmaOverlap(
    "wgmma-overlap",
    cl::desc("With wgmma: overlap the softmax of each K/V block with the previous block's P·V "
             "inside a warpgroup (FA3's intra-warpgroup pipelining)"),
    cl::init(false), cl::cat(tesselcCategory));

static cl::opt<unsigned> numStages(
    "num-stages",
    cl::desc("Stages of the fast paths' ring of loop-body loads, 2 to 4 (the overlapped wgmma "
             "schedule keeps two)"),
    cl::init(2), cl::cat(tesselcCategory));

static cl::opt<bool> wgmmaAsyncDots(
    "wgmma-async-dots",
    cl::desc("With wgmma: the dots the overlap does not schedule issued where they stand and "
             "waited for before their first use (tilegpu-async-dots; not yet measured)"),
    cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool> noSinkWaits(
    "no-sink-waits",
    cl::desc("Wait for a block loaded before a loop (Q) before the loop's first copies are "
             "issued, as before tilegpu-sink-waits (to compare)"),
    cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool>
    noWarpSpecialize("no-warp-specialize",
                     cl::desc("Copy a 128-row wgmma block's K/V from every thread, as before "
                              "tilegpu-warp-specialize (to compare)"),
                     cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool> producerOnce(
    "producer-once",
    cl::desc("The producer warpgroup copies the blocks loaded once a tile (Q) too "
             "(tilegpu-producer-once), into two buffers in a tile loop; tessel.attention "
             "asks it for short tiles"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool> fuseMaskedLoops(
    "fuse-masked-loops",
    cl::desc("A key loop's masked and unmasked copies as one loop, the mask skipped under a "
             "uniform branch where it is all true (tilegpu-fuse-masked-loops)"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool> noSyncMaskedLoops(
    "no-sync-masked-loops",
    cl::desc("Overlapped consumers overlap the split's masked loops (the boundary blocks) too, "
             "as before tilegpu-overlap-consumers masked-synchronous (to compare)"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool> skipMaskedWarpgroups(
    "skip-masked-warpgroups",
    cl::desc("In the synchronous masked loops, each consumer warpgroup branches around the "
             "blocks its own rows cannot see (tilegpu-skip-masked-warpgroups); off until "
             "measured"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool> pipelineTiles(
    "pipeline-tiles",
    cl::desc("With --producer-once in a persistent kernel: the next tile's first S issued "
             "before this tile's epilogue (tilegpu-pipeline-tiles); off until measured"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool> noDropTmaFences(
    "no-drop-tma-fences",
    cl::desc("With --tma-only: keep the consumers' proxy fence after each wait on a ring only "
             "TMA fills (no tilegpu-drop-tma-fences; to compare)"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool> rescaleUnderS(
    "rescale-under-s",
    cl::desc("Overlapped consumers rescale O by the previous alpha between the next S's wgmma and "
             "its P·V, beside S, not after O's wait (tilegpu-overlap-consumers rescale-under-s); "
             "off until measured"),
    cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool>
    lateP("late-p",
          cl::desc("Overlapped consumers short of registers (d64's three warpgroups) make P_j "
                   "after the previous P·V's wait, with a cp.async producer's registers "
                   "(tilegpu-overlap-consumers late-p); off until measured"),
          cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool>
    fp8Overlap("fp8-overlap",
               cl::desc("FP8 kernels' consumers overlapped too, their transposed V read so "
                        "(tilegpu-overlap-consumers transposed-v); off until measured"),
               cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool>
    noTmaProducer("no-tma-producer",
                  cl::desc("A warp-specialized kernel's producer copies its blocks by cp.async "
                           "from every thread, not through TMA (no tilegpu-tma-producer; to "
                           "compare)"),
                  cl::init(false), cl::cat(tesselcCategory));
static cl::opt<bool>
    tmaOnly("tma-only",
            cl::desc("TMA copies without the run-time check of what TMA needs and the cp.async "
                     "copy beside them: the caller guarantees 16-byte aligned origins and row "
                     "strides and at most 256 SMs"),
            cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool>
    noSpillFallbacks("no-spill-fallbacks",
                     cl::desc("Keep the first compile where ptxas spills, without compiling "
                              "again with the register-hungry switches given up"),
                     cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool>
    noVectorStores("no-vector-stores",
                   cl::desc("16-bit accumulator tiles stored 4 bytes a thread, without the quad "
                            "transpose (no convert-tile-to-mma vector-stores; to compare)"),
                   cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool>
    noTrimOutputColumns("no-trim-output-columns",
                        cl::desc("Dots of a B block read as stored compute every output column, "
                                 "the zero columns past its copies' too (no convert-tile-to-mma "
                                 "trim-output-columns; to compare)"),
                        cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool>
    noTrimZeroColumns("no-trim-zero-columns",
                      cl::desc("Dots summed along a B block's columns run every k step, the "
                               "zero columns past its copies' too (no convert-tile-to-mma "
                               "trim-zero-columns; to compare)"),
                      cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool>
    noPingpong("no-pingpong",
               cl::desc("Overlapped consumers of two warpgroups issue their dots when ready, "
                        "without taking turns (no tilegpu-pingpong; to compare)"),
               cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool> noOverlapConsumers(
    "no-overlap-consumers",
    cl::desc("In a warp-specialized kernel, keep each consumer's dots synchronous "
             "(no tilegpu-overlap-consumers; to compare)"),
    cl::init(false), cl::cat(tesselcCategory));

static cl::opt<bool> noOccupancyHints(
    "no-occupancy-hints",
    cl::desc("Keep ptxas' first register allocation even where registers, not shared memory, "
             "cap the CTAs per SM (no second ptxas run with .minnctapersm)"),
    cl::init(false), cl::cat(tesselcCategory));

static cl::opt<unsigned> occupancySpillBytes(
    "occupancy-spill-bytes",
    cl::desc("Bytes of spill stores an occupancy hint may add: ask for one CTA more than the "
             "registers allow, however far, and keep it within this spill (0: only where "
             "nothing more spills)"),
    cl::init(0), cl::cat(tesselcCategory));

static int fail(const Twine &message) {
  WithColor::error(errs(), "tesselc") << message << "\n";
  return 1;
}

static void printReport(raw_ostream &os, const tessel::CompiledModule &compiled) {
  for (const tessel::KernelResources &k : compiled.resources)
    os << "ptxas " << k.arch << " " << k.kernel << ": " << k.registers << " registers, "
       << k.sharedBytes << " bytes smem, " << k.stackBytes << " bytes stack, " << k.spillStoreBytes
       << " bytes spill stores, " << k.spillLoadBytes << " bytes spill loads, " << k.barriers
       << " barriers, " << k.constantBytes << " bytes cmem[0]\n";
  // ptxas warnings and numbered advisories ("(C7515) Potential Performance Loss:
  // wgmma.mma_async instructions are serialized ...", "(C7519) warpgroup.arrive is injected
  // ...") verbatim, so that tests can refuse them.
  StringRef log = compiled.ptxasLog;
  while (!log.empty()) {
    auto [line, rest] = log.split('\n');
    log = rest;
    if (line.contains_insensitive("warning") || line.contains(": (C"))
      os << line.trim() << "\n";
  }
  for (const tessel::KernelLaunchInfo &k : compiled.kernels)
    os << "kernel " << k.name << ": block " << k.blockSize[0] << "x" << k.blockSize[1] << "x"
       << k.blockSize[2] << ", " << k.dynamicSharedBytes << " bytes dynamic smem\n";
  // What the spill fallbacks gave up (the manifest's `given_up` in the JIT).
  if (!compiled.givenUp.empty())
    os << "spill fallbacks gave up: " << llvm::join(compiled.givenUp, ", ") << "\n";
}

int main(int argc, char **argv) {
  InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(tesselcCategory);
  cl::SetVersionPrinter([](raw_ostream &os) {
    os << "tesselc (tessel " TESSEL_VERSION ") on LLVM/MLIR " LLVM_VERSION_STRING "\n";
  });
  cl::ParseCommandLineOptions(argc, argv, "tessel ahead-of-time compiler\n");
  tessel::registerPasses();
  if (!tessel::isSupportedChip(chip))
    return fail("unknown chip '" + chip + "' (expected sm_80 or sm_90a)");
  if (!tessel::isSupportedCodegen(codegen))
    return fail("unknown codegen '" + codegen + "' (expected auto, reference, mma or wgmma)");
  if (numStages < 2 || numStages > 4)
    return fail("--num-stages must be 2, 3 or 4");
  if (numThreads == 0 || numThreads > 1024)
    return fail("--num-threads must be between 1 and 1024");
  if (occupancySpillBytes > 1024)
    return fail("--occupancy-spill-bytes must be between 0 and 1024");
  if (emit == Emit::Cubin && outputFile == "-")
    return fail("--emit=cubin writes a binary: give an output file with -o");

  mlir::DialectRegistry registry;
  tessel::registerDialects(registry);
  mlir::MLIRContext context(registry);
  context.loadAllAvailableDialects();
  // Users get the located message, never a generic dump of the failing op (and its function).
  context.printOpOnDiagnostic(false);

  std::string errorMessage;
  auto input = mlir::openInputFile(inputFile, &errorMessage);
  if (!input)
    return fail(errorMessage);
  SourceMgr sourceMgr;
  sourceMgr.AddNewSourceBuffer(std::move(input), SMLoc());
  mlir::SourceMgrDiagnosticHandler diagnostics(sourceMgr, &context);
  if (!tessel::checkNestingDepth(sourceMgr))
    return 1;
  mlir::OwningOpRef<mlir::ModuleOp> module = mlir::parseSourceFile<mlir::ModuleOp>(sourceMgr,
                                                                                   &context);
  if (!module)
    return 1;

  if (tileOptimize) {
    mlir::PassManager pm(&context);
    tessel::tile::buildTileOptimizationPipeline(pm);
    if (mlir::failed(pm.run(*module)))
      return 1;
  }

  auto output = mlir::openOutputFile(outputFile, &errorMessage);
  if (!output)
    return fail(errorMessage);
  if (emit == Emit::Tile && !ptxasReport) {
    module->print(output->os());
    output->os() << "\n";
    output->keep();
    return 0;
  }

  tessel::TargetOptions options;
  options.chip = chip;
  options.numThreads = numThreads;
  options.toolkit = toolkit;
  options.codegen = codegen;
  options.wgmmaOverlap = wgmmaOverlap;
  options.wgmmaAsyncDots = wgmmaAsyncDots;
  options.occupancyHints = !noOccupancyHints;
  options.occupancySpillBytes = occupancySpillBytes;
  options.sinkWaits = !noSinkWaits;
  options.warpSpecialize = !noWarpSpecialize;
  options.overlapConsumers = !noOverlapConsumers;
  options.pingpong = !noPingpong;
  options.producerOnce = producerOnce;
  options.pipelineTiles = pipelineTiles;
  options.lateP = lateP;
  options.rescaleUnderS = rescaleUnderS;
  options.dropTmaFences = !noDropTmaFences;
  options.fp8Overlap = fp8Overlap;
  options.fuseMaskedLoops = fuseMaskedLoops;
  options.syncMaskedLoops = !noSyncMaskedLoops;
  options.skipMaskedWarpgroups = skipMaskedWarpgroups;
  options.tmaProducer = !noTmaProducer;
  options.tmaOnly = tmaOnly;
  options.vectorStores = !noVectorStores;
  options.trimZeroColumns = !noTrimZeroColumns;
  options.trimOutputColumns = !noTrimOutputColumns;
  options.spillFallbacks = !noSpillFallbacks;
  options.numStages = numStages;
  tessel::Stage stage = tessel::Stage::PTX;
  if (emit == Emit::LLVM && !ptxasReport)
    stage = tessel::Stage::LLVM;
  if (emit == Emit::Cubin || ptxasReport)
    stage = tessel::Stage::Cubin;
  mlir::FailureOr<tessel::CompiledModule> compiled = tessel::compileModule(*module, options, stage);
  if (mlir::failed(compiled))
    return 1;

  switch (emit) {
  case Emit::Tile:
    module->print(output->os());
    output->os() << "\n";
    break;
  case Emit::LLVM: output->os() << compiled->llvmDialect; break;
  case Emit::PTX: output->os() << compiled->ptx; break;
  case Emit::Cubin: output->os() << compiled->cubin; break;
  }
  output->keep();
  if (ptxasReport)
    printReport(outputFile == "-" ? errs() : outs(), *compiled);
  return 0;
}
