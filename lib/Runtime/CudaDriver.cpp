//===- CudaDriver.cpp - the CUDA driver, opened at run time ---------------===//
//
// The driver API is C with stable entry points; we declare the handful of signatures we call
// ourselves (no cuda.h needed at build time) and resolve their versioned symbols with dlsym.
//
//===----------------------------------------------------------------------===//

#include "tessel/Runtime/CudaDriver.h"

#include <array>
#include <atomic>
#include <cstdlib>
#include <dlfcn.h>
#include <mutex>

using namespace tessel;

namespace {
using CUresult = int;
using CUdevice = int;
using CUcontext = void *;

// The entry points, by the names the driver exports (the _v2 ABI where there is one).
struct Api {
  CUresult (*cuInit)(unsigned);
  CUresult (*cuDeviceGet)(CUdevice *, int);
  CUresult (*cuDeviceGetName)(char *, int, CUdevice);
  CUresult (*cuDeviceGetAttribute)(int *, int, CUdevice);
  CUresult (*cuDevicePrimaryCtxRetain)(CUcontext *, CUdevice);
  CUresult (*cuCtxSetCurrent)(CUcontext);
  CUresult (*cuModuleLoadData)(void **, const void *);
  CUresult (*cuModuleUnload)(void *);
  CUresult (*cuModuleGetFunction)(void **, void *, const char *);
  CUresult (*cuFuncSetAttribute)(void *, int, int);
  CUresult (*cuMemAlloc)(cuda::DevicePtr *, size_t);
  CUresult (*cuMemFree)(cuda::DevicePtr);
  CUresult (*cuMemcpyHtoD)(cuda::DevicePtr, const void *, size_t);
  CUresult (*cuMemcpyDtoH)(void *, cuda::DevicePtr, size_t);
  CUresult (*cuMemsetD8)(cuda::DevicePtr, unsigned char, size_t);
  CUresult (*cuLaunchKernel)(void *, unsigned, unsigned, unsigned, unsigned, unsigned, unsigned,
                             unsigned, void *, void **, void **);
  CUresult (*cuCtxSynchronize)();
  CUresult (*cuEventCreate)(void **, unsigned);
  CUresult (*cuEventRecord)(void *, void *);
  CUresult (*cuEventElapsedTime)(float *, void *, void *);
  CUresult (*cuEventDestroy)(void *);
  CUresult (*cuGetErrorString)(CUresult, const char **);
  CUresult (*cuDeviceGetCount)(int *);
  CUresult (*cuCtxGetCurrent)(CUcontext *);
  CUresult (*cuPointerGetAttribute)(void *, int, cuda::DevicePtr);
};

constexpr int kAttrComputeCapabilityMajor = 75;
constexpr int kAttrComputeCapabilityMinor = 76;
constexpr int kFuncAttrMaxDynamicSharedMemory = 8;
constexpr int kPointerAttrDeviceOrdinal = 9; // CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL
constexpr int kMaxDevices = 64;

struct State {
  Api api{};
  bool ok = false;
  std::string error;
  CUdevice device = 0;
  int deviceCount = 0;
  // Primary contexts, retained on first use; read without a lock on the launch path.
  std::array<std::atomic<CUcontext>, kMaxDevices> primary{};
  std::mutex primaryMutex;
};

template <typename Fn>
bool resolve(void *lib, const char *name, Fn &fn, std::string &error) {
  fn = reinterpret_cast<Fn>(dlsym(lib, name));
  if (!fn)
    error = std::string("libcuda has no symbol ") + name;
  return fn != nullptr;
}

State &openState() {
  static State s;
  static std::once_flag once;
  std::call_once(once, [] {
    const char *override = std::getenv("TESSEL_LIBCUDA");
    std::string path = override && *override ? override : "libcuda.so.1";
    void *lib = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!lib) {
      s.error = "no CUDA driver (" + path + " could not be opened)";
      return;
    }
    Api &a = s.api;
    std::string &e = s.error;
    bool ok = resolve(lib, "cuInit", a.cuInit, e) &&
              resolve(lib, "cuDeviceGet", a.cuDeviceGet, e) &&
              resolve(lib, "cuDeviceGetName", a.cuDeviceGetName, e) &&
              resolve(lib, "cuDeviceGetAttribute", a.cuDeviceGetAttribute, e) &&
              resolve(lib, "cuDevicePrimaryCtxRetain", a.cuDevicePrimaryCtxRetain, e) &&
              resolve(lib, "cuCtxSetCurrent", a.cuCtxSetCurrent, e) &&
              resolve(lib, "cuModuleLoadData", a.cuModuleLoadData, e) &&
              resolve(lib, "cuModuleUnload", a.cuModuleUnload, e) &&
              resolve(lib, "cuModuleGetFunction", a.cuModuleGetFunction, e) &&
              resolve(lib, "cuFuncSetAttribute", a.cuFuncSetAttribute, e) &&
              resolve(lib, "cuMemAlloc_v2", a.cuMemAlloc, e) &&
              resolve(lib, "cuMemFree_v2", a.cuMemFree, e) &&
              resolve(lib, "cuMemcpyHtoD_v2", a.cuMemcpyHtoD, e) &&
              resolve(lib, "cuMemcpyDtoH_v2", a.cuMemcpyDtoH, e) &&
              resolve(lib, "cuMemsetD8_v2", a.cuMemsetD8, e) &&
              resolve(lib, "cuLaunchKernel", a.cuLaunchKernel, e) &&
              resolve(lib, "cuCtxSynchronize", a.cuCtxSynchronize, e) &&
              resolve(lib, "cuEventCreate", a.cuEventCreate, e) &&
              resolve(lib, "cuEventRecord", a.cuEventRecord, e) &&
              resolve(lib, "cuEventElapsedTime", a.cuEventElapsedTime, e) &&
              resolve(lib, "cuEventDestroy_v2", a.cuEventDestroy, e) &&
              resolve(lib, "cuGetErrorString", a.cuGetErrorString, e) &&
              resolve(lib, "cuDeviceGetCount", a.cuDeviceGetCount, e) &&
              resolve(lib, "cuCtxGetCurrent", a.cuCtxGetCurrent, e) &&
              resolve(lib, "cuPointerGetAttribute", a.cuPointerGetAttribute, e);
    if (!ok)
      return;
    CUresult r = a.cuInit(0);
    if (r != 0) {
      const char *text = nullptr;
      a.cuGetErrorString(r, &text);
      s.error = "the CUDA driver is present but cuInit failed: " +
                std::string(r == 34 ? "it is the toolkit's stub library, not a driver"
                            : text  ? text
                                    : "unknown error") +
                " (" + std::to_string(r) + ")";
      return;
    }
    CUcontext ctx = nullptr;
    if (a.cuDeviceGetCount(&s.deviceCount) != 0 || s.deviceCount < 1 ||
        a.cuDeviceGet(&s.device, 0) != 0 || a.cuDevicePrimaryCtxRetain(&ctx, s.device) != 0) {
      s.error = "the CUDA driver is present but found no usable device";
      return;
    }
    s.primary[0].store(ctx);
    // Make device 0 current only where nothing is (tools); never replace the caller's context.
    CUcontext current = nullptr;
    if (a.cuCtxGetCurrent(&current) == 0 && current == nullptr)
      a.cuCtxSetCurrent(ctx);
    s.ok = true;
  });
  return s;
}

