"""The tile language: what a ``@tessel.jit`` kernel may call, as ``tl.<name>``.

These objects are markers. The front end (``tessel.frontend``) recognises them by identity while
it walks a kernel's AST and builds IR for them; called from plain Python they raise. Their
docstrings are the reference of the DSL (docs/dsl.md has the guide).

Every builtin takes tiles of every dtype unless its entry says otherwise; Python operators work
on tiles and scalars with numpy broadcasting and promotion (docs/dsl.md).
"""
import inspect


class dtype:
    """An element type of tiles and scalars."""

    def __init__(self, name, numpy_name):
        self.name = name
        self.numpy_name = numpy_name

    def __repr__(self):
        return f"tl.{self.numpy_name}"

    @property
    def is_float(self):
        return self.name in ("f8e4m3fn", "f16", "bf16", "f32")


#: 16-bit IEEE float (f16).
float16 = dtype("f16", "float16")
#: bfloat16 (bf16); numpy arrays carry it as uint16 bit patterns (tessel.to_bf16).
bfloat16 = dtype("bf16", "bfloat16")
#: The 8-bit float e4m3fn of the OCP FP8 formats, loaded, stored, converted and multiplied by
#: tl.dot (sm_90a's wgmma), not computed on; numpy arrays carry it as uint8 bit patterns
#: (tessel.to_fp8). Conversions to it round to nearest even and saturate at ±448.
float8_e4m3fn = dtype("f8e4m3fn", "float8_e4m3fn")
#: 32-bit IEEE float (f32), the accumulator type.
float32 = dtype("f32", "float32")
#: 32-bit signed integer (i32), the type of indices.
int32 = dtype("i32", "int32")
#: Boolean (i1), the type of comparisons and masks.
int1 = dtype("i1", "int1")
#: The same as :data:`int1`.
bool_ = int1
DTYPES = {d.name: d for d in (float8_e4m3fn, float16, bfloat16, float32, int32, int1)}


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
    """A function of the tile language; only callable inside a @tessel.jit kernel.

    Made by ``@_builtin`` from a stub whose signature and docstring are the reference (the API
    reference documents them as functions); the front end dispatches on ``name``.
    """

    def __init__(self, stub):
        self.name = stub.__name__
        self.__name__ = stub.__name__
        self.__qualname__ = stub.__name__
        self.__doc__ = stub.__doc__
        self.__signature__ = inspect.signature(stub)

    def __repr__(self):
        return f"tl.{self.name}"

    def __call__(self, *args, **kwargs):
        raise RuntimeError(f"tl.{self.name} can only be called inside a @tessel.jit function")


BUILTINS = {}


def _builtin(stub):
    b = _Builtin(stub)
    BUILTINS[b.name] = b
    return b


# --- the grid ----------------------------------------------------------------------------------

@_builtin
def program_id(axis):
    """The index of this program along a grid axis.

    Args:
        axis: 0, 1 or 2 (a compile-time integer).

    Returns:
        An i32 scalar in ``[0, num_programs(axis))``.
    """


@_builtin
def num_programs(axis):
    """The size of the launch grid along an axis.

    Args:
        axis: 0, 1 or 2 (a compile-time integer).

    Returns:
        An i32 scalar.
    """


# --- memory ------------------------------------------------------------------------------------

