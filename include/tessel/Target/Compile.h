//===- Compile.h - compile a tile module to PTX and cubin -------*- C++ -*-===//
//
// The C++ driver that tools (tesselc, later the JIT) call: runs the tile-to-nvvm pipeline on a
// module, returns the LLVM-dialect kernel module, the PTX, the cubin made by ptxas, and ptxas'
// resource report (registers, spills, shared memory) parsed per kernel.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_TARGET_COMPILE_H
#define TESSEL_TARGET_COMPILE_H

#include "tessel/Target/Pipeline.h"

#include "mlir/Support/LLVM.h"
#include "llvm/ADT/ArrayRef.h"
#include "llvm/ADT/SmallVector.h"
#include "llvm/ADT/StringRef.h"

#include <atomic>
#include <cstdint>
#include <optional>
#include <string>

namespace mlir {
class ModuleOp;
} // namespace mlir

namespace tessel {

/// One kernel's line of `ptxas -v`.
struct KernelResources {
  std::string kernel;
  std::string arch;
  int registers = 0;
  int barriers = 0;
  int64_t stackBytes = 0;
  int64_t spillStoreBytes = 0;
  int64_t spillLoadBytes = 0;
  int64_t sharedBytes = 0;
  int64_t constantBytes = 0;
};

/// What a runtime needs to launch one kernel: its entry name, the block size it was compiled for
/// (launch with exactly this block) and the dynamic shared memory it expects. A kernel with
/// dynamic shared memory above 48 KiB needs
/// cuFuncSetAttribute(CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES, dynamicSharedBytes) before
/// cuLaunchKernel(..., sharedMemBytes = dynamicSharedBytes, ...).
struct KernelLaunchInfo {
  std::string name;
  unsigned blockSize[3] = {1, 1, 1};
  int64_t dynamicSharedBytes = 0;
};

/// Parses the output of `ptxas -v`; kernels appear in the order ptxas reports them.
llvm::SmallVector<KernelResources> parsePtxasReport(llvm::StringRef log);

/// What one SM holds (sm_80 and sm_90 alike, but for the shared memory).
struct ChipLimits {
  int64_t sharedBytesPerSM = 228 * 1024;
  int64_t sharedReservedPerCTA = 1024;
  unsigned registersPerSM = 65536;
  unsigned registerAllocationUnit = 256; ///< registers, per warp
  unsigned maxRegistersPerThread = 255;
  unsigned threadsPerSM = 2048;
  unsigned ctasPerSM = 32;
};
ChipLimits chipLimits(llvm::StringRef chip);
/// CTAs of `threads` threads and `sharedBytes` of shared memory that one SM can hold, by shared
/// memory and threads (registers aside).
unsigned ctasByShared(const ChipLimits &limits, unsigned threads, int64_t sharedBytes);
/// CTAs one SM can hold by registers when each thread uses `registers`.
unsigned ctasByRegisters(const ChipLimits &limits, unsigned threads, unsigned registers);
/// Registers a thread may use for `ctas` CTAs of `threads` threads to share an SM.
unsigned registerBudget(const ChipLimits &limits, unsigned threads, unsigned ctas);
/// The CTAs per SM to ask ptxas for (`.minnctapersm`) where a kernel's registers, not its shared
/// memory, cap its occupancy and a few registers less would let one more CTA in; 0 for none
/// (lib/Target/Occupancy.cpp says why). `oneMore`: the caller accepts a spill for it
/// (TargetOptions::occupancySpillBytes), so one CTA more than the registers allow is asked for
/// however far its budget is, where the shared memory allows it.
unsigned occupancyHint(const ChipLimits &limits, const KernelLaunchInfo &kernel,
                       const KernelResources &used, bool oneMore = false);
/// `ptx` with `.minnctapersm ctas` among the directives of entry `kernel` (unchanged when the
/// entry is not there).
std::string withMinCtasPerSM(llvm::StringRef ptx, llvm::StringRef kernel, unsigned ctas);
/// Whether entry `kernel` of `ptx` hands registers between its warps (`setmaxnreg`, warp
/// specialisation). Such a kernel takes no `.minnctapersm`: the registers its warps grow to
/// after the hand-over, not what ptxas allocated at launch, must fit the SM, and a CTA more
/// than those allow waits in `setmaxnreg.inc` for registers no CTA gives back (a hang).
bool reallocatesRegisters(llvm::StringRef ptx, llvm::StringRef kernel);

/// How far `compileModule` goes.
enum class Stage { LLVM, PTX, Cubin };

/// How long one step of compileModule took (wall clock).
struct StageTime {
  std::string name;
  double seconds = 0;
};

/// What compileModule does besides compiling.
struct CompileFlags {
  /// Print the LLVM-dialect module into CompiledModule::llvmDialect (always at Stage::LLVM).
  /// The JIT does not need it: 10-20 ms for the attention kernels.
  bool printLLVMDialect = true;
  /// Time every pass with MLIR's timing manager (PassManager::enableTiming) and keep the
  /// report in CompiledModule::passTimingReport.
  bool passTiming = false;
  /// Verify the IR after every pass of the lowering (as tessel-opt does). Off: verify once,
  /// after the lowering, before the module reaches LLVM IR translation.
  bool verifyEachPass = true;
  /// Set from another thread to stop the compile at its next step (a compile compileModule
  /// started ahead that its search no longer needs): it then fails without a diagnostic.
  const std::atomic<bool> *cancelled = nullptr;
};

struct CompiledModule {
  /// Every kernel of the module with its launch needs, in module order (every stage).
  llvm::SmallVector<KernelLaunchInfo> kernels;
  /// The kernel module after lowering to the LLVM dialect (Stage::LLVM; later stages with
  /// CompileFlags::printLLVMDialect).
  std::string llvmDialect;
  /// PTX text (Stage::PTX and later).
  std::string ptx;
  /// The cubin made by ptxas and its resource report (Stage::Cubin).
  std::string cubin;
  std::string ptxasLog;
  llvm::SmallVector<KernelResources> resources;
  /// The steps of the compile in order, with their wall time: clone, lowering (tile → LLVM
  /// dialect), [verify lowered], [print llvm dialect], llvm ir + opt (translation to LLVM IR and
  /// LLVM's O3 pipeline), nvptx (LLVM IR → PTX), ptxas. Always filled (a clock read per step).
  llvm::SmallVector<StageTime> timings;
  /// MLIR's pass timing report (CompileFlags::passTiming), as text.
  std::string passTimingReport;
  /// The switches compileModule gave up because the module spilled with them (its spill
  /// fallbacks, in their order: "pipeline-tiles", "tma-producer", "scale fold", "vector-stores",
  /// "overlap-consumers"); empty where the first compile was kept.
  llvm::SmallVector<std::string> givenUp;
};

/// The ptxas to use: `toolkit`/bin/ptxas, then $CUDA_HOME, $CUDA_PATH, $CUDA_ROOT, tessel's
/// configured CUDA, then PATH. Empty if none is found.
std::string findPtxas(llvm::StringRef toolkit);

/// Compiles a copy of `module` (tile IR) up to `stage`. Failures are reported as diagnostics on
/// the module's context (located where the IR says) and return failure. Where ptxas spills, the
/// compiles of the spill fallbacks run up to compileThreads() at once
/// (lib/Target/SpillFallbacks.cpp).
mlir::FailureOr<CompiledModule> compileModule(mlir::ModuleOp module, const TargetOptions &options,
                                              Stage stage, const CompileFlags &flags = {});

/// How many compiles compileModule's spill fallbacks run at once: $TESSEL_COMPILE_THREADS
/// where set (1: one after the other, in the caller's context), else the machine's hardware
/// threads, at most 8.
unsigned compileThreads();

/// Joins the PTX of modules compiled apart for one target (compileModule compiles each kernel of
/// a module as an LLVM module of its own) into one PTX module: the first part verbatim, then
/// from each further part, in order, what the earlier ones do not already hold — its functions,
/// comments, and the declarations not seen yet (a variable the parts share, the same text in
/// each, appears once). Fails, saying why in `why`, if the headers (.version, .target,
/// .address_size) differ, if two parts declare one name differently, or on PTX it does not
/// parse (debug sections).
bool joinPtxModules(llvm::ArrayRef<std::string> parts, std::string &ptx, std::string &why);

/// Runs `ptxas -v` on `ptx` for `chip`; fills `cubin`, `log` and `resources`. `error` says why
/// on failure.
bool runPtxas(llvm::StringRef ptx, llvm::StringRef chip, llvm::StringRef toolkit,
              CompiledModule &out, std::string &error);

} // namespace tessel

#endif // TESSEL_TARGET_COMPILE_H
