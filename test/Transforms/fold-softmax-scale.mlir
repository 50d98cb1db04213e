// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-fold-softmax-scale))' --split-input-file | FileCheck %s

// The user's scale and log2(e) become one scalar multiply and one tile multiply, and the mask
// select moves after it.
// CHECK-LABEL: func.func @scale_then_log2e
// CHECK-SAME:  (%[[S:.*]]: tensor<4x8xf32>, %[[M:.*]]: tensor<4x8xi1>, %[[SCALE:.*]]: f32)
// CHECK-DAG:   %[[LOG2E:.*]] = arith.constant 1.44269502 : f32
// CHECK-DAG:   %[[NINF:.*]] = arith.constant dense<0xFF800000>
// CHECK:       %[[K:.*]] = arith.mulf %[[SCALE]], %[[LOG2E]] : f32
// CHECK:       %[[KT:.*]] = tile.splat %[[K]] : f32 -> tensor<4x8xf32>
// CHECK:       %[[T:.*]] = arith.mulf %[[S]], %[[KT]] : tensor<4x8xf32>
// CHECK:       %[[R:.*]] = arith.select %[[M]], %[[T]], %[[NINF]]
// CHECK-NOT:   arith.mulf
// CHECK:       return %[[R]]
func.func @scale_then_log2e(%s: tensor<4x8xf32>, %m: tensor<4x8xi1>, %scale: f32) -> tensor<4x8xf32> {
  %st = tile.splat %scale : f32 -> tensor<4x8xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<4x8xf32>
  %log2e = arith.constant dense<1.44269502> : tensor<4x8xf32>
  %x = arith.mulf %s, %st : tensor<4x8xf32>
  %y = arith.select %m, %x, %ninf : tensor<4x8xi1>, tensor<4x8xf32>
  %t = arith.mulf %y, %log2e : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// A negative factor does not commute with -inf masking: nothing moves.
// CHECK-LABEL: func.func @negative_factor_stays
// CHECK:       arith.select
// CHECK-NEXT:  arith.mulf
func.func @negative_factor_stays(%s: tensor<4x8xf32>, %m: tensor<4x8xi1>) -> tensor<4x8xf32> {
  %ninf = arith.constant dense<0xFF800000> : tensor<4x8xf32>
  %neg = arith.constant dense<-2.0> : tensor<4x8xf32>
  %y = arith.select %m, %s, %ninf : tensor<4x8xi1>, tensor<4x8xf32>
  %t = arith.mulf %y, %neg : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// A select whose other value is not -inf is not a mask: nothing moves.
// CHECK-LABEL: func.func @not_a_mask
// CHECK:       arith.select
// CHECK-NEXT:  arith.mulf
func.func @not_a_mask(%s: tensor<4x8xf32>, %m: tensor<4x8xi1>) -> tensor<4x8xf32> {
  %zero = arith.constant dense<0.0> : tensor<4x8xf32>
  %k = arith.constant dense<2.0> : tensor<4x8xf32>
  %y = arith.select %m, %s, %zero : tensor<4x8xi1>, tensor<4x8xf32>
  %t = arith.mulf %y, %k : tensor<4x8xf32>
  return %t : tensor<4x8xf32>
}

// -----

// A product used twice keeps its own multiply.
// CHECK-LABEL: func.func @shared_product
// CHECK-COUNT-2: arith.mulf %{{.*}} : tensor<4x8xf32>
func.func @shared_product(%s: tensor<4x8xf32>, %a: f32, %b: f32) -> (tensor<4x8xf32>, tensor<4x8xf32>) {
  %at = tile.splat %a : f32 -> tensor<4x8xf32>
  %bt = tile.splat %b : f32 -> tensor<4x8xf32>
  %x = arith.mulf %s, %at : tensor<4x8xf32>
  %y = arith.mulf %x, %bt : tensor<4x8xf32>
  return %x, %y : tensor<4x8xf32>, tensor<4x8xf32>
}
