func.func @compute(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x16xf32>)
    -> (tensor<64x16xf32>, tensor<64xf32>, tensor<16xf32>) {
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x16xf32>
  %m = tile.reduce max %d axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  %s = tile.reduce sum %d axis 0 : tensor<64x16xf32> -> tensor<16xf32>
  %n = tile.reduce min %d axis 0 : tensor<64x16xf32> -> tensor<16xf32>
  return %d, %m, %s : tensor<64x16xf32>, tensor<64xf32>, tensor<16xf32>
}
