// The naive causal attention of test/python/attention_kernels.py,
// naive_attention_kernel("f16", "causal", 16, 16, 64), after --tile-optimize (online softmax,
// the key loop split into an unmasked part and the diagonal), compiles to cubins for sm_90a and
// sm_80. Before shared-memory reuse its tiles needed 83248 bytes, more than a CTA may allocate
// statically; with the arena they take 22592 bytes of static shared memory.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --convert-tile-to-gpu | FileCheck %s --check-prefix=PLAN
// RUN: tesselc %t.mlir --chip=sm_90a --emit=cubin -o %t.sm90.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM90
// RUN: tesselc %t.mlir --chip=sm_80 --emit=cubin -o %t.sm80.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: od -A n -t x1 -N 4 %t.sm90.cubin | FileCheck %s --check-prefix=ELF
// RUN: od -A n -t x1 -N 4 %t.sm80.cubin | FileCheck %s --check-prefix=ELF

// PLAN: gpu.func @attention
// PLAN-SAME: workgroup(%{{.*}} : memref<22592xi8, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// PLAN-SAME: tessel.shared_bytes = 22592
// PLAN-NOT: gpu.dynamic_shared_memory
// SM90: ptxas sm_90a attention: {{[0-9]+}} registers, 22592 bytes smem, 0 bytes stack
// SM90: kernel attention: block 128x1x1, 0 bytes dynamic smem
// SM80: ptxas sm_80 attention: {{[0-9]+}} registers, 22592 bytes smem, 0 bytes stack
// SM80: kernel attention: block 128x1x1, 0 bytes dynamic smem
// ELF: 7f 45 4c 46

func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 16 : i32
  %cbn = arith.constant 16 : i32
  %d = arith.constant 64 : i32
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
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<16x64xf16>
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
  %zero_o = arith.constant dense<0.0> : tensor<16x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<16xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<16x64xf32>, tensor<16xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<16x64xf16>
    %ktt = tile.trans %kt : tensor<16x64xf16> -> tensor<64x16xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<16x64xf16>, tensor<64x16xf16> -> tensor<16x16xf32>
    %s = arith.mulf %s0, %scale_t : tensor<16x16xf32>
    %kv_start = tile.splat %j : i32 -> tensor<16xi32>
    %cols = tile.iota : tensor<16xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<16xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<16xi32> -> tensor<1x16xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x16xi32> -> tensor<16x16xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<16x16xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<16x16xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<16x16xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<16x16xi1>, tensor<16x16xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<16x16xf32> -> tensor<16xf32>
    %pc = arith.truncf %p : tensor<16x16xf32> to tensor<16x16xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<16x64xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<16x16xf16>, tensor<16x64xf16> -> tensor<16x64xf32>
    scf.yield %acc_n, %row_lse : tensor<16x64xf32>, tensor<16xf32>
  }
  %out = arith.truncf %acc : tensor<16x64xf32> to tensor<16x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<16x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<16xf32>
  return
}
