// The chain rule of the attention backward through a score_mod: buildElementwiseGrad
// differentiates the score_mod's own element-wise ops (forward mode, seed 1). The test pass
// appends ∂(first result)/∂(first argument) to each marked function's results.
// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-test-elementwise-grad))' --split-input-file | FileCheck %s

// Softcap, c·tanh(s/c): the derivative (1 − tanh²)·(1/c)·c reuses the forward's tanh.
// CHECK-LABEL: func.func @softcap
// CHECK-SAME:  -> (tensor<4x8xf32>, tensor<4x8xf32>)
// CHECK:       %[[T:.*]] = math.tanh %{{.*}} : tensor<4x8xf32>
// CHECK:       %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK:       %[[DU:.*]] = arith.divf %[[ONE]], %{{.*}} : tensor<4x8xf32>
// CHECK:       %[[T2:.*]] = arith.mulf %[[T]], %[[T]]
// CHECK:       %[[SECH2:.*]] = arith.subf %{{.*}}, %[[T2]]
// CHECK:       %[[DT:.*]] = arith.mulf %[[DU]], %[[SECH2]]
// CHECK:       %[[DY:.*]] = arith.mulf %[[DT]], %{{.*}}
// CHECK-NOT:   math.tanh
// CHECK:       return %{{.*}}, %[[DY]]
func.func @softcap(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %c = arith.constant dense<2.0> : tensor<4x8xf32>
  %u = arith.divf %s, %c : tensor<4x8xf32>
  %t = math.tanh %u : tensor<4x8xf32>
  %y = arith.mulf %c, %t : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// ALiBi: a bias from index arithmetic does not depend on the score, so it costs nothing; the
// derivative of s + bias is the seed itself.
// CHECK-LABEL: func.func @alibi
// CHECK:       %[[Y:.*]] = arith.addf
// CHECK-NEXT:  %[[ONE:.*]] = arith.constant dense<1.000000e+00> : tensor<4x8xf32>
// CHECK-NEXT:  return %[[Y]], %[[ONE]]
func.func @alibi(%s: tensor<4x8xf32>, %q0: i32, %slope: f32) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %qs = tile.splat %q0 : i32 -> tensor<4xi32>
  %qi = tile.iota : tensor<4xi32>
  %q1 = arith.addi %qs, %qi : tensor<4xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<4xi32> -> tensor<4x1xi32>
  %q = tile.broadcast %q2 : tensor<4x1xi32> -> tensor<4x8xi32>
  %ki = tile.iota : tensor<8xi32>
  %k2 = tile.expand_dims %ki axis 0 : tensor<8xi32> -> tensor<1x8xi32>
  %k = tile.broadcast %k2 : tensor<1x8xi32> -> tensor<4x8xi32>
  %d = arith.subi %k, %q : tensor<4x8xi32>
  %df = arith.sitofp %d : tensor<4x8xi32> to tensor<4x8xf32>
  %sl = tile.splat %slope : f32 -> tensor<4x8xf32>
  %bias = arith.mulf %sl, %df : tensor<4x8xf32>
  %y = arith.addf %s, %bias : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// where on the score and max: the derivative of the operand taken; a constant operand's is 0.
// CHECK-LABEL: func.func @clamp_and_where
// CHECK:       %[[GT:.*]] = arith.cmpf ogt, %[[S:[^,]+]], %{{.*}}
// CHECK:       %[[M:.*]] = arith.maximumf %[[S]], %[[LO:[^ ]+]] :
// CHECK:       %[[Y:.*]] = arith.select %[[GT]], %[[M]], %{{.*}}
// CHECK:       %[[TAKES:.*]] = arith.cmpf oge, %[[S]], %[[LO]]
// CHECK:       %[[DM:.*]] = arith.select %[[TAKES]], %{{.*}}, %{{.*}}
// CHECK:       %[[DH:.*]] = arith.mulf %{{.*}}, %{{.*}}
// CHECK:       %[[DY:.*]] = arith.select %[[GT]], %[[DM]], %[[DH]]
// CHECK:       return %[[Y]], %[[DY]]
func.func @clamp_and_where(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %zero = arith.constant dense<0.0> : tensor<4x8xf32>
  %lo = arith.constant dense<-1.5> : tensor<4x8xf32>
  %half = arith.constant dense<0.5> : tensor<4x8xf32>
  %gt = arith.cmpf ogt, %s, %zero : tensor<4x8xf32>
  %m = arith.maximumf %s, %lo : tensor<4x8xf32>
  %h = arith.mulf %s, %half : tensor<4x8xf32>
  %y = arith.select %gt, %m, %h : tensor<4x8xi1>, tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// exp2 and log: y·ln2·s' and s'/s.
// CHECK-LABEL: func.func @exp2_log
// CHECK:       %[[E:.*]] = math.exp2 %{{.*}} :
// CHECK:       %[[L:.*]] = math.log %[[E]] :
// CHECK:       %[[D1:.*]] = arith.mulf %{{.*}}, %[[E]]
// CHECK:       %[[LN2:.*]] = arith.constant dense<0.69314{{.*}}> : tensor<4x8xf32>
// CHECK:       %[[D2:.*]] = arith.mulf %[[D1]], %[[LN2]]
// CHECK:       %[[D3:.*]] = arith.divf %[[D2]], %[[E]]
// CHECK:       return %[[L]], %[[D3]]
func.func @exp2_log(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %e = math.exp2 %s : tensor<4x8xf32>
  %l = math.log %e : tensor<4x8xf32>
  return %l : tensor<4x8xf32>
}

// -----

// A score_mod that ignores the score has derivative 0.
// CHECK-LABEL: func.func @constant
// CHECK:       %[[Z:.*]] = arith.constant dense<0.000000e+00> : tensor<4x8xf32>
// CHECK:       return %{{.*}}, %[[Z]]
func.func @constant(%s: tensor<4x8xf32>, %b: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %y = math.tanh %b : tensor<4x8xf32>
  return %y : tensor<4x8xf32>
}

// -----

// sin and cos: cos(a)·a' and −sin(a)·a': cos(sin s) gives −sin(sin s)·cos(s).
// CHECK-LABEL: func.func @sin_cos
// CHECK:       %[[S:.*]] = math.sin %[[X:[^ ]*]] :
// CHECK:       %[[C:.*]] = math.cos %[[S]] :
// CHECK:       %[[DS:.*]] = math.cos %[[X]] :
// CHECK:       %[[SS:.*]] = math.sin %[[S]] :
// CHECK:       %[[N:.*]] = arith.negf %[[SS]] :
// CHECK:       %[[D:.*]] = arith.mulf %{{.*}}, %[[N]] :
// CHECK:       return %[[C]], %[[D]]
func.func @sin_cos(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %a = math.sin %s : tensor<4x8xf32>
  %b = math.cos %a : tensor<4x8xf32>
  return %b : tensor<4x8xf32>
}
