//===- CacheModule.cpp - kernel cache and GPU compile bindings ------------===//
//
// The part of tessel._tessel the JIT's disk cache and the AOT driver use: `KernelCache` (the C++
// on-disk cache of lib/Runtime), `KernelBuilder.compile_gpu` (tile module → PTX + cubin + launch
// needs), the canonical string of the code-changing target options, and the versions that go
// into every cache key (LLVM; ptxas is found here and asked by the Python side).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "tessel/Runtime/KernelCache.h"
#include "tessel/Target/Compile.h"

#include "llvm/Config/llvm-config.h"

#if defined(__linux__)
#include <dlfcn.h>
#include <elf.h>
#include <link.h>
#endif

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

namespace py = pybind11;
using tessel::python::KernelBuilder;
using tessel::runtime::KernelCache;

namespace tessel::python {
void bindCache(py::module &m, py::class_<KernelBuilder> &builder);
} // namespace tessel::python

namespace {
/// TargetOptions from keyword arguments named as GpuOptions' fields (python/tessel/cache.py),
/// the others at their defaults. A name TargetOptions does not have is a TypeError: a field
/// added in Python but not here would otherwise compile without it.
tessel::TargetOptions targetOptions(const py::kwargs &fields) {
  using T = tessel::TargetOptions;
  static const std::pair<const char *, std::string T::*> kStrings[] = {{"chip", &T::chip},
                                                                       {"features", &T::features},
                                                                       {"codegen", &T::codegen},
                                                                       {"toolkit", &T::toolkit}};
  static const std::pair<const char *, unsigned T::*> kNumbers[] = {
      {"num_threads", &T::numThreads},
      {"num_stages", &T::numStages},
      {"occupancy_spill_bytes", &T::occupancySpillBytes}};
  static const std::pair<const char *, bool T::*> kSwitches[] = {
      {"wgmma_overlap", &T::wgmmaOverlap},
      {"wgmma_async_dots", &T::wgmmaAsyncDots},
      {"occupancy_hints", &T::occupancyHints},
      {"sink_waits", &T::sinkWaits},
      {"warp_specialize", &T::warpSpecialize},
      {"overlap_consumers", &T::overlapConsumers},
      {"pingpong", &T::pingpong},
      {"producer_once", &T::producerOnce},
      {"tma_producer", &T::tmaProducer},
      {"tma_only", &T::tmaOnly},
      {"vector_stores", &T::vectorStores},
      {"trim_zero_columns", &T::trimZeroColumns},
      {"trim_output_columns", &T::trimOutputColumns},
      {"pipeline_tiles", &T::pipelineTiles},
      {"late_p", &T::lateP},
      {"rescale_under_s", &T::rescaleUnderS},
      {"drop_tma_fences", &T::dropTmaFences},
      {"fp8_overlap", &T::fp8Overlap},
      {"fuse_masked_loops", &T::fuseMaskedLoops},
      {"sync_masked_loops", &T::syncMaskedLoops},
      {"skip_masked_warpgroups", &T::skipMaskedWarpgroups},
      {"spill_fallbacks", &T::spillFallbacks}};
  T options;
  auto set = [&](const auto &table, const std::string &name, py::handle value) {
    for (const auto &[field, member] : table)
      if (name == field) {
        options.*member = value.cast<std::remove_reference_t<decltype(options.*member)>>();
        return true;
      }
    return false;
  };
  for (auto [key, value] : fields) {
    std::string name = py::str(key);
    if (!set(kStrings, name, value) && !set(kNumbers, name, value) && !set(kSwitches, name, value))
      throw py::type_error("unknown GPU compile option '" + name + "'");
  }
  return options;
}

#if defined(__linux__)
/// The build id note (NT_GNU_BUILD_ID) of the loaded ELF object that holds `address`, in hex;
/// read from the object's PT_NOTE segments in memory, so nothing is read from disk.
std::string elfBuildIdOf(const void *address) {
  Dl_info info;
  if (!dladdr(address, &info) || !info.dli_fbase)
    return {};
  struct Search {
    const void *base;
    std::string hex;
  } search{info.dli_fbase, {}};
  dl_iterate_phdr(
      [](struct dl_phdr_info *object, size_t, void *data) -> int {
        auto *s = static_cast<Search *>(data);
        // The object whose first PT_LOAD maps at its load base is ours.
        bool ours = false;
        for (int i = 0; i < object->dlpi_phnum && !ours; ++i)
          if (object->dlpi_phdr[i].p_type == PT_LOAD)
            ours = reinterpret_cast<const char *>(object->dlpi_addr) +
                       object->dlpi_phdr[i].p_vaddr - object->dlpi_phdr[i].p_offset ==
                   s->base;
        if (!ours)
          return 0;
        for (int i = 0; i < object->dlpi_phnum; ++i) {
          const ElfW(Phdr) &ph = object->dlpi_phdr[i];
          if (ph.p_type != PT_NOTE)
            continue;
          const char *p = reinterpret_cast<const char *>(object->dlpi_addr + ph.p_vaddr);
          const char *end = p + ph.p_memsz;
          while (p + sizeof(ElfW(Nhdr)) <= end) {
            auto *note = reinterpret_cast<const ElfW(Nhdr) *>(p);
            const char *name = p + sizeof(ElfW(Nhdr));
            const char *desc = name + ((note->n_namesz + 3) & ~3u);
            const char *next = desc + ((note->n_descsz + 3) & ~3u);
            if (next > end)
              break;
            if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 &&
                std::string(name, 3) == "GNU") {
              static const char digits[] = "0123456789abcdef";
              for (unsigned j = 0; j < note->n_descsz; ++j) {
                unsigned char byte = static_cast<unsigned char>(desc[j]);
                s->hex += digits[byte >> 4];
                s->hex += digits[byte & 15];
              }
              return 1;
            }
            p = next;
          }
        }
        return 1;
      },
      &search);
  return search.hex;
}
#endif

