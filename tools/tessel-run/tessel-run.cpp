//===- tessel-run.cpp - run a tile kernel on the CPU interpreter ----------===//
//
// tessel-run FILE.mlir --kernel=NAME --grid=X[,Y[,Z]] --arg=VALUE... (or --spec=FILE, RunSpec.h)
// runs one kernel of a module on host buffers read from .npy files (or made on the spot) and
// writes chosen buffers back. With --validate-pipeline it runs the kernel before and after a pass
// pipeline and compares every buffer: translation validation of the passes on those inputs. A
// run that succeeds ends with a one-line summary; every error is one located message and exit
// code 1.
//
//===----------------------------------------------------------------------===//

#include "RunSpec.h"

#include "tessel/Interpreter/Interpreter.h"
#include "tessel/Interpreter/Npy.h"
#include "tessel/Interpreter/Rounding.h"
#include "tessel/Registration.h"
#include "tessel/Runtime/KernelLauncher.h"
#include "tessel/Support/InputLimits.h"
#include "tessel/Target/Pipeline.h"
#include "tile/IR/TileDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"

#include "llvm/ADT/StringExtras.h"
#include "llvm/Config/llvm-config.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/FormatVariadic.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

#include <chrono>
#include <cmath>

using namespace mlir;
using namespace tessel::interp;

namespace cl = llvm::cl;

// --help lists tessel-run's options, not the hundreds that LLVM's libraries register.
static cl::OptionCategory runCategory("tessel-run options");

static cl::opt<std::string> inputFile(cl::Positional, cl::desc("<input .mlir file>"), cl::init("-"),
                                      cl::cat(runCategory));
static cl::opt<std::string> kernelName("kernel", cl::desc("The kernel (func.func) to run"),
                                       cl::value_desc("name"), cl::cat(runCategory));
static cl::opt<std::string> gridSpec("grid", cl::desc("Launch grid X[,Y[,Z]] (default 1)"),
                                     cl::init("1"), cl::cat(runCategory));
static cl::list<std::string>
    argSpecs("arg",
             cl::desc("One per kernel parameter, in order: file.npy, zeros:N, "
                      "rand:N[:SEED], or a scalar literal"),
             cl::value_desc("spec"), cl::cat(runCategory));
static cl::opt<std::string>
    specFile("spec",
             cl::desc("Read the kernel, grid and arguments from a run spec (the syntax is "
                      "below) instead of --arg"),
             cl::value_desc("file"), cl::cat(runCategory));
static cl::extrahelp specHelp(tessel::run::kRunSpecHelp);
static cl::list<std::string>
    outSpecs("out",
             cl::desc("Write buffer argument INDEX (or a spec's LABEL) to a "
                      ".npy file"),
             cl::value_desc("INDEX:path.npy"), cl::cat(runCategory));
static cl::opt<bool> printArgs("print-args", cl::desc("Print every buffer argument after the run"),
                               cl::cat(runCategory));
static cl::opt<std::string>
    validatePipeline("validate-pipeline",
                     cl::desc("Run the kernel before and after this pass pipeline and compare "
                              "the buffers, e.g. builtin.module(canonicalize)"),
                     cl::value_desc("pipeline"), cl::cat(runCategory));
// Negative: the default of each buffer's element type (toleranceOf).
static cl::opt<double> relTol("rtol",
                              cl::desc("Relative tolerance of --validate-pipeline and "
                                       "--device=both (default per element type: f32 1e-5, "
                                       "f16 2e-3, bf16 1.6e-2, i32 0)"),
                              cl::init(-1), cl::cat(runCategory));
static cl::opt<double> absTol("atol",
                              cl::desc("Absolute tolerance of --validate-pipeline and "
                                       "--device=both (default per element type: f32 1e-6, "
                                       "f16 1e-3, bf16 1e-2, i32 0)"),
                              cl::init(-1), cl::cat(runCategory));
static cl::opt<std::string>
    device("device",
           cl::desc("Where to run: cpu (the interpreter), gpu (compiled, through the CUDA "
                    "driver), or both (and compare the buffers, with --rtol/--atol)"),
           cl::init("cpu"), cl::cat(runCategory));
