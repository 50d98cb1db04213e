// Translation validation of tile-separate-bias: validate-passes.mlir's kernel (f32 sliding-window
// attention, 16x16 blocks, head dim 32, grouped-query 2:1) with an ALiBi bias
// slope * (kv_idx - q_idx) added to the scores, run by the CPU interpreter before and after.
// Arguments as there, then window and slope. Grid (3, 2).
// DEFINE: %{run} = tessel-run %s --kernel=attention --grid=3,2 --arg=rand:2880:1 --arg=rand:2240:2 \
// DEFINE:   --arg=rand:2240:3 --arg=zeros:2880 --arg=zeros:90 --arg=45 --arg=70 --arg=2 --arg=1 \
// DEFINE:   --arg=0.25

// tile-optimize's passes, with tile-separate-bias taking these 16-row tiles (min-rows=1).
// DEFINE: %{pipeline} = builtin.module(inline,canonicalize,func.func(tile-online-softmax,canonicalize,tile-fold-softmax-scale,tile-split-masked-loops,canonicalize,int-range-optimizations,canonicalize,tile-separate-bias{min-rows=1},tile-fold-softmax-scale,loop-invariant-code-motion,cse,canonicalize))

// RUN: %{run} --arg=24 --arg=0.5 --validate-pipeline='builtin.module(func.func(tile-online-softmax,tile-fold-softmax-scale,tile-separate-bias{min-rows=1}))' | FileCheck %s
// RUN: %{run} --arg=24 --arg=0.5 --validate-pipeline='%{pipeline}' | FileCheck %s
// RUN: %{run} --arg=1000 --arg=0.0625 --validate-pipeline='%{pipeline}' | FileCheck %s
// RUN: %{run} --arg=0 --arg=0.5 --validate-pipeline='%{pipeline}' | FileCheck %s
// A steep slope puts exponents of a few hundred through the regrouped sums: f32 rounding at
// 1e-4 relative (the same order as the original grouping's own error).
// RUN: %{run} --arg=1000 --arg=4 --rtol=1e-4 --validate-pipeline='%{pipeline}' | FileCheck %s
// CHECK: validate: max abs err {{.*}} over 10330 elements: OK

// The pipeline leaves no per-element conversion: the bias is a row and a column vector.
// RUN: tessel-opt %s --pass-pipeline='%{pipeline}' | FileCheck %s --check-prefix=IR
// IR-NOT: arith.sitofp {{.*}} : tensor<16x16xi32>
// IR:     arith.sitofp {{.*}} : tensor<16xi32> to tensor<16xf32>
// IR-NOT: arith.sitofp {{.*}} : tensor<16x16xi32>
// tile-optimize itself keeps 16-row tiles per element (min-rows=128: one-warpgroup kernels).
// RUN: tessel-opt %s --tile-optimize | FileCheck %s --check-prefix=DEFAULT
// DEFAULT: arith.sitofp {{.*}} : tensor<16x16xi32>

func.func @attention(%q: !tile.ptr<f32>, %k: !tile.ptr<f32>, %v: !tile.ptr<f32>,
                     %o: !tile.ptr<f32>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32,
                     %slope: f32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 16 : i32
  %cbn = arith.constant 16 : i32
  %d = arith.constant 32 : i32
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
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f32> -> tensor<16x32xf32>
  %q_start = tile.splat %m0 : i32 -> tensor<16xi32>
  %rows = tile.iota : tensor<16xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<16xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<16x1xi32> -> tensor<16x16xi32>
  %win_t = tile.splat %window : i32 -> tensor<16x16xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<16x16xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<16x16xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<16x16xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<16x16xf32>
  %zero_s = arith.constant dense<0.0> : tensor<16x16xf32>
  %zero_o = arith.constant dense<0.0> : tensor<16x32xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<16xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<16x32xf32>, tensor<16xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f32> -> tensor<16x32xf32>
    %ktt = tile.trans %kt : tensor<16x32xf32> -> tensor<32x16xf32>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<16x32xf32>, tensor<32x16xf32> -> tensor<16x16xf32>
    %s = arith.mulf %s0, %scale_t : tensor<16x16xf32>
    %kv_start = tile.splat %j : i32 -> tensor<16xi32>
    %cols = tile.iota : tensor<16xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<16xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<16xi32> -> tensor<1x16xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x16xi32> -> tensor<16x16xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<16x16xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<16x16xi32>
    %win_ok = arith.cmpi sgt, %kv_idx, %win_lo : tensor<16x16xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<16x16xi1>
    %mask1 = arith.andi %mask0, %win_ok : tensor<16x16xi1>
    %rel = arith.subi %kv_idx, %q_idx : tensor<16x16xi32>
    %relf = arith.sitofp %rel : tensor<16x16xi32> to tensor<16x16xf32>
    %slope_t = tile.splat %slope : f32 -> tensor<16x16xf32>
    %bias = arith.mulf %slope_t, %relf : tensor<16x16xf32>
    %sb = arith.addf %s, %bias : tensor<16x16xf32>
    %sm = arith.select %mask1, %sb, %ninf : tensor<16x16xi1>, tensor<16x16xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<16x16xf32> -> tensor<16xf32>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f32> -> tensor<16x32xf32>
    %acc_n = tile.dot %p, %vt, %acc_i : tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
    scf.yield %acc_n, %row_lse : tensor<16x32xf32>, tensor<16xf32>
  }
  tile.store %od[%m0, %c0], %acc : !tile.desc<2, f32>, tensor<16x32xf32>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<16xf32>
  return
}
