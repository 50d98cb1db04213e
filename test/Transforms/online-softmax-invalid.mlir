// The rewrite refuses, and says why, when the softmax is not consumed by a sum over the
// streamed axis.
// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-online-softmax))' --split-input-file --verify-diagnostics

func.func @consumer_is_not_a_dot(%s: tensor<16x8xf32>, %n: i32) -> tensor<16x8xf32> {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %r = scf.for %j = %c0 to %n step %c8 iter_args(%a = %s) -> (tensor<16x8xf32>) : i32 {
    // expected-error @+1 {{cannot be made online: its result is used by 'arith.addf', but only the A operand of a tile.dot (a sum over the streamed axis) can be rescaled block by block}}
    %p, %l = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    %an = arith.addf %a, %p : tensor<16x8xf32>
    scf.yield %an : tensor<16x8xf32>
  }
  return %r : tensor<16x8xf32>
}

// -----

func.func @two_uses(%s: tensor<16x8xf32>, %v: tensor<8x4xf32>, %n: i32) -> (tensor<16x4xf32>, tensor<16x8xf32>) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<16x4xf32>
  %r:2 = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo, %b = %s) -> (tensor<16x4xf32>, tensor<16x8xf32>) : i32 {
    // expected-error @+1 {{cannot be made online: its result must flow only into one tile.dot (the product with V), but it has 2 uses}}
    %p, %l = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    %an = tile.dot %p, %v, %a : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
    scf.yield %an, %p : tensor<16x4xf32>, tensor<16x8xf32>
  }
  return %r#0, %r#1 : tensor<16x4xf32>, tensor<16x8xf32>
}

// -----

func.func @softmax_as_b_operand(%s: tensor<8x8xf32>, %w: tensor<8x8xf32>, %n: i32) -> tensor<8x8xf32> {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<8x8xf32>
  %r = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo) -> (tensor<8x8xf32>) : i32 {
    // expected-error @+1 {{only the A operand of a tile.dot}}
    %p, %l = tile.softmax %s axis 1 streamed : tensor<8x8xf32> -> tensor<8xf32>
    %an = tile.dot %w, %p, %a : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    scf.yield %an : tensor<8x8xf32>
  }
  return %r : tensor<8x8xf32>
}

// -----

func.func @accumulator_not_carried(%s: tensor<16x8xf32>, %v: tensor<8x4xf32>, %n: i32) -> tensor<16x4xf32> {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<16x4xf32>
  %r = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo) -> (tensor<16x4xf32>) : i32 {
    %p, %l = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    // expected-error @+1 {{accumulates into a value that is not carried by the loop}}
    %an = tile.dot %p, %v, %zo : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
    scf.yield %an : tensor<16x4xf32>
  }
  return %r : tensor<16x4xf32>
}

// -----

func.func @accumulator_read_elsewhere(%s: tensor<16x8xf32>, %v: tensor<8x4xf32>, %n: i32) -> tensor<16x4xf32> {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<16x4xf32>
  %r = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo) -> (tensor<16x4xf32>) : i32 {
    %p, %l = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    // expected-error @+1 {{must be the only reader of its loop-carried accumulator}}
    %an = tile.dot %p, %v, %a : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
    %twice = arith.addf %an, %a : tensor<16x4xf32>
    scf.yield %twice : tensor<16x4xf32>
  }
  return %r : tensor<16x4xf32>
}

// -----

func.func @lse_used_in_loop(%s: tensor<16x8xf32>, %v: tensor<8x4xf32>, %n: i32) -> tensor<16x4xf32> {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<16x4xf32>
  %r = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo) -> (tensor<16x4xf32>) : i32 {
    // expected-error @+1 {{its log-sum-exp is only known after the loop, so it may only be yielded into an unused loop-carried value, not used by 'tile.expand_dims'}}
    %p, %l = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    %le = tile.expand_dims %l axis 1 : tensor<16xf32> -> tensor<16x1xf32>
    %an = tile.dot %p, %v, %a : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
    scf.yield %an : tensor<16x4xf32>
  }
  return %r : tensor<16x4xf32>
}

// -----

func.func @axis_zero(%s: tensor<8x8xf32>, %v: tensor<8x8xf32>, %n: i32) -> tensor<8x8xf32> {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<8x8xf32>
  %r = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo) -> (tensor<8x8xf32>) : i32 {
    // expected-error @+1 {{cannot be streamed: the online rewrite handles an f32 score tile normalised along axis 1}}
    %p, %l = tile.softmax %s axis 0 streamed : tensor<8x8xf32> -> tensor<8xf32>
    %an = tile.dot %p, %v, %a : tensor<8x8xf32>, tensor<8x8xf32> -> tensor<8x8xf32>
    scf.yield %an : tensor<8x8xf32>
  }
  return %r : tensor<8x8xf32>
}

// -----

func.func @two_softmaxes(%s: tensor<16x8xf32>, %v: tensor<8x4xf32>, %n: i32) -> (tensor<16x4xf32>, tensor<16x4xf32>) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zo = arith.constant dense<0.0> : tensor<16x4xf32>
  %r:2 = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo, %b = %zo) -> (tensor<16x4xf32>, tensor<16x4xf32>) : i32 {
    %p, %l = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    // expected-error @+1 {{is the second streamed softmax in one loop}}
    %q, %k = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    %an = tile.dot %p, %v, %a : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
    %bn = tile.dot %q, %v, %b : tensor<16x8xf32>, tensor<8x4xf32> -> tensor<16x4xf32>
    scf.yield %an, %bn : tensor<16x4xf32>, tensor<16x4xf32>
  }
  return %r#0, %r#1 : tensor<16x4xf32>, tensor<16x4xf32>
}
