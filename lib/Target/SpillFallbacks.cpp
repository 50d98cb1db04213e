//===- SpillFallbacks.cpp - compileModule: one compile, then its spill fallbacks ------------===//
//
// compileModule compiles a module once (Compile.cpp) and, where ptxas spills, again with the
// register-hungry switches given up in turn (kSpillFallbacks) and given back where they were
// not needed; then asks ptxas once more for the occupancy the shared memory allows. What was
// given up is in CompiledModule::givenUp. The compiles the next decisions may ask for run ahead
// on threads (CompilesAhead.h); the decisions and the code are those of one after the other.
//
//===------------------------------------------------------------------------------------------===//

#include "CompileSteps.h"
#include "CompilesAhead.h"
#include "tile/IR/TileAttrNames.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Interfaces/FunctionInterfaces.h"

#include "llvm/ADT/Twine.h"

using namespace mlir;

/// Bytes of local memory the module's kernels spill to (stores and loads).
static int64_t spillBytes(const tessel::CompiledModule &m) {
  int64_t bytes = 0;
  for (const tessel::KernelResources &r : m.resources)
    bytes += r.spillStoreBytes + r.spillLoadBytes;
  return bytes;
}

/// A copy of `module` whose kernels take their tile.moderate arguments as plain f32 (the generic
/// softmax: a uniform branch on the scale); null when no argument is marked.
static OwningOpRef<ModuleOp> withoutModerateArgs(ModuleOp module) {
  OwningOpRef<ModuleOp> copy(cast<ModuleOp>(module->clone()));
  auto name = StringAttr::get(module.getContext(), tessel::tile::kModerateAttr);
  bool any = false;
  copy->walk([&](FunctionOpInterface fn) {
    for (unsigned i = 0, e = fn.getNumArguments(); i < e; ++i)
      any |= static_cast<bool>(fn.removeArgAttr(i, name));
  });
  return any ? std::move(copy) : OwningOpRef<ModuleOp>();
}

/// Compiles result.ptx again with `.minnctapersm` on the kernels whose registers cap their
/// occupancy below what their shared memory allows (occupancyHint; not the warp-specialised
/// ones, reallocatesRegisters), and keeps the new PTX and cubin when no hinted kernel spills
/// more than before (its spill stores by more than options.occupancySpillBytes); otherwise
/// keeps the first. One more ptxas run for such modules
/// (returns whether it ran), none for the others.
static bool askForOccupancy(tessel::CompiledModule &result, const tessel::TargetOptions &options) {
  tessel::ChipLimits limits = tessel::chipLimits(options.chip);
  auto resourcesOf = [](const tessel::CompiledModule &m,
                        llvm::StringRef name) -> const tessel::KernelResources * {
    for (const tessel::KernelResources &r : m.resources)
      if (r.kernel == name)
        return &r;
    return nullptr;
  };
  std::string hinted = result.ptx;
  llvm::SmallVector<std::pair<std::string, unsigned>> asked;
  for (const tessel::KernelLaunchInfo &kernel : result.kernels) {
    const tessel::KernelResources *used = resourcesOf(result, kernel.name);
    if (!used || tessel::reallocatesRegisters(result.ptx, kernel.name))
      continue;
    if (unsigned ctas = tessel::occupancyHint(limits, kernel, *used,
                                              options.occupancySpillBytes > 0)) {
      hinted = tessel::withMinCtasPerSM(hinted, kernel.name, ctas);
      asked.push_back({kernel.name, ctas});
    }
  }
  if (asked.empty() || hinted == result.ptx)
    return false;
  tessel::CompiledModule again;
  std::string error;
  if (!tessel::runPtxas(hinted, options.chip, options.toolkit, again, error))
    return true;
  for (auto [name, ctas] : asked) {
    const tessel::KernelResources *before = resourcesOf(result, name);
    const tessel::KernelResources *after = resourcesOf(again, name);
    if (!after ||
        after->spillStoreBytes >
            before->spillStoreBytes + static_cast<int64_t>(options.occupancySpillBytes) ||
        (options.occupancySpillBytes == 0 && after->spillLoadBytes > before->spillLoadBytes))
      return true;
  }
  result.ptx = std::move(hinted);
  result.cubin = std::move(again.cubin);
  result.ptxasLog = std::move(again.ptxasLog);
  result.resources = std::move(again.resources);
  return true;
}

namespace tessel {
namespace {
/// What compileModule's spill fallbacks vary: the target options and whether the module's
/// moderate arguments are made generic.
struct Variant {
  TargetOptions options;
  bool genericArgs = false;
};

/// A switch compileModule gives up where the module spills with it.
struct SpillFallback {
  const char *name;
  /// What the PTX holds where the switch took effect (null: no mark to look for).
  const char *ptxMark;
  bool (*get)(const Variant &v);
  void (*set)(Variant &v, bool on);
  /// Kept once compiled without it, whether or not it spills less (the scale fold, below).
  bool givenUpWhenever = false;

