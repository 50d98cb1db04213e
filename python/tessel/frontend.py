"""The front end of the DSL: walks a @tessel.jit function's AST and builds tile IR.

Values during tracing are either compile-time Python objects (ints, floats, tuples, dtypes,
functions: "constexpr") or `TVal`s, handles to IR values with their kind, element type and shape.
Every op is built through `tessel._tessel.KernelBuilder` at the source position of the AST node
being traced, so MLIR diagnostics point back at the user's line. Anything the DSL does not
support raises CompilationError at the offending node, never later.
"""
import ast
import builtins
import inspect
import math
import sys
import weakref

from . import capture
from . import language as tl
from .errors import CompilationError


class TVal:
    """An IR value: kind is scalar, tile, ptr or desc; dtype the element type name."""

    __slots__ = ("v", "kind", "dtype", "shape", "rank")

    def __init__(self, v):
        self.v = v
        self.kind = v.kind
        self.dtype = v.dtype
        self.shape = tuple(v.shape)
        self.rank = v.rank

    def type_str(self):
        if self.kind == "ptr":
            return f"pointer to {self.dtype}"
        if self.kind == "desc":
            return f"rank-{self.rank} descriptor of {self.dtype}"
        if self.kind == "tile":
            return f"{self.dtype} tile of shape {self.shape}"
        return f"{self.dtype} scalar"

    def same_type(self, other):
        return (self.kind, self.dtype, self.shape, self.rank) == \
            (other.kind, other.dtype, other.shape, other.rank)


class _Method:
    """`x.to` etc.: a method of a traced value, bound to it."""

    def __init__(self, value, name):
        self.value, self.name = value, name


class _Return(Exception):
    pass


class CapturedTensor:
    """A tensor read from a kernel's scope (tessel/capture.py) during a trace: its Capture and
    the kernel parameters that carry it (pointer, shape and strides as TVals)."""

    __slots__ = ("capture", "ptr", "shape", "strides")

    def __init__(self, cap, values):
        self.capture = cap
        self.ptr = values[0]
        self.shape = tuple(values[1:1 + cap.rank])
        self.strides = tuple(values[1 + cap.rank:])

    def type_str(self):
        return f"captured rank-{self.capture.rank} {self.capture.dtype} tensor"


_CMP = {ast.Lt: "lt", ast.LtE: "le", ast.Gt: "gt", ast.GtE: "ge", ast.Eq: "eq", ast.NotEq: "ne"}
_BINOP = {ast.Add: "add", ast.Sub: "sub", ast.Mult: "mul", ast.Div: "truediv",
          ast.FloorDiv: "div", ast.Mod: "mod", ast.Pow: "pow", ast.BitAnd: "and",
          ast.BitOr: "or", ast.BitXor: "xor"}
_PY_BINOP = {"add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
             "truediv": lambda a, b: a / b, "div": lambda a, b: a // b,
             "mod": lambda a, b: a % b, "pow": lambda a, b: a ** b,
             "and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
             "max": max, "min": min}
_UNSUPPORTED = {
    ast.While: "while loops are not supported; use `for ... in range(...)`",
    ast.Try: "try/except is not supported in kernels",
    ast.With: "`with` is not supported in kernels",
    ast.Lambda: "lambda is not supported in kernels; define a @tessel.jit function",
    ast.ListComp: "comprehensions are not supported in kernels",
    ast.SetComp: "comprehensions are not supported in kernels",
    ast.DictComp: "comprehensions are not supported in kernels",
    ast.GeneratorExp: "generator expressions are not supported in kernels",
    ast.Break: "break is not supported in kernels",
    ast.Continue: "continue is not supported in kernels",
    ast.Global: "global is not supported in kernels",
    ast.Nonlocal: "nonlocal is not supported in kernels",
    ast.Delete: "del is not supported in kernels",
    ast.Raise: "raise is not supported in kernels",
    ast.ClassDef: "classes cannot be defined in kernels",
    ast.FunctionDef: "functions cannot be defined inside kernels; define a @tessel.jit function",
    ast.Dict: "dicts are not supported in kernels",
    ast.Set: "sets are not supported in kernels",
    ast.Yield: "yield is not supported in kernels",
    ast.Await: "await is not supported in kernels",
    ast.JoinedStr: "f-strings are not supported in kernels",
    ast.NamedExpr: "`:=` is not supported in kernels",
    ast.Starred: "starred expressions are not supported in kernels",
}
_PY_FUNCS = {builtins.min, builtins.max, builtins.abs, builtins.float, builtins.int,
             builtins.len, builtins.round, builtins.bool, builtins.pow}
# torch functions that FlexAttention's mods call and that mean what their tl namesakes mean:
# a mod written for flex_attention compiles as it is (docs/dsl.md).
_TORCH_TWINS = ("where", "exp", "exp2", "log", "log2", "sqrt", "tanh", "sin", "cos", "abs",
                "maximum",
                "minimum")


def _torch_twin(fn):
    """The tl name of a torch function in _TORCH_TWINS, else None."""
    name = getattr(fn, "__name__", None)
    torch = sys.modules.get("torch")
    if name in _TORCH_TWINS and torch is not None and getattr(torch, name, None) is fn:
        return name
    return None


# Plain Python functions a kernel calls, as @tessel.jit functions (_plain_jit).
_PLAIN_JIT = weakref.WeakKeyDictionary()


def _plain_jit(fn):
    """A plain function of the user's (not the standard library's, torch's, numpy's or
    tessel's) called in a kernel, as the @tessel.jit function it is inlined as: FlexAttention's
    mods call helpers and each other (and_masks, or_masks) without decorating them. None for
    anything else."""
    if not is_user_function(fn):
        return None
    jitted = _PLAIN_JIT.get(fn)
    if jitted is None:
        from .jit import jit
        jitted = _PLAIN_JIT[fn] = jit(fn)
    return jitted


def is_user_function(fn):
    """Whether fn is a plain Python function of the user's: not the standard library's, torch's,
    numpy's or tessel's."""
    import types
    if not isinstance(fn, types.FunctionType):
        return False
    module = sys.modules.get(getattr(fn, "__module__", None) or "")
    return module is None or _user_module(module)


_FLOATS = ("f16", "bf16", "f32")
# FP8 (e4m3fn) tiles are loaded, stored, converted and multiplied by tl.dot, not computed on.
_FP8 = "f8e4m3fn"
# Globals read by a trace that need no guard: Python's builtins and tl's own objects.
_UNGUARDED = tuple(_PY_FUNCS) + (tl.constexpr,)


def _float_rank(d):
    return {"bf16": 1, "f16": 1, "f32": 2}[d]


def _is_number(x):
    return isinstance(x, (bool, int, float))


def _user_module(module):
    """Whether attributes read from a module are guarded: the user's own modules, not the
    standard library, tessel, numpy or torch (whose attributes do not change between calls)."""
    top = module.__name__.partition(".")[0]
    return top not in sys.stdlib_module_names and top not in ("tessel", "numpy", "torch")


class FunctionSource:
    """A Python function's AST with the offsets that map its nodes to the user's file."""

    def __init__(self, fn):
        self.fn = fn
        self.filename = inspect.getsourcefile(fn) or "<unknown>"
        # (its code's name: a function rebuilt from the code, as TorchDynamo rebuilds a
        # lambda made in a compiled function, may carry another __name__)
        if fn.__code__.co_name == "<lambda>":
            self.tree = _lambda_tree(fn, self.filename)
            self.line_offset = 0
            self.col_offset = 0
        else:
            import tokenize
            try:
                lines, first = inspect.getsourcelines(fn)
                indent = len(lines[0]) - len(lines[0].lstrip())
                src = "".join(l[indent:] if l.strip() else "\n" for l in lines)
                self.tree = ast.parse(src).body[0]
                if getattr(self.tree, "name", None) != fn.__code__.co_name:
                    raise SyntaxError(f"no def {fn.__code__.co_name} there")
            except (SyntaxError, tokenize.TokenError) as e:     # (not what Python loaded)
                raise OSError(f"line {fn.__code__.co_firstlineno} of {self.filename} does not "
                              f"parse as {fn.__code__.co_name} ({e}): was the file changed "
                              "after it was imported?") from None
            self.line_offset = first - 1
            self.col_offset = indent
        self.globals = fn.__globals__
        self.cells = {}
        self.closure = {}
        if fn.__closure__:
            for name, cell in zip(fn.__code__.co_freevars, fn.__closure__):
                self.cells[name] = cell
                try:
                    self.closure[name] = cell.cell_contents
                except ValueError:
                    pass

    def position(self, node):
        line = getattr(node, "lineno", 1) + self.line_offset
        col = getattr(node, "col_offset", 0) + self.col_offset + 1
        return self.filename, line, col


