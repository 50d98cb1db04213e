//===- FakeCuda.cpp - a no-op CUDA driver for measuring and testing launches ---===//
//
// A test-only stand-in for libcuda.so.1, loaded through TESSEL_LIBCUDA (CudaDriver.cpp opens
// whatever file that names). It exports the driver entry points tessel resolves and does no GPU
// work: cuLaunchKernel counts the launch and remembers its arguments; cuPointerGetAttribute
// answers for a fake device address range. Production code has no hook for it: the driver is
// a table of function pointers filled by dlsym either way, so the launch path measured on this
// library is exactly the one that runs on a GPU, minus the driver's own time.
//
// Devices: TESSEL_FAKE_CUDA_DEVICES (default 2), compute capability TESSEL_FAKE_CUDA_CC
// (default 90). Device d owns the addresses [kBase + d * kSpan, kBase + (d + 1) * kSpan);
// anything else is "host memory" (cuPointerGetAttribute fails, as for a CPU tensor).
//
// Read back from Python with ctypes (test/python/fakecuda.py): tessel_fake_cuda_* below.
//
//===----------------------------------------------------------------------===//

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

namespace {
using CUresult = int;
constexpr CUresult kSuccess = 0, kInvalidValue = 1, kInvalidDevice = 101, kNotFound = 500;
constexpr uint64_t kBase = 0x600000000000ULL, kSpan = 1ULL << 36;
constexpr int kMaxRecorded = 64;

struct Launch {
  void *function, *stream;
  unsigned grid[3], block[3], shared;
  uint64_t params[kMaxRecorded]; // the first `recordParams` 8-byte parameter slots
};

struct Fake {
  int devices = 2, ccMajor = 9, ccMinor = 0;
  uint64_t launches = 0, pointerQueries = 0, modulesLoaded = 0, contextSwitches = 0;
  int recordParams = 0; // how many parameter slots cuLaunchKernel copies into `last`
  CUresult failNextLaunch = 0;
  Launch last{};
  uint64_t nextAlloc[8] = {};
  Fake() {
    if (const char *d = std::getenv("TESSEL_FAKE_CUDA_DEVICES"))
      devices = std::atoi(d);
    if (const char *cc = std::getenv("TESSEL_FAKE_CUDA_CC")) {
      int v = std::atoi(cc);
      ccMajor = v / 10;
      ccMinor = v % 10;
    }
  }
} fake;

thread_local void *current = nullptr;

void *contextOf(int device) { return reinterpret_cast<void *>(uintptr_t(0x1000 + 16 * device)); }

struct Module {
  uint64_t id;
};
} // namespace

