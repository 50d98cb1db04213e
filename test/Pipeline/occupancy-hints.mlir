// The occupancy step after ptxas (lib/Target/Occupancy.cpp): tessel.attention's d128 64×64 kernel
// (the DSL's tile IR, traced by tessel.compile_attention) needs 64 KiB of shared memory, three
// CTAs an SM on sm_90a, but ptxas first gives it 171 registers (two). tesselc then compiles it
// again with `.minnctapersm 3` and keeps that PTX and cubin (no spill);
// --no-occupancy-hints keeps the first.
// REQUIRES: ptxas
// RUN: tesselc %s --chip=sm_90a --codegen=auto --emit=ptx --ptxas-report -o %t.ptx | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=HINT < %t.ptx
// RUN: tesselc %s --chip=sm_90a --codegen=auto --emit=ptx --ptxas-report --no-occupancy-hints -o %t.first.ptx | FileCheck %s --check-prefix=REPORT
// RUN: FileCheck %s --check-prefix=FIRST < %t.first.ptx

// REPORT: ptxas sm_90a attention_kernel: {{[0-9]+}} registers, {{.*}} 0 bytes spill stores
// REPORT: kernel attention_kernel: block 128x1x1, 65536 bytes dynamic smem

// HINT: .entry attention_kernel(
// HINT: .maxntid 128, 1, 1
// HINT-NEXT: .minnctapersm 3
// HINT-NEXT: {

// FIRST: .entry attention_kernel(
// FIRST-NOT: .minnctapersm