static cl::opt<std::string>
    pipeline("pipeline",
             cl::desc("Run this pass pipeline on the module before running the kernel, "
                      "e.g. builtin.module(tile-optimize)"),
             cl::cat(runCategory));
static cl::opt<std::string> chip("chip",
                                 cl::desc("GPU target for --device=gpu|both (default: "
                                          "from the device)"),
                                 cl::cat(runCategory));
static cl::opt<std::string>
    codegen("codegen",
            cl::desc("Lowering for --device=gpu|both: reference, mma (the mma.sync fast path), "
                     "wgmma (sm_90a: wgmma.mma_async) or auto (wgmma on sm_90a, else mma, "
                     "where the program fits; else reference; the default)"),
            cl::init("auto"), cl::cat(runCategory));
static cl::opt<bool> wgmmaOverlap("wgmma-overlap",
                                  cl::desc("With wgmma: overlap the softmax with the previous "
                                           "block's P·V inside a warpgroup"),
                                  cl::init(false), cl::cat(runCategory));
static cl::opt<bool> noOccupancyHints(
    "no-occupancy-hints",
    cl::desc("Keep ptxas' first register allocation even where registers, not shared memory, "
             "cap the CTAs per SM"),
    cl::init(false), cl::cat(runCategory));
static cl::opt<unsigned> repeats("repeats",
                                 cl::desc("--device=gpu|both: time this many launches (median)"),
                                 cl::init(0), cl::cat(runCategory));
static cl::opt<uint64_t> maxSteps("max-steps",
                                  cl::desc("Stop after this many interpreter steps (default 2^32; "
                                           "0: no limit)"),
                                  cl::init(tessel::interp::kDefaultMaxSteps), cl::cat(runCategory));

