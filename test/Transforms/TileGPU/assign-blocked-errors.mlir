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

// -----

// Tiles inside an scf.if: the blocked lowering takes straight-line code and loops only.
func.func @tile_in_if(%x: !tile.ptr<f32>, %p: i1) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  scf.if %p {
    // expected-error @+1 {{uses tiles inside a region other than a loop's}}
    %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
    tile.store %d[%c0, %c0], %t : !tile.desc<2, f32>, tensor<64x64xf32>
  }
  return
}

// -----

// A carried row sum that the body reads per column: one carried value, two layouts.
func.func @carried_two_ways(%x: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64xf32>
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  // expected-error @+1 {{carries a tile its body reads in two layouts}}
  %acc = scf.for %k = %c0 to %n step %c1 iter_args(%s = %zero) -> (tensor<64xf32>) : i32 {
    %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
    %rs = tile.reduce sum %t axis 1 : tensor<64x64xf32> -> tensor<64xf32>
    %c = tile.expand_dims %s axis 0 : tensor<64xf32> -> tensor<1x64xf32>
    %cb = tile.broadcast %c : tensor<1x64xf32> -> tensor<64x64xf32>
    %u = arith.addf %t, %cb : tensor<64x64xf32>
    tile.store %d[%c0, %c0], %u : !tile.desc<2, f32>, tensor<64x64xf32>
    %s2 = arith.addf %s, %rs : tensor<64xf32>
    scf.yield %s2 : tensor<64xf32>
  }
  return
}
