// FlashAttention forward written the naive way: for one block of 64 queries, the scores against
// every key block, a softmax over the whole row (streamed across the key loop), then the dot
// with V. `tile-optimize` turns it into the online-softmax form.
//
// Layout BHSD, contiguous: q, o [B, H, Nq, 64]; k, v [B, Hkv, Nk, 64]; lse [B, H, Nq] (f32).
// Grid: (ceil(Nq / 64), B·H). Grouped-query: query head h reads key/value head h / (H / Hkv).
// Mask: key index < Nk (the last block may be partial), and, if causal != 0, q_idx >= kv_idx.
func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = arith.constant 64 : i32
  %pid_m = tile.program_id 0 : i32
  %bh = tile.program_id 1 : i32
  // Which batch and heads this program works on.
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
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>

  %m0 = arith.muli %pid_m, %c64 : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  // Query and key indices of a block, for the mask.
  %q_start = tile.splat %m0 : i32 -> tensor<64xi32>
  %rows = tile.iota : tensor<64xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<64xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<64x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<64xf32>

  %acc, %lse = scf.for %j = %c0 to %nk step %c64
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<64x64xf32>, tensor<64xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %ktt = tile.trans %kt : tensor<64x64xf16> -> tensor<64x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x64xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<64x64xi32>
    %mask = arith.andi %in_range, %causal_ok : tensor<64x64xi1>
    %sm = arith.select %mask, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
    %p16 = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %acc_n = tile.dot %p16, %vt, %acc_i : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %row_lse : tensor<64x64xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}
