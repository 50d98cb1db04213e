//===- KernelBuilder.h - the IR builder behind the Python DSL ---*- C++ -*-===//
//
// KernelBuilder owns an MLIRContext and a module and builds tile programs one op at a time: the
// Python front end walks a kernel's AST and calls one method per op family (constants, arith and
// math element-wise ops, compares, selects, casts, tile ops, scf.for and scf.if). It never parses
// IR text. Misuse (operands of the wrong kind) throws std::invalid_argument, which pybind11 turns
// into a Python ValueError that the front end reports at the user's source line; everything the
// MLIR verifier or a pass says comes back as a list of located Diagnostics, never on stderr.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PYTHON_KERNELBUILDER_H
#define TESSEL_PYTHON_KERNELBUILDER_H

#include "tessel/Target/Compile.h"

#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/OwningOpRef.h"
#include "mlir/IR/Value.h"

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

namespace mlir::func {
class FuncOp;
} // namespace mlir::func

namespace tessel::python {

/// One message of the MLIR verifier or of a pass, at the user's source position when the op
/// that caused it carries one (line 0 when it does not).
struct Diagnostic {
  std::string severity;
  std::string message;
  std::string file;
  unsigned line = 0;
  unsigned column = 0;
};

/// The module compiled for a GPU (PTX, cubin, launch needs), or the diagnostics of the failure.
struct GpuCompileResult {
  bool ok = false;
  tessel::CompiledModule compiled;
  std::vector<Diagnostic> diagnostics;
};

/// A kernel parameter: `kind` is "ptr" (a `!tile.ptr<dtype>`) or "scalar".
struct Param {
  std::string kind;
  std::string dtype;
};

class KernelBuilder {
public:
  KernelBuilder();
  ~KernelBuilder();
  KernelBuilder(const KernelBuilder &) = delete;
  KernelBuilder &operator=(const KernelBuilder &) = delete;

  mlir::MLIRContext &context() { return *ctx; }
  mlir::ModuleOp module() { return *moduleOp; }
  /// The function named `name`, or a null op.
  mlir::func::FuncOp lookupFunction(const std::string &name);

  /// Every op built from now on carries this source position.
  void setLocation(const std::string &file, unsigned line, unsigned column);

  // Functions.
  std::vector<mlir::Value> beginFunction(const std::string &name, const std::vector<Param> &params);
  void endFunction();
  /// Appends a parameter to the function being built (a tensor a kernel captures, found while
  /// tracing its body) and returns it.
  mlir::Value addParam(const Param &param);
  /// Marks f32 parameter `index` tile.moderate (the JIT's range specialisation).
  void markModerate(unsigned index);

  // Scalars and element-wise ops. `shape` empty means a scalar, otherwise a splat tile.
  mlir::Value constInt(int64_t value, const std::string &dtype, const std::vector<int64_t> &shape);
  mlir::Value constFloat(double value, const std::string &dtype, const std::vector<int64_t> &shape);
  /// add sub mul div mod max min and or xor pow; float or integer variant by element type.
  mlir::Value binary(const std::string &op, mlir::Value lhs, mlir::Value rhs);
  /// lt le gt ge eq ne; signed compares for integers, ordered ones for floats.
  mlir::Value compare(const std::string &predicate, mlir::Value lhs, mlir::Value rhs);
  mlir::Value select(mlir::Value cond, mlir::Value ifTrue, mlir::Value ifFalse);
  /// exp exp2 log log2 sqrt tanh abs neg not.
  mlir::Value unary(const std::string &fn, mlir::Value value);
  /// Converts to another element type (extf, truncf, sitofp, fptosi, extui, compare with 0).
  mlir::Value convert(mlir::Value value, const std::string &dtype);