def _lambda_tree(fn, filename):
    """A lambda's body as a FunctionDef `<lambda>(args): return body`, located in its file.

    inspect gives a lambda's source lines only, often not a complete statement: the whole file is
    parsed and the lambda found by its first line and parameter names (then by the columns the
    compiler recorded for its body, when one line holds several such lambdas)."""
    import linecache
    code = fn.__code__
    try:
        tree = ast.parse("".join(linecache.getlines(filename)) or open(filename).read())
    except (OSError, SyntaxError) as e:
        raise OSError(f"cannot parse {filename}: {e} (was the file changed after it was "
                      "imported?)") from None
    params = list(code.co_varnames[:code.co_argcount + code.co_kwonlyargcount])
    found = [n for n in ast.walk(tree) if isinstance(n, ast.Lambda)
             and n.lineno == code.co_firstlineno
             and [a.arg for a in n.args.posonlyargs + n.args.args + n.args.kwonlyargs] == params]
    if len(found) > 1:
        cols = {c for _, _, c, end in code.co_positions() if c is not None and end}
        found = [n for n in found if cols and min(cols) >= n.body.col_offset
                 and max(cols) <= (n.body.end_col_offset or 1 << 30)] or found
    if len(found) != 1:
        raise OSError(f"cannot find the lambda of line {code.co_firstlineno} in {filename}")
    lam = found[0]
    ret = ast.copy_location(ast.Return(value=lam.body), lam.body)
    fdef = ast.FunctionDef(name="<lambda>", args=lam.args, body=[ret], decorator_list=[],
                           returns=None, type_comment=None)
    return ast.copy_location(fdef, lam)


class ModFunction:
    """A score_mod or mask_mod as tessel.attention passes it to its kernel (a constexpr): the
    @tessel.jit function and its role. Calling it in a kernel inlines the function and checks
    the contract of the role at the user's code: the number of arguments (at its `def` or
    lambda) and the type of the result (at its `return`).

    A function held in a mod's closure is one too (tessel/mod_functions.py), of role None (no
    contract) or of its own, at its place there: `path`, the cell index, then indices into
    tuples, and so on into the closures of the functions held. Where the trace calls it, it is
    placed under the mod that holds it (`under`): `root` is then the call's mod, and `path`
    leads from it, so that a launch reads its captured tensors from the call's function."""

    ROLES = {"mask_mod": ("b, h, q_idx, kv_idx", "a boolean tile"),
             "score_mod": ("score, b, h, q_idx, kv_idx", "a floating-point tile")}

    def __init__(self, jit_fn, role, user_fn=None, path=(), root=None, overrides=None):
        self.jit = jit_fn
        self.role = role
        # The function passed with this call, when it differs from the one traced (a closure
        # over tensors: tessel.attention traces a copy without them, capture.Slot); captured
        # tensors are read from it at launch. Not part of equality: the kernel is the same.
        self.user_fn = user_fn
        self.path, self.root = path, root
        # {(id(globals dict), name): tensor}: global tensors this call reads in place of the
        # module's (torch.compile's op hands the graph's inputs so: torch_mods.lookup).
        self.overrides = overrides

    def bound_to(self, user_fn, overrides=None):
        return ModFunction(self.jit, self.role, user_fn, self.path, self.root, overrides)

    def placed(self, path):
        """This mod's function held at `path` in another's closure (unbound)."""
        return ModFunction(self.jit, self.role, None, path)

    def under(self, owner):
        """This held function as the trace of `owner` (the function whose closure holds it)
        calls it: placed from owner's root."""
        if not self.path or not isinstance(owner, ModFunction):
            return self
        root = owner.root or owner.bound_to(None)
        return ModFunction(self.jit, self.role, None, owner.path + self.path, root)

    def _key(self):
        return (self.jit, self.role, self.path, self.root)

    def __eq__(self, other):
        return isinstance(other, ModFunction) and self._key() == other._key()

    def __hash__(self):
        return hash((ModFunction, id(self.jit), self.role, self.path, self.root))

    def __repr__(self):
        return f"<{self.role or 'function'} {self.jit.__name__}>"


# The deepest nesting of sub-expressions the front end traces (inlined calls included). The walk
# recurses once per level; past this a kernel gets a located error instead of Python's
# RecursionError. Chains of binary operators (`a + b + c + ...`, any length) are walked without
# recursion and do not count.
MAX_EXPRESSION_DEPTH = 200


