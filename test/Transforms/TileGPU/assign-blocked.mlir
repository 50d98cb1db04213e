// tilegpu-assign-blocked (issues 10 and 18): the row-blocked layout of programs without dots,
// written on their types, and convert-tile-to-blocked lowering the layout it is given.
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-blocked | FileCheck %s
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-blocked="num-threads=256" | FileCheck %s --check-prefix=WIDE
// RUN: tessel-opt %s --split-input-file --convert-tile-to-blocked | FileCheck %s --check-prefix=LOWER

// A row softmax of 2x1024 f16 blocks: 16-byte vectors of 8 halves, a row over all 128 threads
// (256: two rows side by side). The loaded block and everything element-wise on it are
// blocked tiles, each reduction a row vector (the dim-1 slice), broadcast back.
// CHECK-DAG: #[[BL:.*]] = #tilegpu.blocked<threads = 128, vector = 8, threads_per_row = 128>
// CHECK-DAG: #[[ROW:.*]] = #tilegpu.slice<dim = 1, parent = #[[BL]]>
// CHECK-LABEL: func.func @softmax
// CHECK: tile.load {{.*}} -> tensor<2x1024xf16, #[[BL]]>
// CHECK: arith.extf {{.*}} to tensor<2x1024xf32, #[[BL]]>
// CHECK: tile.reduce max {{.*}} -> tensor<2xf32, #[[ROW]]>
// CHECK: tile.expand_dims {{.*}} -> tensor<2x1xf32, #[[ROW]]>
// CHECK: tile.broadcast {{.*}} -> tensor<2x1024xf32, #[[BL]]>
// CHECK: tile.store {{.*}} tensor<2x1024xf16, #[[BL]]>
// WIDE: #tilegpu.blocked<threads = 256, vector = 8, threads_per_row = 128>
func.func @softmax(%x: !tile.ptr<f16>, %y: !tile.ptr<f16>, %r: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c1024 = arith.constant 1024 : i32
  %pid = tile.program_id 0 : i32
  %xd = tile.make_desc %x, shape [%r, %c1024], strides [%c1024, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %yd = tile.make_desc %y, shape [%r, %c1024], strides [%c1024, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tile.load %xd[%pid, %c0] : !tile.desc<2, f16> -> tensor<2x1024xf16>
  %f = arith.extf %t : tensor<2x1024xf16> to tensor<2x1024xf32>
  %m = tile.reduce max %f axis 1 : tensor<2x1024xf32> -> tensor<2xf32>
  %m2 = tile.expand_dims %m axis 1 : tensor<2xf32> -> tensor<2x1xf32>
  %mb = tile.broadcast %m2 : tensor<2x1xf32> -> tensor<2x1024xf32>
  %d = arith.subf %f, %mb : tensor<2x1024xf32>
  %h = arith.truncf %d : tensor<2x1024xf32> to tensor<2x1024xf16>
  tile.store %yd[%pid, %c0], %h : !tile.desc<2, f16>, tensor<2x1024xf16>
  return
}

// -----

// One iota of 64 indices used as row numbers and as column numbers (a lower-triangular mask
// on a 64x64 block): computed twice, once as a row vector and once as a column vector.
// CHECK-DAG: #[[BL:.*]] = #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 16>
// CHECK-DAG: #[[ROW:.*]] = #tilegpu.slice<dim = 1, parent = #[[BL]]>
// CHECK-DAG: #[[COL:.*]] = #tilegpu.slice<dim = 0, parent = #[[BL]]>
// CHECK-LABEL: func.func @lower_triangle
// CHECK-DAG: tile.iota : tensor<64xi32, #[[ROW]]>
// CHECK-DAG: tile.iota : tensor<64xi32, #[[COL]]>
// CHECK: arith.cmpi sge, {{.*}} : tensor<64x64xi32, #[[BL]]>
// CHECK: arith.select {{.*}} : tensor<64x64xi1, #[[BL]]>, tensor<64x64xf32, #[[BL]]>
// The lowering takes the same layout: 16 threads a row, 8 rows side by side, 8 row slots.
// LOWER-LABEL: gpu.func @lower_triangle
// LOWER-SAME: known_block_size = array<i32: 128, 1, 1>
func.func @lower_triangle(%x: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
  %i = tile.iota : tensor<64xi32>
  %r = tile.expand_dims %i axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %rb = tile.broadcast %r : tensor<64x1xi32> -> tensor<64x64xi32>
  %c = tile.expand_dims %i axis 0 : tensor<64xi32> -> tensor<1x64xi32>
  %cb = tile.broadcast %c : tensor<1x64xi32> -> tensor<64x64xi32>
  %keep = arith.cmpi sge, %rb, %cb : tensor<64x64xi32>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %u = arith.select %keep, %t, %zero : tensor<64x64xi1>, tensor<64x64xf32>
  tile.store %d[%c0, %c0], %u : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// -----

// A layout chosen by hand (a lit test or another pass): rows of 256 floats over 32 threads
// instead of the 64 tilegpu-assign-blocked would pick, so a row is inside one warp — the row
// sums shuffle and need no shared memory. The lowering follows the types.
// LOWER-LABEL: gpu.func @given_layout
// LOWER-NOT: workgroup
// LOWER-SAME: known_block_size = array<i32: 128, 1, 1>
// LOWER-COUNT-5: gpu.shuffle xor
// LOWER-NOT: gpu.barrier
// LOWER: return
#bl = #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 32>
#row = #tilegpu.slice<dim = 1, parent = #bl>
func.func @given_layout(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %c256 = arith.constant 256 : i32
  %xd = tile.make_desc %x, shape [%c4, %c256], strides [%c256, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %yd = tile.make_desc %y, shape [%c4], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %xd[%c0, %c0] : !tile.desc<2, f32> -> tensor<4x256xf32, #bl>
  %s = tile.reduce sum %t axis 1 : tensor<4x256xf32, #bl> -> tensor<4xf32, #row>
  tile.store %yd[%c0], %s : !tile.desc<1, f32>, tensor<4xf32, #row>
  return
}

// -----

// Column sums of a 64x64 block (a layer norm backward's weight gradient): the result is a
// column vector. 16 threads a row, two rows a warp, four warps: each thread folds its 8 row
// slots, one shuffle (lanes 16 apart) combines a warp's two rows, and the four warps' values
// meet in 4 x 64 floats of shared memory.
// CHECK-DAG: #[[BL:.*]] = #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 16>
// CHECK-DAG: #[[COL:.*]] = #tilegpu.slice<dim = 0, parent = #[[BL]]>
// CHECK-LABEL: func.func @column_sums
// CHECK: tile.reduce sum {{.*}} axis 0 : tensor<64x64xf32, #[[BL]]> -> tensor<64xf32, #[[COL]]>
// LOWER-LABEL: gpu.func @column_sums
// LOWER-SAME: workgroup(%[[SCRATCH:.*]] : memref<256xf32, #gpu.address_space<workgroup>>)
// LOWER-COUNT-4: gpu.shuffle xor %{{.*}}, %c16_i32
// LOWER-NOT: gpu.shuffle
// LOWER: memref.store %{{.*}}, %[[SCRATCH]]
// LOWER: gpu.barrier
// LOWER-COUNT-4: memref.load %[[SCRATCH]]
func.func @column_sums(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %x, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %e = tile.make_desc %y, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %d[%c0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
  %s = tile.reduce sum %t axis 0 : tensor<64x64xf32> -> tensor<64xf32>
  tile.store %e[%c0], %s : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

// A loop over column chunks carrying a 4x256 f32 sum (long rows in several passes) and a row
// maximum: the carried values take their kinds — the block for the 2-D tile, its row slice for
// the 1-D one, as the reduction that makes it says — and share them with their inits and
// yielded values. Lowered, the loop carries registers: the sum's 8 floats a thread (4x256
// over 128 threads) and the maximum's one, as iter_args of an scf.for of scalars.
// CHECK-DAG: #[[BLF:.*]] = #tilegpu.blocked<threads = 128, vector = 8, threads_per_row = 32>
// CHECK-DAG: #[[ROWF:.*]] = #tilegpu.slice<dim = 1, parent = #[[BLF]]>
// CHECK-LABEL: func.func @chunks
// CHECK: scf.for {{.*}} iter_args(%{{.*}} = %{{.*}}, %{{.*}} = %{{.*}}) -> (tensor<4x256xf32, #[[BLF]]>, tensor<4xf32, #[[ROWF]]>)
// CHECK: tile.load {{.*}} -> tensor<4x256xf16, #[[BLF]]>
// CHECK: tile.reduce max {{.*}} -> tensor<4xf32, #[[ROWF]]>
// CHECK: scf.yield {{.*}} : tensor<4x256xf32, #[[BLF]]>, tensor<4xf32, #[[ROWF]]>
// CHECK: tile.reduce sum {{.*}} -> tensor<4xf32, #[[ROWF]]>
// LOWER-LABEL: gpu.func @chunks
// LOWER: scf.for {{.*}} iter_args({{(%[^,]*, ){8}%[^)]*}}) -> ({{(f32, ){8}f32}})
// LOWER: scf.yield {{(%[^,]*, ){8}%[^ ]*}} : {{(f32, ){8}f32}}
// LOWER: gpu.shuffle xor
func.func @chunks(%x: !tile.ptr<f16>, %y: !tile.ptr<f32>, %r: i32, %c: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c256 = arith.constant 256 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<4x256xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<4xf32>
  %pid = tile.program_id 0 : i32
  %xd = tile.make_desc %x, shape [%r, %c], strides [%c, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %yd = tile.make_desc %y, shape [%r], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %acc:2 = scf.for %k = %c0 to %c step %c256 iter_args(%s = %zero, %m = %ninf)
      -> (tensor<4x256xf32>, tensor<4xf32>) : i32 {
    %t = tile.load %xd[%pid, %k] : !tile.desc<2, f16> -> tensor<4x256xf16>
    %f = arith.extf %t : tensor<4x256xf16> to tensor<4x256xf32>
    %s2 = arith.addf %s, %f : tensor<4x256xf32>
    %mt = tile.reduce max %f axis 1 : tensor<4x256xf32> -> tensor<4xf32>
    %m2 = arith.maximumf %m, %mt : tensor<4xf32>
    scf.yield %s2, %m2 : tensor<4x256xf32>, tensor<4xf32>
  }
  %sum = tile.reduce sum %acc#0 axis 1 : tensor<4x256xf32> -> tensor<4xf32>
  %out = arith.addf %sum, %acc#1 : tensor<4xf32>
  tile.store %yd[%pid], %out : !tile.desc<1, f32>, tensor<4xf32>
  return
}
