// convert-tile-to-gpu lowers tile.scan as one thread a line along the axis: the first element
// stored as it is, then a loop carrying the running value (f32 for 16-bit tiles), each
// element rounded back and stored; `reverse` walks the axis from its end. The blocked and
// fast lowerings refuse it, so the auto codegen lands here (the compile test:
// test/python/test_dsl_scan.py).
// RUN: tessel-opt %s --convert-tile-to-gpu | FileCheck %s

// CHECK-LABEL: gpu.func @scan_rows
// CHECK: gpu.barrier
// The 16 rows dealt to the threads, one line each.
// CHECK: scf.for %[[ROW:.*]] = %thread_id_x to %c16
// CHECK: %[[LAST:.*]] = arith.subi %c31{{.*}}, %c0
// CHECK: %[[FIRST:.*]] = memref.load %[[IN:.*]][%[[ROW]], %[[LAST]]]
// CHECK: %[[F32:.*]] = arith.extf %[[FIRST]] : f16 to f32
// CHECK: arith.truncf %[[F32]] : f32 to f16
// CHECK: memref.store
// CHECK: scf.for %[[T:.*]] = %c1{{.*}} to %c32 step %c1{{.*}} iter_args(%[[ACC:.*]] = %[[F32]]) -> (f32)
// CHECK: %[[AT:.*]] = arith.subi %c31{{.*}}, %[[T]] : index
// CHECK: %[[X:.*]] = memref.load %[[IN]][%[[ROW]], %[[AT]]]
// CHECK: %[[XF:.*]] = arith.extf %[[X]] : f16 to f32
// CHECK: %[[NEXT:.*]] = arith.addf %[[ACC]], %[[XF]] : f32
// CHECK: arith.truncf %[[NEXT]] : f32 to f16
// CHECK: memref.store
// CHECK: scf.yield %[[NEXT]] : f32
// CHECK: gpu.barrier
func.func @scan_rows(%x: !tile.ptr<f16>, %y: !tile.ptr<f16>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %c32 = arith.constant 32 : i32
  %dx = tile.make_desc %x, shape [%c16, %c32], strides [%c32, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dy = tile.make_desc %y, shape [%c16, %c32], strides [%c32, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tile.load %dx[%c0, %c0] : !tile.desc<2, f16> -> tensor<16x32xf16>
  %s = tile.scan sum %t axis 1 reverse : tensor<16x32xf16>
  tile.store %dy[%c0, %c0], %s : !tile.desc<2, f16>, tensor<16x32xf16>
  return
}
