//===- DispatchModule.cpp - kernel[grid](...) in one C call ---------------===//
//
// tessel._tessel.Dispatcher, the base class of tessel.jit's JITFunction. Its mapping slot makes
// `kernel[grid]` a small C object (BoundGrid) whose vectorcall does the whole cache-hit path
// without running Python bytecode:
//
//   1. bind the call to the kernel's parameters (positional, keywords by interned name, defaults);
//   2. compute the specialisation key: per run-time argument its type, plus its `dtype` when the
//      type is a registered array type (numpy arrays, tessel.DevicePointer, torch tensors — the
//      Python side registers a type when it first sees it); per constexpr its type and value;
//   3. find the entry with that key (hash first, then exact comparison: identity or ==), and
//      check its guards: every global or closure variable its trace read must still hold the
//      very object it held then (identity; anything else goes the slow way, which compares
//      values and finds or makes the trace for the new ones);
//   4. call the entry: a Launcher's C++ `launch` directly (GPU), or a Python callable
//      `(grid, stream, *runtime_args)` (the interpreter).
//
// Anything the fast path does not handle — no entry yet, a call that does not bind the simple
// way, an unhashable constexpr, a dtype that cannot be read — calls the Python method
// `self._slow(grid, None, *args, **kwargs)` with the original arguments, which explains errors,
// compiles, and remembers the new entry through
// `self._remember(entry, stream, guards, *args, **kwargs)`
// (same binding, same key: one implementation of the key, here).
//
// Everything runs with the GIL held; no Python code runs between the lookup and the moment the
// entry's objects are held by strong references (a grid callable or a data_ptr() may re-enter).
//
//===----------------------------------------------------------------------===//

#include "Launcher.h"

#include <pybind11/pybind11.h>

#include <Python.h>

#include <algorithm>
#include <cstddef>
#include <vector>

namespace py = pybind11;
using tessel::python::Launcher;

namespace {
constexpr size_t kMaxArgs = 128;

PyObject *dtypeName = nullptr; // interned "dtype"
PyObject *slowName = nullptr;  // interned "_slow"

/// Types whose instances carry a `dtype` that keys the specialisation (strong references).
std::vector<PyTypeObject *> arrayTypes;
/// Non-`float` scalar types the Python side classifies as float (numpy's floating types).
std::vector<PyTypeObject *> floatScalarTypes;

bool isRegistered(const std::vector<PyTypeObject *> &types, PyTypeObject *t) {
  return std::find(types.begin(), types.end(), t) != types.end();
}

/// A positive float between 2^-64 and 2^64: the range jit.py's `float_range` calls "moderate",
/// for which a kernel may fold the scalar into a product without a run-time check.
bool isModerate(double x) { return x >= 0x1p-64 && x <= 0x1p64; }

enum class ParamKind : uint8_t { PositionalOrKeyword, PositionalOnly, KeywordOnly };

struct Param {
  PyObject *name = nullptr;         // interned str
  PyObject *defaultValue = nullptr; // null: required
  ParamKind kind = ParamKind::PositionalOrKeyword;
  bool isConstexpr = false;
};

/// One part of a key: the argument's type and, for constexprs its value, for arrays their dtype
/// (null for a plain run-time scalar).
struct KeyItem {
  PyObject *type;
  PyObject *value;
};

/// A value the entry's trace read: container[name] of a globals dict, or a closure cell's
/// contents when name is null (strong references).
struct Guard {
  PyObject *container;
  PyObject *name;
  PyObject *value;
};

struct Entry {
  Py_hash_t hash;
  std::vector<KeyItem> key; // strong references
  std::vector<Guard> guards;
  PyObject *target;   // a Launcher, or a callable (grid, stream, *runtime_args)
  Launcher *launcher; // the C++ object of target when it is a Launcher
  PyObject *stream;   // what the Launcher is given as the stream
};

struct Dispatch {
  bool configured = false;
  std::vector<Param> params;
  std::vector<size_t> runtimeIndex; // the parameters passed to the kernel, in order
  std::vector<Entry> entries;
  size_t lastHit = 0;

