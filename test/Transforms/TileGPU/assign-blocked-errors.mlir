// What tilegpu-assign-blocked refuses, and convert-tile-to-blocked on layouts that do not fit
// the block: the reason, located.
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-blocked --verify-diagnostics
// RUN: tessel-opt %s --split-input-file --convert-tile-to-blocked --verify-diagnostics

// Row sums read back per column: the registers hold them per row.
func.func @row_sums_as_columns(%x: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
  // expected-error @+1 {{is a row reduction whose result is needed per column}}
  %s = tile.reduce sum %t axis 1 : tensor<64x64xf32> -> tensor<64xf32>
  %c = tile.expand_dims %s axis 0 : tensor<64xf32> -> tensor<1x64xf32>
  %cb = tile.broadcast %c : tensor<1x64xf32> -> tensor<64x64xf32>
  %u = arith.addf %t, %cb : tensor<64x64xf32>
  tile.store %d[%c0, %c0], %u : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// -----

// A layout written by hand whose threads cannot split the rows evenly (100 floats: 25 vectors
// of 4 for 32 threads a row). The lowering refuses it ("which 32 threads a row cannot split
// evenly"); the assignment pass, replacing it, refuses the shape for 128 threads as well.
#bl = #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 32>
// expected-error-re @+1 {{has rows of 100 elements, which {{(32 threads a row|128 threads)}} cannot split evenly in vectors of 4}}
func.func @uneven(%x: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %c100 = arith.constant 100 : i32
  %d = tile.make_desc %x, shape [%c4, %c100], strides [%c100, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<4x100xf32, #bl>
  tile.store %d[%c0, %c0], %t : !tile.desc<2, f32>, tensor<4x100xf32, #bl>
  return
}
