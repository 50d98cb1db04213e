// Every tile op round-trips: printed, parsed again, printed the same.
// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-opt %s --mlir-print-op-generic | tessel-opt | FileCheck %s

// CHECK-LABEL: func.func @grid
func.func @grid() -> (i32, i32) {
  // CHECK: tile.program_id 2 : i32
  %0 = tile.program_id 2 : i32
  // CHECK: tile.num_programs 0 : i32
  %1 = tile.num_programs 0 : i32
  return %0, %1 : i32, i32
}

// CHECK-LABEL: func.func @memory
func.func @memory(%p: !tile.ptr<bf16>, %n: i32, %off: i32, %table: !tile.desc<1, i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  // CHECK: tile.make_desc %{{.*}}[%{{.*}}], shape[%{{.*}}, %{{.*}}], strides[%{{.*}}, %{{.*}}] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %d = tile.make_desc %p[%off], shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  // CHECK: tile.make_desc %{{.*}}, shape[%{{.*}}], strides[%{{.*}}, %{{.*}}], pages %{{.*}}[%{{.*}}] page_size 16 : !tile.ptr<bf16>, !tile.desc<1, i32> -> !tile.desc<2, bf16>
  %paged = tile.make_desc %p, shape [%n, %c64], strides [%c64, %c1], pages %table[%n] page_size 16 : !tile.ptr<bf16>, !tile.desc<1, i32> -> !tile.desc<2, bf16>
  // CHECK: tile.make_desc %{{.*}}, shape[%{{.*}}], strides[%{{.*}}] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  %d1 = tile.make_desc %p, shape [%n], strides [%c1] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  // CHECK: tile.load %{{.*}}[%{{.*}}, %{{.*}}] : !tile.desc<2, bf16> -> tensor<32x64xbf16>
  %t = tile.load %d[%off, %c0] : !tile.desc<2, bf16> -> tensor<32x64xbf16>
  // CHECK: tile.load %{{.*}}[%{{.*}}] {padding = 0xFFF0000000000000 : f64} : !tile.desc<1, bf16> -> tensor<32xbf16>
  %v = tile.load %d1[%off] {padding = 0xFFF0000000000000 : f64} : !tile.desc<1, bf16> -> tensor<32xbf16>
  // CHECK: tile.store %{{.*}}[%{{.*}}, %{{.*}}], %{{.*}} : !tile.desc<2, bf16>, tensor<32x64xbf16>
  tile.store %d[%off, %c0], %t : !tile.desc<2, bf16>, tensor<32x64xbf16>
  %m = arith.constant dense<true> : tensor<32xi1>
  // CHECK: tile.store %{{.*}}[%{{.*}}], %{{.*}} mask %{{.*}} : !tile.desc<1, bf16>, tensor<32xbf16>, tensor<32xi1>
  tile.store %d1[%off], %v mask %m : !tile.desc<1, bf16>, tensor<32xbf16>, tensor<32xi1>
  return
}

// CHECK-LABEL: func.func @compute
func.func @compute(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x16xf32>)
    -> (tensor<64x16xf32>, tensor<64xf32>, tensor<16xf32>) {
  // CHECK: tile.dot %{{.*}}, %{{.*}}, %{{.*}} : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x16xf32>
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x16xf32>
  // CHECK: tile.reduce max %{{.*}} axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  %m = tile.reduce max %d axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  // CHECK: tile.reduce sum %{{.*}} axis 0 : tensor<64x16xf32> -> tensor<16xf32>
  %s = tile.reduce sum %d axis 0 : tensor<64x16xf32> -> tensor<16xf32>
  // CHECK: tile.reduce min
  %n = tile.reduce min %d axis 0 : tensor<64x16xf32> -> tensor<16xf32>
  return %d, %m, %s : tensor<64x16xf32>, tensor<64xf32>, tensor<16xf32>
}

// CHECK-LABEL: func.func @mulhiui
func.func @mulhiui(%a: tensor<8xi32>, %b: tensor<8xi32>) -> tensor<8xi32> {
  // CHECK: tile.mulhiui %{{.*}}, %{{.*}} : tensor<8xi32>
  %h = tile.mulhiui %a, %b : tensor<8xi32>
  return %h : tensor<8xi32>
}

