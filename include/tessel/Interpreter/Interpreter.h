//===- Interpreter.h - the CPU interpreter of tile programs -----*- C++ -*-===//
//
// The interpreter is the oracle of the tile dialect's semantics: it runs a kernel (a func.func of
// tile, arith, math, scf and func ops) on host buffers, once per grid point, serially. Tests use
// it to check kernels without a GPU and to check that passes keep the meaning of a program
// (translation validation, see tessel-run --validate-pipeline).
//
// Rounding model. Floats are held as doubles, but every op rounds its result to the result's
// element type exactly as the hardware stores it: f32 by the C++ float conversion, f16 and bf16
// by round to nearest even with overflow to infinity and subnormals (Rounding.h). Integers are
// held as int64 and wrap to their bit width. Two ops round once where the GPU rounds many times:
// `tile.dot` forms products and sums in double and rounds `acc + a·b` to f32 once at the end (the
// tensor cores sum in f32, in an order of their own), and `tile.reduce sum` likewise sums in
// double. Math functions are computed in double and rounded (the GPU uses approximations).
//
// Streamed softmax. A `tile.softmax ... streamed` sits directly in an scf.for body and
// normalises over the whole row, the concatenation of its input over all iterations. Its naive
// meaning is the three-pass safe softmax, and that is what runs: when the interpreter reaches an
// scf.for whose body directly holds streamed softmax ops, it first evaluates, for every value of
// the induction variable, only the backward slice of each softmax input inside the body (the body
// ops the input transitively depends on, nested regions included) to get the row max M; then a
// second sweep gives the row sum L = Σ exp(s − M); then the loop runs normally and each softmax
// yields exp(s − M) / L (0 where s = −inf or L = 0) and lse = M + log(L) (−inf for an all-masked
// row). The slice may load but not store or call; loads in the sweeps see memory as it is when
// the loop starts. Softmax ops are prepared in program order, so one may consume another.
//
// Errors (out-of-buffer accesses, unsupported ops or types, division by zero, step limit) are
// emitted as MLIR diagnostics at the offending op, naming it; the interpreter never reads or
// writes outside a buffer and never asserts on bad input.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_INTERPRETER_INTERPRETER_H
#define TESSEL_INTERPRETER_INTERPRETER_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Support/LLVM.h"

#include "llvm/ADT/StringRef.h"

#include <array>
#include <cstdint>
#include <optional>
#include <vector>

namespace tessel::interp {

/// Element types of kernel buffers.
enum class ElementKind { F8E4M3, F16, BF16, F32, I32 };

/// The name of the element type ("f8e4m3fn", "f16", "bf16", "f32", "i32").
llvm::StringRef elementKindName(ElementKind kind);
/// The element kind of an MLIR type, if buffers can hold it.
std::optional<ElementKind> elementKindOf(mlir::Type type);
/// Bytes per element: 1 for e4m3fn, 2 for f16 and bf16, 4 for f32 and i32.
unsigned elementSize(ElementKind kind);

/// A host buffer laid out exactly as on the GPU: e4m3fn, f16 and bf16 as their bit patterns, f32
/// as IEEE binary32, i32 as two's complement, all little-endian.
class Buffer {
public:
  Buffer() = default;
  /// A buffer of `count` zero elements.
  Buffer(ElementKind kind, int64_t count);

  ElementKind kind() const { return elemKind; }
  int64_t size() const { return count; }
  std::vector<uint8_t> &bytes() { return data; }
  const std::vector<uint8_t> &bytes() const { return data; }

  /// Element `i` as a double (exact for every element kind). `i` must be in [0, size()).
  double get(int64_t i) const;
  /// Stores `v` at `i`, rounded to the element kind (ints: truncated toward zero and wrapped).
  void set(int64_t i, double v);

private:
  ElementKind elemKind = ElementKind::F32;
  int64_t count = 0;
  std::vector<uint8_t> data;
};

/// One kernel argument: a buffer for a `!tile.ptr<T>` parameter, an integer or float scalar for an
/// integer or float parameter.
struct KernelArg {
  enum class Kind { Buffer, Int, Float };
  Kind kind = Kind::Int;
  Buffer buffer;
  int64_t intValue = 0;
  double floatValue = 0.0;

  static KernelArg ofBuffer(Buffer b);
  static KernelArg ofInt(int64_t v);
  static KernelArg ofFloat(double v);
};

/// The default step budget of a run: 2^32 steps (an op, or a tile element it computes), a few
/// minutes of interpretation; a kernel that needs more says so instead of running for hours.
inline constexpr uint64_t kDefaultMaxSteps = uint64_t(1) << 32;

/// How the step-limit errors tell the user to raise the budget.
inline constexpr const char *kStepLimitHint =
    "(tessel-run --max-steps=N, TESSEL_MAX_STEPS=N from Python; 0 = no limit)";

/// Limits that keep the interpreter from running away on hostile input.
struct RunOptions {
  /// Abort with an error after this many steps (an op, or a tile element it computes); 0 = no
  /// limit.
  uint64_t maxSteps = kDefaultMaxSteps;
  /// The largest tile, in elements, any op may produce.
  int64_t maxTileElements = int64_t(1) << 24;
  /// The deepest chain of func.call.
  unsigned maxCallDepth = 64;
};

/// Runs `kernel` once for every point of `grid` (x fastest), serially, on `args` (one per kernel
/// parameter, buffers are updated in place). Emits a diagnostic and fails on the first error.
mlir::LogicalResult runKernel(mlir::func::FuncOp kernel, mlir::MutableArrayRef<KernelArg> args,
                              std::array<int64_t, 3> grid, const RunOptions &options = {});

} // namespace tessel::interp

#endif // TESSEL_INTERPRETER_INTERPRETER_H
