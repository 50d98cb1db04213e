"""Tensors a kernel captures from its scope: globals, closure variables, module attributes.

A score_mod or mask_mod (or any @tessel.jit function) may index a numpy array or a torch tensor
it reads from a global, a closure variable or a module attribute, as FlexAttention users write
them: `doc[b, q_idx] == doc[b, kv_idx]`. The data is not baked into the kernel: each captured
tensor becomes extra kernel parameters (its pointer, then its shape and its strides as i32
scalars) and `x[i, j]` becomes `tile.gather`, which reads 0 (False for bool tensors) where an
index lies outside the shape. A trace depends on a captured tensor's signature only — dtype,
rank and placement — so new values of the same signature reuse the compiled kernel. At every
launch the current value is read again from where the trace found it (`Capture.read`), checked
against the signature and converted where its dtype needs it (`Capture.launch_args`).

Supported dtypes (docs/dsl-decisions.md): float32, float16, bfloat16 and int32 are passed as they
are; float64 is rounded to float32; bool, int8, uint8 and int16 are widened to int32; int64 is
narrowed to int32 after a check that every value fits. Conversions copy the tensor at each launch.
"""
import types

import numpy as np

from . import cpu_tensors
from . import gpu
from .errors import CompilationError


class CapturedTensorError(CompilationError, TypeError):
    """A captured tensor that cannot be passed: wrong device, dtype, size or values. Located at
    the kernel line that first read it."""


# Logical dtype name -> (what the kernel's buffer holds, what an element reads as in the DSL).
_DTYPES = {
    "float32": ("f32", "f32"), "float16": ("f16", "f16"), "bfloat16": ("bf16", "bf16"),
    "float64": ("f32", "f32"), "int32": ("i32", "i32"), "int64": ("i32", "i32"),
    "int16": ("i32", "i32"), "int8": ("i32", "i32"), "uint8": ("i32", "i32"),
    "bool": ("i32", "i1"),
}
# numpy's uint16 is bf16 bit patterns, as for kernel arguments (tessel.to_bf16).
_NUMPY_ALIASES = {"uint16": "bfloat16"}
SUPPORTED = "bool, int8, uint8, int16, int32, int64, float16, bfloat16, float32, float64"
_I32 = 2 ** 31


def is_tensor(value):
    """Whether a value read from a kernel's scope is captured as a tensor."""
    return isinstance(value, (np.ndarray, Slot)) or gpu.is_torch_tensor(value)


def signature(value):
    """(dtype name, rank, placement "host" | "cuda") of a capturable value; ValueError with the
    reason for one tessel cannot pass."""
    if isinstance(value, Slot):
        if value.error:
            raise ValueError(value.error)
        return value.sig
    if isinstance(value, np.ndarray):
        name = _NUMPY_ALIASES.get(value.dtype.name, value.dtype.name)
        place = "host"
    else:
        # A CPU tensor runs on the interpreter as a numpy array of its memory (cpu_tensors).
        name = str(value.dtype).replace("torch.", "")
        place = "cuda" if value.is_cuda else "host" if cpu_tensors.is_cpu_tensor(value) else \
            str(value.device)
    if name not in _DTYPES:
        raise ValueError(f"has dtype {name}; captured tensors may be {SUPPORTED}")
    if value.ndim == 0:
        raise ValueError("is a 0-d tensor; capture a number (a compile-time constant) or a "
                         "tensor of rank >= 1")
    return name, value.ndim, place


class Slot:
    """What a closure cell holding a tensor is replaced with in the function tessel traces
    (tessel.attention's copy of a score_mod or mask_mod, so that its cache does not keep the
    first call's tensor alive): the tensor's signature, or why it cannot be captured."""

    __slots__ = ("sig", "error")

    def __init__(self, value):
        try:
            self.sig, self.error = signature(value), None
        except ValueError as e:
            self.sig, self.error = None, str(e)

    def key(self):
        return (Slot, self.sig, self.error)

    def __eq__(self, other):
        return isinstance(other, Slot) and self.key() == other.key()

    def __hash__(self):
        return hash(self.key())


def dsl_dtype(name):
    """The element type a read of a tensor of logical dtype `name` gives in the DSL."""
    return _DTYPES[name][1]


