// tile.atomic_add of an accumulator tile (split-K partial products, dQ from many key blocks):
// the fast paths add it element by element from its registers, each an llvm.atomicrmw fadd
// (atom.global.add.f32 in PTX, whose unused result ptxas turns into a RED): unchecked when the
// whole tile is inside the tensor (a uniform branch), else each under its element's bounds;
// the reference lowering adds from shared memory the same way. (Bulk reductions instead,
// tilegpu-allocate-shared{bulk-adds}: test/Transforms/TileGPU/fused-dq.mlir.) (The blocked path: test/Conversion/TileToBlocked/atomic-add.mlir.)
// REQUIRES: ptxas
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=WGMMA
// RUN: tesselc %s --chip=sm_80 --codegen=mma --emit=ptx -o - | FileCheck %s --check-prefix=MMA
// RUN: tessel-opt %s --convert-tile-to-gpu | FileCheck %s --check-prefix=REF

// A 64x64 accumulator over 128 threads: 32 f32 registers a thread, 32 adds on each side of
// the branch (LLVM may sink the last add of both into one), no plain store.
// WGMMA-LABEL: .entry split_k(
// WGMMA: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// WGMMA-COUNT-63: atom.global.add.f32
// WGMMA-NOT: cp.reduce.async.bulk
// WGMMA-NOT: st.global
// WGMMA: ret;
// MMA-LABEL: .entry split_k(
// MMA: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// MMA-COUNT-63: atom.global.add.f32
// MMA-NOT: st.global
// MMA: ret;
// REF-LABEL: gpu.func @split_k
// REF: llvm.atomicrmw fadd %{{.*}}, %{{.*}} monotonic : !llvm.ptr<1>, f32

// Split s of program (pid) adds A[m0:m0+64, s*256:(s+1)*256] · B[..., 0:64] into C (f32).
func.func @split_k(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>, %m: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %c256 = arith.constant 256 : i32
  %c512 = arith.constant 512 : i32
  %pm = tile.program_id 0 : i32
  %s = tile.program_id 1 : i32
  %m0 = arith.muli %pm, %c64 : i32
  %k0 = arith.muli %s, %c256 : i32
  %k1 = arith.addi %k0, %c256 : i32
  %ad = tile.make_desc %a, shape [%m, %c512], strides [%c512, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %bd = tile.make_desc %b, shape [%c512, %c64], strides [%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %cd = tile.make_desc %c, shape [%m, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %zero = arith.constant dense<0.0> : tensor<64x64xf32>
  %r = scf.for %k = %k0 to %k1 step %c64 iter_args(%acc = %zero) -> (tensor<64x64xf32>) : i32 {
    %at = tile.load %ad[%m0, %k] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %bt = tile.load %bd[%k, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %next = tile.dot %at, %bt, %acc : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %next : tensor<64x64xf32>
  }
  tile.atomic_add %cd[%m0, %c0], %r : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}
