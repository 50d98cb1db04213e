// What buildElementwiseGrad refuses, at the op that cannot be differentiated: ops outside its
// list, and tile ops that move or combine elements of the score (a score_mod must be
// element-wise for dS_raw = dS·∂mod/∂s to hold).
// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-test-elementwise-grad))' --split-input-file --verify-diagnostics

func.func @remainder(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %c = arith.constant dense<2.0> : tensor<4x8xf32>
  // expected-error @+1 {{cannot differentiate 'arith.remf' with respect to the score: not supported}}
  %y = arith.remf %s, %c : tensor<4x8xf32>
  // expected-note @+1 {{the derivative of the score_mod is needed here}}
  return %y : tensor<4x8xf32>
}

// -----

func.func @arctangent(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  // expected-error @+1 {{cannot differentiate 'math.atan'}}
  %y = math.atan %s : tensor<4x8xf32>
  // expected-note @+1 {{needed here}}
  return %y : tensor<4x8xf32>
}

// -----

func.func @transposed(%s: tensor<8x8xf32>) -> tensor<8x8xf32> attributes {tile.test_elementwise_grad} {
  // expected-error @+1 {{cannot differentiate 'tile.trans' with respect to the score: it is not element-wise}}
  %t = tile.trans %s : tensor<8x8xf32> -> tensor<8x8xf32>
  %y = arith.addf %s, %t : tensor<8x8xf32>
  // expected-note @+1 {{needed here}}
  return %y : tensor<8x8xf32>
}

// -----

func.func @row_max(%s: tensor<4x8xf32>) -> tensor<4x8xf32> attributes {tile.test_elementwise_grad} {
  %m = tile.reduce max %s axis 1 : tensor<4x8xf32> -> tensor<4xf32>
  %m2 = tile.expand_dims %m axis 1 : tensor<4xf32> -> tensor<4x1xf32>
  // expected-error @+1 {{cannot differentiate 'tile.broadcast'}}
  %mb = tile.broadcast %m2 : tensor<4x1xf32> -> tensor<4x8xf32>
  %y = arith.subf %s, %mb : tensor<4x8xf32>
  // expected-note @+1 {{needed here}}
  return %y : tensor<4x8xf32>
}
