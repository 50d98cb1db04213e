"""tessel-run against float64 numpy references: tiled matmul, row softmax and the naive
(streamed-softmax) attention loop, whose meaning is the three-pass softmax over the whole row."""
import subprocess

import numpy as np
import pytest

MATMUL = """
func.func @matmul(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %m: i32, %n: i32, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %pm = tile.program_id 0 : i32
  %pn = tile.program_id 1 : i32
  %row = arith.muli %pm, %c16 : i32
  %col = arith.muli %pn, %c16 : i32
  %da = tile.make_desc %a, shape [%m, %k], strides [%k, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %db = tile.make_desc %b, shape [%k, %n], strides [%n, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dc = tile.make_desc %c, shape [%m, %n], strides [%n, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %acc = scf.for %kk = %c0 to %k step %c16 iter_args(%acc0 = %zero) -> (tensor<16x16xf32>) : i32 {
    %ta = tile.load %da[%row, %kk] : !tile.desc<2, f16> -> tensor<16x16xf16>
    %tb = tile.load %db[%kk, %col] : !tile.desc<2, f16> -> tensor<16x16xf16>
    %r = tile.dot %ta, %tb, %acc0 : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %r : tensor<16x16xf32>
  }
  tile.store %dc[%row, %col], %acc : !tile.desc<2, f32>, tensor<16x16xf32>
  return
}
"""

SOFTMAX = """
func.func @rowsoftmax(%x: !tile.ptr<f32>, %p: !tile.ptr<f32>, %lse: !tile.ptr<f32>, %rows: i32, %cols: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %pid = tile.program_id 0 : i32
  %row = arith.muli %pid, %c8 : i32
  %dx = tile.make_desc %x, shape [%rows, %cols], strides [%cols, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dp = tile.make_desc %p, shape [%rows, %cols], strides [%cols, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dl = tile.make_desc %lse, shape [%rows], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %dx[%row, %c0] {padding = 0xFFF0000000000000 : f64} : !tile.desc<2, f32> -> tensor<8x64xf32>
  %s, %l = tile.softmax %t axis 1 : tensor<8x64xf32> -> tensor<8xf32>
  tile.store %dp[%row, %c0], %s : !tile.desc<2, f32>, tensor<8x64xf32>
  tile.store %dl[%row], %l : !tile.desc<1, f32>, tensor<8xf32>
  return
}
"""

