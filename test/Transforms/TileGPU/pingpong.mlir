// tilegpu-pingpong on tilegpu-overlap-consumers' output: the two consumer warpgroups take turns
// at the tensor cores. Each loop's pair of wgmma groups (S_j, then the previous P·V) is issued
// after a wait for this warpgroup's turn and followed by passing the turn; the consumers'
// region starts with the second warpgroup's arrival that gives the first the first turn. The
// drain's single wgmma takes no turn; one warpgroup has nobody to take turns with.
// RUN: tessel-opt %s --split-input-file --allow-unregistered-dialect --tilegpu-pingpong \
// RUN:   | FileCheck %s

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
!ring = !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>

// CHECK-LABEL: func.func @overlapped
// CHECK: tilegpu.warp_specialize
// CHECK-NEXT: tilegpu.turn_start
// CHECK: scf.for
// CHECK: tilegpu.fence_async_shared
// CHECK-NEXT: tilegpu.turn_wait
// CHECK-NEXT: tilegpu.wgmma
// CHECK-NEXT: tilegpu.wgmma
// CHECK-NEXT: tilegpu.turn_pass
// CHECK-NEXT: tilegpu.wgmma_wait %{{.*}} {pending = 1 : i32}
// CHECK: scf.yield
// CHECK-NOT: tilegpu.turn_
// CHECK: } producer {
func.func @overlapped(%qa: tensor<128x128xf16, #a>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !ring
  %v = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !ring
  tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
    %zero = arith.constant dense<0.0> : tensor<128x64xf32, #mma>
    %o0 = arith.constant dense<0.0> : tensor<128x128xf32, #mma>
    %p0 = arith.constant dense<0.0> : tensor<128x64xf16, #a>
    %r:2 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %p = %p0)
        -> (tensor<128x128xf32, #mma>, tensor<128x64xf16, #a>) : i32 {
      tilegpu.fence_async_shared
      %s = tilegpu.wgmma %qa, %k[%c0], %zero {transpose_b} : tensor<128x128xf16, #a>, !ring -> tensor<128x64xf32, #mma>
      %pv = tilegpu.wgmma %p, %v[%c0], %o : tensor<128x64xf16, #a>, !ring -> tensor<128x128xf32, #mma>
      %sw = tilegpu.wgmma_wait %s {pending = 1 : i32} : tensor<128x64xf32, #mma>
      %p16 = arith.truncf %sw : tensor<128x64xf32, #mma> to tensor<128x64xf16, #mma>
      %pj = tilegpu.convert_layout %p16 : tensor<128x64xf16, #mma> -> tensor<128x64xf16, #a>
      %ow:2 = tilegpu.wgmma_wait %pv, %pj {pending = 0 : i32} : tensor<128x128xf32, #mma>, tensor<128x64xf16, #a>
      scf.yield %ow#0, %ow#1 : tensor<128x128xf32, #mma>, tensor<128x64xf16, #a>
    }
    %last = tilegpu.wgmma %r#1, %v[%c0], %r#0 : tensor<128x64xf16, #a>, !ring -> tensor<128x128xf32, #mma>
    %lw = tilegpu.wgmma_wait %last {pending = 0 : i32} : tensor<128x128xf32, #mma>
    "test.use"(%lw) : (tensor<128x128xf32, #mma>) -> ()
  } producer {
  }
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
!ring = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>

// CHECK-LABEL: func.func @one_warpgroup
// CHECK-NOT: tilegpu.turn_
func.func @one_warpgroup(%qa: tensor<64x64xf16, #a>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %k = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !ring
  %v = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !ring
  tilegpu.warp_specialize producer_warps 4 registers 40, 232 consumers {
    %zero = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
    %o0 = arith.constant dense<0.0> : tensor<64x64xf32, #mma>
    %p0 = arith.constant dense<0.0> : tensor<64x64xf16, #a>
    %r:2 = scf.for %j = %c0 to %n step %c64 iter_args(%o = %o0, %p = %p0)
        -> (tensor<64x64xf32, #mma>, tensor<64x64xf16, #a>) : i32 {
      %s = tilegpu.wgmma %qa, %k[%c0], %zero {transpose_b} : tensor<64x64xf16, #a>, !ring -> tensor<64x64xf32, #mma>
      %pv = tilegpu.wgmma %p, %v[%c0], %o : tensor<64x64xf16, #a>, !ring -> tensor<64x64xf32, #mma>
      %sw = tilegpu.wgmma_wait %s {pending = 1 : i32} : tensor<64x64xf32, #mma>
      %p16 = arith.truncf %sw : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %pj = tilegpu.convert_layout %p16 : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
      %ow:2 = tilegpu.wgmma_wait %pv, %pj {pending = 0 : i32} : tensor<64x64xf32, #mma>, tensor<64x64xf16, #a>
      scf.yield %ow#0, %ow#1 : tensor<64x64xf32, #mma>, tensor<64x64xf16, #a>
    }
    "test.use"(%r#0) : (tensor<64x64xf32, #mma>) -> ()
  } producer {
  }
  return
}
