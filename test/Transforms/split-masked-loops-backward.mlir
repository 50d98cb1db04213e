// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-split-masked-loops,canonicalize,int-range-optimizations,canonicalize))' | FileCheck %s

// The dK/dV loop of the attention backward (python/tessel/backward.py): one key block (keys
// kstart..kstart+31) streams the query blocks, so the induction variable is on the query side of
// the mask. Causal: the query blocks before the key block see none of it and are never visited
// (the first loop starts past 0); blocks past the diagonal see all of it and run unmasked; the
// last blocks keep the mask for the rows past nq. Skipping is the identity here: P = 0 there.
// CHECK-LABEL: func.func @dkdv_causal
// CHECK-NOT:   scf.for %{{[^ ]+}} = %c0_i32
// CHECK:       scf.for
// CHECK:         arith.cmpi sge
// CHECK:         arith.select
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK:       scf.for
// CHECK-NOT:     arith.cmpi
// CHECK-NOT:     arith.select
// CHECK:         tile.dot
// CHECK:       } {tile.block_mask = "all_true"}
// CHECK:       scf.for
// CHECK:         arith.cmpi slt
// CHECK:         arith.select
// CHECK:       } {tile.block_mask = "mixed"}
func.func @dkdv_causal(%kstart: i32, %nq: i32, %s: tensor<16x32xf32>, %acc0: tensor<32x32xf32>) -> tensor<32x32xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %ks = tile.splat %kstart : i32 -> tensor<32xi32>
  %ki = tile.iota : tensor<32xi32>
  %k1 = arith.addi %ks, %ki : tensor<32xi32>
  %k2 = tile.expand_dims %k1 axis 0 : tensor<32xi32> -> tensor<1x32xi32>
  %k = tile.broadcast %k2 : tensor<1x32xi32> -> tensor<16x32xi32>
  %nqt = tile.splat %nq : i32 -> tensor<16x32xi32>
  %r = scf.for %i = %c0 to %nq step %c16 iter_args(%acc = %acc0) -> (tensor<32x32xf32>) : i32 {
    %qs = tile.splat %i : i32 -> tensor<16xi32>
    %qi = tile.iota : tensor<16xi32>
    %q1 = arith.addi %qs, %qi : tensor<16xi32>
    %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
    %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x32xi32>
    %in = arith.cmpi slt, %q, %nqt : tensor<16x32xi32>
    %causal = arith.cmpi sge, %q, %k : tensor<16x32xi32>
    %m = arith.andi %in, %causal : tensor<16x32xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %p = math.exp %x : tensor<16x32xf32>
    %pt = tile.trans %p : tensor<16x32xf32> -> tensor<32x16xf32>
    %d = tile.dot %pt, %s, %acc : tensor<32x16xf32>, tensor<16x32xf32> -> tensor<32x32xf32>
    scf.yield %d : tensor<32x32xf32>
  }
  return %r : tensor<32x32xf32>
}
