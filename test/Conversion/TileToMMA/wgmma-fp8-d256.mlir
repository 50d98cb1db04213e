// FP8 (e4m3) attention at head dim 256 through the sm_90a wgmma path: V, kept transposed in
// shared memory ([256, keys]), has rows as wide as the key block — 64 bytes at 64 keys, 32 at
// 32 — which take wgmma's swizzle of their width (tilegpu::swizzleBytes) instead of being
// padded to 128-byte rows. tilegpu-allocate-shared types the buffers `swizzle = 64` / `32`; the
// descriptors of P·V carry swizzle mode 2 / 3 (bits 62-63) with 8-row groups 512 / 256 bytes
// apart (SBO), the k32 steps 32 bytes further; Q·Kᵀ keeps the 128-byte swizzle (mode 1, SBO
// 1024). The producer's transposed stores XOR the 16-byte chunk with address bits 7 and up
// (the row's bits 1-2 at 64-byte rows, bit 2 at 32). ptxas: no spill. docs/dev/fp8.md.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared | FileCheck %s --check-prefix=SMEM
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.cubin --ptxas-report > %t.report 2>&1
// RUN: FileCheck %s --check-prefix=SM90 --implicit-check-not="(C75" < %t.report
// --fp8-overlap (off until measured): both programs' unmasked loops overlapped (their K and V
// blocks differ in shape, which tilegpu-overlap-consumers, peeling rather than running a spare
// P·V, does not mind), a wait with one group in flight in each; their masked loops (the key
// tail) stay synchronous (masked-synchronous); still no spill or advisory.
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --fp8-overlap --emit=ptx -o - | FileCheck %s --check-prefix=OVER
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --fp8-overlap --emit=cubin -o %t.over.cubin --ptxas-report > %t.over 2>&1
// RUN: FileCheck %s --check-prefix=SM90 --implicit-check-not="(C75" < %t.over

// SMEM-LABEL: func.func @fp8_d256_64
// SMEM: !tilegpu.smem<256x64xf8E4M3FN, stages = 2, swizzle = 64>
// SMEM-LABEL: func.func @fp8_d256_32
// SMEM: !tilegpu.smem<256x32xf8E4M3FN, stages = 2, swizzle = 32>

// K: 128-byte swizzle (1 << 62), SBO 1024 B (64 << 32), LBO 1 (1 << 16).
// V: 64-byte swizzle (2 << 62), SBO 512 B (32 << 32): -9223371899415756800 as a signed i64;
// its second k32 step 32 bytes (2 units) further.
// PTX-LABEL: .entry fp8_d256_64(
// PTX: 4611686293305360384
// PTX: wgmma.mma_async.sync.aligned.m64n64k32.f32.e4m3.e4m3
// PTX: -9223371899415756800
// PTX: -9223371899415756798
// PTX: wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3
// V: 32-byte swizzle (3 << 62), SBO 256 B (16 << 32): -4611685949707845632; one k32 step.
// PTX-LABEL: .entry fp8_d256_32(
// PTX: wgmma.mma_async.sync.aligned.m64n32k32.f32.e4m3.e4m3
// PTX: -4611685949707845632
// PTX-NOT: -4611685949707845630
// PTX: wgmma.mma_async.sync.aligned.m64n256k32.f32.e4m3.e4m3
// OVER-COUNT-2: wgmma.wait_group.sync.aligned 1;
// OVER-NOT: wgmma.wait_group.sync.aligned 1;
// SM90-DAG: ptxas sm_90a fp8_d256_64: {{[0-9]+}} registers, {{.*}} 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a fp8_d256_32: {{[0-9]+}} registers, {{.*}} 0 bytes spill stores, 0 bytes spill loads