// Called several times per launch: after the first call one acquire load. (std::call_once on
// every call cost a thread-local store and a pthread_once each in libstdc++: ~10 % of the host
// time of a launch above the driver.)
State &state() {
  static std::atomic<State *> opened{nullptr};
  if (State *s = opened.load(std::memory_order_acquire))
    return *s;
  State &s = openState();
  opened.store(&s, std::memory_order_release);
  return s;
}

// Turns a CUresult into `call: message`; true on success.
bool check(CUresult result, const char *call, std::string &error) {
  if (result == 0)
    return true;
  const char *text = nullptr;
  if (state().api.cuGetErrorString)
    state().api.cuGetErrorString(result, &text);
  error = std::string(call) + " failed: " + (text ? text : "unknown CUDA error") + " (" +
          std::to_string(result) + ")";
  return false;
}

bool ready(std::string &error) {
  if (!state().ok)
    error = state().error;
  return state().ok;
}
} // namespace

bool cuda::initialize(std::string &error) { return ready(error); }

bool cuda::deviceCount(int &count, std::string &error) {
  if (!ready(error))
    return false;
  count = state().deviceCount;
  return true;
}

namespace {
CUcontext primaryContext(int device, std::string &error) {
  State &s = state();
  if (device < 0 || device >= s.deviceCount || device >= kMaxDevices) {
    error = "no CUDA device " + std::to_string(device) + " (the driver sees " +
            std::to_string(s.deviceCount) + ")";
    return nullptr;
  }
  CUcontext ctx = s.primary[device].load(std::memory_order_acquire);
  if (ctx)
    return ctx;
  std::lock_guard<std::mutex> lock(s.primaryMutex);
  ctx = s.primary[device].load();
  if (ctx)
    return ctx;
  CUdevice dev = 0;
  if (!check(s.api.cuDeviceGet(&dev, device), "cuDeviceGet", error) ||
      !check(s.api.cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain", error))
    return nullptr;
  s.primary[device].store(ctx, std::memory_order_release);
  return ctx;
}
} // namespace

bool cuda::deviceInfo(int device, std::string &name, int &major, int &minor, std::string &error) {
  if (!ready(error))
    return false;
  if (device < 0 || device >= state().deviceCount) {
    error = "no CUDA device " + std::to_string(device) + " (the driver sees " +
            std::to_string(state().deviceCount) + ")";
    return false;
  }
  char buf[256] = {};
  Api &a = state().api;
  CUdevice dev = 0;
  return check(a.cuDeviceGet(&dev, device), "cuDeviceGet", error) &&
         check(a.cuDeviceGetName(buf, sizeof(buf) - 1, dev), "cuDeviceGetName", error) &&
         check(a.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, dev),
               "cuDeviceGetAttribute", error) &&
         check(a.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, dev),
               "cuDeviceGetAttribute", error) &&
         (name = buf, true);
}

