// tilegpu-skip-masked-warpgroups on d64's causal 192x128 program (three consumer warpgroups,
// test/Conversion/TileToMMA/three-warpgroups.mlir) once warp-specialized. In the split's
// masked loop each warpgroup computes whether its 64 rows [r, r + 64) see any key of the block
// (the causal atom q - kv >= 0 restricted to them: m0 + r + 63 - j < 0 hides it; the key-tail
// atom kv < nk reads no row, so it adds no condition) and branches around K's read, S, the
// softmax and P·V. The skipping side waits for V's stage as the other side does and yields m,
// l and O as they came; both sides free the stages after the branch. The unmasked loop is
// left as it is.
// RUN: tessel-opt %S/../../Conversion/TileToMMA/three-warpgroups.mlir --tile-optimize \
// RUN:   --tilegpu-assign-layouts=wgmma --tilegpu-allocate-shared --tilegpu-warp-specialize \
// RUN:   --tilegpu-skip-masked-warpgroups | FileCheck %s

// CHECK: tilegpu.warp_specialize
// CHECK: scf.for
// CHECK-NOT: tilegpu.warpgroup_row
// CHECK: } {tile.block_mask = "all_true"}
// CHECK: scf.for %[[J:.*]] = {{.*}} iter_args(%[[O:[^ ]*]] = {{.*}}, %[[M:[^ ]*]] = {{.*}}, %[[L:[^ ]*]] = {{.*}}, %{{.*}} = {{.*}})
// CHECK: tilegpu.mbarrier_wait %{{[0-9]+}}[%[[STAGE:[0-9]+]]], %[[PHASE:[0-9]+]] :
// CHECK-NEXT: tilegpu.fence_async_shared
// CHECK-NEXT: %[[ROW:.*]] = tilegpu.warpgroup_row : i32
// CHECK-NEXT: %[[ROW64:.*]] = arith.extsi %[[ROW]] : i32 to i64
// CHECK: %[[C63:.*]] = arith.constant 63 : i64
// CHECK-NEXT: %[[LAST:.*]] = arith.addi %{{.*}}, %[[C63]] : i64
// CHECK-NEXT: %[[HIDDEN:.*]] = arith.cmpi slt, %[[LAST]], %{{.*}} : i64
// CHECK: %[[SEEN:.*]] = arith.xori %[[HIDDEN]], %{{.*}} : i1
// CHECK-NEXT: %[[STEP:.*]]:3 = scf.if %[[SEEN]] -> (tensor<192x64xf32, #mma>, tensor<192xf32, #row>, tensor<192xf32, #row>) {
// CHECK-NEXT: tilegpu.local_load {{.*}} {transpose}
// CHECK-NEXT: tile.dot
// CHECK: tilegpu.mbarrier_wait %[[FULLV:[0-9]+]][%[[STAGE]]], %[[PHASE]] :
// CHECK: tile.dot
// CHECK-NEXT: scf.yield
// CHECK-NEXT: } else {
// CHECK-NEXT: tilegpu.mbarrier_wait %[[FULLV]][%[[STAGE]]], %[[PHASE]] :
// CHECK-NEXT: scf.yield %[[O]], %[[M]], %[[L]]
// CHECK-NEXT: }
// CHECK: tilegpu.mbarrier_arrive
// CHECK-NEXT: tilegpu.mbarrier_arrive
// CHECK-NEXT: scf.yield %[[STEP]]#0, %[[STEP]]#1, %[[STEP]]#2,
// CHECK: } {tile.block_mask = "mixed"}
// CHECK: } producer {
// CHECK-NOT: tilegpu.warpgroup_row
