func.func @matmul(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %m: i32, %n: i32, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %pm = tile.program_id 0 : i32
  %pn = tile.program_id 1 : i32
  %row = arith.muli %pm, %c16 : i32
  %col = arith.muli %pn, %c16 : i32
  %da = tile.make_desc %a, shape [%m, %k], strides [%k, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %db = tile.make_desc %b, shape [%k, %n], strides [%n, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dc = tile.make_desc %c, shape [%m, %n], strides [%n, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %zero = arith.constant dense<0.0> : tensor<16x16xf32>
  %acc = scf.for %kk = %c0 to %k step %c16 iter_args(%acc0 = %zero) -> (tensor<16x16xf32>) : i32 {
    %ta = tile.load %da[%row, %kk] : !tile.desc<2, f16> -> tensor<16x16xf16>
    %tb = tile.load %db[%kk, %col] : !tile.desc<2, f16> -> tensor<16x16xf16>
    %r = tile.dot %ta, %tb, %acc0 : tensor<16x16xf16>, tensor<16x16xf16> -> tensor<16x16xf32>
    scf.yield %r : tensor<16x16xf32>
  }
  tile.store %dc[%row, %col], %acc : !tile.desc<2, f32>, tensor<16x16xf32>
  return
}
