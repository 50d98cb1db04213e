// tilegpu-allocate-shared on programs whose tiles already carry their layouts: each load of a
// dot operand becomes a buffer at its planned offset, an async copy, its wait and barrier, and
// a local load into the operand layout.
// RUN: tessel-opt %s --split-input-file --tilegpu-allocate-shared | FileCheck %s
// RUN: tessel-opt %s --split-input-file --tilegpu-allocate-shared="stages=3" | FileCheck %s --check-prefix=THREE

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>

// Q gets bytes of its own (8 KiB); K and V share a ring of two stages after it: stage s of
// both is one block of 16 KiB (K then V), so each buffer's stages are 16 KiB apart: 8 + 2 · 16 KiB.
// CHECK-LABEL: func.func @qkv_mma_sync
// CHECK-SAME: tilegpu.shared_bytes = 40960
// CHECK-DAG: %[[VS:.*]] = tilegpu.alloc {offset = 16384 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
// CHECK-DAG: %[[KS:.*]] = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
// CHECK-DAG: %[[QS:.*]] = tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>
// CHECK: %[[QT:.*]] = tilegpu.async_copy %{{.*}} into %[[QS]][%[[C0:.*]]] :
// CHECK-NEXT: %[[QG:.*]] = tilegpu.async_commit %[[QT]]
// CHECK-NEXT: tilegpu.async_wait %[[QG]] {pending = 0 : i32}
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[Q:.*]] = tilegpu.local_load %[[QS]][%[[C0]]] : {{.*}} -> tensor<64x64xf16, #[[A:op_a.*]]>
// CHECK: scf.for %[[J:.*]] = %[[LB:.*]] to
// Iteration (j - lb) / step reads stage iteration % 2.
// CHECK: %[[D:.*]] = arith.subi %[[J]], %[[LB]] : i32
// CHECK-NEXT: %[[IT:.*]] = arith.divui %[[D]], %{{.*}} : i32
// CHECK: %[[ST:.*]] = arith.remui %[[IT]], %{{.*}} : i32
// CHECK-NEXT: %[[KT:.*]] = tilegpu.async_copy %{{.*}} into %[[KS]][%[[ST]]]
// The K block read transposed replaces the tile.trans.
// CHECK: %[[K:.*]] = tilegpu.local_load %[[KS]][%[[ST]]] {transpose} : {{.*}} -> tensor<64x64xf16, #[[B:op_b.*]]>
// CHECK-NOT: tile.trans
// CHECK: tile.dot %[[Q]], %[[K]]
// CHECK: tilegpu.async_copy %{{.*}} into %[[VS]]
// CHECK: %[[V:.*]] = tilegpu.local_load %[[VS]][%{{.*}}] : {{.*}} -> tensor<64x64xf16, #[[B]]>
// CHECK: tile.dot %{{.*}}, %[[V]]

// THREE-LABEL: func.func @qkv_mma_sync
// THREE-SAME: tilegpu.shared_bytes = 57344
// THREE: tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
func.func @qkv_mma_sync(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %vd: !tile.desc<2, f16>,
                        %lb: i32, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
  %q = tile.load %qd[%lb, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16, #a>
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32, #mma>) : i32 {
    %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16, #b>
    %kt = tile.trans %k : tensor<64x64xf16, #b> -> tensor<64x64xf16, #b>
    %s = tile.dot %q, %kt, %zero : tensor<64x64xf16, #a>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #mma>
    %p = arith.truncf %s : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    %pa = tilegpu.convert_layout %p : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
    %v = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16, #b>
    %acc2 = tile.dot %pa, %v, %acc : tensor<64x64xf16, #a>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %acc2 : tensor<64x64xf32, #mma>
  }
  return
}

// -----

#wg = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#wa = #tilegpu.dot_operand<operand = 0, parent = #wg>
#wb = #tilegpu.dot_operand<operand = 1, parent = #wg>

