// convert-tile-to-gpu lowers tile.gather as an element loop: each element loads its index tiles'
// elements, uses scalar indices as they are, and reads global memory only when every index lies
// inside the descriptor's shape (the padding otherwise).
// RUN: tessel-opt %s --convert-tile-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @gather_doc
// CHECK: scf.for
// The scalar index (the batch) is extended once, outside the element loop.
// CHECK: %[[B:.*]] = arith.extsi %{{.*}} : i32 to i64
// CHECK: scf.for
// CHECK: arith.cmpi sge, %[[B]], %{{.*}} : i64
// CHECK: arith.cmpi slt, %[[B]], %{{.*}} : i64
// CHECK: %[[Q:.*]] = memref.load %{{.*}} : memref<16x8xi32, #gpu.address_space<workgroup>>
// CHECK: %[[QW:.*]] = arith.extsi %[[Q]] : i32 to i64
// CHECK: arith.cmpi sge, %[[QW]], %{{.*}} : i64
// CHECK: arith.cmpi slt, %[[QW]], %{{.*}} : i64
// CHECK: %[[Q_IN:.*]] = arith.andi
// CHECK: %[[IN:.*]] = arith.andi %{{.*}}, %[[Q_IN]] : i1
// CHECK: scf.if %[[IN]] -> (i32)
// CHECK: llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
// CHECK: llvm.load %{{.*}} : !llvm.ptr<1> -> i32
// CHECK: } else {
// CHECK: arith.constant 0 : i32
// CHECK: gpu.barrier
func.func @gather_doc(%doc: !tile.ptr<i32>, %out: !tile.ptr<i32>, %b: i32, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %d = tile.make_desc %doc, shape [%n, %n], strides [%n, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  %r = tile.iota : tensor<16xi32>
  %r2 = tile.expand_dims %r axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %r2 : tensor<16x1xi32> -> tensor<16x8xi32>
  %g = tile.gather %d[%b, %q] : !tile.desc<2, i32>, i32, tensor<16x8xi32> -> tensor<16x8xi32>
  %o = tile.make_desc %out, shape [%n, %c8], strides [%c8, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  tile.store %o[%c0, %c0], %g : !tile.desc<2, i32>, tensor<16x8xi32>
  return
}