@_builtin
def make_desc(ptr, shape, strides, offset=None, pages=None, num_pages=None, page_size=None):
    """A descriptor of global memory: a strided view that loads and stores address by index.

    Element ``(i_0, ..., i_k)`` of the view is ``ptr[offset + sum(i_j * strides[j])]`` for
    ``0 <= i_j < shape[j]``; indices outside the shape are out of bounds (loads pad, stores
    drop them).

    A **paged** view (rank 2, ``pages`` given) reads its rows through a page table, as a paged
    KV cache does: row ``i`` is row ``pages[i // page_size] * page_size + i % page_size`` of
    the strided view. Rows whose table entry lies outside ``pages``, or whose page number lies
    outside ``[0, num_pages)``, are out of bounds. A block loaded from it may span any number
    of pages, in any order::

        tb = tl.make_desc(table, shape=(max_pages,), strides=(1,), offset=b * max_pages)
        kd = tl.make_desc(k_cache, shape=(n, D), strides=(HKV * D, 1), offset=h * D,
                          pages=tb, num_pages=n_pages, page_size=16)
        kt = tl.load(kd, (j, 0), shape=(64, D))     # keys j .. j + 63, from four pages

    :func:`load`, :func:`store` and :func:`atomic_add` take a paged view; :func:`load_scalar`
    does not.

    Args:
        ptr: an array argument of the kernel.
        shape: a tuple of i32 sizes (run-time values allowed).
        strides: a tuple of i32 strides, in elements, one per dimension.
        offset: the element offset of index 0 (default 0).
        pages: a rank-1 int32 descriptor of page numbers (makes the view paged).
        num_pages: the number of pages behind ``ptr`` (i32; paged views only).
        page_size: rows per page, a positive compile-time integer (paged views only).

    Returns:
        A descriptor for :func:`load`, :func:`load_scalar` and :func:`store`.
    """


@_builtin
def load(desc, offsets, shape=None, padding=0.0):
    """Reads a tile.

    Args:
        desc: a descriptor from :func:`make_desc`.
        offsets: the index of the tile's first element, one i32 per dimension.
        shape: the tile's shape, a tuple of compile-time integers (required).
        padding: the value of elements outside the descriptor (a compile-time number).

    Returns:
        A tile of ``shape`` with the descriptor's element type.
    """


@_builtin
def load_scalar(desc, indices, padding=0):
    """Reads one element as a scalar: a data-dependent value such as ``cu_seqlens[b]``.

    Args:
        desc: a descriptor from :func:`make_desc`.
        indices: the element's index, one i32 per dimension.
        padding: the result where an index is outside the descriptor; memory is then not read
            (a compile-time number; an i32 value for an i32 descriptor).

    Returns:
        A scalar of the descriptor's element type.
    """


@_builtin
def store(desc, offsets, value, mask=None):
    """Writes a tile; out-of-bounds and masked-off elements are dropped.

    Args:
        desc: a descriptor from :func:`make_desc`.
        offsets: the index of the tile's first element, one i32 per dimension.
        value: the tile to write, of the descriptor's element type and rank.
        mask: a boolean tile of ``value``'s shape; elements where it is False are not written.
    """


@_builtin
def atomic_add(desc, offsets, value, mask=None):
    """Adds a tile into memory, each element as one atomic read-modify-write (``red.global.add``
    on the GPU); out-of-bounds and masked-off elements are dropped, as by :func:`store`.

    Programs running at once may add into the same elements (split-K partial sums, dQ from
    many key blocks); float32 sums then depend on the order of the additions, which is not
    fixed. Nothing is returned.

    Args:
        desc: a float32 or int32 descriptor from :func:`make_desc`.
        offsets: the index of the tile's first element, one i32 per dimension.
        value: the tile to add, of the descriptor's element type and rank.
        mask: a boolean tile of ``value``'s shape; elements where it is False are not added.
    """


# --- compute -----------------------------------------------------------------------------------

@_builtin
def dot(a, b, acc=None):
    """Matrix product ``a @ b (+ acc)``, accumulated in f32.

    ``acc += tl.dot(a, b)`` is built as the accumulate form.

    Args:
        a: an ``[M, K]`` float tile.
        b: a ``[K, N]`` float tile of ``a``'s element type.
        acc: an ``[M, N]`` f32 tile to add to.

    Returns:
        An ``[M, N]`` f32 tile.
    """


@_builtin
def sum(x, axis):
    """The sum along an axis.

    Args:
        x: a tile.
        axis: the axis (a compile-time integer), which disappears from the result.

    Returns:
        A tile of rank one less (a scalar from a 1-D tile).
    """


@_builtin
def max(x, axis):
    """The maximum along an axis.

    Args:
        x: a tile.
        axis: the axis (a compile-time integer), which disappears from the result.

    Returns:
        A tile of rank one less.
    """


@_builtin
def min(x, axis):
    """The minimum along an axis.

    Args:
        x: a tile.
        axis: the axis (a compile-time integer), which disappears from the result.

    Returns:
        A tile of rank one less.
    """