extern "C" {
// --- the driver entry points tessel resolves ----------------------------------------------------
CUresult cuInit(unsigned) { return kSuccess; }
CUresult cuDeviceGetCount(int *n) {
  *n = fake.devices;
  return kSuccess;
}
CUresult cuDeviceGet(int *dev, int ordinal) {
  if (ordinal < 0 || ordinal >= fake.devices)
    return kInvalidDevice;
  *dev = ordinal;
  return kSuccess;
}
CUresult cuDeviceGetName(char *name, int len, int dev) {
  std::string s = "tessel fake CUDA device " + std::to_string(dev);
  std::strncpy(name, s.c_str(), size_t(len));
  return kSuccess;
}
CUresult cuDeviceGetAttribute(int *value, int attribute, int) {
  *value = attribute == 75 ? fake.ccMajor : attribute == 76 ? fake.ccMinor : 0;
  return kSuccess;
}
CUresult cuDevicePrimaryCtxRetain(void **ctx, int dev) {
  *ctx = contextOf(dev);
  return kSuccess;
}
CUresult cuCtxSetCurrent(void *ctx) {
  if (ctx != current)
    ++fake.contextSwitches;
  current = ctx;
  return kSuccess;
}
CUresult cuCtxGetCurrent(void **ctx) {
  *ctx = current;
  return kSuccess;
}
CUresult cuCtxSynchronize() { return kSuccess; }
CUresult cuModuleLoadData(void **module, const void *image) {
  if (!image)
    return kInvalidValue;
  *module = new Module{++fake.modulesLoaded};
  return kSuccess;
}
CUresult cuModuleUnload(void *module) {
  delete static_cast<Module *>(module);
  return kSuccess;
}
CUresult cuModuleGetFunction(void **function, void *module, const char *name) {
  if (!module || !name || !*name)
    return kNotFound;
  // One distinct handle per (module, name); never dereferenced.
  *function = reinterpret_cast<void *>((static_cast<Module *>(module)->id << 20) |
                                       (std::hash<std::string>()(name) & 0xFFFF0));
  return kSuccess;
}
CUresult cuFuncSetAttribute(void *, int, int) { return kSuccess; }
CUresult cuMemAlloc_v2(uint64_t *ptr, size_t bytes) {
  int dev = int((reinterpret_cast<uintptr_t>(current) - 0x1000) / 16);
  if (dev < 0 || dev >= fake.devices || dev >= 8)
    dev = 0;
  *ptr = kBase + uint64_t(dev) * kSpan + fake.nextAlloc[dev];
  fake.nextAlloc[dev] += (bytes + 255) & ~size_t(255);
  return kSuccess;
}
CUresult cuMemFree_v2(uint64_t) { return kSuccess; }
CUresult cuMemcpyHtoD_v2(uint64_t, const void *, size_t) { return kSuccess; }
CUresult cuMemcpyDtoH_v2(void *dst, uint64_t, size_t bytes) {
  std::memset(dst, 0, bytes);
  return kSuccess;
}
CUresult cuMemsetD8_v2(uint64_t, unsigned char, size_t) { return kSuccess; }
CUresult cuLaunchKernel(void *function, unsigned gx, unsigned gy, unsigned gz, unsigned bx,
                        unsigned by, unsigned bz, unsigned shared, void *stream, void **params,
                        void **) {
  if (fake.failNextLaunch) {
    CUresult r = fake.failNextLaunch;
    fake.failNextLaunch = 0;
    return r;
  }
  // The real driver's grid limits (compute capability >= 3.0), so a grid it would refuse is
  // refused here too.
  if (gx == 0 || gy == 0 || gz == 0 || gx > 2147483647u || gy > 65535u || gz > 65535u)
    return kInvalidValue;
  ++fake.launches;
  Launch &l = fake.last;
  l.function = function;
  l.stream = stream;
  l.grid[0] = gx, l.grid[1] = gy, l.grid[2] = gz;
  l.block[0] = bx, l.block[1] = by, l.block[2] = bz;
  l.shared = shared;
  // The driver knows the parameter count from the cubin; the fake is told (reading past the
  // kernel's parameters would read past the launcher's array).
  for (int i = 0; i < fake.recordParams; ++i)
    std::memcpy(&l.params[i], params[i], 8);
  return kSuccess;
}
CUresult cuEventCreate(void **event, unsigned) {
  *event = new int(0);
  return kSuccess;
}
CUresult cuEventRecord(void *, void *) { return kSuccess; }
CUresult cuEventElapsedTime(float *ms, void *, void *) {
  *ms = 0;
  return kSuccess;
}
CUresult cuEventDestroy_v2(void *event) {
  delete static_cast<int *>(event);
  return kSuccess;
}
CUresult cuGetErrorString(CUresult r, const char **text) {
  *text = r == kInvalidValue    ? "invalid argument (fake driver)"
          : r == kInvalidDevice ? "invalid device ordinal (fake driver)"
                                : "fake driver error";
  return kSuccess;
}
CUresult cuPointerGetAttribute(void *data, int attribute, uint64_t ptr) {
  ++fake.pointerQueries;
  if (attribute != 9 || ptr < kBase || ptr >= kBase + uint64_t(fake.devices) * kSpan)
    return kInvalidValue;
  *static_cast<int *>(data) = int((ptr - kBase) / kSpan);
  return kSuccess;
}

// --- read-back for tests and the benchmark ------------------------------------------------------
uint64_t tessel_fake_cuda_device_address(int device, uint64_t offset) {
  return kBase + uint64_t(device) * kSpan + offset;
}
uint64_t tessel_fake_cuda_launches() { return fake.launches; }
uint64_t tessel_fake_cuda_pointer_queries() { return fake.pointerQueries; }
uint64_t tessel_fake_cuda_modules_loaded() { return fake.modulesLoaded; }
/// Copies the first `n` (at most 64, at most the kernel's parameter count) 8-byte parameter slots
/// of each later launch into the record tessel_fake_cuda_last reads (function, stream, grid,
/// block and shared memory are always recorded).
void tessel_fake_cuda_record(int n) {
  fake.recordParams = n < 0 ? 0 : n > kMaxRecorded ? kMaxRecorded : n;
}
/// The last recorded launch: function, stream, grid[3], block[3], shared, then the slots.
void tessel_fake_cuda_last(uint64_t *out) {
  const Launch &l = fake.last;
  out[0] = reinterpret_cast<uintptr_t>(l.function);
  out[1] = reinterpret_cast<uintptr_t>(l.stream);
  for (int d = 0; d < 3; ++d) {
    out[2 + d] = l.grid[d];
    out[5 + d] = l.block[d];
  }
  out[8] = l.shared;
  for (int i = 0; i < fake.recordParams; ++i)
    out[9 + i] = l.params[i];
}
void tessel_fake_cuda_fail_next_launch(int code) { fake.failNextLaunch = code; }
void *tessel_fake_cuda_current_context() { return current; }
} // extern "C"
