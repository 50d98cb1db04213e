// convert-tile-to-mma lowers the load schedule written in its input: this is
// examples/attention_naive.mlir after --tile-optimize --tilegpu-assign-layouts
// --tilegpu-allocate-shared="stages=3" --tilegpu-pipeline-loads --canonicalize --cse, a ring of
// three stages that no option of the lowering asks for (its default is two). The kernel spans
// the buffers (Q's 8 KiB, then three stages of K and V, 16 KiB each), the prologue commits two
// groups, each iteration waits with one group in flight, and the predicated copies of a group
// share one branch.
// RUN: tessel-opt %s --convert-tile-to-mma | FileCheck %s

// CHECK-LABEL: gpu.func @attention
// CHECK-SAME: tessel.dynamic_shared_bytes = 57344
// Q: copied, waited for, read into A fragments.
// CHECK: nvvm.cp.async.commit.group
// CHECK-NEXT: nvvm.cp.async.wait.group 0
// CHECK: nvvm.ldmatrix
// The prologue of the first loop: two groups, each under its own predicate.
// CHECK: gpu.barrier
// CHECK: scf.if
// CHECK-COUNT-2: nvvm.cp.async.shared.global
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.if
// CHECK: nvvm.cp.async.commit.group
// CHECK: scf.for
// CHECK: nvvm.cp.async.wait.group 1
// CHECK-NEXT: gpu.barrier
// CHECK: scf.if
// CHECK: nvvm.cp.async.commit.group
// CHECK-NOT: nvvm.cp.async.wait.group
// CHECK: nvvm.mma.sync
// CHECK: scf.yield

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#col = #tilegpu.slice<dim = 0, parent = #mma>
#op_a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#op_b = #tilegpu.dot_operand<operand = 1, parent = #mma>
#row = #tilegpu.slice<dim = 1, parent = #mma>
module {
  func.func @attention(%arg0: !tile.ptr<f16>, %arg1: !tile.ptr<f16>, %arg2: !tile.ptr<f16>, %arg3: !tile.ptr<f16>, %arg4: !tile.ptr<f32>, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: f32) attributes {tilegpu.shared_bytes = 57344 : i64} {
    %c128_i32 = arith.constant 128 : i32
    %c3_i32 = arith.constant 3 : i32
    %c2_i32 = arith.constant 2 : i32
    %c64_i32 = arith.constant 64 : i32
    %c1_i32 = arith.constant 1 : i32
    %cst = arith.constant dense<0xFF800000> : tensor<64x64xf32, #mma>
    %cst_0 = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
    %cst_1 = arith.constant dense<0xFF800000> : tensor<64xf32, #row>
    %cst_2 = arith.constant dense<0.000000e+00> : tensor<64xf32, #row>
    %cst_3 = arith.constant dense<1.000000e+00> : tensor<64xf32, #row>
    %cst_4 = arith.constant dense<0.693147182> : tensor<64xf32, #row>
    %cst_5 = arith.constant 1.44269502 : f32
    %c0_i64 = arith.constant 0 : i64
    %c64_i64 = arith.constant 64 : i64
    %c-1_i64 = arith.constant -1 : i64
    %c1_i64 = arith.constant 1 : i64
    %c-63_i64 = arith.constant -63 : i64
    %c-64_i64 = arith.constant -64 : i64
    %c0_i32 = arith.constant 0 : i32
    %0 = tilegpu.alloc {offset = 16384 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %1 = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %2 = tilegpu.alloc {offset = 16384 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %3 = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %4 = tilegpu.alloc {offset = 0 : i64} : !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>
    %5 = tile.program_id 0 : i32
    %6 = tile.program_id 1 : i32
    %7 = arith.divsi %6, %arg7 : i32
    %8 = arith.remsi %6, %arg7 : i32
    %9 = arith.divsi %arg7, %arg8 : i32
    %10 = arith.divsi %8, %9 : i32
    %11 = arith.muli %6, %arg5 : i32
    %12 = arith.muli %11, %c64_i32 : i32
    %13 = arith.muli %7, %arg8 : i32
    %14 = arith.addi %13, %10 : i32
    %15 = arith.muli %14, %arg6 : i32
    %16 = arith.muli %15, %c64_i32 : i32
    %17 = tile.make_desc %arg0[%12], shape[%arg5, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %18 = tile.make_desc %arg1[%16], shape[%arg6, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %19 = tile.make_desc %arg2[%16], shape[%arg6, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %20 = tile.make_desc %arg3[%12], shape[%arg5, %c64_i32], strides[%c64_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %21 = tile.make_desc %arg4[%11], shape[%arg5], strides[%c1_i32] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %22 = arith.muli %5, %c64_i32 : i32
    %23 = tilegpu.async_copy %17[%22, %c0_i32] into %4[%c0_i32] : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>
    %24 = tilegpu.async_commit %23
    tilegpu.async_wait %24 {pending = 0 : i32}
    gpu.barrier
    %25 = tilegpu.local_load %4[%c0_i32] : !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128> -> tensor<64x64xf16, #op_a>
    %26 = tile.splat %22 : i32 -> tensor<64xi32, #row>
    %27 = tile.iota : tensor<64xi32, #col>
    %28 = tile.iota : tensor<64xi32, #row>
    %29 = arith.addi %26, %28 : tensor<64xi32, #row>
    %30 = tile.expand_dims %29 axis 1 : tensor<64xi32, #row> -> tensor<64x1xi32, #row>
    %31 = tile.broadcast %30 : tensor<64x1xi32, #row> -> tensor<64x64xi32, #mma>
    %32 = tile.splat %arg6 : i32 -> tensor<64x64xi32, #mma>
    %33 = arith.extsi %arg6 : i32 to i64
    %34 = arith.ceildivsi %33, %c64_i64 : i64
    %35 = arith.maxsi %34, %c0_i64 : i64
    %36 = arith.addi %33, %c-64_i64 : i64
    %37 = arith.floordivsi %36, %c64_i64 : i64
    %38 = arith.addi %37, %c1_i64 : i64
    %39 = arith.maxsi %38, %c0_i64 : i64
    %40 = arith.minsi %39, %35 : i64
    %41 = arith.extsi %5 : i32 to i64
    %42 = arith.muli %41, %c64_i64 : i64
    %43 = arith.addi %42, %c-63_i64 : i64
    %44 = arith.floordivsi %43, %c64_i64 : i64
    %45 = arith.addi %44, %c1_i64 : i64
    %46 = arith.maxsi %45, %c0_i64 : i64
    %47 = arith.minsi %46, %35 : i64
    %48 = arith.subi %c-64_i64, %42 : i64
    %49 = arith.muli %48, %c-1_i64 : i64
    %50 = arith.ceildivsi %49, %c64_i64 : i64
    %51 = arith.maxsi %50, %c0_i64 : i64
    %52 = arith.minsi %51, %35 : i64
    %53 = arith.minsi %40, %47 : i64
    %54 = arith.minsi %35, %52 : i64
    %55 = arith.maxsi %54, %c0_i64 : i64
    %56 = arith.maxsi %53, %c0_i64 : i64
    %57 = arith.minsi %56, %55 : i64
    %58 = arith.muli %57, %c64_i64 : i64
    %59 = arith.trunci %58 : i64 to i32
    %60 = arith.muli %55, %c64_i64 : i64
    %61 = arith.trunci %60 : i64 to i32
    %62 = arith.mulf %arg9, %cst_5 : f32
    %63 = tile.splat %62 : f32 -> tensor<64x64xf32, #mma>
    gpu.barrier
    %64 = arith.cmpi sgt, %59, %c0_i32 : i32
    %65 = tilegpu.async_copy %18[%c0_i32, %c0_i32] into %3[%c0_i32] if %64 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %66 = tilegpu.async_copy %19[%c0_i32, %c0_i32] into %2[%c0_i32] if %64 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %67 = tilegpu.async_commit %65, %66
    %68 = arith.cmpi sgt, %59, %c64_i32 : i32
    %69 = tilegpu.async_copy %18[%c64_i32, %c0_i32] into %3[%c1_i32] if %68 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %70 = tilegpu.async_copy %19[%c64_i32, %c0_i32] into %2[%c1_i32] if %68 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %71 = tilegpu.async_commit %69, %70
    %72:6 = scf.for %arg10 = %c0_i32 to %59 step %c64_i32 iter_args(%arg11 = %cst_0, %arg12 = %cst_1, %arg13 = %cst_2, %arg14 = %c0_i32, %arg15 = %67, %arg16 = %71) -> (tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>, i32, !tilegpu.token, !tilegpu.token)  : i32 {
      tilegpu.async_wait %arg15 {pending = 1 : i32}
      gpu.barrier
      %92 = arith.addi %arg10, %c128_i32 : i32
      %93 = arith.addi %arg14, %c2_i32 : i32
      %94 = arith.remui %93, %c3_i32 : i32
      %95 = arith.cmpi slt, %92, %59 : i32
      %96 = tilegpu.async_copy %18[%92, %c0_i32] into %3[%94] if %95 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
      %97 = tilegpu.async_copy %19[%92, %c0_i32] into %2[%94] if %95 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
      %98 = tilegpu.async_commit %96, %97
      %99 = tilegpu.local_load %3[%arg14] {transpose} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %100 = tile.dot %25, %99, %cst_0 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      %101 = arith.mulf %100, %63 : tensor<64x64xf32, #mma>
      %102 = tile.reduce max %101 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %103 = arith.maximumf %arg12, %102 : tensor<64xf32, #row>
      %104 = arith.cmpf oeq, %103, %cst_1 : tensor<64xf32, #row>
      %105 = arith.select %104, %cst_2, %103 : tensor<64xi1, #row>, tensor<64xf32, #row>
      %106 = arith.subf %arg12, %105 : tensor<64xf32, #row>
      %107 = math.exp2 %106 : tensor<64xf32, #row>
      %108 = tile.expand_dims %105 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %109 = tile.broadcast %108 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %110 = arith.subf %101, %109 : tensor<64x64xf32, #mma>
      %111 = math.exp2 %110 : tensor<64x64xf32, #mma>
      %112 = tile.reduce sum %111 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %113 = arith.mulf %arg13, %107 : tensor<64xf32, #row>
      %114 = arith.addf %113, %112 : tensor<64xf32, #row>
      %115 = arith.truncf %111 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %116 = tilegpu.local_load %2[%arg14] : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %117 = tile.expand_dims %107 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %118 = tile.broadcast %117 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %119 = arith.mulf %arg11, %118 : tensor<64x64xf32, #mma>
      %120 = tilegpu.convert_layout %115 : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #op_a>
      %121 = tile.dot %120, %116, %119 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      %122 = arith.addi %arg14, %c1_i32 : i32
      %123 = arith.remui %122, %c3_i32 : i32
      scf.yield %121, %103, %114, %123, %arg16, %98 : tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>, i32, !tilegpu.token, !tilegpu.token
    } {tile.block_mask = "all_true"}
    gpu.barrier
    %73 = arith.cmpi slt, %59, %61 : i32
    %74 = tilegpu.async_copy %18[%59, %c0_i32] into %1[%c0_i32] if %73 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %75 = tilegpu.async_copy %19[%59, %c0_i32] into %0[%c0_i32] if %73 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %76 = tilegpu.async_commit %74, %75
    %77 = arith.addi %59, %c64_i32 : i32
    %78 = arith.cmpi slt, %77, %61 : i32
    %79 = tilegpu.async_copy %18[%77, %c0_i32] into %1[%c1_i32] if %78 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %80 = tilegpu.async_copy %19[%77, %c0_i32] into %0[%c1_i32] if %78 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
    %81 = tilegpu.async_commit %79, %80
    %82:6 = scf.for %arg10 = %59 to %61 step %c64_i32 iter_args(%arg11 = %72#0, %arg12 = %72#1, %arg13 = %72#2, %arg14 = %c0_i32, %arg15 = %76, %arg16 = %81) -> (tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>, i32, !tilegpu.token, !tilegpu.token)  : i32 {
      tilegpu.async_wait %arg15 {pending = 1 : i32}
      gpu.barrier
      %92 = arith.addi %arg10, %c128_i32 : i32
      %93 = arith.addi %arg14, %c2_i32 : i32
      %94 = arith.remui %93, %c3_i32 : i32
      %95 = arith.cmpi slt, %92, %61 : i32
      %96 = tilegpu.async_copy %18[%92, %c0_i32] into %1[%94] if %95 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
      %97 = tilegpu.async_copy %19[%92, %c0_i32] into %0[%94] if %95 : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128>
      %98 = tilegpu.async_commit %96, %97
      %99 = tilegpu.local_load %1[%arg14] {transpose} : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %100 = tile.dot %25, %99, %cst_0 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      %101 = tile.splat %arg10 : i32 -> tensor<64xi32, #col>
      %102 = arith.addi %101, %27 : tensor<64xi32, #col>
      %103 = tile.expand_dims %102 axis 0 : tensor<64xi32, #col> -> tensor<1x64xi32, #col>
      %104 = tile.broadcast %103 : tensor<1x64xi32, #col> -> tensor<64x64xi32, #mma>
      %105 = arith.cmpi slt, %104, %32 : tensor<64x64xi32, #mma>
      %106 = arith.cmpi sge, %31, %104 : tensor<64x64xi32, #mma>
      %107 = arith.andi %105, %106 : tensor<64x64xi1, #mma>
      %108 = arith.mulf %100, %63 : tensor<64x64xf32, #mma>
      %109 = arith.select %107, %108, %cst : tensor<64x64xi1, #mma>, tensor<64x64xf32, #mma>
      %110 = tile.reduce max %109 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %111 = arith.maximumf %arg12, %110 : tensor<64xf32, #row>
      %112 = arith.cmpf oeq, %111, %cst_1 : tensor<64xf32, #row>
      %113 = arith.select %112, %cst_2, %111 : tensor<64xi1, #row>, tensor<64xf32, #row>
      %114 = arith.subf %arg12, %113 : tensor<64xf32, #row>
      %115 = math.exp2 %114 : tensor<64xf32, #row>
      %116 = tile.expand_dims %113 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %117 = tile.broadcast %116 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %118 = arith.subf %109, %117 : tensor<64x64xf32, #mma>
      %119 = math.exp2 %118 : tensor<64x64xf32, #mma>
      %120 = tile.reduce sum %119 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %121 = arith.mulf %arg13, %115 : tensor<64xf32, #row>
      %122 = arith.addf %121, %120 : tensor<64xf32, #row>
      %123 = arith.truncf %119 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %124 = tilegpu.local_load %0[%arg14] : !tilegpu.smem<64x64xf16, stages = 3, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %125 = tile.expand_dims %115 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %126 = tile.broadcast %125 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %127 = arith.mulf %arg11, %126 : tensor<64x64xf32, #mma>
      %128 = tilegpu.convert_layout %123 : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #op_a>
      %129 = tile.dot %128, %124, %127 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      %130 = arith.addi %arg14, %c1_i32 : i32
      %131 = arith.remui %130, %c3_i32 : i32
      scf.yield %129, %111, %122, %131, %arg16, %98 : tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>, i32, !tilegpu.token, !tilegpu.token
    } {tile.block_mask = "mixed"}
    %83 = arith.cmpf oeq, %82#2, %cst_2 : tensor<64xf32, #row>
    %84 = arith.select %83, %cst_3, %82#2 : tensor<64xi1, #row>, tensor<64xf32, #row>
    %85 = tile.expand_dims %84 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
    %86 = tile.broadcast %85 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
    %87 = arith.divf %82#0, %86 : tensor<64x64xf32, #mma>
    %88 = math.log2 %82#2 : tensor<64xf32, #row>
    %89 = arith.addf %82#1, %88 : tensor<64xf32, #row>
    %90 = arith.mulf %89, %cst_4 : tensor<64xf32, #row>
    %91 = arith.truncf %87 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    tile.store %20[%22, %c0_i32], %91 : !tile.desc<2, f16>, tensor<64x64xf16, #mma>
    tile.store %21[%22], %90 : !tile.desc<1, f32>, tensor<64xf32, #row>
    return
  }
}

