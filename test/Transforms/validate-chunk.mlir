// Translation validation of tile-optimize on chunked local attention (Llama 4's; FlashAttention-3's
// attention_chunk): causal within chunks of 32 keys, `q_idx // 32 == kv_idx // 32` written as
// the DSL writes Python's floor division. tile-floor-quotient-ranges makes the query quotient
// one scalar a block (16-row blocks lie in one chunk) and the comparison a range of kv_idx,
// which tile-split-masked-loops classifies. Arguments as in validate-passes.mlir.
// DEFINE: %{run} = tessel-run %s --kernel=attention --grid=3,2 --arg=rand:2880:1 --arg=rand:2240:2 \
// DEFINE:   --arg=rand:2240:3 --arg=zeros:2880 --arg=zeros:90 --arg=45 --arg=70 --arg=2 --arg=1 \
// DEFINE:   --arg=0.25
// RUN: %{run} --validate-pipeline='builtin.module(tile-optimize)' | FileCheck %s
// CHECK: validate: max abs err {{.*}} over 10330 elements: OK

// The chunk mask is classified: no division left in the key loops, a loop without a mask.
// RUN: tessel-opt %s --tile-optimize | FileCheck %s --check-prefix=SPLIT
// SPLIT-NOT: arith.divsi {{.*}} tensor
// SPLIT: tile.block_mask = "all_true"
// SPLIT-NOT: tile.block_mask = "residual"

func.func @attention(%q: !tile.ptr<f32>, %k: !tile.ptr<f32>, %v: !tile.ptr<f32>,
                     %o: !tile.ptr<f32>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32) {
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
  %c32_t = arith.constant dense<32> : tensor<16x16xi32>
  %zero_i = arith.constant dense<0> : tensor<16x16xi32>
  %one_i = arith.constant dense<1> : tensor<16x16xi32>
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
    %qd32 = arith.divsi %q_idx, %c32_t : tensor<16x16xi32>
    %qr32 = arith.remsi %q_idx, %c32_t : tensor<16x16xi32>
    %qneg = arith.cmpi slt, %qr32, %zero_i : tensor<16x16xi32>
    %qd32m = arith.subi %qd32, %one_i : tensor<16x16xi32>
    %q_chunk = arith.select %qneg, %qd32m, %qd32 : tensor<16x16xi1>, tensor<16x16xi32>
    %kd32 = arith.divsi %kv_idx, %c32_t : tensor<16x16xi32>
    %kr32 = arith.remsi %kv_idx, %c32_t : tensor<16x16xi32>
    %kneg = arith.cmpi slt, %kr32, %zero_i : tensor<16x16xi32>
    %kd32m = arith.subi %kd32, %one_i : tensor<16x16xi32>
    %kv_chunk = arith.select %kneg, %kd32m, %kd32 : tensor<16x16xi1>, tensor<16x16xi32>
    %same_chunk = arith.cmpi eq, %q_chunk, %kv_chunk : tensor<16x16xi32>
    %chunk_ok = arith.andi %causal_ok, %same_chunk : tensor<16x16xi1>
    %mask0 = arith.andi %in_range, %chunk_ok : tensor<16x16xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<16x16xi1>, tensor<16x16xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<16x16xf32> -> tensor<16xf32>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f32> -> tensor<16x32xf32>
    %acc_n = tile.dot %p, %vt, %acc_i : tensor<16x16xf32>, tensor<16x32xf32> -> tensor<16x32xf32>
    scf.yield %acc_n, %row_lse : tensor<16x32xf32>, tensor<16xf32>
  }
  tile.store %od[%m0, %c0], %acc : !tile.desc<2, f32>, tensor<16x32xf32>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<16xf32>
  return
}
