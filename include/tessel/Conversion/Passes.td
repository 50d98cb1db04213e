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
    become `!llvm.ptr<1>` (one pointer per buffer). Every tile value gets a buffer in shared
    memory; the buffers are packed into one arena by their live intervals, so that values whose
    lifetimes are disjoint share bytes. An arena of up to 48 KiB is a static workgroup
    attribution; a larger one is dynamic shared memory (`gpu.dynamic_shared_memory`), its size
    recorded as the kernel attribute `tessel.dynamic_shared_bytes` for the launcher (always
    `tessel.shared_bytes`). Every tile op becomes a loop over its elements
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
           "Threads per CTA; 1 gives the single-thread scheme.">,
    Option<"sharedLimit", "shared-limit", "int64_t", /*default=*/"232448",
           "Most bytes of shared memory a CTA may use: 232448 (227 KiB) on sm_90, 166912 "
           "(163 KiB) on sm_80, with the dynamic-shared-memory opt-in.">
  ];
}

def ConvertTileToMMA : Pass<"convert-tile-to-mma", "::mlir::ModuleOp"> {
  let summary = "Lower attention-class tile programs to register-resident mma.sync kernels (sm_80+).";
  let description = [{
    The fast path for the attention class (docs/dev/codegen-mma.md). Each 2-D tile whose rows
    are the program's query block lives in registers in the `mma.sync.m16n8k16` accumulator
    layout (16 or 32 rows per warp: one or two m16 tiles); row vectors live as the matching slice; index tiles are
    computed per register from the lane and warp ids. `tile.dot` becomes `mma.sync` with the A
    operand from registers (a loaded block read once with `ldmatrix`, or the packed f16/bf16
    probabilities) and the B operand from XOR-swizzled shared memory through `ldmatrix`
    (`.trans` for a B that is not transposed). Loads are `cp.async` with zero fill past the
    bounds, in the schedule the tilegpu level writes: `tilegpu-allocate-shared` then
    `tilegpu-pipeline-loads` with `stages` stages run on a copy of each program whose loads are
    not placed yet (a program that comes with `tilegpu.alloc`s is lowered as its IR says).
    Reductions along rows are per-thread folds plus quad shuffles.

    With `fallback`, a program outside the class is left as it is, with a remark saying why, so
    that `convert-tile-to-gpu` (run next) lowers it; without it, the reason is an error.

    The layouts are the tilegpu level's (docs/dev/codegen.md): a program whose tiles carry them
    (after `tilegpu-assign-layouts`) is lowered as they say; one without gets them here, by the
    same function, with the `wgmma` and `warp-rows` options.

    With `wgmma` (sm_90a) the same class and register layouts (16 rows per warp, four warps per
    warpgroup of 64 rows) use `wgmma.mma_async` for both dots instead of `mma.sync`: A from
    registers, B from 128-byte-swizzled shared memory through matrix descriptors.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::NVVM::NVVMDialect", "::mlir::scf::SCFDialect",
                           "::mlir::arith::ArithDialect", "::mlir::math::MathDialect",
                           "::tessel::tilegpu::TileGPUDialect"];
  let options = [
    Option<"fallback", "fallback", "bool", /*default=*/"false",
           "Leave programs outside the class to the reference lowering (remark) instead of "
           "failing.">,
    Option<"sharedLimit", "shared-limit", "int64_t", /*default=*/"232448",
           "Most bytes of shared memory a CTA may use (see convert-tile-to-gpu).">,
    Option<"warpRows", "warp-rows", "int64_t", /*default=*/"0",
           "Query rows per warp: 16 (one m16 tile), 32 (two m16 tiles sharing every K/V "
           "ldmatrix) or 0 to choose (32 for a 128-row query block, else 16).">,
    Option<"wgmma", "wgmma", "bool", /*default=*/"false",
           "sm_90a: both dots as warpgroup wgmma.mma_async (A from registers, B from "
           "128-byte-swizzled shared memory through matrix descriptors), 16 rows per warp "
           "(docs/dev/codegen-wgmma.md).">,
    Option<"wgmmaOverlap", "wgmma-overlap", "bool", /*default=*/"false",
           "With wgmma: FA3's intra-warpgroup pipelining of the attention loop: S_j = Q·K_jᵀ and "
           "the previous block's O += P·V issued as two commit groups, the softmax of S_j under "
           "P·V (wait_group 1), the rescale of O after it (docs/dev/codegen-wgmma.md).">,
    Option<"wgmmaAsyncDots", "wgmma-async-dots", "bool", /*default=*/"false",
           "With wgmma: every other dot issued where it stands and waited for before its first "
           "use (tilegpu-async-dots), so that independent dots run back to back. Not yet "
           "measured: off by default.">,
    Option<"sinkWaits", "sink-waits", "bool", /*default=*/"true",
           "The wait for a block loaded before a loop (Q) below the loop's first copies "
           "(tilegpu-sink-waits): both in flight at once. Off to compare.">,
    Option<"warpSpecialize", "warp-specialize", "bool", /*default=*/"true",
           "With wgmma, on programs of two consumer warpgroups or more whose loops stream only "
           "B operands (a 128-row attention block): a producer warpgroup copies the loops' "
           "blocks, mbarriers between it and the consumers (tilegpu-warp-specialize), in place "
           "of the pipelined copies. Off to compare.">,
    Option<"overlapConsumers", "overlap-consumers", "bool", /*default=*/"true",
           "With warp-specialize: FA3's intra-warpgroup overlap in the consumers' attention "
           "loops, the softmax of S_j under P_{j-1}·V_{j-1} (tilegpu-overlap-consumers), where "
           "the registers allow. Off to compare.">,
    Option<"pingpong", "pingpong", "bool", /*default=*/"true",
           "With overlap-consumers on two consumer warpgroups: they take turns issuing their "
           "dots (tilegpu-pingpong). Off to compare.">,
    Option<"producerOnce", "producer-once", "bool", /*default=*/"false",
           "With warp-specialize: the producer copies the blocks loaded once a tile (Q) too "
           "(tilegpu-producer-once). Off by default until measured.">,
    Option<"lateP", "late-p", "bool", /*default=*/"false",
           "With overlap-consumers, where the consumers' registers are short (d64's three "
           "warpgroups): P_j made after the previous P·V's wait, a cp.async producer's registers "
           "given to the consumers (tilegpu-overlap-consumers late-p). Off until measured.">,
    Option<"rescaleUnderS", "rescale-under-s", "bool", /*default=*/"false",
           "With overlap-consumers: O's rescale by α_j made in iteration j+1 between S's group "
           "and P·V's, beside S's wgmma (tilegpu-overlap-consumers rescale-under-s). Off until "
           "measured.">,
    Option<"trimZeroColumns", "trim-zero-columns", "bool", /*default=*/"true",
           "A dot whose B block is read along its columns (S = Q·Kᵀ) runs its k steps only over "
           "the columns the block's copies fill: past a descriptor's constant column count the "
           "copies write zeros (a head dim padded inside the kernel, DB).">,
    Option<"trimOutputColumns", "trim-output-columns", "bool", /*default=*/"true",
           "A dot whose B block is read as stored (P·V's V) computes only the output columns "
           "the block's copies fill (the accumulator's others keep their value: B's zero "
           "columns add nothing).">,
    Option<"dropTmaFences", "drop-tma-fences", "bool", /*default=*/"true",
           "With tma-only: no proxy fence after the consumers' waits on rings only TMA fills "
           "(tilegpu-drop-tma-fences). Off to compare.">,
    Option<"fp8Overlap", "fp8-overlap", "bool", /*default=*/"false",
           "With overlap-consumers, loops whose V is read transposed (FP8's) are overlapped "
           "too (tilegpu-overlap-consumers transposed-v). Off until measured.">,
    Option<"pipelineTiles", "pipeline-tiles", "bool", /*default=*/"false",
           "With warp-specialize and producer-once in a persistent kernel: the next tile's "
           "first S = Q·K₀ᵀ issued before this tile's epilogue (tilegpu-pipeline-tiles). Off "
           "by default until measured.">,
    Option<"fuseMaskedLoops", "fuse-masked-loops", "bool", /*default=*/"false",
           "The masked and unmasked copies of a key loop run as one loop whose mask is skipped "
           "under a uniform branch where the split proved it all true "
           "(tilegpu-fuse-masked-loops): half the code of an attention kernel.">,
    Option<"skipMaskedWarpgroups", "skip-masked-warpgroups", "bool", /*default=*/"false",
           "With warp-specialize: in the synchronous masked loops, each consumer warpgroup "
           "branches around the blocks its own rows cannot see (tilegpu-skip-masked-warpgroups). "
           "Off until measured.">,
    Option<"syncMaskedLoops", "sync-masked-loops", "bool", /*default=*/"true",
           "With overlap-consumers, the split's masked loops (the boundary blocks, one or two a "
           "tile) left synchronous (tilegpu-overlap-consumers masked-synchronous): a quarter "
           "less code, as fast. Off to compare.">,
    Option<"tmaProducer", "tma-producer", "bool", /*default=*/"true",
           "With warp-specialize: the producer's block copies go through TMA, with tensor maps "
           "built in the kernel (tilegpu-tma-producer; PTX ISA 8.3). Off to compare.">,
    Option<"tmaOnly", "tma-only", "bool", /*default=*/"false",
           "With tma-producer: the copies it marks take TMA without the run-time check of what "
           "TMA needs (16-byte aligned origin and row stride, the SM's map slot) and without the "
           "cp.async copy beside them, for launchers that guarantee it.">,
    Option<"vectorStores", "vector-stores", "bool", /*default=*/"true",
           "16-bit accumulator tiles stored 16 bytes a thread: the four threads of a quad "
           "exchange their pairs by shuffles (a 4x4 transpose of 32-bit words) so that each "
           "holds eight consecutive columns. Off to compare.">,
    Option<"stages", "stages", "int64_t", /*default=*/"2",
           "Stages of the ring of loop-body loads (tilegpu-allocate-shared) for programs "
           "whose loads are not placed yet; the overlapped schedule keeps two.">,
    Option<"chip", "chip", "std::string", /*default=*/"\"\"",
           "The chip the kernels are for (sm_80, sm_90a); with wgmma, anything but sm_90a "
           "(or empty: unknown) is refused.">
  ];
}

def ConvertTileToBlocked : Pass<"convert-tile-to-blocked", "::mlir::ModuleOp"> {
  let summary = "Lower tile programs without dots to kernels that keep every tile in registers.";
  let description = [{
    The fast path for programs of loads, stores, element-wise ops and reductions along rows
    (row softmax, layer norm, fused element-wise chains; docs/dev/codegen-blocked.md). The
    program's [R, C] block (or [1, N] for 1-D programs) is spread over `num-threads` threads in
    vectors of 16 bytes of the narrowest element it moves: a row over up to all the threads, the
    rest of the threads on the next rows. Loads and stores are vector accesses where the vector
    is in bounds, unit-stride and aligned (checked at run time), element by element otherwise;
    a reduction along rows folds a thread's elements, shuffles across its warp and, for a row
    wider than a warp, exchanges through shared memory. Row and column vectors ([R], [R, 1],
    [C], [1, C]) are held by the threads that need them. The layouts are the tilegpu level's
    (`#tilegpu.blocked` and its slices, `tilegpu-assign-blocked`): read from the program's
    types when it has them, assigned here (with `num-threads`) when it has none.

    With `fallback`, a program outside the class is left as it is with a remark, for
    `convert-tile-to-gpu`; without it, the reason is an error.
  }];
  let dependentDialects = ["::mlir::gpu::GPUDialect", "::mlir::LLVM::LLVMDialect",
                           "::mlir::scf::SCFDialect", "::mlir::arith::ArithDialect",
                           "::mlir::math::MathDialect", "::mlir::memref::MemRefDialect",
                           "::tessel::tilegpu::TileGPUDialect"];
  let options = [
    Option<"fallback", "fallback", "bool", /*default=*/"false",
           "Leave programs outside the class to the reference lowering (remark) instead of "
           "failing.">,
    Option<"numThreads", "num-threads", "unsigned", /*default=*/"128",
           "Threads per CTA (a power of two).">
  ];
}

#endif // TESSEL_CONVERSION_PASSES_TD
