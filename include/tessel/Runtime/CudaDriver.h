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
