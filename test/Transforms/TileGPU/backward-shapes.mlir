// The shapes of the backward's key-rows dK/dV program (python/tessel/backward.py) on the tilegpu
// level: a row vector loaded outside the loop and a column vector loaded inside it (the LSE and
// Δ of the streamed query block) get the slice layouts their broadcasts read and stay
// tile.loads (the lowering reads them into registers, no shared memory); a streamed block read
// both transposed (Sᵀ = K·Qᵀ) and as stored (dK += dSᵀ·Q) gets one buffer, one copy and two
// local loads.
// RUN: tessel-opt %s --tilegpu-assign-layouts | FileCheck %s --check-prefix=LAYOUT
// RUN: tessel-opt %s --tilegpu-assign-layouts --tilegpu-allocate-shared | FileCheck %s --check-prefix=SMEM
// RUN: tessel-opt %s --convert-tile-to-mma | FileCheck %s --check-prefix=LOWER

// LAYOUT-LABEL: func.func @key_rows
// LAYOUT: tile.load %{{.*}} : !tile.desc<1, f32> -> tensor<64xf32, #row>
// LAYOUT: scf.for
// LAYOUT: tile.load %{{.*}} : !tile.desc<1, f32> -> tensor<64xf32, #col>
// LAYOUT: tile.expand_dims %{{.*}} axis 0 : tensor<64xf32, #col> -> tensor<1x64xf32, #col>

// SMEM-LABEL: func.func @key_rows
// 8 KiB for K (an A block, outside the loop), then Q's ring of two stages: 24 KiB.
// SMEM-SAME: tilegpu.shared_bytes = 24576
// SMEM: scf.for
// SMEM: %[[QT:.*]] = tilegpu.async_copy %{{.*}} into %[[QS:[0-9]+]][%[[ST:[0-9]+]]] :
// SMEM-NOT: tilegpu.async_copy
// SMEM-DAG: tilegpu.local_load %[[QS]][%[[ST]]] {transpose}
// SMEM-DAG: tilegpu.local_load %[[QS]][%[[ST]]] :
// SMEM-NOT: tilegpu.async_copy
// SMEM: tile.load %{{.*}} -> tensor<64xf32, #col>
// SMEM-NOT: tile.trans

// The vectors: per register a bounds check and a branch, the global load under it and the
// padding in its else (ptxas predicates the load; no address selected between the element's
// and a safe one, which took a 64-bit register pair each); nothing of them in shared memory.
// LOWER-LABEL: gpu.func @key_rows
// LOWER: scf.if %{{.*}} -> (f32) {
// LOWER: %[[LOADED:.*]] = llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// LOWER-NEXT: scf.yield %[[LOADED]] : f32
// LOWER-NEXT: } else {
// LOWER-NEXT: scf.yield %{{.*}} : f32
// LOWER: nvvm.mma.sync
func.func @key_rows(%kp: !tile.ptr<f16>, %qp: !tile.ptr<f16>, %lp: !tile.ptr<f32>,
                    %op: !tile.ptr<f32>, %nq: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %kd = tile.make_desc %kp[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %qd = tile.make_desc %qp[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lp[%c0], shape[%nq], strides[%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %od = tile.make_desc %op[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %k = tile.load %kd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %rowv = tile.load %ld[%c0] : !tile.desc<1, f32> -> tensor<64xf32>
  %rowe = tile.expand_dims %rowv axis 1 : tensor<64xf32> -> tensor<64x1xf32>
  %rowb = tile.broadcast %rowe : tensor<64x1xf32> -> tensor<64x64xf32>
  %acc = scf.for %i = %c0 to %nq step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
    %q = tile.load %qd[%i, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %qt = tile.trans %q : tensor<64x64xf16> -> tensor<64x64xf16>
    %s = tile.dot %k, %qt, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %colv = tile.load %ld[%i] : !tile.desc<1, f32> -> tensor<64xf32>
    %cole = tile.expand_dims %colv axis 0 : tensor<64xf32> -> tensor<1x64xf32>
    %colb = tile.broadcast %cole : tensor<1x64xf32> -> tensor<64x64xf32>
    %x = arith.subf %s, %colb : tensor<64x64xf32>
    %y = arith.addf %x, %rowb : tensor<64x64xf32>
    %p = arith.truncf %y : tensor<64x64xf32> to tensor<64x64xf16>
    %a2 = tile.dot %p, %q, %a : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %a2 : tensor<64x64xf32>
  }
  tile.store %od[%c0, %c0], %acc : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// Two A blocks (K and V, or Q and dO) on wgmma: the lowering reads them from shared memory in
// the loop, so the ring starts after them (with Q alone it reuses Q's bytes).
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared | FileCheck %s --check-prefix=WGMMA
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// PTX-LABEL: .entry two_a_blocks(
// Each A block, once landed: the proxy fence and a barrier, then wgmmas read it by descriptor
// (A and B both descriptors, imm-trans-a 0).
// PTX: fence.proxy.async.shared::cta;
// PTX-NEXT: bar.sync
// PTX: fence.proxy.async.shared::cta;
// PTX-NEXT: bar.sync
// PTX: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 0;
// WGMMA-LABEL: func.func @two_a_blocks
// WGMMA-SAME: tilegpu.shared_bytes = 32768
// WGMMA-DAG: tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x64xf16, stages = 1
// WGMMA-DAG: tilegpu.alloc {offset = 8192 : i64} : !tilegpu.smem<64x64xf16, stages = 1
// WGMMA-DAG: tilegpu.alloc {offset = 16384 : i64, stride = 8192 : i64} : !tilegpu.smem<64x64xf16, stages = 2
func.func @two_a_blocks(%kp: !tile.ptr<f16>, %vp: !tile.ptr<f16>, %qp: !tile.ptr<f16>,
                        %op: !tile.ptr<f32>, %nq: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %kd = tile.make_desc %kp[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %vp[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %qd = tile.make_desc %qp[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %op[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %k = tile.load %kd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %v = tile.load %vd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %acc = scf.for %i = %c0 to %nq step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
    %q = tile.load %qd[%i, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %qt = tile.trans %q : tensor<64x64xf16> -> tensor<64x64xf16>
    %s = tile.dot %k, %qt, %a : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %t = tile.dot %v, %qt, %s : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %t : tensor<64x64xf32>
  }
  tile.store %od[%c0, %c0], %acc : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}
