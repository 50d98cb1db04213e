// tilegpu-pipeline-loads on loops in tilegpu-allocate-shared's unpipelined form: a prologue
// issues the first S - 1 iterations, each iteration waits for its own group, passes one barrier
// and issues iteration j + S - 1 (predicated off past the loop's end) into stage (s + S - 1) mod S,
// where s, the stage it reads, is carried by the loop; the groups in flight are loop-carried
// tokens.
// RUN: tessel-opt %s --split-input-file --tilegpu-pipeline-loads --canonicalize | FileCheck %s

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring2 = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
!ring3 = !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>

// CHECK-LABEL: func.func @two_stages
// CHECK: %[[K:.*]] = tilegpu.alloc
// CHECK: gpu.barrier
// CHECK-NEXT: %[[ANY:.*]] = arith.cmpi slt, %[[LB:.*]], %[[UB:.*]] : i32
// CHECK-NEXT: %[[T0:.*]] = tilegpu.async_copy %{{.*}}[%[[LB]], %{{.*}}] into %[[K]][%[[C0:.*]]] if %[[ANY]]
// CHECK-NEXT: %[[G0:.*]] = tilegpu.async_commit %[[T0]]
// CHECK-NEXT: %[[R:.*]]:3 = scf.for %[[J:.*]] = %[[LB]] to %[[UB]] step %[[STEP:.*]] iter_args(%{{.*}} = %{{.*}}, %[[S:.*]] = %[[C0]], %[[G:.*]] = %[[G0]])
// CHECK: tilegpu.async_wait %[[G]] {pending = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[J]], %[[STEP]]
// CHECK-NEXT: %[[S1:.*]] = arith.addi %[[S]], %c1_i32
// CHECK-NEXT: %[[SN:.*]] = arith.remui %[[S1]], %c2_i32
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[UB]]
// CHECK-NEXT: %[[T:.*]] = tilegpu.async_copy %{{.*}}[%[[NEXT]], %{{.*}}] into %[[K]][%[[SN]]] if %[[MORE]]
// CHECK-NEXT: %[[GN:.*]] = tilegpu.async_commit %[[T]]
// CHECK: tilegpu.local_load %[[K]][%[[S]]]
// CHECK-NOT: tilegpu.async_wait
// CHECK: scf.yield %{{.*}}, %{{.*}}, %[[GN]]
// No wait after the loop: what is still in flight was predicated off.
// CHECK-NOT: tilegpu.async_wait
// CHECK: return
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
// flight at each wait, iteration j issues j + 2 into stage (s + 2) mod 3 and reads stage s.
// CHECK-LABEL: func.func @three_stages
// CHECK: %[[G0:.*]] = tilegpu.async_commit
// CHECK: %[[L1:.*]] = arith.addi %[[LB:.*]], %c64_i32
// CHECK-NEXT: %[[IN1:.*]] = arith.cmpi slt, %[[L1]], %[[UB:.*]] : i32
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[L1]], %{{.*}}] into %{{.*}}[%c1_i32] if %[[IN1]]
// CHECK: %[[G1:.*]] = tilegpu.async_commit
// CHECK: scf.for %[[J:.*]] = %[[LB]] to %{{.*}} iter_args(%{{.*}} = %{{.*}}, %[[S:.*]] = %c0_i32, %[[A:.*]] = %[[G0]], %[[B:.*]] = %[[G1]])
// CHECK: tilegpu.async_wait %[[A]] {pending = 1 : i32}
// CHECK: %[[J2:.*]] = arith.addi %[[J]], %c128_i32
// CHECK-NEXT: %[[S2:.*]] = arith.addi %[[S]], %c2_i32
// CHECK-NEXT: %[[ST2:.*]] = arith.remui %[[S2]], %c3_i32
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi slt, %[[J2]], %[[UB]]
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[J2]], %{{.*}}] into %{{.*}}[%[[ST2]]] if %[[MORE]]
// CHECK-NEXT: %[[GN:.*]] = tilegpu.async_commit
// CHECK: tilegpu.local_load %{{.*}}[%[[S]]]
// CHECK-NEXT: %[[S1:.*]] = arith.addi %[[S]], %c1_i32
// CHECK-NEXT: %[[SN:.*]] = arith.remui %[[S1]], %c3_i32
// CHECK-NEXT: scf.yield %{{.*}}, %[[SN]], %[[B]], %[[GN]]
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

// -----

#wg = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#wb = #tilegpu.dot_operand<operand = 1, parent = #wg>
!kring = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>

