// tilegpu-fuse-masked-loops: the copies tile-split-masked-loops makes of a masked key loop run
// as the masked copy over their joint range, its mask or-ed with a splat of "this block is in
// the unmasked copy's range" (translation validation: test/Transforms/validate-passes.mlir).
// RUN: tessel-opt %s --split-input-file --pass-pipeline='builtin.module(func.func(tile-split-masked-loops,canonicalize,int-range-optimizations,canonicalize,tilegpu-fuse-masked-loops))' | FileCheck %s
// Chains that are not the split's own, or whose masked scores do not feed the softmax as they
// are, are left as they are.
// RUN: tessel-opt %s --split-input-file --tilegpu-fuse-masked-loops | FileCheck %s --check-prefix=KEEP

// Causal: an unmasked loop, then the diagonal's masked one. One loop from 0 to the end; the
// guard is j < the unmasked loop's end.
// CHECK-LABEL: func.func @causal
// CHECK:       scf.for %[[J:.*]] = %c0_i32 to %[[END:.*]] step %c64_i32
// CHECK-NEXT:    %[[G:.*]] = arith.cmpi slt, %[[J]], %[[SPLIT:.*]] : i32
// CHECK:         %[[M:.*]] = arith.andi
// CHECK-NEXT:    %[[GS:.*]] = tile.splat %[[G]] : i1 -> tensor<16x64xi1>
// CHECK-NEXT:    %[[OR:.*]] = arith.ori %[[M]], %[[GS]]
// CHECK:         arith.select %[[OR]]
// CHECK:       } {tile.block_mask = "guarded"}
// CHECK-NOT:   scf.for
func.func @causal(%qstart: i32, %n: i32, %s: tensor<16x64xf32>, %qt: tensor<16x32xf16>,
                  %kt: tensor<32x64xf16>, %c: tensor<16x64xf32>) -> tensor<16x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x64xf32>
  %zero = arith.constant dense<0.0> : tensor<16x64xf32>
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
    %st = tile.dot %qt, %kt, %zero : tensor<16x32xf16>, tensor<32x64xf16> -> tensor<16x64xf32>
    %sc = arith.mulf %st, %c : tensor<16x64xf32>
    %x = arith.select %m, %sc, %ninf : tensor<16x64xi1>, tensor<16x64xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x64xf32> -> tensor<16xf32>
    %m1 = tile.expand_dims %mx axis 1 : tensor<16xf32> -> tensor<16x1xf32>
    %mb = tile.broadcast %m1 : tensor<16x1xf32> -> tensor<16x64xf32>
    %d = arith.subf %x, %mb : tensor<16x64xf32>
    %e = math.exp2 %d : tensor<16x64xf32>
    %y = arith.addf %acc, %e : tensor<16x64xf32>
    scf.yield %y : tensor<16x64xf32>
  }
  return %r : tensor<16x64xf32>
}

// -----

// A sliding window: masked, unmasked, masked. One loop over the three ranges; the guard is
// start <= j < end of the unmasked range.
// CHECK-LABEL: func.func @window
// CHECK:       scf.for %[[J:.*]] = %[[LO:.*]] to %[[HI:.*]] step %c32_i32
// CHECK-NEXT:    %[[A:.*]] = arith.cmpi sge, %[[J]], %[[B1:.*]] : i32
// CHECK-NEXT:    %[[B:.*]] = arith.cmpi slt, %[[J]], %[[B2:.*]] : i32
// CHECK-NEXT:    %[[G:.*]] = arith.andi %[[A]], %[[B]] : i1
// CHECK:         tile.splat %[[G]] : i1 -> tensor<16x32xi1>
// CHECK:       } {tile.block_mask = "guarded"}
// CHECK-NOT:   scf.for
func.func @window(%qstart: i32, %w: i32, %n: i32, %s: tensor<16x32xf32>, %qt: tensor<16x32xf16>,
                  %kt: tensor<32x32xf16>, %c: tensor<16x32xf32>) -> tensor<16x32xf32> {
  %c0 = arith.constant 0 : i32
  %c32 = arith.constant 32 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %zero = arith.constant dense<0.0> : tensor<16x32xf32>
  %qs = tile.splat %qstart : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x32xi32>
  %wt = tile.splat %w : i32 -> tensor<16x32xi32>
  %lo = arith.subi %q, %wt : tensor<16x32xi32>
  %r = scf.for %j = %c0 to %n step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<32xi32>
    %ki = tile.iota : tensor<32xi32>
    %k1 = arith.addi %ks, %ki : tensor<32xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<32xi32> -> tensor<1x32xi32>
    %k = tile.broadcast %k2 : tensor<1x32xi32> -> tensor<16x32xi32>
    %m = arith.cmpi sgt, %k, %lo : tensor<16x32xi32>
    %st = tile.dot %qt, %kt, %zero : tensor<16x32xf16>, tensor<32x32xf16> -> tensor<16x32xf32>
    %sc = arith.mulf %st, %c : tensor<16x32xf32>
    %x = arith.select %m, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    %m1 = tile.expand_dims %mx axis 1 : tensor<16xf32> -> tensor<16x1xf32>
    %mb = tile.broadcast %m1 : tensor<16x1xf32> -> tensor<16x32xf32>
    %d = arith.subf %x, %mb : tensor<16x32xf32>
    %e = math.exp2 %d : tensor<16x32xf32>
    %y = arith.addf %acc, %e : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  }
  return %r : tensor<16x32xf32>
}

// -----