module {
  func.func @fp8_d256_64(%q: !tile.ptr<f8E4M3FN>, %k: !tile.ptr<f8E4M3FN>, %v: !tile.ptr<f8E4M3FN>,
                           %o: !tile.ptr<bf16>, %scales: !tile.ptr<f32>, %nq: i32, %nk: i32) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %c256 = arith.constant 256 : i32
    %cbn = arith.constant 64 : i32
    %qd = tile.make_desc %q, shape[%nq, %c256], strides[%c256, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %kd = tile.make_desc %k, shape[%nk, %c256], strides[%c256, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %vd = tile.make_desc %v, shape[%nk, %c256], strides[%c256, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %od = tile.make_desc %o, shape[%nq, %c256], strides[%c256, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
    %c2 = arith.constant 2 : i32
    %sd = tile.make_desc %scales, shape[%c2], strides[%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %scale = tile.load_scalar %sd[%c0] : !tile.desc<1, f32> -> f32
    %descale_v = tile.load_scalar %sd[%c1] : !tile.desc<1, f32> -> f32
    %pid = tile.program_id 0 : i32
    %m0 = arith.muli %pid, %c128 : i32
    %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x256xf8E4M3FN>
    %zero = arith.constant dense<0.000000e+00> : tensor<128x256xf32>
    %zs = arith.constant dense<0.000000e+00> : tensor<128x64xf32>
    %ninf = arith.constant dense<0xFF800000> : tensor<128xf32>
    %r:2 = scf.for %j = %c0 to %nk step %cbn iter_args(%acc = %zero, %l = %ninf) -> (tensor<128x256xf32>, tensor<128xf32>) : i32 {
      %kb = tile.load %kd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<64x256xf8E4M3FN>
      %kt = tile.trans %kb : tensor<64x256xf8E4M3FN> -> tensor<256x64xf8E4M3FN>
      %s0 = tile.dot %qt, %kt, %zs : tensor<128x256xf8E4M3FN>, tensor<256x64xf8E4M3FN> -> tensor<128x64xf32>
      %sc = tile.splat %scale : f32 -> tensor<128x64xf32>
      %s1 = arith.mulf %s0, %sc : tensor<128x64xf32>
      %iota = tile.iota : tensor<64xi32>
      %js = tile.splat %j : i32 -> tensor<64xi32>
      %cols = arith.addi %js, %iota : tensor<64xi32>
      %row = tile.expand_dims %cols axis 0 : tensor<64xi32> -> tensor<1x64xi32>
      %kv = tile.broadcast %row : tensor<1x64xi32> -> tensor<128x64xi32>
      %nks = tile.splat %nk : i32 -> tensor<128x64xi32>
      %in = arith.cmpi slt, %kv, %nks : tensor<128x64xi32>
      %ninf2 = arith.constant dense<0xFF800000> : tensor<128x64xf32>
      %s = arith.select %in, %s1, %ninf2 : tensor<128x64xi1>, tensor<128x64xf32>
      %p, %lse = tile.softmax %s axis 1 streamed : tensor<128x64xf32> -> tensor<128xf32>
      %vb = tile.load %vd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<64x256xf8E4M3FN>
      %p8 = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xf8E4M3FN>
      %acc2 = tile.dot %p8, %vb, %acc : tensor<128x64xf8E4M3FN>, tensor<64x256xf8E4M3FN> -> tensor<128x256xf32>
      scf.yield %acc2, %lse : tensor<128x256xf32>, tensor<128xf32>
    }
    %dv = tile.splat %descale_v : f32 -> tensor<128x256xf32>
    %out = arith.mulf %r#0, %dv : tensor<128x256xf32>
    %ob = arith.truncf %out : tensor<128x256xf32> to tensor<128x256xbf16>
    tile.store %od[%m0, %c0], %ob : !tile.desc<2, bf16>, tensor<128x256xbf16>
    return
  }
  func.func @fp8_d256_32(%q: !tile.ptr<f8E4M3FN>, %k: !tile.ptr<f8E4M3FN>, %v: !tile.ptr<f8E4M3FN>,
                           %o: !tile.ptr<bf16>, %scales: !tile.ptr<f32>, %nq: i32, %nk: i32) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %c256 = arith.constant 256 : i32
    %cbn = arith.constant 32 : i32
    %qd = tile.make_desc %q, shape[%nq, %c256], strides[%c256, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %kd = tile.make_desc %k, shape[%nk, %c256], strides[%c256, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %vd = tile.make_desc %v, shape[%nk, %c256], strides[%c256, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %od = tile.make_desc %o, shape[%nq, %c256], strides[%c256, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
    %c2 = arith.constant 2 : i32
    %sd = tile.make_desc %scales, shape[%c2], strides[%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %scale = tile.load_scalar %sd[%c0] : !tile.desc<1, f32> -> f32
    %descale_v = tile.load_scalar %sd[%c1] : !tile.desc<1, f32> -> f32
    %pid = tile.program_id 0 : i32
    %m0 = arith.muli %pid, %c128 : i32
    %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x256xf8E4M3FN>
    %zero = arith.constant dense<0.000000e+00> : tensor<128x256xf32>
    %zs = arith.constant dense<0.000000e+00> : tensor<128x32xf32>
    %ninf = arith.constant dense<0xFF800000> : tensor<128xf32>
    %r:2 = scf.for %j = %c0 to %nk step %cbn iter_args(%acc = %zero, %l = %ninf) -> (tensor<128x256xf32>, tensor<128xf32>) : i32 {
      %kb = tile.load %kd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<32x256xf8E4M3FN>
      %kt = tile.trans %kb : tensor<32x256xf8E4M3FN> -> tensor<256x32xf8E4M3FN>
      %s0 = tile.dot %qt, %kt, %zs : tensor<128x256xf8E4M3FN>, tensor<256x32xf8E4M3FN> -> tensor<128x32xf32>
      %sc = tile.splat %scale : f32 -> tensor<128x32xf32>
      %s1 = arith.mulf %s0, %sc : tensor<128x32xf32>
      %iota = tile.iota : tensor<32xi32>
      %js = tile.splat %j : i32 -> tensor<32xi32>
      %cols = arith.addi %js, %iota : tensor<32xi32>
      %row = tile.expand_dims %cols axis 0 : tensor<32xi32> -> tensor<1x32xi32>
      %kv = tile.broadcast %row : tensor<1x32xi32> -> tensor<128x32xi32>
      %nks = tile.splat %nk : i32 -> tensor<128x32xi32>
      %in = arith.cmpi slt, %kv, %nks : tensor<128x32xi32>
      %ninf2 = arith.constant dense<0xFF800000> : tensor<128x32xf32>
      %s = arith.select %in, %s1, %ninf2 : tensor<128x32xi1>, tensor<128x32xf32>
      %p, %lse = tile.softmax %s axis 1 streamed : tensor<128x32xf32> -> tensor<128xf32>
      %vb = tile.load %vd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<32x256xf8E4M3FN>
      %p8 = arith.truncf %p : tensor<128x32xf32> to tensor<128x32xf8E4M3FN>
      %acc2 = tile.dot %p8, %vb, %acc : tensor<128x32xf8E4M3FN>, tensor<32x256xf8E4M3FN> -> tensor<128x256xf32>
      scf.yield %acc2, %lse : tensor<128x256xf32>, tensor<128xf32>
    }
    %dv = tile.splat %descale_v : f32 -> tensor<128x256xf32>
    %out = arith.mulf %r#0, %dv : tensor<128x256xf32>
    %ob = arith.truncf %out : tensor<128x256xf32> to tensor<128x256xbf16>
    tile.store %od[%m0, %c0], %ob : !tile.desc<2, bf16>, tensor<128x256xbf16>
    return
  }
}
