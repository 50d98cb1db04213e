// tile.load_scalar in both GPU lowerings (the shared KernelWalker lowers it): a bounds check
// per index, the load only in the in-bounds branch, the padding in the other.
// RUN: tessel-opt %s --convert-tile-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @page_of
func.func @page_of(%table: !tile.ptr<i32>, %out: !tile.ptr<i32>, %b: i32, %j: i32, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %t = tile.make_desc %table, shape [%b, %m], strides [%m, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  // CHECK-COUNT-2: arith.cmpi sge
  // CHECK: %[[OK:.*]] = arith.andi %{{.*}}, %{{.*}} : i1
  // CHECK-NOT: llvm.load
  // CHECK: %[[PAGE:.*]] = scf.if %{{.*}} -> (i32) {
  // CHECK:   %[[PTR:.*]] = llvm.getelementptr %{{.*}}[%{{.*}}] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, i32
  // CHECK:   %[[V:.*]] = llvm.load %[[PTR]] : !llvm.ptr<1> -> i32
  // CHECK:   scf.yield %[[V]] : i32
  // CHECK: } else {
  // CHECK:   %[[PAD:.*]] = arith.constant -1 : i32
  // CHECK:   scf.yield %[[PAD]] : i32
  // CHECK: }
  %p = tile.load_scalar %t[%j, %c0] {padding = -1.0 : f64} : !tile.desc<2, i32> -> i32
  %o = tile.make_desc %out, shape [%c1], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %v = tile.splat %p : i32 -> tensor<1xi32>
  tile.store %o[%c0], %v : !tile.desc<1, i32>, tensor<1xi32>
  return
}
