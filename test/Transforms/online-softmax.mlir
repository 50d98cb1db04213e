// RUN: tessel-opt %s --pass-pipeline='builtin.module(func.func(tile-online-softmax))' --split-input-file | FileCheck %s

// The streamed softmax becomes the running max/sum recurrence in base 2; the accumulator is
// rescaled before P·V; after the loop O = acc / l and lse = (m + log2 l)·ln 2.
// CHECK-LABEL: func.func @naive_attention
// CHECK:       %[[LSEINIT:.*]] = arith.constant dense<0xFF800000> : tensor<16xf32>
// CHECK-NEXT:  %[[NINF:.*]] = arith.constant dense<0xFF800000> : tensor<16xf32>
// CHECK-NEXT:  %[[ZERO:.*]] = arith.constant dense<0.000000e+00> : tensor<16xf32>
// CHECK:       %[[R:.*]]:4 = scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} iter_args(%[[ACC:.*]] = %{{.*}}, %[[LSE:.*]] = %[[LSEINIT]], %[[M:.*]] = %[[NINF]], %[[L:.*]] = %[[ZERO]])
// CHECK-NOT:     tile.softmax
// CHECK:         %[[T:.*]] = arith.mulf %{{.*}}, %{{.*}} : tensor<16x8xf32>
// CHECK:         %[[BMAX:.*]] = tile.reduce max %[[T]] axis 1
// CHECK:         %[[MNEW:.*]] = arith.maximumf %[[M]], %[[BMAX]]
// CHECK:         %[[MSAFE:.*]] = arith.select %{{.*}}, %{{.*}}, %[[MNEW]]
// CHECK:         %[[DM:.*]] = arith.subf %[[M]], %[[MSAFE]]
// CHECK:         %[[ALPHA:.*]] = math.exp2 %[[DM]] : tensor<16xf32>
// CHECK:         %[[P:.*]] = math.exp2 %{{.*}} : tensor<16x8xf32>
// CHECK:         %[[RSUM:.*]] = tile.reduce sum %[[P]] axis 1
// CHECK:         %[[LS:.*]] = arith.mulf %[[L]], %[[ALPHA]]
// CHECK:         %[[LNEW:.*]] = arith.addf %[[LS]], %[[RSUM]]
// CHECK:         %[[P16:.*]] = arith.truncf %[[P]]
// CHECK:         %[[ACCS:.*]] = arith.mulf %[[ACC]], %{{.*}} : tensor<16x4xf32>
// CHECK:         %[[ACCN:.*]] = tile.dot %[[P16]], %{{.*}}, %[[ACCS]]
// CHECK:         scf.yield %[[ACCN]], %[[LSE]], %[[MNEW]], %[[LNEW]]
// CHECK:       %[[EMPTY:.*]] = arith.cmpf oeq, %[[R]]#3
// CHECK:       %[[LSAFE:.*]] = arith.select %[[EMPTY]], %{{.*}}, %[[R]]#3
// CHECK:       %[[O:.*]] = arith.divf %[[R]]#0, %{{.*}} : tensor<16x4xf32>
// CHECK:       %[[LOG:.*]] = math.log2 %[[R]]#3
// CHECK:       %[[SUM:.*]] = arith.addf %[[R]]#2, %[[LOG]]
// CHECK:       %[[OUTLSE:.*]] = arith.mulf %[[SUM]], %{{.*}}
// CHECK:       return %[[O]], %[[OUTLSE]]
func.func @naive_attention(%q: tensor<16x4xf16>, %kd: !tile.desc<2, f16>, %vd: !tile.desc<2, f16>, %n: i32)
    -> (tensor<16x4xf32>, tensor<16xf32>) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %zs = arith.constant dense<0.0> : tensor<16x8xf32>
  %zo = arith.constant dense<0.0> : tensor<16x4xf32>
  %li = arith.constant dense<0xFF800000> : tensor<16xf32>
  %acc, %lse = scf.for %j = %c0 to %n step %c8 iter_args(%a = %zo, %l = %li) -> (tensor<16x4xf32>, tensor<16xf32>) : i32 {
    %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<8x4xf16>
    %kt = tile.trans %k : tensor<8x4xf16> -> tensor<4x8xf16>
    %s = tile.dot %q, %kt, %zs : tensor<16x4xf16>, tensor<4x8xf16> -> tensor<16x8xf32>
    %p, %rl = tile.softmax %s axis 1 streamed : tensor<16x8xf32> -> tensor<16xf32>
    %p16 = arith.truncf %p : tensor<16x8xf32> to tensor<16x8xf16>
    %v = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<8x4xf16>
    %an = tile.dot %p16, %v, %a : tensor<16x8xf16>, tensor<8x4xf16> -> tensor<16x4xf32>
    scf.yield %an, %rl : tensor<16x4xf32>, tensor<16xf32>
  }
  return %acc, %lse : tensor<16x4xf32>, tensor<16xf32>
}

// -----

// A softmax that is not streamed is left alone.
// CHECK-LABEL: func.func @local_softmax
// CHECK: tile.softmax %{{.*}} axis 1 :
func.func @local_softmax(%s: tensor<16x8xf32>) -> tensor<16x8xf32> {
  %p, %l = tile.softmax %s axis 1 : tensor<16x8xf32> -> tensor<16xf32>
  return %p : tensor<16x8xf32>
}
