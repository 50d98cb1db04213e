// A paged descriptor on the interpreter: row i of the view is row pages[i / 2] * 2 + i % 2 of
// the strided view; rows whose table entry is missing or not a page [0, 6) read the padding.
// RUN: tessel-run %s --kernel=paged --arg=zeros:24 --arg=zeros:5 --arg=zeros:16 --print-args \
// RUN:   | FileCheck %s

// The cache holds 0 1 2 ... 23: 6 pages of 2 rows of 2 elements. The table is 4 1 -1 9 0.
// Rows 1..8 of a view of 9 rows: 1 → page 4 row 1 (18 19); 2, 3 → page 1 (4 5, 6 7);
// 4, 5 → entry -1 (padding); 6, 7 → page 9, past the cache (padding); 8 → page 0 row 0 (0 1).
// CHECK: arg #2 (i32, 16 elements): 18 19 4 5 6 7 -1 -1 -1 -1 -1 -1 -1 -1 0 1
func.func @paged(%cache: !tile.ptr<i32>, %table: !tile.ptr<i32>, %out: !tile.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c5 = arith.constant 5 : i32
  %c6 = arith.constant 6 : i32
  %c9 = arith.constant 9 : i32
  %c24 = arith.constant 24 : i32
  %flat = tile.make_desc %cache, shape [%c24], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %iota = tile.iota : tensor<24xi32>
  tile.store %flat[%c0], %iota : !tile.desc<1, i32>, tensor<24xi32>
  %t = tile.make_desc %table, shape [%c5], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %entries = arith.constant dense<[4, 1, -1, 9, 0, 0, 0, 0]> : tensor<8xi32>
  %mask = arith.constant dense<[true, true, true, true, true, false, false, false]> : tensor<8xi1>
  tile.store %t[%c0], %entries mask %mask : !tile.desc<1, i32>, tensor<8xi32>, tensor<8xi1>
  %kv = tile.make_desc %cache, shape [%c9, %c2], strides [%c2, %c1], pages %t[%c6] page_size 2
      : !tile.ptr<i32>, !tile.desc<1, i32> -> !tile.desc<2, i32>
  %block = tile.load %kv[%c1, %c0] {padding = -1.0 : f64} : !tile.desc<2, i32> -> tensor<8x2xi32>
  %all = tile.make_desc %out, shape [%c9, %c2], strides [%c2, %c1] : !tile.ptr<i32> -> !tile.desc<2, i32>
  tile.store %all[%c0, %c0], %block : !tile.desc<2, i32>, tensor<8x2xi32>
  return
}
