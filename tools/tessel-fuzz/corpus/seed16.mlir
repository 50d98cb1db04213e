func.func @axpy(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32, %a: f32) {
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %pid = tile.program_id 0 : i32
  %off = arith.muli %pid, %c16 : i32
  %dx = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %dy = tile.make_desc %y, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %tx = tile.load %dx[%off] : !tile.desc<1, f32> -> tensor<16xf32>
  %ty = tile.load %dy[%off] : !tile.desc<1, f32> -> tensor<16xf32>
  %as = tile.splat %a : f32 -> tensor<16xf32>
  %ax = arith.mulf %as, %tx : tensor<16xf32>
  %y2 = func.call @twice(%ty) : (tensor<16xf32>) -> tensor<16xf32>
  %r = arith.addf %ax, %y2 : tensor<16xf32>
  tile.store %dy[%off], %r : !tile.desc<1, f32>, tensor<16xf32>
  return
}