  void clearEntries() {
    std::vector<Entry> old;
    old.swap(entries); // decref after the table is consistent (a __del__ may re-enter)
    lastHit = 0;
    for (Entry &e : old) {
      releaseEntry(e);
    }
  }
  static void releaseEntry(Entry &e) {
    for (KeyItem &k : e.key) {
      Py_DECREF(k.type);
      Py_XDECREF(k.value);
    }
    for (Guard &g : e.guards) {
      Py_DECREF(g.container);
      Py_XDECREF(g.name);
      Py_DECREF(g.value);
    }
    Py_DECREF(e.target);
    Py_DECREF(e.stream);
  }
  void clearParams() {
    std::vector<Param> old;
    old.swap(params);
    runtimeIndex.clear();
    configured = false;
    for (Param &p : old) {
      Py_DECREF(p.name);
      Py_XDECREF(p.defaultValue);
    }
  }
};

struct DispatcherObject {
  PyObject_HEAD Dispatch *d;
};

struct BoundGridObject {
  PyObject_HEAD vectorcallfunc vectorcall;
  PyObject *dispatcher;
  PyObject *grid;
};

PyTypeObject DispatcherType = {PyVarObject_HEAD_INIT(nullptr, 0)};
PyTypeObject BoundGridType = {PyVarObject_HEAD_INIT(nullptr, 0)};

/// Dtypes read while forming a key (new references), released on scope exit.
struct Owned {
  PyObject *items[kMaxArgs];
  size_t n = 0;
  ~Owned() {
    for (size_t i = 0; i < n; ++i)
      Py_DECREF(items[i]);
  }
};

/// Binds a vectorcall to the parameters: bound[i] (borrowed) for each. False, with no error set,
/// when it does not bind the simple way (too many or missing arguments, an unknown or repeated
/// keyword): the slow path binds with inspect and raises the proper TypeError.
bool bind(const Dispatch &d, PyObject *const *args, size_t nargs, PyObject *kwnames,
          PyObject **bound) {
  size_t np = d.params.size();
  if (nargs > np)
    return false;
  for (size_t i = 0; i < np; ++i)
    bound[i] = nullptr;
  for (size_t i = 0; i < nargs; ++i) {
    if (d.params[i].kind == ParamKind::KeywordOnly)
      return false;
    bound[i] = args[i];
  }
  if (kwnames) {
    Py_ssize_t nk = PyTuple_GET_SIZE(kwnames);
    for (Py_ssize_t j = 0; j < nk; ++j) {
      PyObject *k = PyTuple_GET_ITEM(kwnames, j);
      size_t idx = np;
      for (size_t i = 0; i < np; ++i) // call sites' keywords are interned: pointers match
        if (d.params[i].name == k) {
          idx = i;
          break;
        }
      if (idx == np)
        for (size_t i = 0; i < np; ++i)
          if (PyUnicode_Compare(d.params[i].name, k) == 0) {
            idx = i;
            break;
          }
      if (PyErr_Occurred())
        PyErr_Clear();
      if (idx == np || bound[idx] || d.params[idx].kind == ParamKind::PositionalOnly)
        return false;
      bound[idx] = args[nargs + size_t(j)];
    }
  }
  for (size_t i = 0; i < np; ++i)
    if (!bound[i]) {
      if (!d.params[i].defaultValue)
        return false;
      bound[i] = d.params[i].defaultValue;
    }
  return true;
}

/// The key of bound arguments: items (borrowed, dtypes held by `owned`) and their hash. False,
/// with no error set, when a constexpr is unhashable or a dtype cannot be read.
bool computeKey(const Dispatch &d, PyObject *const *bound, KeyItem *items, Py_hash_t &hash,
                Owned &owned) {
  Py_uhash_t h = 0x345678UL;
  for (size_t i = 0; i < d.params.size(); ++i) {
    PyObject *v = bound[i];
    PyTypeObject *t = Py_TYPE(v);
    PyObject *value = nullptr;
    Py_hash_t vh = 0;
    if (d.params[i].isConstexpr) {
      value = v;
    } else if (PyFloat_Check(v) || isRegistered(floatScalarTypes, t)) {
      // Float scalars are specialised on their range (jit.py, float_range): True or False.
      double x = PyFloat_AsDouble(v);
      if (x == -1.0 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
      value = isModerate(x) ? Py_True : Py_False;
    } else if (isRegistered(arrayTypes, t)) {
      value = PyObject_GetAttr(v, dtypeName);
      if (!value) {
        PyErr_Clear();
        return false;
      }
      owned.items[owned.n++] = value;
    }
    if (value) {
      vh = PyObject_Hash(value);
      if (vh == -1 && PyErr_Occurred()) {
        PyErr_Clear();
        return false;
      }
    }
    items[i] = {reinterpret_cast<PyObject *>(t), value};
    h = (h ^ Py_uhash_t(reinterpret_cast<uintptr_t>(t) >> 4)) * 1000003UL;
    h = (h ^ Py_uhash_t(vh)) * 1000003UL;
  }
  hash = Py_hash_t(h);
  return true;
}

bool sameKey(const Entry &e, const KeyItem *items) {
  for (size_t i = 0; i < e.key.size(); ++i) {
    if (e.key[i].type != items[i].type)
      return false;
    PyObject *a = e.key[i].value, *b = items[i].value;
    if (a == b)
      continue;
    if (!a || !b)
      return false;
    int r = PyObject_RichCompareBool(a, b, Py_EQ);
    if (r < 0)
      PyErr_Clear();
    if (r != 1)
      return false;
  }
  return true;
}

/// Whether every global / closure value the entry's trace read is still the same object.
bool guardsHold(const Entry &e) {
  for (const Guard &g : e.guards) {
    PyObject *now;
    if (g.name) {
      now = PyDict_GetItemWithError(g.container, g.name); // borrowed
      if (!now && PyErr_Occurred())
        PyErr_Clear();
    } else {
      now = PyCell_GET(g.container);
    }
    if (now != g.value)
      return false;
  }
  return true;
}

/// The index of the entry with this key, or -1.
Py_ssize_t findEntry(Dispatch &d, Py_hash_t hash, const KeyItem *items) {
  size_t n = d.entries.size();
  if (d.lastHit < n && d.entries[d.lastHit].hash == hash && sameKey(d.entries[d.lastHit], items))
    return Py_ssize_t(d.lastHit);
  for (size_t i = 0; i < n; ++i)
    if (i != d.lastHit && d.entries[i].hash == hash && sameKey(d.entries[i], items)) {
      d.lastHit = i;
      return Py_ssize_t(i);
    }
  return -1;
}

PyObject *callSlow(PyObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                   PyObject *kwnames) {
  size_t nk = kwnames ? size_t(PyTuple_GET_SIZE(kwnames)) : 0;
  std::vector<PyObject *> all(3 + nargs + nk);
  all[0] = self;
  all[1] = grid;
  all[2] = Py_None;
  for (size_t i = 0; i < nargs + nk; ++i)
    all[3 + i] = args[i];
  return PyObject_VectorcallMethod(slowName, all.data(), 3 + nargs, kwnames);
}

/// kernel[grid](*args, **kwargs), and kernel._call(grid, *args, **kwargs).
PyObject *dispatch(PyObject *self, PyObject *grid, PyObject *const *args, size_t nargs,
                   PyObject *kwnames) {
  Dispatch &d = *reinterpret_cast<DispatcherObject *>(self)->d;
  if (d.configured) {
    PyObject *bound[kMaxArgs];
    KeyItem items[kMaxArgs];
    Owned owned;
    Py_hash_t hash;
    if (bind(d, args, nargs, kwnames, bound) && computeKey(d, bound, items, hash, owned)) {
      Py_ssize_t hit = findEntry(d, hash, items);
      if (hit >= 0 && guardsHold(d.entries[size_t(hit)])) {
        // Hold what the launch needs before any Python code runs (a grid callable, data_ptr()).
        Entry &e = d.entries[size_t(hit)];
        PyObject *target = e.target, *stream = e.stream;
        Launcher *launcher = e.launcher;
        Py_INCREF(target);
        Py_INCREF(stream);
        PyObject *g = grid, *gridOwned = nullptr, *result = nullptr;
        if (!PyTuple_CheckExact(grid) && !PyLong_CheckExact(grid) && PyCallable_Check(grid)) {
          PyObject *meta = PyDict_New();
          bool ok = meta != nullptr;
          for (size_t i = 0; ok && i < d.params.size(); ++i)
            ok = PyDict_SetItem(meta, d.params[i].name, bound[i]) == 0;
          gridOwned = ok ? PyObject_CallOneArg(grid, meta) : nullptr;
          Py_XDECREF(meta);
          g = gridOwned;
        }
        if (g) {
          PyObject *call[kMaxArgs + 2];
          size_t nrt = d.runtimeIndex.size();
          for (size_t k = 0; k < nrt; ++k)
            call[2 + k] = bound[d.runtimeIndex[k]];
          if (launcher) {
            result = launcher->launch(g, stream, call + 2, nrt);
          } else {
            call[0] = g;
            call[1] = stream;
            result = PyObject_Vectorcall(target, call, 2 + nrt, nullptr);
          }
        }
        Py_XDECREF(gridOwned);
        Py_DECREF(target);
        Py_DECREF(stream);
        return result;
      }
    }
  }
  return callSlow(self, grid, args, nargs, kwnames);
}

// --- BoundGrid: what kernel[grid] returns ------------------------------------------------------

PyObject *boundGridCall(PyObject *self, PyObject *const *args, size_t nargsf, PyObject *kwnames) {
  auto *b = reinterpret_cast<BoundGridObject *>(self);
  return dispatch(b->dispatcher, b->grid, args, PyVectorcall_NARGS(nargsf), kwnames);
}

void boundGridDealloc(PyObject *self) {
  auto *b = reinterpret_cast<BoundGridObject *>(self);
  Py_XDECREF(b->dispatcher);
  Py_XDECREF(b->grid);
  PyObject_Free(self);
}

PyObject *boundGridRepr(PyObject *self) {
  auto *b = reinterpret_cast<BoundGridObject *>(self);
  PyObject *name = PyObject_GetAttrString(b->dispatcher, "__name__");
  if (!name) {
    PyErr_Clear();
    return PyUnicode_FromFormat("<%s[%R]>", Py_TYPE(b->dispatcher)->tp_name, b->grid);
  }
  PyObject *r = PyUnicode_FromFormat("<%S[%R]>", name, b->grid);
  Py_DECREF(name);
  return r;
}

// --- Dispatcher ----------------------------------------------------------------------------------

PyObject *dispatcherNew(PyTypeObject *type, PyObject *, PyObject *) {
  PyObject *self = type->tp_alloc(type, 0);
  if (!self)
    return nullptr;
  reinterpret_cast<DispatcherObject *>(self)->d = new Dispatch();
  return self;
}

int dispatcherTraverse(PyObject *self, visitproc visit, void *arg) {
  Dispatch *d = reinterpret_cast<DispatcherObject *>(self)->d;
  if (d) {
    for (Param &p : d->params)
      Py_VISIT(p.defaultValue);
    for (Entry &e : d->entries) {
      Py_VISIT(e.target);
      Py_VISIT(e.stream);
      for (KeyItem &k : e.key) {
        Py_VISIT(k.type);
        Py_VISIT(k.value);
      }
      for (Guard &g : e.guards) {
        Py_VISIT(g.container);
        Py_VISIT(g.value);
      }
    }
  }
  return 0;
}

int dispatcherClear(PyObject *self) {
  Dispatch *d = reinterpret_cast<DispatcherObject *>(self)->d;
  if (d) {
    d->clearEntries();
    d->clearParams();
  }
  return 0;
}

void dispatcherDealloc(PyObject *self) {
  PyObject_GC_UnTrack(self);
  dispatcherClear(self);
  delete reinterpret_cast<DispatcherObject *>(self)->d;
  reinterpret_cast<DispatcherObject *>(self)->d = nullptr;
  Py_TYPE(self)->tp_free(self);
}

PyObject *dispatcherSubscript(PyObject *self, PyObject *grid) {
  auto *b = PyObject_New(BoundGridObject, &BoundGridType);
  if (!b)
    return nullptr;
  b->vectorcall = &boundGridCall;
  Py_INCREF(self);
  Py_INCREF(grid);
  b->dispatcher = self;
  b->grid = grid;
  return reinterpret_cast<PyObject *>(b);
}

/// _configure(params): params a list of (name, is_constexpr, kind, has_default, default), kind
/// "positional", "positional_only" or "keyword_only"; None: every call takes the slow path.
PyObject *dispatcherConfigure(PyObject *self, PyObject *spec) {
  Dispatch &d = *reinterpret_cast<DispatcherObject *>(self)->d;
  d.clearEntries();
  d.clearParams();
  if (spec == Py_None)
    Py_RETURN_NONE;
  PyObject *seq = PySequence_Fast(spec, "_configure takes a list of parameters");
  if (!seq)
    return nullptr;
  Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
  if (size_t(n) > kMaxArgs) { // too many for the stack arrays: the slow path only
    Py_DECREF(seq);
    Py_RETURN_NONE;
  }
  std::vector<Param> params;
  auto fail = [&] {
    for (Param &p : params) {
      Py_XDECREF(p.name);
      Py_XDECREF(p.defaultValue);
    }
    Py_DECREF(seq);
    return nullptr;
  };
  for (Py_ssize_t i = 0; i < n; ++i) {
    PyObject *name, *defaultValue;
    int isConstexpr, hasDefault;
    const char *kind;
    if (!PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "UpspO", &name, &isConstexpr, &kind,
                          &hasDefault, &defaultValue))
      return fail();
    Param p;
    Py_INCREF(name);
    PyUnicode_InternInPlace(&name);
    p.name = name;
    p.isConstexpr = isConstexpr;
    std::string k = kind;
    p.kind = k == "positional_only" ? ParamKind::PositionalOnly
             : k == "keyword_only"  ? ParamKind::KeywordOnly
                                    : ParamKind::PositionalOrKeyword;
    if (hasDefault) {
      Py_INCREF(defaultValue);
      p.defaultValue = defaultValue;
    }
    params.push_back(p);
  }
  Py_DECREF(seq);
  d.params = std::move(params);
  for (size_t i = 0; i < d.params.size(); ++i)
    if (!d.params[i].isConstexpr)
      d.runtimeIndex.push_back(i);
  d.configured = true;
  Py_RETURN_NONE;
}

/// _remember(entry, stream, guards, *args, **kwargs): the call's key now runs `entry` while the
/// guards hold: guards a sequence of (globals dict, name, value) or (cell, None, value). Returns
/// whether it was remembered (not when the call does not bind the simple way or has no key).
PyObject *dispatcherRemember(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                             PyObject *kwnames) {
  Dispatch &d = *reinterpret_cast<DispatcherObject *>(self)->d;
  size_t nargs = size_t(PyVectorcall_NARGS(nargsf));
  if (nargs < 3) {
    PyErr_SetString(PyExc_TypeError, "_remember(entry, stream, guards, *args, **kwargs)");
    return nullptr;
  }
  if (!d.configured)
    Py_RETURN_FALSE;
  PyObject *bound[kMaxArgs];
  KeyItem items[kMaxArgs];
  Owned owned;
  Py_hash_t hash;
  if (!bind(d, args + 3, nargs - 3, kwnames, bound) || !computeKey(d, bound, items, hash, owned))
    Py_RETURN_FALSE;
  std::vector<Guard> guards;
  {
    PyObject *seq = PySequence_Fast(args[2], "_remember: guards must be a sequence");
    if (!seq)
      return nullptr;
    bool ok = true;
    for (Py_ssize_t i = 0; ok && i < PySequence_Fast_GET_SIZE(seq); ++i) {
      PyObject *container, *name, *value;
      ok = PyArg_ParseTuple(PySequence_Fast_GET_ITEM(seq, i), "OOO", &container, &name, &value);
      if (ok && (name == Py_None ? !PyCell_Check(container) : !PyDict_Check(container))) {
        PyErr_SetString(PyExc_TypeError,
                        "_remember: a guard is (dict, name, value) or (cell, None, value)");
        ok = false;
      }
      if (ok) {
        Py_INCREF(container);
        Py_INCREF(value);
        if (name != Py_None)
          Py_INCREF(name);
        guards.push_back({container, name == Py_None ? nullptr : name, value});
      }
    }
    Py_DECREF(seq);
    if (!ok) {
      for (Guard &g : guards) {
        Py_DECREF(g.container);
        Py_XDECREF(g.name);
        Py_DECREF(g.value);
      }
      return nullptr;
    }
  }
  Launcher *launcher = nullptr;
  py::handle target(args[0]);
  if (py::isinstance<Launcher>(target))
    launcher = target.cast<Launcher *>();
  else if (!PyCallable_Check(args[0])) {
    PyErr_SetString(PyExc_TypeError, "_remember: the entry is a Launcher or a callable");
    return nullptr;
  }
  Entry e;
  e.hash = hash;
  for (size_t i = 0; i < d.params.size(); ++i) {
    Py_INCREF(items[i].type);
    Py_XINCREF(items[i].value);
    e.key.push_back(items[i]);
  }
  Py_INCREF(args[0]);
  Py_INCREF(args[1]);
  e.target = args[0];
  e.launcher = launcher;
  e.stream = args[1];
  e.guards = std::move(guards);
  Py_ssize_t old = findEntry(d, hash, items);
  if (old >= 0) {
    Entry previous = std::move(d.entries[size_t(old)]);
    d.entries[size_t(old)] = std::move(e);
    Dispatch::releaseEntry(previous);
  } else {
    d.entries.push_back(std::move(e));
  }
  Py_RETURN_TRUE;
}

PyObject *dispatcherCall(PyObject *self, PyObject *const *args, Py_ssize_t nargsf,
                         PyObject *kwnames) {
  size_t nargs = size_t(PyVectorcall_NARGS(nargsf));
  if (nargs < 1) {
    PyErr_SetString(PyExc_TypeError, "_call(grid, *args, **kwargs)");
    return nullptr;
  }
  return dispatch(self, args[0], args + 1, nargs - 1, kwnames);
}

PyObject *dispatcherFastSize(PyObject *self, PyObject *) {
  return PyLong_FromSize_t(reinterpret_cast<DispatcherObject *>(self)->d->entries.size());
}

PyObject *dispatcherFastClear(PyObject *self, PyObject *) {
  reinterpret_cast<DispatcherObject *>(self)->d->clearEntries();
  Py_RETURN_NONE;
}

PyObject *dispatcherConfigured(PyObject *self, void *) {
  return PyBool_FromLong(reinterpret_cast<DispatcherObject *>(self)->d->configured);
}

PyMethodDef dispatcherMethods[] = {
    {"_configure", reinterpret_cast<PyCFunction>(&dispatcherConfigure), METH_O,
     "_configure(params): [(name, is_constexpr, kind, has_default, default)] or None."},
    {"_remember", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dispatcherRemember)),
     METH_FASTCALL | METH_KEYWORDS,
     "_remember(entry, stream, guards, *args, **kwargs): a cache hit of this call's key runs "
     "entry while its guards hold."},
    {"_call", reinterpret_cast<PyCFunction>(reinterpret_cast<void (*)()>(&dispatcherCall)),
     METH_FASTCALL | METH_KEYWORDS, "_call(grid, *args, **kwargs): kernel[grid](...) in one call."},
    {"_fast_size", &dispatcherFastSize, METH_NOARGS, "How many keys the fast table holds."},
    {"_fast_clear", &dispatcherFastClear, METH_NOARGS, "Forgets every key of the fast table."},
    {nullptr, nullptr, 0, nullptr}};