/// The build id the linker wrote into this extension (python/CMakeLists.txt asks for SHA-1 of
/// the output), or "" where there is none: the cache then hashes the file.
std::string extensionBuildId() {
#if defined(__linux__)
  static const std::string id = elfBuildIdOf(reinterpret_cast<const void *>(&extensionBuildId));
  return id;
#else
  return {};
#endif
}

py::dict entryDict(const tessel::runtime::CacheEntry &e) {
  py::dict d;
  d["key"] = e.key;
  d["cubin"] = py::bytes(e.cubin);
  d["ptx"] = e.ptx;
  d["manifest"] = e.manifest;
  return d;
}
} // namespace

void tessel::python::bindCache(py::module &m, py::class_<KernelBuilder> &builder) {
  m.attr("llvm_version") = LLVM_VERSION_STRING;
  m.def("build_id", &extensionBuildId,
        "The ELF build id of this extension in hex (a hash of the linked binary, written by the "
        "linker), or '' when the binary has none.");
  m.def(
      "find_ptxas", [](const std::string &toolkit) { return tessel::findPtxas(toolkit); },
      py::arg("toolkit") = "", "The ptxas tessel would run (empty if none).");
  m.def(
      "target_options_key",
      [](const py::kwargs &fields) { return tessel::codeOptionsKey(targetOptions(fields)); },
      "The canonical string of the code-changing target options, from GpuOptions' fields as "
      "keyword arguments (the toolkit is not in it).");
  m.def("sha256", [](py::bytes data) { return tessel::runtime::sha256Hex(std::string(data)); });

  builder.def(
      "compile_gpu",
      [](KernelBuilder &kb, bool passTiming, const py::kwargs &fields) {
        tessel::TargetOptions options = targetOptions(fields);
        GpuCompileResult r;
        {
          py::gil_scoped_release release;
          r = kb.compileForGpu(options, passTiming);
        }
        py::dict out;
        py::list diags;
        for (const Diagnostic &d : r.diagnostics)
          diags.append(py::make_tuple(d.severity, d.message, d.file, d.line, d.column));
        out["diagnostics"] = diags;
        out["ok"] = r.ok;
        py::list timings;
        for (const tessel::StageTime &t : r.compiled.timings)
          timings.append(py::make_tuple(t.name, t.seconds));
        out["timings"] = timings;
        out["pass_timing"] = r.compiled.passTimingReport;
        if (!r.ok)
          return out;
        out["ptx"] = r.compiled.ptx;
        out["cubin"] = py::bytes(r.compiled.cubin);
        out["ptxas_log"] = r.compiled.ptxasLog;
        py::list givenUp;
        for (const std::string &name : r.compiled.givenUp)
          givenUp.append(name);
        out["given_up"] = givenUp;
        py::list kernels;
        for (const tessel::KernelLaunchInfo &k : r.compiled.kernels) {
          py::dict kd;
          kd["name"] = k.name;
          kd["block"] = py::make_tuple(k.blockSize[0], k.blockSize[1], k.blockSize[2]);
          kd["dynamic_shared_bytes"] = k.dynamicSharedBytes;
          for (const tessel::KernelResources &res : r.compiled.resources)
            if (res.kernel == k.name) {
              kd["registers"] = res.registers;
              kd["static_shared_bytes"] = res.sharedBytes;
              kd["spill_bytes"] = res.spillStoreBytes + res.spillLoadBytes;
            }
          kernels.append(kd);
        }
        out["kernels"] = kernels;
        return out;
      },
      py::arg("pass_timing") = false,
      "Compiles the module to PTX and a cubin with the target options given as GpuOptions' fields "
      "(keyword arguments; the others at TargetOptions' defaults): a dict with ok, diagnostics, "
      "ptx, cubin, "
      "ptxas_log, kernels, timings ([(step, seconds)] of the C++ compile) and pass_timing "
      "(MLIR's pass timing report when pass_timing=True).");

  py::class_<KernelCache>(m, "KernelCache")
      .def(py::init<std::string>(), py::arg("directory"))
      .def_static("default_directory", &KernelCache::defaultDirectory)
      .def_property_readonly("directory", &KernelCache::directory)
      .def(
          "lookup",
          [](KernelCache &c, const std::string &key) {
            std::string problem;
            std::optional<tessel::runtime::CacheEntry> e;
            {
              py::gil_scoped_release release;
              e = c.lookup(key, &problem);
            }
            return py::make_tuple(e ? py::object(entryDict(*e)) : py::object(py::none()), problem);
          },
          py::arg("key"),
          "(entry dict or None, problem): `problem` says why a bad entry was discarded.")
      .def(
          "store",
          [](KernelCache &c, const std::string &key, py::bytes cubin, const std::string &ptx,
             const std::string &metadata) {
            std::string warning, cubinBytes(cubin);
            tessel::runtime::StoreResult r;
            {
              py::gil_scoped_release release;
              r = c.store(key, cubinBytes, ptx, metadata, warning);
            }
            const char *what = r == tessel::runtime::StoreResult::Written ? "written"
                               : r == tessel::runtime::StoreResult::AlreadyPresent
                                   ? "already-present"
                                   : "memory";
            return py::make_tuple(what, warning);
          },
          py::arg("key"), py::arg("cubin"), py::arg("ptx"), py::arg("metadata"),
          "(\"written\" | \"already-present\" | \"memory\", warning or \"\").")
      .def("list",
           [](const KernelCache &c) {
             py::list out;
             for (const tessel::runtime::CacheEntryInfo &i : c.list()) {
               py::dict d;
               d["key"] = i.key;
               d["path"] = i.path;
               d["kernel"] = i.kernel;
               d["chip"] = i.chip;
               d["manifest"] = i.manifest;
               d["bytes"] = i.bytes;
               d["created"] = i.created;
               d["problem"] = i.problem;
               d["temporary"] = i.temporary;
               out.append(d);
             }
             return out;
           })
      .def("remove",
           [](KernelCache &c, const std::string &name) {
             std::string error;
             if (!c.remove(name, error))
               throw std::runtime_error(error);
           })
      .def("clear", &KernelCache::clear);
}
