// tilegpu-overlap-wgmma on the two loops of a causal attention kernel (the input is
// examples/attention_naive.mlir after --tile-optimize --tilegpu-assign-layouts="wgmma=true"
// --tilegpu-allocate-shared --canonicalize --cse): in each loop S_j = Q·K_jᵀ and the previous
// iteration's P·V are two tilegpu.wgmma groups, the copies of K_{j+1} (predicated) and V_j
// follow them, a wait with one group pending gives S_j, and after the softmax a wait with none
// pending gives O and ties P_j. The mask-free loop hands its pending P·V to the masked loop,
// which reads the same buffers; the drain follows the second loop only.
// RUN: tessel-opt %s --split-input-file --tilegpu-overlap-wgmma | FileCheck %s

// CHECK-LABEL: func.func @attention
// CHECK: %[[V:.*]] = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64}
// CHECK: %[[K:.*]] = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64}
// CHECK: %[[Q:.*]] = tilegpu.local_load
// The first loop: K of its first iteration, unconditionally; nothing pending (P = 0, "V" = K).
// CHECK: %[[P0:.*]] = arith.constant dense<0.000000e+00> : tensor<64x64xf16, #op_a>
// CHECK: gpu.barrier
// CHECK-NEXT: %[[T0:.*]] = tilegpu.async_copy %[[KD:.*]][%[[LB:.*]], %{{.*}}] into %[[K]][%[[S0:.*]]] :
// CHECK-NEXT: %[[G0:.*]] = tilegpu.async_commit %[[T0]]
// CHECK-NEXT: %[[L1:.*]]:8 = scf.for %[[J:.*]] = %[[LB]] to %[[UB:.*]] step %[[STEP:.*]] iter_args(%[[O:.*]] = %{{.*}}, %{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}, %[[S:.*]] = %[[S0]], %[[G:.*]] = %[[G0]], %[[P:.*]] = %[[P0]], %[[VB:.*]] = %[[K]], %[[VS:.*]] = %[[S0]])
// CHECK-NEXT: tilegpu.async_wait %[[G]] {pending = 0 : i32}
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[SF:.*]] = tilegpu.wgmma %[[Q]], %[[K]][%[[S]]], %{{.*}} {transpose_b}
// CHECK-NEXT: %[[OF:.*]] = tilegpu.wgmma %[[P]], %[[VB]][%[[VS]]], %[[O]] :
// CHECK-NEXT: %[[NEXT:.*]] = arith.addi %[[J]], %[[STEP]]
// CHECK-NEXT: %[[MORE:.*]] = arith.cmpi slt, %[[NEXT]], %[[UB]]
// CHECK: %[[SN:.*]] = arith.remui
// CHECK-NEXT: %[[TK:.*]] = tilegpu.async_copy %[[KD]][%[[NEXT]], %{{.*}}] into %[[K]][%[[SN]]] if %[[MORE]]
// CHECK-NEXT: %[[TV:.*]] = tilegpu.async_copy %{{.*}}[%[[J]], %{{.*}}] into %[[V]][%[[S]]] :
// CHECK-NEXT: %[[GN:.*]] = tilegpu.async_commit %[[TK]], %[[TV]]
// CHECK-NEXT: %[[SV:.*]] = tilegpu.wgmma_wait %[[SF]] {pending = 1 : i32}
// CHECK-NEXT: arith.mulf %[[SV]]
// CHECK: math.exp2
// CHECK: %[[PJ:.*]] = tilegpu.convert_layout
// CHECK-NEXT: %[[OW:.*]]:2 = tilegpu.wgmma_wait %[[OF]], %[[PJ]] {pending = 0 : i32}
// CHECK-NEXT: %[[ON:.*]] = arith.mulf %[[OW]]#0,
// CHECK-NEXT: scf.yield %[[ON]], %{{.*}}, %{{.*}}, %[[SN]], %[[GN]], %[[OW]]#1, %[[V]], %[[S]]
// No drain between the loops: the masked loop starts in the stage after the first one's last,
// with its pending P and V, in the same buffers.
// CHECK-NOT: tilegpu.wgmma
// CHECK: gpu.barrier
// CHECK-NEXT: tilegpu.async_copy %[[KD]][%{{.*}}, %{{.*}}] into %[[K]][%[[L1]]#3] :
// CHECK: %[[L2:.*]]:8 = scf.for {{.*}} iter_args(%{{.*}} = %[[L1]]#0, %{{.*}} = %[[L1]]#1, %{{.*}} = %[[L1]]#2, %{{.*}} = %[[L1]]#3, %{{.*}} = %{{.*}}, %{{.*}} = %[[L1]]#5, %{{.*}} = %[[L1]]#6, %{{.*}} = %[[L1]]#7)
// CHECK: tilegpu.wgmma %{{.*}}, %[[K]][
// CHECK: tilegpu.async_copy %{{.*}} into %[[V]][
// CHECK: scf.yield
// The drain: V_last lands, then the last P·V.
// CHECK: tilegpu.async_wait %[[L2]]#4 {pending = 0 : i32}
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: gpu.barrier
// CHECK-NEXT: %[[LAST:.*]] = tilegpu.wgmma %[[L2]]#5, %[[L2]]#6[%[[L2]]#7], %[[L2]]#0 :
// CHECK-NEXT: %[[DONE:.*]] = tilegpu.wgmma_wait %[[LAST]] {pending = 0 : i32}
// The epilogue reads the drained O, not the loop's.
// CHECK-NOT: %[[L2]]#0
// CHECK: arith.divf %[[DONE]],

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#col = #tilegpu.slice<dim = 0, parent = #mma>
#op_a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#op_b = #tilegpu.dot_operand<operand = 1, parent = #mma>
#row = #tilegpu.slice<dim = 1, parent = #mma>
module {
  func.func @attention(%arg0: !tile.ptr<f16>, %arg1: !tile.ptr<f16>, %arg2: !tile.ptr<f16>, %arg3: !tile.ptr<f16>, %arg4: !tile.ptr<f32>, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: f32) attributes {tilegpu.shared_bytes = 32768 : i64} {
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
    %0 = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
    %1 = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
    %2 = tilegpu.alloc {offset = 8192 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
    %3 = tilegpu.alloc {offset = 0 : i64, stride = 16384 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
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
    %64:3 = scf.for %arg10 = %c0_i32 to %59 step %c64_i32 iter_args(%arg11 = %cst_0, %arg12 = %cst_1, %arg13 = %cst_2) -> (tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>)  : i32 {
      %75 = arith.divui %arg10, %c64_i32 : i32
      %76 = arith.remui %75, %c2_i32 : i32
      %77 = tilegpu.async_copy %18[%arg10, %c0_i32] into %3[%76] : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
      %78 = tilegpu.async_commit %77
      tilegpu.async_wait %78 {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %79 = tilegpu.local_load %3[%76] {transpose} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %80 = tile.dot %25, %79, %cst_0 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      %81 = arith.mulf %80, %63 : tensor<64x64xf32, #mma>
      %82 = tile.reduce max %81 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %83 = arith.maximumf %arg12, %82 : tensor<64xf32, #row>
      %84 = arith.cmpf oeq, %83, %cst_1 : tensor<64xf32, #row>
      %85 = arith.select %84, %cst_2, %83 : tensor<64xi1, #row>, tensor<64xf32, #row>
      %86 = arith.subf %arg12, %85 : tensor<64xf32, #row>
      %87 = math.exp2 %86 : tensor<64xf32, #row>
      %88 = tile.expand_dims %85 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %89 = tile.broadcast %88 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %90 = arith.subf %81, %89 : tensor<64x64xf32, #mma>
      %91 = math.exp2 %90 : tensor<64x64xf32, #mma>
      %92 = tile.reduce sum %91 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %93 = arith.mulf %arg13, %87 : tensor<64xf32, #row>
      %94 = arith.addf %93, %92 : tensor<64xf32, #row>
      %95 = arith.truncf %91 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %96 = tilegpu.async_copy %19[%arg10, %c0_i32] into %2[%76] : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
      %97 = tilegpu.async_commit %96
      tilegpu.async_wait %97 {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %98 = tilegpu.local_load %2[%76] : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %99 = tile.expand_dims %87 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %100 = tile.broadcast %99 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %101 = arith.mulf %arg11, %100 : tensor<64x64xf32, #mma>
      %102 = tilegpu.convert_layout %95 : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #op_a>
      %103 = tile.dot %102, %98, %101 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      scf.yield %103, %83, %94 : tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>
    } {tile.block_mask = "all_true"}
    %65:3 = scf.for %arg10 = %59 to %61 step %c64_i32 iter_args(%arg11 = %64#0, %arg12 = %64#1, %arg13 = %64#2) -> (tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>)  : i32 {
      %75 = arith.subi %arg10, %59 : i32
      %76 = arith.divui %75, %c64_i32 : i32
      %77 = arith.remui %76, %c2_i32 : i32
      %78 = tilegpu.async_copy %18[%arg10, %c0_i32] into %1[%77] : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
      %79 = tilegpu.async_commit %78
      tilegpu.async_wait %79 {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %80 = tilegpu.local_load %1[%77] {transpose} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %81 = tile.dot %25, %80, %cst_0 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      %82 = tile.splat %arg10 : i32 -> tensor<64xi32, #col>
      %83 = arith.addi %82, %27 : tensor<64xi32, #col>
      %84 = tile.expand_dims %83 axis 0 : tensor<64xi32, #col> -> tensor<1x64xi32, #col>
      %85 = tile.broadcast %84 : tensor<1x64xi32, #col> -> tensor<64x64xi32, #mma>
      %86 = arith.cmpi slt, %85, %32 : tensor<64x64xi32, #mma>
      %87 = arith.cmpi sge, %31, %85 : tensor<64x64xi32, #mma>
      %88 = arith.andi %86, %87 : tensor<64x64xi1, #mma>
      %89 = arith.mulf %81, %63 : tensor<64x64xf32, #mma>
      %90 = arith.select %88, %89, %cst : tensor<64x64xi1, #mma>, tensor<64x64xf32, #mma>
      %91 = tile.reduce max %90 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %92 = arith.maximumf %arg12, %91 : tensor<64xf32, #row>
      %93 = arith.cmpf oeq, %92, %cst_1 : tensor<64xf32, #row>
      %94 = arith.select %93, %cst_2, %92 : tensor<64xi1, #row>, tensor<64xf32, #row>
      %95 = arith.subf %arg12, %94 : tensor<64xf32, #row>
      %96 = math.exp2 %95 : tensor<64xf32, #row>
      %97 = tile.expand_dims %94 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %98 = tile.broadcast %97 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %99 = arith.subf %90, %98 : tensor<64x64xf32, #mma>
      %100 = math.exp2 %99 : tensor<64x64xf32, #mma>
      %101 = tile.reduce sum %100 axis 1 : tensor<64x64xf32, #mma> -> tensor<64xf32, #row>
      %102 = arith.mulf %arg13, %96 : tensor<64xf32, #row>
      %103 = arith.addf %102, %101 : tensor<64xf32, #row>
      %104 = arith.truncf %100 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
      %105 = tilegpu.async_copy %19[%arg10, %c0_i32] into %0[%77] : !tile.desc<2, f16> -> !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
      %106 = tilegpu.async_commit %105
      tilegpu.async_wait %106 {pending = 0 : i32}
      tilegpu.fence_async_shared
      gpu.barrier
      %107 = tilegpu.local_load %0[%77] : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128> -> tensor<64x64xf16, #op_b>
      %108 = tile.expand_dims %96 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
      %109 = tile.broadcast %108 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
      %110 = arith.mulf %arg11, %109 : tensor<64x64xf32, #mma>
      %111 = tilegpu.convert_layout %104 : tensor<64x64xf16, #mma> -> tensor<64x64xf16, #op_a>
      %112 = tile.dot %111, %107, %110 : tensor<64x64xf16, #op_a>, tensor<64x64xf16, #op_b> -> tensor<64x64xf32, #mma>
      scf.yield %112, %92, %103 : tensor<64x64xf32, #mma>, tensor<64xf32, #row>, tensor<64xf32, #row>
    } {tile.block_mask = "mixed"}
    %66 = arith.cmpf oeq, %65#2, %cst_2 : tensor<64xf32, #row>
    %67 = arith.select %66, %cst_3, %65#2 : tensor<64xi1, #row>, tensor<64xf32, #row>
    %68 = tile.expand_dims %67 axis 1 : tensor<64xf32, #row> -> tensor<64x1xf32, #row>
    %69 = tile.broadcast %68 : tensor<64x1xf32, #row> -> tensor<64x64xf32, #mma>
    %70 = arith.divf %65#0, %69 : tensor<64x64xf32, #mma>
    %71 = math.log2 %65#2 : tensor<64xf32, #row>
    %72 = arith.addf %65#1, %71 : tensor<64xf32, #row>
    %73 = arith.mulf %72, %cst_4 : tensor<64xf32, #row>
    %74 = arith.truncf %70 : tensor<64x64xf32, #mma> to tensor<64x64xf16, #mma>
    tile.store %20[%22, %c0_i32], %74 : !tile.desc<2, f16>, tensor<64x64xf16, #mma>
    tile.store %21[%22], %73 : !tile.desc<1, f32>, tensor<64xf32, #row>
    return
  }
}


// -----

#mma = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
#b = #tilegpu.dot_operand<operand = 1, parent = #mma>
!ring = !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>

// One dot is not the attention shape: the loop is left as it is (for tilegpu-pipeline-loads).
// CHECK-LABEL: func.func @one_dot
// CHECK-NOT: tilegpu.wgmma
// CHECK: tilegpu.async_wait %{{.*}} {pending = 0 : i32}
// CHECK: tile.dot
func.func @one_dot(%kd: !tile.desc<2, f16>, %q: tensor<64x64xf16, #a>, %lb: i32, %ub: i32) -> tensor<64x64xf32, #mma> {
  %c0 = arith.constant 0 : i32
  %c2 = arith.constant 2 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32, #mma>
  %k = tilegpu.alloc {offset = 0 : i64, stride = 8192 : i64} : !ring
  %o = scf.for %j = %lb to %ub step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32, #mma>) : i32 {
    %d = arith.subi %j, %lb : i32
    %it = arith.divui %d, %c64 : i32
    %st = arith.remui %it, %c2 : i32
    %t = tilegpu.async_copy %kd[%j, %c0] into %k[%st] : !tile.desc<2, f16> -> !ring
    %g = tilegpu.async_commit %t
    tilegpu.async_wait %g {pending = 0 : i32}
    tilegpu.fence_async_shared
    gpu.barrier
    %kb = tilegpu.local_load %k[%st] {transpose} : !ring -> tensor<64x64xf16, #b>
    %s = tile.dot %q, %kb, %acc : tensor<64x64xf16, #a>, tensor<64x64xf16, #b> -> tensor<64x64xf32, #mma>
    scf.yield %s : tensor<64x64xf32, #mma>
  }
  return %o : tensor<64x64xf32, #mma>
}
