// A paged descriptor on the row-blocked lowering: a vector's row is looked up in the page table
// (a predicated load of the entry where it exists) and the vector is read only where its row is inside the
// view and its page inside [0, num_pages).
// RUN: tessel-opt %s --convert-tile-to-blocked | FileCheck %s

// CHECK-LABEL: gpu.func @copy_pages
// CHECK: arith.divui %{{.*}}, %{{.*}} : i64
// CHECK: %[[P32:.*]] = llvm.inline_asm asm_dialect = att "mov.b32 $0, -1;\0A\09@$1 ld.global.b32 $0, [$2];", "=r,b,l"
// CHECK: %[[PAGE:.*]] = arith.extsi %[[P32]] : i32 to i64
// CHECK: arith.cmpi sge, %[[PAGE]], %{{.*}} : i64
// CHECK: arith.muli %[[PAGE]], %{{.*}} : i64
// CHECK: ld.global.v4.b32
func.func @copy_pages(%cache: !tile.ptr<f16>, %table: !tile.ptr<i32>, %out: !tile.ptr<f16>,
                      %n: i32, %pages: i32, %np: i32, %j: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %t = tile.make_desc %table, shape [%pages], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %kv = tile.make_desc %cache, shape [%n, %c64], strides [%c64, %c1], pages %t[%np] page_size 16
      : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<2, f16>
  %block = tile.load %kv[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %o = tile.make_desc %out, shape [%c64, %c64], strides [%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  tile.store %o[%c0, %c0], %block : !tile.desc<2, f16>, tensor<64x64xf16>
  return
}
