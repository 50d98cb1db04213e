// A GEMM on the fast paths (issue 18): A[m, k] and B[k, n] both streamed by the loop over k, the
// accumulator carried. A is read from its stage of the ring by every dot: by descriptor on
// wgmma (two warpgroups of 64 rows, the A operand a 64-bit descriptor like B), by ldmatrix at
// every k step on mma.sync (four warps of 32 rows). Stages of 32 KiB, no spill. On wgmma with
// four stages each iteration's group stays in flight into the next (tilegpu-async-accumulate:
// wait 1 in the loop, its copies two iterations ahead), drained after it.
// REQUIRES: ptxas
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --num-stages=4 --emit=ptx -o - | FileCheck %s --check-prefix=WGMMA
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --num-stages=4 --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=WGMMA-PTXAS
// RUN: tesselc %s --chip=sm_80 --codegen=mma --num-stages=3 --emit=ptx -o - | FileCheck %s --check-prefix=MMA
// RUN: tesselc %s --chip=sm_80 --codegen=mma --num-stages=3 --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=MMA-PTXAS

// WGMMA-LABEL: .entry gemm(
// WGMMA: cp.async.cg.shared.global
// WGMMA: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{{.*}}}, %rd{{[0-9]+}}, %rd{{[0-9]+}}, p, 1, 1, 0, 1;
// WGMMA: wgmma.wait_group.sync.aligned 1;
// WGMMA: cp.async.wait_group 1;
// WGMMA: wgmma.wait_group.sync.aligned 0;
// WGMMA-PTXAS: ptxas sm_90a gemm: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// WGMMA-PTXAS-NEXT: kernel gemm: block 256x1x1, 131072 bytes dynamic smem

// MMA-LABEL: .entry gemm(
// MMA: cp.async.cg.shared.global
// MMA: ldmatrix.sync.aligned.m8n8.x4.shared.b16
// MMA: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// MMA-PTXAS: ptxas sm_80 gemm: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// MMA-PTXAS-NEXT: kernel gemm: block 128x1x1, 98304 bytes dynamic smem

func.func @gemm(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f16>, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c128 = arith.constant 128 : i32
  %c512 = arith.constant 512 : i32
  %pm = tile.program_id 0 : i32
  %pn = tile.program_id 1 : i32
  %m0 = arith.muli %pm, %c128 : i32
  %n0 = arith.muli %pn, %c128 : i32
  %ad = tile.make_desc %a, shape [%m, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %bd = tile.make_desc %b, shape [%c512, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%m, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %zero = arith.constant dense<0.0> : tensor<128x128xf32>
  %r = scf.for %k = %c0 to %c512 step %c64 iter_args(%acc = %zero) -> (tensor<128x128xf32>) : i32 {
    %at = tile.load %ad[%m0, %k] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %bt = tile.load %bd[%k, %n0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %next = tile.dot %at, %bt, %acc : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %next : tensor<128x128xf32>
  }
  %h = arith.truncf %r : tensor<128x128xf32> to tensor<128x128xf16>
  tile.store %cd[%m0, %n0], %h : !tile.desc<2, f16>, tensor<128x128xf16>
  return
}
