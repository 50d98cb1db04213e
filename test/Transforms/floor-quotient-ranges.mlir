// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-floor-quotient-ranges,canonicalize))' --split-input-file | FileCheck %s
// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-floor-quotient-ranges,canonicalize,tile-split-masked-loops))' --split-input-file | FileCheck %s --check-prefix=SPLIT

// Chunked local attention's mask, `q_idx // 128 == kv_idx // 128`, in a key loop over blocks of
// 64 keys, with 64 query rows starting at 64·t (the DSL's floor division: divsi, and one less
// where the remainder is negative). The query quotient is t // 2 for the whole tile, computed
// once before the loop; the key side becomes the range 128·(t // 2) <= kv_idx < 128·(t // 2)
// + 128, no division left in the loop. The split then classifies it: blocks outside the
// chunk are skipped, those inside run unmasked.
// CHECK-LABEL: func.func @chunk
// CHECK:       %[[Q:.*]] = arith.floordivsi %arg0, %c2_i32 : i32
// CHECK:       %[[S:.*]] = tile.splat %[[Q]] : i32 -> tensor<64x64xi32>
// CHECK:       scf.for
// CHECK-NOT:   arith.divsi
// CHECK:         %[[LO:.*]] = arith.muli %[[S]], %cst
// CHECK:         %[[HI:.*]] = arith.addi %[[LO]], %cst
// CHECK:         arith.cmpi slt, %[[K:.*]], %[[HI]]
// CHECK:         arith.cmpi sge, %[[K]], %[[LO]]
// CHECK:       scf.yield
// SPLIT-LABEL: func.func @chunk
// SPLIT-NOT:   tile.block_mask = "residual"
// SPLIT:       tile.block_mask = "all_true"
func.func @chunk(%t: i32, %n: i32) -> tensor<64x64xf32> {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %g = arith.constant dense<128> : tensor<64x64xi32>
  %zero = arith.constant dense<0> : tensor<64x64xi32>
  %one = arith.constant dense<1> : tensor<64x64xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %init = arith.constant dense<0.0> : tensor<64x64xf32>
  %t64 = arith.muli %t, %c64 : i32
  %qs = tile.splat %t64 : i32 -> tensor<64xi32>
  %qi = tile.iota : tensor<64xi32>
  %q1 = arith.addi %qs, %qi : tensor<64xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %q = tile.broadcast %q2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %r = scf.for %j = %c0 to %n step %c64 iter_args(%acc = %init) -> (tensor<64x64xf32>) : i32 {
    %ks = tile.splat %j : i32 -> tensor<64xi32>
    %ki = tile.iota : tensor<64xi32>
    %k1 = arith.addi %ks, %ki : tensor<64xi32>
    %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %qd = arith.divsi %q, %g : tensor<64x64xi32>
    %qr = arith.remsi %q, %g : tensor<64x64xi32>
    %qneg = arith.cmpi slt, %qr, %zero : tensor<64x64xi32>
    %qd1 = arith.subi %qd, %one : tensor<64x64xi32>
    %qf = arith.select %qneg, %qd1, %qd : tensor<64x64xi1>, tensor<64x64xi32>
    %kd = arith.divsi %k, %g : tensor<64x64xi32>
    %kr = arith.remsi %k, %g : tensor<64x64xi32>
    %kneg = arith.cmpi slt, %kr, %zero : tensor<64x64xi32>
    %kd1 = arith.subi %kd, %one : tensor<64x64xi32>
    %kf = arith.select %kneg, %kd1, %kd : tensor<64x64xi1>, tensor<64x64xi32>
    %same = arith.cmpi eq, %qf, %kf : tensor<64x64xi32>
    %s = arith.select %same, %acc, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    scf.yield %s : tensor<64x64xf32>
  }
  return %r : tensor<64x64xf32>
}

// -----