namespace {
int fail(const llvm::Twine &message) {
  llvm::errs() << "tessel-run: error: " << message << "\n";
  return 1;
}

// The .npy dtype of a buffer: bf16 travels as its 16-bit patterns.
llvm::StringRef npyDescr(ElementKind kind) {
  switch (kind) {
  case ElementKind::F8E4M3: return "|u1";
  case ElementKind::F16: return "<f2";
  case ElementKind::BF16: return "<u2";
  case ElementKind::F32: return "<f4";
  case ElementKind::I32: return "<i4";
  }
  return "";
}

// splitmix64: a small, portable generator, so rand:N:SEED gives the same data everywhere.
uint64_t nextRandom(uint64_t &state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ull);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// Parses a positive element count of a zeros:/rand: spec.
bool parseCount(llvm::StringRef s, int64_t &n) {
  return !s.getAsInteger(10, n) && n >= 0 && n <= (int64_t(1) << 31);
}

// Builds the argument for parameter `index` of type `type` from `spec`, or reports why not through
// `report` (which says where the spec came from) and fails.
FailureOr<KernelArg> makeArg(unsigned index, Type type, llvm::StringRef spec,
                             llvm::function_ref<InFlightDiagnostic()> report) {
  auto error = [&]() {
    return report() << "('" << spec << "') for parameter #" << index << " of type " << type << ": ";
  };
  if (auto ptr = dyn_cast<tessel::tile::PtrType>(type)) {
    std::optional<ElementKind> kind = elementKindOf(ptr.getElementType());
    if (!kind)
      return error() << "buffers hold only f16, bf16, f32 or i32";
    if (spec.ends_with(".npy")) {
      llvm::Expected<NpyArray> npy = readNpy(spec);
      if (!npy)
        return error() << llvm::toString(npy.takeError());
      if (npy->descr != npyDescr(*kind))
        return error() << "the file holds '" << npy->descr << "' elements, but a "
                       << elementKindName(*kind) << " buffer needs '" << npyDescr(*kind) << "'";
      Buffer b(*kind, npy->numElements());
      b.bytes() = std::move(npy->data);
      return KernelArg::ofBuffer(std::move(b));
    }
    int64_t n;
    llvm::StringRef rest = spec; // the error messages quote the whole spec
    if (rest.consume_front("zeros:")) {
      if (!parseCount(rest, n))
        return error() << "expected zeros:N with N an element count";
      return KernelArg::ofBuffer(Buffer(*kind, n));
    }
    if (rest.consume_front("rand:")) {
      auto [count, seedStr] = rest.split(':');
      uint64_t seed = index;
      if (!parseCount(count, n) || (!seedStr.empty() && seedStr.getAsInteger(10, seed)))
        return error() << "expected rand:N[:SEED]";
      uint64_t state = seed * 0x2545F4914F6CDD1Dull + 1;
      Buffer b(*kind, n);
      for (int64_t i = 0; i < n; ++i) {
        double u = std::ldexp(static_cast<double>(nextRandom(state) >> 11), -53) * 2.0 - 1.0;
        b.set(i, *kind == ElementKind::I32 ? std::floor(u * 8.0) : u);
      }
      return KernelArg::ofBuffer(std::move(b));
    }
    return error() << "a buffer parameter needs file.npy, zeros:N or rand:N[:SEED]";
  }
  if (isa<IntegerType, IndexType>(type)) {
    int64_t v;
    if (spec.getAsInteger(10, v))
      return error() << "expected an integer literal";
    return KernelArg::ofInt(v);
  }
  if (isa<FloatType>(type)) {
    double v;
    if (spec.getAsDouble(v))
      return error() << "expected a float literal";
    return KernelArg::ofFloat(v);
  }
  return error() << "tessel-run cannot pass this type";
}

// (rtol, atol) for a buffer: --rtol/--atol where given, else the default of its element type.
// A rewrite that reorders float arithmetic (the online softmax, exp2 with the scale folded in)
// changes f16/bf16 results by an ulp or two after the final rounding: 2^-10 and 2^-7 of the value.
std::pair<double, double> toleranceOf(ElementKind kind) {
  double rtol = 1e-5, atol = 1e-6;
  switch (kind) {
  case ElementKind::F16:
    rtol = 2e-3;
    atol = 1e-3;
    break;
  case ElementKind::BF16:
    rtol = 1.6e-2;
    atol = 1e-2;
    break;
  case ElementKind::F8E4M3: // one ulp of e4m3's 3 fraction bits
    rtol = 1.3e-1;
    atol = 2e-3;
    break;
  case ElementKind::I32:
    rtol = 0;
    atol = 0;
    break;
  case ElementKind::F32: break;
  }
  return {relTol >= 0 ? double(relTol) : rtol, absTol >= 0 ? double(absTol) : atol};
}

// Element-wise comparison of the buffers of two runs, in the style of numpy.allclose; NaNs and
// infinities must match exactly.
bool compareRuns(ArrayRef<KernelArg> before, ArrayRef<KernelArg> after) {
  double maxAbs = 0, maxRel = 0;
  int64_t count = 0;
  bool ok = true;
  for (auto [a, b] : llvm::zip(before, after)) {
    if (a.kind != KernelArg::Kind::Buffer)
      continue;
    auto [rtol, atol] = toleranceOf(a.buffer.kind());
    for (int64_t i = 0; i < a.buffer.size(); ++i, ++count) {
      double x = a.buffer.get(i), y = b.buffer.get(i);
      if (std::isnan(x) || std::isnan(y) || std::isinf(x) || std::isinf(y)) {
        if (!(std::isnan(x) && std::isnan(y)) && x != y)
          ok = false;
        continue;
      }
      double abs = std::fabs(x - y), rel = x != 0 ? abs / std::fabs(x) : (abs ? INFINITY : 0);
      maxAbs = std::max(maxAbs, abs);
      maxRel = std::max(maxRel, rel);
      if (abs > atol + rtol * std::fabs(x))
        ok = false;
    }
  }
  llvm::outs() << (device == "both" ? "compare cpu/gpu" : "validate") << ": max abs err "
               << llvm::format("%g", maxAbs) << ", max rel err " << llvm::format("%g", maxRel)
               << " over " << count << " elements: " << (ok ? "OK" : "MISMATCH") << "\n";
  return ok;
}

void printBuffers(ArrayRef<KernelArg> args) {
  for (auto [i, a] : llvm::enumerate(args)) {
    if (a.kind != KernelArg::Kind::Buffer)
      continue;
    llvm::outs() << "arg #" << i << " (" << elementKindName(a.buffer.kind()) << ", "
                 << a.buffer.size() << " elements):";
    for (int64_t k = 0; k < a.buffer.size() && k < 1024; ++k)
      llvm::outs() << " " << llvm::format("%g", a.buffer.get(k));
    if (a.buffer.size() > 1024)
      llvm::outs() << " ...";
    llvm::outs() << "\n";
  }
}

// The last words of a run that succeeded: what ran where, on what, and what was checked and
// written.
void printSummary(llvm::StringRef kernel, std::array<int64_t, 3> grid, ArrayRef<KernelArg> args,
                  llvm::StringRef where, ArrayRef<std::pair<unsigned, std::string>> outs) {
  int64_t buffers = 0, elements = 0;
  for (const KernelArg &a : args)
    if (a.kind == KernelArg::Kind::Buffer)
      ++buffers, elements += a.buffer.size();
  llvm::outs() << "summary: ran @" << kernel << " on " << where << ", grid " << grid[0] << "x"
               << grid[1] << "x" << grid[2] << ": " << args.size() << " arguments, " << buffers
               << " buffers of " << elements << " elements";
  if (device == "both")
    llvm::outs() << "; the cpu and gpu buffers match";
  if (!validatePipeline.empty())
    llvm::outs() << "; the buffers match after " << validatePipeline;
  llvm::outs() << "\n";
  if (outs.empty())
    return;
  llvm::outs() << "summary: wrote";
  for (auto [i, out] : llvm::enumerate(outs))
    llvm::outs() << (i ? ", " : " ") << "arg #" << out.first << " to " << out.second;
  llvm::outs() << "\n";
}

func::FuncOp findKernel(ModuleOp module) {
  SmallVector<func::FuncOp> candidates;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (!kernelName.empty() && fn.getSymName() == kernelName)
      return fn;
    if (!fn.isExternal())
      candidates.push_back(fn);
  }
  if (kernelName.empty() && candidates.size() == 1)
    return candidates.front();
  std::string names;
  for (func::FuncOp fn : candidates)
    names += (names.empty() ? "@" : ", @") + fn.getSymName().str();
  if (kernelName.empty())
    emitError(module.getLoc()) << "name the kernel to run with --kernel=NAME; the module has "
                               << (names.empty() ? "no functions" : names);
  else
    emitError(module.getLoc()) << "no kernel @" << kernelName << " in the module; it has "
                               << (names.empty() ? "no functions" : names);
  return nullptr;
}
} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  tessel::registerPasses();
  cl::HideUnrelatedOptions(runCategory);
  cl::SetVersionPrinter([](llvm::raw_ostream &os) {
    os << "tessel-run (tessel " TESSEL_VERSION ") on LLVM/MLIR " LLVM_VERSION_STRING "\n";
  });
  cl::ParseCommandLineOptions(
      argc, argv,
      "tessel-run: run a tile kernel on the CPU interpreter or the GPU; a run that "
      "succeeds ends with a 'summary:' line\n");

  DialectRegistry registry;
  tessel::registerDialects(registry);
  MLIRContext ctx(registry);
  ctx.loadAllAvailableDialects();
  // One message per error: the op's location and source line say enough.
  ctx.printOpOnDiagnostic(false);
  llvm::SourceMgr sourceMgr;
  SourceMgrDiagnosticHandler diagnostics(sourceMgr, &ctx);

  std::string error;
  auto file = llvm::MemoryBuffer::getFileOrSTDIN(inputFile);
  if (!file)
    return fail("cannot read '" + inputFile + "': " + file.getError().message());
  sourceMgr.AddNewSourceBuffer(std::move(*file), llvm::SMLoc());
  if (!tessel::checkNestingDepth(sourceMgr))
    return 1;
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sourceMgr, ParserConfig(&ctx));
  if (!module)
    return 1;

  // A run spec: its kernel and grid where the command line does not name them, its arguments.
  std::optional<tessel::run::RunSpec> spec;
  if (!specFile.empty()) {
    if (!argSpecs.empty())
      return fail("give the arguments with --spec or with --arg, not both");
    auto text = llvm::MemoryBuffer::getFile(specFile, /*IsText=*/true);
    if (!text)
      return fail("cannot read '" + specFile + "': " + text.getError().message());
    unsigned id = sourceMgr.AddNewSourceBuffer(std::move(*text), llvm::SMLoc());
    spec = tessel::run::parseRunSpec(sourceMgr, id);
    if (!spec)
      return 1;
    if (kernelName.getNumOccurrences() == 0 && !spec->kernel.empty())
      kernelName = spec->kernel;
  }
  // An MLIR location in the spec file, for the diagnostics about its lines.
  auto specLoc = [&](llvm::SMLoc loc) -> Location {
    auto [line, col] = sourceMgr.getLineAndColumn(loc);
    return FileLineColLoc::get(&ctx, specFile, line, col);
  };

  std::array<int64_t, 3> grid{1, 1, 1};
  if (spec && spec->grid && gridSpec.getNumOccurrences() == 0)
    gridSpec =
        llvm::formatv("{0},{1},{2}", (*spec->grid)[0], (*spec->grid)[1], (*spec->grid)[2]).str();
  SmallVector<llvm::StringRef> gridParts;
  llvm::StringRef(gridSpec).split(gridParts, ',');
  if (gridParts.size() > 3)
    return fail("--grid takes at most three sizes X[,Y[,Z]], got '" + gridSpec + "'");
  for (auto [i, part] : llvm::enumerate(gridParts))
    if (part.trim().getAsInteger(10, grid[i]) || grid[i] < 1 || grid[i] > (1 << 20))
      return fail("--grid: '" + part + "' is not a grid size in [1, 2^20]");

  // Runs `text` (anchored on builtin.module) on the module; false after reporting why not.
  auto runPipeline = [&](llvm::StringRef option, const std::string &text) -> bool {
    std::string message;
    llvm::raw_string_ostream os(message);
    FailureOr<OpPassManager> parsed = parsePassPipeline(text, os);
    if (failed(parsed))
      return fail("invalid --" + option + " '" + text + "': " + message), false;
    llvm::StringRef anchor = parsed->getOpAnchorName();
    if (anchor != ModuleOp::getOperationName() && anchor != OpPassManager::getAnyOpAnchorName())
      return fail("--" + option + " must be anchored on builtin.module, not " + anchor), false;
    PassManager pm(&ctx, anchor);
    static_cast<OpPassManager &>(pm) = std::move(*parsed);
    return succeeded(pm.run(*module));
  };
  if (!pipeline.empty() && !runPipeline("pipeline", pipeline))
    return 1;

  func::FuncOp kernel = findKernel(*module);
  if (!kernel)
    return 1;
  ArrayRef<Type> params = kernel.getArgumentTypes();
  if (spec && params.size() != spec->args.size()) {
    emitError(specLoc(spec->endLoc))
        << "the spec gives " << spec->args.size() << " arguments, but kernel @"
        << kernel.getSymName() << " takes " << params.size();
    return 1;
  }
  if (!spec && params.size() != argSpecs.size()) {
    kernel.emitError() << "kernel @" << kernel.getSymName() << " takes " << params.size()
                       << " arguments, but " << argSpecs.size() << " --arg were given";
    return 1;
  }
  SmallVector<KernelArg> inputs;
  for (auto [i, type] : llvm::enumerate(params)) {
    FailureOr<KernelArg> arg = spec ? makeArg(i, type, spec->args[i].value,
                                              [&, i = i] {
                                                const tessel::run::SpecArg &a = spec->args[i];
                                                return emitError(specLoc(a.loc))
                                                       << "arg " << a.label << " ";
                                              })
                                    : makeArg(i, type, argSpecs[i], [&, i = i] {
                                        return kernel.emitError() << "--arg #" << i << " ";
                                      });
    if (failed(arg))
      return 1;
    inputs.push_back(std::move(*arg));
  }
  SmallVector<std::pair<unsigned, std::string>> outs;
  for (llvm::StringRef out : outSpecs) {
    auto [indexStr, path] = out.split(':');
    unsigned index = 0;
    // With a spec, an argument may also be named by its label.
    bool named = false;
    if (spec && indexStr.getAsInteger(10, index))
      for (auto [i, a] : llvm::enumerate(spec->args))
        if (a.label == indexStr && !named)
          index = i, named = true;
    if ((!named && indexStr.getAsInteger(10, index)) || path.empty())
      return fail("--out expects INDEX:path.npy" + llvm::Twine(spec ? " or LABEL:path.npy" : "") +
                  ", got '" + out + "'");
    if (index >= inputs.size() || inputs[index].kind != KernelArg::Kind::Buffer)
      return fail("--out=" + out + ": argument #" + llvm::Twine(index) + " is not a buffer");
    outs.push_back({index, path.str()});
  }

  if (device != "cpu" && device != "gpu" && device != "both")
    return fail("--device must be cpu, gpu or both, not '" + device + "'");
  if (!tessel::isSupportedCodegen(codegen))
    return fail("--codegen must be auto, reference, mma or wgmma, not '" + codegen + "'");
  if (device != "cpu" && !validatePipeline.empty())
    return fail("--validate-pipeline runs on the interpreter: use it with --device=cpu");

  RunOptions options;
  options.maxSteps = maxSteps;
  SmallVector<KernelArg> args = inputs;
  bool ok = true;
  std::string kernelSym = kernel.getSymName().str();
  auto started = std::chrono::steady_clock::now();
  if (device != "gpu" && failed(runKernel(kernel, args, grid, options)))
    return 1;
  double cpuSeconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  std::string gpuSummary;
  if (device != "cpu") {
    tessel::runtime::GpuRunOptions gpuOptions;
    gpuOptions.chip = chip;
    gpuOptions.codegen = codegen;
    gpuOptions.wgmmaOverlap = wgmmaOverlap;
    gpuOptions.occupancyHints = !noOccupancyHints;
    gpuOptions.repeats = repeats;
    gpuOptions.warmup = repeats ? 3 : 0;
    for (auto &[index, path] : outs)
      gpuOptions.outputs.push_back(index);
    SmallVector<KernelArg> gpuArgs = inputs;
    FailureOr<tessel::runtime::GpuRunResult> run = tessel::runtime::runOnGpu(
        *module, kernelSym, gpuArgs, grid, gpuOptions);
    if (failed(run))
      return 1;
    llvm::outs() << "gpu: " << run->device << ", " << run->chip << ", " << run->blockSize
                 << " threads, " << run->dynamicSharedBytes << " B dynamic shared memory, "
                 << run->registers << " registers, " << run->spillBytes << " B spilled";
    if (repeats)
      llvm::outs() << ", median " << llvm::format("%.4f", run->medianMs) << " ms over " << repeats
                   << " launches";
    llvm::outs() << "\n";
    gpuSummary = "gpu (" + run->device + ", " + run->chip;
    if (repeats)
      gpuSummary += llvm::formatv("; median {0:f4} ms over {1} launches", run->medianMs, repeats);
    gpuSummary += ")";
    if (device == "both")
      ok = compareRuns(args, gpuArgs);
    args = std::move(gpuArgs);
  }

  if (!validatePipeline.empty()) {
    if (!runPipeline("validate-pipeline", validatePipeline))
      return 1;
    auto after = module->lookupSymbol<func::FuncOp>(kernelSym);
    if (!after) {
      emitError(module->getLoc()) << "the pipeline removed kernel @" << kernelSym;
      return 1;
    }
    SmallVector<KernelArg> afterArgs = inputs;
    if (failed(runKernel(after, afterArgs, grid, options)))
      return 1;
    ok = compareRuns(args, afterArgs);
    args = std::move(afterArgs);
  }

  if (printArgs)
    printBuffers(args);
  for (auto &[index, path] : outs) {
    const Buffer &b = args[index].buffer;
    if (llvm::Error err = writeNpy(path, npyDescr(b.kind()), {b.size()}, b.bytes()))
      return fail(llvm::toString(std::move(err)));
  }
  if (ok)
    printSummary(kernelSym, grid, args,
                 device == "gpu" ? gpuSummary
                 : device == "both"
                     ? llvm::formatv("cpu in {0:f3} s and {1}", cpuSeconds, gpuSummary).str()
                     : llvm::formatv("cpu in {0:f3} s", cpuSeconds).str(),
                 outs);
  return ok ? 0 : 1;
}
