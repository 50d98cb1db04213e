"""Naive attention kernels in tile IR, for the interpreter tests, and their numpy reference.

The kernels have the structure of examples/attention_naive.mlir — one block of queries against
every key block, a softmax streamed across the key loop, then the dot with V — specialised for
an element type, a mask and block sizes, the way the DSL will specialise them. Layout BHSD:
q, o [B, H, Nq, D]; k, v [B, Hkv, Nk, D]; lse [B, H, Nq] in f32. Grid (ceil(Nq / BM), B·H).
Kernel arguments: q, k, v, o, lse, nq, nk, h, hkv, scale, window.
"""
import numpy as np

MASKS = ("none", "causal", "window", "prefix")


def naive_attention_kernel(dtype="f16", mask="causal", block_m=64, block_n=64, head_dim=64):
    assert mask in MASKS and dtype in ("f16", "bf16", "f32")
    BM, BN, D, T = block_m, block_n, head_dim, dtype
    # P is cast to the input type for the tensor cores, as FlashAttention does.
    if T == "f32":
        p_cast, pv = "", "%p"
    else:
        p_cast = f"    %pc = arith.truncf %p : tensor<{BM}x{BN}xf32> to tensor<{BM}x{BN}x{T}>\n"
        pv = "%pc"
    masks = [f"    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<{BM}x{BN}xi32>\n"]
    names = ["%in_range"]
    if mask in ("causal", "window"):
        masks.append(f"    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<{BM}x{BN}xi32>\n")
        names.append("%causal_ok")
    if mask == "window":
        # Each query sees the `window` most recent keys, itself included.
        masks.append(f"    %win_ok = arith.cmpi sgt, %kv_idx, %win_lo : tensor<{BM}x{BN}xi32>\n")
        names.append("%win_ok")
    if mask == "prefix":
        # Prefix-LM: the first `window` keys are visible to every query, the rest causally.
        masks.append(f"    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<{BM}x{BN}xi32>\n")
        masks.append(f"    %in_prefix = arith.cmpi slt, %kv_idx, %win_t : tensor<{BM}x{BN}xi32>\n")
        masks.append(f"    %prefix_ok = arith.ori %in_prefix, %causal_ok : tensor<{BM}x{BN}xi1>\n")
        names.append("%prefix_ok")
    combine = ""
    acc = names[0]
    for i, n in enumerate(names[1:]):
        combine += f"    %mask{i} = arith.andi {acc}, {n} : tensor<{BM}x{BN}xi1>\n"
        acc = f"%mask{i}"
    mask_value = acc
    return f"""
func.func @attention(%q: !tile.ptr<{T}>, %k: !tile.ptr<{T}>, %v: !tile.ptr<{T}>,
                     %o: !tile.ptr<{T}>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {{
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant {BM} : i32
  %cbn = arith.constant {BN} : i32
  %d = arith.constant {D} : i32
  %pid_m = tile.program_id 0 : i32
  %bh = tile.program_id 1 : i32
  %b = arith.divsi %bh, %h : i32
  %head = arith.remsi %bh, %h : i32
  %group = arith.divsi %h, %hkv : i32
  %kv_head = arith.divsi %head, %group : i32
  %q_rows = arith.muli %bh, %nq : i32
  %q_off = arith.muli %q_rows, %d : i32
  %b_kv = arith.muli %b, %hkv : i32
  %bkv_head = arith.addi %b_kv, %kv_head : i32
  %kv_rows = arith.muli %bkv_head, %nk : i32
  %kv_off = arith.muli %kv_rows, %d : i32
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<{T}> -> !tile.desc<2, {T}>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<{T}> -> !tile.desc<2, {T}>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<{T}> -> !tile.desc<2, {T}>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<{T}> -> !tile.desc<2, {T}>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, {T}> -> tensor<{BM}x{D}x{T}>
  %q_start = tile.splat %m0 : i32 -> tensor<{BM}xi32>
  %rows = tile.iota : tensor<{BM}xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<{BM}xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<{BM}xi32> -> tensor<{BM}x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<{BM}x1xi32> -> tensor<{BM}x{BN}xi32>
  %win_t = tile.splat %window : i32 -> tensor<{BM}x{BN}xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<{BM}x{BN}xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<{BM}x{BN}xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<{BM}x{BN}xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<{BM}x{BN}xf32>
  %zero_s = arith.constant dense<0.0> : tensor<{BM}x{BN}xf32>
  %zero_o = arith.constant dense<0.0> : tensor<{BM}x{D}xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<{BM}xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<{BM}x{D}xf32>, tensor<{BM}xf32>) : i32 {{
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, {T}> -> tensor<{BN}x{D}x{T}>
    %ktt = tile.trans %kt : tensor<{BN}x{D}x{T}> -> tensor<{D}x{BN}x{T}>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<{BM}x{D}x{T}>, tensor<{D}x{BN}x{T}> -> tensor<{BM}x{BN}xf32>
    %s = arith.mulf %s0, %scale_t : tensor<{BM}x{BN}xf32>
    %kv_start = tile.splat %j : i32 -> tensor<{BN}xi32>
    %cols = tile.iota : tensor<{BN}xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<{BN}xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<{BN}xi32> -> tensor<1x{BN}xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x{BN}xi32> -> tensor<{BM}x{BN}xi32>
{''.join(masks)}{combine}    %sm = arith.select {mask_value}, %s, %ninf : tensor<{BM}x{BN}xi1>, tensor<{BM}x{BN}xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<{BM}x{BN}xf32> -> tensor<{BM}xf32>
{p_cast}    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, {T}> -> tensor<{BN}x{D}x{T}>
    %acc_n = tile.dot {pv}, %vt, %acc_i : tensor<{BM}x{BN}x{T}>, tensor<{BN}x{D}x{T}> -> tensor<{BM}x{D}xf32>
    scf.yield %acc_n, %row_lse : tensor<{BM}x{D}xf32>, tensor<{BM}xf32>
  }}
{"  %out = arith.truncf %acc : tensor<" + f"{BM}x{D}xf32> to tensor<{BM}x{D}x{T}>" + chr(10) if T != "f32" else ""}  tile.store %od[%m0, %c0], {"%out" if T != "f32" else "%acc"} : !tile.desc<2, {T}>, tensor<{BM}x{D}x{T}>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<{BM}xf32>
  return
}}
"""


