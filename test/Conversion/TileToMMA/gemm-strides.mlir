// A GEMM whose sizes and strides are run-time arguments (issue 18: Triton's tutorial form) on
// the fast path. Each block's copy checks at run time that it may go in 16-byte pieces (unit
// inner stride, rows a multiple of 8 elements apart, the block's first element 16-byte
// aligned): cp.async then, else every thread reads its chunks' 8 elements and stores them to
// shared memory itself. The store of C writes pairs where they are whole, unit-stride and
// aligned, else element by element.
// REQUIRES: ptxas
// RUN: tessel-opt %s --convert-tile-to-mma | FileCheck %s
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --num-stages=3 --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS

// CHECK-LABEL: gpu.func @gemm_strided
// CHECK: %[[ADDR:.*]] = llvm.ptrtoint
// CHECK: arith.andi %[[ADDR]], %{{.*}} : i64
// CHECK: scf.if %{{.*}} {
// CHECK: nvvm.cp.async.shared.global {{.*}}, 16, cache = cg
// CHECK: } else {
// CHECK-COUNT-8: llvm.load %{{.*}} : !llvm.ptr<1> -> f16
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 16 : i64} : vector<8xf16>, !llvm.ptr<3>
// CHECK: mma.sync
// The store: a pair where it may be, else its elements one by one.
// CHECK: llvm.store %{{.*}}, %{{.*}} {alignment = 4 : i64} : vector<2xf16>, !llvm.ptr<1>
// CHECK: } else {
// CHECK: llvm.store %{{.*}}, %{{.*}} : f16, !llvm.ptr<1>
// PTXAS: ptxas sm_90a gemm_strided: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
func.func @gemm_strided(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f16>, %m: i32,
                        %n: i32, %k: i32, %sam: i32, %sak: i32, %sbk: i32, %sbn: i32,
                        %scm: i32, %scn: i32) {
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %pm = tile.program_id 0 : i32
  %pn = tile.program_id 1 : i32
  %m0 = arith.muli %pm, %c128 : i32
  %n0 = arith.muli %pn, %c128 : i32
  %ad = tile.make_desc %a, shape [%m, %k], strides [%sam, %sak] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %bd = tile.make_desc %b, shape [%k, %n], strides [%sbk, %sbn] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%m, %n], strides [%scm, %scn] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %r = scf.for %kk = %c0 to %k step %c64 iter_args(%acc = %zero) -> (tensor<128x128xf32>) : i32 {
    %at = tile.load %ad[%m0, %kk] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %bt = tile.load %bd[%kk, %n0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %next = tile.dot %at, %bt, %acc : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %next : tensor<128x128xf32>
  }
  %h = arith.truncf %r : tensor<128x128xf32> to tensor<128x128xf16>
  tile.store %cd[%m0, %n0], %h : !tile.desc<2, f16>, tensor<128x128xf16>
  return
}
