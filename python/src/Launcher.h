//===- Launcher.h - one compiled kernel, launched from Python -------*- C++ -*-===//
//
// The C++ side of `kernel[grid](...)` on CUDA tensors (LaunchModule.cpp binds it as
// tessel._tessel.Launcher; DispatchModule.cpp calls `launch` directly on a cache hit). A Launcher
// holds one compiled kernel: its cubin (loaded once per device, on first use), its block size,
// its dynamic shared memory and an argument packing plan (one entry per kernel parameter: a
// pointer, an i32 or an f32). Everything here runs with the GIL held.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_PYTHON_LAUNCHER_H
#define TESSEL_PYTHON_LAUNCHER_H

#include "tessel/Runtime/CudaDriver.h"

#include <pybind11/pybind11.h>

#include <Python.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

static_assert(sizeof(unsigned long) == 8, "pointers are read with PyLong_AsUnsignedLong");

namespace tessel::python {
namespace py = pybind11;
namespace cuda = tessel::cuda;

inline constexpr size_t kMaxParams = 128;
inline constexpr int kMaxDevices = 64;

inline PyObject *cudaErrorType = nullptr; // tessel._tessel.CudaError (a RuntimeError)
inline PyObject *dataPtrName = nullptr;   // interned "data_ptr"

enum class ArgKind : uint8_t { Ptr, I32, F32 };

// The pointer check asks the driver (cuPointerGetAttribute, ~0.7 us on the H200) once per 2 MiB
// granule of address space: a direct-mapped memo of granule -> device, filled only by successful
// answers, so host memory is asked (and refused) every time. Under unified addressing a device
// granule stays device memory of that device while the context lives (the driver reserves its
// virtual range; torch's caching allocator keeps its segments), which is what makes the memo
// sound for the mistakes the check exists for: CPU tensors and tensors on another device.
constexpr unsigned kGranuleShift = 21, kMemoSlots = 512;
struct PointerMemo {
  uint64_t granulePlusOne[kMemoSlots] = {};
  int device[kMemoSlots] = {};
};
inline PointerMemo pointerMemo; // touched only with the GIL held

inline bool devicePointerDevice(uint64_t p, int &device) {
  uint64_t g = p >> kGranuleShift;
  unsigned slot = unsigned((g ^ (g >> 9)) % kMemoSlots);
  if (pointerMemo.granulePlusOne[slot] == g + 1) {
    device = pointerMemo.device[slot];
    return true;
  }
  if (!cuda::pointerDevice(p, device))
    return false;
  pointerMemo.granulePlusOne[slot] = g + 1;
  pointerMemo.device[slot] = device;
  return true;
}

inline ArgKind kindOfDtype(const std::string &kind, const std::string &dtype) {
  if (kind == "ptr")
    return ArgKind::Ptr;
  if (kind == "scalar" && dtype == "i32")
    return ArgKind::I32;
  if (kind == "scalar" && dtype == "f32")
    return ArgKind::F32;
  throw std::invalid_argument("cannot pass a " + kind + " of " + dtype + " to a GPU kernel");
}

class Launcher {
public:
  Launcher(std::string name, py::bytes cubin, std::array<unsigned, 3> block, unsigned shared,
           const std::vector<std::tuple<std::string, std::string, std::string>> &params)
      : name_(std::move(name)), cubin_(cubin), block_(block), shared_(shared) {
    if (params.size() > kMaxParams)
      throw std::invalid_argument("a GPU kernel takes at most " + std::to_string(kMaxParams) +
                                  " parameters");
    for (auto &[pname, kind, dtype] : params) {
      names_.push_back(pname);
      dtypes_.push_back(dtype);
      plan_.push_back(kindOfDtype(kind, dtype));
    }
    for (unsigned b : block_)
      if (b == 0)
        throw std::invalid_argument("a block size is 0");
    functions_.fill(nullptr);
    modules_.fill(nullptr);
  }

  // Modules stay loaded until the process ends: launchers live in a process-wide cache, and
  // unloading from a destructor could run at interpreter exit, after torch tore its state down.

  const std::string &name() const { return name_; }
  std::array<unsigned, 3> block() const { return block_; }
  unsigned shared() const { return shared_; }
  bool checkPointers = true;
  uint64_t launches = 0;

