// tilegpu-overlap-consumers on tilegpu-warp-specialize's output: the consumers' attention loop
// runs its first iteration peeled (S_0 and its softmax, no P·V: V_0 neither waited for nor
// released there), then from the second iteration on S_j = Q·K_jᵀ and the previous iteration's
// P·V are issued together as two wgmma groups once K_j and V_{j−1} have landed; K_j is released
// after S_j's wait (pending 1) and V_{j−1} after O's (pending 0), the rescale of O after it.
// The loop carries P, the buffer and the stage of its V block; after it the last P·V is
// drained in a loop of at most one iteration, none where the loop (the peeled iteration
// included) ran none. The producer is not touched. Loops of another shape, and programs whose registers would not fit the
// consumers', are left as they are.
// RUN: tessel-opt %s --split-input-file --allow-unregistered-dialect --tilegpu-overlap-consumers \
// RUN:   | FileCheck %s
// RUN: tessel-opt %s --split-input-file --allow-unregistered-dialect \
// RUN:   --tilegpu-overlap-consumers=late-p=true | FileCheck %s --check-prefix=LATE

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>
!bar = !tilegpu.smem<1xi64, stages = 2, swizzle = 0>

// CHECK-LABEL: func.func @attention
// CHECK: %[[K:.*]] = tilegpu.alloc {offset = 0 : i64
// CHECK: %[[V:.*]] = tilegpu.alloc {offset = 16384 : i64
// CHECK: %[[FULLK:.*]] = tilegpu.alloc {offset = 98304 : i64}
// CHECK: %[[FULLV:.*]] = tilegpu.alloc {offset = 98320 : i64}
// CHECK: %[[EMPTYK:.*]] = tilegpu.alloc {offset = 98336 : i64}
// CHECK: %[[EMPTYV:.*]] = tilegpu.alloc {offset = 98352 : i64}
// The peeled first iteration: a loop of at most one step, S_0 as a plain dot, K released,
// nothing of V; it yields P_0 and its stage.
// CHECK: %[[SECOND:.*]] = arith.addi %[[LB:.*]], %[[STEP:.*]] : i32
// CHECK: %[[UB0:.*]] = arith.minsi %[[SECOND]], %[[N:.*]] : i32
// CHECK: %[[PEEL:.*]]:4 = scf.for %{{.*}} = %[[LB]] to %[[UB0]] step %[[STEP]] iter_args(%{{[^ ]*}} = %{{[^,]*}}, %{{[^ ]*}} = %[[FIRST:[^,]*]],
// CHECK: %[[S0:.*]] = arith.remui
// CHECK: tilegpu.mbarrier_wait %[[FULLK]][%[[S0]]]
// CHECK-NOT: %[[FULLV]]
// CHECK: tile.dot
// CHECK-NOT: tile.dot
// CHECK-NOT: %[[FULLV]]
// CHECK: %[[P0:.*]] = tilegpu.convert_layout
// CHECK-NOT: %[[EMPTYV]]
// CHECK: tilegpu.mbarrier_arrive %[[EMPTYK]][%[[S0]]] :
// CHECK-NEXT: scf.yield %{{.*}}, %{{.*}}, %[[P0]], %[[S0]]
// The loop from the second step on: every iteration has a pending P·V.
// CHECK: %[[LOOP:.*]]:5 = scf.for %{{.*}} = %[[SECOND]] to %[[N]] step %[[STEP]] iter_args(%[[O:.*]] = %[[PEEL]]#0, %[[IT:.*]] = %[[PEEL]]#1, %[[P:.*]] = %[[PEEL]]#2, %[[PVBUF:.*]] = %[[V]], %[[PVS:.*]] = %[[PEEL]]#3)
// CHECK: %[[S:.*]] = arith.remui %[[IT]]
// CHECK: tilegpu.mbarrier_wait %[[FULLK]][%[[S]]], %[[PHASE:[^ ]*]] :
// CHECK: %[[PREV:.*]] = arith.subi %[[IT]]
// CHECK: %[[PS:.*]] = arith.remui %[[PREV]]
// CHECK: tilegpu.mbarrier_wait %[[FULLV]][%[[PS]]], %{{[^ ]*}} :
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: %[[SW:.*]] = tilegpu.wgmma %{{.*}}, %[[K]][%[[S]]], %{{.*}} {transpose_b}
// CHECK-NEXT: %[[PV:.*]] = tilegpu.wgmma %[[P]], %[[PVBUF]][%[[PVS]]], %[[O]] :
// CHECK-NEXT: %[[SD:.*]] = tilegpu.wgmma_wait %[[SW]] {pending = 1 : i32}
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTYK]][%[[S]]] :
// CHECK: math.exp2 %[[SD]]
// CHECK: %[[PJ:.*]] = tilegpu.convert_layout
// CHECK-NEXT: %[[OW:.*]]:2 = tilegpu.wgmma_wait %[[PV]], %[[PJ]] {pending = 0 : i32}
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTYV]][%[[PS]]] :
// CHECK-NEXT: %[[FO:.*]] = arith.mulf %[[OW]]#0, %{{.*}}
// CHECK-NOT: tile.dot
// CHECK-NOT: tilegpu.mbarrier_arrive
// CHECK: scf.yield %[[FO]], %{{.*}}, %[[OW]]#1, %[[V]], %[[S]]
// The drain: V_last, the last P·V and its release, in a loop of one iteration where the loop
// ran (the peeled iteration included), of none where it did not: then no P·V is issued and O
// is kept as it was.
// CHECK: %[[RAN:.*]] = arith.cmpi ne, %[[LOOP]]#1, %[[FIRST]]
// CHECK: %[[TRIPS:.*]] = arith.select %[[RAN]], %[[ONE:.*]], %[[ZERO:.*]] : i32
// CHECK: %[[DRAIN:.*]] = scf.for %{{.*}} = %[[ZERO]] to %[[TRIPS]] step %[[ONE]] iter_args(%[[DO:.*]] = %[[LOOP]]#0)
// CHECK: tilegpu.mbarrier_wait %[[FULLV]][%[[LS:.*]]], %{{[^ ]*}} :
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: %[[LAST:.*]] = tilegpu.wgmma %[[LOOP]]#2, %[[LOOP]]#3[%[[LOOP]]#4], %[[DO]]
// CHECK-NEXT: %[[LW:.*]] = tilegpu.wgmma_wait %[[LAST]] {pending = 0 : i32}
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTYV]][%[[LS]]] :
// CHECK-NEXT: scf.yield %[[LW]]
// CHECK: "test.use"(%[[DRAIN]])
// The producer is unchanged: K, then V, each behind its empty barrier.
// CHECK: } producer {
// CHECK: tilegpu.mbarrier_wait %[[EMPTYK]]
// CHECK: tilegpu.mbarrier_wait %[[EMPTYV]]
func.func @attention(%q: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %vd: !tile.desc<2, f16>,
                     %n: i32, %first: i32) attributes {tilegpu.shared_bytes = 98368 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %qs = tilegpu.alloc {offset = 65536 : i64} : !once
  %fullk = tilegpu.alloc {offset = 98304 : i64} : !bar
  %fullv = tilegpu.alloc {offset = 98320 : i64} : !bar
  %emptyk = tilegpu.alloc {offset = 98336 : i64} : !bar
  %emptyv = tilegpu.alloc {offset = 98352 : i64} : !bar
  tilegpu.mbarrier_init %fullk count 128 : !bar
  tilegpu.mbarrier_init %fullv count 128 : !bar
  tilegpu.mbarrier_init %emptyk count 256 : !bar
  tilegpu.mbarrier_init %emptyv count 256 : !bar
  gpu.barrier
  tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
    %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
    %o0 = arith.constant dense<0.0> : tensor<128x128xf32, #mma>
    %alpha = arith.constant dense<0.5> : tensor<128x128xf32, #mma>
    %t = tilegpu.async_copy %q[%c0, %c0] into %qs[%c0] : !tile.desc<2, f16> -> !once
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %qs[%c0] : !once -> tensor<128x128xf16, #a>
    %r:2 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %it = %first)
        -> (tensor<128x128xf32, #mma>, i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      tilegpu.mbarrier_wait %fullk[%s], %phase : !bar
      tilegpu.fence_async_shared
      %kt = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %sc = tile.dot %qa, %kt, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %e = math.exp2 %sc : tensor<128x64xf32, #mma>
      %p16 = arith.truncf %e : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %p = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      tilegpu.mbarrier_wait %fullv[%s], %phase : !bar
      tilegpu.fence_async_shared
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
      %fo = arith.mulf %o, %alpha : tensor<128x128xf32, #mma>
      %o2 = tile.dot %p, %vb, %fo : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      %next = arith.addi %it, %c1 : i32
      tilegpu.mbarrier_arrive %emptyk[%s] : !bar
      tilegpu.mbarrier_arrive %emptyv[%s] : !bar
      scf.yield %o2, %next : tensor<128x128xf32, #mma>, i32
    }
    "test.use"(%r#0) : (tensor<128x128xf32, #mma>) -> ()
  } producer {
    %r = scf.for %j = %c0 to %n step %c64 iter_args(%it = %first) -> (i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      %freed = arith.xori %phase, %c1 : i32
      tilegpu.mbarrier_wait %emptyk[%s], %freed : !bar
      %ck = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
      tilegpu.async_copy_arrive %fullk[%s] : !bar
      tilegpu.mbarrier_wait %emptyv[%s], %freed : !bar
      %cv = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      tilegpu.async_copy_arrive %fullv[%s] : !bar
      %nx = arith.addi %it, %c1 : i32
      scf.yield %nx : i32
    }
  }
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>
!bar = !tilegpu.smem<1xi64, stages = 2, swizzle = 0>