// Kept: the unmasked copy's result read after the chain too (%used), an op with memory effects
// between the copies (the store), a middle copy that still masks residual conjuncts, and
// masked scores that go through more arithmetic before the softmax (a bias added after the
// select: the lowering would compute the guard per element).
// KEEP-LABEL: func.func @kept
// CHECK-LABEL: func.func @kept
// KEEP-COUNT-8: scf.for
// KEEP-NOT:     "guarded"
func.func @kept(%a: i32, %n: i32, %s: tensor<16x32xf32>, %mask: tensor<16x32xi1>,
                %p: !tile.ptr<f32>, %qt: tensor<16x32xf16>, %kt: tensor<32x32xf16>,
                %c: tensor<16x32xf32>)
    -> (tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>) {
  %c32 = arith.constant 32 : i32
  %c0 = arith.constant 0 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %zero = arith.constant dense<0.0> : tensor<16x32xf32>
  %st = tile.dot %qt, %kt, %zero : tensor<16x32xf16>, tensor<32x32xf16> -> tensor<16x32xf32>
  %sc = arith.mulf %st, %c : tensor<16x32xf32>
  %r0 = scf.for %j = %c0 to %a step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %y = arith.addf %acc, %s : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  } {tile.block_mask = "all_true"}
  %r1 = scf.for %j = %a to %n step %c32 iter_args(%acc = %r0) -> (tensor<16x32xf32>) : i32 {
    %x = arith.select %mask, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    scf.yield %acc : tensor<16x32xf32>
  } {tile.block_mask = "mixed"}
  %used = arith.addf %r0, %r1 : tensor<16x32xf32>
  %r2 = scf.for %j = %c0 to %a step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %y = arith.addf %acc, %s : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  } {tile.block_mask = "all_true"}
  %d = tile.make_desc %p[%c0], shape[%c32, %c32], strides[%c32, %c0] : !tile.ptr<f32> -> !tile.desc<2, f32>
  tile.store %d[%c0, %c0], %s : !tile.desc<2, f32>, tensor<16x32xf32>
  %r3 = scf.for %j = %a to %n step %c32 iter_args(%acc = %r2) -> (tensor<16x32xf32>) : i32 {
    %x = arith.select %mask, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    scf.yield %acc : tensor<16x32xf32>
  } {tile.block_mask = "mixed"}
  %r4 = scf.for %j = %c0 to %a step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %x = arith.select %mask, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    scf.yield %acc : tensor<16x32xf32>
  } {tile.block_mask = "residual"}
  %r5 = scf.for %j = %a to %n step %c32 iter_args(%acc = %r4) -> (tensor<16x32xf32>) : i32 {
    %x = arith.select %mask, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    scf.yield %acc : tensor<16x32xf32>
  } {tile.block_mask = "mixed"}
  %r6 = scf.for %j = %c0 to %a step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %y = arith.addf %acc, %sc : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  } {tile.block_mask = "all_true"}
  %r7 = scf.for %j = %a to %n step %c32 iter_args(%acc = %r6) -> (tensor<16x32xf32>) : i32 {
    %x = arith.select %mask, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %biased = arith.addf %x, %c : tensor<16x32xf32>
    %mx = tile.reduce max %biased axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    scf.yield %biased : tensor<16x32xf32>
  } {tile.block_mask = "mixed"}
  return %used, %r3, %r5, %r7 : tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>, tensor<16x32xf32>
}

// -----

// The control: the same chain with nothing in the way is fused.
// KEEP-LABEL: func.func @fused
// KEEP:       scf.for %[[J:.*]] = %c0_i32 to %{{.*}} step %c32_i32
// KEEP-NEXT:    arith.cmpi slt, %[[J]], %{{.*}} : i32
// KEEP:       } {tile.block_mask = "guarded"}
// KEEP-NOT:   scf.for
func.func @fused(%a: i32, %n: i32, %s: tensor<16x32xf32>, %mask: tensor<16x32xi1>,
                 %qt: tensor<16x32xf16>, %kt: tensor<32x32xf16>, %c: tensor<16x32xf32>)
    -> tensor<16x32xf32> {
  %c32 = arith.constant 32 : i32
  %c0 = arith.constant 0 : i32
  %ninf = arith.constant dense<0xFF800000> : tensor<16x32xf32>
  %zero = arith.constant dense<0.0> : tensor<16x32xf32>
  %st = tile.dot %qt, %kt, %zero : tensor<16x32xf16>, tensor<32x32xf16> -> tensor<16x32xf32>
  %sc = arith.mulf %st, %c : tensor<16x32xf32>
  %r0 = scf.for %j = %c0 to %a step %c32 iter_args(%acc = %s) -> (tensor<16x32xf32>) : i32 {
    %y = arith.addf %acc, %sc : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  } {tile.block_mask = "all_true"}
  %r1 = scf.for %j = %a to %n step %c32 iter_args(%acc = %r0) -> (tensor<16x32xf32>) : i32 {
    %x = arith.select %mask, %sc, %ninf : tensor<16x32xi1>, tensor<16x32xf32>
    %mx = tile.reduce max %x axis 1 : tensor<16x32xf32> -> tensor<16xf32>
    %m1 = tile.expand_dims %mx axis 1 : tensor<16xf32> -> tensor<16x1xf32>
    %mb = tile.broadcast %m1 : tensor<16x1xf32> -> tensor<16x32xf32>
    %d = arith.subf %x, %mb : tensor<16x32xf32>
    %e = math.exp2 %d : tensor<16x32xf32>
    %y = arith.addf %acc, %e : tensor<16x32xf32>
    scf.yield %y : tensor<16x32xf32>
  } {tile.block_mask = "mixed"}
  return %r1 : tensor<16x32xf32>
}