@_builtin
def cumsum(x, axis=0, reverse=False):
    """Inclusive prefix sums along an axis (Triton's ``tl.cumsum``, torch's ``cumsum``).

    Element ``i`` along ``axis`` is ``x[0] + … + x[i]`` (with ``reverse``, ``x[i] + … +
    x[n-1]``); the other axes are independent. Floats accumulate in float32 from the first
    element on (16-bit tiles too), each result rounded to the tile's type; integers wrap; a
    mask (``i1``) is counted as int32.

    Args:
        x: a tile of any rank, 1-D included.
        axis: the axis (a compile-time integer; negative counts from the end).
        reverse: a compile-time bool: sums from the end of the axis.

    Returns:
        A tile of ``x``'s shape and type (int32 for a mask).
    """


@_builtin
def cummax(x, axis=0, reverse=False):
    """Inclusive running maxima along an axis (torch's ``cummax`` values); a NaN propagates.
    Arguments as :func:`cumsum`'s."""


@_builtin
def cummin(x, axis=0, reverse=False):
    """Inclusive running minima along an axis (torch's ``cummin`` values); a NaN propagates.
    Arguments as :func:`cumsum`'s."""


@_builtin
def randn(seed, offset, n_rounds=10):
    """Standard normal float32 samples, as Triton's ``tl.randn``: Box–Muller of the uniforms
    of :func:`randint4x`'s first two words, ``sqrt(-2 log max(u1, 1e-7)) · cos(2π u2)``.

    Args:
        seed, offset, n_rounds: as :func:`randint4x`.

    Returns:
        A float32 tile of ``offset``'s shape.
    """


@_builtin
def randint4x(seed, offset, n_rounds=10):
    """Four tiles of random bits: Philox4x32 (Salmon et al., SC'11), as Triton's
    ``tl.randint4x``, the same bits.

    Counter-based: the same (seed, offset) always gives the same bits, on the interpreter and
    on the GPU, so a kernel's backward can draw again what its forward drew (dropout).

    Args:
        seed: a Python integer of up to 64 bits (the key's two 32-bit words), or an int32
            scalar (sign-extended to 64 bits, as Triton does).
        offset: an int32 tile, each element its own counter (the counter's first word; the
            other three are 0). Give every element of every program a distinct offset.
        n_rounds: compile-time rounds, 1 to 64; 10 is the standard.

    Returns:
        A tuple of four int32 tiles of ``offset``'s shape (the bits as two's complement).
    """


@_builtin
def randint(seed, offset, n_rounds=10):
    """The first of :func:`randint4x`'s four tiles: 32 random bits an element."""


@_builtin
def rand(seed, offset, n_rounds=10):
    """Uniform float32 samples in [0, 1), as Triton's ``tl.rand``: :func:`randint`'s bits
    as int32 ``x``, negative ``x`` folded to ``-x - 1``, times 2^-31. Where that product
    rounds to 1.0 (Triton returns it) the result is the float32 just below 1.

    Args:
        seed, offset, n_rounds: as :func:`randint4x`.

    Returns:
        A float32 tile of ``offset``'s shape.
    """


@_builtin
def softmax(x, axis, streamed=None, return_lse=False):
    """The softmax along an axis.

    In the body of a ``for j in tl.stream(...)`` loop it is streamed by default: normalised over
    the row made of ``x`` over all iterations, which the compiler turns into the online softmax.

    Args:
        x: a float tile.
        axis: the axis to normalise (a compile-time integer).
        streamed: True or False to choose; None: streamed inside a ``tl.stream`` loop.
        return_lse: also return the log-sum-exp of each row.

    Returns:
        The probabilities, a tile like ``x``; with ``return_lse`` the pair ``(p, lse)``, lse an
        f32 tile without ``axis``.
    """


@_builtin
def elementwise_grad(y, x):
    """``dy/dx`` element by element, built by the compiler (forward mode).

    For a float tile ``y`` computed from the float tile ``x`` by element-wise ops (a
    score_mod). Differentiates ``+ - * /``, negation, :func:`maximum`, :func:`minimum`,
    :func:`where`, casts, :func:`exp` :func:`exp2` :func:`log` :func:`log2` :func:`sqrt`
    :func:`tanh` :func:`abs` and ``**``.

    Args:
        y: the float tile to differentiate.
        x: the float tile to differentiate by.

    Returns:
        A tile like ``y``.

    Raises:
        tessel.CompilationError: another op lies on the way from ``x`` to ``y`` (at its line).
    """


