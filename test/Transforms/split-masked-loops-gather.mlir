// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-split-masked-loops,canonicalize))' --split-input-file --verify-diagnostics | FileCheck %s

// causal & doc[q] == doc[kv] (a document mask read from a tensor): what a block of the tensor
// holds is known only at run time, so the gathered conjunct is never classified — it stays in
// every loop that runs (the residual loop as well as the mixed ones around it); only the key
// length and the causal conjuncts decide which blocks are skipped, none is "all_true".
// CHECK-LABEL: func.func @causal_and_document
// CHECK:       scf.for
// CHECK:         tile.gather
// CHECK:         arith.cmpi eq
// CHECK:         arith.andi
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK:       scf.for
// CHECK:         tile.gather
// CHECK:         tile.gather
// CHECK:         %[[SAME:.*]] = arith.cmpi eq
// CHECK-NOT:     arith.andi
// CHECK:         arith.select %[[SAME]]
// CHECK:       } {tile.block_mask = "residual"}
// CHECK:       scf.for
// CHECK:         tile.gather
// CHECK:         arith.cmpi eq
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK-NOT:   scf.for
func.func @causal_and_document(%doc: !tile.desc<1, i32>, %qstart: i32, %n: i32, %s: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x64xi32>
  %nt = tile.splat %n : i32 -> tensor<16x64xi32>
  // expected-remark @+1 {{tile-split-masked-loops: 2 of 3 mask conjuncts classified}}
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
    %in = arith.cmpi slt, %k, %nt : tensor<16x64xi32>
    %causal = arith.cmpi sge, %q, %k : tensor<16x64xi32>
    %dk = tile.gather %doc[%k] : !tile.desc<1, i32>, tensor<16x64xi32> -> tensor<16x64xi32>
    %dq2 = tile.gather %doc[%q] : !tile.desc<1, i32>, tensor<16x64xi32> -> tensor<16x64xi32>
    %same = arith.cmpi eq, %dq2, %dk : tensor<16x64xi32>
    %m0 = arith.andi %in, %causal : tensor<16x64xi1>
    %m = arith.andi %m0, %same : tensor<16x64xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// An ordered compare against a gathered tile (kv_idx < end[q], a per-query end read from a
// tensor) looks like the affine atoms the analysis classifies, but its right side is data:
// it is kept element-wise, never used to skip or unmask a block.
// CHECK-LABEL: func.func @bound_read_from_a_tensor
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK:       scf.for
// CHECK:         %[[ENDS:.*]] = tile.gather
// CHECK:         %[[END:.*]] = tile.broadcast %[[ENDS]]
// CHECK:         %[[BEFORE:.*]] = arith.cmpi slt, %{{.*}}, %[[END]]
// CHECK:         arith.select %[[BEFORE]]
// CHECK:       } {tile.block_mask = "residual"}
// CHECK:       } {tile.block_mask = "mixed"}
// CHECK-NOT:   scf.for
func.func @bound_read_from_a_tensor(%ends: !tile.desc<1, i32>, %n: i32, %s: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %qi = tile.iota : tensor<16xi32>
  %q2 = tile.expand_dims %qi axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x64xi32>
  %nt = tile.splat %n : i32 -> tensor<16x64xi32>
  // expected-remark @+1 {{tile-split-masked-loops: 1 of 2 mask conjuncts classified}}
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
    %in = arith.cmpi slt, %k, %nt : tensor<16x64xi32>
    %end = tile.gather %ends[%q] : !tile.desc<1, i32>, tensor<16x64xi32> -> tensor<16x64xi32>
    %before = arith.cmpi slt, %k, %end : tensor<16x64xi32>
    %m = arith.andi %in, %before : tensor<16x64xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// The last key block run first (attention_rows' TAIL_FIRST): block j = (it == 0 ? last :
// it - 64), masked by (it != 0) | (kv < n). Not split: only the first iteration is masked, so
// the remark says so (the overlapped consumers peel that iteration; LLVM folds the rest).
// CHECK-LABEL: func.func @last_block_first
// CHECK:       scf.for
// CHECK:         arith.ori
// CHECK-NOT:   tile.block_mask
func.func @last_block_first(%n: i32, %last: i32, %s: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %nt = tile.splat %n : i32 -> tensor<16x64xi32>
  // expected-remark-re @+1 {{kept element-wise: arith.ori at {{.*}} (true after the first iteration); only the first iteration is masked}}
  %r = scf.for %it = %c0 to %n step %c64 iter_args(%acc = %s) -> (tensor<16x64xf32>) : i32 {
    %first = arith.cmpi eq, %it, %c0 : i32
    %prev = arith.subi %it, %c64 : i32
    %j = arith.select %first, %last, %prev : i32
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
    %in = arith.cmpi slt, %k, %nt : tensor<16x64xi32>
    %later = arith.cmpi ne, %it, %c0 : i32
    %laters = tile.splat %later : i1 -> tensor<16x64xi1>
    %m = arith.ori %laters, %in : tensor<16x64xi1>
    %x = arith.select %m, %s, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %y = arith.addf %acc, %x : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}
