// tile.gather on the row-blocked lowering: each register reads its element by a predicated
// scalar load where every index lies inside the descriptor (the padding elsewhere), a scalar
// index's bound check and address part made once. The program is block_state_kernel's shape:
// the pairs of a block flattened into [1, C] tiles, counted by one row reduction, and the
// verdict stored as a [1, 1] tile — the block is the widest [1, C] tile, not the last one.
// RUN: tessel-opt %s --convert-tile-to-blocked | FileCheck %s
// RUN: tessel-opt %s --tilegpu-assign-blocked | FileCheck %s --check-prefix=LAYOUT

// LAYOUT-DAG: #[[BL:.*]] = #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 64>
// LAYOUT-DAG: #[[ROW:.*]] = #tilegpu.slice<dim = 1, parent = #[[BL]]>
// LAYOUT: tile.gather {{.*}} -> tensor<1x256xi32, #[[BL]]>
// LAYOUT: tile.reduce sum {{.*}} -> tensor<1xf32, #[[ROW]]>
// LAYOUT: tile.store {{.*}} tensor<1x1xi32, #[[ROW]]>

// CHECK-LABEL: gpu.func @count_same_document
// CHECK-SAME: tessel.codegen = "blocked"
// The batch index, a scalar: extended and checked once a gather, before its per-register
// loads. 256 pairs in vectors of 4 take 64 threads; the other 64 repeat the row (and store
// nothing): 4 registers a thread, 4 loads a gather.
// CHECK: %[[B:.*]] = arith.extsi %arg2 : i32 to i64
// CHECK-DAG: arith.cmpi sge, %[[B]], %{{.*}} : i64
// CHECK-DAG: arith.cmpi slt, %[[B]], %{{.*}} : i64
// CHECK: arith.muli %[[B]], %{{.*}} : i64
// CHECK-COUNT-4: "mov.b32 $0, 0x0;\0A\09@$1 ld.global.b32 $0, [$2];", "=r,b,l"
// CHECK: arith.extsi %arg2 : i32 to i64
// CHECK-COUNT-4: "mov.b32 $0, 0x0;\0A\09@$1 ld.global.b32 $0, [$2];", "=r,b,l"
// CHECK-NOT: ld.global
// CHECK: gpu.shuffle xor
// CHECK: "@$1 st.global.b32 [$2], $0;", "r,b,l"
// CHECK-NOT: tile.
func.func @count_same_document(%doc: !tile.ptr<i32>, %out: !tile.ptr<i32>, %b: i32, %n: i32,
                               %q0: i32, %k0: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant dense<16> : tensor<1x256xi32>
  %d = tile.make_desc %doc, shape [%c1, %n], strides [%n, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  %o = tile.make_desc %out, shape [%c1, %c1], strides [%c1, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  %e = tile.iota : tensor<256xi32>
  %flat = tile.expand_dims %e axis 0 : tensor<256xi32> -> tensor<1x256xi32>
  %qs = tile.splat %q0 : i32 -> tensor<1x256xi32>
  %ks = tile.splat %k0 : i32 -> tensor<1x256xi32>
  %qr = arith.divsi %flat, %c16 : tensor<1x256xi32>
  %kr = arith.remsi %flat, %c16 : tensor<1x256xi32>
  %q = arith.addi %qs, %qr : tensor<1x256xi32>
  %k = arith.addi %ks, %kr : tensor<1x256xi32>
  %dq = tile.gather %d[%b, %q] : !tile.desc<2, i32>, i32, tensor<1x256xi32> -> tensor<1x256xi32>
  %dk = tile.gather %d[%b, %k] : !tile.desc<2, i32>, i32, tensor<1x256xi32> -> tensor<1x256xi32>
  %same = arith.cmpi eq, %dq, %dk : tensor<1x256xi32>
  %f = arith.uitofp %same : tensor<1x256xi1> to tensor<1x256xf32>
  %s = tile.reduce sum %f axis 1 : tensor<1x256xf32> -> tensor<1xf32>
  %i = arith.fptosi %s : tensor<1xf32> to tensor<1xi32>
  %i2 = tile.expand_dims %i axis 1 : tensor<1xi32> -> tensor<1x1xi32>
  tile.store %o[%c0, %c0], %i2 : !tile.desc<2, i32>, tensor<1x1xi32>
  return
}
