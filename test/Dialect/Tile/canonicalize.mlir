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

// -----

// Scalar indices only (ALiBi's slopes[h]): one load_scalar, splat; the broadcast after it folds.
// CHECK-LABEL: func.func @gather_of_scalars
// CHECK-SAME: (%[[D:.*]]: !tile.desc<1, f32>, %[[H:.*]]: i32)
// CHECK-NEXT: %[[S:.*]] = tile.load_scalar %[[D]][%[[H]]] : !tile.desc<1, f32> -> f32
// CHECK-NEXT: %[[T:.*]] = tile.splat %[[S]] : f32 -> tensor<64x32xf32>
// CHECK-NEXT: return %[[T]]
func.func @gather_of_scalars(%d: !tile.desc<1, f32>, %h: i32) -> tensor<64x32xf32> {
  %g = tile.gather %d[%h] : !tile.desc<1, f32>, i32 -> tensor<1x1xf32>
  %b = tile.broadcast %g : tensor<1x1xf32> -> tensor<64x32xf32>
  return %b : tensor<64x32xf32>
}

// -----

// The front end's scalar-indexed read of a 1-D tensor (prefix[b]): a 1-element gather, then
// expand_dims and broadcast; all of it one splat of one load_scalar.
// CHECK-LABEL: func.func @gather_of_scalar_expanded
// CHECK-NEXT: %[[S:.*]] = tile.load_scalar
// CHECK-NEXT: %[[T:.*]] = tile.splat %[[S]] : i32 -> tensor<64x64xi32>
// CHECK-NEXT: return %[[T]]
func.func @gather_of_scalar_expanded(%d: !tile.desc<1, i32>, %b: i32) -> tensor<64x64xi32> {
  %g = tile.gather %d[%b] : !tile.desc<1, i32>, i32 -> tensor<1xi32>
  %e = tile.expand_dims %g axis 0 : tensor<1xi32> -> tensor<1x1xi32>
  %r = tile.broadcast %e : tensor<1x1xi32> -> tensor<64x64xi32>
  return %r : tensor<64x64xi32>
}
