// convert-tile-to-gpu: each tile program becomes a kernel; tiles live in shared memory and every
// tile op is an element loop over the CTA's threads closed by a barrier.
// RUN: tessel-opt %s --split-input-file --convert-tile-to-gpu | FileCheck %s
// RUN: tessel-opt %s --split-input-file --convert-tile-to-gpu=num-threads=1 | FileCheck %s --check-prefix=ONE

// The kernel signature: !tile.ptr becomes a global pointer, scalars stay; the program is gone.
// CHECK: module attributes {gpu.container_module}
// CHECK: gpu.module @tessel_kernels
// CHECK-LABEL: gpu.func @load_pad(%{{.*}}: !llvm.ptr<1>, %{{.*}}: i32)
// CHECK-SAME: workgroup(%[[ARENA:.*]] : memref<128xi8, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: kernel
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: tessel.shared_bytes = 128
// CHECK: %[[BUF:.*]] = memref.view %[[ARENA]][%{{.*}}][] : memref<128xi8, #gpu.address_space<workgroup>> to memref<4x8xf32, #gpu.address_space<workgroup>>
// CHECK: %[[TID:.*]] = gpu.thread_id x
// CHECK: gpu.block_id x
// CHECK: scf.for %[[LIN:.*]] = %[[TID]] to %{{.*}} step %{{.*}}
// Address arithmetic in i64, bounds checked on both sides.
// CHECK: arith.cmpi sge, %{{.*}}, %{{.*}} : i64
// CHECK: arith.cmpi slt, %{{.*}}, %{{.*}} : i64
// CHECK: scf.if %{{.*}} -> (f32)
// CHECK: llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> f32
// CHECK: } else {
// CHECK: arith.constant 0xFF800000 : f32
// CHECK: memref.store %{{.*}}, %[[BUF]]
// CHECK: gpu.barrier
// CHECK: gpu.return
// CHECK-NOT: func.func
// ONE-LABEL: gpu.func @load_pad
// ONE-SAME: known_block_size = array<i32: 1, 1, 1>
// ONE: gpu.block_id x
// ONE: %[[ZERO:.*]] = arith.constant 0 : index
// ONE: scf.for %{{.*}} = %[[ZERO]] to %{{.*}} step %{{.*}}
func.func @load_pad(%p: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %pid = tile.program_id 0 : i32
  %d = tile.make_desc %p, shape [%n, %n], strides [%n, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %t = tile.load %d[%pid, %c0] {padding = 0xFFF0000000000000 : f64} : !tile.desc<2, f32> -> tensor<4x8xf32>
  return
}

// -----

// Stores drop out-of-bounds and masked-off elements.
// CHECK-LABEL: gpu.func @store_masked
// CHECK: %[[IN:.*]] = arith.andi
// CHECK: %[[BIT:.*]] = memref.load %{{.*}}[%{{.*}}] : memref<16xi1, #gpu.address_space<workgroup>>
// CHECK: %[[DO:.*]] = arith.andi %{{.*}}, %[[BIT]] : i1
// CHECK: scf.if %[[DO]] {
// CHECK: llvm.store %{{.*}}, %{{.*}} : f16, !llvm.ptr<1>
func.func @store_masked(%p: !tile.ptr<f16>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %p, shape [%n], strides [%c1] : !tile.ptr<f16> -> !tile.desc<1, f16>
  %v = arith.constant dense<1.0> : tensor<16xf16>
  %i = tile.iota : tensor<16xi32>
  %s = tile.splat %n : i32 -> tensor<16xi32>
  %m = arith.cmpi slt, %i, %s : tensor<16xi32>
  tile.store %d[%c0], %v mask %m : !tile.desc<1, f16>, tensor<16xf16>, tensor<16xi1>
  return
}

// -----

// dot: products and sums in f32 whatever the operand type, acc as the initial value.
// CHECK-LABEL: gpu.func @dot_f16
// CHECK: %[[INIT:.*]] = memref.load %{{.*}} : memref<4x2xf32, #gpu.address_space<workgroup>>
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[S:.*]] = %[[INIT]]) -> (f32)
// CHECK: %[[A:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: %[[B:.*]] = arith.extf %{{.*}} : f16 to f32
// CHECK: %[[P:.*]] = arith.mulf %[[A]], %[[B]] : f32
// CHECK: arith.addf %[[S]], %[[P]] : f32
func.func @dot_f16(%p: !tile.ptr<f16>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %d = tile.make_desc %p, shape [%c8, %c8], strides [%c8, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %a = tile.load %d[%c0, %c0] : !tile.desc<2, f16> -> tensor<4x3xf16>
  %b = tile.load %d[%c0, %c0] : !tile.desc<2, f16> -> tensor<3x2xf16>
  %z = arith.constant dense<0.0> : tensor<4x2xf32>
  %r = tile.dot %a, %b, %z : tensor<4x3xf16>, tensor<3x2xf16> -> tensor<4x2xf32>
  return
}

// -----

// Reductions start from the first element and fold the rest; shape ops are index maps.
// CHECK-LABEL: gpu.func @reduce_and_shapes
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%{{.*}} = %{{.*}}) -> (f32)
// CHECK: arith.maximumf
// CHECK: arith.minsi
// CHECK: memref.load %{{.*}} : memref<4xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<4x1xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<4x6xf32, #gpu.address_space<workgroup>>
// CHECK: memref.store %{{.*}} : memref<6x4xf32, #gpu.address_space<workgroup>>
func.func @reduce_and_shapes(%x: f32, %k: i32) {
  %t = tile.splat %x : f32 -> tensor<4x6xf32>
  %m = tile.reduce max %t axis 1 : tensor<4x6xf32> -> tensor<4xf32>
  %i = tile.splat %k : i32 -> tensor<4x6xi32>
  %mi = tile.reduce min %i axis 0 : tensor<4x6xi32> -> tensor<6xi32>
  %e = tile.expand_dims %m axis 1 : tensor<4xf32> -> tensor<4x1xf32>
  %b = tile.broadcast %e : tensor<4x1xf32> -> tensor<4x6xf32>
  %tr = tile.trans %b : tensor<4x6xf32> -> tensor<6x4xf32>
  return
}

