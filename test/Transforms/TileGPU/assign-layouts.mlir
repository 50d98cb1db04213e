// tilegpu-assign-layouts on a causal attention program after --tile-optimize (the diagonal
// loop only): every tile gets the layout convert-tile-to-mma computes it in.
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-layouts | FileCheck %s
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-layouts="wgmma=true" | FileCheck %s --check-prefix=WG
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-layouts="warp-rows=32" 2>&1 | FileCheck %s --check-prefix=ROWS

// The layouts, named once at the top: the accumulator layout, its row and column slices,
// the A and B operand layouts.
// CHECK-DAG: #[[MMA:.*]] = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
// CHECK-DAG: #[[ROW:.*]] = #tilegpu.slice<dim = 1, parent = #[[MMA]]>
// CHECK-DAG: #[[COL:.*]] = #tilegpu.slice<dim = 0, parent = #[[MMA]]>
// CHECK-DAG: #[[A:.*]] = #tilegpu.dot_operand<operand = 0, parent = #[[MMA]]>
// CHECK-DAG: #[[B:.*]] = #tilegpu.dot_operand<operand = 1, parent = #[[MMA]]>
// CHECK-LABEL: func.func @causal_block
// The query block in the A operand layout, the K block (read transposed) and V in the B one.
// CHECK: %[[Q:.*]] = tile.load {{.*}} -> tensor<64x64xf16, #[[A]]>
// The iota is both the query index (a row vector) and the key index (a column vector): one
// copy per layout.
// CHECK-DAG: %[[IOTA_COL:.*]] = tile.iota : tensor<64xi32, #[[COL]]>
// CHECK-DAG: %[[IOTA_ROW:.*]] = tile.iota : tensor<64xi32, #[[ROW]]>
// CHECK: arith.addi %{{.*}}, %[[IOTA_ROW]] : tensor<64xi32, #[[ROW]]>
// Loop-carried: O in the accumulator layout, m and l as row vectors.
// CHECK: scf.for {{.*}} -> (tensor<64x64xf32, #[[MMA]]>, tensor<64xf32, #[[ROW]]>, tensor<64xf32, #[[ROW]]>)
// CHECK: %[[K:.*]] = tile.load {{.*}} -> tensor<64x64xf16, #[[B]]>
// CHECK: %[[KT:.*]] = tile.trans %[[K]] : {{.*}} -> tensor<64x64xf16, #[[B]]>
// CHECK: %[[S:.*]] = tile.dot %[[Q]], %[[KT]], {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// The column index of the causal mask reads the column-vector copy.
// CHECK: %[[COLS:.*]] = arith.addi %{{.*}}, %[[IOTA_COL]] : tensor<64xi32, #[[COL]]>
// CHECK: tile.expand_dims %[[COLS]] axis 0 : tensor<64xi32, #[[COL]]> -> tensor<1x64xi32, #[[COL]]>
// CHECK: tile.reduce max {{.*}} -> tensor<64xf32, #[[ROW]]>
// CHECK: %[[P:.*]] = arith.truncf {{.*}} to tensor<64x64xf16, #[[MMA]]>
// CHECK: %[[V:.*]] = tile.load {{.*}} -> tensor<64x64xf16, #[[B]]>
// The P re-pack: the probabilities leave the accumulator layout for the A operand's.
// CHECK: %[[PA:.*]] = tilegpu.convert_layout %[[P]] : tensor<64x64xf16, #[[MMA]]> -> tensor<64x64xf16, #[[A]]>
// CHECK: tile.dot %[[PA]], %[[V]], {{.*}} -> tensor<64x64xf32, #[[MMA]]>
// The epilogue: O / l in the accumulator layout, the log-sum-exp as a row vector.
// CHECK: tile.store {{.*}} : !tile.desc<2, f16>, tensor<64x64xf16, #[[MMA]]>
// CHECK: tile.store {{.*}} : !tile.desc<1, f32>, tensor<64xf32, #[[ROW]]>

