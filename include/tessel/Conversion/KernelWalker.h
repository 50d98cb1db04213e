//===- KernelWalker.h - what both GPU lowerings do around the tile ops --------------------===//
//
// The two lowerings of tile programs (convert-tile-to-gpu, convert-tile-to-mma) build their
// kernels the same way: one `gpu.func` per program in the `tessel_kernels` module, arguments
// mapped to the kernel's, the body walked op by op with grid queries, descriptors and scalar loads
// (tile.load_scalar) lowered to scalars. That scaffolding is here once; each lowering says how it
// emits the tile ops.
//
//===----------------------------------------------------------------------------------------===//
#ifndef TESSEL_CONVERSION_KERNELWALKER_H
#define TESSEL_CONVERSION_KERNELWALKER_H

#include "tessel/Conversion/ScalarLowering.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "llvm/ADT/DenseMap.h"

namespace mlir {
class ModuleOp;
namespace func {
class FuncOp;
} // namespace func
namespace scf {
class ForOp;
class YieldOp;
} // namespace scf
} // namespace mlir

namespace tessel::conversion {

/// The module's `gpu.module @tessel_kernels`, made (and the module marked a container) if it
/// has none yet.
mlir::gpu::GPUModuleOp getOrCreateKernelModule(mlir::ModuleOp module);

/// The kernel of `program` at the end of `gpuModule`: `!tile.ptr` arguments become
/// `!llvm.ptr<1>`, scalars stay. A program that returns values or takes other arguments is
/// refused with a located error for each reason (nothing is created then).
mlir::FailureOr<mlir::gpu::GPUFuncOp> createKernel(mlir::func::FuncOp program,
                                                   mlir::gpu::GPUModuleOp gpuModule);

/// The first error `lower` emits, kept instead of reported: its text and location (the
/// program's when there is none). The fast lowerings try a program and, on failure, leave it
/// to the next one with this reason as a remark (fallback) or report it.
struct FirstError {
  std::string reason;
  mlir::Location where;
};
mlir::LogicalResult captureFirstError(mlir::MLIRContext *ctx, FirstError &error,
                                      llvm::function_ref<mlir::LogicalResult()> lower);

/// A program lowering `pass` refused with `error`: with `fallback` a remark that leaves it to
/// the reference lowering, else the error. Returns whether it was an error.
bool reportRefusal(llvm::StringRef pass, mlir::func::FuncOp program, const FirstError &error,
                   bool fallback);

/// Walks a tile program into its kernel. Subclasses emit the tile ops (emitOp) and whatever the
/// kernel needs at its entry (emitPrologue); grid queries, descriptors and scalar loads are
/// lowered here.
class KernelWalker {
public:
  virtual ~KernelWalker();

protected:
  explicit KernelWalker(mlir::gpu::GPUFuncOp kernel);

  /// The whole body: emitPrologue at the kernel's entry, the arguments mapped, every op, the
  /// gpu.return.
  mlir::LogicalResult walk(mlir::func::FuncOp program);
  /// Every op of `block` but its terminator, in order.
  mlir::LogicalResult emitBlock(mlir::Block &block);
  /// An scf.for whose carried values are flat lists of lowered values (a tile's registers, a
  /// scalar): a new loop from `inits`, the induction variable mapped, `bind(flat, targets)` to
  /// map a flat list onto the old loop's iter_args (then its results), the body walked and
  /// `yields(terminator)` for the flat list it yields. The insertion point ends after the loop.
  mlir::LogicalResult emitCarriedLoop(
      mlir::scf::ForOp op, mlir::ValueRange inits,
      llvm::function_ref<void(mlir::ValueRange, mlir::ValueRange)> bind,
      llvm::function_ref<mlir::FailureOr<llvm::SmallVector<mlir::Value>>(mlir::scf::YieldOp)>
          yields);
  virtual void emitPrologue(mlir::Location loc) {}
  /// What the kernel does after the program's last op, before it returns.
  virtual void emitEpilogue(mlir::Location loc) {}
  /// An op that is not a grid query, a tile.make_desc or a tile.load_scalar.
  virtual mlir::LogicalResult emitOp(mlir::Operation *op) = 0;
  /// A scalar arith/math op (no tile operand or result), on the lowered scalars of its
  /// operands: constants cloned, the rest through emitScalarOp (`ftz` as there).
  void emitScalar(mlir::Operation *op, bool ftz);
  /// i32 / i64 constants at the insertion point.
  mlir::Value ci32(int64_t v);
  mlir::Value ci64(int64_t v);

  mlir::gpu::GPUFuncOp kernel;
  mlir::OpBuilder b;
  /// Scalars of the program → their values in the kernel.
  mlir::IRMapping scalars;
  /// Descriptors of the program, lowered.
  llvm::DenseMap<mlir::Value, LoweredDesc> descs;
};

} // namespace tessel::conversion

#endif // TESSEL_CONVERSION_KERNELWALKER_H
