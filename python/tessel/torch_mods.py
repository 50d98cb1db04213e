"""score_mod and mask_mod inside torch.compile's graph: tessel's ops carry a call's pair of mods
as an int key (python/tessel/torch_ops.py; docs/torch-compile.md, "Mods in the graph").

A traced call's pair is entered at trace time: Dynamo runs `mods_key` eagerly on constants
(torch._dynamo.assume_constant_result), a plain function handed over as its code, module,
defaults and closure values and rebuilt from them (a lambda made inside the compiled function
is a new object at every call). Entries live as long as the process, one per distinct pair
(told apart as tessel.attention's own kernel cache tells mods apart: code and closure values),
under a key hashed from their contents, the same in every process.

A tensor in a mod's closure (FlexAttention's document ids), defaults (`doc=doc`) or module
globals read by name is an input of the op, so the graph knows the op reads it: the entry
holds a stand-in (`_slot`) in its place, and the op's real implementation makes the function
again around the tensors it was handed (`lookup`; a global tensor is read at launch from the
op's input: ModFunction.overrides). The closure's functions, alone or in tuples
(FlexAttention's `and_masks(causal, document)` holds its mods so), are taken apart the same
way, their tensors inputs too. Mods that read a tensor any other way (a module attribute, a
function they call by name) get no key (-1): the call runs outside the graph.
"""
import sys

# How deep closures are followed into the functions they hold, as tessel.attention's own keys
# follow them (a function whose closure holds itself must not recurse without end; deeper:
# outside the graph).
from .mod_functions import _MAX_DEPTH

# (score_mod, mask_mod) by key (_content_key), 0 for none.
MODS = {0: (None, None)}
_MOD_KEYS = {}
_constant_key = None    # mods_key as Dynamo runs it at trace time (bound by `bind`)
_constant_names = None  # global_tensor_names as Dynamo runs it (bound by `bind`)


def bind(torch):
    """mods_key and global_tensor_names wrapped for Dynamo (torch._dynamo.
    assume_constant_result), once torch is in."""
    global _constant_key, _constant_names
    _constant_key = torch._dynamo.assume_constant_result(mods_key)
    _constant_names = torch._dynamo.assume_constant_result(global_tensor_names)


def traced_key(score_mod, mask_mod):
    """(key, captured) as a traced call asks mods_key: the functions taken apart first
    (_function_parts), the tensors of their closures the op's `captured` input."""
    captured = []
    parts = (_function_parts(score_mod, captured), _function_parts(mask_mod, captured))
    if any(p is None and fn is not None for p, fn in zip(parts, (score_mod, mask_mod))):
        return -1, []
    return _constant_key(*parts), captured


def mods_key(score_mod, mask_mod):
    """The ops' key of a call's mods (each a function, a @tessel.jit function, None, or a
    function's parts: `_function_parts`), or -1 where they stay outside the graph: mods that
    read a tensor other than through their own closure (a global, a module attribute, a
    function they call: a kernel argument the graph would not know it depends on) or whose code
    cannot be looked at."""
    if score_mod is None and mask_mod is None:
        return 0
    from .mod_functions import fn_key
    score_mod, mask_mod = _rebuilt(score_mod), _rebuilt(mask_mod)
    if any(fn is not None and (_unknown(fn) or _reads_tensors(fn))
           for fn in (score_mod, mask_mod)):
        return -1
    try:
        ident = (fn_key(score_mod), fn_key(mask_mod))
        key = _MOD_KEYS.get(ident)
    except TypeError:
        return -1
    if key is None:
        try:
            key = _content_key(score_mod, mask_mod)
        except RecursionError:              # (a closure deeper than _MAX_DEPTH)
            return -1
        _MOD_KEYS[ident] = key
        MODS[key] = (score_mod, mask_mod)
    return key


def _content_key(*fns, depth=0):
    """A key from the mods' contents (code, defaults, closure values), the same in every
    process: a graph compiled elsewhere (a cache, an export) names the pair it was traced with,
    and one whose pair this process never entered fails at the lookup (`lookup`) instead of
    running another pair that took its number."""
    import hashlib
    if depth > _MAX_DEPTH:
        raise RecursionError("tessel: a mod's closure nests functions too deep")
    parts = []
    for fn in fns:
        fn = getattr(fn, "fn", fn)
        code = getattr(fn, "__code__", None)
        if code is None:
            parts.append(repr(fn))
            continue
        cells = [c.cell_contents for c in fn.__closure__ or ()]
        parts.append(repr((code.co_filename, code.co_firstlineno, code.co_name, code.co_code,
                           code.co_consts, fn.__defaults__,
                           [_cell_key(v, depth) for v in cells],
                           getattr(fn, "_tessel_globals", ()))))
    return 1 + int.from_bytes(hashlib.sha1("|".join(parts).encode()).digest()[:7], "little")