PyGetSetDef dispatcherGetSet[] = {
    {"_fast_path", &dispatcherConfigured, nullptr,
     "Whether calls are dispatched in C (False: every call takes the slow path).", nullptr},
    {nullptr, nullptr, nullptr, nullptr, nullptr}};

PyMappingMethods dispatcherMapping = {nullptr, &dispatcherSubscript, nullptr};

/// Adds `type` (a new reference) to `types` unless it is there; false with a TypeError set when
/// it is not a type.
bool registerType(PyObject *type, std::vector<PyTypeObject *> &types, const char *caller) {
  if (!PyType_Check(type)) {
    PyErr_Format(PyExc_TypeError, "%s takes a type", caller);
    return false;
  }
  auto *t = reinterpret_cast<PyTypeObject *>(type);
  if (!isRegistered(types, t)) {
    Py_INCREF(type);
    types.push_back(t);
  }
  return true;
}

PyObject *addArrayType(PyObject *, PyObject *type) {
  if (!registerType(type, arrayTypes, "_add_array_type"))
    return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef addArrayTypeDef = {
    "_add_array_type", &addArrayType, METH_O,
    "Registers a type whose instances' dtype keys kernel specialisations (tessel/runtime.py)."};

PyObject *addFloatType(PyObject *, PyObject *type) {
  if (!registerType(type, floatScalarTypes, "_add_float_type"))
    return nullptr;
  Py_RETURN_NONE;
}

PyMethodDef addFloatTypeDef = {
    "_add_float_type", &addFloatType, METH_O,
    "Registers a scalar type keyed like float: by its range (tessel/runtime.py, float_range)."};
} // namespace

