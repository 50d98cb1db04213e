// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-separate-bias{min-rows=1},canonicalize,cse))' --split-input-file | FileCheck %s

// ALiBi in the online softmax's form: t = (s + slope·(kv − q))·log2e, the block's row max and
// exp2(t − m). The bias becomes a row vector (the loop's variables: j − q0 − i) and a column
// vector (the block's own offsets), each converted once; the column part joins the score, the
// row part goes around the max and into the subtrahend.
// CHECK-LABEL: func.func @alibi
// CHECK-SAME:  (%[[S:.*]]: tensor<4x8xf32>, %[[Q0:.*]]: i32, %[[J:.*]]: i32, %[[SLOPE:.*]]: f32, %[[M:.*]]: tensor<4xf32>)
// CHECK-NOT:   tensor<4x8xi32>
// CHECK:       %[[BASE:.*]] = arith.subi %[[J]], %[[Q0]] : i32
// CHECK:       %[[RI:.*]] = arith.subi {{.*}} : tensor<4xi32>
// CHECK:       %[[RF:.*]] = arith.sitofp %[[RI]] : tensor<4xi32> to tensor<4xf32>
// CHECK:       %[[CI:.*]] = tile.iota : tensor<8xi32>
// CHECK:       %[[CF:.*]] = arith.sitofp %[[CI]] : tensor<8xi32> to tensor<8xf32>
// CHECK:       %[[ROW:.*]] = arith.mulf %[[RF]], {{.*}} : tensor<4xf32>
// CHECK:       %[[COL:.*]] = arith.mulf %[[CF]], {{.*}} : tensor<8xf32>
// CHECK:       %[[ST:.*]] = arith.mulf %[[S]], {{.*}} : tensor<4x8xf32>
// CHECK:       %[[COLL:.*]] = arith.mulf %[[COL]], {{.*}} : tensor<8xf32>
// CHECK:       %[[CE:.*]] = tile.expand_dims %[[COLL]] axis 0
// CHECK:       %[[CB:.*]] = tile.broadcast %[[CE]]
// CHECK:       %[[U:.*]] = arith.addf %[[ST]], %[[CB]] : tensor<4x8xf32>
// CHECK:       %[[ROWL:.*]] = arith.mulf %[[ROW]], {{.*}} : tensor<4xf32>
// CHECK:       %[[MU:.*]] = tile.reduce max %[[U]] axis 1
// CHECK:       %[[MX:.*]] = arith.addf %[[MU]], %[[ROWL]] : tensor<4xf32>
// CHECK:       %[[SHIFT:.*]] = arith.subf %[[M]], %[[ROWL]] : tensor<4xf32>
// CHECK:       %[[SE:.*]] = tile.expand_dims %[[SHIFT]] axis 1
// CHECK:       %[[SB:.*]] = tile.broadcast %[[SE]]
// CHECK:       %[[X:.*]] = arith.subf %[[U]], %[[SB]] : tensor<4x8xf32>
// CHECK:       %[[E:.*]] = math.exp2 %[[X]]
// CHECK:       return %[[MX]], %[[E]]
func.func @alibi(%s: tensor<4x8xf32>, %q0: i32, %j: i32, %slope: f32, %m: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %iq = tile.iota : tensor<4xi32>
  %qs = tile.splat %q0 : i32 -> tensor<4xi32>
  %q1 = arith.addi %qs, %iq : tensor<4xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<4xi32> -> tensor<4x1xi32>
  %q = tile.broadcast %q2 : tensor<4x1xi32> -> tensor<4x8xi32>
  %ik = tile.iota : tensor<8xi32>
  %ks = tile.splat %j : i32 -> tensor<8xi32>
  %k1 = arith.addi %ks, %ik : tensor<8xi32>
  %k2 = tile.expand_dims %k1 axis 0 : tensor<8xi32> -> tensor<1x8xi32>
  %k = tile.broadcast %k2 : tensor<1x8xi32> -> tensor<4x8xi32>
  %d = arith.subi %k, %q : tensor<4x8xi32>
  %df = arith.sitofp %d : tensor<4x8xi32> to tensor<4x8xf32>
  %sl = tile.splat %slope : f32 -> tensor<4x8xf32>
  %b = arith.mulf %sl, %df : tensor<4x8xf32>
  %t0 = arith.addf %s, %b : tensor<4x8xf32>
  %log2e = arith.constant dense<1.44269502> : tensor<4x8xf32>
  %t = arith.mulf %t0, %log2e : tensor<4x8xf32>
  %mx = tile.reduce max %t axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  %m2 = tile.expand_dims %m axis 1 : tensor<4xf32> -> tensor<4x1xf32>
  %mb = tile.broadcast %m2 : tensor<4x1xf32> -> tensor<4x8xf32>
  %x = arith.subf %t, %mb : tensor<4x8xf32>
  %e = math.exp2 %x : tensor<4x8xf32>
  return %mx, %e : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// A masked block: both parts move out of the -inf select (−inf + r = −inf), a bias subtracted
// from the score is added negated.
// CHECK-LABEL: func.func @masked_and_subtracted
// CHECK-NOT:   arith.sitofp {{.*}} : tensor<4x8xi32>
// CHECK:       %[[SEL:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : tensor<4x8xi1>, tensor<4x8xf32>
// CHECK:       %[[U:.*]] = arith.addf %[[SEL]], %{{.*}} : tensor<4x8xf32>
// CHECK:       tile.reduce max %[[U]] axis 1
// CHECK:       arith.subf %[[U]], %{{.*}} : tensor<4x8xf32>
func.func @masked_and_subtracted(%s: tensor<4x8xf32>, %q0: i32, %j: i32, %slope: f32, %m: tensor<4xf32>) -> (tensor<4xf32>, tensor<4x8xf32>) {
  %iq = tile.iota : tensor<4xi32>
  %qs = tile.splat %q0 : i32 -> tensor<4xi32>
  %q1 = arith.addi %qs, %iq : tensor<4xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<4xi32> -> tensor<4x1xi32>
  %q = tile.broadcast %q2 : tensor<4x1xi32> -> tensor<4x8xi32>
  %ik = tile.iota : tensor<8xi32>
  %ks = tile.splat %j : i32 -> tensor<8xi32>
  %k1 = arith.addi %ks, %ik : tensor<8xi32>
  %k2 = tile.expand_dims %k1 axis 0 : tensor<8xi32> -> tensor<1x8xi32>
  %k = tile.broadcast %k2 : tensor<1x8xi32> -> tensor<4x8xi32>
  %causal = arith.cmpi sge, %q, %k : tensor<4x8xi32>
  %d = arith.subi %q, %k : tensor<4x8xi32>
  %df = arith.sitofp %d : tensor<4x8xi32> to tensor<4x8xf32>
  %sl = tile.splat %slope : f32 -> tensor<4x8xf32>
  %b = arith.mulf %df, %sl : tensor<4x8xf32>
  %t0 = arith.subf %s, %b : tensor<4x8xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<4x8xf32>
  %t = arith.select %causal, %t0, %ninf : tensor<4x8xi1>, tensor<4x8xf32>
  %mx = tile.reduce max %t axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  %m2 = tile.expand_dims %m axis 1 : tensor<4xf32> -> tensor<4x1xf32>
  %mb = tile.broadcast %m2 : tensor<4x1xf32> -> tensor<4x8xf32>
  %x = arith.subf %t, %mb : tensor<4x8xf32>
  %e = math.exp2 %x : tensor<4x8xf32>
  return %mx, %e : tensor<4xf32>, tensor<4x8xf32>
}

// -----

// An index tile that is not affine (a product of the two indices) is converted per element.
// CHECK-LABEL: func.func @not_affine
// CHECK:       arith.sitofp {{.*}} : tensor<4x8xi32> to tensor<4x8xf32>
func.func @not_affine(%s: tensor<4x8xf32>) -> tensor<4x8xf32> {
  %iq = tile.iota : tensor<4xi32>
  %q2 = tile.expand_dims %iq axis 1 : tensor<4xi32> -> tensor<4x1xi32>
  %q = tile.broadcast %q2 : tensor<4x1xi32> -> tensor<4x8xi32>
  %ik = tile.iota : tensor<8xi32>
  %k2 = tile.expand_dims %ik axis 0 : tensor<8xi32> -> tensor<1x8xi32>
  %k = tile.broadcast %k2 : tensor<1x8xi32> -> tensor<4x8xi32>
  %d = arith.muli %q, %k : tensor<4x8xi32>
  %df = arith.sitofp %d : tensor<4x8xi32> to tensor<4x8xf32>
  %t = arith.addf %s, %df : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}