// -----

// exp and log take NVVM's approximate instructions: exp(x) = ex2(x·log2 e); nothing for libdevice.
// CHECK-LABEL: gpu.func @fast_math
// CHECK: %[[L2E:.*]] = arith.constant 1.44269502 : f32
// CHECK: %[[X:.*]] = arith.mulf %{{.*}}, %[[L2E]] : f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"(%[[X]]) : (f32) -> f32
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"
// CHECK-NOT: math.exp
// CHECK-NOT: math.log
func.func @fast_math(%x: f32) {
  %t = tile.splat %x : f32 -> tensor<8xf32>
  %e = math.exp %t : tensor<8xf32>
  %l = math.log %e : tensor<8xf32>
  return
}

// -----

// Non-streamed softmax: max, exp, sum, divide per row; masked (-inf) elements give 0, and an
// all-masked row gives 0 and lse = -inf.
// CHECK-LABEL: gpu.func @softmax_rows
// CHECK: scf.for
// CHECK: %[[NINF:.*]] = arith.constant 0xFF800000 : f32
// CHECK: %[[MAX:.*]] = scf.for {{.*}} iter_args(%{{.*}} = %[[NINF]]) -> (f32)
// CHECK: arith.maximumf
// CHECK: %[[SUM:.*]] = scf.for {{.*}} -> (f32)
// CHECK: arith.cmpf oeq, %{{.*}}, %[[NINF]] : f32
// CHECK: arith.select
// CHECK: arith.divf
// CHECK: llvm.call_intrinsic "llvm.nvvm.lg2.approx.f"(%[[SUM]])
// CHECK: arith.addf %[[MAX]]
func.func @softmax_rows(%x: f32) {
  %t = tile.splat %x : f32 -> tensor<4x8xf32>
  %p, %lse = tile.softmax %t axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  return
}

// -----

// A loop-carried tile lives in its own buffer, copied in before the loop and out at each yield.
// Swapped tiles go through temporaries first, so neither copy reads a buffer already overwritten.
// CHECK-LABEL: gpu.func @swap_carried
// CHECK: %[[A0:.*]] = memref.view {{.*}} to memref<8xf32, {{.*}}>
// CHECK: %[[B0:.*]] = memref.view {{.*}} to memref<8xf32, {{.*}}>
// CHECK: %[[CA:.*]] = memref.view {{.*}} to memref<8xf32, {{.*}}>
// CHECK: %[[CB:.*]] = memref.view {{.*}} to memref<8xf32, {{.*}}>
// CHECK: %[[TA:.*]] = memref.view {{.*}} to memref<8xf32, {{.*}}>
// CHECK: %[[TB:.*]] = memref.view {{.*}} to memref<8xf32, {{.*}}>
// CHECK: memref.store %{{.*}}, %[[CA]]
// CHECK: memref.store %{{.*}}, %[[CB]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK: memref.load %[[CB]]
// CHECK: memref.store %{{.*}}, %[[TA]]
// CHECK: memref.load %[[CA]]
// CHECK: memref.store %{{.*}}, %[[TB]]
// CHECK: memref.load %[[TA]]
// CHECK: memref.store %{{.*}}, %[[CA]]
// CHECK: memref.load %[[TB]]
// CHECK: memref.store %{{.*}}, %[[CB]]
func.func @swap_carried(%x: f32, %y: f32, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %a = tile.splat %x : f32 -> tensor<8xf32>
  %b = tile.splat %y : f32 -> tensor<8xf32>
  %r:2 = scf.for %i = %c0 to %n step %c1 iter_args(%u = %a, %v = %b) -> (tensor<8xf32>, tensor<8xf32>) : i32 {
    scf.yield %v, %u : tensor<8xf32>, tensor<8xf32>
  }
  return
}

// -----

// scf.if with a tile result: each branch copies its yield into the result buffer.
// CHECK-LABEL: gpu.func @if_tile
// CHECK: scf.if %{{.*}} {
// CHECK: memref.store %{{.*}}, %[[RES:[^ ]*]]
// CHECK: } else {
// CHECK: memref.store %{{.*}}, %[[RES]]
func.func @if_tile(%c: i1, %x: f32, %y: f32) {
  %a = tile.splat %x : f32 -> tensor<8xf32>
  %b = tile.splat %y : f32 -> tensor<8xf32>
  %r = scf.if %c -> (tensor<8xf32>) {
    scf.yield %a : tensor<8xf32>
  } else {
    scf.yield %b : tensor<8xf32>
  }
  return
}
