// tilegpu-tma-producer after tilegpu-warp-specialize and tilegpu-producer-once: the producer's
// copies of Q (producer-once's two buffers) and K are marked to go through TMA, a tensor map
// each (tma_map 0 and 1) with as many slots as their `full` rings have stages (2); V's
// descriptor has an inner stride of 2, which TMA's 2-D boxes of contiguous rows cannot read:
// it keeps cp.async. The program gets the records (32 bytes a map, 128-byte aligned past the
// end) and the map images (128 bytes a slot) and the bytes they take. Where the kernel would
// fit twice an SM by shared memory (shared-limit 300000) and by registers (consumers at 104:
// 31,744 a CTA), nothing changes: the maps' global slots are the SM's. With the consumers'
// default registers (232: 64,512 a CTA) one CTA an SM is sure, and this persistent kernel
// takes TMA (REGS).
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once --tilegpu-tma-producer \
// RUN:   | FileCheck %s
// RUN: tessel-opt %s --tilegpu-warp-specialize=consumer-registers=104 --tilegpu-producer-once \
// RUN:   --tilegpu-tma-producer=shared-limit=300000 | FileCheck %s --check-prefix=TWICE
// RUN: tessel-opt %s --tilegpu-warp-specialize --tilegpu-producer-once \
// RUN:   --tilegpu-tma-producer=shared-limit=300000 | FileCheck %s --check-prefix=REGS

// CHECK-LABEL: func.func @persistent
// CHECK-SAME: tilegpu.shared_bytes = 132864 : i64
// CHECK-SAME: tilegpu.tma = {images = 132352 : i64, maps = 2 : i64, records = 132224 : i64, slots = 2 : i64}
// CHECK: consumers {
// CHECK-NOT: tma_map
// CHECK: } producer {
// CHECK: tilegpu.async_copy %{{.*}} {tma_map = 0 : i64} : !tile.desc<2, f16> -> !tilegpu.smem<128x128xf16, stages = 2, swizzle = 128>
// CHECK-NEXT: tilegpu.async_copy_arrive
// CHECK: tilegpu.async_copy %{{.*}} {tma_map = 1 : i64} : !tile.desc<2, f16> -> !tilegpu.smem<64x128xf16
// CHECK-NEXT: tilegpu.async_copy_arrive
// CHECK: tilegpu.async_copy %{{[^{]*}} : !tile.desc<2, f16> -> !tilegpu.smem<64x128xf16
// CHECK-NOT: tma_map

// TWICE-LABEL: func.func @persistent
// TWICE-SAME: tilegpu.shared_bytes = 132128 : i64
// TWICE-NOT: tilegpu.tma
// TWICE-NOT: tma_map

// REGS-LABEL: func.func @persistent
// REGS-SAME: tilegpu.tma = {{{.*}}maps = 2
#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>

func.func @persistent(%qp: !tile.ptr<f16>, %kp: !tile.ptr<f16>, %vp: !tile.ptr<f16>, %n: i32,
                      %tiles: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  %q = tilegpu.alloc {offset = 65536 : i64} : !once
  %zero = arith.constant dense<0.000000e+00> : tensor<128x64xf32, #mma>
  %pid = tile.program_id 0 : i32
  %np = tile.num_programs 0 : i32
  scf.for %t = %pid to %tiles step %np : i32 {
    %row = arith.muli %t, %c64 : i32
    %off = arith.muli %t, %c128 : i32
    %qd = tile.make_desc %qp[%off], shape[%n, %c128], strides[%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %kd = tile.make_desc %kp[%off], shape[%n, %c128], strides[%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %vd = tile.make_desc %vp[%off], shape[%n, %c128], strides[%c128, %c2] : !tile.ptr<f16> -> !tile.desc<2, f16>
    gpu.barrier
    %qt = tilegpu.async_copy %qd[%row, %c0] into %q[%c0] : !tile.desc<2, f16> -> !once
    %qg = tilegpu.async_commit %qt
    tilegpu.async_wait %qg {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %q[%c0] : !once -> tensor<128x128xf16, #a>
    scf.for %j = %c0 to %row step %c64 : i32 {
      %i = arith.divui %j, %c64 : i32
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
