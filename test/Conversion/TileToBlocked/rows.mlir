// convert-tile-to-blocked (issue 18): programs without dots with their tiles in registers.
// RUN: tessel-opt %s --split-input-file --convert-tile-to-blocked | FileCheck %s
// RUN: tessel-opt %s --split-input-file --convert-tile-to-blocked="num-threads=256" | FileCheck %s --check-prefix=WIDE

// A row softmax of 2x1024 f16 blocks, 128 threads: a row over all 128 threads in vectors of
// 8 halves (16 bytes), two row slots a thread; each reduction folds a thread's 8 elements,
// shuffles over the warp (16, 8, 4, 2, 1) and exchanges the 4 warps' values through 8 floats
// of shared memory (2 rows x 4 warps) between two barriers.
// CHECK-LABEL: gpu.func @softmax_kernel
// CHECK-SAME: workgroup(%[[SCRATCH:.*]] : memref<8xf32, #gpu.address_space<workgroup>>)
// CHECK-SAME: known_block_size = array<i32: 128, 1, 1>
// CHECK-SAME: tessel.codegen = "blocked"
// The two rows' vectors are read by predicated 16-byte loads (the padding, -inf, where the
// vector is not read), with no branch between them; a vector that cannot be read whole but
// has elements in bounds is read element by element in a branch after both, inside one that
// the common case skips.
// CHECK: llvm.inline_asm has_side_effects {{.*}}"mov.b32 $0, 0xFC00FC00;{{.*}}@$4 ld.global.v4.b32 {$0, $1, $2, $3}, [$5];", "=r,=r,=r,=r,b,l"
// CHECK-NOT: scf.if
// CHECK: ld.global.v4.b32
// CHECK: scf.if %{{.*}} -> (i32, i32, i32, i32, i32, i32, i32, i32)
// CHECK-NEXT: scf.if %{{.*}} -> (i32, i32, i32, i32)
// CHECK-COUNT-8: "mov.b16 $0, 0xFC00;\0A\09@$1 ld.global.b16 $0, [$2];"
// CHECK: scf.if %{{.*}} -> (i32, i32, i32, i32)
// CHECK-COUNT-8: "mov.b16 $0, 0xFC00;\0A\09@$1 ld.global.b16 $0, [$2];"
// CHECK-COUNT-5: gpu.shuffle xor
// CHECK: memref.store %{{.*}}, %[[SCRATCH]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[SCRATCH]]
// CHECK: gpu.barrier
// CHECK: "@$4 st.global.v4.b32 [$5], {$0, $1, $2, $3};", "r,r,r,r,b,l"
// CHECK: "@$4 st.global.v4.b32 [$5], {$0, $1, $2, $3};", "r,r,r,r,b,l"
// CHECK: scf.if
// CHECK-COUNT-16: "@$1 st.global.b16 [$2], $0;", "h,b,l"
// CHECK-NOT: tile.
// With 256 threads a 1024-element row takes 128 of them: two rows side by side, still four
// warps a row (2 rows x 4 warps of shared memory again).
// WIDE-LABEL: gpu.func @softmax_kernel
// WIDE-SAME: workgroup(%{{.*}} : memref<8xf32, #gpu.address_space<workgroup>>)
// WIDE-SAME: known_block_size = array<i32: 256, 1, 1>
func.func @softmax_kernel(%x: !tile.ptr<f16>, %y: !tile.ptr<f16>, %r: i32, %c: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %pid = tile.program_id 0 : i32
  %r0 = arith.muli %pid, %c2 : i32
  %xd = tile.make_desc %x, shape [%r, %c], strides [%c, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %yd = tile.make_desc %y, shape [%r, %c], strides [%c, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tile.load %xd[%r0, %c0] {padding = 0xFFF0000000000000 : f64} : !tile.desc<2, f16> -> tensor<2x1024xf16>
  %f = arith.extf %t : tensor<2x1024xf16> to tensor<2x1024xf32>
  %m = tile.reduce max %f axis 1 : tensor<2x1024xf32> -> tensor<2xf32>
  %m2 = tile.expand_dims %m axis 1 : tensor<2xf32> -> tensor<2x1xf32>
  %mb = tile.broadcast %m2 : tensor<2x1xf32> -> tensor<2x1024xf32>
  %d = arith.subf %f, %mb : tensor<2x1024xf32>
  %e = math.exp %d : tensor<2x1024xf32>
  %s = tile.reduce sum %e axis 1 : tensor<2x1024xf32> -> tensor<2xf32>
  %s2 = tile.expand_dims %s axis 1 : tensor<2xf32> -> tensor<2x1xf32>
  %sb = tile.broadcast %s2 : tensor<2x1xf32> -> tensor<2x1024xf32>
  %p = arith.divf %e, %sb : tensor<2x1024xf32>
  %h = arith.truncf %p : tensor<2x1024xf32> to tensor<2x1024xf16>
  tile.store %yd[%r0, %c0], %h : !tile.desc<2, f16>, tensor<2x1024xf16>
  return
}

// -----

// Rows of 64 f32 (16 vectors of 4): 16 threads a row, 8 rows side by side (8 row slots a
// thread); the row sums shuffle inside the warp only (no shared memory, no barrier). The row vector is stored by
// the first thread of each row, the column vector (a per-column scale read as [64] and
// broadcast down the rows) read by every row of threads.
// CHECK-LABEL: gpu.func @row_sums
// CHECK-NOT: workgroup
// The 8 row slots' vectors of 4 floats, then one branch for the ones not read whole.
// CHECK-COUNT-8: @$4 ld.global.v4.b32
// CHECK: scf.if
// CHECK: gpu.shuffle xor
// CHECK-NOT: gpu.barrier
// A value a row: one predicated 4-byte store a row slot, no branch.
// CHECK-COUNT-8: "@$1 st.global.b32 [$2], $0;", "r,b,l"
// CHECK-NOT: scf.if
// CHECK: return
func.func @row_sums(%x: !tile.ptr<f32>, %w: !tile.ptr<f32>, %y: !tile.ptr<f32>, %r: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %pid = tile.program_id 0 : i32
  %r0 = arith.muli %pid, %c64 : i32
  %xd = tile.make_desc %x, shape [%r, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %wd = tile.make_desc %w, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %yd = tile.make_desc %y, shape [%r], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %xd[%r0, %c0] : !tile.desc<2, f32> -> tensor<64x64xf32>
  %wv = tile.load %wd[%c0] : !tile.desc<1, f32> -> tensor<64xf32>
  %w2 = tile.expand_dims %wv axis 0 : tensor<64xf32> -> tensor<1x64xf32>
  %wb = tile.broadcast %w2 : tensor<1x64xf32> -> tensor<64x64xf32>
  %p = arith.mulf %t, %wb : tensor<64x64xf32>
  %s = tile.reduce sum %p axis 1 : tensor<64x64xf32> -> tensor<64xf32>
  tile.store %yd[%r0], %s : !tile.desc<1, f32>, tensor<64xf32>
  return
}
