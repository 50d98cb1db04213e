// A paged descriptor on the reference lowering: each element's row is looked up in the page
// table (a predicated load: the entry where it exists, -1 otherwise), and the element is read only where
// the row is inside the view and its page inside [0, num_pages).
// RUN: tessel-opt %s --convert-tile-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @gather_pages
// The element loop: row bounds, then the table entry behind a branch.
// CHECK: %[[ENTRY:.*]] = arith.divui %[[ROW:.*]], %[[SIZE:.*]] : i64
// CHECK: %[[HAS:.*]] = arith.cmpi ult, %[[ENTRY]], %{{.*}} : i64
// CHECK: %[[ADDR:.*]] = arith.select %[[HAS]], %{{.*}}, %{{.*}} : !llvm.ptr<1>
// CHECK: %[[P32:.*]] = llvm.inline_asm asm_dialect = att "mov.b32 $0, -1;\0A\09@$1 ld.global.b32 $0, [$2];", "=r,b,l" %[[HAS]], %[[ADDR]] : (i1, !llvm.ptr<1>) -> i32
// CHECK: %[[PAGE:.*]] = arith.extsi %[[P32]] : i32 to i64
// CHECK: arith.cmpi sge, %[[PAGE]], %{{.*}} : i64
// CHECK: arith.cmpi slt, %[[PAGE]], %{{.*}} : i64
// CHECK: %[[FIRST:.*]] = arith.muli %[[PAGE]], %[[SIZE]] : i64
// CHECK: %[[IN:.*]] = arith.remui %[[ROW]], %[[SIZE]] : i64
// CHECK: arith.addi %[[FIRST]], %[[IN]] : i64
// CHECK: scf.if %{{.*}} -> (f16) {
// CHECK:   llvm.load %{{.*}} : !llvm.ptr<1> -> f16
func.func @gather_pages(%cache: !tile.ptr<f16>, %table: !tile.ptr<i32>, %out: !tile.ptr<f16>,
                        %n: i32, %pages: i32, %np: i32, %j: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %t = tile.make_desc %table, shape [%pages], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %kv = tile.make_desc %cache, shape [%n, %c16], strides [%c16, %c1], pages %t[%np] page_size 4
      : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<2, f16>
  %block = tile.load %kv[%j, %c0] : !tile.desc<2, f16> -> tensor<16x16xf16>
  %o = tile.make_desc %out, shape [%c16, %c16], strides [%c16, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  tile.store %o[%c0, %c0], %block : !tile.desc<2, f16>, tensor<16x16xf16>
  return
}
