// A paged descriptor on the fast path: a loop streams B blocks of 64 rows from pages of 16
// (a paged KV cache read by 64-key blocks). Every row of a block is looked up by the copy of
// its chunks: no whole-block fast branch, each 16-byte cp.async zero-fills (src-size 0) where
// its row is past the view, has no table entry or no page. Loads ahead of the loop look up
// their rows too; the store of C is a plain (unpaged) one.
// REQUIRES: ptxas
// RUN: tessel-opt %s --convert-tile-to-mma | FileCheck %s
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS

// CHECK-LABEL: gpu.func @paged_rows
// CHECK: arith.divui %{{.*}}, %{{.*}} : i64
// CHECK: llvm.inline_asm asm_dialect = att "mov.b32 $0, -1;\0A\09@$1 ld.global.b32 $0, [$2];"
// CHECK: arith.remui %{{.*}}, %{{.*}} : i64
// CHECK: %[[BYTES:.*]] = arith.select %{{.*}}, %{{.*}}, %{{.*}} : i32
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %[[BYTES]]
// CHECK: scf.for
// CHECK: llvm.inline_asm asm_dialect = att "mov.b32 $0, -1;\0A\09@$1 ld.global.b32 $0, [$2];"
// CHECK: nvvm.cp.async.shared.global %{{.*}}, %{{.*}}, 16, cache = cg, %{{.*}}
// CHECK: mma.sync
// PTXAS: ptxas sm_90a paged_rows: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
func.func @paged_rows(%a: !tile.ptr<f16>, %cache: !tile.ptr<f16>, %table: !tile.ptr<i32>,
                      %c: !tile.ptr<f16>, %m: i32, %k: i32, %pages: i32, %np: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %pm = tile.program_id 0 : i32
  %m0 = arith.muli %pm, %c64 : i32
  %ad = tile.make_desc %a, shape [%m, %k], strides [%k, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %t = tile.make_desc %table, shape [%pages], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %bd = tile.make_desc %cache, shape [%k, %c128], strides [%c128, %c1], pages %t[%np] page_size 16
      : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%m, %c128], strides [%c128, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %zero = arith.constant dense<0.0> : tensor<64x128xf32>
  %r = scf.for %kk = %c0 to %k step %c64 iter_args(%acc = %zero) -> (tensor<64x128xf32>) : i32 {
    %at = tile.load %ad[%m0, %kk] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %bt = tile.load %bd[%kk, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %next = tile.dot %at, %bt, %acc : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
    scf.yield %next : tensor<64x128xf32>
  }
  %h = arith.truncf %r : tensor<64x128xf32> to tensor<64x128xf16>
  tile.store %cd[%m0, %c0], %h : !tile.desc<2, f16>, tensor<64x128xf16>
  return
}
