// tile.load_scalar on the interpreter: in-range indices read the element, out-of-range ones
// (negative, or past the descriptor's shape, on any axis) give the padding without a read.
// RUN: tessel-run %s --kernel=scalars --arg=zeros:8 --arg=zeros:6 --print-args | FileCheck %s

// The table holds 0 10 20 ... 70 as a 2x4 view [[0 10 20 30] [40 50 60 70]]; each read lands
// in out: (1, 2) → 60, (0, 0) → 0, (-1, 0), (0, 4), (2, 0) → the padding -7; a 1-D view of 3
// elements at index 5 → -7 too, although the buffer has an element 5.
// CHECK: arg #1 (i32, 6 elements): 60 0 -7 -7 -7 -7
func.func @scalars(%table: !tile.ptr<i32>, %out: !tile.ptr<i32>) {
  %cm1 = arith.constant -1 : i32
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c5 = arith.constant 5 : i32
  %c6 = arith.constant 6 : i32
  %c8 = arith.constant 8 : i32
  %c10 = arith.constant 10 : i32
  %flat = tile.make_desc %table, shape [%c8], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %iota = tile.iota : tensor<8xi32>
  %ten = tile.splat %c10 : i32 -> tensor<8xi32>
  %vals = arith.muli %iota, %ten : tensor<8xi32>
  tile.store %flat[%c0], %vals : !tile.desc<1, i32>, tensor<8xi32>
  %t = tile.make_desc %table, shape [%c2, %c4], strides [%c4, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  %short = tile.make_desc %table, shape [%c3], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %s0 = tile.load_scalar %t[%c1, %c2] {padding = -7.0 : f64} : !tile.desc<2, i32> -> i32
  %s1 = tile.load_scalar %t[%c0, %c0] {padding = -7.0 : f64} : !tile.desc<2, i32> -> i32
  %s2 = tile.load_scalar %t[%cm1, %c0] {padding = -7.0 : f64} : !tile.desc<2, i32> -> i32
  %s3 = tile.load_scalar %t[%c0, %c4] {padding = -7.0 : f64} : !tile.desc<2, i32> -> i32
  %s4 = tile.load_scalar %t[%c2, %c0] {padding = -7.0 : f64} : !tile.desc<2, i32> -> i32
  %s5 = tile.load_scalar %short[%c5] {padding = -7.0 : f64} : !tile.desc<1, i32> -> i32
  %o = tile.make_desc %out, shape [%c6], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %v0 = tile.splat %s0 : i32 -> tensor<1xi32>
  %v1 = tile.splat %s1 : i32 -> tensor<1xi32>
  %v2 = tile.splat %s2 : i32 -> tensor<1xi32>
  %v3 = tile.splat %s3 : i32 -> tensor<1xi32>
  %v4 = tile.splat %s4 : i32 -> tensor<1xi32>
  %v5 = tile.splat %s5 : i32 -> tensor<1xi32>
  tile.store %o[%c0], %v0 : !tile.desc<1, i32>, tensor<1xi32>
  tile.store %o[%c1], %v1 : !tile.desc<1, i32>, tensor<1xi32>
  tile.store %o[%c2], %v2 : !tile.desc<1, i32>, tensor<1xi32>
  tile.store %o[%c3], %v3 : !tile.desc<1, i32>, tensor<1xi32>
  tile.store %o[%c4], %v4 : !tile.desc<1, i32>, tensor<1xi32>
  tile.store %o[%c5], %v5 : !tile.desc<1, i32>, tensor<1xi32>
  return
}
