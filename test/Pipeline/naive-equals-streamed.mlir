// Attention written the naive way and attention written by hand in the streamed form reach the
// same tile IR after tile-optimize: the online-softmax rewrite produces exactly the code a
// FlashAttention author writes, and everything after it treats both alike.
//
// RUN: tessel-opt %tessel_examples/attention_naive.mlir --tile-optimize > %t.naive.mlir
// RUN: tessel-opt %tessel_examples/attention_streamed.mlir --tile-optimize > %t.streamed.mlir
// RUN: diff %t.naive.mlir %t.streamed.mlir
// RUN: FileCheck %s < %t.naive.mlir

// The result is streamed and split: no softmax is left, the fully unmasked middle loop has no
// mask arithmetic, and the causal boundary loop keeps it.
// CHECK-LABEL: func.func @attention
// CHECK-NOT: tile.softmax
// CHECK: scf.for
// CHECK-NOT: arith.cmpi
// CHECK-NOT: arith.andi
// CHECK: tile.block_mask = "all_true"
// CHECK: scf.for
// CHECK: arith.cmpi slt
// CHECK: arith.cmpi sge
// CHECK: tile.block_mask = "mixed"
// CHECK-NOT: scf.for
// CHECK: math.log2
