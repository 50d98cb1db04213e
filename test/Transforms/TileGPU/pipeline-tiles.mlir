// tilegpu-pipeline-tiles: the first S = Q·K₀ᵀ of a persistent program's tile is issued before
// the tile loop (tile pid) and, for tile t + 1, after tile t's last loop, before its epilogue
// (the store): Q(t + 1)'s and K₀'s waits predicated on the tile existing and its first loop
// running, a fence, Q(t + 1)'s stage read, the wgmma left in flight and carried by the tile
// loop. The tile waits for it (pending 0) before its peeled first iteration, which no longer
// waits for, reads or multiplies K₀; after the tile loop a wait drains the last issue (of no
// tile). Overlapped consumers (OVER) already have the peel; synchronous ones (SYNC) get it
// here (the first loop's copy runs one iteration, the loop the rest). Without Q from the
// producer (NOQ), or with one Q buffer (ONE: its next copy waits for this tile's release),
// nothing changes.
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once \
// RUN:   --tilegpu-overlap-consumers --tilegpu-pipeline-tiles | FileCheck %s --check-prefix=OVER
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once --tilegpu-pipeline-tiles \
// RUN:   | FileCheck %s --check-prefix=SYNC
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-overlap-consumers \
// RUN:   --tilegpu-pipeline-tiles | FileCheck %s --check-prefix=NOQ
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once=shared-limit=100000 \
// RUN:   --tilegpu-pipeline-tiles | FileCheck %s --check-prefix=NOQ

// OVER-LABEL: func.func @persistent
// OVER: consumers {
// The first tile's S, before the tile loop.
// OVER: %[[PID:.*]] = tile.program_id 0
// OVER: %[[NP:.*]] = tile.num_programs 0
// OVER: %[[EXISTS0:.*]] = arith.cmpi slt, %[[PID]], %[[TILES:.*]] : i32
// OVER: %[[RUNS0:.*]] = arith.andi %[[EXISTS0]], %{{.*}} : i1
// OVER: tilegpu.mbarrier_wait %[[QFULL:.*]][%[[QS0:.*]]], %{{.*}} if %[[RUNS0]]
// OVER-NEXT: tilegpu.mbarrier_wait %[[KFULL:.*]][%[[KS0:.*]]], %{{.*}} if %[[RUNS0]]
// OVER-NEXT: tilegpu.fence_async_shared
// OVER-NEXT: %[[Q0:.*]] = tilegpu.local_load %[[QBUF:.*]][%[[QS0]]]
// OVER: %[[S0:.*]] = tilegpu.wgmma %[[Q0]], %[[K:.*]][%[[KS0]]], %{{.*}} {transpose_b}
// OVER-NEXT: %{{.*}}:2 = scf.for %[[T:.*]] = %[[PID]] to %[[TILES]] step %[[NP]] iter_args(%[[COUNT:.*]] = %{{.*}}, %[[INFLIGHT:.*]] = %[[S0]])
// The tile's own Q read stays (the loops read it); its S is waited for before the peel.
// OVER: tilegpu.local_load %[[QBUF]]
// OVER: %[[S:.*]] = tilegpu.wgmma_wait %[[INFLIGHT]] {pending = 0 : i32}
// OVER-NEXT: %[[PEEL:.*]]:4 = scf.for {{.*}} iter_args({{.*}}, %[[PC:.*]] = %[[COUNT]], {{.*}})
// OVER-NOT: tilegpu.mbarrier_wait %[[KFULL]]
// OVER-NOT: tilegpu.local_load %[[K]]
// OVER: math.exp2 %[[S]]
// OVER: tilegpu.mbarrier_arrive
// OVER: scf.yield
// The overlapped loop and its drain, then the next tile's S at the count the tile ended with.
// OVER: %[[LOOP:.*]]:5 = scf.for
// OVER: scf.for
// OVER: %[[NEXT:.*]] = arith.addi %[[T]], %[[NP]] : i32
// OVER-NEXT: %[[EXISTS:.*]] = arith.cmpi slt, %[[NEXT]], %[[TILES]] : i32
// OVER: %[[KSN:.*]] = arith.remui %[[LOOP]]#1, %{{.*}} : i32
// OVER: %[[RUNS:.*]] = arith.andi %[[EXISTS]], %{{.*}} : i1
// OVER-NEXT: tilegpu.mbarrier_wait %[[QFULL]][%[[QSN:.*]]], %{{.*}} if %[[RUNS]]
// OVER-NEXT: tilegpu.mbarrier_wait %[[KFULL]][%[[KSN]]], %{{.*}} if %[[RUNS]]
// OVER-NEXT: tilegpu.fence_async_shared
// OVER-NEXT: %[[QN:.*]] = tilegpu.local_load %[[QBUF]][%[[QSN]]]
// OVER: %[[SN:.*]] = tilegpu.wgmma %[[QN]], %[[K]][%[[KSN]]], %{{.*}} {transpose_b}
// OVER-NEXT: tilegpu.mbarrier_arrive
// OVER-NEXT: tile.store
// OVER-NEXT: scf.yield %[[LOOP]]#1, %[[SN]]
// OVER-NEXT: } {tilegpu.tile_loop}
// OVER-NEXT: tilegpu.wgmma_wait {pending = 0 : i32}
// OVER: } producer {

