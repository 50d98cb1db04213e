// naive_attention_kernel("f16", "causal", 32, 32, 64) of test/python/attention_kernels.py after
// --tile-optimize needs 56448 bytes of shared memory even with reuse: more than the 48 KiB of
// static shared memory, so the arena is dynamic shared memory (`.extern .shared` in PTX, no
// static smem in ptxas' report), and its size is reported for the launcher.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --tile-to-nvvm="chip=sm_90a format=llvm" | FileCheck %s --check-prefix=LLVM
// RUN: tesselc %t.mlir --chip=sm_90a --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %t.mlir --chip=sm_90a --emit=cubin -o %t.sm90.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM90
// RUN: tesselc %t.mlir --chip=sm_80 --emit=cubin -o %t.sm80.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM80

// LLVM: llvm.mlir.global external @[[SHM:.*]]() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
// LLVM: llvm.func @attention
// LLVM-SAME: tessel.dynamic_shared_bytes = 56448
// LLVM: llvm.mlir.addressof @[[SHM]] : !llvm.ptr<3>
// PTX: .extern .shared .align 16 .b8 {{.*}}[];
// SM90: ptxas sm_90a attention: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack
// SM90: kernel attention: block 128x1x1, 56448 bytes dynamic smem
// SM80: ptxas sm_80 attention: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack
// SM80: kernel attention: block 128x1x1, 56448 bytes dynamic smem

func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 32 : i32
  %cbn = arith.constant 32 : i32
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
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<32x64xf16>
  %q_start = tile.splat %m0 : i32 -> tensor<32xi32>
  %rows = tile.iota : tensor<32xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<32xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<32xi32> -> tensor<32x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<32x1xi32> -> tensor<32x32xi32>
  %win_t = tile.splat %window : i32 -> tensor<32x32xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<32x32xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<32x32xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<32x32xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<32x32xf32>
  %zero_s = arith.constant dense<0.0> : tensor<32x32xf32>
  %zero_o = arith.constant dense<0.0> : tensor<32x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<32xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<32x64xf32>, tensor<32xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<32x64xf16>
    %ktt = tile.trans %kt : tensor<32x64xf16> -> tensor<64x32xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<32x64xf16>, tensor<64x32xf16> -> tensor<32x32xf32>
    %s = arith.mulf %s0, %scale_t : tensor<32x32xf32>
    %kv_start = tile.splat %j : i32 -> tensor<32xi32>
    %cols = tile.iota : tensor<32xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<32xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<32xi32> -> tensor<1x32xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x32xi32> -> tensor<32x32xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<32x32xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<32x32xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<32x32xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<32x32xi1>, tensor<32x32xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<32x32xf32> -> tensor<32xf32>
    %pc = arith.truncf %p : tensor<32x32xf32> to tensor<32x32xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<32x64xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<32x32xf16>, tensor<32x64xf16> -> tensor<32x64xf32>
    scf.yield %acc_n, %row_lse : tensor<32x64xf32>, tensor<32xf32>
  }
  %out = arith.truncf %acc : tensor<32x64xf32> to tensor<32x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<32x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<32xf32>
  return
}
