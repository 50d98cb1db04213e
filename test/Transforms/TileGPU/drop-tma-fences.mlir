// tilegpu-drop-tma-fences on tma-producer.mlir's persistent kernel, after warp-specialize,
// producer-once and tma-producer: K's copies (tma_map 1) are the only ones on K's `full`
// ring, so the consumers' fence after that wait goes; V's descriptor keeps cp.async (inner
// stride 2), so the fence after V's wait stays. Q (tma_map 0) has no fence of the IR's (the
// lowering fences an A block where it decides to read it from shared memory). Where nothing
// is TMA-marked (the kernel would fit twice an SM: prefix TWICE) every fence stays.
// RUN: tessel-opt %S/tma-producer.mlir --tilegpu-warp-specialize --tilegpu-producer-once \
// RUN:   --tilegpu-tma-producer --tilegpu-drop-tma-fences | FileCheck %s
// RUN: tessel-opt %S/tma-producer.mlir --tilegpu-warp-specialize=consumer-registers=104 \
// RUN:   --tilegpu-producer-once --tilegpu-tma-producer=shared-limit=300000 \
// RUN:   --tilegpu-drop-tma-fences | FileCheck %s --check-prefix=TWICE
// RUN: tessel-opt %s --tilegpu-drop-tma-fences | FileCheck %s --check-prefix=GENERIC

// CHECK-LABEL: func.func @persistent
// CHECK: consumers {
// CHECK: tilegpu.mbarrier_wait %[[QFULL:[0-9]+]][
// CHECK-NEXT: tilegpu.local_load
// CHECK: tilegpu.mbarrier_wait %[[KFULL:[0-9]+]][
// CHECK-NEXT: tilegpu.local_load %{{[0-9]+}}[%{{[0-9]+}}] {transpose}
// CHECK: tilegpu.mbarrier_wait %[[VFULL:[0-9]+]][
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: tilegpu.local_load
// CHECK: } producer {
// CHECK: tilegpu.async_copy {{.*}}{tma_map = 0 : i64}
// CHECK-NEXT: tilegpu.async_copy_arrive %[[QFULL]][
// CHECK: tilegpu.async_copy {{.*}}{tma_map = 1 : i64}
// CHECK-NEXT: tilegpu.async_copy_arrive %[[KFULL]][
// CHECK: tilegpu.async_copy
// CHECK-NOT: tma_map
// CHECK-NEXT: tilegpu.async_copy_arrive %[[VFULL]][

// TWICE-LABEL: func.func @persistent
// TWICE: tilegpu.mbarrier_wait
// TWICE: tilegpu.mbarrier_wait
// TWICE-NEXT: tilegpu.fence_async_shared
// TWICE: tilegpu.mbarrier_wait
// TWICE-NEXT: tilegpu.fence_async_shared

// A ring that TMA fills but whose bytes a cp.async copy without the ring also writes (a block
// laid over K's second stage): the generic write needs the fence after K's wait too.
// GENERIC-LABEL: func.func @overlaid
// GENERIC: tilegpu.mbarrier_wait
// GENERIC-NEXT: tilegpu.fence_async_shared
// A ring that only TMA fills, at bytes nothing else writes: the fence goes.
// GENERIC-LABEL: func.func @apart
// GENERIC: tilegpu.mbarrier_wait
// GENERIC-NOT: tilegpu.fence_async_shared
// GENERIC: tilegpu.local_load

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>
!bars = !tilegpu.smem<1xi64, stages = 2, swizzle = 0>

func.func @overlaid(%kp: !tile.ptr<f16>, %n: i32, %s: i32, %ph: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %o = tilegpu.alloc {offset = 16384 : i64} : !once
  %full = tilegpu.alloc {offset = 65536 : i64} : !bars
  %kd = tile.make_desc %kp[%c0], shape[%n, %c128], strides[%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tilegpu.async_copy %kd[%c0, %c0] into %k[%s] {tma_map = 0 : i64} : !tile.desc<2, f16> -> !ring
  tilegpu.async_copy_arrive %full[%s] : !bars
  %u = tilegpu.async_copy %kd[%c0, %c0] into %o[%c0] : !tile.desc<2, f16> -> !once
  tilegpu.mbarrier_wait %full[%s], %ph : !bars
  tilegpu.fence_async_shared
  %kb = tilegpu.local_load %k[%s] : !ring -> tensor<64x128xf16, #b>
  return
}

func.func @apart(%kp: !tile.ptr<f16>, %n: i32, %s: i32, %ph: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c128 = arith.constant 128 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %o = tilegpu.alloc {offset = 32768 : i64} : !once
  %full = tilegpu.alloc {offset = 65536 : i64} : !bars
  %kd = tile.make_desc %kp[%c0], shape[%n, %c128], strides[%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tilegpu.async_copy %kd[%c0, %c0] into %k[%s] {tma_map = 0 : i64} : !tile.desc<2, f16> -> !ring
  tilegpu.async_copy_arrive %full[%s] : !bars
  %u = tilegpu.async_copy %kd[%c0, %c0] into %o[%c0] : !tile.desc<2, f16> -> !once
  tilegpu.mbarrier_wait %full[%s], %ph : !bars
  tilegpu.fence_async_shared
  %kb = tilegpu.local_load %k[%s] : !ring -> tensor<64x128xf16, #b>
  return
}
