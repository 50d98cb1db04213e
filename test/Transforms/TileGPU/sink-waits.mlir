// tilegpu-sink-waits on tilegpu-pipeline-loads' output: the wait for a block loaded before a
// loop (Q) moves below the loop's prologue copies when they write other bytes, its pending
// count raised by the commit groups it passes; the local loads of its bytes and what is
// computed from them move with it; it stops at a copy into its bytes and at ops with effects.
// RUN: tessel-opt %s --split-input-file --allow-unregistered-dialect --tilegpu-sink-waits \
// RUN:   | FileCheck %s

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>

// Q in the ring's last stage (bytes 16384..32767), the prologue into stage 0: Q's wait, its
// barrier and its local load go below the prologue, with one group left in flight. The pure
// ops between stay where they were; the scaled copy of Q moves with its load.
// CHECK-LABEL: func.func @below_the_prologue
// CHECK: %[[QT:.*]] = tilegpu.async_copy %{{.*}} into %[[Q:.*]][%{{.*}}]
// CHECK-NEXT: %[[QG:.*]] = tilegpu.async_commit %[[QT]]
// CHECK-NEXT: %[[ZERO:.*]] = arith.constant dense<0.000000e+00>
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi slt
// CHECK-NEXT: %[[KT:.*]] = tilegpu.async_copy %{{.*}} into %{{.*}}[%{{.*}}] if %[[MORE]]
// CHECK-NEXT: %[[KG:.*]] = tilegpu.async_commit %[[KT]]
// CHECK-NEXT: tilegpu.async_wait %[[QG]] {pending = 1 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[QA:.*]] = tilegpu.local_load %[[Q]]
// CHECK-NEXT: %[[QS:.*]] = arith.mulf %[[QA]]
// CHECK-NEXT: scf.for {{.*}} iter_args(%{{.*}} = %[[ZERO]], %{{.*}} = %{{.*}}, %{{.*}} = %[[KG]])
func.func @below_the_prologue(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %lb: i32,
                              %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %half = arith.constant dense<5.000000e-01> : tensor<64x128xf16, #a>
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %q = tilegpu.alloc {offset = 16384 : i64} : !once
  %qt = tilegpu.async_copy %qd[%lb, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
  %qg = tilegpu.async_commit %qt
  tilegpu.async_wait %qg {pending = 0 : i32}
  gpu.barrier
  %qa = tilegpu.local_load %q[%c0] : !once -> tensor<64x128xf16, #a>
  %qs = arith.mulf %qa, %half : tensor<64x128xf16, #a>
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
  gpu.barrier
  %more = arith.cmpi slt, %lb, %ub : i32
  %kt = tilegpu.async_copy %kd[%lb, %c0] into %k[%c0] if %more : !tile.desc<2, f16> -> !ring
  %kg = tilegpu.async_commit %kt
  %r:3 = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zero, %s = %c0, %g = %kg)
      -> (tensor<64x64xf32, #mma>, i32, !tilegpu.token) : i32 {
    tilegpu.async_wait %g {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %next = arith.addi %j, %c64 : i32
    %in = arith.cmpi slt, %next, %ub : i32
    %s1 = arith.addi %s, %c1 : i32
    %sn = arith.remui %s1, %c2 : i32
    %t = tilegpu.async_copy %kd[%next, %c0] into %k[%sn] if %in : !tile.desc<2, f16> -> !ring
    %gn = tilegpu.async_commit %t
    %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
    %acc2 = tile.dot %qs, %kb, %acc : tensor<64x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %acc2, %sn, %gn : tensor<64x64xf32, #mma>, i32, !tilegpu.token
  }
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>

// Q in stage 0's bytes, which the prologue overwrites: the wait stays above it.
// CHECK-LABEL: func.func @prologue_into_q
// CHECK: %[[QG:.*]] = tilegpu.async_commit
// CHECK-NEXT: tilegpu.async_wait %[[QG]] {pending = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: tilegpu.local_load
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: tilegpu.async_copy
func.func @prologue_into_q(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %lb: i32) {
  %c0 = arith.constant 0 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %q = tilegpu.alloc {offset = 0 : i64} : !once
  %qt = tilegpu.async_copy %qd[%lb, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
  %qg = tilegpu.async_commit %qt
  tilegpu.async_wait %qg {pending = 0 : i32}
  gpu.barrier
  %qa = tilegpu.local_load %q[%c0] : !once -> tensor<64x128xf16, #a>
  gpu.barrier
  %kt = tilegpu.async_copy %kd[%lb, %c0] into %k[%c0] : !tile.desc<2, f16> -> !ring
  %kg = tilegpu.async_commit %kt
  "test.use"(%qa, %kg) : (tensor<64x128xf16, #a>, !tilegpu.token) -> ()
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>
!slab = !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>

// A view of Q's bytes (a 64-column slab, no copy of its own) is read after Q's wait too: it
// moves with it. The page number the prologue reads (tile.load_scalar) does not stop the
// wait; a store does, after the commit it passed.
// CHECK-LABEL: func.func @view_and_store
// CHECK: %[[QG:.*]] = tilegpu.async_commit
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: tile.load_scalar
// CHECK-NEXT: tilegpu.async_copy
// CHECK-NEXT: tilegpu.async_commit
// CHECK-NEXT: tilegpu.async_wait %[[QG]] {pending = 1 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: tilegpu.local_load %{{.*}}[%{{.*}}] : !tilegpu.smem<64x128xf16
// CHECK-NEXT: tilegpu.local_load %{{.*}}[%{{.*}}] : !tilegpu.smem<64x64xf16
// CHECK-NEXT: tile.store
func.func @view_and_store(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                          %table: !tile.desc<1, i32>, %od: !tile.desc<2, f32>, %lb: i32) {
  %c0 = arith.constant 0 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %q = tilegpu.alloc {offset = 16384 : i64} : !once
  %qhi = tilegpu.alloc {offset = 24576 : i64} : !slab
  %one = arith.constant dense<1.000000e+00> : tensor<64x64xf32, #mma>
  %qt = tilegpu.async_copy %qd[%lb, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
  %qg = tilegpu.async_commit %qt
  tilegpu.async_wait %qg {pending = 0 : i32}
  gpu.barrier
  %qa = tilegpu.local_load %q[%c0] : !once -> tensor<64x128xf16, #a>
  %qb = tilegpu.local_load %qhi[%c0] : !slab -> tensor<64x64xf16, #a>
  gpu.barrier
  %page = tile.load_scalar %table[%lb] : !tile.desc<1, i32> -> i32
  %kt = tilegpu.async_copy %kd[%page, %c0] into %k[%c0] : !tile.desc<2, f16> -> !ring
  %kg = tilegpu.async_commit %kt
  tile.store %od[%lb, %c0], %one : !tile.desc<2, f32>, tensor<64x64xf32, #mma>
  "test.use"(%qa, %qb, %kg) : (tensor<64x128xf16, #a>, tensor<64x64xf16, #a>, !tilegpu.token) -> ()
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
!once = !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>

// No copy follows: nothing to overlap, the wait stays.
// CHECK-LABEL: func.func @nothing_after
// CHECK: tilegpu.async_commit
// CHECK-NEXT: tilegpu.async_wait %{{.*}} {pending = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: tilegpu.local_load
// CHECK-NEXT: arith.constant
func.func @nothing_after(%qd: !tile.desc<2, f16>, %lb: i32) {
  %c0 = arith.constant 0 : i32
  %q = tilegpu.alloc {offset = 0 : i64} : !once
  %qt = tilegpu.async_copy %qd[%lb, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
  %qg = tilegpu.async_commit %qt
  tilegpu.async_wait %qg {pending = 0 : i32}
  gpu.barrier
  %qa = tilegpu.local_load %q[%c0] : !once -> tensor<64x128xf16, #a>
  %x = arith.constant 1 : i32
  "test.use"(%qa, %x) : (tensor<64x128xf16, #a>, i32) -> ()
  return
}