# The naive attention (the form docs/dsl.md starts from): for every key block, s = q·kᵀ·scale
# masked to -inf past the key length (and past a per-row length, to make whole rows masked),
# p = softmax(s) normalised over the whole row (streamed), acc += p·v.
ATTENTION = """
func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>, %o: !tile.ptr<f32>,
                     %lse: !tile.ptr<f32>, %lens: !tile.ptr<i32>, %m: i32, %nkv: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cD = arith.constant 16 : i32
  %cBN = arith.constant 32 : i32
  %pid = tile.program_id 0 : i32
  %row = arith.muli %pid, %cD : i32
  %dq = tile.make_desc %q, shape [%m, %cD], strides [%cD, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dk = tile.make_desc %k, shape [%nkv, %cD], strides [%cD, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dv = tile.make_desc %v, shape [%nkv, %cD], strides [%cD, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %do = tile.make_desc %o, shape [%m, %cD], strides [%cD, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dl = tile.make_desc %lse, shape [%m], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %dn = tile.make_desc %lens, shape [%m], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %qt = tile.load %dq[%row, %c0] : !tile.desc<2, f16> -> tensor<16x16xf16>
  %len = tile.load %dn[%row] : !tile.desc<1, i32> -> tensor<16xi32>
  %len2 = tile.expand_dims %len axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %lenb = tile.broadcast %len2 : tensor<16x1xi32> -> tensor<16x32xi32>
  %nkvs = tile.splat %nkv : i32 -> tensor<16x32xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %zero = arith.constant dense<0.0> : tensor<16x32xf32>
  %scale = arith.constant dense<0.25> : tensor<16x32xf32>
  %acc0 = arith.constant dense<0.0> : tensor<16x16xf32>
  %lse0 = arith.constant dense<0.0> : tensor<16xf32>
  %r:2 = scf.for %j = %c0 to %nkv step %cBN iter_args(%acc = %acc0, %l = %lse0)
      -> (tensor<16x16xf32>, tensor<16xf32>) : i32 {
    %kt = tile.load %dk[%j, %c0] : !tile.desc<2, f16> -> tensor<32x16xf16>
    %ktt = tile.trans %kt : tensor<32x16xf16> -> tensor<16x32xf16>
    %s0 = tile.dot %qt, %ktt, %zero : tensor<16x16xf16>, tensor<16x32xf16> -> tensor<16x32xf32>
    %s1 = arith.mulf %s0, %scale : tensor<16x32xf32>
    %js = tile.splat %j : i32 -> tensor<32xi32>
    %io = tile.iota : tensor<32xi32>
    %kv = arith.addi %js, %io : tensor<32xi32>
    %kv2 = tile.expand_dims %kv axis 0 : tensor<32xi32> -> tensor<1x32xi32>
    %kvb = tile.broadcast %kv2 : tensor<1x32xi32> -> tensor<16x32xi32>
    %m1 = arith.cmpi sge, %kvb, %nkvs : tensor<16x32xi32>
    %m2 = arith.cmpi sge, %kvb, %lenb : tensor<16x32xi32>
    %mask = arith.ori %m1, %m2 : tensor<16x32xi1>
    %s = arith.select %mask, %ninf, %s1 : tensor<16x32xi1>, tensor<16x32xf32>
    %p, %ls = tile.softmax %s axis 1 streamed : tensor<16x32xf32> -> tensor<16xf32>
    %vt = tile.load %dv[%j, %c0] : !tile.desc<2, f16> -> tensor<32x16xf16>
    %vf = arith.extf %vt : tensor<32x16xf16> to tensor<32x16xf32>
    %acc2 = tile.dot %p, %vf, %acc : tensor<16x32xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
    scf.yield %acc2, %ls : tensor<16x16xf32>, tensor<16xf32>
  }
  tile.store %do[%row, %c0], %r#0 : !tile.desc<2, f32>, tensor<16x16xf32>
  tile.store %dl[%row], %r#1 : !tile.desc<1, f32>, tensor<16xf32>
  return
}
"""


def tessel_run(tools, tmp_path, source, kernel, grid, args, outs):
    src = tmp_path / f"{kernel}.mlir"
    src.write_text(source)
    specs = []
    for i, a in enumerate(args):
        if isinstance(a, np.ndarray):
            path = tmp_path / f"arg{i}.npy"
            np.save(path, a)
            specs.append(f"--arg={path}")
        else:
            specs.append(f"--arg={a}")
    out_paths = {i: tmp_path / f"out{i}.npy" for i in outs}
    cmd = [str(tools / "tessel-run"), str(src), f"--kernel={kernel}",
           "--grid=" + ",".join(map(str, grid)), *specs,
           *[f"--out={i}:{p}" for i, p in out_paths.items()]]
    r = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    return {i: np.load(p) for i, p in out_paths.items()}