# --- loops -------------------------------------------------------------------------------------

@_builtin
def stream(lo, hi=None, step=1):
    """Like ``range(lo, hi, step)`` (``range(hi)`` with one argument): marks the loop that
    walks a softmax axis, the streamed axis. Only the iterable of a ``for`` loop."""


@_builtin
def static_range(lo, hi=None, step=1):
    """Like ``range(lo, hi, step)`` with compile-time bounds: a loop unrolled at compile time.
    Only the iterable of a ``for`` loop."""


# --- making tiles ------------------------------------------------------------------------------

@_builtin
def zeros(shape, dtype=float32):
    """A tile of zeros.

    Args:
        shape: a tuple of compile-time integers.
        dtype: the element type.
    """


@_builtin
def full(shape, value, dtype=float32):
    """A tile with every element ``value``.

    Args:
        shape: a tuple of compile-time integers.
        value: a number or a scalar (converted to ``dtype``).
        dtype: the element type.
    """


@_builtin
def arange(start, end):
    """The i32 tile ``start, start + 1, ..., end - 1``.

    Args:
        start: a compile-time integer.
        end: a compile-time integer greater than ``start``.
    """


# --- shapes and types --------------------------------------------------------------------------

@_builtin
def trans(x):
    """The transpose of a 2-D tile (also ``x.T``)."""


@_builtin
def where(cond, x, y):
    """Element-wise select, with broadcasting.

    Args:
        cond: a boolean tile or scalar (a compile-time value picks ``x`` or ``y`` at once).
        x: the value where ``cond`` is True.
        y: the value where ``cond`` is False.
    """


@_builtin
def broadcast_to(x, shape):
    """Repeats the axes of size 1 of ``x`` up to ``shape`` (a tuple of compile-time integers)."""


@_builtin
def expand_dims(x, axis):
    """Inserts an axis of size 1 at ``axis`` (also ``x[:, None]``)."""


@_builtin
def cast(x, dtype):
    """Converts ``x`` to ``dtype`` (also ``x.to(dtype)``)."""


# --- element-wise math -------------------------------------------------------------------------

@_builtin
def exp(x):
    """``e ** x`` element-wise (integers are computed in f32)."""


@_builtin
def exp2(x):
    """``2 ** x`` element-wise (integers are computed in f32)."""


@_builtin
def log(x):
    """The natural logarithm element-wise (integers are computed in f32)."""


@_builtin
def log2(x):
    """The base-2 logarithm element-wise (integers are computed in f32)."""


@_builtin
def sqrt(x):
    """The square root element-wise (integers are computed in f32)."""


@_builtin
def tanh(x):
    """The hyperbolic tangent element-wise (integers are computed in f32)."""


@_builtin
def sin(x):
    """Sine, element-wise (radians). On the GPU ``sin.approx.f32``, CUDA's ``__sinf``: an
    absolute error of about 2^-21 on [-π, π], larger farther out (reduce the argument first
    where that matters); 16-bit tiles through float32; integers are computed in f32."""


@_builtin
def cos(x):
    """Cosine, element-wise (radians); as :func:`sin` (``cos.approx.f32`` on the GPU)."""


@_builtin
def abs(x):
    """The absolute value element-wise; keeps the element type."""


@_builtin
def maximum(x, y):
    """The element-wise maximum, with broadcasting and promotion."""


@_builtin
def minimum(x, y):
    """The element-wise minimum, with broadcasting and promotion."""


@_builtin
def umulhi(x, y):
    """The high 32 bits of the unsigned 64-bit product of int32 ``x`` and ``y`` element-wise
    (Triton's ``tl.umulhi``; PTX ``mul.hi.u32``), as int32 bits; at least one a tile."""


@_builtin
def cdiv(a, b):
    """``ceil(a / b)`` for integers of any sign (``-((-a) // b)``)."""


__all__ = ["dtype", "float8_e4m3fn", "float16", "bfloat16", "float32", "int32", "int1", "bool_", "constexpr",
           *BUILTINS]
