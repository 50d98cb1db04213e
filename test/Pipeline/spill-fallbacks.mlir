// The spill fallbacks (lib/Target/SpillFallbacks.cpp) on the d128 backward's key-rows dK/dV
// program at 64×64, causal (the DSL's tile IR, traced by attention_bwd_dkdv_keyrows.warmup with a
// moderate scale): ptxas spills with the scale fold, so tesselc compiles it again generic and
// keeps that (it spills too: backward.NO_SPILL_SEARCH compiles it so at once);
// --no-spill-fallbacks keeps the first compile, fold and all.
// REQUIRES: ptxas
// RUN: tesselc %s --chip=sm_90a --codegen=auto --emit=ptx --ptxas-report -o /dev/null 2>&1 | FileCheck %s --check-prefix=SEARCH
// RUN: tesselc %s --chip=sm_90a --codegen=auto --emit=ptx --ptxas-report --no-spill-fallbacks -o /dev/null 2>&1 | FileCheck %s --check-prefix=FIRST

// SEARCH: ptxas sm_90a attention_bwd_dkdv_keyrows: {{[0-9]+}} registers, {{.*}} bytes spill stores
// SEARCH: spill fallbacks gave up: scale fold

// FIRST: ptxas sm_90a attention_bwd_dkdv_keyrows: {{[0-9]+}} registers, {{.*}} bytes spill stores
// FIRST-NOT: gave up