// wgmma: Q is read into registers once, so the ring reuses its bytes (starts at 0):
// 2 · (16 + 16) KiB for d128 instead of 16 + 2 · 32. Q sits in the ring's last stage, so the
// prologue's copies (the first stages) may fly while it lands (tilegpu-sink-waits). wgmma
// reads K and V through the async proxy, so a fence orders the landed copies before it; Q
// goes through ldmatrix and needs none.
// CHECK-LABEL: func.func @qkv_wgmma_d128
// CHECK-SAME: tilegpu.shared_bytes = 65536
// CHECK-DAG: %[[VS:.*]] = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
// CHECK-DAG: %[[KS:.*]] = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
// CHECK-DAG: %[[QS:.*]] = tilegpu.alloc {offset = 32768 : i64} : !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>
// CHECK: tilegpu.async_copy %{{.*}} into %[[QS]]
// CHECK: tilegpu.async_wait
// CHECK-NEXT: gpu.barrier
// CHECK: tilegpu.async_copy %{{.*}} into %[[KS]]
// CHECK: tilegpu.async_wait
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: gpu.barrier
// CHECK: tilegpu.async_copy %{{.*}} into %[[VS]]
// CHECK: tilegpu.async_wait
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: gpu.barrier
func.func @qkv_wgmma_d128(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %vd: !tile.desc<2, f16>,
                          %lb: i32, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zs = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #wg>
  %zo = arith.constant dense<0.000000e+00> : tensor<64x128xf32, #wg>
  %q = tile.load %qd[%lb, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16, #wa>
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zo) -> (tensor<64x128xf32, #wg>) : i32 {
    %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16, #wb>
    %kt = tile.trans %k : tensor<64x128xf16, #wb> -> tensor<128x64xf16, #wb>
    %s = tile.dot %q, %kt, %zs : tensor<64x128xf16, #wa>, tensor<128x64xf16, #wb> -> tensor<64x64xf32, #wg>
    %p = arith.truncf %s : tensor<64x64xf32, #wg> to tensor<64x64xf16, #wg>
    %pa = tilegpu.convert_layout %p : tensor<64x64xf16, #wg> -> tensor<64x64xf16, #wa>
    %v = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16, #wb>
    %acc2 = tile.dot %pa, %v, %acc : tensor<64x64xf16, #wa>, tensor<64x128xf16, #wb> -> tensor<64x128xf32, #wg>
    scf.yield %acc2 : tensor<64x128xf32, #wg>
  }
  return
}

// -----

#wg = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#wa = #tilegpu.dot_operand<operand = 0, parent = #wg>
#wb = #tilegpu.dot_operand<operand = 1, parent = #wg>

// wgmma at d64 with 64-key blocks: one loop reads Q beside a P of Q's width, where ptxas 13.0
// gave Q's registers to P (every S after the first read P; H100, forty-third session). Q is
// read by descriptor (the alloc's tilegpu.a_by_descriptor) and keeps its bytes: 8 + 2 · 16 KiB,
// not the ring's 2 · 16 (at d128 above, Q and P differ in width and the ring reuses Q's bytes).
// CHECK-LABEL: func.func @qkv_wgmma_d64_p_of_q_width
// CHECK-SAME: tilegpu.shared_bytes = 40960
// CHECK-DAG: tilegpu.alloc {offset = 16384 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
// CHECK-DAG: tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
// CHECK-DAG: tilegpu.alloc {offset = 0 : i64, tilegpu.a_by_descriptor} : !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>
func.func @qkv_wgmma_d64_p_of_q_width(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>,
                                      %vd: !tile.desc<2, f16>, %lb: i32, %ub: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %zs = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #wg>
  %q = tile.load %qd[%lb, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16, #wa>
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zs) -> (tensor<64x64xf32, #wg>) : i32 {
    %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16, #wb>
    %kt = tile.trans %k : tensor<64x64xf16, #wb> -> tensor<64x64xf16, #wb>
    %s = tile.dot %q, %kt, %zs : tensor<64x64xf16, #wa>, tensor<64x64xf16, #wb> -> tensor<64x64xf32, #wg>
    %p = arith.truncf %s : tensor<64x64xf32, #wg> to tensor<64x64xf16, #wg>
    %pa = tilegpu.convert_layout %p : tensor<64x64xf16, #wg> -> tensor<64x64xf16, #wa>
    %v = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16, #wb>
    %acc2 = tile.dot %pa, %v, %acc : tensor<64x64xf16, #wa>, tensor<64x64xf16, #wb> -> tensor<64x64xf32, #wg>
    scf.yield %acc2 : tensor<64x64xf32, #wg>
  }
  return
}

// -----

#mma = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>

// A GEMM (issue 18): A and B both streamed by the loop share the ring, A first (16 KiB, then
// B's 16 KiB); wgmma reads both by descriptor, so the copies are fenced for the async proxy.
// CHECK-LABEL: func.func @gemm_wgmma
// CHECK-SAME: tilegpu.shared_bytes = 65536
// CHECK-DAG: %[[B:.*]] = tilegpu.alloc {offset = 16384 : i64, stride = 32768 : i64} : !tilegpu.smem<64x128xf16, stages = 2, swizzle = 128>
// CHECK-DAG: %[[A:.*]] = tilegpu.alloc {offset = 0 : i64, stride = 32768 : i64} : !tilegpu.smem<128x64xf16, stages = 2, swizzle = 128>
// CHECK: scf.for
// CHECK: tilegpu.async_copy %{{.*}} into %[[A]][%[[S:[0-9]+]]]
// CHECK: tilegpu.async_wait
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[AR:[0-9]+]] = tilegpu.local_load %[[A]][%[[S]]] : {{.*}} -> tensor<128x64xf16, #op_a>
// CHECK: tilegpu.async_copy %{{.*}} into %[[B]]
// CHECK: tile.dot %[[AR]]
// THREE-LABEL: func.func @gemm_wgmma
// THREE-SAME: tilegpu.shared_bytes = 98304
func.func @gemm_wgmma(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %m: i32) {
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
