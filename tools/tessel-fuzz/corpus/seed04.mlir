func.func @shapes(%x: i32, %r: tensor<64xf32>, %k: tensor<16x128xf16>)
    -> (tensor<64xi32>, tensor<64x16xf32>, tensor<128x16xf16>, tensor<1x64xf32>) {
  %s = tile.splat %x : i32 -> tensor<64xi32>
  %i = tile.iota : tensor<64xi32>
  %q = arith.addi %s, %i : tensor<64xi32>
  %e = tile.expand_dims %r axis 1 : tensor<64xf32> -> tensor<64x1xf32>
  %e0 = tile.expand_dims %r axis 0 : tensor<64xf32> -> tensor<1x64xf32>
  %b = tile.broadcast %e : tensor<64x1xf32> -> tensor<64x16xf32>
  %t = tile.trans %k : tensor<16x128xf16> -> tensor<128x16xf16>
  return %q, %b, %t, %e0 : tensor<64xi32>, tensor<64x16xf32>, tensor<128x16xf16>, tensor<1x64xf32>
}
