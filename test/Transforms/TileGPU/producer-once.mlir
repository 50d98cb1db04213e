// tilegpu-producer-once after tilegpu-warp-specialize: the block the consumers load once a
// tile (Q) is copied by the producer too, at the start of each of its tiles once the consumers
// are past their last read of its buffer (`once_empty`, parity flipped: the first laps pass at
// once), arriving on `once_full` as it lands; the consumers wait for `once_full` where they
// waited for their own copy, without CTA barriers, and arrive on `once_empty` after the last op
// that reads the buffer or a value loaded from it (the lowering may read a dot's A operand from
// shared memory at the dot). Within the shared-memory limit Q gets a second buffer past the
// end (1024-byte aligned): tile i uses buffer i mod 2 and lap (i / 2) mod 2 of two-stage
// barriers. Under a smaller limit, one buffer and one-stage barriers, lap i mod 2.
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once | FileCheck %s
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once=shared-limit=100000 \
// RUN:   | FileCheck %s --check-prefix=ONE

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>

// CHECK-LABEL: func.func @persistent
// CHECK-SAME: tilegpu.shared_bytes = 132128
// CHECK: %[[Q:.*]] = tilegpu.alloc {offset = 65536 : i64, stride = 33792 : i64} : !tilegpu.smem<128x128xf16, stages = 2, swizzle = 128>
// CHECK: %[[FULL:.*]] = tilegpu.alloc {offset = 132096 : i64} : !tilegpu.smem<1xi64, stages = 2, swizzle = 0>
// CHECK-NEXT: tilegpu.mbarrier_init %[[FULL]] count 128
// CHECK-NEXT: %[[EMPTY:.*]] = tilegpu.alloc {offset = 132112 : i64}
// CHECK-NEXT: tilegpu.mbarrier_init %[[EMPTY]] count 256
// CHECK-NEXT: gpu.barrier
// CHECK: consumers {
// CHECK: scf.for %[[T:.*]] = %[[LB:[^ ]*]] to %{{.*}} step %[[STEP:[^ ]*]] iter_args
// CHECK-NOT: gpu.barrier
// CHECK-NOT: tilegpu.async_copy
// CHECK: %[[D:.*]] = arith.subi %[[T]], %[[LB]]
// CHECK-NEXT: %[[I:.*]] = arith.divui %[[D]], %[[STEP]]
// CHECK-NEXT: %[[TWO:.*]] = arith.constant 2
// CHECK-NEXT: arith.constant 1
// CHECK-NEXT: %[[SLOT:.*]] = arith.remui %[[I]], %[[TWO]]
// CHECK-NEXT: %[[HALF:.*]] = arith.divui %[[I]], %[[TWO]]
// CHECK-NEXT: %[[LAP:.*]] = arith.andi %[[HALF]]
// CHECK-NEXT: tilegpu.mbarrier_wait %[[FULL]][%[[SLOT]]], %[[LAP]]
// CHECK-NEXT: tilegpu.local_load %[[Q]][%[[SLOT]]]
// CHECK: tilegpu.mbarrier_arrive
// CHECK: scf.yield %{{.*}} : i32
// CHECK-NEXT: }
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTY]][%[[SLOT]]]
// CHECK: } {tilegpu.tile_loop}
// CHECK: } producer {
// CHECK: scf.for %[[PT:.*]] = %[[PLB:[^ ]*]] to %{{.*}} step %[[PSTEP:[^ ]*]] iter_args
// CHECK: %[[PD:.*]] = arith.subi %[[PT]], %[[PLB]]
// CHECK-NEXT: %[[PI:.*]] = arith.divui %[[PD]], %[[PSTEP]]
// CHECK: %[[PSLOT:.*]] = arith.remui %[[PI]]
// CHECK-NEXT: %[[PHALF:.*]] = arith.divui %[[PI]]
// CHECK-NEXT: %[[PLAP:.*]] = arith.andi %[[PHALF]]
// CHECK: %[[FREED:.*]] = arith.xori %[[PLAP]]
// CHECK-NEXT: tilegpu.mbarrier_wait %[[EMPTY]][%[[PSLOT]]], %[[FREED]]
// CHECK: tilegpu.async_copy %{{.*}} into %[[Q]][%[[PSLOT]]]
// CHECK-NEXT: tilegpu.async_copy_arrive %[[FULL]][%[[PSLOT]]]
// CHECK: scf.for
// CHECK: } {tilegpu.tile_loop}

