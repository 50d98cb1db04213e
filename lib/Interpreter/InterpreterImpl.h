//===- InterpreterImpl.h - internals shared by the interpreter files -*- C++ -*-===//
//
// The run-time values (tiles, pointers, descriptors), call frames and the Interpreter class,
// shared by Interpreter.cpp (dispatch, tile ops, control flow) and ElementwiseOps.cpp (arith and
// math). Not installed: only lib/Interpreter includes it.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_LIB_INTERPRETER_INTERPRETERIMPL_H
#define TESSEL_LIB_INTERPRETER_INTERPRETERIMPL_H

#include "tessel/Interpreter/Interpreter.h"

#include "tile/IR/TileDialect.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/SCF/IR/SCF.h"
#include "mlir/IR/Operation.h"

#include "llvm/ADT/DenseMap.h"

#include <optional>
#include <unordered_map>
#include <variant>
#include <vector>

namespace tessel::interp::detail {
using namespace mlir;

// A scalar (empty shape, one element) or a statically shaped tensor, row-major. Floats live in
// `f`, integers (sign-extended from their width) in `i`; the other vector is empty.
struct Tile {
  Type elementType;
  SmallVector<int64_t, 4> shape;
  std::vector<double> f;
  std::vector<int64_t> i;
  bool isFloat() const { return isa<FloatType>(elementType); }
  int64_t size() const { return isFloat() ? f.size() : i.size(); }
};

// A !tile.ptr value: the kernel argument it points into.
struct PtrValue {
  unsigned arg;
};

// The page table of a paged descriptor: row i reads row table[i / pageSize] · pageSize +
// i mod pageSize; entry e of the table is element tableOffset + e · tableStride of argument
// tableArg, for 0 ≤ e < tableLength.
struct Paging {
  unsigned tableArg;
  int64_t tableOffset, tableLength, tableStride, pageSize, numPages;
};

// A !tile.desc value.
struct DescValue {
  unsigned arg;
  int64_t offset;
  SmallVector<int64_t, 4> shape, strides;
  std::optional<Paging> paging;
};

using RValue = std::variant<Tile, PtrValue, DescValue>;

// Row statistics of one streamed softmax: max and sum of exp(s - max), one per row.
struct SoftmaxStats {
  std::vector<double> max, sum;
};

// The values of one function activation. unordered_map keeps references to its elements valid
// while others are inserted.
struct Frame {
  std::unordered_map<const void *, RValue> values;
  llvm::DenseMap<Operation *, SoftmaxStats> streamedStats;
};

/// Product of the sizes of `shape`.
int64_t product(ArrayRef<int64_t> shape);
/// Bit width of an integer or index type.
unsigned bitWidth(Type t);
/// Wraps `v` to the bit width of the integer type `t`, sign-extended.
int64_t wrapInt(Type t, int64_t v);
/// The low `w` bits of `v`, as an unsigned number.
uint64_t toUnsigned(int64_t v, unsigned w);
/// The most negative `w`-bit integer.
int64_t minSigned(unsigned w);
/// Rounds `v` to the float type `t` (f16, bf16, f32; f64 unchanged).
double roundFloat(Type t, double v);
/// Whether tiles and scalars of element type `t` can be interpreted.
bool isSupportedElement(Type t);
/// arith.maximumf / minimumf: NaN-propagating, −0 < +0.
double maximumF(double a, double b);
double minimumF(double a, double b);

class Interpreter {
public:
  Interpreter(MutableArrayRef<KernelArg> args, std::array<int64_t, 3> grid,
              const RunOptions &options)
      : args(args), grid(grid), options(options) {}

  // Runs the program instance at `pid`; `params` are the kernel's parameter values.
  LogicalResult runProgram(func::FuncOp kernel, ArrayRef<RValue> params,
                           std::array<int64_t, 3> pid) {
    this->pid = pid;
    return call(kernel, params, 0);
  }

private:
  FailureOr<SmallVector<RValue>> call(func::FuncOp fn, ArrayRef<RValue> params, unsigned depth);
  LogicalResult runBlock(Frame &fr, Block &block, SmallVectorImpl<RValue> &yielded);
  LogicalResult runOp(Frame &fr, Operation *op);
  // Runs an arith or math op; nullopt if `op` is not one the interpreter knows.
  std::optional<LogicalResult> runElementwise(Frame &fr, Operation *op);

