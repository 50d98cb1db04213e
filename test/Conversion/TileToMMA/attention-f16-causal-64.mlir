// The naive causal attention of test/python/attention_kernels.py,
// naive_attention_kernel("f16", "causal", 64, 64, 64), after --tile-optimize, through the
// mma.sync fast path (convert-tile-to-mma) to PTX and cubins for sm_80 and sm_90a: the PTX has
// the tensor-core instructions, ldmatrix (plain for K, .trans for V) and cp.async with
// zero fill, the row reductions are quad shuffles, the softmax is one FFMA per score under a
// uniform 0 < scale < inf branch, the accumulator rescale is skipped by a warp whose row maxima
// did not move, and ptxas spills nothing.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --convert-tile-to-mma | FileCheck %s --check-prefix=MMA
// RUN: tessel-opt %t.mlir --convert-tile-to-mma | FileCheck %s --check-prefix=FFMA
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=ptx -o - | FileCheck %s --check-prefix=EPI
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=cubin -o %t.sm80.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=mma --emit=cubin -o %t.sm90.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=SM90
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=auto --emit=cubin -o %t.auto.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=AUTO

// One warp per 16 query rows; Q, K and V blocks of 64x64 f16 (8 KiB each) in shared memory,
// K and V double-buffered (two stages): 8 + 2 * 16 KiB.
// MMA: llvm.mlir.global external @__tessel_mma_smem() {addr_space = 3 : i32, alignment = 16 : i64}
// MMA: gpu.func @attention
// MMA-SAME: known_block_size = array<i32: 128, 1, 1>
// MMA-SAME: tessel.dynamic_shared_bytes = 40960
// MMA-NOT: memref.
// Both key loops (unmasked, diagonal) are pipelined over two stages: a barrier, the prologue
// issues K and V of the first iteration; each iteration waits once, passes one barrier, issues
// K and V of the next iteration into the other stage, then computes. The first loop's prologue
// goes out before the wait for Q (tilegpu-sink-waits): Q's wait leaves that group in flight,
// then ldmatrix reads Q.
// MMA: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg, %{{.*}} :
// MMA: nvvm.cp.async.commit.group
// MMA: gpu.barrier
// MMA: nvvm.cp.async.commit.group
// MMA-NEXT: nvvm.cp.async.wait.group 1
// MMA-NEXT: gpu.barrier
// MMA: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<row>
// MMA: scf.for {{.*}} iter_args({{.*}}, %{{.*}} = %c0_i32{{.*}}) -> (
// MMA: nvvm.cp.async.wait.group 0
// MMA-NEXT: gpu.barrier
// MMA: nvvm.cp.async.shared.global
// MMA: nvvm.cp.async.commit.group
// MMA-NOT: gpu.barrier
// MMA: nvvm.mma.sync
// MMA: nvvm.shfl.sync bfly
// MMA: nvvm.ldmatrix {{.*}}layout = #nvvm.mma_layout<col>
// MMA: nvvm.mma.sync
// MMA: scf.for
// MMA-NOT: func.func
// The single-FFMA softmax (docs/dev/codegen-mma.md): S stays unscaled on the 0 < c < inf side of
// a uniform branch and is scaled in place on the other (k = 1 there: the exact code); the row
// max is k·max(S); each probability is ex2(fma(S, k, -m)).
// FFMA: scf.for
// FFMA: %[[LT:.*]] = arith.cmpf olt, %[[C:.*]], %{{.*}} : f32
// FFMA: %[[GT:.*]] = arith.cmpf ogt, %[[C]], %{{.*}} : f32
// FFMA: %[[FAST:.*]] = arith.andi %[[GT]], %[[LT]] : i1
// FFMA: %[[T:.*]]:32 = scf.if %[[FAST]] -> (f32,
// FFMA-NEXT: scf.yield
// FFMA-NEXT: } else {
// FFMA-NEXT: arith.mulf %{{.*}}, %[[C]] : f32
// FFMA: %[[K:.*]] = arith.select %[[FAST]], %[[C]], %{{.*}} : f32
// FFMA: arith.maximumf
// FFMA: nvvm.shfl.sync bfly
// FFMA: arith.mulf %{{.*}}, %[[K]] : f32
// FFMA: llvm.intr.fma(%[[T]]#0, %[[K]], %{{.*}}) : (f32, f32, f32) -> f32
// FFMA-NEXT: llvm.call_intrinsic "llvm.nvvm.ex2.approx.ftz.f32"
// A tile.moderate scale (the JIT's specialisation of a float in [2^-64, 2^64]) makes
// c = scale·log2(e) known positive and finite: no branch, S is never scaled in place, k is c.
// RUN: sed 's/%%scale: f32/%%scale: f32 {tile.moderate}/' %s | tessel-opt --tile-optimize | tessel-opt --convert-tile-to-mma | FileCheck %s --check-prefix=MODERATE
// MODERATE: %[[C:.*]] = arith.mulf %{{.*}}, %{{.*}} : f32
// MODERATE: scf.for
// MODERATE-NOT: arith.cmpf ogt
// MODERATE: arith.maximumf
// MODERATE: nvvm.shfl.sync bfly
// MODERATE: arith.mulf %{{.*}}, %[[C]] : f32
// MODERATE: llvm.intr.fma(%{{.*}}, %[[C]], %{{.*}}) : (f32, f32, f32) -> f32
// The rescale O·alpha under a warp vote: skipped when every alpha of the warp is 1.
// FFMA: arith.cmpf une, %{{.*}}, %{{.*}} : f32
// FFMA: %[[MOVED:.*]] = nvvm.vote.sync any %{{.*}}, %{{.*}} -> i1
// FFMA: scf.if %[[MOVED]] -> (f32,
// FFMA: } else {
// FFMA: nvvm.mma.sync