// ONE-LABEL: func.func @persistent
// ONE-SAME: tilegpu.shared_bytes = 98384
// ONE: %[[Q:.*]] = tilegpu.alloc {offset = 65536 : i64} : !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>
// ONE: %[[FULL:.*]] = tilegpu.alloc {offset = 98368 : i64} : !tilegpu.smem<1xi64, stages = 1, swizzle = 0>
// ONE: %[[EMPTY:.*]] = tilegpu.alloc {offset = 98376 : i64} : !tilegpu.smem<1xi64, stages = 1, swizzle = 0>
// ONE: consumers {
// ONE: %[[I:.*]] = arith.divui
// ONE-NEXT: %[[ONE:.*]] = arith.constant 1
// ONE-NEXT: arith.constant 1
// ONE-NEXT: %[[SLOT:.*]] = arith.remui %[[I]], %[[ONE]]
// ONE-NEXT: %[[LAPS:.*]] = arith.divui %[[I]], %[[ONE]]
// ONE-NEXT: %[[LAP:.*]] = arith.andi %[[LAPS]]
// ONE-NEXT: tilegpu.mbarrier_wait %[[FULL]][%[[SLOT]]], %[[LAP]]
// ONE-NEXT: tilegpu.local_load %[[Q]][%[[SLOT]]]
// ONE: } producer {
// ONE: tilegpu.mbarrier_wait %[[EMPTY]]
// ONE: tilegpu.async_copy %{{.*}} into %[[Q]]
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
    gpu.barrier
    %qt = tilegpu.async_copy %qd[%row, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
    %qg = tilegpu.async_commit %qt
    tilegpu.async_wait %qg {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x128xf16, #a>
    scf.for %j = %c0 to %row step %c64 : i32 {
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

// The first loop reads Q (loaded inside it), the second does not: the consumers free the
// buffer between them.
// CHECK-LABEL: func.func @read_in_loop
// CHECK: %[[Q:.*]] = tilegpu.alloc {offset = 65536 : i64, stride = 33792 : i64}
// CHECK: %[[EMPTY:.*]] = tilegpu.alloc {offset = 132112 : i64}
// CHECK: consumers {
// CHECK: tilegpu.mbarrier_wait
// CHECK-NOT: tilegpu.mbarrier_arrive %[[EMPTY]]
// CHECK: tilegpu.local_load %[[Q]]
// CHECK: scf.yield %{{.*}} : i32
// CHECK-NEXT: }
// CHECK-NEXT: tilegpu.mbarrier_arrive %[[EMPTY]]
// CHECK-NEXT: scf.for
// CHECK-NOT: tilegpu.mbarrier_arrive %[[EMPTY]]
// CHECK: } {tilegpu.tile_loop}
func.func @read_in_loop(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
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
    gpu.barrier
    %qt = tilegpu.async_copy %qd[%row, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
    %qg = tilegpu.async_commit %qt
    tilegpu.async_wait %qg {pending = 0 : i32}
    gpu.barrier
    scf.for %j = %c0 to %row step %c64 : i32 {
      %n = arith.subi %j, %c0 : i32
      %i = arith.divui %n, %c64 : i32
      %s = arith.remui %i, %c2 : i32
      %kt = tilegpu.async_copy %kd[%j, %c0] into %k[%s] : !tile.desc<2, f16> -> !ring
      %kg = tilegpu.async_commit %kt
      tilegpu.async_wait %kg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x128xf16, #a>
      %kb = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %st = tile.dot %qa, %kb, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %vt = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      %vg = tilegpu.async_commit %vt
      tilegpu.async_wait %vg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
    }
    scf.for %j = %c0 to %row step %c64 : i32 {
      %n = arith.subi %j, %c0 : i32
      %i = arith.divui %n, %c64 : i32
      %s = arith.remui %i, %c2 : i32
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