def test_tiled_matmul(tools, tmp_path):
    rng = np.random.default_rng(0)
    m, n, k = 37, 29, 50  # not multiples of the 16x16x16 blocks: loads pad, stores drop
    a = rng.uniform(-1, 1, (m, k)).astype(np.float16)
    b = rng.uniform(-1, 1, (k, n)).astype(np.float16)
    grid = ((m + 15) // 16, (n + 15) // 16)
    out = tessel_run(tools, tmp_path, MATMUL, "matmul", grid,
                     [a.ravel(), b.ravel(), f"zeros:{m * n}", m, n, k], [2])[2]
    ref = a.astype(np.float64) @ b.astype(np.float64)
    np.testing.assert_allclose(out.reshape(m, n), ref, rtol=1e-5, atol=1e-6)


def test_row_softmax(tools, tmp_path):
    rng = np.random.default_rng(1)
    rows, cols = 19, 45  # the 8x64 tile pads with -inf: masked, so they must not count
    x = rng.normal(0, 3, (rows, cols)).astype(np.float32)
    x[3, :] = -np.inf            # a fully masked row: all 0, lse -inf
    x[5, 7:] = -np.inf           # a partly masked row
    outs = tessel_run(tools, tmp_path, SOFTMAX, "rowsoftmax", ((rows + 7) // 8,),
                      [x.ravel(), f"zeros:{rows * cols}", f"zeros:{rows}", rows, cols], [1, 2])
    p, lse = outs[1].reshape(rows, cols), outs[2]
    xd = x.astype(np.float64)
    mx = np.max(xd, axis=1, keepdims=True)
    mx[3] = 0
    e = np.exp(xd - mx)
    l = e.sum(axis=1, keepdims=True)
    l[3] = 1
    ref = e / l
    ref[3] = 0
    ref_lse = mx[:, 0] + np.log(l[:, 0])
    ref_lse[3] = -np.inf
    assert not np.isnan(p).any() and not np.isnan(lse).any()
    np.testing.assert_allclose(p, ref, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-6, atol=1e-6)
    assert (p[5, 7:] == 0).all()


@pytest.mark.parametrize("nkv", [1, 17, 128, 1000])
def test_streamed_softmax_attention(tools, tmp_path, nkv):
    rng = np.random.default_rng(nkv)
    m, d = 40, 16
    q = rng.uniform(-1, 1, (m, d)).astype(np.float16)
    k = rng.uniform(-1, 1, (nkv, d)).astype(np.float16)
    v = rng.uniform(-1, 1, (nkv, d)).astype(np.float16)
    lens = np.full(m, nkv, dtype=np.int32)
    lens[7] = 0                        # fully masked row: output 0 and lse -inf, never NaN
    lens[20] = max(nkv // 2, 1)        # a row shorter than the others
    outs = tessel_run(tools, tmp_path, ATTENTION, "attention", ((m + 15) // 16,),
                      [q.ravel(), k.ravel(), v.ravel(), f"zeros:{m * d}", f"zeros:{m}", lens, m,
                       nkv], [3, 4])
    o, lse = outs[3].reshape(m, d), outs[4]
    assert not np.isnan(o).any() and not np.isnan(lse).any()

    qd, kd, vd = (t.astype(np.float64) for t in (q, k, v))
    s = (qd @ kd.T) * 0.25
    s[np.arange(nkv)[None, :] >= lens[:, None]] = -np.inf
    mx = s.max(axis=1, keepdims=True)
    masked = np.isneginf(mx[:, 0])
    mx[masked] = 0
    e = np.exp(s - mx)
    l = e.sum(axis=1, keepdims=True)
    l[masked] = 1
    ref_o = (e / l) @ vd
    ref_lse = mx[:, 0] + np.log(l[:, 0])
    ref_o[masked] = 0
    ref_lse[masked] = -np.inf
    np.testing.assert_allclose(o, ref_o, rtol=1e-4, atol=1e-5)
    np.testing.assert_allclose(lse, ref_lse, rtol=1e-5, atol=1e-5)
    assert (o[7] == 0).all() and lse[7] == -np.inf


def test_validate_pipeline_on_attention(tools, tmp_path):
    """Canonicalisation and CSE keep the naive attention's meaning on these inputs."""
    src = tmp_path / "attention.mlir"
    src.write_text(ATTENTION)
    lens = tmp_path / "lens.npy"
    np.save(lens, np.full(32, 50, dtype=np.int32))
    r = subprocess.run([str(tools / "tessel-run"), str(src), "--kernel=attention", "--grid=2",
                        "--arg=rand:512:1", "--arg=rand:800:2", "--arg=rand:800:3",
                        "--arg=zeros:512", "--arg=zeros:32", f"--arg={lens}", "--arg=32",
                        "--arg=50", "--validate-pipeline=builtin.module(canonicalize,cse)"],
                       capture_output=True, text=True, timeout=300)
    assert r.returncode == 0, r.stderr
    assert "validate: max abs err 0, max rel err 0 over 2688 elements: OK" in r.stdout


def test_npy_dtype_mismatch_is_rejected(tools, tmp_path):
    src = tmp_path / "k.mlir"
    src.write_text(SOFTMAX)
    bad = tmp_path / "x.npy"
    np.save(bad, np.zeros(8, dtype=np.float64))
    r = subprocess.run([str(tools / "tessel-run"), str(src), f"--arg={bad}", "--arg=zeros:8",
                        "--arg=zeros:8", "--arg=1", "--arg=8"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 1
    assert "the file holds '<f8' elements, but a f32 buffer needs '<f4'" in r.stderr
    assert "Stack dump" not in r.stderr
