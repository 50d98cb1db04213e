func.func @shapes(%out: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %c6 = arith.constant 6 : i32
  %m = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = tile.trans %m : tensor<2x3xf32> -> tensor<3x2xf32>
  %s = tile.reduce sum %t axis 1 : tensor<3x2xf32> -> tensor<3xf32>
  %mx = tile.reduce max %m axis 1 : tensor<2x3xf32> -> tensor<2xf32>
  %e = tile.expand_dims %mx axis 0 : tensor<2xf32> -> tensor<1x2xf32>
  %b = tile.broadcast %e : tensor<1x2xf32> -> tensor<3x2xf32>
  %d = tile.make_desc %out, shape [%c6], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %d2 = tile.make_desc %out[%c3], shape [%c1, %c3], strides [%c3, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  tile.store %d[%c0], %s : !tile.desc<1, f32>, tensor<3xf32>
  tile.store %d2[%c0, %c0], %b : !tile.desc<2, f32>, tensor<3x2xf32>
  return
}
