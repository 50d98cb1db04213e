func.func @memory(%p: !tile.ptr<bf16>, %n: i32, %off: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %p[%off], shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %d1 = tile.make_desc %p, shape [%n], strides [%c1] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  %t = tile.load %d[%off, %c0] : !tile.desc<2, bf16> -> tensor<32x64xbf16>
  %v = tile.load %d1[%off] {padding = 0xFFF0000000000000 : f64} : !tile.desc<1, bf16> -> tensor<32xbf16>
  tile.store %d[%off, %c0], %t : !tile.desc<2, bf16>, tensor<32x64xbf16>
  %m = arith.constant dense<true> : tensor<32xi1>
  tile.store %d1[%off], %v mask %m : !tile.desc<1, bf16>, tensor<32xbf16>, tensor<32xi1>
  return
}
