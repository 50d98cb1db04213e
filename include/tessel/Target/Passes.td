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

def SplitKernelModules : Pass<"tessel-split-kernel-modules", "::mlir::ModuleOp"> {
  let summary = "Move every kernel of a gpu.module into a module of its own, for LLVM to compile "
                "the kernels separately.";
  let description = [{
    Runs after the lowering to the LLVM dialect, before `gpu-module-to-binary`. A `gpu.module`
    directly inside the anchor that holds two or more kernels (`gpu.kernel` or `nvvm.kernel`
    functions) is replaced, in place, by one `builtin.module` per kernel, each holding a copy of
    the `gpu.module` (same name, same targets) with that kernel and the symbols it references,
    transitively: the shared-memory globals and declarations. `gpu-module-to-binary` nested on
    `builtin.module` then turns each into its own LLVM module, in parallel where the context
    allows threads.

    Why: LLVM's GVN (MemoryDependence, PHITransAddr) scans the users of a global, and the
    dynamic shared-memory global of the mma/wgmma lowering is used by every kernel of the
    module, so one LLVM module of N kernels optimises in O(N^2) (issue 15, finding 8); a kernel
    alone in its module compiles to the same PTX.

    A `gpu.module` is left whole if a definition other than a kernel (a function with a body, a
    global with an initializer) is reachable from two kernels: LLVM could compile the two copies
    differently, and the PTX of the parts could not be joined. Nothing tessel lowers has one.

    Example:
    ```mlir
    gpu.module @tessel_kernels [#nvvm.target] {
      llvm.mlir.global external @smem() {addr_space = 3 : i32} : !llvm.array<0 x i8>
      llvm.func @a() attributes {gpu.kernel} { ... @smem ... }
      llvm.func @b() attributes {gpu.kernel} { ... @smem ... }
    }
    // becomes
    module {
      gpu.module @tessel_kernels [#nvvm.target] { @smem, @a }
    }
    module {
      gpu.module @tessel_kernels [#nvvm.target] { @smem, @b }
    }
    ```
  }];
}

def ModuleToBinary : Pass<"tessel-module-to-binary", "::mlir::ModuleOp"> {
  let summary = "gpu-module-to-binary without LLVM's SLP vectorizer and the NVPTX back end's "
                "straight-line strength reduction.";
  let description = [{
    Turns every `gpu.module` directly inside the anchor into a `gpu.binary`, as upstream's
    `gpu-module-to-binary` does (`gpu::transformGpuModulesToBinaries`: LLVM IR translation,
    LLVM's optimisation pipeline at the target's `O`, the NVPTX back end, ptxas for `bin`),
    but for two passes it leaves out:

    - the SLP vectorizer (O3): it vectorizes nothing the back end keeps in tessel's kernels —
      the PTX of all 410 cases of scripts/ptx_corpus.py is byte-identical without it — and
      took a quarter of the optimisation pipeline (d256 attention: 36 of 138 ms). MLIR builds
      that pipeline without pass instrumentation, so no gate reaches it; the functions carry
      `noimplicitfloat` through it instead (the SLP and loop vectorizers return at once on
      such a function) and lose it before the back end, whose load-store vectorizer the
      attribute would stop too;
    - straight-line strength reduction (SLSR, the back end's IR passes, skipped by an
      `llvm::OptPassGate` on the LLVMContext, which the legacy pass manager asks): on one long
      body of unrolled tile code its candidate search is quadratic — half of the back end's time at
      d256 (137 of 284 ms), where it rewrites nothing. Elsewhere it reassociates a few address
      computations: 103 of the 410 corpus PTX differ, on the fast paths by 2–4 instructions
      outside the key loop (the LSE store's address), up to 50 on the reference lowering;
      ptxas sees the same arithmetic either way.

    docs/dev/cold-compile.md has the measurements.
  }];
  let options = [
    Option<"format", "format", "std::string", /*default=*/"\"isa\"",
           "What to make: isa (PTX) or bin (a cubin made by ptxas)">,
    Option<"toolkit", "toolkit", "std::string", /*default=*/"\"\"",
           "CUDA toolkit holding bin/ptxas">,
  ];
}

#endif // TESSEL_TARGET_PASSES_TD
