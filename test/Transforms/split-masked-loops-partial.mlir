// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-split-masked-loops,canonicalize,int-range-optimizations,canonicalize))' --split-input-file --verify-diagnostics | FileCheck %s

// causal & (q_idx - kv_idx) % 2 == 0 (a dilated mask): the modulo is not affine, but the key
// length and causal conjuncts are. The loop is still split on them: blocks after the diagonal
// are never visited, blocks before it run only the modulo ("residual"), the diagonal blocks the
// whole mask. A remark names what was and was not classified.
// CHECK-LABEL: func.func @causal_and_dilated
// CHECK:       scf.for
// CHECK:         arith.remsi
// CHECK:         %[[EVEN:.*]] = arith.cmpi eq
// CHECK-NOT:     arith.andi
// CHECK:         arith.select %[[EVEN]]
// CHECK:       } {tile.block_mask = "residual"}
// CHECK:       scf.for
// CHECK:         arith.cmpi slt
// CHECK:         arith.cmpi sge
// CHECK:         arith.andi
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK-NOT:   scf.for
func.func @causal_and_dilated(%qstart: i32, %n: i32, %s: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %two = arith.constant dense<2> : tensor<16x64xi32>
  %zero = arith.constant dense<0> : tensor<16x64xi32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x64xi32>
  %nt = tile.splat %n : i32 -> tensor<16x64xi32>
  // expected-remark @+1 {{tile-split-masked-loops: 2 of 3 mask conjuncts classified; classified: arith.cmpi at}}
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
    %in = arith.cmpi slt, %k, %nt : tensor<16x64xi32>
    %causal = arith.cmpi sge, %q, %k : tensor<16x64xi32>
    %d = arith.subi %q, %k : tensor<16x64xi32>
    %rem = arith.remsi %d, %two : tensor<16x64xi32>
    %even = arith.cmpi eq, %rem, %zero : tensor<16x64xi32>
    %m0 = arith.andi %in, %causal : tensor<16x64xi1>
    %m = arith.andi %m0, %even : tensor<16x64xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// The remark also lists the conjunct kept element-wise; the key length still splits the loop.
// CHECK-LABEL: func.func @remark_names_the_unclassified_conjunct
// CHECK:       } {tile.block_mask = "residual"}
// CHECK:       } {tile.block_mask = "mixed"}
func.func @remark_names_the_unclassified_conjunct(%n: i32, %s: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %two = arith.constant dense<2> : tensor<16x64xi32>
  %zero = arith.constant dense<0> : tensor<16x64xi32>
  %nt = tile.splat %n : i32 -> tensor<16x64xi32>
  // expected-remark @+1 {{kept element-wise: arith.cmpi at}}
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
    %in = arith.cmpi slt, %k, %nt : tensor<16x64xi32>
    %rem = arith.remsi %k, %two : tensor<16x64xi32>
    %even = arith.cmpi eq, %rem, %zero : tensor<16x64xi32>
    %m = arith.andi %in, %even : tensor<16x64xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// Nothing classified: the loop is kept, with a remark saying so.
// CHECK-LABEL: func.func @nothing_classified
// CHECK:       scf.for
// CHECK-NOT:   tile.block_mask
func.func @nothing_classified(%n: i32, %s: tensor<16x64xf32>, %a: tensor<16x64xi32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %zero = arith.constant dense<0> : tensor<16x64xi32>
  // expected-remark @+1 {{0 of 1 mask conjuncts classified; kept element-wise: arith.cmpi at}}
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %m = arith.cmpi eq, %a, %zero : tensor<16x64xi32>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}