// WG-DAG: #[[WMMA:.*]] = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
// WG-DAG: #[[WA:.*]] = #tilegpu.dot_operand<operand = 0, parent = #[[WMMA]]>
// WG-LABEL: func.func @causal_block
// WG: tile.dot {{.*}} -> tensor<64x64xf32, #[[WMMA]]>
// WG: tilegpu.convert_layout {{.*}} -> tensor<64x64xf16, #[[WA]]>

// Two m16 tiles per warp: a 64-row block takes two warps.
// ROWS: #tilegpu.mma<mma_sync, warps = 2, warp_rows = 32>
// ROWS-LABEL: func.func @causal_block
func.func @causal_block(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                        %o: !tile.ptr<f16>, %lse: !tile.ptr<f32>, %nq: i32, %nk: i32,
                        %scale: f32) {
  %cst_ln2 = arith.constant dense<0.693147182> : tensor<64xf32>
  %cst_one = arith.constant dense<1.000000e+00> : tensor<64xf32>
  %cst_zero_row = arith.constant dense<0.000000e+00> : tensor<64xf32>
  %cst_ninf_row = arith.constant dense<0xFF800000> : tensor<64xf32>
  %cst_zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %cst_ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %pid = tile.program_id 0 : i32
  %qd = tile.make_desc %q[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%c0], shape[%nk, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%c0], shape[%nk, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse[%c0], shape[%nq], strides[%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %row0 = arith.muli %pid, %c64 : i32
  %qb = tile.load %qd[%row0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %rs = tile.splat %row0 : i32 -> tensor<64xi32>
  %iota = tile.iota : tensor<64xi32>
  %rows = arith.addi %rs, %iota : tensor<64xi32>
  %rows2 = tile.expand_dims %rows axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %qi = tile.broadcast %rows2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %nks = tile.splat %nk : i32 -> tensor<64x64xi32>
  %sc = tile.splat %scale : f32 -> tensor<64x64xf32>
  %end = arith.addi %row0, %c64 : i32
  %res:3 = scf.for %j = %row0 to %end step %c64 iter_args(%acc = %cst_zero, %m = %cst_ninf_row, %l = %cst_zero_row) -> (tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>) : i32 {
    %kb = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %kt = tile.trans %kb : tensor<64x64xf16> -> tensor<64x64xf16>
    %s = tile.dot %qb, %kt, %cst_zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %js = tile.splat %j : i32 -> tensor<64xi32>
    %cols = arith.addi %js, %iota : tensor<64xi32>
    %cols2 = tile.expand_dims %cols axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %ki = tile.broadcast %cols2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %inb = arith.cmpi slt, %ki, %nks : tensor<64x64xi32>
    %causal = arith.cmpi sge, %qi, %ki : tensor<64x64xi32>
    %vis = arith.andi %inb, %causal : tensor<64x64xi1>
    %x = arith.mulf %s, %sc : tensor<64x64xf32>
    %xm = arith.select %vis, %x, %cst_ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %bm = tile.reduce max %xm axis 1 : tensor<64x64xf32> -> tensor<64xf32>
    %mn = arith.maximumf %m, %bm : tensor<64xf32>
    %dead = arith.cmpf oeq, %mn, %cst_ninf_row : tensor<64xf32>
    %ms = arith.select %dead, %cst_zero_row, %mn : tensor<64xi1>, tensor<64xf32>
    %dm = arith.subf %m, %ms : tensor<64xf32>
    %alpha = math.exp2 %dm : tensor<64xf32>
    %ms2 = tile.expand_dims %ms axis 1 : tensor<64xf32> -> tensor<64x1xf32>
    %msb = tile.broadcast %ms2 : tensor<64x1xf32> -> tensor<64x64xf32>
    %t = arith.subf %xm, %msb : tensor<64x64xf32>
    %p = math.exp2 %t : tensor<64x64xf32>
    %ps = tile.reduce sum %p axis 1 : tensor<64x64xf32> -> tensor<64xf32>
    %la = arith.mulf %l, %alpha : tensor<64xf32>
    %ln = arith.addf %la, %ps : tensor<64xf32>
    %p16 = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vb = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %a2 = tile.expand_dims %alpha axis 1 : tensor<64xf32> -> tensor<64x1xf32>
    %ab = tile.broadcast %a2 : tensor<64x1xf32> -> tensor<64x64xf32>
    %accs = arith.mulf %acc, %ab : tensor<64x64xf32>
    %accn = tile.dot %p16, %vb, %accs : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %accn, %mn, %ln : tensor<64x64xf32>, tensor<64xf32>, tensor<64xf32>
  }
  %empty = arith.cmpf oeq, %res#2, %cst_zero_row : tensor<64xf32>
  %lsafe = arith.select %empty, %cst_one, %res#2 : tensor<64xi1>, tensor<64xf32>
  %l2 = tile.expand_dims %lsafe axis 1 : tensor<64xf32> -> tensor<64x1xf32>
  %lb = tile.broadcast %l2 : tensor<64x1xf32> -> tensor<64x64xf32>
  %out = arith.divf %res#0, %lb : tensor<64x64xf32>
  %lg = math.log2 %res#2 : tensor<64xf32>
  %lsum = arith.addf %res#1, %lg : tensor<64xf32>
  %lse_v = arith.mulf %lsum, %cst_ln2 : tensor<64xf32>
  %out16 = arith.truncf %out : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %od[%row0, %c0], %out16 : !tile.desc<2, f16>, tensor<64x64xf16>
  tile.store %ld[%row0], %lse_v : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

// Gathers (a mask and a bias read from captured tensors) take the layout of their result, and
// their index tiles follow: the document id of each query row is read as a row vector (a 64x1
// gather, as canonicalization leaves doc[q_idx]), the bias at q - k in the accumulator layout.
// CHECK-LABEL: func.func @gathers
// CHECK: %[[DOC:.*]] = tile.gather %{{.*}}[%{{.*}}] : !tile.desc<1, i32>, tensor<64x1xi32, #[[ROW]]> -> tensor<64x1xi32, #[[ROW]]>
// CHECK: tile.broadcast %[[DOC]] : tensor<64x1xi32, #[[ROW]]> -> tensor<64x64xi32, #[[MMA]]>
// CHECK: tile.gather %{{.*}}[%{{.*}}] : !tile.desc<1, f32>, tensor<64x64xi32, #[[MMA]]> -> tensor<64x64xf32, #[[MMA]]>
func.func @gathers(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %doc: !tile.desc<1, i32>,
                   %bias: !tile.desc<1, f32>, %od: !tile.desc<2, f32>, %i: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %q = tile.load %qd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %k = tile.load %kd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %s = tile.dot %q, %k, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %r = tile.iota : tensor<64xi32>
  %r2 = tile.expand_dims %r axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %c2 = tile.expand_dims %r axis 0 : tensor<64xi32> -> tensor<1x64xi32>
  %rows = tile.broadcast %r2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %cols = tile.broadcast %c2 : tensor<1x64xi32> -> tensor<64x64xi32>
  %d = tile.gather %doc[%r2] : !tile.desc<1, i32>, tensor<64x1xi32> -> tensor<64x1xi32>
  %db = tile.broadcast %d : tensor<64x1xi32> -> tensor<64x64xi32>
  %zi = arith.constant dense<0> : tensor<64x64xi32>
  %m = arith.cmpi eq, %db, %zi : tensor<64x64xi32>
  %rel = arith.subi %rows, %cols : tensor<64x64xi32>
  %b = tile.gather %bias[%rel] : !tile.desc<1, f32>, tensor<64x64xi32> -> tensor<64x64xf32>
  %sb = arith.addf %s, %b : tensor<64x64xf32>
  %x = arith.select %m, %sb, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
  tile.store %od[%i, %i], %x : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}