  std::vector<std::string> plan() const {
    std::vector<std::string> out;
    for (size_t i = 0; i < plan_.size(); ++i)
      out.push_back(plan_[i] == ArgKind::Ptr   ? "ptr:" + dtypes_[i]
                    : plan_[i] == ArgKind::I32 ? "i32"
                                               : "f32");
    return out;
  }

  /// The kernel of `device`, its module loaded on first use. Null with a Python error set.
  cuda::FunctionHandle function(int device) {
    if (device >= 0 && device < kMaxDevices && functions_[device])
      return functions_[device];
    std::string error;
    if (device < 0 || device >= kMaxDevices) {
      PyErr_Format(cudaErrorType, "no CUDA device %d", device);
      return nullptr;
    }
    cuda::ModuleHandle module = nullptr;
    cuda::FunctionHandle fn = nullptr;
    if (!cuda::loadModule(device, cubin_, module, error)) {
      PyErr_Format(cudaErrorType, "%s: loading the cubin on cuda:%d: %s", name_.c_str(), device,
                   error.c_str());
      return nullptr;
    }
    if (!cuda::getFunction(module, name_, fn, error) ||
        (shared_ > 0 && !cuda::setDynamicSharedMemory(fn, int(shared_), error))) {
      cuda::unloadModule(module, error);
      PyErr_Format(cudaErrorType, "%s on cuda:%d: %s", name_.c_str(), device, error.c_str());
      return nullptr;
    }
    modules_[device] = module;
    functions_[device] = fn;
    return fn;
  }

  /// Fills `slots` (8 bytes per parameter) from Python arguments. False with a Python error set.
  /// With `check`, every non-null pointer is asked of the driver: the first one sets `device`
  /// (when it is -1 on entry) and the others must be on it. Without, no driver is needed.
  bool pack(PyObject *const *args, size_t nargs, uint64_t *slots, bool check, int &device) {
    if (nargs != plan_.size()) {
      PyErr_Format(PyExc_TypeError, "%s takes %zu run-time arguments on the GPU, got %zu",
                   name_.c_str(), plan_.size(), nargs);
      return false;
    }
    for (size_t i = 0; i < nargs; ++i) {
      PyObject *a = args[i];
      slots[i] = 0;
      switch (plan_[i]) {
      case ArgKind::Ptr: {
        uint64_t p;
        if (PyLong_CheckExact(a)) {
          p = PyLong_AsUnsignedLong(a);
        } else {
          PyObject *r = PyObject_CallMethodNoArgs(a, dataPtrName);
          if (!r) {
            if (PyErr_ExceptionMatches(PyExc_AttributeError)) {
              PyErr_Clear();
              PyErr_Format(PyExc_TypeError,
                           "argument '%s': expected a CUDA tensor, a tessel.DevicePointer or an "
                           "int address, got %s",
                           names_[i].c_str(), Py_TYPE(a)->tp_name);
            }
            return false;
          }
          // PyLong_AsUnsignedLong walks the digits; ...LongLong goes through _PyLong_AsByteArray
          // (~30 ns more per pointer). unsigned long is 64-bit on the platforms tessel supports.
          p = PyLong_CheckExact(r) ? PyLong_AsUnsignedLong(r) : PyLong_AsUnsignedLongLong(r);
          Py_DECREF(r);
        }
        if (p == uint64_t(-1) && PyErr_Occurred())
          return false;
        // The first pointer always tells the device; the others only when checks are on.
        if (check && p != 0 && (checkPointers || device < 0)) {
          int where = -1;
          if (!devicePointerDevice(p, where)) {
            char address[32];
            std::snprintf(address, sizeof(address), "0x%llx", (unsigned long long)p);
            std::string message = "argument '" + names_[i] + "' of " + name_ +
                                  " is not CUDA device memory (address " + address +
                                  "): a CPU tensor? Pass CUDA tensors, or numpy arrays for the "
                                  "interpreter";
            PyErr_SetString(PyExc_ValueError, message.c_str());
            return false;
          }
          if (device < 0) {
            device = where;
          } else if (where != device) {
            PyErr_Format(PyExc_ValueError,
                         "argument '%s' of %s is on cuda:%d, the launch is on cuda:%d",
                         names_[i].c_str(), name_.c_str(), where, device);
            return false;
          }
        }
        slots[i] = p;
        break;
      }
      case ArgKind::I32: {
        long long v = PyLong_Check(a) ? PyLong_AsLongLong(a) : -1;
        if (!PyLong_Check(a)) {
          PyObject *index = PyNumber_Index(a);
          if (!index) {
            PyErr_Clear();
            PyErr_Format(PyExc_TypeError, "argument '%s': expected an int, got %s",
                         names_[i].c_str(), Py_TYPE(a)->tp_name);
            return false;
          }
          v = PyLong_AsLongLong(index);
          Py_DECREF(index);
        }
        if (v == -1 && PyErr_Occurred())
          return false;
        if (v < INT32_MIN || v > INT32_MAX) {
          PyErr_Format(PyExc_OverflowError, "argument '%s' = %lld does not fit in an i32",
                       names_[i].c_str(), v);
          return false;
        }
        int32_t v32 = int32_t(v);
        std::memcpy(&slots[i], &v32, sizeof(v32));
        break;
      }
      case ArgKind::F32: {
        double d = PyFloat_AsDouble(a);
        if (d == -1.0 && PyErr_Occurred())
          return false;
        float f = float(d);
        std::memcpy(&slots[i], &f, sizeof(f));
        break;
      }
      }
    }
    return true;
  }