namespace tessel::python {
void bindDispatcher(py::module &m);
} // namespace tessel::python

void tessel::python::bindDispatcher(py::module &m) {
  dtypeName = PyUnicode_InternFromString("dtype");
  slowName = PyUnicode_InternFromString("_slow");

  BoundGridType.tp_name = "tessel._tessel.BoundGrid";
  BoundGridType.tp_basicsize = sizeof(BoundGridObject);
  BoundGridType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_VECTORCALL;
  BoundGridType.tp_vectorcall_offset = offsetof(BoundGridObject, vectorcall);
  BoundGridType.tp_call = &PyVectorcall_Call;
  BoundGridType.tp_dealloc = &boundGridDealloc;
  BoundGridType.tp_repr = &boundGridRepr;
  BoundGridType.tp_doc = "kernel[grid]: call it with the kernel's arguments to launch.";
  if (PyType_Ready(&BoundGridType) < 0)
    throw py::error_already_set();

  DispatcherType.tp_name = "tessel._tessel.Dispatcher";
  DispatcherType.tp_basicsize = sizeof(DispatcherObject);
  DispatcherType.tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE | Py_TPFLAGS_HAVE_GC;
  DispatcherType.tp_new = &dispatcherNew;
  DispatcherType.tp_dealloc = &dispatcherDealloc;
  DispatcherType.tp_traverse = &dispatcherTraverse;
  DispatcherType.tp_clear = &dispatcherClear;
  DispatcherType.tp_as_mapping = &dispatcherMapping;
  DispatcherType.tp_methods = dispatcherMethods;
  DispatcherType.tp_getset = dispatcherGetSet;
  DispatcherType.tp_doc = "The C launch path of a @tessel.jit kernel (tessel/jit.py subclasses "
                          "it): kernel[grid](...) binds, keys and launches a cache hit in C.";
  if (PyType_Ready(&DispatcherType) < 0)
    throw py::error_already_set();

  m.attr("Dispatcher") = py::handle(reinterpret_cast<PyObject *>(&DispatcherType));
  m.attr("BoundGrid") = py::handle(reinterpret_cast<PyObject *>(&BoundGridType));
  PyObject *fn = PyCFunction_New(&addArrayTypeDef, nullptr);
  if (!fn)
    throw py::error_already_set();
  m.attr("_add_array_type") = py::reinterpret_steal<py::object>(fn);
  PyObject *floatFn = PyCFunction_New(&addFloatTypeDef, nullptr);
  if (!floatFn)
    throw py::error_already_set();
  m.attr("_add_float_type") = py::reinterpret_steal<py::object>(floatFn);
}