module {
  func.func @attention_kernel(%arg0: !tile.ptr<f16>, %arg1: !tile.ptr<f16>, %arg2: !tile.ptr<f16>, %arg3: !tile.ptr<f16>, %arg4: !tile.ptr<f32>, %arg5: i32, %arg6: i32, %arg7: i32, %arg8: i32, %arg9: f32) {
    %c0_i32 = arith.constant 0 : i32
    %0 = arith.subi %c0_i32, %arg5 : i32
    %c64_i32 = arith.constant 64 : i32
    %1 = arith.divsi %0, %c64_i32 : i32
    %2 = arith.remsi %0, %c64_i32 : i32
    %c0_i32_0 = arith.constant 0 : i32
    %3 = arith.cmpi slt, %2, %c0_i32_0 : i32
    %c1_i32 = arith.constant 1 : i32
    %4 = arith.subi %1, %c1_i32 : i32
    %5 = arith.select %3, %4, %1 : i32
    %c0_i32_1 = arith.constant 0 : i32
    %6 = arith.subi %c0_i32_1, %5 : i32
    %7 = tile.program_id 0 : i32
    %8 = arith.divsi %7, %6 : i32
    %9 = arith.remsi %7, %6 : i32
    %c0_i32_2 = arith.constant 0 : i32
    %10 = arith.cmpi slt, %9, %c0_i32_2 : i32
    %11 = arith.cmpi slt, %6, %c0_i32_2 : i32
    %12 = arith.xori %10, %11 : i1
    %13 = arith.cmpi ne, %9, %c0_i32_2 : i32
    %14 = arith.andi %12, %13 : i1
    %15 = arith.addi %9, %6 : i32
    %16 = arith.select %14, %15, %9 : i32
    %17 = tile.program_id 0 : i32
    %18 = arith.divsi %17, %6 : i32
    %19 = arith.remsi %17, %6 : i32
    %c0_i32_3 = arith.constant 0 : i32
    %20 = arith.cmpi slt, %19, %c0_i32_3 : i32
    %21 = arith.cmpi slt, %6, %c0_i32_3 : i32
    %22 = arith.xori %20, %21 : i1
    %23 = arith.cmpi ne, %19, %c0_i32_3 : i32
    %24 = arith.andi %22, %23 : i1
    %c1_i32_4 = arith.constant 1 : i32
    %25 = arith.subi %18, %c1_i32_4 : i32
    %26 = arith.select %24, %25, %18 : i32
    %27 = tile.num_programs 1 : i32
    %28 = arith.muli %26, %27 : i32
    %29 = tile.program_id 1 : i32
    %30 = arith.addi %28, %29 : i32
    %31 = arith.divsi %30, %arg7 : i32
    %32 = arith.remsi %30, %arg7 : i32
    %c0_i32_5 = arith.constant 0 : i32
    %33 = arith.cmpi slt, %32, %c0_i32_5 : i32
    %34 = arith.cmpi slt, %arg7, %c0_i32_5 : i32
    %35 = arith.xori %33, %34 : i1
    %36 = arith.cmpi ne, %32, %c0_i32_5 : i32
    %37 = arith.andi %35, %36 : i1
    %c1_i32_6 = arith.constant 1 : i32
    %38 = arith.subi %31, %c1_i32_6 : i32
    %39 = arith.select %37, %38, %31 : i32
    %40 = arith.divsi %30, %arg7 : i32
    %41 = arith.remsi %30, %arg7 : i32
    %c0_i32_7 = arith.constant 0 : i32
    %42 = arith.cmpi slt, %41, %c0_i32_7 : i32
    %43 = arith.cmpi slt, %arg7, %c0_i32_7 : i32
    %44 = arith.xori %42, %43 : i1
    %45 = arith.cmpi ne, %41, %c0_i32_7 : i32
    %46 = arith.andi %44, %45 : i1
    %47 = arith.addi %41, %arg7 : i32
    %48 = arith.select %46, %47, %41 : i32
    %49 = arith.divsi %arg7, %arg8 : i32
    %50 = arith.remsi %arg7, %arg8 : i32
    %c0_i32_8 = arith.constant 0 : i32
    %51 = arith.cmpi slt, %50, %c0_i32_8 : i32
    %52 = arith.cmpi slt, %arg8, %c0_i32_8 : i32
    %53 = arith.xori %51, %52 : i1
    %54 = arith.cmpi ne, %50, %c0_i32_8 : i32
    %55 = arith.andi %53, %54 : i1
    %c1_i32_9 = arith.constant 1 : i32
    %56 = arith.subi %49, %c1_i32_9 : i32
    %57 = arith.select %55, %56, %49 : i32
    %58 = arith.divsi %48, %57 : i32
    %59 = arith.remsi %48, %57 : i32
    %c0_i32_10 = arith.constant 0 : i32
    %60 = arith.cmpi slt, %59, %c0_i32_10 : i32
    %61 = arith.cmpi slt, %57, %c0_i32_10 : i32
    %62 = arith.xori %60, %61 : i1
    %63 = arith.cmpi ne, %59, %c0_i32_10 : i32
    %64 = arith.andi %62, %63 : i1
    %c1_i32_11 = arith.constant 1 : i32
    %65 = arith.subi %58, %c1_i32_11 : i32
    %66 = arith.select %64, %65, %58 : i32
    %67 = arith.muli %30, %arg5 : i32
    %68 = arith.muli %39, %arg8 : i32
    %69 = arith.addi %68, %66 : i32
    %70 = arith.muli %69, %arg6 : i32
    %c128_i32 = arith.constant 128 : i32
    %71 = arith.muli %67, %c128_i32 : i32
    %c128_i32_12 = arith.constant 128 : i32
    %c128_i32_13 = arith.constant 128 : i32
    %c1_i32_14 = arith.constant 1 : i32
    %72 = tile.make_desc %arg0[%71], shape[%arg5, %c128_i32_12], strides[%c128_i32_13, %c1_i32_14] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %c128_i32_15 = arith.constant 128 : i32
    %73 = arith.muli %70, %c128_i32_15 : i32
    %c128_i32_16 = arith.constant 128 : i32
    %c128_i32_17 = arith.constant 128 : i32
    %c1_i32_18 = arith.constant 1 : i32
    %74 = tile.make_desc %arg1[%73], shape[%arg6, %c128_i32_16], strides[%c128_i32_17, %c1_i32_18] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %c128_i32_19 = arith.constant 128 : i32
    %75 = arith.muli %70, %c128_i32_19 : i32
    %c128_i32_20 = arith.constant 128 : i32
    %c128_i32_21 = arith.constant 128 : i32
    %c1_i32_22 = arith.constant 1 : i32
    %76 = tile.make_desc %arg2[%75], shape[%arg6, %c128_i32_20], strides[%c128_i32_21, %c1_i32_22] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %c128_i32_23 = arith.constant 128 : i32
    %77 = arith.muli %67, %c128_i32_23 : i32
    %c128_i32_24 = arith.constant 128 : i32
    %c128_i32_25 = arith.constant 128 : i32
    %c1_i32_26 = arith.constant 1 : i32
    %78 = tile.make_desc %arg3[%77], shape[%arg5, %c128_i32_24], strides[%c128_i32_25, %c1_i32_26] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %c1_i32_27 = arith.constant 1 : i32
    %79 = tile.make_desc %arg4[%67], shape[%arg5], strides[%c1_i32_27] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %c64_i32_28 = arith.constant 64 : i32
    %80 = arith.muli %16, %c64_i32_28 : i32
    %c0_i32_29 = arith.constant 0 : i32
    %81 = tile.load %72[%80, %c0_i32_29] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %82 = tile.iota : tensor<64xi32>
    %83 = tile.splat %80 : i32 -> tensor<64xi32>
    %84 = arith.addi %83, %82 : tensor<64xi32>
    %85 = tile.expand_dims %84 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
    %86 = tile.broadcast %85 : tensor<64x1xi32> -> tensor<64x64xi32>
    %cst = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
    %cst_30 = arith.constant dense<0xFF800000> : tensor<64xf32>
    %c0_i32_31 = arith.constant 0 : i32
    %c64_i32_32 = arith.constant 64 : i32
    %87:2 = scf.for %arg10 = %c0_i32_31 to %arg6 step %c64_i32_32 iter_args(%arg11 = %cst, %arg12 = %cst_30) -> (tensor<64x128xf32>, tensor<64xf32>)  : i32 {
      %c0_i32_34 = arith.constant 0 : i32
      %89 = tile.load %74[%arg10, %c0_i32_34] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %90 = tile.trans %89 : tensor<64x128xf16> -> tensor<128x64xf16>
      %cst_35 = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
      %91 = tile.dot %81, %90, %cst_35 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %92 = tile.splat %arg9 : f32 -> tensor<64x64xf32>
      %93 = arith.mulf %91, %92 : tensor<64x64xf32>
      %94 = tile.iota : tensor<64xi32>
      %95 = tile.splat %arg10 : i32 -> tensor<64xi32>
      %96 = arith.addi %95, %94 : tensor<64xi32>
      %97 = tile.expand_dims %96 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
      %98 = tile.broadcast %97 : tensor<1x64xi32> -> tensor<64x64xi32>
      %99 = tile.splat %arg6 : i32 -> tensor<64x64xi32>
      %100 = arith.cmpi slt, %98, %99 : tensor<64x64xi32>
      %cst_36 = arith.constant dense<0xFF800000> : tensor<64x64xf32>
      %101 = arith.select %100, %93, %cst_36 : tensor<64x64xi1>, tensor<64x64xf32>
      %result, %lse = tile.softmax %101 axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
      %c0_i32_37 = arith.constant 0 : i32
      %102 = tile.load %76[%arg10, %c0_i32_37] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %103 = arith.truncf %result : tensor<64x64xf32> to tensor<64x64xf16>
      %104 = tile.dot %103, %102, %arg11 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      scf.yield %104, %lse : tensor<64x128xf32>, tensor<64xf32>
    }
    %88 = arith.truncf %87#0 : tensor<64x128xf32> to tensor<64x128xf16>
    %c0_i32_33 = arith.constant 0 : i32
    tile.store %78[%80, %c0_i32_33], %88 : !tile.desc<2, f16>, tensor<64x128xf16>
    tile.store %79[%80], %87#1 : !tile.desc<1, f32>, tensor<64xf32>
    return
  }
}
