// tilegpu-overlap-consumers with O's rescale in tile-online-softmax's form, O·broadcast(
// expand_dims(α)). With rescale-under-s the loop carries α's row vector, 1 into its first
// iteration, and each iteration rescales O by the previous α between the S group and the P·V
// group that reads it, so the multiplies issue while S's wgmma runs; the O yielded is the
// waited one, unscaled, and the drain scales it by the last α before its P·V. Without it (the
// default), O·α is made after O's wait and yielded.
// RUN: tessel-opt %s --allow-unregistered-dialect --tilegpu-overlap-consumers=rescale-under-s=true \
// RUN:   | FileCheck %s
// RUN: tessel-opt %s --allow-unregistered-dialect --tilegpu-overlap-consumers \
// RUN:   | FileCheck %s --check-prefix=AFTER
// tilegpu-pingpong after it: the warpgroup's turn spans the rescale between the two groups.
// RUN: tessel-opt %s --allow-unregistered-dialect --tilegpu-overlap-consumers=rescale-under-s=true \
// RUN:   --tilegpu-pingpong | FileCheck %s --check-prefix=TURN

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
#row = #tilegpu.slice<dim = 1, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
!once = !tilegpu.smem<128x128xf16, stages = 1, swizzle = 128>
!bar = !tilegpu.smem<1xi64, stages = 2, swizzle = 0>

// CHECK-LABEL: func.func @attention
// The peel yields O·α as it was written; the loop starts from α = 1.
// CHECK: %[[PEEL:.*]]:5 = scf.for
// CHECK: %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<128xf32, #row>
// CHECK: %[[LOOP:.*]]:7 = scf.for {{.*}} iter_args(%[[O:[^ ]*]] = %[[PEEL]]#0, {{.*}}, %[[A:[^ ]*]] = %[[ONE]])
// CHECK: %[[SW:.*]] = tilegpu.wgmma %{{.*}}, %{{.*}} {transpose_b}
// CHECK-NEXT: %[[AE:.*]] = tile.expand_dims %[[A]] axis 1
// CHECK-NEXT: %[[AB:.*]] = tile.broadcast %[[AE]]
// CHECK-NEXT: %[[OS:.*]] = arith.mulf %[[O]], %[[AB]]
// CHECK-NEXT: %[[PV:.*]] = tilegpu.wgmma %{{.*}}, %{{.*}}, %[[OS]] :
// CHECK-NEXT: tilegpu.wgmma_wait %[[SW]] {pending = 1 : i32}
// CHECK: %[[ALPHA:.*]] = math.exp2 %{{.*}} : tensor<128xf32
// CHECK: %[[OW:.*]]:2 = tilegpu.wgmma_wait %[[PV]], %{{.*}} {pending = 0 : i32}
// CHECK-NOT: arith.mulf %[[OW]]#0
// CHECK: scf.yield %[[OW]]#0, {{.*}}, %[[ALPHA]] :
// The drain: the last α before the last P·V.
// CHECK: scf.for %{{.*}} iter_args(%[[DO:.*]] = %[[LOOP]]#0)
// CHECK: tilegpu.fence_async_shared
// CHECK-NEXT: %[[LE:.*]] = tile.expand_dims %[[LOOP]]#6 axis 1
// CHECK-NEXT: %[[LB:.*]] = tile.broadcast %[[LE]]
// CHECK-NEXT: %[[LS:.*]] = arith.mulf %[[DO]], %[[LB]]
// CHECK-NEXT: tilegpu.wgmma %{{.*}}, %{{.*}}, %[[LS]] :
// CHECK: } producer {

// TURN-LABEL: func.func @attention
// TURN: scf.for
// TURN: scf.for
// TURN: tilegpu.turn_wait
// TURN-NEXT: tilegpu.wgmma %{{.*}} {transpose_b}
// TURN-NEXT: tile.expand_dims
// TURN-NEXT: tile.broadcast
// TURN-NEXT: arith.mulf
// TURN-NEXT: tilegpu.wgmma
// TURN-NEXT: tilegpu.turn_pass
// TURN-NEXT: tilegpu.wgmma_wait %{{.*}} {pending = 1 : i32}

// AFTER-LABEL: func.func @attention
// AFTER: %[[LOOP:.*]]:6 = scf.for
// AFTER: %[[PV:.*]] = tilegpu.wgmma %{{.*}}, %{{.*}}, %{{[^ ]*}} :
// AFTER: %[[OW:.*]]:2 = tilegpu.wgmma_wait %[[PV]], %{{.*}} {pending = 0 : i32}
// AFTER: %[[FO:.*]] = arith.mulf %[[OW]]#0, %{{.*}}
// AFTER: scf.yield %[[FO]],
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
    %ninf = arith.constant dense<0xFF800000> : tensor<128xf32, #row>
    %t = tilegpu.async_copy %q[%c0, %c0] into %qs[%c0] : !tile.desc<2, f16> -> !once
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    gpu.barrier
    %qa = tilegpu.local_load %qs[%c0] : !once -> tensor<128x128xf16, #a>
    %r:3 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %m = %ninf, %it = %first)
        -> (tensor<128x128xf32, #mma>, tensor<128xf32, #row>, i32) : i32 {
      %s = arith.remui %it, %c2 : i32
      %lap = arith.divui %it, %c2 : i32
      %phase = arith.andi %lap, %c1 : i32
      tilegpu.mbarrier_wait %fullk[%s], %phase : !bar
      tilegpu.fence_async_shared
      %kt = tilegpu.local_load %k[%s] {transpose} : !ring -> tensor<128x64xf16, #b>
      %sc = tile.dot %qa, %kt, %zero : tensor<128x128xf16, #a>, tensor<128x64xf16, #b> -> tensor<128x64xf32, #mma>
      %bm = tile.reduce max %sc axis 1 : tensor<128x64xf32, #mma> -> tensor<128xf32, #row>
      %mn = arith.maximumf %m, %bm : tensor<128xf32, #row>
      %dm = arith.subf %m, %mn : tensor<128xf32, #row>
      %alpha = math.exp2 %dm : tensor<128xf32, #row>
      %mn2 = tile.expand_dims %mn axis 1 : tensor<128xf32, #row> -> tensor<128x1xf32, #row>
      %mnb = tile.broadcast %mn2 : tensor<128x1xf32, #row> -> tensor<128x64xf32, #mma>
      %x = arith.subf %sc, %mnb : tensor<128x64xf32, #mma>
      %e = math.exp2 %x : tensor<128x64xf32, #mma>
      %p16 = arith.truncf %e : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %p = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      tilegpu.mbarrier_wait %fullv[%s], %phase : !bar
      tilegpu.fence_async_shared
      %vb = tilegpu.local_load %v[%s] : !ring -> tensor<64x128xf16, #b>
      %a2 = tile.expand_dims %alpha axis 1 : tensor<128xf32, #row> -> tensor<128x1xf32, #row>
      %ab = tile.broadcast %a2 : tensor<128x1xf32, #row> -> tensor<128x128xf32, #mma>
      %fo = arith.mulf %o, %ab : tensor<128x128xf32, #mma>
      %o2 = tile.dot %p, %vb, %fo : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
      %next = arith.addi %it, %c1 : i32
      tilegpu.mbarrier_arrive %emptyk[%s] : !bar
      tilegpu.mbarrier_arrive %emptyv[%s] : !bar
      scf.yield %o2, %mn, %next : tensor<128x128xf32, #mma>, tensor<128xf32, #row>, i32
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
