// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-fold-index-division,canonicalize))' --split-input-file | FileCheck %s

// A block table read as Python's `blocks[q_idx // 64, kv_idx // 64]` (the DSL's floor division:
// divsi, and one less where the remainder is negative) over a 16x64 tile whose query rows start
// at 64·t + 16 and whose keys start at 64·j: every query quotient is t, every key quotient j,
// so the gather is one load_scalar at (t, j).
// CHECK-LABEL: func.func @table
// CHECK-NOT:   arith.divsi
// CHECK-NOT:   tile.gather
// CHECK:       %[[E:.*]] = tile.load_scalar %arg0[%arg1, %arg2] : !tile.desc<2, i32> -> i32
// CHECK:       tile.splat %[[E]] : i32 -> tensor<16x64xi32>
func.func @table(%blocks: !tile.desc<2, i32>, %t: i32, %j: i32) -> tensor<16x64xi32> {
  %c64 = arith.constant 64 : i32
  %c16 = arith.constant 16 : i32
  %g = arith.constant dense<64> : tensor<16x64xi32>
  %zero = arith.constant dense<0> : tensor<16x64xi32>
  %one = arith.constant dense<1> : tensor<16x64xi32>
  %t64 = arith.muli %t, %c64 : i32
  %q0 = arith.addi %t64, %c16 : i32
  %qs = tile.splat %q0 : i32 -> tensor<16xi32>
  %qi = tile.iota : tensor<16xi32>
  %q1 = arith.addi %qs, %qi : tensor<16xi32>
  %q2 = tile.expand_dims %q1 axis 1 : tensor<16xi32> -> tensor<16x1xi32>
  %q = tile.broadcast %q2 : tensor<16x1xi32> -> tensor<16x64xi32>
  %j64 = arith.muli %j, %c64 : i32
  %ks = tile.splat %j64 : i32 -> tensor<64xi32>
  %ki = tile.iota : tensor<64xi32>
  %k1 = arith.addi %ks, %ki : tensor<64xi32>
  %k2 = tile.expand_dims %k1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
  %k = tile.broadcast %k2 : tensor<1x64xi32> -> tensor<16x64xi32>
  %qd = arith.divsi %q, %g : tensor<16x64xi32>
  %qr = arith.remsi %q, %g : tensor<16x64xi32>
  %qneg = arith.cmpi slt, %qr, %zero : tensor<16x64xi32>
  %qd1 = arith.subi %qd, %one : tensor<16x64xi32>
  %qf = arith.select %qneg, %qd1, %qd : tensor<16x64xi1>, tensor<16x64xi32>
  %kd = arith.divsi %k, %g : tensor<16x64xi32>
  %kr = arith.remsi %k, %g : tensor<16x64xi32>
  %kneg = arith.cmpi slt, %kr, %zero : tensor<16x64xi32>
  %kd1 = arith.subi %kd, %one : tensor<16x64xi32>
  %kf = arith.select %kneg, %kd1, %kd : tensor<16x64xi1>, tensor<16x64xi32>
  %e = tile.gather %blocks[%qf, %kf] : !tile.desc<2, i32>, tensor<16x64xi32>, tensor<16x64xi32> -> tensor<16x64xi32>
  return %e : tensor<16x64xi32>
}

// -----