// Two loops in a row (a causal kernel's unmasked and diagonal loops): each peels its first
// iteration and drains its own last P·V; the second starts from nothing pending (its own first
// count). Handing the pending P·V over, as tilegpu-overlap-wgmma does, made ptxas serialize the
// wgmmas (C7513).
// CHECK-LABEL: func.func @chain
// CHECK: %[[PEEL1:.*]]:4 = scf.for
// CHECK: %[[L1:.*]]:5 = scf.for
// CHECK: %[[DRAINED:.*]] = scf.for %{{.*}} iter_args(%{{.*}} = %[[L1]]#0) -> (tensor<128x128xf32, #mma>)
// CHECK: %[[PEEL2:.*]]:4 = scf.for %{{.*}} iter_args(%{{.*}} = %[[DRAINED]], %[[IT2:.*]] = %[[L1]]#1,
// CHECK: %[[L2:.*]]:5 = scf.for
// CHECK: arith.cmpi ne, %[[L2]]#1, %[[L1]]#1
// CHECK: scf.for %{{.*}} iter_args(%{{.*}} = %[[L2]]#0) -> (tensor<128x128xf32, #mma>)
// CHECK: } producer {
func.func @chain(%q: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %vd: !tile.desc<2, f16>,
                     %n: i32, %n2: i32, %first: i32) attributes {tilegpu.shared_bytes = 98368 : i64} {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %qs = tilegpu.alloc {offset = 65536 : i64} : !once
  %fullk = tilegpu.alloc {offset = 98304 : i64} : !bar
  %fullv = tilegpu.alloc {offset = 98320 : i64} : !bar
  %emptyk = tilegpu.alloc {offset = 98336 : i64} : !bar
  %emptyv = tilegpu.alloc {offset = 98352 : i64} : !bar
  tilegpu.mbarrier_init %fullk count 128 : !bar
  tilegpu.mbarrier_init %fullv count 128 : !bar
  tilegpu.mbarrier_init %emptyk count 256 : !bar
  tilegpu.mbarrier_init %emptyv count 256 : !bar
  gpu.barrier
  tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
    %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
    %o0 = arith.constant dense<0.0> : tensor<128x128xf32, #mma>
    %alpha = arith.constant dense<0.5> : tensor<128x128xf32, #mma>
    %t = tilegpu.async_copy %q[%c0, %c0] into %qs[%c0] : !tile.desc<2, f16> -> !once
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %qs[%c0] : !once -> tensor<128x128xf16, #a>
    %r:2 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %it = %first)
        -> (tensor<128x128xf32, #mma>, i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      tilegpu.mbarrier_wait %fullk[%s], %phase : !bar
      tilegpu.fence_async_shared
      %kt = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %sc = tile.dot %qa, %kt, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %e = math.exp2 %sc : tensor<128x64xf32, #mma>
      %p16 = arith.truncf %e : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %p = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      tilegpu.mbarrier_wait %fullv[%s], %phase : !bar
      tilegpu.fence_async_shared
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
      %fo = arith.mulf %o, %alpha : tensor<128x128xf32, #mma>
      %o2 = tile.dot %p, %vb, %fo : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      %next = arith.addi %it, %c1 : i32
      tilegpu.mbarrier_arrive %emptyk[%s] : !bar
      tilegpu.mbarrier_arrive %emptyv[%s] : !bar
      scf.yield %o2, %next : tensor<128x128xf32, #mma>, i32
    }
    %r2:2 = scf.for %j = %n to %n2 step %c64 iter_args(%o = %r#0, %it = %r#1)
        -> (tensor<128x128xf32, #mma>, i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      tilegpu.mbarrier_wait %fullk[%s], %phase : !bar
      tilegpu.fence_async_shared
      %kt = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %sc = tile.dot %qa, %kt, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %e = math.exp2 %sc : tensor<128x64xf32, #mma>
      %p16 = arith.truncf %e : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %p = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      tilegpu.mbarrier_wait %fullv[%s], %phase : !bar
      tilegpu.fence_async_shared
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
      %fo = arith.mulf %o, %alpha : tensor<128x128xf32, #mma>
      %o2 = tile.dot %p, %vb, %fo : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      %next = arith.addi %it, %c1 : i32
      tilegpu.mbarrier_arrive %emptyk[%s] : !bar
      tilegpu.mbarrier_arrive %emptyv[%s] : !bar
      scf.yield %o2, %next : tensor<128x128xf32, #mma>, i32
    }
    "test.use"(%r2#0) : (tensor<128x128xf32, #mma>) -> ()
  } producer {
    %r = scf.for %j = %c0 to %n step %c64 iter_args(%it = %first) -> (i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      %freed = arith.xori %phase, %c1 : i32
      tilegpu.mbarrier_wait %emptyk[%s], %freed : !bar
      %ck = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
      tilegpu.async_copy_arrive %fullk[%s] : !bar
      tilegpu.mbarrier_wait %emptyv[%s], %freed : !bar
      %cv = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      tilegpu.async_copy_arrive %fullv[%s] : !bar
      %nx = arith.addi %it, %c1 : i32
      scf.yield %nx : i32
    }
    %r2 = scf.for %j = %n to %n2 step %c64 iter_args(%it = %r) -> (i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      %freed = arith.xori %phase, %c1 : i32
      tilegpu.mbarrier_wait %emptyk[%s], %freed : !bar
      %ck = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
      tilegpu.async_copy_arrive %fullk[%s] : !bar
      tilegpu.mbarrier_wait %emptyv[%s], %freed : !bar
      %cv = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      tilegpu.async_copy_arrive %fullv[%s] : !bar
      %nx = arith.addi %it, %c1 : i32
      scf.yield %nx : i32
    }
  }
  return
}