// The orders: `kv_idx // 32 < s` is kv_idx < 32·s, `<=` kv_idx < 32·s + 32, `>` kv_idx >=
// 32·s + 32 (s a scalar splat on the right); `s >= kv_idx // 32` (the quotient on the right)
// is kv_idx // 32 <= s; `!=` the range's complement.
// CHECK-LABEL: func.func @orders
// CHECK-NOT:   arith.divsi
// CHECK:       %[[LO1:.*]] = arith.muli
// CHECK:       arith.cmpi slt, %[[K:.*]], %[[LO1]] : tensor<16xi32>
// CHECK:       %[[HI2:.*]] = arith.addi
// CHECK:       arith.cmpi slt, %[[K]], %[[HI2]] : tensor<16xi32>
// CHECK:       %[[HI3:.*]] = arith.addi
// CHECK:       arith.cmpi sge, %[[K]], %[[HI3]] : tensor<16xi32>
// CHECK:       %[[HI4:.*]] = arith.addi
// CHECK:       arith.cmpi slt, %[[K]], %[[HI4]] : tensor<16xi32>
// CHECK:       %[[LO5:.*]] = arith.muli
// CHECK:       %[[HI5:.*]] = arith.addi %[[LO5]]
// CHECK:       arith.cmpi sge, %[[K]], %[[HI5]] : tensor<16xi32>
// CHECK:       arith.cmpi slt, %[[K]], %[[LO5]] : tensor<16xi32>
// CHECK:       arith.ori
func.func @orders(%j: i32, %s: i32) -> (tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>) {
  %g = arith.constant dense<32> : tensor<16xi32>
  %zero = arith.constant dense<0> : tensor<16xi32>
  %one = arith.constant dense<1> : tensor<16xi32>
  %ks = tile.splat %j : i32 -> tensor<16xi32>
  %ki = tile.iota : tensor<16xi32>
  %k = arith.addi %ks, %ki : tensor<16xi32>
  %kd = arith.divsi %k, %g : tensor<16xi32>
  %kr = arith.remsi %k, %g : tensor<16xi32>
  %kneg = arith.cmpi slt, %kr, %zero : tensor<16xi32>
  %kd1 = arith.subi %kd, %one : tensor<16xi32>
  %kf = arith.select %kneg, %kd1, %kd : tensor<16xi1>, tensor<16xi32>
  %ss = tile.splat %s : i32 -> tensor<16xi32>
  %lt = arith.cmpi slt, %kf, %ss : tensor<16xi32>
  %le = arith.cmpi sle, %kf, %ss : tensor<16xi32>
  %gt = arith.cmpi sgt, %kf, %ss : tensor<16xi32>
  %ge = arith.cmpi sge, %ss, %kf : tensor<16xi32>
  %ne = arith.cmpi ne, %kf, %ss : tensor<16xi32>
  return %lt, %le, %gt, %ge, %ne : tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>, tensor<16xi1>
}

// -----

// Both quotients differ across the tile (64 keys and 64 queries from scalars of coefficient
// 1 over 128-wide chunks): left alone, the mask stays element-wise.
// CHECK-LABEL: func.func @neither_uniform
// CHECK:       arith.cmpi eq
func.func @neither_uniform(%a: i32, %b: i32) -> tensor<64xi1> {
  %g = arith.constant dense<128> : tensor<64xi32>
  %zero = arith.constant dense<0> : tensor<64xi32>
  %one = arith.constant dense<1> : tensor<64xi32>
  %as = tile.splat %a : i32 -> tensor<64xi32>
  %i = tile.iota : tensor<64xi32>
  %x = arith.addi %as, %i : tensor<64xi32>
  %bs = tile.splat %b : i32 -> tensor<64xi32>
  %y = arith.addi %bs, %i : tensor<64xi32>
  %xd = arith.divsi %x, %g : tensor<64xi32>
  %xr = arith.remsi %x, %g : tensor<64xi32>
  %xn = arith.cmpi slt, %xr, %zero : tensor<64xi32>
  %xd1 = arith.subi %xd, %one : tensor<64xi32>
  %xf = arith.select %xn, %xd1, %xd : tensor<64xi1>, tensor<64xi32>
  %yd = arith.divsi %y, %g : tensor<64xi32>
  %yr = arith.remsi %y, %g : tensor<64xi32>
  %yn = arith.cmpi slt, %yr, %zero : tensor<64xi32>
  %yd1 = arith.subi %yd, %one : tensor<64xi32>
  %yf = arith.select %yn, %yd1, %yd : tensor<64xi1>, tensor<64xi32>
  %e = arith.cmpi eq, %xf, %yf : tensor<64xi32>
  return %e : tensor<64xi1>
}
