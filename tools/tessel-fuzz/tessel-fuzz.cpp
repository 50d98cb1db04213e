//===- tessel-fuzz.cpp - libFuzzer entry over parse, verify, interpret ----===//
//
// Each input is the text of a module. It is parsed and verified; every function with a body is
// then run by the interpreter with small buffers (256 elements) for its pointer parameters,
// small scalars for the rest, a 2x1x1 grid and a step limit, so no input can hang or allocate
// without bound. Any crash, assertion, sanitizer report or timeout is a bug; error diagnostics
// are the expected outcome for most inputs and are swallowed.
//
//===----------------------------------------------------------------------===//

#include "tessel/Interpreter/Interpreter.h"
#include "tessel/Registration.h"
#include "tessel/Support/InputLimits.h"
#include "tile/IR/TileDialect.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

using namespace mlir;
using namespace tessel::interp;

namespace {
MLIRContext &context() {
  static MLIRContext *ctx = [] {
    DialectRegistry registry;
    tessel::registerDialects(registry);
    auto *c = new MLIRContext(registry, MLIRContext::Threading::DISABLED);
    c->loadAllAvailableDialects();
    c->printOpOnDiagnostic(false);
    return c;
  }();
  return *ctx;
}

/// TESSEL_FUZZ_NO_STEP_CAP=1 selects the second configuration (docs/dev/fuzzing.md): the
/// interpreter keeps its default step budget (kDefaultMaxSteps) instead of 200000, so long loops
/// run as a user's would and the fuzzer can reach what only they reach.
bool noStepCap() {
  static const bool value = [] {
    const char *env = std::getenv("TESSEL_FUZZ_NO_STEP_CAP");
    return env && *env && std::string(env) != "0";
  }();
  return value;
}

void runAll(ModuleOp module) {
  RunOptions options;
  options.maxSteps = noStepCap() ? kDefaultMaxSteps : 200000;
  options.maxTileElements = 1 << 16;
  options.maxCallDepth = 16;
  for (auto fn : module.getOps<func::FuncOp>()) {
    if (fn.isExternal())
      continue;
    SmallVector<KernelArg> args;
    for (Type t : fn.getArgumentTypes()) {
      if (auto ptr = dyn_cast<tessel::tile::PtrType>(t)) {
        ElementKind kind = elementKindOf(ptr.getElementType()).value_or(ElementKind::F32);
        Buffer b(kind, 256);
        for (int64_t i = 0; i < 256; ++i)
          b.set(i, (i % 17) - 8);
        args.push_back(KernelArg::ofBuffer(std::move(b)));
      } else if (isa<FloatType>(t)) {
        args.push_back(KernelArg::ofFloat(0.5));
      } else {
        args.push_back(KernelArg::ofInt(7));
      }
    }
    (void)runKernel(fn, args, {2, 1, 1}, options);
  }
}
} // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  MLIRContext &ctx = context();
  ScopedDiagnosticHandler quiet(&ctx, [](Diagnostic &) { return success(); });
  // The MLIR lexer relies on a NUL after the buffer; libFuzzer's data has none, std::string has.
  std::string text(reinterpret_cast<const char *>(data), size);
  // As the tools do: nesting MLIR's recursive parser cannot take is refused before parsing.
  if (tessel::findDeepNesting(text) != llvm::StringRef::npos)
    return 0;
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(text, &ctx);
  if (module)
    runAll(*module);
  return 0;
}
