// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-split-masked-loops,canonicalize,int-range-optimizations,canonicalize))' --split-input-file | FileCheck %s

// Causal mask (q_idx >= kv_idx) and key length (kv_idx < n): blocks before the diagonal run with
// no mask, the diagonal blocks keep it, blocks after it are never visited.
// CHECK-LABEL: func.func @causal
// CHECK-SAME:  (%[[QSTART:.*]]: i32, %[[N:.*]]: i32
// The all-false suffix starts after the last query of the block: ceil((qstart + 64) / 64).
// CHECK:       scf.for %{{.*}} = %c0_i32 to %{{.*}} step %c64_i32
// CHECK-NOT:     arith.cmpi
// CHECK-NOT:     arith.select
// CHECK:       } {tile.block_mask = "all_true"}
// CHECK:       scf.for
// CHECK:         arith.cmpi slt
// CHECK:         arith.cmpi sge
// CHECK:         arith.select
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK-NOT:   scf.for
func.func @causal(%qstart: i32, %n: i32, %s: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x64xi32>
  %nt = tile.splat %n : i32 -> tensor<16x64xi32>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
    %in = arith.cmpi slt, %k, %nt : tensor<16x64xi32>
    %causal = arith.cmpi sge, %q, %k : tensor<16x64xi32>
    %m = arith.andi %in, %causal : tensor<16x64xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// Sliding window (kv_idx > q_idx - w): blocks far before the queries are skipped (an all-false
// prefix), blocks inside the window run unmasked, the edges keep the mask.
// CHECK-LABEL: func.func @window
// CHECK:       scf.for
// CHECK:         arith.cmpi sgt
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK:       scf.for
// CHECK-NOT:     arith.cmpi
// CHECK:       } {tile.block_mask = "all_true"}
// CHECK:       scf.for
// CHECK:         arith.cmpi sgt
// CHECK:       } {tile.block_mask = "mixed"}
func.func @window(%qstart: i32, %w: i32, %n: i32, %s: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %ws = tile.splat %w : i32 -> tensor<16xi32>
  %lo1 = arith.subi %q1, %ws : tensor<16xi32>
  %lo2 = tile.expand_dims %lo1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %lo = tile.broadcast %lo2 : tensor<16x1xi32> -> tensor<16x32xi32>
  %r = scf.for %j = %c0 to %n step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<32xi32>
    %ki = tile.iota : tensor<32xi32>
    %k1 = arith.addi %ks, %ki : tensor<32xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<32xi32> -> tensor<1x32xi32>
    %k = tile.broadcast %k2 : tensor<1x32xi32> -> tensor<16x32xi32>
    %m = arith.cmpi sgt, %k, %lo : tensor<16x32xi32>
    %x = arith.select %m, %s, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %y = arith.addf %acc, %x : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  }
  return %r : tensor<16x32xf32>
}

// -----

// A mask read from memory is not index arithmetic: the loop stays as it is, marked a masked
// loop (every block evaluates a mask read from a tensor).
// CHECK-LABEL: func.func @data_dependent_mask
// CHECK:       scf.for
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK-NOT:   scf.for
func.func @data_dependent_mask(%md: !tile.desc<2, i32>, %n: i32, %s: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %zero = arith.constant dense<0> : tensor<16x32xi32>
  %r = scf.for %j = %c0 to %n step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %mi = tile.load %md[%c0, %j] : !tile.desc<2, i32> -> tensor<16x32xi32>
    %m = arith.cmpi sgt, %mi, %zero : tensor<16x32xi32>
    %x = arith.select %m, %s, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %y = arith.addf %acc, %x : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  }
  return %r : tensor<16x32xf32>
}

// -----

// Two different masks in one loop: the pass does not guess which one to split on.
// CHECK-LABEL: func.func @two_masks
// CHECK:       scf.for
// CHECK-NOT:   tile.block_mask
func.func @two_masks(%n: i32, %s: tensor<16x32xf32>, %a: tensor<16x32xi32>, %b: tensor<16x32xi32>) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %r = scf.for %j = %c0 to %n step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %m1 = arith.cmpi sgt, %a, %b : tensor<16x32xi32>
    %m2 = arith.cmpi slt, %a, %b : tensor<16x32xi32>
    %x = arith.select %m1, %s, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %y = arith.select %m2, %x, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %z = arith.addf %acc, %y : tensor<16x32xf32>
    scf.yield %z : tensor<16x32xf32>
  }
  return %r : tensor<16x32xf32>
}

// -----

// A loop that still streams a softmax is not split: the softmax normalises over all of its
// iterations (run tile-online-softmax first).
// CHECK-LABEL: func.func @streamed_softmax_loop
// CHECK:       scf.for
// CHECK-NOT:   tile.block_mask
// CHECK-NOT:   scf.for
func.func @streamed_softmax_loop(%qstart: i32, %n: i32, %s: tensor<16x16xf32>, %v: tensor<16x16xf32>) -> tensor<16x16xf32> {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x16xf32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x16xi32>
  %r = scf.for %j = %c0 to %n step %c16 iter_args(%acc = %s) -> (tensor<16x16xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<16xi32>
    %k1 = arith.addi %ks, %qi : tensor<16xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<16xi32> -> tensor<1x16xi32>
    %k = tile.broadcast %k2 : tensor<1x16xi32> -> tensor<16x16xi32>
    %m = arith.cmpi sge, %q, %k : tensor<16x16xi32>
    %x = arith.select %m, %s, %ninf : tensor<16x16xi1>, tensor<16x16xf32>
    %p, %l = tile.softmax %x axis 1 streamed : tensor<16x16xf32> -> tensor<16xf32>
    %y = tile.dot %p, %v, %acc : tensor<16x16xf32>, tensor<16x16xf32> -> tensor<16x16xf32>
    scf.yield %y : tensor<16x16xf32>
  }
  return %r : tensor<16x16xf32>
}

// -----

// Prefix-LM, an `ori` of two atoms: blocks wholly inside the prefix or wholly below the diagonal
// need no mask (the union of the two all-true prefixes), blocks past both are never visited.
// CHECK-LABEL: func.func @prefix_lm
// CHECK:       scf.for
// CHECK-NOT:     arith.ori
// CHECK:       } {tile.block_mask = "all_true"}
// CHECK:       scf.for
// CHECK:         arith.cmpi slt
// CHECK:         arith.ori
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK-NOT:   scf.for
func.func @prefix_lm(%qstart: i32, %prefix: i32, %n: i32, %s: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x32xi32>
  %pt = tile.splat %prefix : i32 -> tensor<16x32xi32>
  %r = scf.for %j = %c0 to %n step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<32xi32>
    %ki = tile.iota : tensor<32xi32>
    %k1 = arith.addi %ks, %ki : tensor<32xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<32xi32> -> tensor<1x32xi32>
    %k = tile.broadcast %k2 : tensor<1x32xi32> -> tensor<16x32xi32>
    %in_prefix = arith.cmpi slt, %k, %pt : tensor<16x32xi32>
    %causal = arith.cmpi sge, %q, %k : tensor<16x32xi32>
    %m = arith.ori %in_prefix, %causal : tensor<16x32xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %y = arith.addf %acc, %x : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  }
  return %r : tensor<16x32xf32>
}