module {
  func.func @attention_bwd_dkdv_keyrows(%arg0: !tile.ptr<f16>, %arg1: !tile.ptr<f16>, %arg2: !tile.ptr<f16>, %arg3: !tile.ptr<f16>, %arg4: !tile.ptr<f32>, %arg5: !tile.ptr<f32>, %arg6: !tile.ptr<f16>, %arg7: !tile.ptr<f16>, %arg8: !tile.ptr<f16>, %arg9: i32, %arg10: i32, %arg11: i32, %arg12: i32, %arg13: i32, %arg14: f32 {tile.moderate}) {
    %c-64_i64 = arith.constant -64 : i64
    %c-63_i64 = arith.constant -63 : i64
    %c1_i64 = arith.constant 1 : i64
    %c-1_i64 = arith.constant -1 : i64
    %c64_i64 = arith.constant 64 : i64
    %c0_i64 = arith.constant 0 : i64
    %cst = arith.constant dense<0xFF800000> : tensor<64x64xf32>
    %cst_0 = arith.constant dense<1.44269502> : tensor<64xf32>
    %cst_1 = arith.constant dense<0.000000e+00> : tensor<64xf32>
    %cst_2 = arith.constant dense<0xFF800000> : tensor<64xf32>
    %cst_3 = arith.constant 1.44269502 : f32
    %cst_4 = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
    %cst_5 = arith.constant dense<0.000000e+00> : tensor<64x128xf32>
    %c128_i32 = arith.constant 128 : i32
    %c1_i32 = arith.constant 1 : i32
    %c64_i32 = arith.constant 64 : i32
    %c0_i32 = arith.constant 0 : i32
    %0 = arith.subi %c0_i32, %arg10 : i32
    %1 = arith.divsi %0, %c64_i32 : i32
    %2 = arith.remsi %0, %c64_i32 : i32
    %3 = arith.cmpi slt, %2, %c0_i32 : i32
    %4 = arith.subi %1, %c1_i32 : i32
    %5 = arith.select %3, %4, %1 : i32
    %6 = arith.subi %c0_i32, %5 : i32
    %7 = tile.program_id 0 : i32
    %8 = arith.remsi %7, %6 : i32
    %9 = arith.cmpi slt, %8, %c0_i32 : i32
    %10 = arith.cmpi slt, %6, %c0_i32 : i32
    %11 = arith.xori %9, %10 : i1
    %12 = arith.cmpi ne, %8, %c0_i32 : i32
    %13 = arith.andi %11, %12 : i1
    %14 = arith.addi %8, %6 : i32
    %15 = arith.select %13, %14, %8 : i32
    %16 = arith.divsi %7, %6 : i32
    %17 = arith.subi %16, %c1_i32 : i32
    %18 = arith.select %13, %17, %16 : i32
    %19 = tile.num_programs 1 : i32
    %20 = arith.muli %18, %19 : i32
    %21 = tile.program_id 1 : i32
    %22 = arith.addi %20, %21 : i32
    %23 = arith.divsi %22, %arg11 : i32
    %24 = arith.remsi %22, %arg11 : i32
    %25 = arith.cmpi slt, %24, %c0_i32 : i32
    %26 = arith.cmpi slt, %arg11, %c0_i32 : i32
    %27 = arith.xori %25, %26 : i1
    %28 = arith.cmpi ne, %24, %c0_i32 : i32
    %29 = arith.andi %27, %28 : i1
    %30 = arith.subi %23, %c1_i32 : i32
    %31 = arith.select %29, %30, %23 : i32
    %32 = arith.addi %24, %arg11 : i32
    %33 = arith.select %29, %32, %24 : i32
    %34 = arith.divsi %arg11, %arg12 : i32
    %35 = arith.remsi %arg11, %arg12 : i32
    %36 = arith.cmpi slt, %35, %c0_i32 : i32
    %37 = arith.cmpi slt, %arg12, %c0_i32 : i32
    %38 = arith.xori %36, %37 : i1
    %39 = arith.cmpi ne, %35, %c0_i32 : i32
    %40 = arith.andi %38, %39 : i1
    %41 = arith.subi %34, %c1_i32 : i32
    %42 = arith.select %40, %41, %34 : i32
    %43 = arith.divsi %33, %42 : i32
    %44 = arith.remsi %33, %42 : i32
    %45 = arith.cmpi slt, %44, %c0_i32 : i32
    %46 = arith.cmpi slt, %42, %c0_i32 : i32
    %47 = arith.xori %45, %46 : i1
    %48 = arith.cmpi ne, %44, %c0_i32 : i32
    %49 = arith.andi %47, %48 : i1
    %50 = arith.subi %43, %c1_i32 : i32
    %51 = arith.select %49, %50, %43 : i32
    %52 = arith.muli %31, %arg12 : i32
    %53 = arith.addi %52, %51 : i32
    %54 = arith.muli %53, %arg10 : i32
    %55 = arith.muli %31, %arg13 : i32
    %56 = arith.muli %33, %arg13 : i32
    %57 = arith.divsi %56, %arg11 : i32
    %58 = arith.remsi %56, %arg11 : i32
    %59 = arith.cmpi slt, %58, %c0_i32 : i32
    %60 = arith.xori %59, %26 : i1
    %61 = arith.cmpi ne, %58, %c0_i32 : i32
    %62 = arith.andi %60, %61 : i1
    %63 = arith.subi %57, %c1_i32 : i32
    %64 = arith.select %62, %63, %57 : i32
    %65 = arith.addi %55, %64 : i32
    %66 = arith.muli %65, %arg10 : i32
    %67 = arith.muli %22, %arg9 : i32
    %68 = arith.muli %54, %c128_i32 : i32
    %69 = tile.make_desc %arg1[%68], shape[%arg10, %c128_i32], strides[%c128_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %70 = tile.make_desc %arg2[%68], shape[%arg10, %c128_i32], strides[%c128_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %71 = arith.muli %66, %c128_i32 : i32
    %72 = tile.make_desc %arg6[%71], shape[%arg10, %c128_i32], strides[%c128_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %73 = tile.make_desc %arg7[%71], shape[%arg10, %c128_i32], strides[%c128_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %74 = arith.muli %67, %c128_i32 : i32
    %75 = tile.make_desc %arg0[%74], shape[%arg9, %c128_i32], strides[%c128_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %76 = tile.make_desc %arg3[%74], shape[%arg9, %c128_i32], strides[%c128_i32, %c1_i32] : !tile.ptr<f16> -> !tile.desc<2, f16>
    %77 = tile.make_desc %arg4[%67], shape[%arg9], strides[%c1_i32] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %78 = tile.make_desc %arg5[%67], shape[%arg9], strides[%c1_i32] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %79 = arith.muli %15, %c64_i32 : i32
    %80 = tile.load %69[%79, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %81 = tile.load %70[%79, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %82 = tile.iota : tensor<64xi32>
    %83 = tile.splat %79 : i32 -> tensor<64xi32>
    %84 = arith.addi %83, %82 : tensor<64xi32>
    %85 = tile.expand_dims %84 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
    %86 = tile.broadcast %85 : tensor<64x1xi32> -> tensor<64x64xi32>
    %87 = arith.extsi %arg9 : i32 to i64
    %88 = arith.ceildivsi %87, %c64_i64 : i64
    %89 = arith.maxsi %88, %c0_i64 : i64
    %90 = arith.extsi %15 : i32 to i64
    %91 = arith.muli %90, %c64_i64 : i64
    %92 = arith.extsi %arg10 : i32 to i64
    %93 = arith.subi %91, %92 : i64
    %94 = arith.subi %c-64_i64, %93 : i64
    %95 = arith.cmpi sge, %94, %c0_i64 : i64
    %96 = arith.select %95, %89, %c0_i64 : i64
    %97 = arith.cmpi sge, %93, %c0_i64 : i64
    %98 = arith.select %97, %89, %c0_i64 : i64
    %99 = arith.addi %87, %c-64_i64 : i64
    %100 = arith.floordivsi %99, %c64_i64 : i64
    %101 = arith.addi %100, %c1_i64 : i64
    %102 = arith.maxsi %101, %c0_i64 : i64
    %103 = arith.minsi %102, %89 : i64
    %104 = arith.minsi %96, %103 : i64
    %105 = arith.maxsi %98, %c0_i64 : i64
    %106 = arith.muli %90, %c-64_i64 : i64
    %107 = arith.addi %106, %c-63_i64 : i64
    %108 = arith.muli %107, %c-1_i64 : i64
    %109 = arith.ceildivsi %108, %c64_i64 : i64
    %110 = arith.maxsi %109, %c0_i64 : i64
    %111 = arith.minsi %110, %89 : i64
    %112 = arith.subi %c-64_i64, %106 : i64
    %113 = arith.floordivsi %112, %c64_i64 : i64
    %114 = arith.addi %113, %c1_i64 : i64
    %115 = arith.maxsi %114, %c0_i64 : i64
    %116 = arith.minsi %115, %89 : i64
    %117 = arith.maxsi %111, %c0_i64 : i64
    %118 = arith.minsi %104, %89 : i64
    %119 = arith.maxsi %105, %116 : i64
    %120 = arith.maxsi %89, %119 : i64
    %121 = arith.maxsi %117, %119 : i64
    %122 = arith.minsi %121, %120 : i64
    %123 = arith.maxsi %118, %122 : i64
    %124 = arith.minsi %123, %120 : i64
    %125 = arith.muli %119, %c64_i64 : i64
    %126 = arith.trunci %125 : i64 to i32
    %127 = arith.muli %122, %c64_i64 : i64
    %128 = arith.trunci %127 : i64 to i32
    %129 = arith.muli %124, %c64_i64 : i64
    %130 = arith.trunci %129 : i64 to i32
    %131 = arith.muli %120, %c64_i64 : i64
    %132 = arith.trunci %131 : i64 to i32
    %133 = arith.mulf %arg14, %cst_3 : f32
    %134 = tile.splat %133 : f32 -> tensor<64x64xf32>
    %135 = tile.splat %arg10 : i32 -> tensor<64x64xi32>
    %136 = arith.cmpi slt, %86, %135 : tensor<64x64xi32>
    %137 = tile.splat %arg9 : i32 -> tensor<64x64xi32>
    %138:2 = scf.for %arg15 = %126 to %128 step %c64_i32 iter_args(%arg16 = %cst_5, %arg17 = %cst_5) -> (tensor<64x128xf32>, tensor<64x128xf32>)  : i32 {
      %145 = tile.load %75[%arg15, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %146 = tile.load %76[%arg15, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %147 = tile.splat %arg15 : i32 -> tensor<64xi32>
      %148 = arith.addi %147, %82 : tensor<64xi32>
      %149 = tile.expand_dims %148 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
      %150 = tile.broadcast %149 : tensor<1x64xi32> -> tensor<64x64xi32>
      %151 = tile.trans %145 : tensor<64x128xf16> -> tensor<128x64xf16>
      %152 = tile.dot %80, %151, %cst_4 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %153 = tile.trans %146 : tensor<64x128xf16> -> tensor<128x64xf16>
      %154 = tile.dot %81, %153, %cst_4 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %155 = arith.mulf %152, %134 : tensor<64x64xf32>
      %156 = tile.load %77[%arg15] : !tile.desc<1, f32> -> tensor<64xf32>
      %157 = arith.cmpf oeq, %156, %cst_2 : tensor<64xf32>
      %158 = arith.select %157, %cst_1, %156 : tensor<64xi1>, tensor<64xf32>
      %159 = arith.mulf %158, %cst_0 : tensor<64xf32>
      %160 = arith.cmpi slt, %150, %137 : tensor<64x64xi32>
      %161 = arith.andi %136, %160 : tensor<64x64xi1>
      %162 = arith.cmpi sge, %150, %86 : tensor<64x64xi32>
      %163 = arith.andi %161, %162 : tensor<64x64xi1>
      %164 = arith.select %163, %155, %cst : tensor<64x64xi1>, tensor<64x64xf32>
      %165 = tile.expand_dims %159 axis 0 : tensor<64xf32> -> tensor<1x64xf32>
      %166 = tile.broadcast %165 : tensor<1x64xf32> -> tensor<64x64xf32>
      %167 = arith.subf %164, %166 : tensor<64x64xf32>
      %168 = math.exp2 %167 : tensor<64x64xf32>
      %169 = arith.truncf %168 : tensor<64x64xf32> to tensor<64x64xf16>
      %170 = tile.dot %169, %146, %arg17 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      %171 = tile.load %78[%arg15] : !tile.desc<1, f32> -> tensor<64xf32>
      %172 = tile.expand_dims %171 axis 0 : tensor<64xf32> -> tensor<1x64xf32>
      %173 = tile.broadcast %172 : tensor<1x64xf32> -> tensor<64x64xf32>
      %174 = arith.subf %154, %173 : tensor<64x64xf32>
      %175 = arith.mulf %168, %174 : tensor<64x64xf32>
      %176 = arith.truncf %175 : tensor<64x64xf32> to tensor<64x64xf16>
      %177 = tile.dot %176, %145, %arg16 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      scf.yield %177, %170 : tensor<64x128xf32>, tensor<64x128xf32>
    } {tile.block_mask = "mixed"}
    %139:2 = scf.for %arg15 = %128 to %130 step %c64_i32 iter_args(%arg16 = %138#0, %arg17 = %138#1) -> (tensor<64x128xf32>, tensor<64x128xf32>)  : i32 {
      %145 = tile.load %75[%arg15, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %146 = tile.load %76[%arg15, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %147 = tile.trans %145 : tensor<64x128xf16> -> tensor<128x64xf16>
      %148 = tile.dot %80, %147, %cst_4 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %149 = tile.trans %146 : tensor<64x128xf16> -> tensor<128x64xf16>
      %150 = tile.dot %81, %149, %cst_4 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %151 = arith.mulf %148, %134 : tensor<64x64xf32>
      %152 = tile.load %77[%arg15] : !tile.desc<1, f32> -> tensor<64xf32>
      %153 = arith.cmpf oeq, %152, %cst_2 : tensor<64xf32>
      %154 = arith.select %153, %cst_1, %152 : tensor<64xi1>, tensor<64xf32>
      %155 = arith.mulf %154, %cst_0 : tensor<64xf32>
      %156 = tile.expand_dims %155 axis 0 : tensor<64xf32> -> tensor<1x64xf32>
      %157 = tile.broadcast %156 : tensor<1x64xf32> -> tensor<64x64xf32>
      %158 = arith.subf %151, %157 : tensor<64x64xf32>
      %159 = math.exp2 %158 : tensor<64x64xf32>
      %160 = arith.truncf %159 : tensor<64x64xf32> to tensor<64x64xf16>
      %161 = tile.dot %160, %146, %arg17 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      %162 = tile.load %78[%arg15] : !tile.desc<1, f32> -> tensor<64xf32>
      %163 = tile.expand_dims %162 axis 0 : tensor<64xf32> -> tensor<1x64xf32>
      %164 = tile.broadcast %163 : tensor<1x64xf32> -> tensor<64x64xf32>
      %165 = arith.subf %150, %164 : tensor<64x64xf32>
      %166 = arith.mulf %159, %165 : tensor<64x64xf32>
      %167 = arith.truncf %166 : tensor<64x64xf32> to tensor<64x64xf16>
      %168 = tile.dot %167, %145, %arg16 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      scf.yield %168, %161 : tensor<64x128xf32>, tensor<64x128xf32>
    } {tile.block_mask = "all_true"}
    %140:2 = scf.for %arg15 = %130 to %132 step %c64_i32 iter_args(%arg16 = %139#0, %arg17 = %139#1) -> (tensor<64x128xf32>, tensor<64x128xf32>)  : i32 {
      %145 = tile.load %75[%arg15, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %146 = tile.load %76[%arg15, %c0_i32] : !tile.desc<2, f16> -> tensor<64x128xf16>
      %147 = tile.splat %arg15 : i32 -> tensor<64xi32>
      %148 = arith.addi %147, %82 : tensor<64xi32>
      %149 = tile.expand_dims %148 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
      %150 = tile.broadcast %149 : tensor<1x64xi32> -> tensor<64x64xi32>
      %151 = tile.trans %145 : tensor<64x128xf16> -> tensor<128x64xf16>
      %152 = tile.dot %80, %151, %cst_4 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %153 = tile.trans %146 : tensor<64x128xf16> -> tensor<128x64xf16>
      %154 = tile.dot %81, %153, %cst_4 : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
      %155 = arith.mulf %152, %134 : tensor<64x64xf32>
      %156 = tile.load %77[%arg15] : !tile.desc<1, f32> -> tensor<64xf32>
      %157 = arith.cmpf oeq, %156, %cst_2 : tensor<64xf32>
      %158 = arith.select %157, %cst_1, %156 : tensor<64xi1>, tensor<64xf32>
      %159 = arith.mulf %158, %cst_0 : tensor<64xf32>
      %160 = arith.cmpi slt, %150, %137 : tensor<64x64xi32>
      %161 = arith.andi %136, %160 : tensor<64x64xi1>
      %162 = arith.cmpi sge, %150, %86 : tensor<64x64xi32>
      %163 = arith.andi %161, %162 : tensor<64x64xi1>
      %164 = arith.select %163, %155, %cst : tensor<64x64xi1>, tensor<64x64xf32>
      %165 = tile.expand_dims %159 axis 0 : tensor<64xf32> -> tensor<1x64xf32>
      %166 = tile.broadcast %165 : tensor<1x64xf32> -> tensor<64x64xf32>
      %167 = arith.subf %164, %166 : tensor<64x64xf32>
      %168 = math.exp2 %167 : tensor<64x64xf32>
      %169 = arith.truncf %168 : tensor<64x64xf32> to tensor<64x64xf16>
      %170 = tile.dot %169, %146, %arg17 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      %171 = tile.load %78[%arg15] : !tile.desc<1, f32> -> tensor<64xf32>
      %172 = tile.expand_dims %171 axis 0 : tensor<64xf32> -> tensor<1x64xf32>
      %173 = tile.broadcast %172 : tensor<1x64xf32> -> tensor<64x64xf32>
      %174 = arith.subf %154, %173 : tensor<64x64xf32>
      %175 = arith.mulf %168, %174 : tensor<64x64xf32>
      %176 = arith.truncf %175 : tensor<64x64xf32> to tensor<64x64xf16>
      %177 = tile.dot %176, %145, %arg16 : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
      scf.yield %177, %170 : tensor<64x128xf32>, tensor<64x128xf32>
    } {tile.block_mask = "mixed"}
    %141 = tile.splat %arg14 : f32 -> tensor<64x128xf32>
    %142 = arith.mulf %140#0, %141 : tensor<64x128xf32>
    %143 = arith.truncf %142 : tensor<64x128xf32> to tensor<64x128xf16>
    tile.store %72[%79, %c0_i32], %143 : !tile.desc<2, f16>, tensor<64x128xf16>
    %144 = arith.truncf %140#1 : tensor<64x128xf32> to tensor<64x128xf16>
    tile.store %73[%79, %c0_i32], %144 : !tile.desc<2, f16>, tensor<64x128xf16>
    return
  }
}
