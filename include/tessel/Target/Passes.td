//===- Passes.td - passes of the target pipeline ------------*- tablegen -*-===//
//
// Passes that run inside the tile-to-nvvm pipeline after the conversions, on the NVVM/LLVM
// level, to fix up what upstream lowerings produce for our launch conventions.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TARGET_PASSES_TD
#define TESSEL_TARGET_PASSES_TD

include "mlir/Pass/PassBase.td"

def ExternDynamicSharedMemory
    : Pass<"tessel-extern-dynamic-shared-memory", "::mlir::gpu::GPUModuleOp"> {
  let summary = "Declare the dynamic shared-memory global external, as PTX's `.extern .shared`.";
  let description = [{
    Runs after `convert-gpu-to-nvvm`. The upstream lowering of `gpu.dynamic_shared_memory`
    makes a zero-sized `internal` global in address space 3, which the NVPTX back end prints as
    a one-byte static `.shared` variable: the kernel then indexes past it instead of into the
    dynamic shared memory given at launch. This pass gives every zero-sized address-space-3
    global without an initializer `external` linkage, so that the PTX reads
    `.extern .shared .align 16 .b8 __dynamic_shmem__0[];`, as `extern __shared__` does in CUDA.
  }];
}

#endif // TESSEL_TARGET_PASSES_TD