// SYNC-LABEL: func.func @persistent
// SYNC: %[[S0:.*]] = tilegpu.wgmma
// SYNC-NEXT: scf.for %{{.*}} iter_args(%[[COUNT:.*]] = %{{.*}}, %[[INFLIGHT:.*]] = %[[S0]])
// SYNC: %[[S:.*]] = tilegpu.wgmma_wait %[[INFLIGHT]] {pending = 0 : i32}
// The peeled first iteration: P·V but no S of its own; the loop from its second iteration.
// SYNC-NEXT: %[[PEEL:.*]]:2 = scf.for %{{.*}} = %[[LB:.*]] to %{{.*}} step %[[STEP:.*]] iter_args({{.*}}, %{{.*}} = %[[COUNT]])
// SYNC-NOT: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<128x128xf16, #op_a>
// SYNC: math.exp2 %[[S]]
// SYNC: tile.dot %{{.*}} : tensor<128x64xf16, #op_a>, tensor<64x128xf16, #op_b> -> tensor<128x128xf32, #mma>
// SYNC: %[[LOOP:.*]]:2 = scf.for %{{.*}} = %[[SECOND:.*]] to %{{.*}} step %[[STEP]] iter_args(%{{.*}} = %[[PEEL]]#0, %{{.*}} = %[[PEEL]]#1)
// SYNC: tile.dot %{{.*}} : tensor<128x128xf16, #op_a>, tensor<128x64xf16, #op_b> -> tensor<128x64xf32, #mma>
// SYNC: %[[SN:.*]] = tilegpu.wgmma
// SYNC: scf.yield %[[LOOP]]#1, %[[SN]]
// SYNC-NEXT: } {tilegpu.tile_loop}
// SYNC-NEXT: tilegpu.wgmma_wait {pending = 0 : i32}

// NOQ-LABEL: func.func @persistent
// NOQ-NOT: tilegpu.wgmma_wait {pending = 0 : i32}
// NOQ: } {tilegpu.tile_loop}
// NOQ-NOT: tilegpu.wgmma_wait {pending = 0 : i32}
// NOQ: } producer {

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
#row = #tilegpu.slice<dim = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>
func.func @persistent(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                      %vd: !tile.desc<2, f16>, %od: !tile.desc<2, f32>, %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %q = tilegpu.alloc {offset = 65536 : i64} : !once
  %zero = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %o0 = arith.constant dense<0.000000e+00> : tensor<128x128xf32, #mma>
  %alpha = arith.constant dense<5.000000e-01> : tensor<128x128xf32, #mma>
  %pid = tile.program_id 0 : i32
  %np = tile.num_programs 0 : i32
  scf.for %t = %pid to %tiles step %np : i32 {
    %row = arith.muli %t, %c128 : i32
    %nk = arith.addi %row, %c128 : i32
    gpu.barrier
    %qt = tilegpu.async_copy %qd[%row, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
    %qg = tilegpu.async_commit %qt
    tilegpu.async_wait %qg {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x128xf16, #a>
    %o = scf.for %j = %c0 to %nk step %c64 iter_args(%acc = %o0) -> (tensor<128x128xf32, #mma>) : i32 {
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
      %e = math.exp2 %st : tensor<128x64xf32, #mma>
      %p16 = arith.truncf %e : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %p = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      %vt = tilegpu.async_copy %vd[%j, %c0] into %v[%s] : !tile.desc<2, f16> -> !ring
      %vg = tilegpu.async_commit %vt
      tilegpu.async_wait %vg {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
      %fo = arith.mulf %acc, %alpha : tensor<128x128xf32, #mma>
      %o2 = tile.dot %p, %vb, %fo : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      scf.yield %o2 : tensor<128x128xf32, #mma>
    }
    tile.store %od[%row, %c0], %o : !tile.desc<2, f32>, tensor<128x128xf32, #mma>
  } {tilegpu.tile_loop}
  return
}
