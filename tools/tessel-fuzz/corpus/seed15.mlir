func.func private @twice(%t: tensor<16xf32>) -> tensor<16xf32> {
  %r = arith.addf %t, %t : tensor<16xf32>
  return %r : tensor<16xf32>
}
