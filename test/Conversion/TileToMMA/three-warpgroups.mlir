// Three consumer warpgroups (FlashAttention-3's d64 block): the naive causal attention of
// test/python/attention_kernels.py, naive_attention_kernel("f16", "causal", 192, 128, 64),
// after --tile-optimize, on wgmma. 192 query rows are three warpgroups of consumers and a
// producer warpgroup (512 threads); the consumers' copies (Q's) are dealt among their first 256
// threads (a power of two: whole 8-row swizzle groups per step), their barrier counts all 384.
// The roles' registers add up to what the launch reserves: consumers 152, the producer the 56
// they leave (128 a thread at launch); ptxas spills nothing. mma.sync keeps 64 or 128 rows.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: not tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=ptx -o - 2>&1 | FileCheck %s --check-prefix=MMA
// --late-p (off by default, not yet measured): the consumers overlapped as FA3's d64 kernel
// has them — P_j made after the previous P·V's wait — at 160 registers, the cp.async producer
// keeping 32; no spill and no ptxas advisory.
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --late-p --emit=ptx -o - | FileCheck %s --check-prefix=LATE
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --late-p --emit=cubin -o %t.late.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not='Potential Performance Loss'
// --skip-masked-warpgroups (off by default, not yet measured): each warpgroup branches
// around the masked loop's blocks its own rows cannot see (tilegpu-skip-masked-warpgroups);
// the same wgmma chains, no spill, no advisory.
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --skip-masked-warpgroups --emit=cubin -o %t.skip.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not='Potential Performance Loss'

// CHECK: .entry attention
// CHECK: .maxntid 512, 1, 1
// CHECK-NEXT: .maxnreg 128
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 152;
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 56;
// CHECK-DAG: setp.gt.u32 {{.*}}, 255;
// CHECK-DAG: bar.sync 1, 384;
// CHECK-DAG: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16

// LATE: .maxnreg 128
// LATE-DAG: setmaxnreg.inc.sync.aligned.u32 160;
// LATE-DAG: setmaxnreg.dec.sync.aligned.u32 32;
// LATE-DAG: wgmma.wait_group.sync.aligned 1;

// PTXAS: 0 bytes spill stores, 0 bytes spill loads
// PTXAS: kernel attention: block 512x1x1

// MMA: loads a block of 192 rows: convert-tile-to-mma handles 64 or 128 (16 or 32 rows per warp), or 192 with wgmma

func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 192 : i32
  %cbn = arith.constant 128 : i32
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
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<192x64xf16>
  %q_start = tile.splat %m0 : i32 -> tensor<192xi32>
  %rows = tile.iota : tensor<192xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<192xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<192xi32> -> tensor<192x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<192x1xi32> -> tensor<192x128xi32>
  %win_t = tile.splat %window : i32 -> tensor<192x128xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<192x128xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<192x128xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<192x128xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<192x128xf32>
  %zero_s = arith.constant dense<0.0> : tensor<192x128xf32>
  %zero_o = arith.constant dense<0.0> : tensor<192x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<192xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<192x64xf32>, tensor<192xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %ktt = tile.trans %kt : tensor<128x64xf16> -> tensor<64x128xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<192x64xf16>, tensor<64x128xf16> -> tensor<192x128xf32>
    %s = arith.mulf %s0, %scale_t : tensor<192x128xf32>
    %kv_start = tile.splat %j : i32 -> tensor<128xi32>
    %cols = tile.iota : tensor<128xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<128xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<128xi32> -> tensor<1x128xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x128xi32> -> tensor<192x128xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<192x128xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<192x128xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<192x128xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<192x128xi1>, tensor<192x128xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<192x128xf32> -> tensor<192xf32>
    %pc = arith.truncf %p : tensor<192x128xf32> to tensor<192x128xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<192x128xf16>, tensor<128x64xf16> -> tensor<192x64xf32>
    scf.yield %acc_n, %row_lse : tensor<192x64xf32>, tensor<192xf32>
  }
  %out = arith.truncf %acc : tensor<192x64xf32> to tensor<192x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<192x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<192xf32>
  return
}

