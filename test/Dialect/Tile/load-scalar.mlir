// tile.load_scalar round-trips, with and without a padding, for integer and float descriptors.
// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// CHECK-LABEL: func.func @cu_seqlens
func.func @cu_seqlens(%p: !tile.ptr<i32>, %n: i32, %b: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %p, shape [%n], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  // CHECK: tile.load_scalar %{{.*}}[%{{.*}}] : !tile.desc<1, i32> -> i32
  %s = tile.load_scalar %d[%b] : !tile.desc<1, i32> -> i32
  return %s : i32
}

// CHECK-LABEL: func.func @block_table
func.func @block_table(%p: !tile.ptr<i32>, %b: i32, %j: i32, %m: i32) -> i32 {
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %p, shape [%b, %m], strides [%m, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  // CHECK: tile.load_scalar %{{.*}}[%{{.*}}, %{{.*}}] {padding = -1.000000e+00 : f64} : !tile.desc<2, i32> -> i32
  %s = tile.load_scalar %d[%b, %j] {padding = -1.0 : f64} : !tile.desc<2, i32> -> i32
  return %s : i32
}

// CHECK-LABEL: func.func @float_scalar
func.func @float_scalar(%p: !tile.ptr<f32>, %n: i32, %i: i32) -> f32 {
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %p, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  // CHECK: tile.load_scalar %{{.*}}[%{{.*}}] : !tile.desc<1, f32> -> f32
  %s = tile.load_scalar %d[%i] : !tile.desc<1, f32> -> f32
  return %s : f32
}