  // Counts `n` steps; fails at `op` past the step limit.
  LogicalResult step(Operation *op, uint64_t n) {
    steps += n;
    if (options.maxSteps && steps > options.maxSteps)
      return op->emitOpError() << "exceeds the interpreter's step limit of " << options.maxSteps
                               << " " << kStepLimitHint;
    return success();
  }

  FailureOr<const RValue *> lookup(Frame &fr, Operation *op, Value v);
  FailureOr<const Tile *> tile(Frame &fr, Operation *op, Value v);
  FailureOr<int64_t> intScalar(Frame &fr, Operation *op, Value v);
  FailureOr<Tile> newTile(Operation *op, Type type);
  void set(Frame &fr, Value v, RValue value) {
    fr.values[v.getAsOpaquePointer()] = std::move(value);
  }

  LogicalResult unsupported(Operation *op) {
    return op->emitError() << "the interpreter does not support '" << op->getName() << "'";
  }

  // Element-wise ops.
  template <typename Fn>
  LogicalResult floatUnary(Frame &fr, Operation *op, Fn fn);
  template <typename Fn>
  LogicalResult floatBinary(Frame &fr, Operation *op, Fn fn);
  template <typename Fn>
  LogicalResult intBinary(Frame &fr, Operation *op, Fn fn);
  LogicalResult convert(Frame &fr, Operation *op);
  LogicalResult cmpI(Frame &fr, arith::CmpIOp op);
  LogicalResult cmpF(Frame &fr, arith::CmpFOp op);
  LogicalResult select(Frame &fr, arith::SelectOp op);
  LogicalResult constant(Frame &fr, arith::ConstantOp op);

  // Tile ops.
  LogicalResult makeDesc(Frame &fr, tile::MakeDescOp op);
  /// Row `row` (≥ 0) of a paged descriptor in its strided view, or none where the table has no
  /// entry for it or the entry is not a page; an error where the table itself is unreadable.
  FailureOr<std::optional<int64_t>> pagedRow(Operation *op, const Paging &p, int64_t row);
  // A load (into `result`), a store of `value` or, with `add`, its atomic add into memory.
  LogicalResult access(Frame &fr, Operation *op, Value descV, ValueRange offsetVs,
                       const Tile *value, const Tile *mask, Tile *result, bool add = false);
  LogicalResult load(Frame &fr, tile::LoadOp op);
  // Fills `t` with a load's or gather's padding (an integer one must be a whole number).
  LogicalResult fillWithPadding(Operation *op, Tile &t, double pad);
  LogicalResult gather(Frame &fr, tile::GatherOp op);
  LogicalResult loadScalar(Frame &fr, tile::LoadScalarOp op);
  LogicalResult store(Frame &fr, tile::StoreOp op);
  LogicalResult atomicAdd(Frame &fr, tile::AtomicAddOp op);
  // tile.store or tile.atomic_add (`add`) through access.
  template <typename WriteOp>
  LogicalResult write(Frame &fr, WriteOp op, bool add);
  LogicalResult dot(Frame &fr, tile::DotOp op);
  LogicalResult reduce(Frame &fr, tile::ReduceOp op);
  LogicalResult scan(Frame &fr, tile::ScanOp op);
  LogicalResult reshape(Frame &fr, Operation *op, bool transpose);
  LogicalResult softmax(Frame &fr, tile::SoftmaxOp op);

  // Control flow.
  LogicalResult forOp(Frame &fr, scf::ForOp op);
  LogicalResult prepareStreamed(Frame &fr, scf::ForOp loop, function_ref<int64_t(int64_t)> ivAt,
                                int64_t trips, ArrayRef<tile::SoftmaxOp> softmaxes);
  LogicalResult ifOp(Frame &fr, scf::IfOp op);
  LogicalResult callOp(Frame &fr, func::CallOp op);

  MutableArrayRef<KernelArg> args;
  std::array<int64_t, 3> grid;
  std::array<int64_t, 3> pid{0, 0, 0};
  const RunOptions &options;
  uint64_t steps = 0;
  unsigned depth = 0;
};

} // namespace tessel::interp::detail

#endif // TESSEL_LIB_INTERPRETER_INTERPRETERIMPL_H
