func.func @scale_bf16(%x: !tile.ptr<bf16>, %y: !tile.ptr<bf16>, %s: f32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c6 = arith.constant 6 : i32
  %dx = tile.make_desc %x, shape [%c6], strides [%c1] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  %dy = tile.make_desc %y, shape [%c6], strides [%c1] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  %t = tile.load %dx[%c0] : !tile.desc<1, bf16> -> tensor<8xbf16>
  %sb = arith.truncf %s : f32 to bf16
  %st = tile.splat %sb : bf16 -> tensor<8xbf16>
  %r = arith.mulf %t, %st : tensor<8xbf16>
  tile.store %dy[%c0], %r : !tile.desc<1, bf16>, tensor<8xbf16>
  return
}