  // Tile ops.
  mlir::Value programId(int axis);
  mlir::Value numPrograms(int axis);
  /// A descriptor; with `pages` (a rank-1 i32 descriptor), `numPages` and `pageSize` > 0 a
  /// paged one whose rows are read through the page table.
  mlir::Value makeDesc(mlir::Value ptr, std::optional<mlir::Value> offset,
                       const std::vector<mlir::Value> &shape,
                       const std::vector<mlir::Value> &strides,
                       std::optional<mlir::Value> pages = std::nullopt,
                       std::optional<mlir::Value> numPages = std::nullopt, int64_t pageSize = 0);
  /// tile.load_scalar: one element; out-of-range indices give `padding`.
  mlir::Value loadScalar(mlir::Value desc, const std::vector<mlir::Value> &indices, double padding);
  mlir::Value load(mlir::Value desc, const std::vector<mlir::Value> &offsets,
                   const std::vector<int64_t> &shape, double padding);
  /// One element per index: each index an i32 scalar or an i32 tile (all tiles of one shape,
  /// the result's); out-of-shape elements get `padding`.
  mlir::Value gather(mlir::Value desc, const std::vector<mlir::Value> &indices, double padding);
  void store(mlir::Value desc, const std::vector<mlir::Value> &offsets, mlir::Value value,
             std::optional<mlir::Value> mask);
  /// tile.atomic_add: f32 or i32 elements added into memory atomically.
  void atomicAdd(mlir::Value desc, const std::vector<mlir::Value> &offsets, mlir::Value value,
                 std::optional<mlir::Value> mask);
  /// `a·b + acc`; without `acc`, a zero accumulator.
  mlir::Value dot(mlir::Value a, mlir::Value b, std::optional<mlir::Value> acc);
  /// If `product` is an unused `tile.dot` with a zero accumulator, rebuilds it as
  /// `tile.dot(a, b, addend)` (so `acc + dot(a, b)` accumulates in place) and returns it.
  std::optional<mlir::Value> fuseDotAdd(mlir::Value product, mlir::Value addend);
  mlir::Value reduce(const std::string &kind, mlir::Value value, int axis);
  /// Philox4x32 (Salmon et al., SC'11; Triton's tl.randint4x) of the int32 counters `offset`
  /// (a tile, the first counter word; the others 0) under the key (`seedLo`, `seedHi`), int32
  /// scalars (no `seedHi`: seedLo >> 31, a sign-extended 64-bit seed): four int32 tiles of
  /// random bits after `rounds` rounds (10: the standard), in tile arithmetic.
  std::vector<mlir::Value> philox(mlir::Value seedLo, std::optional<mlir::Value> seedHi,
                                  mlir::Value offset, int rounds);
  /// The high words of the unsigned 64-bit products of two int32 tiles (tile.mulhiui).
  mlir::Value umulhi(mlir::Value lhs, mlir::Value rhs);
  /// Inclusive prefix sums, maxima or minima along `axis` (tile.scan).
  mlir::Value scan(const std::string &kind, mlir::Value value, int axis, bool reverse);
  mlir::Value splat(mlir::Value scalar, const std::vector<int64_t> &shape);
  mlir::Value iota(int64_t size);
  mlir::Value expandDims(mlir::Value value, int axis);
  mlir::Value broadcast(mlir::Value value, const std::vector<int64_t> &shape);
  mlir::Value trans(mlir::Value value);
  std::pair<mlir::Value, mlir::Value> softmax(mlir::Value value, int axis, bool streamed);
  /// ∂y/∂x element by element, for a tile y computed from the tile x by element-wise ops (the
  /// chain rule through a score_mod; tessel::tile::buildElementwiseGrad). On failure no value
  /// and the diagnostics, located at the op that cannot be differentiated.
  std::pair<std::optional<mlir::Value>, std::vector<Diagnostic>> elementwiseGrad(mlir::Value y,
                                                                                 mlir::Value x);

  // Control flow. Regions nest: begin/end pairs must match.
  /// Starts an i32 scf.for; returns the induction variable and the body's carried values.
  std::pair<mlir::Value, std::vector<mlir::Value>>
  beginFor(mlir::Value lo, mlir::Value hi, mlir::Value step, const std::vector<mlir::Value> &inits);
  std::vector<mlir::Value> endFor(const std::vector<mlir::Value> &yields);
  /// Starts an scf.if with both branches; building continues in the then branch.
  void beginIf(mlir::Value cond);
  void enterThen();
  void enterElse();
  /// Closes the innermost scf.if, yielding the given values from each branch.
  std::vector<mlir::Value> endIf(const std::vector<mlir::Value> &thenValues,
                                 const std::vector<mlir::Value> &elseValues);

  // Whole-module operations.
  std::vector<Diagnostic> verify();
  /// Runs a textual pass pipeline (e.g. "tile-optimize") on the module; with `dumpIR`, prints the
  /// IR after every pass to stderr.
  std::vector<Diagnostic> runPipeline(const std::string &pipeline, bool dumpIR);
  std::string print(bool withLocations);
  /// Compiles the module as it is now (after `runPipeline`) to PTX and a cubin. The lowered
  /// LLVM-dialect module is not printed and the IR is verified once after the lowering, not
  /// after every pass (docs/dev/cold-compile.md); `passTiming` keeps MLIR's pass timing report.
  GpuCompileResult compileForGpu(const tessel::TargetOptions &options, bool passTiming = false);

  // Value introspection.
  static std::string kindOf(mlir::Value value);  // scalar, tile, ptr, desc
  static std::string dtypeOf(mlir::Value value); // f16 bf16 f32 i32 i1 (element type)
  static std::vector<int64_t> shapeOf(mlir::Value value);
  static int64_t rankOf(mlir::Value value);

private:
  mlir::Type elementType(const std::string &dtype);
  mlir::Type paramType(const Param &param);
  mlir::Type withShape(mlir::Type element, llvm::ArrayRef<int64_t> shape);
  mlir::Value requireI32Scalar(mlir::Value value, const char *what);
  // The operands of a store or atomic_add (`what`): a descriptor, one offset each axis, a tile.
  void checkWrite(const std::string &what, mlir::Value desc,
                  const std::vector<mlir::Value> &offsets, mlir::Value value);
  mlir::Location loc() const { return location; }

  std::unique_ptr<mlir::MLIRContext> ctx;
  mlir::OwningOpRef<mlir::ModuleOp> moduleOp;
  mlir::OpBuilder builder;
  mlir::Location location;
  struct OpenRegion {
    mlir::Operation *op;
    mlir::OpBuilder::InsertPoint after;
  };
  std::vector<OpenRegion> open;
};

/// The position an MLIR location points at in user code, if it has one.
Diagnostic locate(mlir::Location loc);

} // namespace tessel::python

#endif // TESSEL_PYTHON_KERNELBUILDER_H
