// Programs outside convert-tile-to-blocked's class: an error naming the reason, or with
// fallback a remark and the program left for the reference lowering.
// RUN: tessel-opt %s --split-input-file --convert-tile-to-blocked --verify-diagnostics
// RUN: tessel-opt %s --convert-tile-to-blocked=fallback=true 2>&1 | FileCheck %s

// CHECK: remark: convert-tile-to-blocked leaves @transpose to the reference lowering: 'tile.trans' op is outside convert-tile-to-blocked's class
// CHECK: remark: convert-tile-to-blocked leaves @integer_sums to the reference lowering: 'tile.reduce' op is a reduction convert-tile-to-blocked does not lower
// CHECK: remark: convert-tile-to-blocked leaves @too_big to the reference lowering: 'func.func' op holds 256 elements
// CHECK: func.func @transpose
// CHECK: func.func @integer_sums
// CHECK: func.func @too_big

func.func @transpose(%x: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
  // expected-error @+1 {{is outside convert-tile-to-blocked's class}}
  %u = tile.trans %t : tensor<64x64xf32> -> tensor<64x64xf32>
  tile.store %d[%c0, %c0], %u : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// -----

func.func @integer_sums(%x: !tile.ptr<i32>, %y: !tile.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  %e = tile.make_desc %y, shape [%c64], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, i32> -> tensor<64x64xi32>
  // expected-error @+1 {{is a reduction convert-tile-to-blocked does not lower}}
  %s = tile.reduce sum %t axis 0 : tensor<64x64xi32> -> tensor<64xi32>
  tile.store %e[%c0], %s : !tile.desc<1, i32>, tensor<64xi32>
  return
}

// -----

// 32768 elements over 128 threads: 256 a thread would spill.
// expected-error @+1 {{holds 256 elements of a 32x1024 block a thread}}
func.func @too_big(%x: !tile.ptr<f16>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c1024 = arith.constant 1024 : i32
  %d = tile.make_desc %x, shape [%c1024, %c1024], strides [%c1024, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, f16> -> tensor<32x1024xf16>
  tile.store %d[%c0, %c0], %t : !tile.desc<2, f16>, tensor<32x1024xf16>
  return
}
