// convert-tile-to-mma lowers a program whose tiles already carry their tilegpu layouts as the
// layouts say: here two warps of 32 query rows each (two m16 tiles per warp), which it would not
// choose for a 64-row block by itself (16 rows per warp, four warps), with no option asking.
// The input is tilegpu-assign-layouts' output for test/Transforms/TileGPU/assign-layouts.mlir
// with warp-rows=32.
// RUN: tessel-opt %s --convert-tile-to-mma | FileCheck %s
// RUN: tessel-opt %s --convert-tile-to-mma="wgmma=true chip=sm_90a" | FileCheck %s

// The given layouts win over the options: 64 threads, mma.sync (not wgmma), both m16 tiles of
// a warp share every K and V ldmatrix.
// CHECK: gpu.func @causal_block
// CHECK-SAME: known_block_size = array<i32: 64, 1, 1>
// CHECK-SAME: tessel.codegen = "mma"
// CHECK: nvvm.mma.sync
// CHECK-NOT: wgmma

#mma = #tilegpu.mma<mma_sync, warps = 2, warp_rows = 32>
#row = #tilegpu.slice<dim = 1, parent = #mma>
#col = #tilegpu.slice<dim = 0, parent = #mma>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
module {
  func.func @causal_block(%arg0: !tile.ptr<f16>, %arg1: !tile.ptr<f16>, %arg2: !tile.ptr<f16>, %arg3: !tile.ptr<f16>, %arg4: !tile.ptr<f32>, %arg5: i32, %arg6: i32, %arg7: f32) {
    %cst = arith.constant dense<0.693147182> : tensor<64xf32, #row>
    %cst_0 = arith.constant dense<1.000000e+00> : tensor<64xf32, #row>
    %cst_1 = arith.constant dense<0.000000e+00> : tensor<64xf32, #row>
    %cst_2 = arith.constant dense<0xFF800000> : tensor<64xf32, #row>
    %cst_3 = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
    %cst_4 = arith.constant dense<0xFF800000> : tensor<64x64xf32, #mma>
    %c0_i32 = arith.constant 0 : i32
    %c1_i32 = arith.constant 1 : i32
    %c64_i32 = arith.constant 64 : i32
    %0 = tile.program_id 0 : i32
    %1 = tile.make_desc %arg0[%c0_i32], shape[%arg5, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %2 = tile.make_desc %arg1[%c0_i32], shape[%arg6, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %3 = tile.make_desc %arg2[%c0_i32], shape[%arg6, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %4 = tile.make_desc %arg3[%c0_i32], shape[%arg5, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %5 = tile.make_desc %arg4[%c0_i32], shape[%arg5], strides[%c1_i32] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %6 = arith.muli %0, %c64_i32 : i32
    %7 = tile.load %1[%6, %c0_i32] : !tile.desc<2, f16> -> tensor<64x64xf16, #a>
    %8 = tile.splat %6 : i32 -> tensor<64xi32, #row>
    %9 = tile.iota : tensor<64xi32, #col>
    %10 = tile.iota : tensor<64xi32, #row>
    %11 = arith.addi %8, %10 : tensor<64xi32, #row>
    %12 = tile.expand_dims %11 axis 1 : tensor<64xi32, #row> -> tensor<64x1xi32, #row>
    %13 = tile.broadcast %12 : tensor<64x1xi32, #row> -> tensor<64x64xi32, #mma>
    %14 = tile.splat %arg6 : i32 -> tensor<64x64xi32, #mma>
    %15 = tile.splat %arg7 : f32 -> tensor<64x64xf32, #mma>
    %16 = arith.addi %6, %c64_i32 : i32
    %17:3 = scf.for %arg8 = %6 to %16 step %c64_i32 iter_args(%arg9 = %cst_3, %arg10 = %cst_2, %arg11 = %cst_1) -> (tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>)  : i32 {
      %27 = tile.load %2[%arg8, %c0_i32] : !tile.desc<2, f16> -> tensor<64x64xf16, #b>
      %28 = tile.trans %27 : tensor<64x64xf16, #b> -> tensor<64x64xf16, #b>
      %29 = tile.dot %7, %28, %cst_3 : tensor<64x64xf16, #a>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #mma>
      %30 = tile.splat %arg8 : i32 -> tensor<64xi32, #col>
      %31 = arith.addi %30, %9 : tensor<64xi32, #col>
      %32 = tile.expand_dims %31 axis 0 : tensor<64xi32, #col> -> tensor<1x64xi32, #col>
      %33 = tile.broadcast %32 : tensor<1x64xi32, #col> -> tensor<64x64xi32, #mma>
      %34 = arith.cmpi slt, %33, %14 : tensor<64x64xi32, #mma>
      %35 = arith.cmpi sge, %13, %33 : tensor<64x64xi32, #mma>
      %36 = arith.andi %34, %35 : tensor<64x64xi1, #mma>
      %37 = arith.mulf %29, %15 : tensor<64x64xf32, #mma>
      %38 = arith.select %36, %37, %cst_4 : tensor<64x64xi1, #mma>, tensor<64x64xf32, #mma>
      %39 = tile.reduce max %38 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %40 = arith.maximumf %arg10, %39 : tensor<64xf32, #row>
      %41 = arith.cmpf oeq, %40, %cst_2 : tensor<64xf32, #row>
      %42 = arith.select %41, %cst_1, %40 : tensor<64xi1, #row>, tensor<64xf32, #row>
      %43 = arith.subf %arg10, %42 : tensor<64xf32, #row>
      %44 = math.exp2 %43 : tensor<64xf32, #row>
      %45 = tile.expand_dims %42 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %46 = tile.broadcast %45 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %47 = arith.subf %38, %46 : tensor<64x64xf32, #mma>
      %48 = math.exp2 %47 : tensor<64x64xf32, #mma>
      %49 = tile.reduce sum %48 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %50 = arith.mulf %arg11, %44 : tensor<64xf32, #row>
      %51 = arith.addf %50, %49 : tensor<64xf32, #row>
      %52 = arith.truncf %48 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %53 = tile.load %3[%arg8, %c0_i32] : !tile.desc<2, f16> -> tensor<64x64xf16, #b>
      %54 = tile.expand_dims %44 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %55 = tile.broadcast %54 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %56 = arith.mulf %arg9, %55 : tensor<64x64xf32, #mma>
      %57 = tilegpu.convert_layout %52 : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #a>
      %58 = tile.dot %57, %53, %56 : tensor<64x64xf16, #a>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #mma>
      scf.yield %58, %40, %51 : tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>
    }
    %18 = arith.cmpf oeq, %17#2, %cst_1 : tensor<64xf32, #row>
    %19 = arith.select %18, %cst_0, %17#2 : tensor<64xi1, #row>, tensor<64xf32, #row>
    %20 = tile.expand_dims %19 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
    %21 = tile.broadcast %20 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
    %22 = arith.divf %17#0, %21 : tensor<64x64xf32, #mma>
    %23 = math.log2 %17#2 : tensor<64xf32, #row>
    %24 = arith.addf %17#1, %23 : tensor<64xf32, #row>
    %25 = arith.mulf %24, %cst : tensor<64xf32, #row>
    %26 = arith.truncf %22 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    tile.store %4[%6, %c0_i32], %26 : !tile.desc<2, f16>, tensor<64x64xf16, #mma>
    tile.store %5[%6], %25 : !tile.desc<1, f32>, tensor<64xf32, #row>
    return
  }
}

