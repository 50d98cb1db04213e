//===- TesselModule.cpp - the tessel._tessel Python extension -------------===//
//
// Binds KernelBuilder (one method per op family), pass pipelines, printing and, when the build
// has it, the CPU interpreter: `run_kernel` runs a kernel over a grid on numpy arrays, which are
// copied into interpreter buffers and back. Buffers hold f16 and bf16 as 16-bit patterns, so a
// bf16 argument is a uint16 array of bfloat16 bits (docs/dsl-decisions.md).
//
//===----------------------------------------------------------------------===//

#include "KernelBuilder.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Diagnostics.h"

#ifdef TESSEL_HAVE_INTERPRETER
#include "tessel/Interpreter/Interpreter.h"
#endif

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <cstring>

namespace py = pybind11;
using tessel::python::Diagnostic;
using tessel::python::KernelBuilder;
using tessel::python::Param;

namespace {
py::tuple diagnosticTuple(const Diagnostic &d) {
  return py::make_tuple(d.severity, d.message, d.file, d.line, d.column);
}

py::list diagnosticList(const std::vector<Diagnostic> &ds) {
  py::list out;
  for (const Diagnostic &d : ds)
    out.append(diagnosticTuple(d));
  return out;
}

#ifdef TESSEL_HAVE_INTERPRETER
using tessel::interp::Buffer;
using tessel::interp::ElementKind;
using tessel::interp::KernelArg;

/// The interpreter's element kind for a tile.ptr element type name.
ElementKind kindOfName(const std::string &dtype) {
  if (dtype == "f8e4m3fn")
    return ElementKind::F8E4M3;
  if (dtype == "f16")
    return ElementKind::F16;
  if (dtype == "bf16")
    return ElementKind::BF16;
  if (dtype == "f32")
    return ElementKind::F32;
  if (dtype == "i32")
    return ElementKind::I32;
  throw std::invalid_argument("buffers cannot hold " + dtype);
}

/// Runs `name` over `grid`. `args` holds, per parameter, a C-contiguous numpy array (for a
/// pointer parameter, whose element size must match) or a Python int/float.
py::list runKernel(KernelBuilder &kb, const std::string &name, std::array<int64_t, 3> grid,
                   py::list args, uint64_t maxSteps) {
  mlir::func::FuncOp fn = kb.lookupFunction(name);
  if (!fn)
    throw std::invalid_argument("no kernel named '" + name + "'");
  auto inputs = fn.getFunctionType().getInputs();
  if (inputs.size() != args.size())
    throw std::invalid_argument("kernel '" + name + "' takes " + std::to_string(inputs.size()) +
                                " arguments, got " + std::to_string(args.size()));
  std::vector<KernelArg> kargs;
  std::vector<py::array> arrays(args.size());
  for (size_t i = 0; i < args.size(); ++i) {
    mlir::Value param = fn.getArgument(i);
    std::string kind = KernelBuilder::kindOf(param);
    if (kind == "ptr") {
      auto arr = py::cast<py::array>(args[i]);
      if (!(arr.flags() & py::array::c_style) || !arr.writeable())
        throw std::invalid_argument("argument " + std::to_string(i) +
                                    " must be a writable C-contiguous array");
      ElementKind ek = kindOfName(KernelBuilder::dtypeOf(param));
      if (size_t(arr.itemsize()) != tessel::interp::elementSize(ek))
        throw std::invalid_argument("argument " + std::to_string(i) + " has " +
                                    std::to_string(arr.itemsize()) +
                                    "-byte elements, the kernel "
                                    "expects " +
                                    KernelBuilder::dtypeOf(param));
      Buffer buffer(ek, arr.size());
      std::memcpy(buffer.bytes().data(), arr.data(), arr.nbytes());
      kargs.push_back(KernelArg::ofBuffer(std::move(buffer)));
      arrays[i] = arr;
    } else if (KernelBuilder::dtypeOf(param) == "f32") {
      kargs.push_back(KernelArg::ofFloat(py::cast<double>(args[i])));
    } else {
      kargs.push_back(KernelArg::ofInt(py::cast<int64_t>(args[i])));
    }
  }
  std::vector<Diagnostic> diagnostics;
  {
    mlir::ScopedDiagnosticHandler handler(&kb.context(), [&](mlir::Diagnostic &d) {
      Diagnostic out = tessel::python::locate(d.getLocation());
      out.severity = d.getSeverity() == mlir::DiagnosticSeverity::Error ? "error" : "note";
      out.message = d.str();
      diagnostics.push_back(out);
      return mlir::success();
    });
    tessel::interp::RunOptions options;
    options.maxSteps = maxSteps;
    py::gil_scoped_release release;
    if (mlir::failed(tessel::interp::runKernel(fn, kargs, grid, options)) && diagnostics.empty())
      diagnostics.push_back({"error", "the interpreter failed", "", 0, 0});
  }
  if (diagnostics.empty())
    for (size_t i = 0; i < args.size(); ++i)
      if (arrays[i])
        std::memcpy(arrays[i].mutable_data(), kargs[i].buffer.bytes().data(), arrays[i].nbytes());
  return diagnosticList(diagnostics);
}
#endif
} // namespace

namespace tessel::python {
void bindCache(py::module &m, py::class_<KernelBuilder> &builder);
void bindLauncher(py::module &m);
void bindDispatcher(py::module &m);
} // namespace tessel::python

