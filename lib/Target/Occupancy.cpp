//===- Occupancy.cpp - ask ptxas for the CTAs a kernel's shared memory allows ----------------===//
//
// ptxas allocates registers for one CTA and lets the occupancy fall where it falls. The fast
// paths size their shared memory for a number of CTAs per SM (three 64×64 d128 attention CTAs of
// 64 KiB on the H200), and a kernel that needs a few registers more than that many CTAs can
// have runs one CTA less: the d128 64×64 forward took 171 registers, two CTAs an SM, and ran
// 20 % slower than the same kernel at 158 (docs/bench/2026-12-03-h200-occupancy.md). Where the
// registers and not the shared memory cap the CTAs, and the registers ptxas chose exceed what
// one more CTA leaves by at most 1/kRegisterSlackDivisor of it, compileModule asks again with
// `.minnctapersm` and keeps the answer only where nothing spills. Never for a warp-specialised
// kernel: its consumers grow to their setmaxnreg count after launch, and a second CTA admitted
// on the producer-sized allocation hangs there (the backward's d64 64x128 key-rows program did).
//
//===------------------------------------------------------------------------------------------===//

#include "tessel/Target/Compile.h"

#include "llvm/ADT/Twine.h"

#include <algorithm>

namespace {
/// How far above a budget ptxas is asked to come down: a third. Its first allocation is often
/// generous — the d64 forward over [B, N, H, D] rows took 206 registers and, asked for three
/// CTAs, 152 without spilling — but far above it the answer spills (the sm_80 forward at ~245
/// for 168) and the second ptxas run (~0.1 s) is spent for nothing, as it is for the d64
/// 64×64 forward (118 asked for 96: spills, the first cubin kept).
constexpr unsigned kRegisterSlackDivisor = 3;
} // namespace

tessel::ChipLimits tessel::chipLimits(llvm::StringRef chip) {
  ChipLimits limits;
  // Shared memory per SM (CUDA's occupancy tables): 228 KiB on sm_90, 164 KiB on sm_80; one KiB
  // of it is reserved per CTA on both.
  limits.sharedBytesPerSM = chip.starts_with("sm_90") ? 228 * 1024 : 164 * 1024;
  return limits;
}

unsigned tessel::ctasByShared(const ChipLimits &limits, unsigned threads, int64_t sharedBytes) {
  if (threads == 0)
    return 0;
  int64_t bySharedMemory = limits.sharedBytesPerSM /
                           (std::max<int64_t>(sharedBytes, 0) + limits.sharedReservedPerCTA);
  int64_t byThreads = limits.threadsPerSM / threads;
  return static_cast<unsigned>(
      std::min<int64_t>({bySharedMemory, byThreads, static_cast<int64_t>(limits.ctasPerSM)}));
}

/// Registers one warp holds: ptxas allocates a warp's registers in units of 256.
static unsigned warpRegisters(const tessel::ChipLimits &limits, unsigned registers) {
  unsigned unit = limits.registerAllocationUnit;
  return (registers * 32 + unit - 1) / unit * unit;
}

unsigned tessel::ctasByRegisters(const ChipLimits &limits, unsigned threads, unsigned registers) {
  unsigned warps = (threads + 31) / 32;
  if (warps == 0 || registers == 0)
    return limits.ctasPerSM;
  return limits.registersPerSM / (warpRegisters(limits, registers) * warps);
}

unsigned tessel::registerBudget(const ChipLimits &limits, unsigned threads, unsigned ctas) {
  unsigned warps = (threads + 31) / 32;
  if (warps == 0 || ctas == 0)
    return limits.maxRegistersPerThread;
  unsigned perWarp = limits.registersPerSM / (ctas * warps) / limits.registerAllocationUnit *
                     limits.registerAllocationUnit;
  return std::min(limits.maxRegistersPerThread, perWarp / 32 / 8 * 8);
}

unsigned tessel::occupancyHint(const ChipLimits &limits, const KernelLaunchInfo &kernel,
                               const KernelResources &used, bool oneMore) {
  unsigned threads = kernel.blockSize[0] * kernel.blockSize[1] * kernel.blockSize[2];
  if (used.registers <= 0)
    return 0;
  unsigned byShared = ctasByShared(limits, threads, kernel.dynamicSharedBytes + used.sharedBytes);
  unsigned byRegisters = ctasByRegisters(limits, threads, used.registers);
  // The most CTAs the shared memory allows whose register budget is within reach.
  for (unsigned ctas = byShared; ctas > byRegisters && ctas >= 2; --ctas) {
    unsigned budget = registerBudget(limits, threads, ctas);
    if (static_cast<unsigned>(used.registers) <= budget + budget / kRegisterSlackDivisor)
      return ctas;
  }
  return oneMore && byRegisters >= 1 && byRegisters < byShared ? byRegisters + 1 : 0;
}

std::string tessel::withMinCtasPerSM(llvm::StringRef ptx, llvm::StringRef kernel, unsigned ctas) {
  // An entry is `.entry NAME(` + parameters + `)`, then its performance directives (.maxntid,
  // .reqntid, ...) each on a line, then the body's `{` on a line of its own.
  std::string header = (llvm::Twine(".entry ") + kernel + "(").str();
  size_t at = ptx.find(header);
  if (at == llvm::StringRef::npos)
    return ptx.str();
  size_t body = ptx.find("\n{", at);
  if (body == llvm::StringRef::npos)
    return ptx.str();
  std::string out = ptx.str();
  out.insert(body + 1, ".minnctapersm " + std::to_string(ctas) + "\n");
  return out;
}

bool tessel::reallocatesRegisters(llvm::StringRef ptx, llvm::StringRef kernel) {
  std::string header = (llvm::Twine(".entry ") + kernel + "(").str();
  size_t at = ptx.find(header);
  if (at == llvm::StringRef::npos)
    return false;
  size_t end = ptx.find(".entry ", at + header.size());
  return ptx.slice(at, end).contains("setmaxnreg");
}
