"""Paged descriptors (tl.make_desc with pages=, num_pages=, page_size=): row i of the view is row
pages[i // page_size] * page_size + i % page_size of the strided view, as a paged KV cache reads
its keys. Blocks span pages in any order; rows with no table entry, no page (outside
[0, num_pages)) or past the view read as the padding and are dropped by stores. On the CPU
interpreter against numpy; errors at the user's line."""
import numpy as np
import pytest

from dsl_helpers import assert_located
import tessel
from tessel import language as tl


@tessel.jit
def view(cache, table, n, n_table, n_pages, W: tl.constexpr, PAGE: tl.constexpr):
    """The paged view [n, W] of cache through table (n_table entries, n_pages pages)."""
    td = tl.make_desc(table, shape=(n_table,), strides=(1,))
    return tl.make_desc(cache, shape=(n, W), strides=(W, 1), pages=td, num_pages=n_pages,
                        page_size=PAGE)


@tessel.jit
def read_block(cache, table, out, n, n_table, n_pages, j, W: tl.constexpr, BLOCK: tl.constexpr,
               PAGE: tl.constexpr):
    kd = view(cache, table, n, n_table, n_pages, W, PAGE)
    od = tl.make_desc(out, shape=(BLOCK, W), strides=(W, 1))
    tl.store(od, (0, 0), tl.load(kd, (j, 0), shape=(BLOCK, W), padding=-1.0))


@tessel.jit
def write_block(cache, table, src, n, n_table, n_pages, j, W: tl.constexpr, BLOCK: tl.constexpr,
                PAGE: tl.constexpr):
    sd = tl.make_desc(src, shape=(BLOCK, W), strides=(W, 1))
    tl.store(view(cache, table, n, n_table, n_pages, W, PAGE), (j, 0),
             tl.load(sd, (0, 0), shape=(BLOCK, W)))


def expected_rows(table, n, n_pages, page, j, block):
    """The physical row of each logical row j .. j + block - 1, or None where it reads padding."""
    rows = []
    for i in range(j, j + block):
        e = i // page
        ok = 0 <= i < n and e < len(table) and 0 <= table[e] < n_pages
        rows.append(int(table[e]) * page + i % page if ok else None)
    return rows


@pytest.mark.parametrize("page", [1, 3, 4, 16])
@pytest.mark.parametrize("j", [0, 5, 30])
def test_a_block_reads_rows_through_the_table(page, j):
    rng = np.random.default_rng(page * 100 + j)
    W, BLOCK, n_pages = 8, 16, 24
    cache = rng.standard_normal((n_pages * page, W)).astype(np.float32)
    table = rng.permutation(n_pages).astype(np.int32)[:12]
    table[rng.integers(0, 12, 3)] = [-1, n_pages, 10**6]        # holes: no page
    n = min(40, 12 * page + 2)                                  # rows past the table: padding
    out = np.zeros((BLOCK, W), np.float32)
    read_block[(1,)](cache, table, out, n, len(table), n_pages, j, W=W, BLOCK=BLOCK, PAGE=page)
    for r, phys in enumerate(expected_rows(table, n, n_pages, page, j, BLOCK)):
        want = cache[phys] if phys is not None else np.full(W, -1.0, np.float32)
        np.testing.assert_array_equal(out[r], want, err_msg=f"row {j + r}")


def test_a_store_writes_rows_through_the_table():
    rng = np.random.default_rng(7)
    W, BLOCK, page, n_pages = 4, 8, 2, 6
    cache = np.zeros((n_pages * page, W), np.float32)
    table = np.array([5, -1, 0, 3], np.int32)
    src = rng.standard_normal((BLOCK, W)).astype(np.float32)
    write_block[(1,)](cache, table, src, 7, 4, n_pages, 0, W=W, BLOCK=BLOCK, PAGE=page)
    want = np.zeros_like(cache)
    for r, phys in enumerate(expected_rows(table, 7, n_pages, page, 0, BLOCK)):
        if phys is not None:
            want[phys] = src[r]
    np.testing.assert_array_equal(cache, want)


@tessel.jit
def no_page_size(x, t, n):
    td = tl.make_desc(t, shape=(n,), strides=(1,))
    tl.make_desc(x, shape=(n, 4), strides=(4, 1), pages=td, num_pages=n)  # P1


@tessel.jit
def table_of_floats(x, f, n):
    fd = tl.make_desc(f, shape=(n,), strides=(1,))
    tl.make_desc(x, shape=(n, 4), strides=(4, 1), pages=fd, num_pages=n, page_size=4)  # P2


@tessel.jit
def paged_rank_1(x, t, n):
    td = tl.make_desc(t, shape=(n,), strides=(1,))
    tl.make_desc(x, shape=(n,), strides=(1,), pages=td, num_pages=n, page_size=4)  # P3


@tessel.jit
def page_size_at_run_time(x, t, n):
    td = tl.make_desc(t, shape=(n,), strides=(1,))
    tl.make_desc(x, shape=(n, 4), strides=(4, 1), pages=td, num_pages=n, page_size=n)  # P4


@tessel.jit
def scalar_of_paged(x, t, n):
    td = tl.make_desc(t, shape=(n,), strides=(1,))
    xd = tl.make_desc(x, shape=(n, 4), strides=(4, 1), pages=td, num_pages=n, page_size=4)
    tl.load_scalar(xd, (0, 0))  # P5


@pytest.mark.parametrize("kernel,tag,token,message", [
    (no_page_size, "P1", "tl.make_desc",
     "a paged descriptor needs pages, num_pages and page_size together"),
    (table_of_floats, "P2", "tl.make_desc", "pages must be a rank-1 int32 descriptor"),
    (paged_rank_1, "P3", "tl.make_desc", "a paged descriptor has rank 2"),
    (page_size_at_run_time, "P4", "tl.make_desc", "page_size must be a compile-time constant"),
    (scalar_of_paged, "P5", "tl.load_scalar", "load_scalar does not take a paged descriptor"),
])
def test_errors_are_located(kernel, tag, token, message):
    x = np.zeros(16, np.float32)
    t = np.zeros(4, np.float32 if kernel is table_of_floats else np.int32)
    with pytest.raises(tessel.CompilationError) as info:
        kernel[(1,)](x, t, 4)
    assert_located(info.value, __file__, tag, token, message)