bool cuda::makeCurrent(int device, void *&previous, bool &changed, std::string &error) {
  changed = false;
  previous = nullptr;
  if (!ready(error))
    return false;
  CUcontext ctx = primaryContext(device, error);
  if (!ctx)
    return false;
  Api &a = state().api;
  if (!check(a.cuCtxGetCurrent(&previous), "cuCtxGetCurrent", error))
    return false;
  if (previous == ctx)
    return true;
  if (!check(a.cuCtxSetCurrent(ctx), "cuCtxSetCurrent", error))
    return false;
  changed = true;
  return true;
}

void cuda::restoreContext(void *previous) {
  // Restoring "no context" is what the caller had too.
  state().api.cuCtxSetCurrent(previous);
}

bool cuda::loadModule(int device, const std::string &cubin, ModuleHandle &module,
                      std::string &error) {
  void *previous;
  bool changed;
  if (!makeCurrent(device, previous, changed, error))
    return false;
  bool ok = check(state().api.cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData", error);
  if (changed)
    restoreContext(previous);
  return ok;
}

bool cuda::pointerDevice(DevicePtr ptr, int &device) {
  return state().ok &&
         state().api.cuPointerGetAttribute(&device, kPointerAttrDeviceOrdinal, ptr) == 0;
}

bool cuda::launchOnStream(FunctionHandle function, const unsigned grid[3], const unsigned block[3],
                          unsigned sharedBytes, void *stream, void **args, std::string &error) {
  return check(state().api.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                                          block[2], sharedBytes, stream, args, nullptr),
               "cuLaunchKernel", error);
}

