// The naive non-causal attention of test/python/attention_kernels.py,
// naive_attention_kernel("f16", "none", 128, 64, 128), after --tile-optimize, through
// convert-tile-to-mma: a 128-row query block runs as 4 warps of 32 rows (two m16 tiles per
// warp share every K/V ldmatrix, FA2's d128 layout); Q (64 registers at d128 with two tiles)
// is read from shared memory at every k step. warp-rows=16 gives the 8-warp layout back.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --convert-tile-to-mma | FileCheck %s --check-prefix=MMA
// RUN: tessel-opt %t.mlir --convert-tile-to-mma=warp-rows=16 | FileCheck %s --check-prefix=W16
// RUN: not tessel-opt %t.mlir --convert-tile-to-mma=warp-rows=8 2>&1 | FileCheck %s --check-prefix=W8
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=mma --emit=cubin -o %t.sm90.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM90

// MMA-LABEL: gpu.func @attention
// MMA-SAME: known_block_size = array<i32: 128, 1, 1>
// MMA-SAME: tessel.dynamic_shared_bytes = 98304
// The loop body: per k step two Q ldmatrix (one per m tile), then K ldmatrix each feeding
// four mma (two n slabs x two m tiles).
// MMA: scf.for
// MMA: nvvm.ldmatrix
// MMA: nvvm.ldmatrix
// MMA: nvvm.ldmatrix
// MMA-COUNT-4: nvvm.mma.sync
// MMA: nvvm.ldmatrix

// W16: known_block_size = array<i32: 256, 1, 1>

// W8: asks for 8 rows per warp: convert-tile-to-mma handles 16 or 32

// SM90: ptxas sm_90a attention: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90: kernel attention: block 128x1x1, 98304 bytes dynamic smem


func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 128 : i32
  %cbn = arith.constant 64 : i32
  %d = arith.constant 128 : i32
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
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<128x128xf16>
  %q_start = tile.splat %m0 : i32 -> tensor<128xi32>
  %rows = tile.iota : tensor<128xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<128xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<128xi32> -> tensor<128x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<128x1xi32> -> tensor<128x64xi32>
  %win_t = tile.splat %window : i32 -> tensor<128x64xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<128x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<128x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<128x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<128x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<128x128xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<128xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<128x128xf32>, tensor<128xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %ktt = tile.trans %kt : tensor<64x128xf16> -> tensor<128x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<128x128xf16>, tensor<128x64xf16> -> tensor<128x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<128x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<128x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<128x64xi32>
    %sm = arith.select %in_range, %s, %ninf : tensor<128x64xi1>, tensor<128x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<128x64xf32> -> tensor<128xf32>
    %pc = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %acc_n, %row_lse : tensor<128x128xf32>, tensor<128xf32>
  }
  %out = arith.truncf %acc : tensor<128x128xf32> to tensor<128x128xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<128x128xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<128xf32>
  return
}

