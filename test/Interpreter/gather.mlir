// tile.gather on the interpreter: one element per index, scalars shared, out-of-shape indices
// (negative, past the end of an axis) read the padding and never the buffer.
// RUN: tessel-run %s --kernel=gather_rows --arg=zeros:6 --arg=zeros:8 --print-args | FileCheck %s
// RUN: not tessel-run %s --kernel=gather_past_buffer --arg=zeros:4 2>&1 | FileCheck %s --check-prefix=OOB

// table is [[0 1 2] [10 11 12]] (written first); out[k] = table[row[k], col[k]] with cols -1 0 1 2
// in row 1, then 2 3 4 5 in row 0: -1 and 3.. are out of the shape (col 3 of row 0 would be
// table[1, 0] in memory) and read the padding -5.
// CHECK: arg #0 (i32, 6 elements): 0 1 2 10 11 12
// CHECK: arg #1 (i32, 8 elements): -5 10 11 12 2 -5 -5 -5
func.func @gather_rows(%table: !tile.ptr<i32>, %out: !tile.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %d = tile.make_desc %table, shape [%c2, %c3], strides [%c3, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  // Fill the table first: table[r, c] = 10 r + c.
  %ten = arith.constant dense<10> : tensor<2x3xi32>
  %r = tile.iota : tensor<2xi32>
  %c = tile.iota : tensor<3xi32>
  %r2 = tile.expand_dims %r axis 1 : tensor<2xi32> -> tensor<2x1xi32>
  %c2d = tile.expand_dims %c axis 0 : tensor<3xi32> -> tensor<1x3xi32>
  %rb = tile.broadcast %r2 : tensor<2x1xi32> -> tensor<2x3xi32>
  %cb = tile.broadcast %c2d : tensor<1x3xi32> -> tensor<2x3xi32>
  %r10 = arith.muli %rb, %ten : tensor<2x3xi32>
  %vals = arith.addi %r10, %cb : tensor<2x3xi32>
  tile.store %d[%c0, %c0], %vals : !tile.desc<2, i32>, tensor<2x3xi32>
  %iota = tile.iota : tensor<8xi32>
  %one = arith.constant dense<1> : tensor<8xi32>
  %two = arith.constant dense<2> : tensor<8xi32>
  %four = arith.constant dense<4> : tensor<8xi32>
  %cols0 = arith.subi %iota, %one : tensor<8xi32>
  %lt4 = arith.cmpi slt, %iota, %four : tensor<8xi32>
  %wrap = arith.subi %iota, %two : tensor<8xi32>
  %cols = arith.select %lt4, %cols0, %wrap : tensor<8xi1>, tensor<8xi32>
  %zero = arith.constant dense<0> : tensor<8xi32>
  %rows = arith.select %lt4, %one, %zero : tensor<8xi1>, tensor<8xi32>
  %g = tile.gather %d[%rows, %cols] {padding = -5.0 : f64} : !tile.desc<2, i32>, tensor<8xi32>, tensor<8xi32> -> tensor<8xi32>
  %o = tile.make_desc %out, shape [%c8], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  tile.store %o[%c0], %g : !tile.desc<1, i32>, tensor<8xi32>
  return
}

// A descriptor larger than its buffer: in-shape indices past the buffer are a located error.
// OOB: gather.mlir:[[@LINE+6]]:8: error: 'tile.gather' op reads element 4 of argument #0, a buffer of 4 elements
func.func @gather_past_buffer(%x: !tile.ptr<f32>) {
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %d = tile.make_desc %x, shape [%c8], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %i = tile.iota : tensor<8xi32>
  %g = tile.gather %d[%i] : !tile.desc<1, f32>, tensor<8xi32> -> tensor<8xf32>
  return
}