// Two loads of a wgmma loop body (K and V): one group per iteration, both copies under one
// predicate; the fence before wgmma's async-proxy reads stays between the wait and the barrier.
// CHECK-LABEL: func.func @two_loads_fenced
// CHECK: %[[ANY:.*]] = arith.cmpi slt
// CHECK-NEXT: %[[K0:.*]] = tilegpu.async_copy %[[KD:.*]][%{{.*}}] into %[[KS:.*]][%{{.*}}] if %[[ANY]]
// CHECK-NEXT: %[[V0:.*]] = tilegpu.async_copy %[[VD:.*]][%{{.*}}] into %[[VS:.*]][%{{.*}}] if %[[ANY]]
// CHECK-NEXT: %[[G0:.*]] = tilegpu.async_commit %[[K0]], %[[V0]]
// CHECK: scf.for
// CHECK: tilegpu.async_wait %{{.*}} {pending = 0 : i32}
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: gpu.barrier
// CHECK: %[[MORE:.*]] = arith.cmpi slt
// CHECK-NEXT: %[[K:.*]] = tilegpu.async_copy %[[KD]][%{{.*}}] into %[[KS]][%{{.*}}] if %[[MORE]]
// CHECK-NEXT: %[[V:.*]] = tilegpu.async_copy %[[VD]][%{{.*}}] into %[[VS]][%{{.*}}] if %[[MORE]]
// CHECK-NEXT: tilegpu.async_commit %[[K]], %[[V]]
// CHECK-NOT: tilegpu.fence_async_shared
// CHECK: tilegpu.local_load %[[KS]]
// CHECK: tilegpu.local_load %[[VS]]
func.func @two_loads_fenced(%kd: !tile.desc<2, f16>, %vd: !tile.desc<2, f16>, %lb: i32, %ub: i32) -> (tensor<64x64xf16, #wb>, tensor<64x64xf16, #wb>) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #wb>
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !kring
  %v = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !kring
  %o:2 = scf.for %j = %lb to %ub step %c64 iter_args(%a = %zero, %b = %zero) -> (tensor<64x64xf16, #wb>, tensor<64x64xf16, #wb>) : i32 {
    %d = arith.subi %j, %lb : i32
    %it = arith.divui %d, %c64 : i32
    %st = arith.remui %it, %c2 : i32
    %t = tilegpu.async_copy %kd[%j, %c0] into %k[%st] : !tile.desc<2, f16> -> !kring
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !kring -> tensor<64x64xf16, #wb>
    %d2 = arith.subi %j, %lb : i32
    %it2 = arith.divui %d2, %c64 : i32
    %st2 = arith.remui %it2, %c2 : i32
    %t2 = tilegpu.async_copy %vd[%j, %c0] into %v[%st2] : !tile.desc<2, f16> -> !kring
    %g2 = tilegpu.async_commit %t2
    tilegpu.async_wait %g2 {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %vb = tilegpu.local_load %v[%st2] : !kring -> tensor<64x64xf16, #wb>
    scf.yield %kb, %vb : tensor<64x64xf16, #wb>, tensor<64x64xf16, #wb>
  }
  return %o#0, %o#1 : tensor<64x64xf16, #wb>, tensor<64x64xf16, #wb>
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring2 = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>

// An indirect loop (a block mask's key-block list): the copy's row is list[t] * 64, computed
// from the induction variable by a load_scalar. The copies issued ahead compute it again for
// their own iteration: list[lb] in the prologue, list[t + 1] in the body.
// CHECK-LABEL: func.func @indirect
// CHECK: gpu.barrier
// CHECK: %[[B0:.*]] = tile.load_scalar %[[LIST:.*]][%[[LB:.*]]] : !tile.desc<1, i32> -> i32
// CHECK-NEXT: %[[R0:.*]] = arith.muli %[[B0]], %c64_i32
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[R0]], %{{.*}}] into
// CHECK: scf.for %[[T:.*]] = %[[LB]] to
// The body's own block index stays for the body's other users (here the yielded row).
// CHECK-NEXT: %[[BT:.*]] = tile.load_scalar %[[LIST]][%[[T]]]
// CHECK-NEXT: %[[RT:.*]] = arith.muli %[[BT]], %c64_i32
// CHECK-NEXT: tilegpu.async_wait
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[T]], %c1_i32
// CHECK: %[[B1:.*]] = tile.load_scalar %[[LIST]][%[[NEXT]]]
// CHECK-NEXT: %[[R1:.*]] = arith.muli %[[B1]], %c64_i32
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[R1]], %{{.*}}] into %{{.*}}[%{{.*}}] if
// CHECK: scf.yield %{{.*}}, %[[RT]],
func.func @indirect(%kd: !tile.desc<2, f16>, %list: !tile.desc<1, i32>, %lb: i32, %ub: i32)
    -> (tensor<64x64xf16, #b>, i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !ring2
  %o:2 = scf.for %t = %lb to %ub step %c1 iter_args(%acc = %zero, %last = %c0)
      -> (tensor<64x64xf16, #b>, i32) : i32 {
    %blk = tile.load_scalar %list[%t] : !tile.desc<1, i32> -> i32
    %row = arith.muli %blk, %c64 : i32
    %it = arith.subi %t, %lb : i32
    %st = arith.remui %it, %c2 : i32
    %tk = tilegpu.async_copy %kd[%row, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring2
    %g = tilegpu.async_commit %tk
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring2 -> tensor<64x64xf16, #b>
    scf.yield %kb, %row : tensor<64x64xf16, #b>, i32
  }
  return %o#0, %o#1 : tensor<64x64xf16, #b>, i32
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring2 = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>

// A paged cache: each iteration looks its page up and builds the descriptors of K and V in the
// body (their shape ends at the page's last valid row). The copies issued ahead build both
// descriptors again for their own iteration, from one lookup of the page; the body's own
// lookup and descriptors go with the copies they served.
// CHECK-LABEL: func.func @paged
// CHECK: gpu.barrier
// CHECK: %[[P0:.*]] = tile.load_scalar %[[TABLE:.*]][%[[LB:.*]]] : !tile.desc<1, i32> -> i32
// CHECK: %[[KD0:.*]] = tile.make_desc %[[KP:.*]][%{{.*}}], shape[%[[END0:.*]], %{{.*}}]
// CHECK-NEXT: tilegpu.async_copy %[[KD0]]
// CHECK-NEXT: %[[VD0:.*]] = tile.make_desc %[[VP:.*]][%{{.*}}], shape[%[[END0]], %{{.*}}]
// CHECK-NEXT: tilegpu.async_copy %[[VD0]]
// CHECK: scf.for %[[T:.*]] = %[[LB]] to
// CHECK-NOT: tile.load_scalar
// CHECK: tilegpu.async_wait
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[T]], %c1_i32
// CHECK: tile.load_scalar %[[TABLE]][%[[NEXT]]]
// CHECK-NOT: tile.load_scalar
// CHECK: %[[KD1:.*]] = tile.make_desc %[[KP]]
// CHECK-NEXT: tilegpu.async_copy %[[KD1]][%{{.*}}] into %{{.*}}[%{{.*}}] if
// CHECK-NEXT: %[[VD1:.*]] = tile.make_desc %[[VP]]
// CHECK-NEXT: tilegpu.async_copy %[[VD1]][%{{.*}}] into %{{.*}}[%{{.*}}] if
// CHECK-NOT: tile.load_scalar
// CHECK-NOT: tile.make_desc
// CHECK: scf.yield
func.func @paged(%kp: !tile.ptr<f16>, %vp: !tile.ptr<f16>, %table: !tile.desc<1, i32>,
                 %lb: i32, %ub: i32) -> (tensor<64x64xf16, #b>, tensor<64x64xf16, #b>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !ring2
  %v = tilegpu.alloc {offset = 8192 : i64} : !ring2
  %o:2 = scf.for %t = %lb to %ub step %c1 iter_args(%ka = %zero, %va = %zero)
      -> (tensor<64x64xf16, #b>, tensor<64x64xf16, #b>) : i32 {
    %page = tile.load_scalar %table[%t] : !tile.desc<1, i32> -> i32
    %row = arith.muli %page, %c256 : i32
    %end = arith.addi %row, %c64 : i32
    %kd = tile.make_desc %kp[%c0], shape[%end, %c64], strides[%c64, %c1]
        : !tile.ptr<f16> -> !tile.desc<2, f16>
    %vd = tile.make_desc %vp[%c0], shape[%end, %c64], strides[%c64, %c1]
        : !tile.ptr<f16> -> !tile.desc<2, f16>
    %it = arith.subi %t, %lb : i32
    %st = arith.remui %it, %c2 : i32
    %tk = tilegpu.async_copy %kd[%row, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring2
    %gk = tilegpu.async_commit %tk
    tilegpu.async_wait %gk {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring2 -> tensor<64x64xf16, #b>
    %tv = tilegpu.async_copy %vd[%row, %c0] into %v[%st] : !tile.desc<2, f16> -> !ring2
    %gv = tilegpu.async_commit %tv
    tilegpu.async_wait %gv {pending = 0 : i32}
    gpu.barrier
    %vb = tilegpu.local_load %v[%st] : !ring2 -> tensor<64x64xf16, #b>
    scf.yield %kb, %vb : tensor<64x64xf16, #b>, tensor<64x64xf16, #b>
  }
  return %o#0, %o#1 : tensor<64x64xf16, #b>, tensor<64x64xf16, #b>
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring2 = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>

// A row that depends on a value the loop carries cannot be computed for a later iteration:
// the loop is left as it is.
// CHECK-LABEL: func.func @carried_row
// CHECK-NOT: if %
// CHECK: scf.for
// CHECK: tilegpu.async_copy %{{.*}} into %{{.*}}[%{{.*}}] :
func.func @carried_row(%kd: !tile.desc<2, f16>, %lb: i32, %ub: i32) -> tensor<64x64xf16, #b> {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !ring2
  %o:2 = scf.for %t = %lb to %ub step %c1 iter_args(%acc = %zero, %row = %c0)
      -> (tensor<64x64xf16, #b>, i32) : i32 {
    %it = arith.subi %t, %lb : i32
    %st = arith.remui %it, %c2 : i32
    %tk = tilegpu.async_copy %kd[%row, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring2
    %g = tilegpu.async_commit %tk
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring2 -> tensor<64x64xf16, #b>
    %next = arith.addi %row, %c64 : i32
    scf.yield %kb, %next : tensor<64x64xf16, #b>, i32
  }
  return %o#0 : tensor<64x64xf16, #b>
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring3 = !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>

// The paged cache over a ring of three stages: copies two iterations ahead, their descriptors
// built again for their own iteration (until 2026-12-03 such loops went one ahead only, a
// guard against wrong H200 results that came from elsewhere: docs/dev/codegen.md).
// CHECK-LABEL: func.func @paged_three_stages
// CHECK: tile.load_scalar %[[TABLE:[a-z0-9_]+]][%[[LB:[a-z0-9_]+]]]
// CHECK: tilegpu.async_copy
// CHECK: tile.load_scalar %[[TABLE]]
// CHECK: tilegpu.async_copy
// CHECK: scf.for %[[T:[a-z0-9_]+]] = %[[LB]] to
// CHECK: tilegpu.async_wait %{{.*}} {pending = 1 : i32}
// CHECK: %[[NEXT:.*]] = arith.addi %[[T]], %c2_i32
// CHECK: tile.load_scalar %[[TABLE]][%[[NEXT]]]
// CHECK: scf.yield
func.func @paged_three_stages(%kp: !tile.ptr<f16>, %vp: !tile.ptr<f16>, %table: !tile.desc<1, i32>,
                 %lb: i32, %ub: i32) -> (tensor<64x64xf16, #b>, tensor<64x64xf16, #b>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 3 : i32
  %c64 = arith.constant 64 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #b>
  %k = tilegpu.alloc {offset = 0 : i64} : !ring3
  %v = tilegpu.alloc {offset = 24576 : i64} : !ring3
  %o:2 = scf.for %t = %lb to %ub step %c1 iter_args(%ka = %zero, %va = %zero)
      -> (tensor<64x64xf16, #b>, tensor<64x64xf16, #b>) : i32 {
    %page = tile.load_scalar %table[%t] : !tile.desc<1, i32> -> i32
    %row = arith.muli %page, %c256 : i32
    %end = arith.addi %row, %c64 : i32
    %kd = tile.make_desc %kp[%c0], shape[%end, %c64], strides[%c64, %c1]
        : !tile.ptr<f16> -> !tile.desc<2, f16>
    %vd = tile.make_desc %vp[%c0], shape[%end, %c64], strides[%c64, %c1]
        : !tile.ptr<f16> -> !tile.desc<2, f16>
    %it = arith.subi %t, %lb : i32
    %st = arith.remui %it, %c2 : i32
    %tk = tilegpu.async_copy %kd[%row, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring3
    %gk = tilegpu.async_commit %tk
    tilegpu.async_wait %gk {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring3 -> tensor<64x64xf16, #b>
    %tv = tilegpu.async_copy %vd[%row, %c0] into %v[%st] : !tile.desc<2, f16> -> !ring3
    %gv = tilegpu.async_commit %tv
    tilegpu.async_wait %gv {pending = 0 : i32}
    gpu.barrier
    %vb = tilegpu.local_load %v[%st] : !ring3 -> tensor<64x64xf16, #b>
    scf.yield %kb, %vb : tensor<64x64xf16, #b>, tensor<64x64xf16, #b>
  }
  return %o#0, %o#1 : tensor<64x64xf16, #b>, tensor<64x64xf16, #b>
}
