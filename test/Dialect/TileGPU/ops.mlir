// Every tilegpu op, layout and type parses, verifies and prints back the same.
// RUN: tessel-opt %s | tessel-opt | FileCheck %s

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
#row = #tilegpu.slice<dim = 1, parent = #mma>
#wg = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#wa = #tilegpu.dot_operand<operand = 0, parent = #wg>

// Layouts print as aliases, their long form once at the top.
// CHECK-DAG: #[[MMA:mma.*]] = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
// CHECK-DAG: #[[ROW:row.*]] = #tilegpu.slice<dim = 1, parent = #[[MMA]]>
// CHECK-DAG: #[[BL:blocked.*]] = #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 16>
// CHECK-DAG: #[[A:op_a.*]] = #tilegpu.dot_operand<operand = 0, parent = #[[MMA]]>
// CHECK-DAG: #[[B:op_b.*]] = #tilegpu.dot_operand<operand = 1, parent = #[[MMA]]>
// CHECK-LABEL: func.func @layouts
// CHECK-SAME: tensor<64x64xf32, #[[MMA]]>, %{{.*}}: tensor<64xf32, #[[ROW]]>, %{{.*}}: tensor<16x64xf32, #[[BL]]>
func.func @layouts(%s: tensor<64x64xf32, #mma>, %m: tensor<64xf32, #row>,
                   %r: tensor<16x64xf32, #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 16>>) {
  return
}

// CHECK-LABEL: func.func @mma_sync_chain
func.func @mma_sync_chain(%kd: !tile.desc<2, f16>, %j: i32, %p: tensor<64x64xf16, #mma>,
                          %acc: tensor<64x128xf32, #mma>) -> tensor<64x128xf32, #mma> {
  %c0 = arith.constant 0 : i32
  // CHECK: %[[V:.*]] = tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
  %v = tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
  // CHECK: %[[T:.*]] = tilegpu.async_copy %{{.*}}[%{{.*}}, %{{.*}}] into %[[V]][%{{.*}}] : !tile.desc<2, f16> -> !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
  %t = tilegpu.async_copy %kd[%j, %c0] into %v[%c0] : !tile.desc<2, f16> -> !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
  // CHECK: %[[G:.*]] = tilegpu.async_commit %[[T]]
  %g = tilegpu.async_commit %t
  // CHECK: tilegpu.async_wait %[[G]] {pending = 0 : i32}
  tilegpu.async_wait %g {pending = 0 : i32}
  gpu.barrier
  // CHECK: tilegpu.local_load %[[V]][%{{.*}}] : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128> -> tensor<64x128xf16, #[[B]]>
  %vb = tilegpu.local_load %v[%c0] : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128> -> tensor<64x128xf16, #b>
  // CHECK: %[[PA:.*]] = tilegpu.convert_layout %{{.*}} : tensor<64x64xf16, #[[MMA]]> -> tensor<64x64xf16, #[[A]]>
  %pa = tilegpu.convert_layout %p : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
  // CHECK: tilegpu.mma %[[PA]], %{{.*}}, %{{.*}} :
  %o = tilegpu.mma %pa, %vb, %acc : tensor<64x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<64x128xf32, #mma>
  return %o : tensor<64x128xf32, #mma>
}

// An FP8 B block kept transposed ([256, 64]: V of P·V at head dim 256, 64 keys) has 64-byte
// rows, swizzled over their width and read K-major.
// CHECK-LABEL: func.func @wgmma_fp8_narrow_rows
func.func @wgmma_fp8_narrow_rows(%p: tensor<64x64xf8E4M3FN, #wa>, %acc: tensor<64x256xf32, #wg>)
    -> tensor<64x256xf32, #wg> {
  %c0 = arith.constant 0 : i32
  %v = tilegpu.alloc : !tilegpu.smem<256x64xf8E4M3FN, stages = 2, swizzle = 64>
  // CHECK: tilegpu.wgmma {{.*}} {transpose_b} : tensor<64x64xf8E4M3FN, #{{.*}}>, !tilegpu.smem<256x64xf8E4M3FN, stages = 2, swizzle = 64>
  %o = tilegpu.wgmma %p, %v[%c0], %acc {transpose_b} : tensor<64x64xf8E4M3FN, #wa>, !tilegpu.smem<256x64xf8E4M3FN, stages = 2, swizzle = 64> -> tensor<64x256xf32, #wg>
  return %o : tensor<64x256xf32, #wg>
}

// CHECK-LABEL: func.func @wgmma_chain
func.func @wgmma_chain(%q: tensor<64x128xf16, #wa>, %zero: tensor<64x64xf32, #wg>)
    -> tensor<64x64xf32, #wg> {
  %c0 = arith.constant 0 : i32
  %k = tilegpu.alloc : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
  // CHECK: tilegpu.fence_async_shared
  tilegpu.fence_async_shared
  // CHECK: %[[S:.*]] = tilegpu.wgmma %{{.*}}, %{{.*}}[%{{.*}}], %{{.*}} {transpose_b}
  %s = tilegpu.wgmma %q, %k[%c0], %zero {transpose_b} : tensor<64x128xf16, #wa>, !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128> -> tensor<64x64xf32, #wg>
  // CHECK: %[[W:.*]] = tilegpu.wgmma_wait %[[S]] {pending = 0 : i32}
  %w = tilegpu.wgmma_wait %s {pending = 0 : i32} : tensor<64x64xf32, #wg>
  // CHECK: return %[[W]]
  return %w : tensor<64x64xf32, #wg>
}