  /// 0: nothing to launch (a zero size); 1: launch; -1: Python error set.
  static int parseGrid(PyObject *grid, unsigned out[3]) {
    out[0] = out[1] = out[2] = 1;
    auto one = [](PyObject *v, unsigned &dst) {
      long long x = PyLong_Check(v) ? PyLong_AsLongLong(v) : -1;
      if (!PyLong_Check(v)) {
        PyObject *index = PyNumber_Index(v);
        if (!index)
          return false;
        x = PyLong_AsLongLong(index);
        Py_DECREF(index);
      }
      if (x == -1 && PyErr_Occurred())
        return false;
      if (x < 0 || x > INT32_MAX) {
        PyErr_Format(PyExc_ValueError, "a grid size must be between 0 and 2^31-1, got %lld", x);
        return false;
      }
      dst = unsigned(x);
      return true;
    };
    if (PyTuple_Check(grid) || PyList_Check(grid)) {
      Py_ssize_t n = PySequence_Fast_GET_SIZE(grid);
      if (n < 1 || n > 3) {
        PyErr_Format(PyExc_ValueError, "a grid has 1 to 3 sizes, got %zd", n);
        return -1;
      }
      PyObject **items = PySequence_Fast_ITEMS(grid);
      for (Py_ssize_t d = 0; d < n; ++d)
        if (!one(items[d], out[d]))
          return -1;
    } else if (!one(grid, out[0])) {
      if (!PyErr_ExceptionMatches(PyExc_ValueError)) {
        PyErr_Clear();
        PyErr_Format(PyExc_TypeError, "a grid is an int or a tuple of 1 to 3 ints, got %s",
                     Py_TYPE(grid)->tp_name);
      }
      return -1;
    }
    return (out[0] && out[1] && out[2]) ? 1 : 0;
  }

  /// launch(grid, stream, *args): the device is the one the pointer arguments are on; stream
  /// is a CUstream as an int or a callable device -> int (torch's current raw stream).
  PyObject *launch(PyObject *const *args, Py_ssize_t nargs) {
    if (nargs < 2) {
      PyErr_SetString(PyExc_TypeError, "launch(grid, stream, *args)");
      return nullptr;
    }
    return launch(args[0], args[1], args + 2, size_t(nargs - 2));
  }