def _cell_key(v, depth):
    """A closure value as _content_key hashes it: functions by their contents, also in tuples
    (a function's repr holds its address, which differs between processes)."""
    if callable(v):
        return _content_key(v, depth=depth + 1)
    return tuple(_cell_key(x, depth) for x in v) if type(v) is tuple else v


def lookup(key, captured=()):
    """The (score_mod, mask_mod) of an op's key, their closures' tensors those the op was handed
    (`captured`), or the error of a graph traced in another process with mods never entered in
    this one."""
    pair = MODS.get(key)
    if pair is None:
        raise RuntimeError(
            f"tessel: this compiled graph carries mods (key {key}) that were not traced in this "
            "process; compile the model here, so that tessel.attention is traced "
            "(docs/torch-compile.md)")
    mods = []
    for fn, role in zip(pair, ("score_mod", "mask_mod")):
        filled, overrides = _with_tensors(fn, captured), {}
        _overrides(fn, captured, overrides)
        if overrides:                   # (the module's global tensors: the op's inputs instead)
            from .mod_functions import as_jit
            filled = as_jit(filled, role).bound_to(filled, overrides)
        mods.append(filled)
    return tuple(mods)


def _overrides(v, captured, found, depth=0):
    """{(id(globals), name): tensor} of the global tensors an entry's functions read
    (`_global_tensors`), from the op's `captured` inputs."""
    import types
    if depth > _MAX_DEPTH:
        return
    if type(v) is tuple:
        for x in v:
            _overrides(x, captured, found, depth)
        return
    if not isinstance(v, types.FunctionType):
        return
    for name, slot in getattr(v, "_tessel_globals", ()):
        found[(id(v.__globals__), name)] = captured[slot[1]]
    for x in [c.cell_contents for c in v.__closure__ or ()] + list(v.__defaults__ or ()):
        _overrides(x, captured, found, depth + 1)


def _slot(i):
    """The stand-in an entry's closure holds for the op's i-th captured tensor: a plain tuple,
    which Dynamo hands to mods_key as a constant and the content key hashes."""
    return ("tessel.captured", i)


def _is_slot(v):
    return type(v) is tuple and len(v) == 2 and v[0] == "tessel.captured"


def _with_tensors(fn, captured, depth=0):
    """fn, or where its closure holds stand-ins (_slot), itself or in the functions it holds,
    the same function around `captured`: a new function object per call, which tessel's caches
    tell apart by code and closure values (tensors by their signature), as eager closures made
    per call."""
    import types
    if not isinstance(fn, types.FunctionType) or depth > _MAX_DEPTH:
        return fn
    cells = [c.cell_contents for c in fn.__closure__ or ()]
    filled = [_filled(v, captured, depth + 1) for v in cells]
    defaults = fn.__defaults__ and _filled(fn.__defaults__, captured, depth + 1)
    if all(a is b for a, b in zip(filled, cells)) and defaults is fn.__defaults__:
        return fn
    return types.FunctionType(fn.__code__, fn.__globals__, fn.__name__, defaults,
                              tuple(types.CellType(v) for v in filled) or None)


def _filled(v, captured, depth):
    """A closure value with its stand-ins replaced by `captured`'s tensors (_with_tensors);
    the very same object where it holds none."""
    if _is_slot(v):
        return captured[v[1]]
    if type(v) is tuple:
        items = tuple(_filled(x, captured, depth) for x in v)
        return v if all(a is b for a, b in zip(items, v)) else items
    return _with_tensors(v, captured, depth)


class _Unknown:
    """What stays outside the graph (_value_parts, _rebuilt). Told apart by isinstance, not
    `is`: a closure value Dynamo made symbolic (a number that changed between calls) cannot be
    compared by identity under torch 2.11's Dynamo (an internal error, not a graph break)."""


_UNKNOWN = _Unknown()


def _unknown(x):
    return isinstance(x, _Unknown)


