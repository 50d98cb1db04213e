// tilegpu-assign-layouts on a GEMM (issue 18): A and B both loaded in the loop over k, the
// accumulator carried. The A block gets the A operand layout although the loop streams it
// (the lowering reads it from its ring stage), B the B operand layout, the accumulator, the
// loop's carried value and the epilogue (bias as a column vector, relu, the cast) the
// accumulator layout: 128 rows on eight warps of 16 (wgmma, two warpgroups) or four of 32
// (mma.sync).
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" | FileCheck %s --check-prefix=WG
// RUN: tessel-opt %s --tilegpu-assign-layouts | FileCheck %s --check-prefix=SYNC

// WG-DAG: #[[MMA:.*]] = #tilegpu.mma<wgmma, warps = 8, warp_rows = 16>
// WG-DAG: #[[A:.*]] = #tilegpu.dot_operand<operand = 0, parent = #[[MMA]]>
// WG-DAG: #[[B:.*]] = #tilegpu.dot_operand<operand = 1, parent = #[[MMA]]>
// WG-DAG: #[[COL:.*]] = #tilegpu.slice<dim = 0, parent = #[[MMA]]>
// WG-LABEL: func.func @gemm_bias_relu
// WG: scf.for {{.*}} -> (tensor<128x128xf32, #[[MMA]]>)
// WG: tile.load {{.*}} -> tensor<128x64xf16, #[[A]]>
// WG: tile.load {{.*}} -> tensor<64x128xf16, #[[B]]>
// WG: tile.dot {{.*}} -> tensor<128x128xf32, #[[MMA]]>
// WG: tile.load {{.*}} -> tensor<128xf32, #[[COL]]>
// WG: arith.maximumf {{.*}} : tensor<128x128xf32, #[[MMA]]>
// WG: tile.store {{.*}} tensor<128x128xf16, #[[MMA]]>
// SYNC: #tilegpu.mma<mma_sync, warps = 4, warp_rows = 32>
func.func @gemm_bias_relu(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %bias: !tile.ptr<f32>,
                          %c: !tile.ptr<f16>, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c512 = arith.constant 512 : i32
  %ad = tile.make_desc %a, shape [%m, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %bd = tile.make_desc %b, shape [%c512, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %bias, shape [%c512], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %cd = tile.make_desc %c, shape [%m, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %r = scf.for %k = %c0 to %c512 step %c64 iter_args(%acc = %zero) -> (tensor<128x128xf32>) : i32 {
    %at = tile.load %ad[%c0, %k] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %bt = tile.load %bd[%k, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %next = tile.dot %at, %bt, %acc : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %next : tensor<128x128xf32>
  }
  %v = tile.load %vd[%c0] : !tile.desc<1, f32> -> tensor<128xf32>
  %v2 = tile.expand_dims %v axis 0 : tensor<128xf32> -> tensor<1x128xf32>
  %vb = tile.broadcast %v2 : tensor<1x128xf32> -> tensor<128x128xf32>
  %s = arith.addf %r, %vb : tensor<128x128xf32>
  %zeros = arith.constant dense<0.0> : tensor<128x128xf32>
  %relu = arith.maximumf %s, %zeros : tensor<128x128xf32>
  %h = arith.truncf %relu : tensor<128x128xf32> to tensor<128x128xf16>
  tile.store %cd[%c0, %c0], %h : !tile.desc<2, f16>, tensor<128x128xf16>
  return
}
