// Programs outside the class of convert-tile-to-mma: each is refused with a located reason
// (codegen=mma), or left to the reference lowering with a remark (fallback, codegen=auto).
// RUN: tessel-opt %s --split-input-file --convert-tile-to-mma --verify-diagnostics
// RUN: tessel-opt %s --convert-tile-to-mma=fallback=true --convert-tile-to-gpu 2>&1 | FileCheck %s --check-prefix=AUTO

// AUTO: remark: convert-tile-to-mma leaves @no_dot to the reference lowering: 'func.func' op has no tile.dot
// AUTO: remark: convert-tile-to-mma leaves @f32_operands to the reference lowering: 'tile.load' op loads 'f32': convert-tile-to-mma needs f16, bf16 or f8E4M3FN operands
// AUTO: remark: convert-tile-to-mma leaves @matmul_32 to the reference lowering: 'tile.load' op loads a block of 32 rows
// AUTO: gpu.module @tessel_kernels
// AUTO-DAG: gpu.func @no_dot
// AUTO-DAG: gpu.func @f32_operands
// AUTO-DAG: gpu.func @matmul_32
// AUTO-NOT: func.func

// expected-error @+1 {{has no tile.dot whose A operand is a tile.load}}
func.func @no_dot(%x: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %d[%c0] : !tile.desc<1, f32> -> tensor<64xf32>
  tile.store %d[%c0], %t : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

func.func @f32_operands(%a: !tile.ptr<f32>, %c: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %c1 = arith.constant 1 : i32
  %ad = tile.make_desc %a, shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %cd = tile.make_desc %c, shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  // expected-error @+1 {{loads 'f32': convert-tile-to-mma needs f16, bf16 or f8E4M3FN operands}}
  %at = tile.load %ad[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = tile.dot %at, %at, %zero : tensor<64x64xf32>, tensor<64x64xf32> -> tensor<64x64xf32>
  tile.store %cd[%c0, %c0], %r : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// -----

func.func @matmul_32(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %ad = tile.make_desc %a, shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  // expected-error @+1 {{loads a block of 32 rows: convert-tile-to-mma handles 64 or 128}}
  %at = tile.load %ad[%c0, %c0] : !tile.desc<2, f16> -> tensor<32x64xf16>
  %bt = tile.load %ad[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %zero = arith.constant dense<0.0> : tensor<32x64xf32>
  %r = tile.dot %at, %bt, %zero : tensor<32x64xf16>, tensor<64x64xf16> -> tensor<32x64xf32>
  tile.store %cd[%c0, %c0], %r : !tile.desc<2, f32>, tensor<32x64xf32>
  return
}

// -----

func.func @matmul_d96(%a: !tile.ptr<f16>, %c: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c96 = arith.constant 96 : i32
  %ad = tile.make_desc %a, shape [%n, %c96], strides [%c96, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  // expected-error @+1 {{loads a block of 96 columns: convert-tile-to-mma handles head dims 64, 128 and 256}}
  %at = tile.load %ad[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x96xf16>
  %bt = tile.load %ad[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x96xf16>
  %btt = tile.trans %bt : tensor<64x96xf16> -> tensor<96x64xf16>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = tile.dot %at, %btt, %zero : tensor<64x96xf16>, tensor<96x64xf16> -> tensor<64x64xf32>
  tile.store %cd[%c0, %c0], %r : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}
