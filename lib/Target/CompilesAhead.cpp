//===- CompilesAhead.cpp - a module's variants compiled on threads beside the caller --------===//

#include "CompilesAhead.h"
#include "CompileSteps.h"

#include "mlir/Bytecode/BytecodeWriter.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <system_error>
#include <thread>

using namespace mlir;

unsigned tessel::compileThreads() {
  if (const char *v = std::getenv("TESSEL_COMPILE_THREADS")) {
    unsigned n = 0;
    if (!llvm::StringRef(v).trim().getAsInteger(10, n))
      return std::max(n, 1u);
  }
  unsigned hardware = llvm::hardware_concurrency().compute_thread_count();
  return std::clamp(hardware, 1u, 8u);
}

namespace tessel {

struct CompilesAhead::Task {
  std::string key;
  TargetOptions options;
  bool generic = false;
  std::atomic<bool> cancelled{false};
  std::atomic<bool> done{false};
  std::optional<CompiledModule> result;
  std::thread thread;
};

/// Compiles `task`'s variant of the module in `bytecode` in a context of its own; keeps the
/// result where the compile succeeded, said nothing and was not cancelled.
static void compileInOwnContext(llvm::StringRef bytecode, const DialectRegistry &registry,
                                Stage stage, CompileFlags flags, CompilesAhead::Task &task) {
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  bool quiet = true;
  // A diagnostic here is not shown: the search compiles the variant again in the caller's
  // context, where it is reported as it always was.
  ScopedDiagnosticHandler handler(&context, [&](Diagnostic &) {
    quiet = false;
    return success();
  });
  OwningOpRef<ModuleOp> module = parseSourceString<ModuleOp>(bytecode, ParserConfig(&context));
  if (module) {
    flags.cancelled = &task.cancelled;
    FailureOr<CompiledModule> compiled = compileOnce(*module, task.options, stage, flags);
    if (succeeded(compiled) && quiet && !task.cancelled)
      task.result = std::move(*compiled);
  }
  task.done = true;
}

static std::string toBytecode(ModuleOp module) {
  std::string bytes;
  if (module) {
    llvm::raw_string_ostream os(bytes);
    if (failed(writeBytecodeToFile(module, os)))
      bytes.clear();
  }
  return bytes;
}

CompilesAhead::CompilesAhead(ModuleOp module, ModuleOp generic, Stage stage,
                             const CompileFlags &flags, unsigned threads)
    : bytecode(toBytecode(module)), genericBytecode(toBytecode(generic)), stage(stage),
      flags(flags), threads(threads) {
  module.getContext()->getDialectRegistry().appendTo(registry);
}

CompilesAhead::~CompilesAhead() {
  for (std::unique_ptr<Task> &task : tasks)
    task->cancelled = true;
  for (std::unique_ptr<Task> &task : tasks)
    if (task->thread.joinable())
      task->thread.join();
}

std::string CompilesAhead::key(const TargetOptions &options, bool generic) {
  return codeOptionsKey(options) + (generic ? ";generic-args" : "");
}

unsigned CompilesAhead::running() const {
  return std::count_if(tasks.begin(), tasks.end(),
                       [](const std::unique_ptr<Task> &t) { return !t->done; });
}

/// Whether `task` may still give its compile: not stopped, or stopped only after it ended
/// with a result (`done` is set after `result`, so reading it then is safe).
static bool usable(const CompilesAhead::Task &task) {
  return !task.cancelled || (task.done && task.result);
}

void CompilesAhead::start(const TargetOptions &options, bool generic, bool force) {
  std::string k = key(options, generic);
  llvm::StringRef bytes = generic ? genericBytecode : bytecode;
  if (bytes.empty() || (!force && running() >= threads))
    return;
  // A variant stopped for one decision and wanted again by a later one starts anew (the
  // stopped task is joined at the end).
  for (const std::unique_ptr<Task> &task : tasks)
    if (task->key == k && usable(*task))
      return;
  auto task = std::make_unique<Task>();
  task->key = std::move(k);
  task->options = options;
  task->generic = generic;
  Task &t = *task;
  try {
    t.thread = std::thread(compileInOwnContext, bytes, std::cref(registry), stage, flags,
                           std::ref(t));
  } catch (const std::system_error &) {
    return; // no thread to be had: the search compiles it itself
  }
  tasks.push_back(std::move(task));
}

std::optional<CompiledModule> CompilesAhead::take(const TargetOptions &options, bool generic) {
  std::string k = key(options, generic);
  for (std::unique_ptr<Task> &task : llvm::reverse(tasks)) {
    if (task->key != k || !usable(*task))
      continue;
    if (task->thread.joinable())
      task->thread.join();
    if (!task->result)
      return std::nullopt;
    ++taken;
    return std::exchange(task->result, std::nullopt);
  }
  return std::nullopt;
}

void CompilesAhead::keepOnly(llvm::ArrayRef<std::pair<TargetOptions, bool>> wanted) {
  llvm::SmallVector<std::string> keys;
  for (const auto &[options, generic] : wanted)
    keys.push_back(key(options, generic));
  for (std::unique_ptr<Task> &task : tasks)
    if (!llvm::is_contained(keys, task->key))
      task->cancelled = true;
}

} // namespace tessel