// -----

// Consumers whose registers would not hold S, O and P besides ~40 others (here 136 a thread:
// 32 + 64 + 16 + 40 = 152) keep their synchronous dots.
#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!bar = !tilegpu.smem<1xi64, stages = 2, swizzle = 0>
// CHECK-LABEL: func.func @few_registers
// CHECK-NOT: tilegpu.wgmma
// CHECK: tile.dot
// CHECK: tile.dot
// CHECK-NOT: tilegpu.wgmma
// With late-p they fit (32 + 64 + 16 + 32 = 144) once the producer, which copies by cp.async,
// keeps 24 registers and gives the consumers the rest of the roles' 39,936 (144 a thread): the
// overlapped loop waits for the previous P·V tying S_j's float values (not P_j), and makes P_j
// from them after the wait, so that P_{j−1} and P_j are never live together.
// LATE-LABEL: func.func @few_registers
// LATE: tilegpu.warp_specialize producer_warps 4 registers 24, 144 consumers {
// LATE: %[[S:.*]] = tilegpu.wgmma_wait %{{.*}} {pending = 1 : i32} : tensor<128x64xf32, #mma>
// LATE: %[[W:.*]]:2 = tilegpu.wgmma_wait %{{.*}}, %[[S]] {pending = 0 : i32} : tensor<128x128xf32, #mma>, tensor<128x64xf32, #mma>
// LATE-NEXT: %[[P16:.*]] = arith.truncf %[[W]]#1
// LATE-NEXT: %[[P:.*]] = tilegpu.convert_layout %[[P16]]
// LATE: scf.yield %{{.*}}, %{{.*}}, %[[P]],
func.func @few_registers(%qa: tensor<128x128xf16, #a>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %fullk = tilegpu.alloc {offset = 98304 : i64} : !bar
  %fullv = tilegpu.alloc {offset = 98320 : i64} : !bar
  %emptyk = tilegpu.alloc {offset = 98336 : i64} : !bar
  %emptyv = tilegpu.alloc {offset = 98352 : i64} : !bar
  tilegpu.warp_specialize producer_warps 4 registers 40, 136 consumers {
    %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
    %o0 = arith.constant dense<0.0> : tensor<128x128xf32, #mma>
    %r:2 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %it = %c0)
        -> (tensor<128x128xf32, #mma>, i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      tilegpu.mbarrier_wait %fullk[%s], %phase : !bar
      tilegpu.fence_async_shared
      %kt = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %sc = tile.dot %qa, %kt, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %p16 = arith.truncf %sc : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %p = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      tilegpu.mbarrier_wait %fullv[%s], %phase : !bar
      tilegpu.fence_async_shared
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
      %o2 = tile.dot %p, %vb, %o : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      %next = arith.addi %it, %c1 : i32
      tilegpu.mbarrier_arrive %emptyk[%s] : !bar
      tilegpu.mbarrier_arrive %emptyv[%s] : !bar
      scf.yield %o2, %next : tensor<128x128xf32, #mma>, i32
    }
    "test.use"(%r#0) : (tensor<128x128xf32, #mma>) -> ()
  } producer {
  }
  return
}