// CHECK-LABEL: func.func @scans
func.func @scans(%x: tensor<64x16xf32>, %n: tensor<8xi32>) -> (tensor<64x16xf32>, tensor<8xi32>) {
  // CHECK: tile.scan sum %{{.*}} axis 1 : tensor<64x16xf32>
  %s = tile.scan sum %x axis 1 : tensor<64x16xf32>
  // CHECK: tile.scan max %{{.*}} axis 0 reverse : tensor<64x16xf32>
  %m = tile.scan max %s axis 0 reverse : tensor<64x16xf32>
  // CHECK: tile.scan min %{{.*}} axis 0 : tensor<8xi32>
  %c = tile.scan min %n axis 0 : tensor<8xi32>
  return %m, %c : tensor<64x16xf32>, tensor<8xi32>
}

// CHECK-LABEL: func.func @shapes
func.func @shapes(%x: i32, %r: tensor<64xf32>, %k: tensor<16x128xf16>)
    -> (tensor<64xi32>, tensor<64x16xf32>, tensor<128x16xf16>, tensor<1x64xf32>) {
  // CHECK: tile.splat %{{.*}} : i32 -> tensor<64xi32>
  %s = tile.splat %x : i32 -> tensor<64xi32>
  // CHECK: tile.iota : tensor<64xi32>
  %i = tile.iota : tensor<64xi32>
  %q = arith.addi %s, %i : tensor<64xi32>
  // CHECK: tile.expand_dims %{{.*}} axis 1 : tensor<64xf32> -> tensor<64x1xf32>
  %e = tile.expand_dims %r axis 1 : tensor<64xf32> -> tensor<64x1xf32>
  // CHECK: tile.expand_dims %{{.*}} axis 0 : tensor<64xf32> -> tensor<1x64xf32>
  %e0 = tile.expand_dims %r axis 0 : tensor<64xf32> -> tensor<1x64xf32>
  // CHECK: tile.broadcast %{{.*}} : tensor<64x1xf32> -> tensor<64x16xf32>
  %b = tile.broadcast %e : tensor<64x1xf32> -> tensor<64x16xf32>
  // CHECK: tile.trans %{{.*}} : tensor<16x128xf16> -> tensor<128x16xf16>
  %t = tile.trans %k : tensor<16x128xf16> -> tensor<128x16xf16>
  return %q, %b, %t, %e0 : tensor<64xi32>, tensor<64x16xf32>, tensor<128x16xf16>, tensor<1x64xf32>
}

// CHECK-LABEL: func.func @softmax
func.func @softmax(%s: tensor<64x16xf32>, %n: i32) -> tensor<64x16xf32> {
  // CHECK: tile.softmax %{{.*}} axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  %p, %lse = tile.softmax %s axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %zero = arith.constant dense<0.0> : tensor<64x16xf32>
  %r = scf.for %j = %c0 to %n step %c16 iter_args(%acc = %zero) -> (tensor<64x16xf32>) : i32 {
    // CHECK: tile.softmax %{{.*}} axis 1 streamed : tensor<64x16xf32> -> tensor<64xf32>
    %q, %l = tile.softmax %s axis 1 streamed : tensor<64x16xf32> -> tensor<64xf32>
    %a = arith.addf %acc, %q : tensor<64x16xf32>
    scf.yield %a : tensor<64x16xf32>
  }
  return %r : tensor<64x16xf32>
}

// CHECK-LABEL: func.func @gather
func.func @gather(%p: !tile.ptr<i32>, %b: i32, %q: tensor<16x8xi32>) -> (tensor<16x8xi32>, tensor<1xi32>) {
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %p, shape [%b, %b], strides [%b, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  // CHECK: tile.gather %{{.*}}[%{{.*}}, %{{.*}}] : !tile.desc<2, i32>, i32, tensor<16x8xi32> -> tensor<16x8xi32>
  %g = tile.gather %d[%b, %q] : !tile.desc<2, i32>, i32, tensor<16x8xi32> -> tensor<16x8xi32>
  // CHECK: tile.gather %{{.*}}[%{{.*}}, %{{.*}}] {padding = 7.000000e+00 : f64} : !tile.desc<2, i32>, i32, i32 -> tensor<1xi32>
  %s = tile.gather %d[%b, %b] {padding = 7.0 : f64} : !tile.desc<2, i32>, i32, i32 -> tensor<1xi32>
  return %g, %s : tensor<16x8xi32>, tensor<1xi32>
}
