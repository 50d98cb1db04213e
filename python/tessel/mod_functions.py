"""A score_mod or mask_mod as a kernel's constexpr (a ModFunction): what is traced, how its traces
are cached, and where a launch finds the call's captured tensors.

A mod is traced as a copy of itself whose closure holds no tensor and no function object of the
call's: each tensor becomes its signature (capture.Slot), and each function in the closure, alone
or in tuples (FlexAttention's `and_masks(causal, document_mask(ids))` holds its mods in a tuple),
becomes a ModFunction at its place there (`ModFunction.path`). The cache keys by code, defaults
and those closure values, so a mod made anew per batch around new tensors reuses its kernel.
At launch a captured tensor is read from the call's own function by the same path
(capture.Capture), so two copies of one function over different tensors (document masks of
two id tensors in one and_masks) read each their own.
"""
import types

from . import capture
from .frontend import ModFunction
from .jit import JITFunction, jit

# (key of a function, role) -> its ModFunction, so that a repeated call hits the same kernel.
# Plain functions and lambdas key by their contents (fn_key): a lambda written in a function
# called in a loop (the FlexAttention habit) is a new object each time but the same kernel.
# Functions held in a mod's closure are entered with role None.
_jitted = {}
# How deep closures are followed into the functions they hold (and_masks inside or_masks is 2);
# deeper ones, and a closure that holds itself, stay as they are (keyed by identity).
_MAX_DEPTH = 8


def as_jit(fn, what):
    """score_mod / mask_mod as the kernel's constexpr: a ModFunction (the @tessel.jit function
    and its role, whose contract the front end checks at the user's code), or None. A mod whose
    closure holds tensors (or functions that do) gets a ModFunction bound to this very
    function: its tensors are read from it."""
    if fn is None or isinstance(fn, ModFunction):    # (one made already: serving's mods)
        return fn
    if not callable(fn):
        raise TypeError(f"{what} must be a function, got {type(fn).__name__}")
    m = _entered(fn, what, 0)
    if not isinstance(fn, JITFunction) and holds_tensors(fn):
        return m.bound_to(fn)
    return m


def fn_key(fn, depth=0):
    """What tells mods apart for their kernels: code, defaults, globals and closure values
    (_closure_value), or the function itself where one of them cannot be hashed."""
    if isinstance(fn, JITFunction) or not hasattr(fn, "__code__"):
        return fn
    try:
        defaults, kw = _defaults(fn)
        key = (fn.__code__, _cells(fn, depth), id(fn.__globals__), defaults,
               tuple(sorted((kw or {}).items())))
        hash(key)
        return key
    except (ValueError, TypeError):
        return fn


def holds_tensors(fn, depth=0):
    """Whether fn's closure holds a tensor, a mod bound to a function that does, or a function
    that does (in tuples too): what a launch reads from the call's function."""
    try:
        return any(_value_holds(c.cell_contents, depth) for c in fn.__closure__ or ()) or \
            any(capture.is_tensor(v) for v in _default_values(fn))
    except (AttributeError, ValueError):
        return False


def _default_values(fn):
    return (*(fn.__defaults__ or ()), *(fn.__kwdefaults__ or {}).values())


def _defaults(fn):
    """fn's defaults and keyword defaults, tensors as their signatures (capture.Slot): a
    default's tensor (`doc=doc`) is read from the call's function at launch, as a closure's."""
    def slot(v):
        return capture.Slot(v) if capture.is_tensor(v) else v
    kw = fn.__kwdefaults__
    return (None if fn.__defaults__ is None else tuple(slot(v) for v in fn.__defaults__),
            None if kw is None else {k: slot(v) for k, v in kw.items()})


def _value_holds(v, depth):
    if capture.is_tensor(v):
        return True
    if isinstance(v, ModFunction):
        return v.user_fn is not None
    if type(v) is tuple:
        return any(_value_holds(x, depth) for x in v)
    return _held_function(v, depth) and holds_tensors(v, depth + 1)


def _entered(fn, role, depth):
    """The ModFunction of fn in this role, made (and entered in _jitted) on its first call."""
    try:
        key = (fn_key(fn, depth), role)
        m = _jitted.get(key)
    except (TypeError, ValueError):
        key, m = None, None
    if m is None:
        m = ModFunction(fn if isinstance(fn, JITFunction) else jit(_traced(fn, depth)), role)
        if key is not None:
            _jitted[key] = m
    return m


def _held_function(v, depth):
    """Whether a closure value is a function taken apart as a ModFunction at its place: a
    function of the user's, or a closure made at run time (torch's and_masks / or_masks)."""
    if not isinstance(v, types.FunctionType) or depth >= _MAX_DEPTH:
        return False
    from .frontend import is_user_function
    return bool(v.__closure__) or is_user_function(v)


def _closure_value(v, path, depth):
    """A closure value as the traced copy holds it, and its key hashes it: a tensor as its
    signature (capture.Slot); a function or a mod as an unbound ModFunction at its `path` in
    the mod's closure (cell index, then indices into tuples); tuples item by item."""
    if capture.is_tensor(v):
        return capture.Slot(v)
    if isinstance(v, ModFunction):
        return v.placed(path)
    if type(v) is tuple:
        items = tuple(_closure_value(x, path + (i,), depth) for i, x in enumerate(v))
        return v if all(a is b for a, b in zip(items, v)) else items
    if _held_function(v, depth):
        return _entered(v, None, depth + 1).placed(path)
    return v


def _cells(fn, depth):
    return tuple(_closure_value(c.cell_contents, (i,), depth)
                 for i, c in enumerate(fn.__closure__ or ()))


def _traced(fn, depth):
    """fn itself, or where its closure holds tensors or functions (or its defaults tensors) a
    copy with their stand-ins (_closure_value, _defaults): what is traced and cached, so that
    the cache keeps no call's tensors alive (they are read from the function of each call,
    ModFunction.user_fn)."""
    try:
        cells = _cells(fn, depth)
        if all(a is c.cell_contents for a, c in zip(cells, fn.__closure__ or ())) and \
                not any(capture.is_tensor(v) for v in _default_values(fn)):
            return fn
    except ValueError:                              # (an empty cell: the trace says where)
        return fn
    defaults, kw = _defaults(fn)
    copy = types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults,
                              tuple(types.CellType(v) for v in cells) or None)
    copy.__kwdefaults__ = kw
    return copy
