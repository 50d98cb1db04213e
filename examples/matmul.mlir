// Tiled matmul C = A·B (f16 in, f32 out), one 32×32 block of C per program instance, walking K
// in steps of 16 with the accumulator carried by scf.for. Partial blocks at the edges are padded
// with 0 on load and dropped on store.
//
//   launch: grid = (ceil(m / 32), ceil(n / 32), 1), block = (128, 1, 1)
//   arguments: a (m×k), b (k×n), c (m×n), row-major; m, n, k (i32)
func.func @matmul(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>,
                  %m: i32, %n: i32, %k: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %c32 = arith.constant 32 : i32
  %pm = tile.program_id 0 : i32
  %pn = tile.program_id 1 : i32
  %row = arith.muli %pm, %c32 : i32
  %col = arith.muli %pn, %c32 : i32
  %ad = tile.make_desc %a, shape [%m, %k], strides [%k, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %bd = tile.make_desc %b, shape [%k, %n], strides [%n, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%m, %n], strides [%n, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %zero = arith.constant dense<0.0> : tensor<32x32xf32>
  %acc = scf.for %kk = %c0 to %k step %c16 iter_args(%acc0 = %zero) -> (tensor<32x32xf32>) : i32 {
    %at = tile.load %ad[%row, %kk] : !tile.desc<2, f16> -> tensor<32x16xf16>
    %bt = tile.load %bd[%kk, %col] : !tile.desc<2, f16> -> tensor<16x32xf16>
    %next = tile.dot %at, %bt, %acc0 : tensor<32x16xf16>, tensor<16x32xf16> -> tensor<32x32xf32>
    scf.yield %next : tensor<32x32xf32>
  }
  tile.store %cd[%row, %col], %acc : !tile.desc<2, f32>, tensor<32x32xf32>
  return
}
