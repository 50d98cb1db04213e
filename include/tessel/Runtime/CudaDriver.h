//===- CudaDriver.h - the CUDA driver, opened at run time -------*- C++ -*-===//
//
// tessel never links libcuda: the compiler must work on machines without a GPU (the build
// machine, CI). This wrapper opens libcuda.so.1 on first use, resolves the few driver entry
// points tessel needs, and turns every CUresult into a message naming the call that failed.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_RUNTIME_CUDADRIVER_H
#define TESSEL_RUNTIME_CUDADRIVER_H

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

namespace tessel::cuda {

/// Opaque driver handles (CUmodule, CUfunction, CUdeviceptr, CUevent).
using ModuleHandle = void *;
using FunctionHandle = void *;
using EventHandle = void *;
using DevicePtr = uint64_t;

/// Opens the driver and the primary context of device 0 once. Returns false with a reason when
/// there is no driver or no device; every later call then fails with the same reason.
bool initialize(std::string &error);

/// The device's name and compute capability, e.g. "NVIDIA H200", 9, 0.
bool deviceInfo(std::string &name, int &major, int &minor, std::string &error);

bool loadModule(const std::string &cubin, ModuleHandle &module, std::string &error);
bool unloadModule(ModuleHandle module, std::string &error);
bool getFunction(ModuleHandle module, const std::string &name, FunctionHandle &function,
                 std::string &error);
/// Allows `bytes` of dynamic shared memory (needed above 48 KiB).
bool setDynamicSharedMemory(FunctionHandle function, int bytes, std::string &error);

bool allocate(size_t bytes, DevicePtr &ptr, std::string &error);
bool release(DevicePtr ptr, std::string &error);
bool copyToDevice(DevicePtr dst, const void *src, size_t bytes, std::string &error);
bool copyToHost(void *dst, DevicePtr src, size_t bytes, std::string &error);
/// Fills `bytes` with `value` bytes (used to poison outputs before a run).
bool fill(DevicePtr dst, uint8_t value, size_t bytes, std::string &error);

/// --- Several devices, streams (the Python launcher) ------------------------------------------
/// The driver is libcuda.so.1, or the file $TESSEL_LIBCUDA names (tests point it at the stub).

/// How many devices the driver sees.
bool deviceCount(int &count, std::string &error);
/// deviceInfo of device `device` (an ordinal, as torch's cuda:N).
bool deviceInfo(int device, std::string &name, int &major, int &minor, std::string &error);

/// Makes the primary context of `device` current on this thread (retained on first use: the
/// context torch and the CUDA runtime use). `previous` receives the context that was current and
/// `changed` whether it differed; give both to restoreContext afterwards so that the caller's
/// notion of the current device (torch's) is untouched.
bool makeCurrent(int device, void *&previous, bool &changed, std::string &error);
void restoreContext(void *previous);

/// Loads a cubin into the primary context of `device`.
bool loadModule(int device, const std::string &cubin, ModuleHandle &module, std::string &error);

/// The device ordinal of `ptr` if the driver knows it as device (or mapped) memory; false for
/// host memory it does not know (a CPU tensor). Cheap: no error string on the fast path.
bool pointerDevice(DevicePtr ptr, int &device);

/// Launches on `stream` (a CUstream; 0 is the legacy default stream). `args[i]` points at the
/// i-th kernel parameter's value.
bool launchOnStream(FunctionHandle function, const unsigned grid[3], const unsigned block[3],
                    unsigned sharedBytes, void *stream, void **args, std::string &error);

/// Launches on the default stream; `args[i]` points at the i-th kernel parameter's value.
bool launch(FunctionHandle function, const unsigned grid[3], const unsigned block[3],
            unsigned sharedBytes, std::vector<void *> &args, std::string &error);
bool synchronize(std::string &error);

bool createEvent(EventHandle &event, std::string &error);
bool recordEvent(EventHandle event, std::string &error);
bool elapsedMs(EventHandle start, EventHandle end, float &ms, std::string &error);
bool destroyEvent(EventHandle event, std::string &error);

} // namespace tessel::cuda

#endif // TESSEL_RUNTIME_CUDADRIVER_H