class Capture:
    """One tensor a trace read: where it was found, its signature, its kernel parameters.

    `owner` is the function whose scope holds it: a JITFunction (its `fn`), or a ModFunction (the
    score_mod/mask_mod of the call: the user's function passed with this very call, found among
    the call's constexprs). `kind` is "cell", "global" or "default" (by `name` in the owner's
    function: a closure variable, a global, a parameter's default) or "dict"
    (`container[name]`, a module's attribute)."""

    def __init__(self, owner, kind, name, container, sig, position):
        if getattr(owner, "user_fn", None) is not None:
            owner = owner.bound_to(None)      # not the call's function: it holds its tensors
        self.owner, self.kind, self.name, self.container = owner, kind, name, container
        self.sig = sig
        self.position = position          # (file, line, col) of the first read
        self.dtype, self.rank, self.place = sig
        self.buffer_dtype = _DTYPES[self.dtype][0]

    def params(self):
        """[(name, kind, dtype)] of the kernel parameters it adds."""
        return ([(self.name, "ptr", self.buffer_dtype)]
                + [(f"{self.name}.shape[{i}]", "scalar", "i32") for i in range(self.rank)]
                + [(f"{self.name}.stride[{i}]", "scalar", "i32") for i in range(self.rank)])

    def error(self, message):
        return CapturedTensorError(f"captured tensor '{self.name}' {message}", *self.position)

    def _function(self, constexprs):
        """(the function whose scope holds the tensor for this call, the global tensors the
        call's mods read in place of their modules': ModFunction.overrides)."""
        from .frontend import ModFunction
        owner = self.owner
        if not isinstance(owner, ModFunction):
            return getattr(owner, "fn", owner), {}  # a JITFunction's Python function
        # A function held in the call's mod: found from the mod by its path (mod_functions.py).
        root = owner.root or owner
        bound = next((v for v in constexprs if v is root), None) or \
            next((v for v in constexprs if isinstance(v, ModFunction) and v == root), root)
        fn, overrides = bound, dict(bound.overrides or {})
        for i in owner.path:
            fn = _function_of(fn)
            fn = fn.__closure__[i].cell_contents if isinstance(fn, types.FunctionType) \
                else fn[i]
            if isinstance(fn, ModFunction) and fn.overrides:
                overrides.update(fn.overrides)
        return _function_of(fn), overrides

    def read(self, constexprs):
        """The value now, for a call whose constexpr values are `constexprs`; KeyError if gone."""
        if self.kind == "dict":
            return self.container[self.name]
        try:
            fn, overrides = self._function(constexprs)
        except (IndexError, TypeError, ValueError):        # (not the structure traced)
            raise KeyError(self.name) from None
        if self.kind == "global":
            key = (id(fn.__globals__), self.name)
            return overrides[key] if key in overrides else fn.__globals__[self.name]
        if self.kind == "default":
            return _default(fn, self.name)
        try:
            return fn.__closure__[fn.__code__.co_freevars.index(self.name)].cell_contents
        except (ValueError, TypeError, IndexError):
            raise KeyError(self.name) from None

    def matches(self, value):
        try:
            return is_tensor(value) and not isinstance(value, Slot) and \
                signature(value) == self.sig
        except ValueError:
            return False

    def launch_args(self, value, device):
        """[data, *shape, *strides] for a launch whose other arrays are on `device` (None: the
        interpreter); the data converted to the buffer's dtype where needed."""
        if self.place != "host":
            return self._torch_args(value, device)
        if device is not None:
            what = "a CPU tensor" if gpu.is_torch_tensor(value) else "a numpy array"
            raise self.error(f"is {what}, but the kernel runs on the GPU (its other arguments "
                             "are CUDA tensors): capture a CUDA tensor")
        if gpu.is_torch_tensor(value):
            self._refuse_grad(value)
        a = cpu_tensors.to_numpy(value)
        if self.dtype == "int64":
            self._check_fits(int(a.min()) if a.size else 0, int(a.max()) if a.size else 0)
        if self.dtype not in ("float32", "float16", "bfloat16", "int32"):
            a = a.astype(np.float32 if self.dtype == "float64" else np.int32)
        a = np.ascontiguousarray(a)
        strides = [s // a.itemsize for s in a.strides]
        return [a, *self._fit(a.shape), *self._fit(strides)]

    def _torch_args(self, t, device):
        if device is None:
            raise self.error(f"is a torch tensor on {t.device}, but the kernel runs on the CPU "
                             "interpreter (its other arguments are numpy arrays): capture a numpy "
                             "array")
        if t.get_device() != device:
            raise self.error(f"is on {t.device}, but the kernel runs on cuda:{device}")
        self._refuse_grad(t)
        torch = gpu.torch_module()
        if self.dtype == "int64" and t.numel():
            lo, hi = torch.aminmax(t)
            self._check_fits(int(lo), int(hi))
        if self.dtype not in ("float32", "float16", "bfloat16", "int32"):
            t = t.to(torch.float32 if self.dtype == "float64" else torch.int32)
        return [t, *self._fit(t.shape), *self._fit(t.stride())]

    def _refuse_grad(self, t):
        if getattr(t, "requires_grad", False) and gpu.torch_module().is_grad_enabled():
            raise self.error("requires grad, but tessel computes no gradient for captured "
                             "tensors: pass tensor.detach()")

    def _check_fits(self, lo, hi):
        if lo < -_I32 or hi >= _I32:
            raise self.error(f"is int64 with values in [{lo}, {hi}], which do not fit in int32 "
                             "(kernels read captured integers as int32)")

    def _fit(self, sizes):
        sizes = [int(s) for s in sizes]
        if any(s >= _I32 for s in sizes):
            raise self.error(f"has sizes or strides {sizes} of 2^31 elements or more; kernels "
                             "address captured tensors with int32 sizes and strides")
        return sizes


def _default(fn, name):
    """The default value of fn's parameter `name`; KeyError if it has none."""
    code = fn.__code__
    names = code.co_varnames[:code.co_argcount]
    defaults = fn.__defaults__ or ()
    if name in names[len(names) - len(defaults):]:
        return defaults[names.index(name) - (len(names) - len(defaults))]
    return (fn.__kwdefaults__ or {})[name]


def _function_of(v):
    """The Python function of a mod (the call's function where bound, else the traced one), of
    a @tessel.jit function, or v."""
    from .frontend import ModFunction
    if isinstance(v, ModFunction):
        v = v.user_fn if v.user_fn is not None else v.jit
    return getattr(v, "fn", v)


def resolve(captures, constexprs):
    """The current values of `captures`, or None when one is gone or no longer matches its
    signature (a new trace is needed)."""
    values = []
    for c in captures:
        try:
            v = c.read(constexprs)
        except (KeyError, ValueError):
            return None
        if not c.matches(v):
            return None
        values.append(v)
    return values


def launch_args(captures, values, device):
    out = []
    for c, v in zip(captures, values):
        out.extend(c.launch_args(v, device))
    return out
