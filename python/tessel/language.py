"""The tile language: what a ``@tessel.jit`` kernel may call, as ``tl.<name>``.

These objects are markers. The front end (``tessel.frontend``) recognises them by identity while
it walks a kernel's AST and builds IR for them; called from plain Python they raise. Their
docstrings are the reference of the DSL (docs/dsl.md has the guide).
"""


class dtype:
    """An element type of tiles and scalars."""

    def __init__(self, name, numpy_name):
        self.name = name
        self.numpy_name = numpy_name

    def __repr__(self):
        return f"tl.{self.numpy_name}"

    @property
    def is_float(self):
        return self.name in ("f16", "bf16", "f32")


float16 = dtype("f16", "float16")
bfloat16 = dtype("bf16", "bfloat16")
float32 = dtype("f32", "float32")
int32 = dtype("i32", "int32")
int1 = dtype("i1", "int1")
bool_ = int1
DTYPES = {d.name: d for d in (float16, bfloat16, float32, int32, int1)}


class constexpr:
    """Annotation of a kernel parameter whose value is known at compile time.

    ``def kernel(x, BLOCK: tl.constexpr)``: every distinct value of ``BLOCK`` makes its own
    specialisation of the kernel; the values are part of the specialisation key.
    """

    def __init__(self, value=None):
        self.value = value

    def __repr__(self):
        return f"constexpr({self.value!r})"


class _Builtin:
    """A function of the tile language; only callable inside a @tessel.jit kernel."""

    def __init__(self, name, doc):
        self.name = name
        self.__doc__ = doc

    def __repr__(self):
        return f"tl.{self.name}"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"tl.{self.name} can only be called inside a @tessel.jit function")


def _builtin(name, doc):
    b = _Builtin(name, doc)
    globals()[name] = b
    return b


BUILTINS = {}
for _name, _doc in [
    ("program_id", "program_id(axis): index of this program along grid axis 0, 1 or 2 (i32)."),
    ("num_programs", "num_programs(axis): size of the grid along an axis (i32)."),
    ("make_desc", "make_desc(ptr, shape=(...), strides=(...), offset=None): a descriptor of "
                  "global memory: elements ptr[offset + sum(i_k * strides[k])], 0 <= i_k < shape[k]."),
    ("load", "load(desc, offsets, shape, padding=0.0): the tile of `shape` whose first element "
             "is at `offsets`; elements outside the descriptor read as `padding`."),
    ("load_scalar", "load_scalar(desc, indices, padding=0): the one element at `indices` as a "
                    "scalar (a data-dependent scalar such as cu_seqlens[b]); where an index is "
                    "outside the descriptor, memory is not read and the result is `padding`."),
    ("store", "store(desc, offsets, value, mask=None): write a tile; out-of-bounds and masked-off "
              "elements are dropped."),
    ("dot", "dot(a, b, acc=None): a @ b (+ acc), accumulated in f32."),
    ("sum", "sum(x, axis): sum along an axis (which disappears)."),
    ("max", "max(x, axis): maximum along an axis."),
    ("min", "min(x, axis): minimum along an axis."),
    ("softmax", "softmax(x, axis, streamed=None, return_lse=False): softmax along an axis. In a "
                "`for j in tl.stream(...)` loop it is streamed by default: normalised over the "
                "row made of x over all iterations."),
    ("stream", "stream(lo, hi, step): like range, marks the loop that walks a softmax axis."),
    ("static_range", "static_range(lo, hi, step): a loop unrolled at compile time."),
    ("zeros", "zeros(shape, dtype=tl.float32): a tile of zeros."),
    ("full", "full(shape, value, dtype=tl.float32): a tile with every element `value`."),
    ("arange", "arange(start, end): the i32 tile start, start+1, ..., end-1 (constexpr bounds)."),
    ("trans", "trans(x): transpose of a 2-D tile (also x.T)."),
    ("where", "where(cond, x, y): element-wise select, with broadcasting."),
    ("broadcast_to", "broadcast_to(x, shape): repeat axes of size 1."),
    ("expand_dims", "expand_dims(x, axis): insert an axis of size 1 (also x[:, None])."),
    ("cast", "cast(x, dtype): convert (also x.to(dtype))."),
    ("exp", "exp(x)"), ("exp2", "exp2(x)"), ("log", "log(x)"), ("log2", "log2(x)"),
    ("sqrt", "sqrt(x)"), ("tanh", "tanh(x)"), ("abs", "abs(x)"),
    ("maximum", "maximum(x, y): element-wise maximum."),
    ("minimum", "minimum(x, y): element-wise minimum."),
    ("cdiv", "cdiv(a, b): ceil(a / b) for integers of any sign."),
    ("elementwise_grad", "elementwise_grad(y, x): dy/dx element by element, for a float tile y "
                         "computed from the float tile x by element-wise ops (a score_mod): "
                         "built by the compiler (forward mode). Differentiates + - * / neg, "
                         "maximum, minimum, where, casts, exp exp2 log log2 sqrt tanh abs and "
                         "**; other ops on the way from x to y are errors at their line."),
]:
    BUILTINS[_name] = _builtin(_name, _doc)

__all__ = ["dtype", "float16", "bfloat16", "float32", "int32", "int1", "bool_", "constexpr",
           *BUILTINS]
