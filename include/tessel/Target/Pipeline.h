//===- Pipeline.h - the pipeline from tile IR to PTX and cubin --*- C++ -*-===//
//
// The named pipeline `tile-to-nvvm` (convert-tile-to-gpu, then the upstream GPU→NVVM→LLVM passes
// and gpu-module-to-binary) and the registration of everything it needs: upstream dialects,
// conversion interfaces, LLVM IR translations and passes, each registered one by one.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TARGET_PIPELINE_H
#define TESSEL_TARGET_PIPELINE_H

#include <cstdint>
#include <string>

namespace mlir {
class DialectRegistry;
class OpPassManager;
} // namespace mlir

namespace tessel {

/// What the pipeline makes and for which GPU.
struct TargetOptions {
  /// `sm_80` or `sm_90a`.
  std::string chip = "sm_90a";
  /// PTX features handed to nvvm-attach-target (ptxas 13 accepts PTX ISA 8.0).
  std::string features = "+ptx80";
  /// Threads per CTA of the reference lowering.
  unsigned numThreads = 128;
  /// Stages of the fast paths' ring of loop-body loads (convert-tile-to-mma stages; the
  /// overlapped wgmma schedule keeps two). 2 to 4.
  unsigned numStages = 2;
  /// Where to stop: `llvm` (LLVM dialect inside the gpu.module), `isa` (PTX) or `bin` (cubin).
  std::string format = "isa";
  /// CUDA toolkit for gpu-module-to-binary{format=bin}; empty: CUDA_HOME or PATH.
  std::string toolkit;
  /// Which lowering makes the kernels: `reference` (convert-tile-to-gpu), `mma` (the sm_80+
  /// fast path convert-tile-to-mma; programs outside its class are errors), `wgmma` (sm_90a
  /// only: the same class with wgmma.mma_async dots) or `auto` (wgmma on sm_90a, else the mma
  /// fast path, where the program fits; else the reference lowering with a remark saying why).
  std::string codegen = "reference";
  /// With wgmma (also through auto on sm_90a): overlap the softmax of each K/V block with the
  /// previous block's P·V inside a warpgroup (convert-tile-to-mma wgmma-overlap).
  bool wgmmaOverlap = false;
  /// With wgmma: the other dots issued where they stand and waited for before their first use
  /// (convert-tile-to-mma wgmma-async-dots; tilegpu-async-dots). Not yet measured.
  bool wgmmaAsyncDots = false;
  /// The fast paths wait for a block loaded before a loop (Q) below the loop's first copies
  /// (convert-tile-to-mma sink-waits; tilegpu-sink-waits). Off to compare.
  bool sinkWaits = true;
  /// With wgmma, on 128-row attention blocks: a producer warpgroup copies the loops' blocks,
  /// mbarriers between it and the consumers (convert-tile-to-mma warp-specialize;
  /// tilegpu-warp-specialize). Off to compare.
  bool warpSpecialize = true;
  /// In a warp-specialized kernel's consumers, FA3's intra-warpgroup overlap of the attention
  /// loop (convert-tile-to-mma overlap-consumers; tilegpu-overlap-consumers). Off to compare.
  bool overlapConsumers = true;
  /// Overlapped consumers of two warpgroups take turns issuing their dots (convert-tile-to-mma
  /// pingpong; tilegpu-pingpong). Off to compare.
  bool pingpong = true;
  /// The producer copies the blocks loaded once a tile (Q) too (convert-tile-to-mma
  /// producer-once; tilegpu-producer-once). Off until measured.
  bool producerOnce = false;
  /// In a persistent kernel with producer-once, the next tile's first S issued before this
  /// tile's epilogue (convert-tile-to-mma pipeline-tiles;
  /// tilegpu-pipeline-tiles). Off until measured.
  bool pipelineTiles = false;
  /// Overlapped consumers whose registers are short (d64's three warpgroups) make P_j after the
  /// previous P·V's wait, with a cp.async producer's registers (convert-tile-to-mma late-p;
  /// tilegpu-overlap-consumers). Off until measured.
  bool lateP = false;
  /// Overlapped consumers rescale O by the previous α beside the next S's wgmma instead of
  /// after O's wait (convert-tile-to-mma rescale-under-s; tilegpu-overlap-consumers). Bit for
  /// bit the same results. Off until measured.
  bool rescaleUnderS = false;
  /// With tmaOnly, no proxy fence after the consumers' waits on rings only TMA fills
  /// (convert-tile-to-mma drop-tma-fences; tilegpu-drop-tma-fences).
  bool dropTmaFences = true;
  /// FP8 kernels' consumers overlapped too: their V, stored transposed, read so by the P·V
  /// (convert-tile-to-mma fp8-overlap; tilegpu-overlap-consumers transposed-v). Off until
  /// measured.
  bool fp8Overlap = false;
  /// A key loop's masked and unmasked copies (tile-split-masked-loops) as one loop whose mask
  /// is skipped under a uniform branch where it is all true (convert-tile-to-mma
  /// fuse-masked-loops; tilegpu-fuse-masked-loops): half the code, so half the compile.
  bool fuseMaskedLoops = false;
  /// The split's masked loops (the boundary blocks) left synchronous by the overlapped
  /// consumers (convert-tile-to-mma sync-masked-loops; tilegpu-overlap-consumers
  /// masked-synchronous): a quarter less code at d128, as fast (docs/dev/cold-compile.md).
  /// Off to compare.
  bool syncMaskedLoops = true;
  /// In the synchronous masked loops of a warp-specialized kernel, each consumer warpgroup
  /// branches around the blocks its own rows cannot see (convert-tile-to-mma
  /// skip-masked-warpgroups; tilegpu-skip-masked-warpgroups). Off until measured.
  bool skipMaskedWarpgroups = false;
  /// The producer's block copies go through TMA, with tensor maps built in the kernel
  /// (convert-tile-to-mma tma-producer; tilegpu-tma-producer; PTX ISA 8.3). +2 to +5 % on
  /// the d128 forward with one 3-D map a tensor (docs/bench/2026-12-04-h200-epilogue-tma.md).
  /// Off to compare.
  bool tmaProducer = true;
  /// The launcher guarantees what TMA needs of every copy tilegpu-tma-producer marks (16-byte
  /// aligned origins and row strides, at most 256 SMs): the copies take TMA without the
  /// run-time check and the cp.async copy beside it (convert-tile-to-mma tma-only): an eighth
  /// less PTX at d128. tessel.attention's dense and block-sparse kernels ask for it; off by
  /// default.
  bool tmaOnly = false;
  /// 16-bit accumulator tiles stored 16 bytes a thread after a quad transpose (convert-tile-to-mma
  /// vector-stores): a quarter of the store instructions; +2 to +9 % on the d128 forward
  /// (docs/bench/2026-12-04-h200-epilogue-tma.md). Off to compare.
  bool vectorStores = true;
  /// Dots summed along a B block's columns (S = Q·Kᵀ) run k steps only over the columns its
  /// copies fill, the rest being zeros (convert-tile-to-mma trim-zero-columns: a head dim
  /// padded inside the kernel, DB, at 96 takes 6 of 8). On since its H100 check (+2 to +10 %
  /// at d96/d80, docs/bench/2026-12-06-h100-s43.md).
  bool trimZeroColumns = true;
  /// Dots whose B block is read as stored (P·V's V; the backward's dO, Q and K) compute only
  /// the output columns its copies fill (convert-tile-to-mma trim-output-columns: wgmma's N;
  /// mma.sync keeps its n tiles). On since its H100 check (d96 forward +2 to +6 %).
  bool trimOutputColumns = true;
  /// Where registers, not shared memory, cap a kernel's CTAs per SM: ask ptxas again for the
  /// occupancy the shared memory allows (`.minnctapersm`; lib/Target/Occupancy.cpp).
  bool occupancyHints = true;
  /// Bytes of spill stores (ptxas' "bytes spill stores": registers sent to local memory) the
  /// occupancy hint may add to a kernel and still be kept; a kernel that allows any is also
  /// asked for one CTA more than its registers allow however far its budget (occupancyHint).
  /// 0: only where nothing more spills. The d64 causal backward's key-rows program ran 25 %
  /// faster at three CTAs an SM with 56 bytes of spill than at two without
  /// (docs/bench/2026-12-05-h100-s33.md).
  unsigned occupancySpillBytes = 0;
  /// Where ptxas spills, compile again with the register-hungry switches given up in turn
  /// (compileModule; lib/Target/SpillFallbacks.cpp). Off for a kernel known to spill whatever
  /// is given up (the d128 backward's key-rows program): its first compile is its result.
  bool spillFallbacks = true;
};

/// The fields of `options` that change the generated code, as one canonical string
/// (`chip=sm_90a;features=+ptx80;num-threads=128`) for the kernel cache key. `format` is left out
/// (the cache always stores both PTX and cubin) and so is `toolkit`, a path: which ptxas ran is
/// in the key as its version. A static_assert on the struct's size makes adding a field without
/// deciding here whether it changes code a compile error.
std::string codeOptionsKey(const TargetOptions &options);

/// Whether `codegen` is one of auto, reference, mma, wgmma.
bool isSupportedCodegen(const std::string &codegen);

/// Whether `chip` is one tessel targets (sm_80, sm_90a).
bool isSupportedChip(const std::string &chip);

/// The most shared memory one CTA may use on `chip` (static plus dynamic, after opting in with
/// cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES)).
int64_t maxSharedBytesPerBlock(const std::string &chip);

/// Appends tile IR → GPU kernels → NVVM/LLVM → (PTX|cubin) to `pm`, anchored on builtin.module:
/// buildTileToLLVMPipeline followed by buildLLVMToBinaryPipeline.
void buildTileToNVVMPipeline(mlir::OpPassManager &pm, const TargetOptions &options);

/// The first part of tile-to-nvvm: tile IR → GPU kernels → NVVM/LLVM dialect (all of
/// `format=llvm`). `options.format` is ignored.
void buildTileToLLVMPipeline(mlir::OpPassManager &pm, const TargetOptions &options);

/// The rest for `format=isa|bin`: gpu-module-to-binary (LLVM IR translation, LLVM's O3
/// pipeline, NVPTX, and ptxas for `bin`). Adds nothing for `format=llvm`. compileModule runs it
/// on the module the first part lowered, so the lowering runs once per compile.
void buildLLVMToBinaryPipeline(mlir::OpPassManager &pm, const TargetOptions &options);

/// Adds the dialects, conversion interfaces and LLVM IR translations the pipeline needs.
void registerTargetDialects(mlir::DialectRegistry &registry);

/// Registers `tile-to-nvvm`, convert-tile-to-gpu and the upstream passes it runs.
void registerTargetPasses();

} // namespace tessel

#endif // TESSEL_TARGET_PIPELINE_H
