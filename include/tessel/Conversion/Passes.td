//===- Passes.td - tessel's conversion passes ---------------*- tablegen -*-===//
//
// The conversions between dialect levels that tessel owns. Each boundary has its folder under
// lib/Conversion; the passes are declared here and only here.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_CONVERSION_PASSES_TD
#define TESSEL_CONVERSION_PASSES_TD

include "mlir/Pass/PassBase.td"

def ConvertTileToGPU : Pass<"convert-tile-to-gpu", "::mlir::ModuleOp"> {
  let summary = "Lower tile programs to GPU kernels that keep every tile in shared memory.";
  let description = [{
    The reference lowering: correct rather than fast. Each `func.func` tile program becomes a
    `gpu.func` kernel in the `gpu.module @tessel_kernels`, launched with one CTA per program
    instance (grid = the program grid) and `num-threads` threads in x. `!tile.ptr<T>` arguments
    become `!llvm.ptr<1>` (one pointer per buffer). Every tile value gets its own buffer in
    shared memory (a workgroup attribution); every tile op becomes a loop over its elements
    whose iterations are spread over the CTA's threads, followed by `gpu.barrier`. Scalars are
    computed redundantly by every thread, so control flow stays uniform. `exp`, `exp2`, `log` and
    `log2` on f32 become NVVM's `ex2.approx`/`lg2.approx` so that nothing links libdevice.

    A `streamed` softmax is rejected: run `tile-online-softmax` first. Ops the lowering does not
    know are reported with their location.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::memref::MemRefDialect",
                           "::mlir::LLVM::LLVMDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect"];
  let options = [
    Option<"numThreads", "num-threads", "unsigned", /*default=*/"128",
           "Threads per CTA; 1 gives the single-thread scheme.">
  ];
}

#endif // TESSEL_CONVERSION_PASSES_TD
