// Row softmax, the one-block kernel of tessel's examples: each program instance normalises 16 rows
// of an n×d f16 matrix (d ≤ 64), writes the probabilities (f16) and every row's natural
// log-sum-exp (f32). Columns past d load as -inf, so they are masked and come out 0; rows past n
// are neither read nor written.
//
//   tesselc examples/softmax_rows.mlir --chip=sm_90a --emit=ptx -o softmax_rows.ptx
//   launch: grid = (ceil(n / 16), 1, 1), block = (128, 1, 1)
//   arguments: x, p, lse (device pointers), n, d (i32)
func.func @softmax_rows(%x: !tile.ptr<f16>, %p: !tile.ptr<f16>, %lse: !tile.ptr<f32>,
                        %n: i32, %d: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %pid = tile.program_id 0 : i32
  %row = arith.muli %pid, %c16 : i32
  %xd = tile.make_desc %x, shape [%n, %d], strides [%d, %c1]
      : !tile.ptr<f16> -> !tile.desc<2, f16>
  %pd = tile.make_desc %p, shape [%n, %d], strides [%d, %c1]
      : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %xd[%row, %c0] {padding = 0xFFF0000000000000 : f64}
      : !tile.desc<2, f16> -> tensor<16x64xf16>
  %s = arith.extf %t : tensor<16x64xf16> to tensor<16x64xf32>
  %probs, %rowlse = tile.softmax %s axis 1 : tensor<16x64xf32> -> tensor<16xf32>
  %ph = arith.truncf %probs : tensor<16x64xf32> to tensor<16x64xf16>
  tile.store %pd[%row, %c0], %ph : !tile.desc<2, f16>, tensor<16x64xf16>
  tile.store %ld[%row], %rowlse : !tile.desc<1, f32>, tensor<16xf32>
  return
}