// -----

// A loop of another shape (one dot: the backward's dQ += dS·K) is left as it is.
#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!bar = !tilegpu.smem<1xi64, stages = 2, swizzle = 0>
// CHECK-LABEL: func.func @one_dot
// CHECK-NOT: tilegpu.wgmma
// CHECK: tile.dot
// CHECK: tilegpu.mbarrier_arrive %{{.*}}[%{{.*}}] :
// CHECK-NOT: tilegpu.wgmma
func.func @one_dot(%ds: tensor<128x64xf16, #a>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %fullk = tilegpu.alloc {offset = 98304 : i64} : !bar
  %emptyk = tilegpu.alloc {offset = 98336 : i64} : !bar
  tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
    %o0 = arith.constant dense<0.0> : tensor<128x128xf32, #mma>
    %r:2 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %it = %c0)
        -> (tensor<128x128xf32, #mma>, i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      tilegpu.mbarrier_wait %fullk[%s], %phase : !bar
      tilegpu.fence_async_shared
      %kb = tilegpu.local_load %k[%s] : !ring -> tensor<64x128xf16, #b>
      %o2 = tile.dot %ds, %kb, %o : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      %next = arith.addi %it, %c1 : i32
      tilegpu.mbarrier_arrive %emptyk[%s] : !bar
      scf.yield %o2, %next : tensor<128x128xf32, #mma>, i32
    }
    "test.use"(%r#0) : (tensor<128x128xf32, #mma>) -> ()
  } producer {
  }
  return
}
