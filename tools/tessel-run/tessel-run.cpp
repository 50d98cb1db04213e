//===- tessel-run.cpp - run a tile kernel on the CPU interpreter ----------===//
//
// tessel-run FILE.mlir --kernel=NAME --grid=X[,Y[,Z]] --arg=SPEC... runs one kernel of a module on
// host buffers read from .npy files (or made on the spot) and writes chosen buffers back. With
// --validate-pipeline it runs the kernel before and after a pass pipeline and compares every
// buffer: translation validation of the passes on those inputs. Every error is one located
// message and exit code 1.
//
//===----------------------------------------------------------------------===//

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
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/raw_ostream.h"

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
static cl::list<std::string> outSpecs("out", cl::desc("Write buffer argument INDEX to a .npy file"),
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

// Builds the argument for parameter `index` of type `type` from `spec`, or emits an error at the
// kernel and fails.
FailureOr<KernelArg> makeArg(func::FuncOp kernel, unsigned index, Type type, llvm::StringRef spec) {
  auto error = [&]() {
    return kernel.emitError() << "--arg #" << index << " ('" << spec << "') for parameter #"
                              << index << " of type " << type << ": ";
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
    if (spec.consume_front("zeros:")) {
      if (!parseCount(spec, n))
        return error() << "expected zeros:N with N an element count";
      return KernelArg::ofBuffer(Buffer(*kind, n));
    }
    if (spec.consume_front("rand:")) {
      auto [count, seedStr] = spec.split(':');
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
  cl::ParseCommandLineOptions(argc, argv,
                              "tessel-run: run a tile kernel on the CPU interpreter or the GPU\n");

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

  std::array<int64_t, 3> grid{1, 1, 1};
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
  if (params.size() != argSpecs.size()) {
    kernel.emitError() << "kernel @" << kernel.getSymName() << " takes " << params.size()
                       << " arguments, but " << argSpecs.size() << " --arg were given";
    return 1;
  }
  SmallVector<KernelArg> inputs;
  for (auto [i, type] : llvm::enumerate(params)) {
    FailureOr<KernelArg> arg = makeArg(kernel, i, type, argSpecs[i]);
    if (failed(arg))
      return 1;
    inputs.push_back(std::move(*arg));
  }
  SmallVector<std::pair<unsigned, std::string>> outs;
  for (llvm::StringRef spec : outSpecs) {
    auto [indexStr, path] = spec.split(':');
    unsigned index;
    if (indexStr.getAsInteger(10, index) || path.empty())
      return fail("--out expects INDEX:path.npy, got '" + spec + "'");
    if (index >= inputs.size() || inputs[index].kind != KernelArg::Kind::Buffer)
      return fail("--out=" + spec + ": argument #" + llvm::Twine(index) + " is not a buffer");
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
  if (device != "gpu" && failed(runKernel(kernel, args, grid, options)))
    return 1;
  if (device != "cpu") {
    tessel::runtime::GpuRunOptions gpuOptions;
    gpuOptions.chip = chip;
    gpuOptions.codegen = codegen;
    gpuOptions.wgmmaOverlap = wgmmaOverlap;
    gpuOptions.repeats = repeats;
    gpuOptions.warmup = repeats ? 3 : 0;
    for (auto &[index, path] : outs)
      gpuOptions.outputs.push_back(index);
    SmallVector<KernelArg> gpuArgs = inputs;
    std::string kernelSym = kernel.getSymName().str();
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
    if (device == "both")
      ok = compareRuns(args, gpuArgs);
    args = std::move(gpuArgs);
  }

  if (!validatePipeline.empty()) {
    std::string kernelSym = kernel.getSymName().str();
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
  return ok ? 0 : 1;
}
