//===- RunSpec.h - tessel-run's argument spec files -------------*- C++ -*-===//
//
// A run spec says in a few lines what tessel-run passes to a kernel, with the sizes written once
// as named integers instead of hand-multiplied into every --arg:
//
//   kernel attention
//   let N = 100
//   grid cdiv(N, 64), 2
//   arg q rand:2*N*64:1
//   arg scale 0.125
//
// parseRunSpec reads one; every error is reported at its file, line and column.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TOOLS_TESSEL_RUN_RUNSPEC_H
#define TESSEL_TOOLS_TESSEL_RUN_RUNSPEC_H

#include "llvm/ADT/SmallVector.h"
#include "llvm/Support/SMLoc.h"
#include "llvm/Support/SourceMgr.h"

#include <array>
#include <cstdint>
#include <optional>
#include <string>

namespace tessel::run {

/// One `arg LABEL VALUE` line, its sizes evaluated: `value` is what --arg would take (file.npy
/// with its path resolved against the spec's folder, zeros:N, rand:N:SEED or a scalar literal).
struct SpecArg {
  std::string label;
  std::string value;
  llvm::SMLoc loc;
};

/// What a spec file says. `kernel` is empty and `grid` unset where the file does not say.
struct RunSpec {
  std::string kernel;
  std::optional<std::array<int64_t, 3>> grid;
  llvm::SmallVector<SpecArg> args;
  /// Where to report a problem with the file as a whole (its last `arg` line, else its start).
  llvm::SMLoc endLoc;
};

/// The syntax, for --help and the docs.
extern const char *const kRunSpecHelp;

/// Parses the spec in buffer `bufferId` of `sourceMgr` (its name is the file's path). Reports
/// the first error as `file:line:col: error: ...` through `sourceMgr` and returns std::nullopt.
std::optional<RunSpec> parseRunSpec(llvm::SourceMgr &sourceMgr, unsigned bufferId);

} // namespace tessel::run

#endif // TESSEL_TOOLS_TESSEL_RUN_RUNSPEC_H
