// The tile ops' canonicalizations.
// RUN: tessel-opt %s --split-input-file --canonicalize | FileCheck %s

// A gather whose index tiles all broadcast from one shape reads that shape and broadcasts the
// result: a document mask's doc[b, q_idx] reads a row vector, not a whole tile.
// CHECK-LABEL: func.func @gather_of_broadcasts
// CHECK-SAME: (%[[D:.*]]: !tile.desc<2, i32>, %[[B:.*]]: i32, %[[Q:.*]]: tensor<64x1xi32>)
// CHECK-NEXT: %[[G:.*]] = tile.gather %[[D]][%[[B]], %[[Q]]] {padding = -1.000000e+00 : f64} : !tile.desc<2, i32>, i32, tensor<64x1xi32> -> tensor<64x1xi32>
// CHECK-NEXT: %[[R:.*]] = tile.broadcast %[[G]] : tensor<64x1xi32> -> tensor<64x32xi32>
// CHECK-NEXT: return %[[R]]
func.func @gather_of_broadcasts(%d: !tile.desc<2, i32>, %b: i32, %q: tensor<64x1xi32>)
    -> tensor<64x32xi32> {
  %qi = tile.broadcast %q : tensor<64x1xi32> -> tensor<64x32xi32>
  %g = tile.gather %d[%b, %qi] {padding = -1.0 : f64} : !tile.desc<2, i32>, i32,
      tensor<64x32xi32> -> tensor<64x32xi32>
  return %g : tensor<64x32xi32>
}

// -----

// Index tiles broadcast from different shapes (a relative-position bias, q - k) read a whole
// tile: nothing changes.
// CHECK-LABEL: func.func @gather_of_mixed_broadcasts
// CHECK: tile.gather %{{.*}}[%{{.*}}, %{{.*}}] : !tile.desc<2, f32>, tensor<64x32xi32>, tensor<64x32xi32> -> tensor<64x32xf32>
func.func @gather_of_mixed_broadcasts(%d: !tile.desc<2, f32>, %q: tensor<64x1xi32>,
                                      %k: tensor<1x32xi32>) -> tensor<64x32xf32> {
  %qi = tile.broadcast %q : tensor<64x1xi32> -> tensor<64x32xi32>
  %ki = tile.broadcast %k : tensor<1x32xi32> -> tensor<64x32xi32>
  %g = tile.gather %d[%qi, %ki] : !tile.desc<2, f32>, tensor<64x32xi32>, tensor<64x32xi32>
      -> tensor<64x32xf32>
  return %g : tensor<64x32xf32>
}
