// FlashAttention forward written by hand in the streamed (online-softmax) form: the loop carries
// the running row max m and sum l (base 2, softmax scale folded with log2 e), the accumulator is
// rescaled by exp2(m - m') per key block, and O = acc / l after the loop. It computes the same
// function as attention_naive.mlir, and `tile-optimize` brings both to the same tile IR.
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
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x64xf32>
  %m_init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %l_init = arith.constant dense<0.0> : tensor<64xf32>
  %zero_r = arith.constant dense<0.0> : tensor<64xf32>
  %one_r = arith.constant dense<1.0> : tensor<64xf32>
  %ninf_r = arith.constant dense<0xFF800000> : tensor<64xf32>
  %ln2 = arith.constant dense<0.693147182> : tensor<64xf32>

  %acc, %m, %l = scf.for %j = %c0 to %nk step %c64
      iter_args(%acc_i = %zero_o, %m_i = %m_init, %l_i = %l_init)
      -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %ktt = tile.trans %kt : tensor<64x64xf16> -> tensor<64x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x64xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<64x64xi32>
    %mask = arith.andi %in_range, %causal_ok : tensor<64x64xi1>
    // Scores in base 2, scale and log2 e in one multiply.
    %log2e = arith.constant 1.44269502 : f32
    %qk_scale = arith.mulf %scale, %log2e : f32
    %qk_scale_t = tile.splat %qk_scale : f32 -> tensor<64x64xf32>
    %t0 = arith.mulf %s0, %qk_scale_t : tensor<64x64xf32>
    %t = arith.select %mask, %t0, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %block_max = tile.reduce max %t axis 1 : tensor<64x64xf32> -> tensor<64xf32>
    %m_new = arith.maximumf %m_i, %block_max : tensor<64xf32>
    // Rows with nothing seen yet (m' = -inf) subtract 0, so exp2 never sees -inf - -inf.
    %none = arith.cmpf oeq, %m_new, %ninf_r : tensor<64xf32>
    %m_safe = arith.select %none, %zero_r, %m_new : tensor<64xi1>, tensor<64xf32>
    %dm = arith.subf %m_i, %m_safe : tensor<64xf32>
    %alpha = math.exp2 %dm : tensor<64xf32>
    %m_col = tile.expand_dims %m_safe axis 1 : tensor<64xf32> -> tensor<64x1xf32>
    %m_tile = tile.broadcast %m_col : tensor<64x1xf32> -> tensor<64x64xf32>
    %tc = arith.subf %t, %m_tile : tensor<64x64xf32>
    %p = math.exp2 %tc : tensor<64x64xf32>
    %row_sum = tile.reduce sum %p axis 1 : tensor<64x64xf32> -> tensor<64xf32>
    %l_scaled = arith.mulf %l_i, %alpha : tensor<64xf32>
    %l_new = arith.addf %l_scaled, %row_sum : tensor<64xf32>
    %p16 = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %a_col = tile.expand_dims %alpha axis 1 : tensor<64xf32> -> tensor<64x1xf32>
    %a_tile = tile.broadcast %a_col : tensor<64x1xf32> -> tensor<64x64xf32>
    %acc_s = arith.mulf %acc_i, %a_tile : tensor<64x64xf32>
    %acc_n = tile.dot %p16, %vt, %acc_s : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %m_new, %l_new : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  // O = acc / l; fully masked rows (l = 0) give 0. lse = (m + log2 l) ln 2.
  %empty = arith.cmpf oeq, %l, %zero_r : tensor<64xf32>
  %l_safe = arith.select %empty, %one_r, %l : tensor<64xi1>, tensor<64xf32>
  %l_col = tile.expand_dims %l_safe axis 1 : tensor<64xf32> -> tensor<64x1xf32>
  %l_tile = tile.broadcast %l_col : tensor<64x1xf32> -> tensor<64x64xf32>
  %o32 = arith.divf %acc, %l_tile : tensor<64x64xf32>
  %log_l = math.log2 %l : tensor<64xf32>
  %lse2 = arith.addf %m, %log_l : tensor<64xf32>
  %lse = arith.mulf %lse2, %ln2 : tensor<64xf32>
  %out = arith.truncf %o32 : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}