PYBIND11_MODULE(_tessel, m) {
  m.doc() = "tessel's compiler core: the tile IR builder, pass pipelines and the interpreter.";
#ifdef TESSEL_HAVE_INTERPRETER
  m.attr("has_interpreter") = true;
#else
  m.attr("has_interpreter") = false;
#endif

  py::class_<mlir::Value>(m, "Value")
      .def_property_readonly("kind", &KernelBuilder::kindOf)
      .def_property_readonly("dtype", &KernelBuilder::dtypeOf)
      .def_property_readonly("shape",
                             [](mlir::Value v) {
                               std::vector<int64_t> s = KernelBuilder::shapeOf(v);
                               py::tuple t(s.size());
                               for (size_t i = 0; i < s.size(); ++i)
                                 t[i] = s[i];
                               return t;
                             })
      .def_property_readonly("rank", &KernelBuilder::rankOf)
      .def("__eq__", [](mlir::Value a, mlir::Value b) { return a == b; })
      .def("__hash__",
           [](mlir::Value v) { return std::hash<const void *>()(v.getAsOpaquePointer()); });

  using V = mlir::Value;
  using OptV = std::optional<mlir::Value>;
  // Single values keep their builder (and its context) alive; lists of values do not, so the
  // front end holds the builder for as long as it uses them.
  auto keep = py::keep_alive<0, 1>();
  py::class_<KernelBuilder> builderClass(m, "KernelBuilder");
  builderClass.def(py::init<>())
      .def("set_loc", &KernelBuilder::setLocation, py::arg("file"), py::arg("line"), py::arg("col"))
      .def("begin_function",
           [](KernelBuilder &kb, const std::string &name,
              const std::vector<std::pair<std::string, std::string>> &params) {
             std::vector<Param> ps;
             for (auto &[kind, dtype] : params)
               ps.push_back({kind, dtype});
             return kb.beginFunction(name, ps);
           })
      .def("end_function", &KernelBuilder::endFunction)
      .def("mark_moderate", &KernelBuilder::markModerate, py::arg("index"))
      .def(
          "add_param",
          [](KernelBuilder &kb, const std::string &kind, const std::string &dtype) {
            return kb.addParam({kind, dtype});
          },
          keep)
      .def("const_int", &KernelBuilder::constInt, py::arg("value"), py::arg("dtype"),
           py::arg("shape") = std::vector<int64_t>{}, keep)
      .def("const_float", &KernelBuilder::constFloat, py::arg("value"), py::arg("dtype"),
           py::arg("shape") = std::vector<int64_t>{}, keep)
      .def("binary", &KernelBuilder::binary, keep)
      .def("compare", &KernelBuilder::compare, keep)
      .def("select", &KernelBuilder::select, keep)
      .def("unary", &KernelBuilder::unary, keep)
      .def("cast", &KernelBuilder::convert, keep)
      .def("program_id", &KernelBuilder::programId, keep)
      .def("num_programs", &KernelBuilder::numPrograms, keep)
      .def("make_desc", &KernelBuilder::makeDesc, py::arg("ptr"), py::arg("offset"),
           py::arg("shape"), py::arg("strides"), py::arg("pages") = std::nullopt,
           py::arg("num_pages") = std::nullopt, py::arg("page_size") = 0, keep)
      .def("load", &KernelBuilder::load, keep)
      .def("gather", &KernelBuilder::gather, keep)
      .def("load_scalar", &KernelBuilder::loadScalar, keep)
      .def("store", &KernelBuilder::store)
      .def("atomic_add", &KernelBuilder::atomicAdd)
      .def(
          "dot", [](KernelBuilder &kb, V a, V b, OptV acc) { return kb.dot(a, b, acc); }, keep)
      .def("fuse_dot_add", &KernelBuilder::fuseDotAdd, keep)
      .def("reduce", &KernelBuilder::reduce, keep)
      .def("scan", &KernelBuilder::scan, keep)
      .def("umulhi", &KernelBuilder::umulhi, keep)
      .def("philox", &KernelBuilder::philox)
      .def("splat", &KernelBuilder::splat, keep)
      .def("iota", &KernelBuilder::iota, keep)
      .def("expand_dims", &KernelBuilder::expandDims, keep)
      .def("broadcast", &KernelBuilder::broadcast, keep)
      .def("trans", &KernelBuilder::trans, keep)
      .def("softmax", &KernelBuilder::softmax)
      .def("elementwise_grad",
           [](KernelBuilder &kb, V y, V x) {
             auto [grad, diagnostics] = kb.elementwiseGrad(y, x);
             return py::make_tuple(grad ? py::cast(*grad) : py::none(),
                                   diagnosticList(diagnostics));
           })
      .def("begin_for", &KernelBuilder::beginFor)
      .def("end_for", &KernelBuilder::endFor)
      .def("begin_if", &KernelBuilder::beginIf)
      .def("enter_then", &KernelBuilder::enterThen)
      .def("enter_else", &KernelBuilder::enterElse)
      .def("end_if", &KernelBuilder::endIf)
      .def("verify", [](KernelBuilder &kb) { return diagnosticList(kb.verify()); })
      .def(
          "run_pipeline",
          [](KernelBuilder &kb, const std::string &pipeline, bool dumpIR) {
            return diagnosticList(kb.runPipeline(pipeline, dumpIR));
          },
          py::arg("pipeline"), py::arg("dump_ir") = false)
      .def("print", &KernelBuilder::print, py::arg("with_locations") = false)
#ifdef TESSEL_HAVE_INTERPRETER
      .def("run_kernel", &runKernel, py::arg("name"), py::arg("grid"), py::arg("args"),
           py::arg("max_steps") = tessel::interp::kDefaultMaxSteps)
#endif
      ;
  tessel::python::bindCache(m, builderClass);
  tessel::python::bindLauncher(m);
  tessel::python::bindDispatcher(m);
}