bool cuda::deviceInfo(std::string &name, int &major, int &minor, std::string &error) {
  if (!ready(error))
    return false;
  char buf[256] = {};
  Api &a = state().api;
  return check(a.cuDeviceGetName(buf, sizeof(buf) - 1, state().device), "cuDeviceGetName", error) &&
         check(a.cuDeviceGetAttribute(&major, kAttrComputeCapabilityMajor, state().device),
               "cuDeviceGetAttribute", error) &&
         check(a.cuDeviceGetAttribute(&minor, kAttrComputeCapabilityMinor, state().device),
               "cuDeviceGetAttribute", error) &&
         (name = buf, true);
}

bool cuda::loadModule(const std::string &cubin, ModuleHandle &module, std::string &error) {
  return ready(error) &&
         check(state().api.cuModuleLoadData(&module, cubin.data()), "cuModuleLoadData", error);
}

bool cuda::unloadModule(ModuleHandle module, std::string &error) {
  return ready(error) && check(state().api.cuModuleUnload(module), "cuModuleUnload", error);
}

bool cuda::getFunction(ModuleHandle module, const std::string &name, FunctionHandle &function,
                       std::string &error) {
  return ready(error) && check(state().api.cuModuleGetFunction(&function, module, name.c_str()),
                               ("cuModuleGetFunction(" + name + ")").c_str(), error);
}

bool cuda::setDynamicSharedMemory(FunctionHandle function, int bytes, std::string &error) {
  return ready(error) &&
         check(state().api.cuFuncSetAttribute(function, kFuncAttrMaxDynamicSharedMemory, bytes),
               "cuFuncSetAttribute(MAX_DYNAMIC_SHARED_SIZE_BYTES)", error);
}

bool cuda::allocate(size_t bytes, DevicePtr &ptr, std::string &error) {
  return ready(error) &&
         check(state().api.cuMemAlloc(&ptr, bytes ? bytes : 1), "cuMemAlloc", error);
}

bool cuda::release(DevicePtr ptr, std::string &error) {
  return ready(error) && check(state().api.cuMemFree(ptr), "cuMemFree", error);
}

bool cuda::copyToDevice(DevicePtr dst, const void *src, size_t bytes, std::string &error) {
  return ready(error) && check(state().api.cuMemcpyHtoD(dst, src, bytes), "cuMemcpyHtoD", error);
}

bool cuda::copyToHost(void *dst, DevicePtr src, size_t bytes, std::string &error) {
  return ready(error) && check(state().api.cuMemcpyDtoH(dst, src, bytes), "cuMemcpyDtoH", error);
}

bool cuda::fill(DevicePtr dst, uint8_t value, size_t bytes, std::string &error) {
  return ready(error) && check(state().api.cuMemsetD8(dst, value, bytes), "cuMemsetD8", error);
}

bool cuda::launch(FunctionHandle function, const unsigned grid[3], const unsigned block[3],
                  unsigned sharedBytes, std::vector<void *> &args, std::string &error) {
  return ready(error) &&
         check(state().api.cuLaunchKernel(function, grid[0], grid[1], grid[2], block[0], block[1],
                                          block[2], sharedBytes, nullptr, args.data(), nullptr),
               "cuLaunchKernel", error);
}

bool cuda::synchronize(std::string &error) {
  return ready(error) && check(state().api.cuCtxSynchronize(), "cuCtxSynchronize", error);
}

bool cuda::createEvent(EventHandle &event, std::string &error) {
  return ready(error) && check(state().api.cuEventCreate(&event, 0), "cuEventCreate", error);
}

bool cuda::recordEvent(EventHandle event, std::string &error) {
  return ready(error) && check(state().api.cuEventRecord(event, nullptr), "cuEventRecord", error);
}

bool cuda::elapsedMs(EventHandle start, EventHandle end, float &ms, std::string &error) {
  return ready(error) &&
         check(state().api.cuEventElapsedTime(&ms, start, end), "cuEventElapsedTime", error);
}

bool cuda::destroyEvent(EventHandle event, std::string &error) {
  return ready(error) && check(state().api.cuEventDestroy(event), "cuEventDestroy", error);
}
