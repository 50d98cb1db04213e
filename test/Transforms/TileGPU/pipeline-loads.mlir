// tilegpu-pipeline-loads on loops in tilegpu-allocate-shared's unpipelined form: a prologue
// issues the first S - 1 iterations, each iteration waits for its own group, passes one barrier
// and issues iteration j + S - 1; the groups in flight are loop-carried tokens.
// RUN: tessel-opt %s --split-input-file --tilegpu-pipeline-loads --canonicalize | FileCheck %s

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring2 = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
!ring3 = !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>

// CHECK-LABEL: func.func @two_stages
// CHECK: %[[K:.*]] = tilegpu.alloc
// CHECK: gpu.barrier
// CHECK-NEXT: %[[T0:.*]] = tilegpu.async_copy %{{.*}}[%[[LB:.*]], %{{.*}}] into %[[K]][%[[C0:.*]]]
// CHECK-NEXT: %[[G0:.*]] = tilegpu.async_commit %[[T0]]
// CHECK-NEXT: %[[R:.*]]:2 = scf.for %[[J:.*]] = %[[LB]] to %{{.*}} step %[[STEP:.*]] iter_args(%{{.*}} = %{{.*}}, %[[G:.*]] = %[[G0]])
// CHECK: tilegpu.async_wait %[[G]] {pending = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK: %[[NEXT:.*]] = arith.addi %[[J]], %[[STEP]]
// CHECK-NEXT: %[[T:.*]] = tilegpu.async_copy %{{.*}}[%[[NEXT]], %{{.*}}] into %[[K]][%{{.*}}]
// CHECK-NEXT: %[[GN:.*]] = tilegpu.async_commit %[[T]]
// CHECK-NEXT: tilegpu.local_load %[[K]]
// CHECK-NOT: tilegpu.async_wait
// CHECK: scf.yield %{{.*}}, %[[GN]]
// CHECK: tilegpu.async_wait %[[R]]#1 {pending = 0 : i32}
func.func @two_stages(%kd: !tile.desc<2, f16>, %lb: i32, %ub: i32) -> tensor<64x64xf16, #b> {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !ring2
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf16, #b>) : i32 {
    %d = arith.subi %j, %lb : i32
    %it = arith.divui %d, %c64 : i32
    %st = arith.remui %it, %c2 : i32
    %t = tilegpu.async_copy %kd[%j, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring2
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring2 -> tensor<64x64xf16, #b>
    scf.yield %kb : tensor<64x64xf16, #b>
  }
  return %o : tensor<64x64xf16, #b>
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring3 = !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>

// Three stages: two iterations in the prologue (stages 0 and 1), one younger group may stay in
// flight at each wait, iteration j issues j + 2 into stage (j + 2) mod 3.
// CHECK-LABEL: func.func @three_stages
// CHECK: %[[G0:.*]] = tilegpu.async_commit
// CHECK: %[[L1:.*]] = arith.addi %[[LB:.*]], %c64_i32
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[L1]], %{{.*}}] into %{{.*}}[%c1_i32]
// CHECK: %[[G1:.*]] = tilegpu.async_commit
// CHECK: scf.for %[[J:.*]] = %[[LB]] to %{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[A:.*]] = %[[G0]], %[[B:.*]] = %[[G1]])
// CHECK: tilegpu.async_wait %[[A]] {pending = 1 : i32}
// CHECK: %[[IT2:.*]] = arith.addi %{{.*}}, %c2_i32
// CHECK-NEXT: %[[ST2:.*]] = arith.remui %[[IT2]], %c3_i32
// CHECK-NEXT: %[[J2:.*]] = arith.addi %[[J]], %c128_i32
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[J2]], %{{.*}}] into %{{.*}}[%[[ST2]]]
// CHECK-NEXT: %[[GN:.*]] = tilegpu.async_commit
// CHECK: scf.yield %{{.*}}, %[[B]], %[[GN]]
func.func @three_stages(%kd: !tile.desc<2, f16>, %lb: i32, %ub: i32) -> tensor<64x64xf16, #b> {
  %c0 = arith.constant 0 : i32
  %c3 = arith.constant 3 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !ring3
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf16, #b>) : i32 {
    %d = arith.subi %j, %lb : i32
    %it = arith.divui %d, %c64 : i32
    %st = arith.remui %it, %c3 : i32
    %t = tilegpu.async_copy %kd[%j, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring3
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring3 -> tensor<64x64xf16, #b>
    scf.yield %kb : tensor<64x64xf16, #b>
  }
  return %o : tensor<64x64xf16, #b>
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!one = !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>

// One stage leaves nothing to overlap: the loop stays as it is.
// CHECK-LABEL: func.func @one_stage
// CHECK: scf.for
// CHECK: tilegpu.async_copy
// CHECK-NEXT: tilegpu.async_commit
// CHECK-NEXT: tilegpu.async_wait %{{.*}} {pending = 0 : i32}
func.func @one_stage(%kd: !tile.desc<2, f16>, %lb: i32, %ub: i32) -> tensor<64x64xf16, #b> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !one
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf16, #b>) : i32 {
    gpu.barrier
    %t = tilegpu.async_copy %kd[%j, %c0] into %k[%c0] : !tile.desc<2, f16> -> !one
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%c0] {transpose} : !one -> tensor<64x64xf16, #b>
    scf.yield %kb : tensor<64x64xf16, #b>
  }
  return %o : tensor<64x64xf16, #b>
}
