//===- CompilesAhead.h - a module's variants compiled on threads beside the caller ----------===//
//
// Internal to lib/Target. compileModule's spill fallbacks compile a module again and again,
// each compile decided by the one before (SpillFallbacks.cpp). The compiles the next decisions
// may ask for start early here, each on a thread and in an MLIRContext of its own, from a
// bytecode copy of the module made up front: the caller's context may be single-threaded, as
// the JIT's is. The search takes a compile from here only where it ran to the end without a
// diagnostic; otherwise it compiles in its own context as before. So what it chooses, the code
// and the diagnostics do not depend on what ran ahead, only how long it takes.
//
//===------------------------------------------------------------------------------------------===//

#ifndef TESSEL_LIB_TARGET_COMPILESAHEAD_H
#define TESSEL_LIB_TARGET_COMPILESAHEAD_H

#include "tessel/Target/Compile.h"

#include "mlir/IR/DialectRegistry.h"

#include <memory>
#include <vector>

namespace tessel {

class CompilesAhead {
public:
  /// One compile started ahead (CompilesAhead.cpp).
  struct Task;

  /// `generic`, where not null, is the module with its moderate arguments made plain: the
  /// variants that ask for it compile it instead.
  CompilesAhead(mlir::ModuleOp module, mlir::ModuleOp generic, Stage stage,
                const CompileFlags &flags, unsigned threads);
  /// Stops what still runs and waits for it.
  ~CompilesAhead();

  /// Starts compiling the variant unless it was started (and not stopped since without a
  /// result), or all threads are busy and not `force`.
  void start(const TargetOptions &options, bool generic, bool force);
  /// The compile of the variant if it was started, not stopped, and ended cleanly (waits for
  /// it to end).
  std::optional<CompiledModule> take(const TargetOptions &options, bool generic);
  /// Stops, at their next step, the started compiles of variants other than `wanted`.
  void keepOnly(llvm::ArrayRef<std::pair<TargetOptions, bool>> wanted);

  unsigned numStarted() const { return tasks.size(); }
  unsigned numTaken() const { return taken; }

private:
  static std::string key(const TargetOptions &options, bool generic);
  unsigned running() const;

  std::string bytecode, genericBytecode;
  mlir::DialectRegistry registry;
  Stage stage;
  CompileFlags flags;
  unsigned threads;
  unsigned taken = 0;
  std::vector<std::unique_ptr<Task>> tasks;
};

} // namespace tessel

#endif // TESSEL_LIB_TARGET_COMPILESAHEAD_H