// PTX: .extern .shared .align 16 .b8 __tessel_mma_smem[];
// PTX: .entry attention(
// PTX: .maxntid 128, 1, 1
// Blocks wholly inside the tensor: plain copies, one address per thread plus constant offsets;
// the last block of a loop: per-chunk bounds with zero fill.
// PTX: cp.async.cg.shared.global [%rd{{[0-9]+}}+{{[0-9]+}}], [%rd{{[0-9]+}}+{{[0-9]+}}], 16;
// PTX: cp.async.cg.shared.global [{{.*}}], [%rd{{[0-9]+}}], 16, %r{{[0-9]+}};
// PTX: cp.async.wait_group 0;
// PTX: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// PTX: shfl.sync.bfly.b32
// PTX: fma.rn.f32 [[P:%r[0-9]+]], %r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}};
// PTX-NEXT: ex2.approx.ftz.f32 %r{{[0-9]+}}, [[P]];
// PTX: vote.sync.any.pred
// PTX: ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
// The epilogue divides by l through one reciprocal per row, not a division per element.
// EPI-NOT: div.rn.f32
// EPI: rcp.rn.f32
// EPI-NOT: div.rn.f32

// SM80: ptxas sm_80 attention: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM80: kernel attention: block 128x1x1, 40960 bytes dynamic smem
// SM90: ptxas sm_90a attention: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90: kernel attention: block 128x1x1, 40960 bytes dynamic smem
// auto takes the fast path for this program: same launch, no remark.
// AUTO-NOT: remark
// AUTO: kernel attention: block 128x1x1, 40960 bytes dynamic smem


func.func @attention(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 64 : i32
  %cbn = arith.constant 64 : i32
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
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %q_start = tile.splat %m0 : i32 -> tensor<64xi32>
  %rows = tile.iota : tensor<64xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<64xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %win_t = tile.splat %window : i32 -> tensor<64x64xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<64x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<64x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
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
    %mask0 = arith.andi %in_range, %causal_ok : tensor<64x64xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %row_lse : tensor<64x64xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}

