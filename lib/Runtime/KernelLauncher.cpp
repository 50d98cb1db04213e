//===- KernelLauncher.cpp - compile a tile kernel and run it on the GPU ---===//
//
// Device buffers are allocated per run and freed on every path (a small RAII list); every
// driver call is checked and its failure reported on the module with the call's name.
//
//===----------------------------------------------------------------------===//

#include "tessel/Runtime/KernelLauncher.h"

#include "tessel/Runtime/CudaDriver.h"
#include "tessel/Target/Compile.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"
#include "llvm/ADT/STLExtras.h"

#include <algorithm>

using namespace mlir;
using namespace tessel;
using namespace tessel::runtime;

namespace {
// Frees what was allocated, whatever happens.
struct DeviceAllocations {
  std::vector<cuda::DevicePtr> ptrs;
  cuda::ModuleHandle module = nullptr;
  ~DeviceAllocations() {
    std::string ignored;
    for (cuda::DevicePtr p : ptrs)
      cuda::release(p, ignored);
    if (module)
      cuda::unloadModule(module, ignored);
  }
};
} // namespace

FailureOr<GpuRunResult> tessel::runtime::runOnGpu(ModuleOp module, StringRef name,
                                                  MutableArrayRef<interp::KernelArg> args,
                                                  std::array<int64_t, 3> grid,
                                                  const GpuRunOptions &options) {
  auto fail = [&](const Twine &message) -> FailureOr<GpuRunResult> {
    emitError(module.getLoc()) << message;
    return failure();
  };
  std::string error;
  GpuRunResult result;
  int major = 0, minor = 0;
  if (!cuda::initialize(error) || !cuda::deviceInfo(result.device, major, minor, error))
    return fail(error);
  result.chip = !options.chip.empty() ? options.chip : major >= 9 ? "sm_90a" : "sm_80";

  auto kernel = module.lookupSymbol<func::FuncOp>(name);
  if (!kernel)
    return fail("no kernel @" + name + " in the module");
  SmallVector<Type> params(kernel.getArgumentTypes());

  TargetOptions target;
  target.chip = result.chip;
  target.codegen = options.codegen;
  target.wgmmaOverlap = options.wgmmaOverlap;
  target.occupancyHints = options.occupancyHints;
  FailureOr<CompiledModule> compiled = compileModule(module, target, Stage::Cubin);
  if (failed(compiled))
    return failure();
  const KernelLaunchInfo *launch = nullptr;
  for (const KernelLaunchInfo &k : compiled->kernels)
    if (k.name == name)
      launch = &k;
  if (!launch)
    return fail("the compiled module has no kernel named " + name);
  result.blockSize = launch->blockSize[0] * launch->blockSize[1] * launch->blockSize[2];
  result.dynamicSharedBytes = launch->dynamicSharedBytes;
  for (const KernelResources &r : compiled->resources)
    if (r.kernel == name) {
      result.registers = r.registers;
      result.spillBytes = r.spillStoreBytes + r.spillLoadBytes;
    }

  DeviceAllocations device;
  cuda::FunctionHandle function;
  if (!cuda::loadModule(compiled->cubin, device.module, error) ||
      !cuda::getFunction(device.module, name.str(), function, error))
    return fail(error);
  if (launch->dynamicSharedBytes > 0 &&
      !cuda::setDynamicSharedMemory(function, launch->dynamicSharedBytes, error))
    return fail(error);

  // Kernel parameters in signature order: a device pointer per buffer, scalars by value.
  std::vector<cuda::DevicePtr> pointers(args.size(), 0);
  std::vector<int64_t> ints(args.size(), 0);
  std::vector<double> doubles(args.size(), 0);
  std::vector<int32_t> ints32(args.size(), 0);
  std::vector<float> floats(args.size(), 0);
  std::vector<void *> argv(args.size(), nullptr);
  for (auto [i, arg] : llvm::enumerate(args)) {
    Type type = params[i];
    if (arg.kind == interp::KernelArg::Kind::Buffer) {
      std::vector<uint8_t> &bytes = arg.buffer.bytes();
      if (!cuda::allocate(bytes.size(), pointers[i], error))
        return fail(error);
      device.ptrs.push_back(pointers[i]);
      bool isOutput = llvm::is_contained(options.outputs, i);
      if (!(isOutput ? cuda::fill(pointers[i], 0xFF, bytes.size(), error)
                     : cuda::copyToDevice(pointers[i], bytes.data(), bytes.size(), error)))
        return fail(error);
      argv[i] = &pointers[i];
    } else if (type.isInteger(32)) {
      ints32[i] = static_cast<int32_t>(arg.intValue);
      argv[i] = &ints32[i];
    } else if (type.isInteger(64) || type.isIndex()) {
      ints[i] = arg.intValue;
      argv[i] = &ints[i];
    } else if (type.isF32()) {
      floats[i] = static_cast<float>(arg.floatValue);
      argv[i] = &floats[i];
    } else if (type.isF64()) {
      doubles[i] = arg.floatValue;
      argv[i] = &doubles[i];
    } else {
      return fail("cannot pass parameter #" + Twine(i) + " to a GPU kernel");
    }
  }

  unsigned gridDims[3], blockDims[3];
  for (int d = 0; d < 3; ++d) {
    gridDims[d] = static_cast<unsigned>(grid[d]);
    blockDims[d] = launch->blockSize[d];
  }
  unsigned shared = static_cast<unsigned>(launch->dynamicSharedBytes);
  if (!cuda::launch(function, gridDims, blockDims, shared, argv, error) ||
      !cuda::synchronize(error))
    return fail(error);
  for (auto [i, arg] : llvm::enumerate(args))
    if (arg.kind == interp::KernelArg::Kind::Buffer &&
        !cuda::copyToHost(arg.buffer.bytes().data(), pointers[i], arg.buffer.bytes().size(), error))
      return fail(error);

  if (options.repeats > 0) {
    for (unsigned r = 0; r < options.warmup; ++r)
      if (!cuda::launch(function, gridDims, blockDims, shared, argv, error))
        return fail(error);
    std::vector<float> times;
    cuda::EventHandle start, end;
    if (!cuda::createEvent(start, error) || !cuda::createEvent(end, error))
      return fail(error);
    for (unsigned r = 0; r < options.repeats; ++r) {
      float ms = 0;
      if (!cuda::recordEvent(start, error) ||
          !cuda::launch(function, gridDims, blockDims, shared, argv, error) ||
          !cuda::recordEvent(end, error) || !cuda::synchronize(error) ||
          !cuda::elapsedMs(start, end, ms, error))
        return fail(error);
      times.push_back(ms);
    }
    cuda::destroyEvent(start, error);
    cuda::destroyEvent(end, error);
    std::nth_element(times.begin(), times.begin() + times.size() / 2, times.end());
    result.medianMs = times[times.size() / 2];
  }
  return result;
}
