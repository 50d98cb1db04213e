func.func @softmax(%s: tensor<64x16xf32>, %n: i32) -> tensor<64x16xf32> {
  %p, %lse = tile.softmax %s axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<64x16xf32>
  %r = scf.for %j = %c0 to %n step %c16 iter_args(%acc = %zero) -> (tensor<64x16xf32>) : i32 {
    %q, %l = tile.softmax %s axis 1 streamed : tensor<64x16xf32> -> tensor<64xf32>
    %a = arith.addf %acc, %q : tensor<64x16xf32>
    scf.yield %a : tensor<64x16xf32>
  }
  return %r : tensor<64x16xf32>
}