class CodeGenerator:
    """Traces one function body into the builder (kernels, and inlined callees)."""

    def __init__(self, builder, source, env, depth=0, softmax_guard=None, guards=None,
                 nesting=None, owner=None, captures=None):
        self.b = builder
        # The function whose scope this body reads (a JITFunction or a ModFunction), and the
        # tensors the whole trace captured: {key: (Capture, CapturedTensor)} (tessel/capture.py).
        self.owner = owner
        self.captures = {} if captures is None else captures
        # What the trace read from globals and closures: {(id(container), name): (container,
        # name, value)}, shared with inlined callees. A JITFunction keys its specialisations by
        # these values too (tessel/jit.py, docs/dsl-decisions.md).
        self.guards = {} if guards is None else guards
        # [current expression depth], shared with the generators of inlined callees.
        self.expr_nesting = nesting if nesting is not None else [0]
        self.src = source
        self.env = env
        self.depth = depth
        self.node = source.tree
        # The innermost loop: ("stream" | "range", depth of statement nesting at its body).
        self.loops = []
        self.nesting = 0
        self.scoped_out = {}
        self.returned = None

    # ---- errors and locations -------------------------------------------------------------
    def error(self, node, message):
        filename, line, col = self.src.position(node)
        return CompilationError(message, filename, line, col)

    def at(self, node):
        self.node = node
        self.b.set_loc(*self.src.position(node))

    def build(self, fn_name, *args):
        """Calls the builder; its ValueErrors become errors at the current node."""
        try:
            return getattr(self.b, fn_name)(*args)
        except ValueError as e:
            raise self.error(self.node, str(e)) from None

    def wrap(self, v):
        return TVal(v)

    # ---- statements -----------------------------------------------------------------------
    def run_body(self, stmts):
        for stmt in stmts:
            self.stmt(stmt)

    def stmt(self, node):
        for kind, msg in _UNSUPPORTED.items():
            if isinstance(node, kind):
                raise self.error(node, msg)
        handler = getattr(self, "stmt_" + type(node).__name__, None)
        if handler is None:
            raise self.error(node, f"{type(node).__name__} statements are not supported in kernels")
        self.at(node)
        handler(node)

    def stmt_Pass(self, node):
        pass

    def stmt_Expr(self, node):
        if isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            return  # docstring
        self.expr(node.value)

    def stmt_Assert(self, node):
        test = self.expr(node.test)
        if isinstance(test, TVal):
            raise self.error(node, "assert needs a compile-time condition")
        if not test:
            msg = self.expr(node.msg) if node.msg else "assertion failed"
            raise self.error(node, f"static assertion failed: {msg}")

    def assign(self, target, value, node):
        if isinstance(target, ast.Name):
            self.env[target.id] = value
            self.scoped_out.pop(target.id, None)
        elif isinstance(target, (ast.Tuple, ast.List)):
            if not isinstance(value, tuple):
                raise self.error(node, "cannot unpack a non-tuple value")
            if len(value) != len(target.elts):
                raise self.error(node, f"cannot unpack {len(value)} values into "
                                       f"{len(target.elts)} names")
            for t, v in zip(target.elts, value):
                self.assign(t, v, node)
        elif isinstance(target, ast.Subscript):
            raise self.error(target, "tiles are immutable: item assignment is not supported; "
                                     "use tl.where")
        elif isinstance(target, ast.Attribute):
            raise self.error(target, "attribute assignment is not supported in kernels")
        else:
            raise self.error(target, "unsupported assignment target")

    def stmt_Assign(self, node):
        value = self.expr(node.value)
        for t in node.targets:
            self.assign(t, value, node)

    def stmt_AnnAssign(self, node):
        if node.value is None:
            raise self.error(node, "a declaration needs a value")
        self.assign(node.target, self.expr(node.value), node)

    def stmt_AugAssign(self, node):
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "augmented assignment needs a plain name")
        cur = self.load_name(node.target)
        op = _BINOP.get(type(node.op))
        if op is None:
            raise self.error(node, f"operator {type(node.op).__name__} is not supported")
        self.at(node)
        self.assign(node.target, self.binary(op, cur, self.expr(node.value), node), node)

    def stmt_Return(self, node):
        if self.loops or self.nesting:
            raise self.error(node, "return inside a loop or a run-time if is not supported")
        self.returned = self.expr(node.value) if node.value is not None else None
        self.return_node = node
        raise _Return()

    # ---- if -------------------------------------------------------------------------------
    def stmt_If(self, node):
        cond = self.expr(node.test)
        if not isinstance(cond, TVal):
            # Compile-time condition: trace only the branch taken.
            self.run_body(node.body if cond else node.orelse)
            return
        if cond.kind != "scalar":
            raise self.error(node.test, f"an if condition must be a scalar, not a "
                                        f"{cond.type_str()}; use tl.where for tiles")
        self.at(node)
        if cond.dtype != "i1":
            cond = self.to_bool(cond, node.test)
        before = dict(self.env)
        self.build("begin_if", cond.v)
        self.nesting += 1
        self.run_body(node.body)
        then_env, self.env = self.env, dict(before)
        self.at(node)
        self.build("enter_else")
        self.run_body(node.orelse)
        else_env, self.env = self.env, dict(before)
        self.nesting -= 1
        names = []
        for name in list(then_env) + [n for n in else_env if n not in then_env]:
            in_both = name in then_env and name in else_env
            if name not in before and not in_both:
                self.scoped_out[name] = ("if", node.lineno + self.src.line_offset)
                continue
            t = then_env.get(name, before.get(name))
            e = else_env.get(name, before.get(name))
            if t is e:
                continue
            if not isinstance(t, TVal) and not isinstance(e, TVal):
                if type(t) is type(e) and t == e:
                    self.env[name] = t
                    continue
                if not (_is_number(t) and _is_number(e)):
                    raise self.error(node, f"'{name}' gets different compile-time values in the "
                                           "two branches of a run-time if")
            names.append((name, t, e))
        # Materialise constants inside their branch, with the other branch's type.
        then_vals, else_vals = [], []
        for name, t, e in names:
            ref = t if isinstance(t, TVal) else e if isinstance(e, TVal) else None
            self.at(node)
            self.build("enter_then")
            tv = self.materialize(t, ref, node)
            self.build("enter_else")
            ev = self.materialize(e, ref if ref is not None else tv, node)
            if not tv.same_type(ev):
                raise self.error(node, f"'{name}' is a {tv.type_str()} in one branch and a "
                                       f"{ev.type_str()} in the other")
            then_vals.append(tv.v)
            else_vals.append(ev.v)
        results = self.build("end_if", then_vals, else_vals)
        for (name, _, _), r in zip(names, results):
            self.env[name] = self.wrap(r)

    # ---- for ------------------------------------------------------------------------------
    def stmt_For(self, node):
        if node.orelse:
            raise self.error(node, "for ... else is not supported")
        it = node.iter
        fn = self.expr(it.func) if isinstance(it, ast.Call) else None
        if fn in (builtins.range, tl.stream):
            args = [self.expr(a) for a in it.args]
            if it.keywords:
                raise self.error(it, f"{'range' if fn is builtins.range else 'tl.stream'} takes "
                                     "no keyword arguments")
            if not 1 <= len(args) <= 3:
                raise self.error(it, "range takes 1 to 3 arguments")
            if len(args) == 1:
                args = [0, args[0], 1]
            elif len(args) == 2:
                args.append(1)
            self.emit_loop(node, args, "stream" if fn is tl.stream else "range")
            return
        if fn is tl.static_range:
            args = [self.expr(a) for a in it.args]
            if any(isinstance(a, TVal) for a in args):
                raise self.error(it, "tl.static_range needs compile-time bounds")
            seq = builtins.range(*args)
        else:
            seq = self.expr(it)
            if isinstance(seq, TVal):
                raise self.error(it, "a for loop must iterate over range(...), tl.stream(...), "
                                     "tl.static_range(...) or a compile-time tuple")
            if not isinstance(seq, (tuple, list, builtins.range)):
                raise self.error(it, f"cannot iterate over {type(seq).__name__} in a kernel")
        for x in seq:  # unrolled at compile time
            self.assign(node.target, x, node)
            self.run_body(node.body)

    def new_constant(self, node, name, args, kwargs):
        """`x.new_ones(())` / `x.new_zeros(())`, as FlexAttention's and_masks / or_masks start
        their fold: a 0-dim tensor is a compile-time constant here (True / False for
        torch.bool, 1 / 0 otherwise), which broadcasts as torch's does."""
        size = args[0] if args else kwargs.get("size")
        if len(args) > 1 or set(kwargs) - {"size", "dtype", "device"} or \
                not isinstance(size, (tuple, list)) or len(size):
            raise self.error(node, f"{name} takes only a 0-dim size here: x.{name}((), "
                                   "dtype=...)")
        dtype = str(kwargs.get("dtype"))     # torch.bool, tl.int1, torch.float16, ...
        one = name == "new_ones"
        if "bool" in dtype or "int1" in dtype:
            return one
        return 1.0 * one if "float" in dtype else int(one)

    def emit_loop(self, node, bounds, kind):
        if not isinstance(node.target, ast.Name):
            raise self.error(node.target, "the loop variable must be a plain name")
        lo, hi, step = (self.as_i32(b, node.iter, "loop bounds") for b in bounds)
        if not isinstance(bounds[2], TVal) and bounds[2] <= 0:
            raise self.error(node.iter, "the loop step must be positive")
        assigned = _assigned_names(node.body) - {node.target.id}
        carried = []
        for name in sorted(assigned):
            if name not in self.env:
                continue
            val = self.env[name]
            if isinstance(val, TVal):
                carried.append((name, val))
            elif _is_number(val):
                carried.append((name, self.materialize(val, None, node)))
            else:
                raise self.error(node, f"'{name}' holds a compile-time {type(val).__name__} and "
                                       "cannot be reassigned inside a run-time loop")
        self.at(node)
        iv, args = self.build("begin_for", lo.v, hi.v, step.v, [c[1].v for c in carried])
        outer = dict(self.env)
        for (name, _), a in zip(carried, args):
            self.env[name] = self.wrap(a)
        self.env[node.target.id] = self.wrap(iv)
        self.loops.append(kind)
        saved_nesting, self.nesting = self.nesting, 0
        self.run_body(node.body)
        self.nesting = saved_nesting
        self.loops.pop()
        yields = []
        for name, init in carried:
            val = self.env[name]
            if not isinstance(val, TVal):
                if not _is_number(val):
                    raise self.error(node, f"'{name}' is assigned a compile-time "
                                           f"{type(val).__name__} inside the loop")
                val = self.materialize(val, init, node)
            if not val.same_type(init):
                raise self.error(node, f"'{name}' is carried by the loop as a {init.type_str()} "
                                       f"but the body makes it a {val.type_str()}; give it its "
                                       "final type before the loop")
            yields.append(val.v)
        inner = self.env
        self.env = outer
        self.at(node)
        results = self.build("end_for", yields)
        for (name, _), r in zip(carried, results):
            self.env[name] = self.wrap(r)
        for name in inner:
            if name not in outer:
                self.scoped_out[name] = ("loop", node.lineno + self.src.line_offset)
                self.env.pop(name, None)

    # ---- expressions ----------------------------------------------------------------------
    def expr(self, node):
        for kind, msg in _UNSUPPORTED.items():
            if isinstance(node, kind):
                raise self.error(node, msg)
        handler = getattr(self, "expr_" + type(node).__name__, None)
        if handler is None:
            raise self.error(node, f"{type(node).__name__} expressions are not supported in kernels")
        if self.expr_nesting[0] >= MAX_EXPRESSION_DEPTH:
            raise self.error(node, f"expression nested more than {MAX_EXPRESSION_DEPTH} levels "
                                   "deep: split it into several statements")
        self.at(node)
        self.expr_nesting[0] += 1
        try:
            return handler(node)
        finally:
            self.expr_nesting[0] -= 1

    def expr_Constant(self, node):
        return node.value

    def expr_Tuple(self, node):
        return tuple(self.expr(e) for e in node.elts)

    expr_List = expr_Tuple

    def load_name(self, node):
        name = node.id
        if name in self.env:
            return self.env[name]
        if name in self.scoped_out:
            where, line = self.scoped_out[name]
            raise self.error(node, f"'{name}' is defined only inside the {where} at line {line}; "
                                   f"define it before the {where} to use it after")
        if name in self.src.cells:
            try:
                value = self.src.cells[name].cell_contents   # now, not when the source was read
            except ValueError:
                raise self.error(node, f"free variable '{name}' has no value yet") from None
            if capture.is_tensor(value):
                return self.capture_tensor(node, "cell", name, None, value)
            self.guard(self.src.cells[name], None, value)
            return value
        if name in self.src.globals:
            value = self.src.globals[name]
            if capture.is_tensor(value):
                return self.capture_tensor(node, "global", name, None, value)
            self.guard(self.src.globals, name, value)
            return value
        if hasattr(builtins, name):
            return getattr(builtins, name)
        raise self.error(node, f"name '{name}' is not defined")

    def guard(self, container, name, value):
        """Records that the trace depends on `container[name]` (a globals dict or a module's
        dict; a closure cell when name is None) having this value."""
        if inspect.ismodule(value) or isinstance(value, (tl._Builtin, tl.dtype)) or \
                any(value is u for u in _UNGUARDED):
            return
        self.guards.setdefault((id(container), name), (container, name, value))

    def expr_Name(self, node):
        return self.load_name(node)

    def capture_tensor(self, node, kind, name, container, value):
        """A tensor read from the scope: kernel parameters, not a constant (tessel/capture.py).
        One set of parameters per place it is read from, however often it is read."""
        try:
            sig = capture.signature(value)
        except ValueError as e:
            raise self.error(node, f"captured tensor '{name}' {e}") from None
        key = (kind, name, id(container) if kind == "dict" else self.owner)
        hit = self.captures.get(key)
        if hit is None:
            cap = capture.Capture(self.owner, kind, name, container, sig, self.src.position(node))
            values = [self.wrap(self.build("add_param", k, d)) for _, k, d in cap.params()]
            hit = self.captures[key] = (cap, CapturedTensor(cap, values))
        return hit[1]

    def read_tensor(self, node, t, index):
        """`t[i, j, ...]` of a captured tensor: a tile.gather with one index per axis, each a
        compile-time int, an integer scalar or an integer tile (tiles broadcast together)."""
        cap = t.capture
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        if len(items) != cap.rank:
            raise self.error(node, f"'{cap.name}' is a rank-{cap.rank} tensor: index it with "
                                   f"{cap.rank} indices (one per axis), not {len(items)}")
        indices = []
        for item in items:
            if isinstance(item, ast.Slice) or (isinstance(item, ast.Constant) and
                                               item.value in (None, Ellipsis)):
                raise self.error(node, f"captured tensors are read element by element: index "
                                       f"'{cap.name}' with integers or integer tiles, not slices")
            v = self.expr(item)
            if isinstance(v, TVal):
                self.require_value(v, item, "an index")
                if v.dtype not in ("i32", "i1"):
                    raise self.error(item, f"an index of '{cap.name}' must be an integer, not a "
                                           f"{v.type_str()}")
                if v.dtype == "i1":
                    v = self.cast(v, "i32", item)
            elif isinstance(v, int) and not isinstance(v, bool):
                if v < 0:
                    raise self.error(item, f"index {v} of '{cap.name}': captured tensors are "
                                           "not indexed from the end (an index out of the "
                                           "shape reads 0)")
                v = self.materialize(v, None, item, "i32")
            else:
                what = "a " + v.type_str() if isinstance(v, CapturedTensor) else repr(v)
                raise self.error(item, f"an index of '{cap.name}' must be an integer, not "
                                       f"{what}")
            indices.append(v)
        shape = ()
        for v in indices:
            if v.kind == "tile":
                shape = self.broadcast_shape(shape, v.shape, node)
        self.at(node)
        indices = [self.broadcast(v, shape, node) if v.kind == "tile" else v for v in indices]
        desc = self.build("make_desc", t.ptr.v, None, [x.v for x in t.shape],
                          [x.v for x in t.strides])
        r = self.wrap(self.build("gather", desc, [v.v for v in indices], 0.0))
        if capture.dsl_dtype(cap.dtype) == "i1":
            r = self.compare("ne", r, 0, node)
        return r

    def expr_Attribute(self, node):
        base = self.expr(node.value)
        if isinstance(base, CapturedTensor):
            if node.attr == "shape":        # run-time sizes: the rank, not the sizes, is keyed
                return base.shape
            if node.attr == "ndim":
                return base.capture.rank
            if node.attr == "dtype":
                return tl.DTYPES.get(capture.dsl_dtype(base.capture.dtype))
            raise self.error(node, f"a captured tensor has .shape, .ndim and .dtype, not "
                                   f"'.{node.attr}'; index it to read it")
        if isinstance(base, TVal):
            if node.attr == "T":
                return self.tl_trans(node, base)
            if node.attr == "shape":
                return base.shape
            if node.attr == "dtype":
                return tl.DTYPES.get(base.dtype)
            if node.attr in ("to", "new_ones", "new_zeros"):
                return _Method(base, node.attr)
            raise self.error(node, f"a {base.type_str()} has no attribute '{node.attr}'")
        try:
            value = getattr(base, node.attr)
            if capture.is_tensor(value):
                if inspect.ismodule(base) and node.attr in vars(base):
                    return self.capture_tensor(node, "dict", node.attr, vars(base), value)
                raise self.error(node, f"'{node.attr}' is a tensor held by a "
                                       f"{type(base).__name__} object: tessel captures tensors "
                                       "from global or closure variables and module attributes "
                                       "only; assign it to a variable the function reads")
            if inspect.ismodule(base):
                if _user_module(base) and node.attr in vars(base):
                    self.guard(vars(base), node.attr, value)
            elif type(getattr(base, "__dict__", None)) is dict and node.attr in base.__dict__:
                self.guard(base.__dict__, node.attr, value)     # (an object's own attribute)
            return value
        except AttributeError:
            what = getattr(base, "__name__", type(base).__name__)
            raise self.error(node, f"'{what}' has no attribute '{node.attr}'") from None

    def expr_IfExp(self, node):
        cond = self.expr(node.test)
        if isinstance(cond, TVal):
            return self.tl_where(node, cond, self.expr(node.body), self.expr(node.orelse))
        return self.expr(node.body) if cond else self.expr(node.orelse)

    def expr_Subscript(self, node):
        base = self.expr(node.value)
        index = node.slice
        if isinstance(base, CapturedTensor):
            return self.read_tensor(node, base, index)
        if not isinstance(base, TVal):
            idx = self.expr(index)
            if isinstance(idx, TVal):
                raise self.error(index, "a compile-time tuple can only be indexed by a "
                                        "compile-time value")
            try:
                return base[idx]
            except Exception as e:
                raise self.error(node, f"indexing failed: {e}") from None
        if base.kind not in ("tile", "scalar"):
            raise self.error(node, f"cannot index a {base.type_str()}")
        items = index.elts if isinstance(index, ast.Tuple) else [index]
        result = base
        kept = 0
        axis = 0
        for item in items:
            if isinstance(item, ast.Constant) and item.value is None:
                self.at(item)
                if result.kind == "scalar":
                    raise self.error(item, "a scalar has no axes to expand; use tl.full")
                result = self.wrap(self.build("expand_dims", result.v, axis))
                axis += 1
            elif isinstance(item, ast.Slice) and item.lower is None and item.upper is None \
                    and item.step is None:
                kept += 1
                axis += 1
            else:
                raise self.error(item, "tiles can only be indexed with ':' and None "
                                       "(x[:, None] inserts an axis)")
        if kept != len(base.shape):
            raise self.error(node, f"index has {kept} ':' but the tile has rank "
                                   f"{len(base.shape)}")
        return result

    def expr_UnaryOp(self, node):
        x = self.expr(node.operand)
        if not isinstance(x, TVal):
            try:
                return {ast.USub: lambda a: -a, ast.UAdd: lambda a: +a, ast.Not: lambda a: not a,
                        ast.Invert: lambda a: ~a}[type(node.op)](x)
            except Exception as e:
                raise self.error(node, str(e)) from None
        self.at(node)
        self.require_value(x, node.operand, "an operand")
        if isinstance(node.op, ast.UAdd):
            return x
        if isinstance(node.op, ast.USub):
            if x.dtype == "i1":
                raise self.error(node, "cannot negate a boolean")
            return self.wrap(self.build("unary", "neg", x.v))
        if isinstance(node.op, ast.Not) or (isinstance(node.op, ast.Invert) and x.dtype == "i1"):
            return self.wrap(self.build("unary", "not", self.to_bool(x, node).v))
        return self.binary("xor", x, -1, node)

    def expr_BinOp(self, node):
        # `a + b + c + ...` is a chain of BinOps down the left operands: walked iteratively, in
        # the same order as the recursion would (leftmost operand first, then each right one).
        chain = [node]
        while isinstance(chain[-1].left, ast.BinOp):
            chain.append(chain[-1].left)
        for n in chain:
            if _BINOP.get(type(n.op)) is None:
                raise self.error(n, f"operator {type(n.op).__name__} is not supported")
        acc = self.expr(chain[-1].left)
        for n in reversed(chain):
            rhs = self.expr(n.right)
            self.at(n)
            acc = self.binary(_BINOP[type(n.op)], acc, rhs, n)
        return acc

    def expr_BoolOp(self, node):
        values = [self.expr(v) for v in node.values]
        self.at(node)
        if not any(isinstance(v, TVal) for v in values):
            result = values[0]
            for v in values[1:]:
                result = (result and v) if isinstance(node.op, ast.And) else (result or v)
            return result
        op = "and" if isinstance(node.op, ast.And) else "or"
        result = values[0]
        for v in values[1:]:
            a = self.to_bool(result, node) if isinstance(result, TVal) else bool(result)
            c = self.to_bool(v, node) if isinstance(v, TVal) else bool(v)
            result = self.binary(op, a, c, node)
        return result

    def expr_Compare(self, node):
        lhs = self.expr(node.left)
        result = None
        for op, right in zip(node.ops, node.comparators):
            pred = _CMP.get(type(op))
            if isinstance(op, (ast.Is, ast.IsNot)):
                rhs = self.expr(right)
                if isinstance(lhs, TVal) or isinstance(rhs, TVal):
                    raise self.error(node, "'is' compares compile-time values only")
                c = (lhs is rhs) if isinstance(op, ast.Is) else (lhs is not rhs)
                result = c if result is None else (result and c)
                lhs = rhs
                continue
            if pred is None:
                raise self.error(node, f"comparison {type(op).__name__} is not supported")
            rhs = self.expr(right)
            self.at(node)
            if isinstance(lhs, TVal) or isinstance(rhs, TVal):
                c = self.compare(pred, lhs, rhs, node)
            else:
                c = {"lt": lambda a, b: a < b, "le": lambda a, b: a <= b,
                     "gt": lambda a, b: a > b, "ge": lambda a, b: a >= b,
                     "eq": lambda a, b: a == b, "ne": lambda a, b: a != b}[pred](lhs, rhs)
            result = c if result is None else self.binary("and", result, c, node) \
                if isinstance(result, TVal) or isinstance(c, TVal) else (result and c)
            lhs = rhs
        return result

    def expr_Call(self, node):
        fn = self.expr(node.func)
        args = []
        for a in node.args:
            if isinstance(a, ast.Starred):
                raise self.error(a, "*args is not supported in kernels")
            args.append(self.expr(a))
        kwargs = {}
        for k in node.keywords:
            if k.arg is None:
                raise self.error(k, "**kwargs is not supported in kernels")
            kwargs[k.arg] = self.expr(k.value)
        self.at(node)
        if isinstance(fn, _Method):
            if fn.name == "to":
                return self.call_builtin(node, "to", self.tl_cast, (fn.value, *args), kwargs)
            return self.new_constant(node, fn.name, args, kwargs)
        if isinstance(fn, tl._Builtin):
            if fn.name in ("stream", "static_range"):
                raise self.error(node, f"tl.{fn.name} can only be the iterable of a for loop")
            handler = getattr(self, "tl_" + fn.name)
            return self.call_builtin(node, "tl." + fn.name, handler, args, kwargs)
        twin = _torch_twin(fn)
        if twin is not None:
            handler = getattr(self, "tl_" + twin)
            return self.call_builtin(node, "torch." + twin, handler, args, kwargs)
        from .jit import JITFunction
        if isinstance(fn, JITFunction):
            return self.inline_call(node, fn, args, kwargs)
        plain = _plain_jit(fn)
        if plain is not None:
            return self.inline_call(node, plain, args, kwargs)
        if isinstance(fn, ModFunction):
            return self.inline_call(node, fn.jit, args, kwargs, role=fn.role,
                                    owner=fn.under(self.owner))
        if fn is builtins.range:
            raise self.error(node, "range can only be the iterable of a for loop")
        if fn in _PY_FUNCS or getattr(fn, "__module__", None) == "math":
            if any(isinstance(a, TVal) for a in list(args) + list(kwargs.values())):
                if fn in (builtins.min, builtins.max) and len(args) == 2 and not kwargs:
                    return self.binary("min" if fn is builtins.min else "max", *args, node)
                if fn is builtins.abs and len(args) == 1:
                    return self.tl_abs(node, args[0])
                raise self.error(node, f"{getattr(fn, '__name__', fn)}() needs compile-time "
                                       "arguments here; use the tl.* function for run-time values")
            try:
                return fn(*args, **kwargs)
            except Exception as e:
                raise self.error(node, f"{getattr(fn, '__name__', fn)}(): {e}") from None
        if isinstance(fn, tl.dtype):
            raise self.error(node, "dtypes are not callable; use x.to(dtype)")
        name = getattr(fn, "__name__", type(fn).__name__)
        raise self.error(node, f"'{name}' is not a tl function or a @tessel.jit function, so it "
                               "cannot be called in a kernel")

    def call_builtin(self, node, name, handler, args, kwargs):
        sig = inspect.signature(handler)
        try:
            sig.bind(node, *args, **kwargs)
        except TypeError as e:
            raise self.error(node, f"{name}(): {e}") from None
        return handler(node, *args, **kwargs)

    def inline_call(self, node, fn, args, kwargs, role=None, owner=None):
        """Traces a @tessel.jit function in place. With a role ("mask_mod", "score_mod": a
        ModFunction), a wrong number of arguments is reported at the user's function and its
        result is checked against the role's contract at the user's `return`."""
        if self.depth > 32:
            raise self.error(node, f"calls nest too deeply (recursive call of {fn.__name__}?)")
        try:
            source = fn.source
        except CompilationError as e:
            raise self.error(node, e.message) from None
        callee = CodeGenerator(self.b, source, {}, self.depth + 1, guards=self.guards,
                               nesting=self.expr_nesting, owner=owner or fn,
                               captures=self.captures)
        sig = inspect.signature(fn.fn)
        try:
            bound = sig.bind(*args, **kwargs)
        except TypeError as e:
            if role is not None:
                expected, _ = ModFunction.ROLES[role]
                raise callee.error(source.tree, f"{role} is called as {role}({expected}): it must "
                                                f"take {len(args)} arguments, but "
                                                f"{fn.__name__}{sig} cannot ({e})") from None
            raise self.error(node, f"{fn.__name__}(): {e}") from None
        bound.apply_defaults()
        for pname, p in sig.parameters.items():
            if p.annotation is tl.constexpr and isinstance(bound.arguments[pname], TVal):
                raise self.error(node, f"{fn.__name__}(): parameter '{pname}' is tl.constexpr but "
                                       "receives a run-time value")
        callee.env = dict(bound.arguments)
        for pname, value in callee.env.items():
            if capture.is_tensor(value):        # a default's tensor (`doc=doc`): read per call
                callee.env[pname] = callee.capture_tensor(source.tree, "default", pname, None,
                                                          value)
        try:
            callee.run_body(source.tree.body)
        except _Return:
            pass
        if role is not None:
            self.check_mod_result(callee, fn, role, args)
        self.at(node)
        return callee.returned

    def check_mod_result(self, callee, fn, role, args):
        """A mask_mod returns booleans, a score_mod floats, each broadcastable to the score
        block: anything else would be silently combined with the built-in mask or scores."""
        r = callee.returned
        where = getattr(callee, "return_node", None)
        at = where.value if where is not None and where.value is not None else callee.src.tree
        _, wanted = ModFunction.ROLES[role]
        block = next((a.shape for a in args if isinstance(a, TVal) and a.kind == "tile"), ())
        if isinstance(r, TVal):
            got = r.type_str()
            got = ("an " if got[0] in "aeiouf" else "a ") + got
            if r.kind not in ("tile", "scalar") or (r.dtype == "i1") != (role == "mask_mod") or \
                    (role == "score_mod" and r.dtype not in _FLOATS):
                pass
            else:
                try:
                    if self.broadcast_shape(r.shape, block, at) != tuple(block):
                        raise ValueError
                except (CompilationError, ValueError):
                    raise callee.error(at, f"{role} {fn.__name__} must return {wanted} of the "
                                           f"score block's shape {tuple(block)}, not {got}") \
                        from None
                return
        elif role == "mask_mod" and isinstance(r, bool):
            return
        elif role == "score_mod" and isinstance(r, float):
            return
        else:
            got = "nothing" if r is None else f"the constant {r!r}"
        hint = " (compare it: `... != 0`)" if role == "mask_mod" else \
            " (convert it: `.to(tl.float32)`)" if role == "score_mod" else ""
        raise callee.error(at, f"{role} {fn.__name__} must return {wanted}, not {got}{hint}")

    # ---- typing helpers -------------------------------------------------------------------
    def require_value(self, x, node, what):
        if isinstance(x, CapturedTensor):
            raise self.error(node, f"{what} cannot be the captured tensor "
                                   f"'{x.capture.name}' itself: index it "
                                   f"({x.capture.name}[...]) to read its elements")
        if isinstance(x, TVal) and x.kind in ("ptr", "desc"):
            raise self.error(node, f"{what} cannot be a {x.type_str()}")

    def materialize(self, x, like, node, dtype=None, shape=None):
        """A Python number as an IR constant, shaped and typed like `like` (a TVal) if given."""
        if isinstance(x, TVal):
            return x
        if not _is_number(x):
            raise self.error(node, f"expected a number, got {type(x).__name__}")
        if dtype is None:
            if like is not None:
                dtype = like.dtype
                if isinstance(x, float) and dtype not in _FLOATS:
                    dtype = "f32"
                if dtype == "i1" and not isinstance(x, bool):
                    dtype = "i32"
            else:
                dtype = "i1" if isinstance(x, bool) else "i32" if isinstance(x, int) else "f32"
        if shape is None:
            shape = like.shape if like is not None else ()
        shape = list(shape)
        if dtype in _FLOATS:
            return self.wrap(self.build("const_float", float(x), dtype, shape))
        if dtype == "i32" and not -2**31 <= int(x) < 2**31:
            raise self.error(node, f"{x} does not fit in i32")
        return self.wrap(self.build("const_int", int(x), dtype, shape))

    def as_i32(self, x, node, what):
        if isinstance(x, TVal):
            if x.kind != "scalar" or x.dtype != "i32":
                raise self.error(node, f"{what} must be i32 scalars, not a {x.type_str()}")
            return x
        if isinstance(x, bool) or not isinstance(x, int):
            raise self.error(node, f"{what} must be integers, not {type(x).__name__}")
        return self.materialize(x, None, node, "i32")

    def to_bool(self, x, node):
        if isinstance(x, TVal):
            self.require_value(x, node, "a condition")
            return x if x.dtype == "i1" else self.cast(x, "i1", node)
        return self.materialize(bool(x), None, node, "i1")

    def cast(self, x, dtype, node):
        return self.wrap(self.build("cast", x.v, dtype))

    def broadcast(self, x, shape, node):
        if x.shape == tuple(shape):
            return x
        if x.kind == "scalar":
            return self.wrap(self.build("splat", x.v, list(shape)))
        v = x
        while len(v.shape) < len(shape):
            v = self.wrap(self.build("expand_dims", v.v, 0))
        return self.wrap(self.build("broadcast", v.v, list(shape)))

    def broadcast_shape(self, a, b, node):
        if len(a) < len(b):
            a, b = b, a
        b = (1,) * (len(a) - len(b)) + tuple(b)
        out = []
        for x, y in zip(a, b):
            if x != y and x != 1 and y != 1:
                raise self.error(node, f"shapes {tuple(a)} and {tuple(b)} cannot be broadcast "
                                       "together")
            out.append(max(x, y))
        return tuple(out)

    def common_dtype(self, a, b, node):
        if isinstance(a, TVal) and isinstance(b, TVal):
            x, y = a.dtype, b.dtype
            if x == y:
                return x
            if x in _FLOATS and y in _FLOATS:
                return "f32" if "f32" in (x, y) or _float_rank(x) == _float_rank(y) else x
            if x in _FLOATS:
                return x
            if y in _FLOATS:
                return y
            return "i32"
        if not isinstance(a, TVal) and not isinstance(b, TVal):
            # Two Python numbers (tl.where(c, 1.0, 2.0)): what they become as tiles.
            if any(isinstance(v, float) for v in (a, b)):
                return "f32"
            return "i1" if all(isinstance(v, bool) for v in (a, b)) else "i32"
        t, lit = (a, b) if isinstance(a, TVal) else (b, a)
        if isinstance(lit, float) and t.dtype not in _FLOATS:
            return "f32"
        if isinstance(lit, int) and not isinstance(lit, bool) and t.dtype == "i1":
            return "i32"
        return t.dtype

    def unify(self, a, b, node, dtype=None):
        """Both operands as TVals of one dtype and one (broadcast) shape."""
        for x in (a, b):
            if isinstance(x, (TVal, CapturedTensor)):
                self.require_value(x, node, "an operand")
            elif not _is_number(x):
                raise self.error(node, f"unsupported operand of type {type(x).__name__}")
        dtype = dtype or self.common_dtype(a, b, node)
        sa = a.shape if isinstance(a, TVal) else ()
        sb = b.shape if isinstance(b, TVal) else ()
        shape = self.broadcast_shape(sa, sb, node)
        out = []
        for x in (a, b):
            if isinstance(x, TVal):
                if x.dtype != dtype:
                    x = self.cast(x, dtype, node)
                x = self.broadcast(x, shape, node)
            else:
                x = self.materialize(x, None, node, dtype, shape)
            out.append(x)
        return out

    def binary(self, op, a, b, node):
        for x in (a, b):
            if isinstance(x, CapturedTensor):
                self.require_value(x, node, "an operand")
            if isinstance(x, TVal) and x.dtype == _FP8:
                raise self.error(node, f"'{op}' on an FP8 (f8e4m3fn) tile: FP8 is loaded, stored, "
                                       "converted and multiplied by tl.dot; convert it with "
                                       ".to(tl.float32) first")
        if not isinstance(a, TVal) and not isinstance(b, TVal):
            try:
                return _PY_BINOP[op](a, b)
            except Exception as e:
                raise self.error(node, str(e)) from None
        dtype = None
        if op == "truediv":
            d = self.common_dtype(a, b, node)
            dtype = d if d in _FLOATS else "f32"
            op = "div"
        elif op in ("and", "or", "xor"):
            d = self.common_dtype(a, b, node)
            if d in _FLOATS:
                raise self.error(node, f"'{op}' needs integer or boolean operands, not {d}")
        elif op in ("add", "sub", "mul", "div", "mod", "max", "min"):
            d = self.common_dtype(a, b, node)
            if d == "i1":
                dtype = "i32"
            if op == "div" and d in _FLOATS:
                raise self.error(node, "'//' on floats is not supported; use '/'")
            if op == "mod" and d in _FLOATS:
                raise self.error(node, "'%' on floats is not supported (only on integers)")
        elif op == "pow":
            d = self.common_dtype(a, b, node)
            if d not in _FLOATS:
                raise self.error(node, "'**' needs a float operand")
        x, y = self.unify(a, b, node, dtype)
        if op in ("div", "mod") and x.dtype not in _FLOATS:
            return self.floor_divmod(op, x, y, b if not isinstance(b, TVal) else None, node)
        if op == "add" and x.kind == "tile":
            for p, q in ((y, x), (x, y)):
                fused = self.build("fuse_dot_add", p.v, q.v)
                if fused is not None:
                    return self.wrap(fused)
        return self.wrap(self.build("binary", op, x.v, y.v))

    def floor_divmod(self, op, x, y, divisor, node):
        """`//` and `%` of integers with Python's semantics: the quotient rounds toward -inf
        and the remainder takes the divisor's sign. Built from the C-like arith.divsi/remsi
        (truncating) and a correction where the remainder is non-zero and its sign differs
        from the divisor's, so that the interpreter and both GPU lowerings, which implement
        those ops, agree. `divisor` is the divisor when it is a compile-time int: its sign is
        then known and the correction is one compare."""
        q = self.wrap(self.build("binary", "div", x.v, y.v))
        r = self.wrap(self.build("binary", "mod", x.v, y.v))
        zero = self.materialize(0, r, node)
        if isinstance(divisor, int) and divisor != 0:
            fix = self.wrap(self.build("compare", "lt" if divisor > 0 else "gt", r.v, zero.v))
        else:
            r_neg = self.build("compare", "lt", r.v, zero.v)
            y_neg = self.build("compare", "lt", y.v, zero.v)
            signs = self.build("binary", "xor", r_neg, y_neg)
            nonzero = self.build("compare", "ne", r.v, zero.v)
            fix = self.wrap(self.build("binary", "and", signs, nonzero))
        if op == "mod":
            fixed = self.wrap(self.build("binary", "add", r.v, y.v))
            return self.wrap(self.build("select", fix.v, fixed.v, r.v))
        one = self.materialize(1, q, node)
        fixed = self.wrap(self.build("binary", "sub", q.v, one.v))
        return self.wrap(self.build("select", fix.v, fixed.v, q.v))

    def compare(self, pred, a, b, node):
        x, y = self.unify(a, b, node)
        if x.dtype == "i1" and pred in ("lt", "le", "gt", "ge"):
            # Booleans order as Python's False < True; as signed i1, true is -1.
            x, y = self.cast(x, "i32", node), self.cast(y, "i32", node)
        return self.wrap(self.build("compare", pred, x.v, y.v))

    # ---- tl builtins ----------------------------------------------------------------------
    # Each takes the call node then the user's arguments; signatures define the accepted
    # arguments (binding them gives the "wrong arguments" errors).
    def constexpr_int(self, x, node, what):
        if isinstance(x, TVal):
            raise self.error(node, f"{what} must be a compile-time constant (tl.constexpr), not a "
                                   f"run-time {x.type_str()}")
        if isinstance(x, bool) or not isinstance(x, int):
            raise self.error(node, f"{what} must be an integer, not {x!r}")
        return x

    def shape_arg(self, shape, node, what="shape"):
        if isinstance(shape, (int, TVal)) and not isinstance(shape, bool):
            shape = (shape,)
        if not isinstance(shape, tuple):
            raise self.error(node, f"{what} must be a tuple of integers")
        out = tuple(self.constexpr_int(s, node, f"{what} entries") for s in shape)
        if not out or any(s <= 0 for s in out):
            raise self.error(node, f"{what} {out} must have positive entries")
        return out

    def axis_arg(self, axis, rank, node):
        axis = self.constexpr_int(axis, node, "axis")
        if not -rank <= axis < rank:
            raise self.error(node, f"axis {axis} is out of range for a rank-{rank} tile")
        return axis % rank

    def dtype_arg(self, d, node):
        if not isinstance(d, tl.dtype):
            raise self.error(node, f"expected a tl dtype (tl.float32, ...), got {d!r}")
        return d.name

    def tile_arg(self, x, node, what, ranks=None):
        if not isinstance(x, TVal) or x.kind != "tile":
            desc = x.type_str() if isinstance(x, TVal) else repr(x)
            raise self.error(node, f"{what} must be a tile, not {desc}")
        if ranks and len(x.shape) not in ranks:
            raise self.error(node, f"{what} must have rank {' or '.join(map(str, ranks))}, "
                                   f"not shape {x.shape}")
        return x

    def tl_program_id(self, node, axis):
        axis = self.constexpr_int(axis, node, "axis")
        if axis not in (0, 1, 2):
            raise self.error(node, "the grid has axes 0, 1 and 2")
        return self.wrap(self.build("program_id", axis))

    def tl_num_programs(self, node, axis):
        axis = self.constexpr_int(axis, node, "axis")
        if axis not in (0, 1, 2):
            raise self.error(node, "the grid has axes 0, 1 and 2")
        return self.wrap(self.build("num_programs", axis))

    def tl_make_desc(self, node, ptr, shape, strides, offset=None, pages=None, num_pages=None,
                     page_size=None):
        if not isinstance(ptr, TVal) or ptr.kind != "ptr":
            raise self.error(node, "tl.make_desc needs a pointer (an array argument of the kernel)")
        shape = shape if isinstance(shape, tuple) else (shape,)
        strides = strides if isinstance(strides, tuple) else (strides,)
        if len(shape) != len(strides) or not shape:
            raise self.error(node, f"tl.make_desc: {len(shape)} dimensions but {len(strides)} "
                                   "strides")
        sh = [self.as_i32(s, node, "descriptor shapes").v for s in shape]
        st = [self.as_i32(s, node, "descriptor strides").v for s in strides]
        off = self.as_i32(offset, node, "descriptor offsets").v if offset is not None else None
        if pages is None and num_pages is None and page_size is None:
            return self.wrap(self.build("make_desc", ptr.v, off, sh, st))
        if pages is None or num_pages is None or page_size is None:
            raise self.error(node, "tl.make_desc: a paged descriptor needs pages, num_pages and "
                                   "page_size together")
        if not isinstance(pages, TVal) or pages.kind != "desc" or pages.rank != 1 \
                or pages.dtype != "i32":
            raise self.error(node, "tl.make_desc: pages must be a rank-1 int32 descriptor of "
                                   "page numbers (tl.make_desc of the page table's row)")
        if len(shape) != 2:
            raise self.error(node, f"tl.make_desc: a paged descriptor has rank 2 (rows through "
                                   f"the page table), not {len(shape)}")
        size = self.constexpr_int(page_size, node, "page_size")
        if size <= 0:
            raise self.error(node, f"tl.make_desc: page_size must be positive, got {size}")
        np_ = self.as_i32(num_pages, node, "num_pages").v
        return self.wrap(self.build("make_desc", ptr.v, off, sh, st, pages.v, np_, size))

    def offsets_arg(self, desc, offsets, node, op):
        if not isinstance(desc, TVal) or desc.kind != "desc":
            raise self.error(node, f"{op} needs a descriptor from tl.make_desc")
        offsets = offsets if isinstance(offsets, tuple) else (offsets,)
        if len(offsets) != desc.rank:
            raise self.error(node, f"{op}: a rank-{desc.rank} descriptor needs {desc.rank} "
                                   f"offsets, got {len(offsets)}")
        return [self.as_i32(o, node, f"{op} offsets").v for o in offsets]

    def tl_load(self, node, desc, offsets, shape=None, padding=0.0):
        offs = self.offsets_arg(desc, offsets, node, "tl.load")
        if shape is None:
            raise self.error(node, "tl.load needs the tile shape: tl.load(desc, offsets, "
                                   "shape=(...))")
        shape = self.shape_arg(shape, node)
        if len(shape) != desc.rank:
            raise self.error(node, f"tl.load: shape {shape} has rank {len(shape)} but the "
                                   f"descriptor has rank {desc.rank}")
        if isinstance(padding, TVal) or not _is_number(padding):
            raise self.error(node, "tl.load: padding must be a compile-time number")
        return self.wrap(self.build("load", desc.v, offs, list(shape), float(padding)))

    def tl_load_scalar(self, node, desc, indices, padding=0):
        idx = self.offsets_arg(desc, indices, node, "tl.load_scalar")
        if isinstance(padding, TVal) or not _is_number(padding):
            raise self.error(node, "tl.load_scalar: padding must be a compile-time number")
        if desc.dtype == "i32" and not (float(padding).is_integer()
                                        and -2**31 <= padding < 2**31):
            raise self.error(node, f"tl.load_scalar: padding {padding!r} is not an i32 value")
        return self.wrap(self.build("load_scalar", desc.v, idx, float(padding)))

    def tl_store(self, node, desc, offsets, value, mask=None):
        self.build("store", *self.write_args(node, "tl.store", desc, offsets, value, mask))
        return None

    def tl_atomic_add(self, node, desc, offsets, value, mask=None):
        if desc.dtype not in ("f32", "i32"):
            raise self.error(node, f"tl.atomic_add: adds into f32 or i32 descriptors, not "
                                   f"{desc.dtype} (accumulate in a float32 buffer and convert "
                                   f"after)")
        self.build("atomic_add", *self.write_args(node, "tl.atomic_add", desc, offsets, value,
                                                  mask))
        return None

    def write_args(self, node, what, desc, offsets, value, mask):
        """(desc, offsets, value, mask) of tl.store / tl.atomic_add, checked and converted."""
        offs = self.offsets_arg(desc, offsets, node, what)
        value = self.tile_arg(value, node, "the stored value")
        if len(value.shape) != desc.rank:
            raise self.error(node, f"{what}: a {value.type_str()} into a {desc.type_str()}")
        if value.dtype != desc.dtype:
            raise self.error(node, f"{what}: a {value.dtype} tile into a {desc.dtype} "
                                   f"descriptor; convert it with .to(tl.{tl.DTYPES[desc.dtype].numpy_name})")
        m = None
        if mask is not None:
            if not isinstance(mask, TVal):
                raise self.error(node, f"{what}: the mask must be a boolean tile")
            m = self.broadcast(self.to_bool(mask, node), value.shape, node).v
        return desc.v, offs, value.v, m

    def tl_dot(self, node, a, b, acc=None):
        a = self.tile_arg(a, node, "tl.dot's first operand", (2,))
        b = self.tile_arg(b, node, "tl.dot's second operand", (2,))
        for x in (a, b):
            if x.dtype not in _FLOATS + (_FP8,):
                raise self.error(node, f"tl.dot multiplies f8e4m3fn, f16, bf16 or f32 tiles, not "
                                       f"{x.dtype}")
        if a.dtype != b.dtype:
            raise self.error(node, f"tl.dot operands differ in type: {a.dtype} and {b.dtype}; "
                                   "convert one with .to()")
        if a.shape[1] != b.shape[0]:
            raise self.error(node, f"tl.dot: shapes {a.shape} and {b.shape} do not contract "
                                   f"({a.shape[1]} != {b.shape[0]})")
        acc_v = None
        if acc is not None:
            acc = self.tile_arg(acc, node, "tl.dot's accumulator", (2,))
            if acc.dtype != "f32" or acc.shape != (a.shape[0], b.shape[1]):
                raise self.error(node, f"tl.dot: the accumulator must be an f32 tile of shape "
                                       f"{(a.shape[0], b.shape[1])}, not {acc.type_str()}")
            acc_v = acc.v
        return self.wrap(self.build("dot", a.v, b.v, acc_v))

    def reduction(self, node, kind, x, axis):
        x = self.tile_arg(x, node, f"tl.{kind}'s operand")
        if len(x.shape) < 2:
            raise self.error(node, f"tl.{kind} of a 1-D tile would give a scalar, which tiles "
                                   "cannot hold; reduce a 2-D tile along one axis")
        axis = self.axis_arg(axis, len(x.shape), node)
        if x.dtype == "i1":
            x = self.cast(x, "i32", node)
        return self.wrap(self.build("reduce", kind, x.v, axis))

    def tl_sum(self, node, x, axis):
        return self.reduction(node, "sum", x, axis)

    def tl_max(self, node, x, axis):
        return self.reduction(node, "max", x, axis)

    def tl_min(self, node, x, axis):
        return self.reduction(node, "min", x, axis)

    def scan(self, node, kind, name, x, axis, reverse):
        x = self.tile_arg(x, node, f"tl.{name}'s operand")
        axis = self.axis_arg(axis, len(x.shape), node)
        if not isinstance(reverse, bool):
            got = reverse.type_str() if isinstance(reverse, TVal) else repr(reverse)
            raise self.error(node, f"tl.{name}: reverse must be a compile-time bool, not {got}")
        if x.dtype == "i1":                  # a running count of a mask
            x = self.cast(x, "i32", node)
        elif x.dtype == "f8e4m3fn":
            raise self.error(node, f"tl.{name} of an FP8 tile: convert it with .to() first")
        return self.wrap(self.build("scan", kind, x.v, axis, reverse))

    def tl_cumsum(self, node, x, axis=0, reverse=False):
        return self.scan(node, "sum", "cumsum", x, axis, reverse)

    def tl_cummax(self, node, x, axis=0, reverse=False):
        return self.scan(node, "max", "cummax", x, axis, reverse)

    def tl_cummin(self, node, x, axis=0, reverse=False):
        return self.scan(node, "min", "cummin", x, axis, reverse)

    def philox(self, node, name, seed, offset, n_rounds):
        """The four int32 tiles of Philox4x32 at counters `offset` under `seed` (Triton's
        randint4x): a Python int seed is 64 bits (the key's two words), an int32 scalar is
        sign-extended."""
        signed = lambda w: w - 2**32 if w >= 2**31 else w       # noqa: E731
        if isinstance(seed, TVal):
            if seed.kind != "scalar" or seed.dtype != "i32":
                raise self.error(node, f"tl.{name}: the seed must be an int32 scalar, not a "
                                       f"{seed.type_str()}")
            lo, hi = seed, None
        elif isinstance(seed, bool) or not isinstance(seed, int) or \
                not -2**63 <= seed < 2**64:
            raise self.error(node, f"tl.{name}: the seed must be an integer of 64 bits or an "
                                   f"int32 scalar, not {seed!r}")
        else:
            lo = self.materialize(signed(seed & 0xFFFFFFFF), None, node, "i32")
            hi = self.materialize(signed((seed >> 32) & 0xFFFFFFFF), None, node, "i32")
        offset = self.tile_arg(offset, node, f"tl.{name}'s offsets")
        if offset.dtype not in ("i32", "i1"):
            raise self.error(node, f"tl.{name}: the offsets must be an int32 tile, not "
                                   f"{offset.type_str()}")
        if offset.dtype == "i1":
            offset = self.cast(offset, "i32", node)
        rounds = self.constexpr_int(n_rounds, node, "n_rounds")
        if not 1 <= rounds <= 64:
            raise self.error(node, f"tl.{name}: n_rounds must lie in [1, 64] (10 is the "
                                   f"standard), not {rounds}")
        return [self.wrap(v) for v in self.build("philox", lo.v, None if hi is None else hi.v,
                                                 offset.v, rounds)]

    def tl_umulhi(self, node, x, y):
        a, b = (self.materialize(v, None, node, "i32") if not isinstance(v, TVal) else v
                for v in (x, y))
        for v in (a, b):
            if v.dtype != "i32":
                raise self.error(node, f"tl.umulhi takes int32 operands, not {v.type_str()}")
        shape = self.broadcast_shape(a.shape, b.shape, node)
        if not shape:
            raise self.error(node, "tl.umulhi needs a tile operand (tiles hold what it computes)")
        a, b = self.broadcast(a, shape, node), self.broadcast(b, shape, node)
        return self.wrap(self.build("umulhi", a.v, b.v))

    def tl_randint4x(self, node, seed, offset, n_rounds=10):
        return tuple(self.philox(node, "randint4x", seed, offset, n_rounds))

    def tl_randint(self, node, seed, offset, n_rounds=10):
        return self.philox(node, "randint", seed, offset, n_rounds)[0]

    def uniform(self, node, x):
        # Triton's uint_to_uniform_float: the bits as int32 x, x < 0 folded to -x - 1, times
        # 2^-31 in float32; the few values that round to 1.0 there are kept below it.
        folded = self.tl_where(node, self.compare("lt", x, 0, node),
                               self.binary("sub", -1, x, node), x)
        u = self.binary("mul", self.cast(folded, "f32", node), 2.0 ** -31, node)
        return self.binary("min", u, 1.0 - 2.0 ** -24, node)     # float32 just below 1

    def tl_rand(self, node, seed, offset, n_rounds=10):
        return self.uniform(node, self.philox(node, "rand", seed, offset, n_rounds)[0])

    def tl_randn(self, node, seed, offset, n_rounds=10):
        # Triton's pair_uniform_to_normal (Box-Muller) of the first two words' uniforms.
        i1, i2 = self.philox(node, "randn", seed, offset, n_rounds)[:2]
        u1 = self.binary("max", self.uniform(node, i1), 1.0e-7, node)
        th = self.binary("mul", self.uniform(node, i2), 6.283185307179586, node)
        r = self.math1(node, "sqrt", self.binary("mul", self.math1(node, "log", u1), -2.0, node))
        return self.binary("mul", r, self.math1(node, "cos", th), node)

    def tl_softmax(self, node, x, axis, streamed=None, return_lse=False):
        x = self.tile_arg(x, node, "tl.softmax's operand")
        if x.dtype not in _FLOATS or len(x.shape) < 2:
            raise self.error(node, f"tl.softmax needs a float tile of rank 2 or more, not "
                                   f"{x.type_str()}")
        axis = self.axis_arg(axis, len(x.shape), node)
        in_stream = bool(self.loops) and self.loops[-1] == "stream" and self.nesting == 0
        if streamed is None:
            streamed = in_stream
        if streamed and not in_stream:
            raise self.error(node, "a streamed softmax must sit directly in the body of a "
                                   "`for ... in tl.stream(...)` loop")
        p, lse = self.build("softmax", x.v, axis, bool(streamed))
        return (self.wrap(p), self.wrap(lse)) if return_lse else self.wrap(p)

    def tl_elementwise_grad(self, node, y, x):
        x = self.tile_arg(x, node, "tl.elementwise_grad's second operand")
        if x.dtype not in _FLOATS:
            raise self.error(node, f"tl.elementwise_grad differentiates with respect to a float "
                                   f"tile, not {x.type_str()}")
        if not isinstance(y, TVal):         # a constant does not depend on x
            return self.tl_full(node, x.shape, 0, tl.DTYPES[x.dtype])
        if not y.same_type(x):
            raise self.error(node, f"tl.elementwise_grad needs y of x's type ({x.type_str()}), "
                                   f"not {y.type_str()}")
        grad, diags = self.build("elementwise_grad", y.v, x.v)
        if grad is None:
            _, message, filename, line, col = next(d for d in diags if d[0] == "error")
            if filename:    # at the op that cannot be differentiated, in the user's score_mod
                raise CompilationError(message, filename, line, col)
            raise self.error(node, message)
        return self.wrap(grad)

    def tl_zeros(self, node, shape, dtype=tl.float32):
        return self.tl_full(node, shape, 0, dtype)

    def tl_full(self, node, shape, value, dtype=tl.float32):
        shape = self.shape_arg(shape, node)
        d = self.dtype_arg(dtype, node)
        if isinstance(value, TVal):
            if value.kind != "scalar":
                raise self.error(node, "tl.full: the value must be a scalar")
            v = value if value.dtype == d else self.cast(value, d, node)
            return self.wrap(self.build("splat", v.v, list(shape)))
        if not _is_number(value):
            raise self.error(node, f"tl.full: the value must be a number, not {value!r}")
        if d in _FLOATS:
            return self.wrap(self.build("const_float", float(value), d, list(shape)))
        return self.wrap(self.build("const_int", int(value), d, list(shape)))

    def tl_arange(self, node, start, end):
        start = self.constexpr_int(start, node, "tl.arange's start")
        end = self.constexpr_int(end, node, "tl.arange's end")
        if end <= start:
            raise self.error(node, f"tl.arange({start}, {end}) is empty")
        r = self.wrap(self.build("iota", end - start))
        return self.binary("add", r, start, node) if start else r

    def tl_trans(self, node, x):
        x = self.tile_arg(x, node, "tl.trans's operand", (2,))
        return self.wrap(self.build("trans", x.v))

    def tl_where(self, node, cond, x, y):
        if not isinstance(cond, TVal):
            return x if cond else y
        c = self.to_bool(cond, node)
        a, b = self.unify(x, y, node)
        shape = self.broadcast_shape(c.shape, a.shape, node)
        c = self.broadcast(c, shape, node)
        a = self.broadcast(a, shape, node)
        b = self.broadcast(b, shape, node)
        return self.wrap(self.build("select", c.v, a.v, b.v))

    def tl_broadcast_to(self, node, x, shape):
        shape = self.shape_arg(shape, node)
        if not isinstance(x, TVal):
            return self.tl_full(node, shape, x, tl.float32 if isinstance(x, float) else tl.int32)
        if len(x.shape) > len(shape):
            raise self.error(node, f"cannot broadcast shape {x.shape} to {shape}")
        self.broadcast_shape(x.shape, shape, node)
        return self.broadcast(x, shape, node)

    def tl_expand_dims(self, node, x, axis):
        x = self.tile_arg(x, node, "tl.expand_dims's operand")
        axis = self.constexpr_int(axis, node, "axis")
        if not -len(x.shape) - 1 <= axis <= len(x.shape):
            raise self.error(node, f"axis {axis} is out of range")
        return self.wrap(self.build("expand_dims", x.v, axis % (len(x.shape) + 1)))

    def tl_cast(self, node, x, dtype):
        d = self.dtype_arg(dtype, node)
        if not isinstance(x, TVal):
            return self.materialize(x, None, node, d)
        self.require_value(x, node, "the converted value")
        return self.cast(x, d, node)

    def math1(self, node, fn, x):
        if not isinstance(x, TVal):
            if not _is_number(x):
                raise self.error(node, f"tl.{fn} needs a number or a tile")
            f = {"exp": math.exp, "exp2": lambda v: 2.0 ** v, "log": math.log, "log2": math.log2,
                 "sqrt": math.sqrt, "tanh": math.tanh, "sin": math.sin, "cos": math.cos,
                 "abs": abs}[fn]
            try:
                return f(x)
            except Exception as e:
                raise self.error(node, f"tl.{fn}({x}): {e}") from None
        self.require_value(x, node, f"tl.{fn}'s operand")
        if fn != "abs" and x.dtype not in _FLOATS:
            x = self.cast(x, "f32", node)
        if x.dtype == "i1":
            return x
        if fn == "abs" and x.dtype not in _FLOATS:
            # |x| = max(x, -x): ops every backend has (math.absi is not in the interpreter).
            neg = self.wrap(self.build("unary", "neg", x.v))
            return self.wrap(self.build("binary", "max", x.v, neg.v))
        return self.wrap(self.build("unary", fn, x.v))

    def tl_exp(self, node, x):
        return self.math1(node, "exp", x)

    def tl_exp2(self, node, x):
        return self.math1(node, "exp2", x)

    def tl_log(self, node, x):
        return self.math1(node, "log", x)

    def tl_log2(self, node, x):
        return self.math1(node, "log2", x)

    def tl_sqrt(self, node, x):
        return self.math1(node, "sqrt", x)

    def tl_tanh(self, node, x):
        return self.math1(node, "tanh", x)

    def tl_sin(self, node, x):
        return self.math1(node, "sin", x)

    def tl_cos(self, node, x):
        return self.math1(node, "cos", x)

    def tl_abs(self, node, x):
        return self.math1(node, "abs", x)

    def tl_maximum(self, node, x, y):
        return self.binary("max", x, y, node)

    def tl_minimum(self, node, x, y):
        return self.binary("min", x, y, node)

    def tl_cdiv(self, node, a, b):
        # ceil(a / b) = -((-a) // b) with floor division: right for every sign of a and b
        # ((a + b - 1) // b, Triton's formula, is right for b > 0 only).
        return self.binary("sub", 0, self.binary("div", self.binary("sub", 0, a, node), b, node),
                           node)


def _assigned_names(stmts):
    names = set()
    for stmt in stmts:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Store):
                names.add(n.id)
    return names