// Keys 64·j + [0, 64) divided by 32 take two quotients (a table finer than the tile): left
// alone. 48·j + [0, 16) divided by 64 is the same over the tile: with g = gcd(64, 48) = 16 it
// is 16·(3·j) + [0, 16), so the quotient is (3·j) // 4, one scalar floor division (a table
// coarser than the tile: the DSL's 128×32 d256 blocks under a 128-key table).
// CHECK-LABEL: func.func @coarser_table
// CHECK:       arith.select {{.*}} : tensor<64xi1>, tensor<64xi32>
// CHECK:       %[[L:.*]] = arith.muli %arg0, %c3_i32 : i32
// CHECK:       %[[F:.*]] = arith.floordivsi %[[L]], %c4_i32 : i32
// CHECK:       tile.splat %[[F]] : i32 -> tensor<16xi32>
func.func @coarser_table(%j: i32) -> (tensor<64xi32>, tensor<16xi32>) {
  %c64 = arith.constant 64 : i32
  %c48 = arith.constant 48 : i32
  %g32 = arith.constant dense<32> : tensor<64xi32>
  %zero = arith.constant dense<0> : tensor<64xi32>
  %one = arith.constant dense<1> : tensor<64xi32>
  %j64 = arith.muli %j, %c64 : i32
  %ks = tile.splat %j64 : i32 -> tensor<64xi32>
  %ki = tile.iota : tensor<64xi32>
  %k = arith.addi %ks, %ki : tensor<64xi32>
  %kd = arith.divsi %k, %g32 : tensor<64xi32>
  %kr = arith.remsi %k, %g32 : tensor<64xi32>
  %kneg = arith.cmpi slt, %kr, %zero : tensor<64xi32>
  %kd1 = arith.subi %kd, %one : tensor<64xi32>
  %kf = arith.select %kneg, %kd1, %kd : tensor<64xi1>, tensor<64xi32>
  %g64 = arith.constant dense<64> : tensor<16xi32>
  %z16 = arith.constant dense<0> : tensor<16xi32>
  %o16 = arith.constant dense<1> : tensor<16xi32>
  %j48 = arith.muli %j, %c48 : i32
  %ms = tile.splat %j48 : i32 -> tensor<16xi32>
  %mi = tile.iota : tensor<16xi32>
  %m = arith.addi %ms, %mi : tensor<16xi32>
  %md = arith.divsi %m, %g64 : tensor<16xi32>
  %mr = arith.remsi %m, %g64 : tensor<16xi32>
  %mneg = arith.cmpi slt, %mr, %z16 : tensor<16xi32>
  %md1 = arith.subi %md, %o16 : tensor<16xi32>
  %mf = arith.select %mneg, %md1, %md : tensor<16xi1>, tensor<16xi32>
  return %kf, %mf : tensor<64xi32>, tensor<16xi32>
}

// -----

// Negative offsets round toward −inf: keys 64·j − 64 + [0, 64) divided by 64 are j − 1
// everywhere (a truncating division would give j − 1 or j by sign).
// CHECK-LABEL: func.func @below_zero
// CHECK:       %[[M:.*]] = arith.addi %arg0, %c-1_i32 : i32
// CHECK:       tile.splat %[[M]] : i32 -> tensor<64xi32>
func.func @below_zero(%j: i32) -> tensor<64xi32> {
  %c64 = arith.constant 64 : i32
  %g = arith.constant dense<64> : tensor<64xi32>
  %zero = arith.constant dense<0> : tensor<64xi32>
  %one = arith.constant dense<1> : tensor<64xi32>
  %j64 = arith.muli %j, %c64 : i32
  %start = arith.subi %j64, %c64 : i32
  %ks = tile.splat %start : i32 -> tensor<64xi32>
  %ki = tile.iota : tensor<64xi32>
  %k = arith.addi %ks, %ki : tensor<64xi32>
  %kd = arith.divsi %k, %g : tensor<64xi32>
  %kr = arith.remsi %k, %g : tensor<64xi32>
  %kneg = arith.cmpi slt, %kr, %zero : tensor<64xi32>
  %kd1 = arith.subi %kd, %one : tensor<64xi32>
  %kf = arith.select %kneg, %kd1, %kd : tensor<64xi1>, tensor<64xi32>
  return %kf : tensor<64xi32>
}

// -----

// Not Python's floor division: the quotient by 64, the remainder's sign by 32. Left alone
// (64·j + [0, 16) is uniform under 32, which a fold reading only one divisor would take).
// CHECK-LABEL: func.func @two_divisors
// CHECK:       arith.select {{.*}} : tensor<16xi1>, tensor<16xi32>
func.func @two_divisors(%j: i32) -> tensor<16xi32> {
  %c64 = arith.constant 64 : i32
  %g = arith.constant dense<64> : tensor<16xi32>
  %h = arith.constant dense<32> : tensor<16xi32>
  %zero = arith.constant dense<0> : tensor<16xi32>
  %one = arith.constant dense<1> : tensor<16xi32>
  %j64 = arith.muli %j, %c64 : i32
  %ks = tile.splat %j64 : i32 -> tensor<16xi32>
  %ki = tile.iota : tensor<16xi32>
  %k = arith.addi %ks, %ki : tensor<16xi32>
  %kd = arith.divsi %k, %g : tensor<16xi32>
  %kr = arith.remsi %k, %h : tensor<16xi32>
  %kneg = arith.cmpi slt, %kr, %zero : tensor<16xi32>
  %kd1 = arith.subi %kd, %one : tensor<16xi32>
  %kf = arith.select %kneg, %kd1, %kd : tensor<16xi1>, tensor<16xi32>
  return %kf : tensor<16xi32>
}
