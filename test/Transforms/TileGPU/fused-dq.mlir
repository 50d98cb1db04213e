// dQ inside the backward's key-rows program (python/tessel/backward.py, FUSED_DQ) on the wgmma
// level: dQᵀ = Kᵀ·dSᵀ. K, an A block loaded once, is also read transposed (an MN-major
// descriptor, imm-trans-a 1); at d128 its two 64-column halves are loads of the same rows that
// become views of K's slabs (no copy, no bytes of their own). dSᵀ, computed in registers, is
// the B operand: tilegpu-allocate-shared writes it into a buffer of its own (barrier,
// local_store, fence, barrier) and wgmma reads it as stored (N-major, imm-trans-b 1). The
// float32 atomic adds of dQᵀ (unit stride along the head dim: one run of 64 floats a query)
// become, with bulk-adds, tilegpu.bulk_add through one staging buffer shared by both halves:
// all 64 runs (the kernel stays within two CTAs an SM; past that, rounds of 32). Without it
// (the default) they stay element atomics.
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" | FileCheck %s --check-prefix=LAYOUT
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared="bulk-adds=true" | FileCheck %s --check-prefix=SMEM
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared="bulk-adds=true" | tessel-opt --convert-tile-to-mma | FileCheck %s --check-prefix=BULK
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: not tessel-opt %s --tilegpu-assign-layouts 2>&1 | FileCheck %s --check-prefix=MMA

// LAYOUT-LABEL: func.func @fused_dq
// LAYOUT: tile.trans %{{.*}} : tensor<64x64xf16, #{{.*}}> -> tensor<64x64xf16, #[[A:.*]]>
// LAYOUT: tilegpu.convert_layout %{{.*}} : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #[[B:.*]]>

// K [64 keys, 128] at 0 (16 KiB), its halves at 0 and 8192 (views), Q's ring of two 16 KiB
// stages from 16 KiB, dSᵀ's buffer after (8 KiB), then the staging buffer: 64 × 68 floats.
// SMEM-LABEL: func.func @fused_dq
// SMEM-SAME: tilegpu.shared_bytes = 74752
// SMEM-DAG: %[[ST:.*]] = tilegpu.alloc {offset = 57344 : i64} : !tilegpu.smem<64x68xf32, stages = 1, swizzle = 0>
// SMEM-DAG: %[[K:.*]] = tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x128xf16, stages = 1
// SMEM-DAG: %[[K1:.*]] = tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x64xf16, stages = 1
// SMEM-DAG: %[[K2:.*]] = tilegpu.alloc {offset = 8192 : i64} : !tilegpu.smem<64x64xf16, stages = 1
// SMEM-DAG: %[[DS:.*]] = tilegpu.alloc {offset = 49152 : i64} : !tilegpu.smem<64x64xf16, stages = 1
// SMEM: tilegpu.async_copy %{{.*}} into %[[K]]
// SMEM-NOT: into %[[K1]]
// SMEM-NOT: into %[[K2]]
// SMEM: scf.for
// SMEM: arith.truncf
// SMEM-NEXT: gpu.barrier
// SMEM-NEXT: tilegpu.local_store %{{.*}}, %[[DS]][%{{.*}}] : tensor<64x64xf16, #mma>
// SMEM-NEXT: tilegpu.fence_async_shared
// SMEM-NEXT: gpu.barrier
// SMEM-NEXT: tilegpu.local_load %[[DS]]
// SMEM: tilegpu.bulk_add %{{.*}} via %[[ST]] {run_dim = 0 : i64}
// SMEM-NOT: tilegpu.local_store
// SMEM: tilegpu.bulk_add %{{.*}} via %[[ST]] {run_dim = 0 : i64}

// PTX-LABEL: .entry fused_dq(
// PTX: st.shared.b32
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 1, 1;
// PTX: atom.global.add.f32
// PTX-NOT: cp.reduce.async.bulk

// BULK-LABEL: gpu.func @fused_dq
// BULK: "cp.async.bulk.wait_group.read 0;"
// BULK: "cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [$0], [$1], $2;"
// BULK: "cp.async.bulk.commit_group;"
// BULK: "cp.async.bulk.wait_group 0;"
// BULK-NEXT: gpu.return

// MMA: error: 'tile.load' op is read transposed as an A operand, which convert-tile-to-mma does on wgmma only (sm_90a)
func.func @fused_dq(%kp: !tile.ptr<f16>, %qp: !tile.ptr<f16>, %dqp: !tile.ptr<f32>, %nq: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %kd = tile.make_desc %kp[%c0], shape[%c64, %c128], strides[%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %qd = tile.make_desc %qp[%c0], shape[%nq, %c128], strides[%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dq1 = tile.make_desc %dqp[%c0], shape[%c64, %nq], strides[%c1, %c128] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dq2 = tile.make_desc %dqp[%c64], shape[%c64, %nq], strides[%c1, %c128] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %k = tile.load %kd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
  %k1 = tile.load %kd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %k2 = tile.load %kd[%c0, %c64] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %k1t = tile.trans %k1 : tensor<64x64xf16> -> tensor<64x64xf16>
  %k2t = tile.trans %k2 : tensor<64x64xf16> -> tensor<64x64xf16>
  scf.for %i = %c0 to %nq step %c64 : i32 {
    %q = tile.load %qd[%i, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %qt = tile.trans %q : tensor<64x128xf16> -> tensor<128x64xf16>
    %st = tile.dot %k, %qt, %zero : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
    %ds = arith.truncf %st : tensor<64x64xf32> to tensor<64x64xf16>
    %a1 = tile.dot %k1t, %ds, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    tile.atomic_add %dq1[%c0, %i], %a1 : !tile.desc<2, f32>, tensor<64x64xf32>
    %a2 = tile.dot %k2t, %ds, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    tile.atomic_add %dq2[%c0, %i], %a2 : !tile.desc<2, f32>, tensor<64x64xf32>
  }
  return
}
