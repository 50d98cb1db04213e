//===- LaunchModule.cpp - the GPU launcher of tessel._tessel --------------===//
//
// The hot path of `kernel[grid](...)` on CUDA tensors. A `Launcher` holds one compiled kernel:
// its cubin (loaded once per device, on first use), its block size, its dynamic shared memory and
// an argument packing plan (one entry per kernel parameter: a pointer, an i32 or an f32). Its
// `launch` attribute is a METH_FASTCALL builtin bound to the launcher through a capsule, so a
// call from Python costs one vectorcall, no pybind11 argument conversion:
//
//     launch(grid, stream, *kernel_args)
//
// grid is an int or a tuple of 1 to 3 ints (a zero size launches nothing); stream a CUstream as
// an int (0 is the legacy default stream) or a callable device -> CUstream (torch's
// `_cuda_getCurrentRawStream`). A pointer argument is anything with a `data_ptr()` method (torch
// tensors, tessel.DevicePointer) or an int address. The device is the one the first non-null
// pointer is on (cuPointerGetAttribute, DEVICE_ORDINAL); unless pointer checks are off, every
// other non-null pointer is asked too, so a CPU tensor or a tensor on another device is an
// error, not a fault. The launch runs in the device's primary context (the one torch uses); the
// caller's current context is restored when it was another.
//
// `pack` runs the same packing without a driver (CPU tests); `time_driver` launches N times
// from C++ with arguments packed once (the floor under any Python launcher).
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <Python.h>

#include <array>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

namespace py = pybind11;
namespace cuda = tessel::cuda;

using namespace tessel::python;

namespace {
// The bound fast entry: self is a capsule holding a new reference to the Python Launcher.
const char *kCapsuleName = "tessel.Launcher";

PyObject *fastLaunch(PyObject *self, PyObject *const *args, Py_ssize_t nargs) {
  auto *owner = static_cast<PyObject *>(PyCapsule_GetPointer(self, kCapsuleName));
  if (!owner)
    return nullptr;
  auto *launcher = static_cast<Launcher *>(PyCapsule_GetContext(self));
  return launcher->launch(args, nargs);
}

PyMethodDef fastLaunchDef = {
    "launch", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&fastLaunch)),
    METH_FASTCALL, "launch(grid, stream, *args): launch on the GPU."};

void releaseCapsule(PyObject *capsule) {
  Py_XDECREF(static_cast<PyObject *>(PyCapsule_GetPointer(capsule, kCapsuleName)));
}

py::object boundLaunch(py::object self) {
  Launcher &l = self.cast<Launcher &>();
  PyObject *owner = self.ptr();
  Py_INCREF(owner);
  PyObject *capsule = PyCapsule_New(owner, kCapsuleName, &releaseCapsule);
  if (!capsule) {
    Py_DECREF(owner);
    throw py::error_already_set();
  }
  PyCapsule_SetContext(capsule, &l);
  PyObject *fn = PyCFunction_New(&fastLaunchDef, capsule);
  Py_DECREF(capsule);
  if (!fn)
    throw py::error_already_set();
  return py::reinterpret_steal<py::object>(fn);
}

void raiseCudaError(const std::string &error) {
  PyErr_SetString(cudaErrorType, error.c_str());
  throw py::error_already_set();
}
} // namespace

namespace tessel::python {
void bindLauncher(py::module &m);
} // namespace tessel::python

void tessel::python::bindLauncher(py::module &m) {
  dataPtrName = PyUnicode_InternFromString("data_ptr");
  cudaErrorType = PyErr_NewExceptionWithDoc(
      "tessel._tessel.CudaError",
      "The CUDA driver is missing, found no device, or a driver call failed.", PyExc_RuntimeError,
      nullptr);
  m.attr("CudaError") = py::handle(cudaErrorType);

  m.def(
      "cuda_status",
      [] {
        std::string error;
        int count = 0;
        bool ok = cuda::deviceCount(count, error);
        return py::make_tuple(ok ? count : 0, error);
      },
      "(number of CUDA devices, reason when 0): opens the driver on first call.");
  m.def(
      "cuda_device_info",
      [](int device) {
        std::string name, error;
        int major = 0, minor = 0;
        if (!cuda::deviceInfo(device, name, major, minor, error))
          raiseCudaError(error);
        return py::make_tuple(name, major, minor);
      },
      py::arg("device"), "(name, major, minor) of CUDA device `device`.");

  py::class_<Launcher>(m, "Launcher")
      .def(py::init<std::string, py::bytes, std::array<unsigned, 3>, unsigned,
                    const std::vector<std::tuple<std::string, std::string, std::string>> &>(),
           py::arg("name"), py::arg("cubin"), py::arg("block"), py::arg("shared_bytes"),
           py::arg("params"),
           "params: [(name, kind, dtype)] in signature order (kind 'ptr' or 'scalar').")
      .def_property_readonly("name", &Launcher::name)
      .def_property_readonly("block", &Launcher::block)
      .def_property_readonly("shared_bytes", &Launcher::shared)
      .def_property_readonly("plan", &Launcher::plan)
      .def_readwrite("check_pointers", &Launcher::checkPointers)
      .def_readonly("launches", &Launcher::launches)
      .def_property_readonly("launch", &boundLaunch,
                             "A builtin launch(grid, stream, *args) bound to this "
                             "launcher (keep it: each access makes a new one).")
      .def(
          "load",
          [](Launcher &l, int device) {
            if (!l.function(device))
              throw py::error_already_set();
          },
          py::arg("device"), "Loads the cubin on `device` now (otherwise on the first launch).")
      .def("pack", &Launcher::packForTest, py::arg("grid"),
           "pack(grid, *args) -> ((gx, gy, gz), [values]): the packing of a launch, no driver "
           "needed (pointers are not checked).")
      .def("time_driver", &Launcher::timeDriver, py::arg("n"), py::arg("grid"), py::arg("stream"),
           py::arg("device"),
           "time_driver(n, grid, stream, device, *args): ns per cuLaunchKernel, packed once.");
}
