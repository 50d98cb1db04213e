// tilegpu-warp-specialize on tilegpu-allocate-shared's output: the loop's copies move to a
// producer warpgroup that runs the same iterations, waits for a stage's `empty` barrier, copies
// into it and arrives on `full[i]` as each block lands; the consumers' loop carries the
// iteration count, waits for `full[i]` where each load waited for its copy (no CTA barrier),
// reads the stage of that count and arrives on `empty[i]` at the end of the body. Q, which the
// ring reused, gets bytes of its own. Programs it does not apply to are left as they are.
// RUN: tessel-opt %s --split-input-file --allow-unregistered-dialect --tilegpu-warp-specialize \
// RUN:   | FileCheck %s

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>

// Q's bytes (32768..65535) were the ring's stage 1: they move past the ring (65536), then the
// barriers: full for K and V (a producer thread each), empty for K and V (a consumer thread
// each).
// CHECK-LABEL: func.func @attention_loop
// CHECK-SAME: tilegpu.shared_bytes = 98368
// CHECK: %[[K:.*]] = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64}
// CHECK: %[[V:.*]] = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64}
// CHECK: %[[Q:.*]] = tilegpu.alloc {offset = 65536 : i64}
// CHECK: %[[FULLK:.*]] = tilegpu.alloc {offset = 98304 : i64} : !tilegpu.smem<1xi64, stages = 2, swizzle = 0>
// CHECK: %[[FULLV:.*]] = tilegpu.alloc {offset = 98320 : i64}
// CHECK: %[[EMPTYK:.*]] = tilegpu.alloc {offset = 98336 : i64}
// CHECK: %[[EMPTYV:.*]] = tilegpu.alloc {offset = 98352 : i64}
// CHECK: tilegpu.mbarrier_init %[[FULLK]] count 128
// CHECK: tilegpu.mbarrier_init %[[FULLV]] count 128
// CHECK: tilegpu.mbarrier_init %[[EMPTYK]] count 256
// CHECK: tilegpu.mbarrier_init %[[EMPTYV]] count 256
// CHECK-NEXT: gpu.barrier
// One CTA an SM (96 KiB): 168 registers a thread at launch, 232 for a consumer.
// CHECK-NEXT: tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
// The consumers still load Q themselves; then the loop, counting iterations.
// CHECK: tilegpu.async_copy %{{.*}} into %[[Q]]
// CHECK: gpu.barrier
// CHECK: scf.for %{{.*}} iter_args(%[[IT:.*]] = %{{.*}}) -> (i32)
// CHECK: %[[S:.*]] = arith.remui %[[IT]]
// CHECK: %[[LAP:.*]] = arith.divui %[[IT]]
// CHECK: %[[PHASE:.*]] = arith.andi %[[LAP]]
// CHECK-NOT: gpu.barrier
// CHECK: tilegpu.mbarrier_wait %[[FULLK]][%[[S]]], %[[PHASE]]
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: tilegpu.local_load %[[K]][%[[S]]] {transpose}
// CHECK-NOT: gpu.barrier
// CHECK: tilegpu.mbarrier_wait %[[FULLV]][%[[S]]], %[[PHASE]]
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: tilegpu.local_load %[[V]][%[[S]]]
// CHECK: %[[NEXT:.*]] = arith.addi %[[IT]]
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTYK]][%[[S]]]
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTYV]][%[[S]]]
// CHECK-NEXT: scf.yield %[[NEXT]] : i32
// The producer: the same iterations, the stage freed by the consumers' previous lap (parity
// flipped: the first lap passes at once), K then V, each followed by its arrival.
// CHECK: } producer {
// CHECK: scf.for %[[J:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[PIT:.*]] = %{{.*}}) -> (i32)
// CHECK: %[[PS:.*]] = arith.remui %[[PIT]]
// CHECK: %[[FREED:.*]] = arith.xori
// CHECK-NEXT: tilegpu.mbarrier_wait %[[EMPTYK]][%[[PS]]], %[[FREED]]
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[J]], %{{.*}}] into %[[K]][%[[PS]]]
// CHECK-NEXT: tilegpu.async_copy_arrive %[[FULLK]][%[[PS]]]
// CHECK-NEXT: tilegpu.mbarrier_wait %[[EMPTYV]][%[[PS]]], %[[FREED]]
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[J]], %{{.*}}] into %[[V]][%[[PS]]]
// CHECK-NEXT: tilegpu.async_copy_arrive %[[FULLV]][%[[PS]]]
// CHECK-NOT: tilegpu.async_commit
// CHECK: return
func.func @attention_loop(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                          %vd: !tile.desc<2, f16>, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %q = tilegpu.alloc {offset = 32768 : i64} : !once
  %zero = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %qt = tilegpu.async_copy %qd[%c0, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
  %qg = tilegpu.async_commit %qt
  tilegpu.async_wait %qg {pending = 0 : i32}
  gpu.barrier
  %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x128xf16, #a>
  scf.for %j = %c0 to %ub step %c64 : i32 {
    %n = arith.subi %j, %c0 : i32
    %i = arith.divui %n, %c64 : i32
    %s = arith.remui %i, %c2 : i32
    %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
    %kg = tilegpu.async_commit %kt
    tilegpu.async_wait %kg {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
    %st = tile.dot %qa, %kb, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
    %vt = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
    %vg = tilegpu.async_commit %vt
    tilegpu.async_wait %vg {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
  }
  return
}

// -----

// d256: rows of 512 bytes. Their chunks' addresses take the producer past 40 registers (ptxas
// spilled 12 bytes in the one-loop kernel): without a tile loop it keeps 48, then what the
// consumers leave of the launch's 168 a thread (224 a consumer): 56.
#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x256xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x256xf16, stages = 1, swizzle = 128>

// CHECK-LABEL: func.func @wide_rows
// CHECK: tilegpu.warp_specialize producer_warps 4 registers 56, 224 consumers {
func.func @wide_rows(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                     %vd: !tile.desc<2, f16>, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 65536 : i64} : !ring
  %v = tilegpu.alloc {offset = 32768 : i64, stride = 65536 : i64} : !ring
  %q = tilegpu.alloc {offset = 131072 : i64} : !once
  %zero = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %qt = tilegpu.async_copy %qd[%c0, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
  %qg = tilegpu.async_commit %qt
  tilegpu.async_wait %qg {pending = 0 : i32}
  gpu.barrier
  %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x256xf16, #a>
  scf.for %j = %c0 to %ub step %c64 : i32 {
    %n = arith.subi %j, %c0 : i32
    %i = arith.divui %n, %c64 : i32
    %s = arith.remui %i, %c2 : i32
    %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
    %kg = tilegpu.async_commit %kt
    tilegpu.async_wait %kg {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<256x64xf16, #b>
    %st = tile.dot %qa, %kb, %zero : tensor<128x256xf16, #a>, tensor<256x64xf16, #b> -> tensor<128x64xf32, #mma>
    %vt = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
    %vg = tilegpu.async_commit %vt
    tilegpu.async_wait %vg {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x256xf16, #b>
  }
  return
}

// -----

// d256 in a persistent kernel: its consumers carry the tile loop and keep 232 (at 224 ptxas
// spilled in the causal kernel's), the producer 40.
#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x256xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x256xf16, stages = 1, swizzle = 128>

// CHECK-LABEL: func.func @wide_rows_persistent
// CHECK: tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
func.func @wide_rows_persistent(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                                %vd: !tile.desc<2, f16>, %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 65536 : i64} : !ring
  %v = tilegpu.alloc {offset = 32768 : i64, stride = 65536 : i64} : !ring
  %q = tilegpu.alloc {offset = 131072 : i64} : !once
  %zero = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %pid = tile.program_id 0 : i32
  %np = tile.num_programs 0 : i32
  scf.for %t = %pid to %tiles step %np : i32 {
    %row = arith.muli %t, %c64 : i32
    %ub = arith.muli %t, %c64 : i32
    gpu.barrier
    %qt = tilegpu.async_copy %qd[%row, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
    %qg = tilegpu.async_commit %qt
    tilegpu.async_wait %qg {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x256xf16, #a>
    scf.for %j = %c0 to %ub step %c64 : i32 {
      %n = arith.subi %j, %c0 : i32
      %i = arith.divui %n, %c64 : i32
      %s = arith.remui %i, %c2 : i32
      %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
      %kg = tilegpu.async_commit %kt
      tilegpu.async_wait %kg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<256x64xf16, #b>
      %st = tile.dot %qa, %kb, %zero : tensor<128x256xf16, #a>, tensor<256x64xf16, #b> -> tensor<128x64xf32, #mma>
      %vt = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      %vg = tilegpu.async_commit %vt
      tilegpu.async_wait %vg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x256xf16, #b>
    }
  } {tilegpu.tile_loop}
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>

// A persistent kernel: its tile loop (tilegpu.tile_loop) walks tiles pid, pid + P, ... The
// producer walks the same tiles, its iteration count carried from one tile to the next, so
// the ring's phases go on and it copies the next tile's blocks while the consumers finish this
// one; the consumers' tile loop carries their count the same way. The stream's bound, read
// per tile, is computed again by the producer inside its tile loop.
// CHECK-LABEL: func.func @persistent
// CHECK: %[[K:.*]] = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64}
// CHECK: %[[EMPTYK:.*]] = tilegpu.alloc {offset = 98336 : i64}
// CHECK: tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
// CHECK: %[[ZERO:.*]] = arith.constant 0 : i32
// CHECK: %[[TILES:.*]] = scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[CT:.*]] = %[[ZERO]]) -> (i32)
// CHECK: gpu.barrier
// CHECK-NEXT: tilegpu.async_copy %{{.*}} into %{{.*}}[%{{.*}}]
// CHECK: %[[END:.*]] = scf.for %{{.*}} iter_args(%[[IT:.*]] = %[[CT]]) -> (i32)
// CHECK: tilegpu.mbarrier_wait
// CHECK: scf.yield %[[END]] : i32
// CHECK-NEXT: } {tilegpu.tile_loop}
// CHECK: } producer {
// CHECK: %[[PID:.*]] = tile.program_id 0
// CHECK: %[[NP:.*]] = tile.num_programs 0
// CHECK: %[[PTILES:.*]] = scf.for %[[PT:.*]] = %[[PID]] to %{{.*}} step %[[NP]] iter_args(%[[PCT:.*]] = %{{.*}}) -> (i32)
// CHECK: %[[UB:.*]] = arith.muli %[[PT]]
// CHECK: %[[PEND:.*]] = scf.for %[[J:.*]] = %{{.*}} to %[[UB]] step %{{.*}} iter_args(%[[PIT:.*]] = %[[PCT]]) -> (i32)
// CHECK: %[[PS:.*]] = arith.remui %[[PIT]]
// CHECK: tilegpu.mbarrier_wait %[[EMPTYK]][%[[PS]]]
// CHECK-NEXT: tilegpu.async_copy %{{.*}}[%[[J]], %{{.*}}] into %[[K]][%[[PS]]]
// CHECK: scf.yield %[[PEND]] : i32
// CHECK-NEXT: } {tilegpu.tile_loop}
// CHECK: return
func.func @persistent(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                      %vd: !tile.desc<2, f16>, %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %q = tilegpu.alloc {offset = 32768 : i64} : !once
  %zero = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %pid = tile.program_id 0 : i32
  %np = tile.num_programs 0 : i32
  scf.for %t = %pid to %tiles step %np : i32 {
    %row = arith.muli %t, %c64 : i32
    %ub = arith.muli %t, %c64 : i32
    gpu.barrier
    %qt = tilegpu.async_copy %qd[%row, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
    %qg = tilegpu.async_commit %qt
    tilegpu.async_wait %qg {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x128xf16, #a>
    scf.for %j = %c0 to %ub step %c64 : i32 {
      %n = arith.subi %j, %c0 : i32
      %i = arith.divui %n, %c64 : i32
      %s = arith.remui %i, %c2 : i32
      %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
      %kg = tilegpu.async_commit %kt
      tilegpu.async_wait %kg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %st = tile.dot %qa, %kb, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %vt = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      %vg = tilegpu.async_commit %vt
      tilegpu.async_wait %vg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
    }
  } {tilegpu.tile_loop}
  return
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>

// mma.sync layouts: no warpgroups to specialize, the program as it was.
// CHECK-LABEL: func.func @mma_sync
// CHECK-NOT: warp_specialize
// CHECK: tilegpu.async_wait
// CHECK-NEXT: gpu.barrier
func.func @mma_sync(%kd: !tile.desc<2, f16>, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  scf.for %j = %c0 to %ub step %c64 : i32 {
    %i = arith.divui %j, %c64 : i32
    %s = arith.remui %i, %c2 : i32
    %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
    %kg = tilegpu.async_commit %kt
    tilegpu.async_wait %kg {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
  }
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>

// A loop already pipelined (a wait that leaves a group in flight): another schedule owns the
// ring, the program as it was.
// CHECK-LABEL: func.func @pipelined
// CHECK-NOT: warp_specialize
// CHECK: tilegpu.async_wait %{{.*}} {pending = 1 : i32}
func.func @pipelined(%kd: !tile.desc<2, f16>, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %kt0 = tilegpu.async_copy %kd[%c0, %c0] into %k[%c0] : !tile.desc<2, f16> -> !ring
  %kg0 = tilegpu.async_commit %kt0
  %r:2 = scf.for %j = %c0 to %ub step %c64 iter_args(%s = %c0, %g = %kg0)
      -> (i32, !tilegpu.token) : i32 {
    %next = arith.addi %j, %c64 : i32
    %s1 = arith.addi %s, %c1 : i32
    %sn = arith.remui %s1, %c2 : i32
    %t = tilegpu.async_copy %kd[%next, %c0] into %k[%sn] : !tile.desc<2, f16> -> !ring
    %gn = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 1 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
    scf.yield %sn, %gn : i32, !tilegpu.token
  }
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>

// A bound the producer cannot compute (made by an op it may not run again): the program as
// it was, left to the pipelined schedule.
// CHECK-LABEL: func.func @opaque_bound
// CHECK-NOT: warp_specialize
// CHECK: tilegpu.async_wait %{{.*}} {pending = 0 : i32}
// CHECK-NEXT: gpu.barrier
func.func @opaque_bound(%kd: !tile.desc<2, f16>) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %ub = "test.opaque"() : () -> i32
  scf.for %j = %c0 to %ub step %c64 : i32 {
    %i = arith.divui %j, %c64 : i32
    %s = arith.remui %i, %c2 : i32
    %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
    %kg = tilegpu.async_commit %kt
    tilegpu.async_wait %kg {pending = 0 : i32}
    gpu.barrier
    %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
  }
  return
}