def _function_parts(fn, captured, depth=0):
    """A mod as a traced call hands it to mods_key: a plain function as its code, module,
    defaults and closure values (Dynamo converts those to constants; a closure value it has made
    symbolic is a graph break there, not an error), their tensors appended to `captured` and a
    stand-in (_slot) in their place; else itself; None where it must stay outside the graph
    (keyword defaults, not a function)."""
    import types
    from .jit import JITFunction
    if fn is None or isinstance(fn, JITFunction):
        return fn
    if not isinstance(fn, types.FunctionType) or fn.__kwdefaults__ or depth > _MAX_DEPTH:
        return None
    cells = []
    for c in fn.__closure__ or ():
        v = _value_parts(c.cell_contents, captured, depth + 1)
        if _unknown(v):
            return None
        cells.append(v)
    defaults = fn.__defaults__ and _value_parts(fn.__defaults__, captured, depth + 1)
    if _unknown(defaults):
        return None
    return (_FUNCTION, fn.__code__, fn.__module__, defaults, tuple(cells),
            _global_tensors(fn, captured))


def _global_tensors(fn, captured):
    """The tensors fn reads from its module's globals by name, appended to `captured`, as
    ((name, stand-in), ...): inputs of the op as a closure's are (FlexAttention's document ids
    as a global), read at launch from the op's inputs (`lookup`: ModFunction.overrides)."""
    names = (_constant_names or global_tensor_names)(fn.__code__, fn.__module__)
    found = []
    for name in names:              # (fn.__globals__ only where there are some: Dynamo cannot
        v = fn.__globals__.get(name)                # look at a lambda's made in its graph)
        if isinstance(v, sys.modules["torch"].Tensor):  # (else not handed: outside the graph)
            captured.append(v)
            found.append((name, _slot(len(captured) - 1)))
    return tuple(found)


def global_tensor_names(code, module):
    """The names `code` reads that are tensors among `module`'s globals (run eagerly: a
    constant to Dynamo, `bind`)."""
    scope = getattr(sys.modules.get(module), "__dict__", {})
    return tuple(n for n in code.co_names if isinstance(scope.get(n), sys.modules["torch"].Tensor))


def _value_parts(v, captured, depth):
    """A closure value as _function_parts hands it over: a tensor as a stand-in (appended to
    `captured`), a function as its parts, a tuple item by item, else itself; _UNKNOWN for a
    function that must stay outside the graph."""
    import types
    if isinstance(v, sys.modules["torch"].Tensor):
        captured.append(v)
        return _slot(len(captured) - 1)
    if isinstance(v, types.FunctionType):
        part = _function_parts(v, captured, depth)
        return _UNKNOWN if part is None else part
    if type(v) is tuple:
        items = tuple(_value_parts(x, captured, depth) for x in v)
        return _UNKNOWN if any(_unknown(x) for x in items) else items
    return v


_FUNCTION = "tessel.function"


def _rebuilt(part):
    """The function _function_parts took apart (in its module's globals), the functions in its
    closure too, or `part` itself; _UNKNOWN where a module cannot be found."""
    if type(part) is not tuple:
        return part
    if not (part and isinstance(part[0], str) and part[0] == _FUNCTION):
        items = tuple(_rebuilt(x) for x in part)
        return _UNKNOWN if any(_unknown(x) for x in items) else items
    import types
    _, code, module, defaults, cells, global_tensors = part
    cells, defaults = _rebuilt(cells), _rebuilt(defaults)
    if _unknown(cells) or _unknown(defaults):
        return _UNKNOWN
    scope = getattr(sys.modules.get(module), "__dict__", None)
    if scope is None:                   # (a module imported under another name: its file)
        scope = next((getattr(m, "__dict__", None) for m in list(sys.modules.values())
                      if getattr(m, "__file__", None) == code.co_filename), None)
    if scope is None:
        return _UNKNOWN
    fn = types.FunctionType(code, scope, code.co_name, defaults,
                            tuple(types.CellType(v) for v in cells) or None)
    if global_tensors:
        fn._tessel_globals = global_tensors     # (read by lookup and _reads_tensors)
    return fn


def _reads_tensors(fn):
    """Whether fn (a mod or a @tessel.jit function) reads a captured tensor the op is not
    handed: the block masks' own test (closure, globals, module attributes, the functions it
    calls), less the global tensors the op takes as inputs; yes in doubt."""
    from .blocksparse import mask_reads_tensors
    return mask_reads_tensors(getattr(fn, "fn", fn), handed=True)   # (a JITFunction: its fn)