def to_bf16_bits(x):
    """Round float32 values to bfloat16 (nearest even); the bit patterns as uint16 (the .npy form)."""
    bits = np.asarray(x, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16_bits(bits):
    return (np.asarray(bits).astype(np.uint32) << 16).view(np.float32)


def reference_attention(q, k, v, scale, mask="none", window=0):
    """float64 attention with SDPA semantics (causal aligned top-left: q_idx >= kv_idx); "window"
    keeps the `window` most recent keys, "prefix" (prefix-LM) adds the first `window` keys.

    q [B, H, Nq, D], k and v [B, Hkv, Nk, D]; returns (o, lse) with fully masked rows 0 and -inf.
    """
    q, k, v = (x.astype(np.float64) for x in (q, k, v))
    B, H, Nq, D = q.shape
    Hkv, Nk = k.shape[1], k.shape[2]
    k = np.repeat(k, H // Hkv, axis=1)
    v = np.repeat(v, H // Hkv, axis=1)
    s = np.einsum("bhqd,bhkd->bhqk", q, k) * scale
    qi = np.arange(Nq)[:, None]
    ki = np.arange(Nk)[None, :]
    allowed = np.ones((Nq, Nk), dtype=bool)
    if mask in ("causal", "window"):
        allowed &= qi >= ki
    if mask == "window":
        allowed &= ki > qi - window
    if mask == "prefix":
        allowed &= (qi >= ki) | (ki < window)
    s = np.where(allowed, s, -np.inf)
    m = s.max(axis=-1, keepdims=True)
    m_safe = np.where(np.isfinite(m), m, 0.0)
    e = np.exp(s - m_safe)
    l = e.sum(axis=-1, keepdims=True)
    o = np.einsum("bhqk,bhkd->bhqd", e / np.where(l == 0, 1.0, l), v)
    with np.errstate(divide="ignore"):
        lse = (m_safe + np.log(l))[..., 0]
    return o, lse