  /// The same with the kernel arguments apart (the dispatcher of kernel[grid](...) calls this).
  PyObject *launch(PyObject *gridArg, PyObject *streamArg, PyObject *const *kernelArgs,
                   size_t nKernelArgs) {
    unsigned grid[3];
    int g = parseGrid(gridArg, grid);
    if (g < 0)
      return nullptr;
    uint64_t slots[kMaxParams];
    void *params[kMaxParams];
    int device = -1;
    if (g == 0) { // an empty grid launches nothing; the arguments are still checked
      if (!pack(kernelArgs, nKernelArgs, slots, false, device))
        return nullptr;
      Py_RETURN_NONE;
    }
    std::string error;
    if (!cuda::initialize(error)) { // a once-flag: no driver call after the first
      PyErr_Format(cudaErrorType, "%s: %s", name_.c_str(), error.c_str());
      return nullptr;
    }
    if (!pack(kernelArgs, nKernelArgs, slots, true, device))
      return nullptr;
    // No memory to work on (every pointer null: empty tensors): nothing to launch.
    if (device < 0)
      Py_RETURN_NONE;
    cuda::FunctionHandle fn = function(device);
    if (!fn)
      return nullptr;
    void *stream;
    if (PyLong_Check(streamArg)) {
      stream = PyLong_AsVoidPtr(streamArg);
    } else {
      PyObject *dev = PyLong_FromLong(device);
      PyObject *r = dev ? PyObject_CallOneArg(streamArg, dev) : nullptr;
      Py_XDECREF(dev);
      if (!r)
        return nullptr;
      stream = PyLong_AsVoidPtr(r);
      Py_DECREF(r);
    }
    if (!stream && PyErr_Occurred())
      return nullptr;
    for (size_t i = 0; i < plan_.size(); ++i)
      params[i] = &slots[i];
    void *previous;
    bool changed;
    if (!cuda::makeCurrent(device, previous, changed, error)) {
      PyErr_Format(cudaErrorType, "%s: %s", name_.c_str(), error.c_str());
      return nullptr;
    }
    bool ok = cuda::launchOnStream(fn, grid, block_.data(), shared_, stream, params, error);
    if (changed)
      cuda::restoreContext(previous);
    if (!ok) {
      PyErr_Format(cudaErrorType,
                   "%s: grid (%u, %u, %u), block (%u, %u, %u), %u bytes of "
                   "dynamic shared memory: %s",
                   name_.c_str(), grid[0], grid[1], grid[2], block_[0], block_[1], block_[2],
                   shared_, error.c_str());
      return nullptr;
    }
    ++launches;
    Py_RETURN_NONE;
  }

  py::tuple packForTest(py::object grid, py::args args) {
    unsigned dims[3];
    if (parseGrid(grid.ptr(), dims) < 0)
      throw py::error_already_set();
    std::vector<PyObject *> raw;
    for (py::handle a : args)
      raw.push_back(a.ptr());
    uint64_t slots[kMaxParams];
    int device = -1;
    if (!pack(raw.data(), raw.size(), slots, false, device))
      throw py::error_already_set();
    py::list values;
    for (size_t i = 0; i < raw.size(); ++i) {
      if (plan_[i] == ArgKind::Ptr) {
        values.append(py::int_(slots[i]));
      } else if (plan_[i] == ArgKind::I32) {
        int32_t v;
        std::memcpy(&v, &slots[i], sizeof(v));
        values.append(py::int_(v));
      } else {
        float f;
        std::memcpy(&f, &slots[i], sizeof(f));
        values.append(py::float_(f));
      }
    }
    return py::make_tuple(py::make_tuple(dims[0], dims[1], dims[2]), values);
  }

  /// Launches `n` times with arguments packed once; nanoseconds per launch (host time).
  double timeDriver(int n, py::object grid, uint64_t stream, int device, py::args args) {
    unsigned dims[3];
    if (parseGrid(grid.ptr(), dims) <= 0)
      throw std::invalid_argument("time_driver needs a non-empty grid");
    cuda::FunctionHandle fn = function(device);
    if (!fn)
      throw py::error_already_set();
    std::vector<PyObject *> raw;
    for (py::handle a : args)
      raw.push_back(a.ptr());
    uint64_t slots[kMaxParams];
    void *params[kMaxParams];
    int where = device;
    if (!pack(raw.data(), raw.size(), slots, true, where))
      throw py::error_already_set();
    for (size_t i = 0; i < plan_.size(); ++i)
      params[i] = &slots[i];
    std::string error;
    void *previous;
    bool changed;
    if (!cuda::makeCurrent(device, previous, changed, error))
      throw std::runtime_error(error);
    auto start = std::chrono::steady_clock::now();
    bool ok = true;
    for (int i = 0; i < n && ok; ++i)
      ok = cuda::launchOnStream(fn, dims, block_.data(), shared_, reinterpret_cast<void *>(stream),
                                params, error);
    auto end = std::chrono::steady_clock::now();
    if (changed)
      cuda::restoreContext(previous);
    if (!ok)
      throw std::runtime_error(error);
    return std::chrono::duration<double, std::nano>(end - start).count() / std::max(n, 1);
  }

private:
  std::string name_, cubin_;
  std::array<unsigned, 3> block_;
  unsigned shared_;
  std::vector<ArgKind> plan_;
  std::vector<std::string> names_, dtypes_;
  std::array<cuda::FunctionHandle, kMaxDevices> functions_;
  std::array<cuda::ModuleHandle, kMaxDevices> modules_;
};

} // namespace tessel::python

#endif // TESSEL_PYTHON_LAUNCHER_H