  /// Whether `v` has the switch on and `ptx` shows it took effect.
  bool on(const Variant &v, llvm::StringRef ptx) const {
    return get(v) && (!ptxMark || ptx.contains(ptxMark));
  }
};
} // namespace

// A module that spills is compiled again with each switch below given up in turn, in order, and
// a compile is kept where it spills less; once nothing spills, the switches given up before the
// last come back one by one, latest first, where the module still compiles without spilling
// (a gathered relative bias needs the overlap given up, not the scale fold dropped before it). The
// order is what each is worth against what it costs in registers, the least worth first (H200;
// docs/bench/2026-12-04-h200-epilogue-tma.md):
// 0. a warpgroup's branch around the masked blocks its rows cannot see
//    (skip-masked-warpgroups, off by default, not yet measured): the branch joins O's
//    registers, which d256's 128×64 kernel spilled 392 bytes over (none without);
// 0. the next tile's first S issued early (pipeline-tiles, off by default, not yet measured):
//    its accumulator is live across the epilogue (32 bytes of spill on the d128 window +
//    softcap block-mask kernel with it, none without);
// 1. the TMA producer (+2 to +5 % at d128): its per-tile record takes the consumers' registers
//    (d256's overlapped kernel and the block-mask kernels spill with it, not without);
// 2. the scale fold of a moderate argument (tile.moderate: no branch on the scale in the key
//    loop, +1 to +5 %) lets ptxas schedule the loop more freely, which costs where registers
//    are short: a document mask's d128 forward spilled 92 bytes with it and none without; the
//    d128 backward's key-rows program spilled less with it (280 bytes, 340 without) and ran
//    37 % slower (docs/bench/2026-12-04-h200-ncu-profile.md), so the generic form is kept
//    whenever the fold spills;
// 3. the vector stores' quad transpose (+2 to +9 % at d128) holds a row's pairs at once in the
//    epilogue (16 bytes of spill on the 128×128 mma.sync kernel);
// 4. the overlapped consumers (+5 to +10 %) hold S, O and P at once: a score_mod that keeps
//    many values live beside them (a gathered bias, a mask reading a tensor) makes ptxas
//    spill; 376 bytes (a gathered bias) ran 16 % slower overlapped, 16 bytes (a document mask)
//    no faster than the plain schedule (docs/bench/2026-12-03-h200-overlap-consumers.md). The
//    plain schedule as measured has no turns around the softmax: pingpong goes with it.
static const SpillFallback kSpillFallbacks[] = {
    {"skip-masked-warpgroups", nullptr,
     [](const Variant &v) { return v.options.skipMaskedWarpgroups; },
     [](Variant &v, bool on) { v.options.skipMaskedWarpgroups = on; }},
    {"pipeline-tiles", nullptr, [](const Variant &v) { return v.options.pipelineTiles; },
     [](Variant &v, bool on) { v.options.pipelineTiles = on; }},
    {"tma-producer", "cp.async.bulk.tensor", [](const Variant &v) { return v.options.tmaProducer; },
     [](Variant &v, bool on) { v.options.tmaProducer = on; }},
    {"scale fold", nullptr, [](const Variant &v) { return !v.genericArgs; },
     [](Variant &v, bool on) { v.genericArgs = !on; }, /*givenUpWhenever=*/true},
    {"vector-stores", "st.global.v4.b32", [](const Variant &v) { return v.options.vectorStores; },
     [](Variant &v, bool on) { v.options.vectorStores = on; }},
    {"overlap-consumers", "wgmma.wait_group.sync.aligned 1",
     [](const Variant &v) { return v.options.overlapConsumers; },
     [](Variant &v, bool on) { v.options.overlapConsumers = v.options.pingpong = on; }},
};

/// The variants a chain of decisions from `base` may compile, the likeliest first: decision d
/// compiles `base` with steps[d] given back (`on`) or up, and each step before it applied or
/// not, applied first (most of what the search tries, it keeps; the scale fold, once tried,
/// always).
static llvm::SmallVector<Variant>
chainVariants(const Variant &base, llvm::ArrayRef<const SpillFallback *> steps, bool on) {
  llvm::SmallVector<Variant> chain;
  for (unsigned d = 0; d < steps.size(); ++d)
    for (unsigned kept = 1u << d; kept-- > 0;) {
      Variant v = base;
      bool possible = true;
      for (unsigned i = 0; i < d; ++i) {
        if (kept >> i & 1)
          steps[i]->set(v, on);
        else
          possible &= on || !steps[i]->givenUpWhenever;
      }
      if (!possible)
        continue;
      steps[d]->set(v, on);
      chain.push_back(v);
    }
  return chain;
}

FailureOr<CompiledModule> compileModule(ModuleOp module, const TargetOptions &options, Stage stage,
                                        const CompileFlags &flags) {
  FailureOr<CompiledModule> first = compileOnce(module, options, stage, flags);
  if (failed(first) || stage != Stage::Cubin)
    return first;
  CompiledModule result = std::move(*first);
  llvm::SmallVector<StageTime> timings = std::move(result.timings);
  StageClock clock(timings);
  // Without spill fallbacks (a kernel that spills whatever is given up) the first compile is
  // the result: no search, no compiles ahead.
  bool search = options.spillFallbacks && spillBytes(result) > 0;
  OwningOpRef<ModuleOp> generic = search ? withoutModerateArgs(module) : nullptr;
  Variant chosen{options, false};
  // The compiles the next decisions may ask for run beside the search (CompilesAhead.h); not
  // where the passes are timed, whose report is made in the caller's context.
  std::optional<CompilesAhead> ahead;
  if (unsigned threads = compileThreads(); search && threads > 1 && !flags.passTiming)
    ahead.emplace(module, generic ? *generic : ModuleOp(), stage, flags, threads);
  // Starts the compiles of `chain` as threads allow (its first, which the search asks for
  // next, whatever they allow) and stops those started for other decisions.
  auto lookAhead = [&](llvm::ArrayRef<Variant> chain) {
    if (!ahead)
      return;
    llvm::SmallVector<std::pair<TargetOptions, bool>> wanted;
    for (const Variant &v : chain)
      wanted.push_back({v.options, v.genericArgs});
    ahead->keepOnly(wanted);
    for (auto [i, v] : llvm::enumerate(chain))
      ahead->start(v.options, v.genericArgs, /*force=*/i == 0);
  };
  // Compiles `v` (or takes its compile from ahead); keeps it (and returns true) when `keep`
  // holds of its spill bytes.
  auto attempt = [&](const Variant &v, llvm::StringRef lap, auto keep) {
    if (v.genericArgs && !generic)
      return false;
    std::optional<CompiledModule> early = ahead ? ahead->take(v.options, v.genericArgs)
                                                : std::nullopt;
    FailureOr<CompiledModule> again = early ? FailureOr<CompiledModule>(std::move(*early))
                                            : compileOnce(v.genericArgs ? *generic : module,
                                                          v.options, stage, flags);
    clock.lap(lap);
    if (failed(again) || !keep(spillBytes(*again)))
      return false;
    result = std::move(*again);
    chosen = v;
    return true;
  };
  llvm::SmallVector<const SpillFallback *> dropped;
  for (auto [i, fallback] : llvm::enumerate(kSpillFallbacks)) {
    if (!search || spillBytes(result) == 0 || !fallback.on(chosen, result.ptx))
      continue;
    llvm::SmallVector<const SpillFallback *> steps;
    for (const SpillFallback &next : llvm::ArrayRef(kSpillFallbacks).drop_front(i))
      if (next.on(chosen, result.ptx))
        steps.push_back(&next);
    lookAhead(chainVariants(chosen, steps, /*on=*/false));
    Variant without = chosen;
    fallback.set(without, false);
    int64_t before = spillBytes(result);
    if (attempt(without, (llvm::Twine("compile again (spills: no ") + fallback.name + ")").str(),
                [&](int64_t bytes) { return fallback.givenUpWhenever || bytes < before; }))
      dropped.push_back(&fallback);
  }
  if (spillBytes(result) == 0 && dropped.size() > 1) {
    dropped.pop_back(); // the one whose loss took the spill away
    llvm::SmallVector<const SpillFallback *> back(llvm::reverse(dropped));
    for (auto [i, fallback] : llvm::enumerate(back)) {
      lookAhead(chainVariants(chosen, llvm::ArrayRef(back).drop_front(i), /*on=*/true));
      Variant with = chosen;
      fallback->set(with, true);
      attempt(with, (llvm::Twine("compile again (no spill: ") + fallback->name + " back)").str(),
              [](int64_t bytes) { return bytes == 0; });
    }
  }
  if (ahead) {
    std::string lap = "compiles ahead: " + std::to_string(ahead->numStarted()) + " started, " +
                      std::to_string(ahead->numTaken()) + " taken";
    ahead.reset(); // stops those not taken and waits for them
    clock.lap(lap);
  }
  if (options.occupancyHints && askForOccupancy(result, chosen.options))
    clock.lap("ptxas again (occupancy)");
  Variant asked{options, false};
  for (const SpillFallback &fallback : kSpillFallbacks)
    if (fallback.get(asked) && !fallback.get(chosen))
      result.givenUp.push_back(fallback.name);
  result.timings = std::move(timings);
  return result;
}
} // namespace tessel
