func.func @rowsoftmax(%x: !tile.ptr<f32>, %p: !tile.ptr<f32>, %lse: !tile.ptr<f32>, %rows: i32, %cols: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %pid = tile.program_id 0 : i32
  %row = arith.muli %pid, %c8 : i32
  %dx = tile.make_desc %x, shape [%rows, %cols], strides [%cols, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dp = tile.make_desc %p, shape [%rows, %cols], strides [%cols, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dl = tile.make_desc %lse, shape [%rows], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %dx[%row, %c0] {padding = 0xFFF0000000000000 : f64} : !tile.desc<2, f32> -> tensor<8x64xf32>
  %s, %l = tile.softmax %t axis 1 : tensor<8x64xf32> -> tensor<8xf32>
  tile.store %dp[%row, %c0], %s : !tile.desc<2, f32>, tensor<8x64xf32>
  tile.store %dl[%row], %l : !tile.desc<1, f32>, tensor<8xf32>
  return
}
