// tilegpu-async-accumulate on a GEMM's loop (issue 18): the one dot accumulating into the
// carried value becomes a tilegpu.wgmma left in flight (a wait with pending = 1 that names no
// value frees the stage read two iterations back), drained after the loop; the loop is marked
// for tilegpu-pipeline-loads, which then copies S − 2 iterations ahead (PIPE). With three
// stages the copies would go one iteration ahead only (measured slower): the loop is left
// alone (TWO).
// RUN: tessel-opt %s --split-input-file --tilegpu-allocate-shared="stages=4" --tilegpu-async-accumulate | FileCheck %s
// RUN: tessel-opt %s --split-input-file --tilegpu-allocate-shared="stages=4" --tilegpu-async-accumulate --tilegpu-pipeline-loads | FileCheck %s --check-prefix=PIPE
// RUN: tessel-opt %s --split-input-file --tilegpu-allocate-shared="stages=3" --tilegpu-async-accumulate | FileCheck %s --check-prefix=TWO

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>

// CHECK-LABEL: func.func @gemm
// CHECK: %[[R:.*]] = scf.for {{.*}} iter_args(%[[ACC:.*]] = %{{.*}}) -> (tensor<128x128xf32, #mma>)
// CHECK: %[[A:.*]] = tilegpu.local_load
// CHECK: %[[W:.*]] = tilegpu.wgmma %[[A]], %{{.*}}[%{{.*}}], %[[ACC]]
// CHECK-NEXT: tilegpu.wgmma_wait {pending = 1 : i32}
// CHECK-NEXT: scf.yield %[[W]]
// CHECK-NEXT: } {tilegpu.dots_in_flight = 1 : i64}
// CHECK-NEXT: %[[D:.*]] = tilegpu.wgmma_wait %[[R]] {pending = 0 : i32}
// CHECK-NEXT: tile.store %{{.*}}, %[[D]]
// CHECK-NOT: tile.dot

// The prologue issues two iterations; iteration j waits for its own group with one younger,
// copies iteration j + 2 into stage s + 2, and its wgmma flies into the next iteration.
// PIPE-LABEL: func.func @gemm
// PIPE-COUNT-2: tilegpu.async_commit
// PIPE: scf.for
// PIPE-NEXT: tilegpu.async_wait %{{.*}} {pending = 1 : i32}
// PIPE-NEXT: tilegpu.fence_async_shared
// PIPE-NEXT: gpu.barrier
// PIPE: tilegpu.async_copy
// PIPE: tilegpu.async_commit
// PIPE: tilegpu.wgmma
// PIPE-NEXT: tilegpu.wgmma_wait {pending = 1 : i32}
// PIPE: tilegpu.wgmma_wait %{{.*}} {pending = 0 : i32}

// TWO-LABEL: func.func @gemm
// TWO-NOT: tilegpu.wgmma
// TWO: tile.dot
// TWO-NOT: tilegpu.dots_in_flight
func.func @gemm(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c256 = arith.constant 256 : i32
  %ad = tile.make_desc %a, shape [%m, %c256], strides [%c256, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %bd = tile.make_desc %b, shape [%c256, %c256], strides [%c256, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%m, %c256], strides [%c256, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %zero = arith.constant dense<0.0> : tensor<128x128xf32, #mma>
  %r = scf.for %k = %c0 to %c256 step %c64 iter_args(%acc = %zero) -> (tensor<128x128xf32, #mma>) : i32 {
    %at = tile.load %ad[%c0, %k] : !tile.desc<2, f16> -> tensor<128x64xf16, #a>
    %bt = tile.load %bd[%k, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16, #b>
    %next = tile.dot %at, %bt, %acc : tensor<128x64xf16, #a>, tensor<64x128xf16, #b> -> tensor<128x128xf32, #mma>
    scf.yield %next : tensor<128x128xf32, #mma>
  }
  tile.store %cd[%c0, %c0], %r : !tile.desc<2, f32>, tensor<128x128xf32, #mma>
  return
}
