// FP8 (e4m3) attention through the sm_90a wgmma path (tessel/attention_fp8.py's program, one
// head, trimmed): Q·Kᵀ and P·V are wgmma.mma_async m64n128k32 e4m3 without transpose
// immediates (FP8 operands are K-major). V, read as stored, is kept transposed in shared
// memory (tilegpu.transposed): the producer loads 4 rows × 16 bytes a unit (ld.global.v4),
// transposes 4×4 bytes with prmt and stores rows of the buffer, fences them and arrives with a
// plain mbarrier.arrive; it keeps 56 registers (setmaxnreg), the consumers 224. P is packed
// from its f32 registers by cvt.rn.satfinite.e4m3x2 and moved into the k32 A layout by a quad
// shuffle (shfl.sync.idx + prmt). @fp8_attention_vt takes V already transposed ([D, keys], read
// through tile.trans as K is) with a run-time row stride known to be a multiple of the block
// (`n · 128`): its copies take 16-byte cp.async chunks without the run-time alignment check.
// ptxas: no spill, no advisory. mma.sync refuses FP8. docs/dev/fp8.md.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.cubin --ptxas-report > %t.report 2>&1
// RUN: FileCheck %s --check-prefix=SM90 --implicit-check-not="(C75" < %t.report
// RUN: not tessel-opt %t.mlir --convert-tile-to-mma="chip=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80
// By default the consumers' dots are synchronous (no wait with a group in flight: V is read
// transposed, which the overlap takes with --fp8-overlap only, off until measured). With it,
// the full key blocks' loop of each program is overlapped, S_j beside the previous P·V and a
// wait with one group in flight, still without spill or advisory; the partial blocks' loop
// stays synchronous (sync-masked-loops) unless --no-sync-masked-loops: then two loops each.
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=SYNC
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --fp8-overlap --emit=ptx -o - | FileCheck %s --check-prefix=OVER
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --fp8-overlap --no-sync-masked-loops \
// RUN:   --emit=ptx -o - | FileCheck %s --check-prefix=OVERALL
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --fp8-overlap --emit=cubin -o %t.over.cubin --ptxas-report > %t.over 2>&1
// RUN: FileCheck %s --check-prefix=SM90 --implicit-check-not="(C75" < %t.over

// PTX-LABEL: .entry fp8_attention(
// PTX: setmaxnreg.inc.sync.aligned.u32 224
// PTX: setmaxnreg.dec.sync.aligned.u32 56
// PTX: @p ld.global.v4.b32
// PTX: mov.b32 {{.*}}, 20800;
// PTX: fence.proxy.async.shared::cta
// PTX: mbarrier.arrive.shared.b64
// PTX: cvt.rn.satfinite.e4m3x2.f32
// PTX: shfl.sync.idx.b32
// PTX: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3 {{.*}}, p, 1, 1;
// PTX-LABEL: .entry fp8_attention_vt(
// PTX-NOT: ld.global.v4.b32
// PTX: cp.async.cg.shared.global
// PTX: wgmma.mma_async.sync.aligned.m64n128k32.f32.e4m3.e4m3
// SYNC-NOT: wgmma.wait_group.sync.aligned 1;
// OVER-COUNT-2: wgmma.wait_group.sync.aligned 1;
// OVER-NOT: wgmma.wait_group.sync.aligned 1;
// OVERALL-COUNT-4: wgmma.wait_group.sync.aligned 1;
// SM90-DAG: ptxas sm_90a fp8_attention: {{[0-9]+}} registers, {{.*}} 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a fp8_attention_vt: {{[0-9]+}} registers, {{.*}} 0 bytes spill stores, 0 bytes spill loads
// SM80: f8E4M3FN: FP8 operands need wgmma (sm_90a)

module {
  func.func @fp8_attention(%q: !tile.ptr<f8E4M3FN>, %k: !tile.ptr<f8E4M3FN>, %v: !tile.ptr<f8E4M3FN>,
                           %o: !tile.ptr<bf16>, %scales: !tile.ptr<f32>, %nq: i32, %nk: i32) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %qd = tile.make_desc %q, shape[%nq, %c128], strides[%c128, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %kd = tile.make_desc %k, shape[%nk, %c128], strides[%c128, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %vd = tile.make_desc %v, shape[%nk, %c128], strides[%c128, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %od = tile.make_desc %o, shape[%nq, %c128], strides[%c128, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
    %c2 = arith.constant 2 : i32
    %sd = tile.make_desc %scales, shape[%c2], strides[%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %scale = tile.load_scalar %sd[%c0] : !tile.desc<1, f32> -> f32
    %descale_v = tile.load_scalar %sd[%c1] : !tile.desc<1, f32> -> f32
    %pid = tile.program_id 0 : i32
    %m0 = arith.muli %pid, %c128 : i32
    %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x128xf8E4M3FN>
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32>
    %ninf = arith.constant dense<0xFF800000> : tensor<128xf32>
    %r:2 = scf.for %j = %c0 to %nk step %c128 iter_args(%acc = %zero, %l = %ninf) -> (tensor<128x128xf32>, tensor<128xf32>) : i32 {
      %kb = tile.load %kd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %kt = tile.trans %kb : tensor<128x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %s0 = tile.dot %qt, %kt, %zero : tensor<128x128xf8E4M3FN>, tensor<128x128xf8E4M3FN> -> tensor<128x128xf32>
      %sc = tile.splat %scale : f32 -> tensor<128x128xf32>
      %s1 = arith.mulf %s0, %sc : tensor<128x128xf32>
      %iota = tile.iota : tensor<128xi32>
      %js = tile.splat %j : i32 -> tensor<128xi32>
      %cols = arith.addi %js, %iota : tensor<128xi32>
      %row = tile.expand_dims %cols axis 0 : tensor<128xi32> -> tensor<1x128xi32>
      %kv = tile.broadcast %row : tensor<1x128xi32> -> tensor<128x128xi32>
      %nks = tile.splat %nk : i32 -> tensor<128x128xi32>
      %in = arith.cmpi slt, %kv, %nks : tensor<128x128xi32>
      %ninf2 = arith.constant dense<0xFF800000> : tensor<128x128xf32>
      %s = arith.select %in, %s1, %ninf2 : tensor<128x128xi1>, tensor<128x128xf32>
      %p, %lse = tile.softmax %s axis 1 streamed : tensor<128x128xf32> -> tensor<128xf32>
      %vb = tile.load %vd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %p8 = arith.truncf %p : tensor<128x128xf32> to tensor<128x128xf8E4M3FN>
      %acc2 = tile.dot %p8, %vb, %acc : tensor<128x128xf8E4M3FN>, tensor<128x128xf8E4M3FN> -> tensor<128x128xf32>
      scf.yield %acc2, %lse : tensor<128x128xf32>, tensor<128xf32>
    }
    %dv = tile.splat %descale_v : f32 -> tensor<128x128xf32>
    %out = arith.mulf %r#0, %dv : tensor<128x128xf32>
    %ob = arith.truncf %out : tensor<128x128xf32> to tensor<128x128xbf16>
    tile.store %od[%m0, %c0], %ob : !tile.desc<2, bf16>, tensor<128x128xbf16>
    return
  }
  func.func @fp8_attention_vt(%q: !tile.ptr<f8E4M3FN>, %k: !tile.ptr<f8E4M3FN>, %v: !tile.ptr<f8E4M3FN>,
                           %o: !tile.ptr<bf16>, %scales: !tile.ptr<f32>, %nq: i32, %nk: i32,
                           %nkp_blocks: i32) {
    %c0 = arith.constant 0 : i32
    %c1 = arith.constant 1 : i32
    %c128 = arith.constant 128 : i32
    %nkp = arith.muli %nkp_blocks, %c128 : i32
    %qd = tile.make_desc %q, shape[%nq, %c128], strides[%c128, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %kd = tile.make_desc %k, shape[%nk, %c128], strides[%c128, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %vd = tile.make_desc %v, shape[%c128, %nkp], strides[%nkp, %c1] : !tile.ptr<f8E4M3FN> -> !tile.desc<2, f8E4M3FN>
    %od = tile.make_desc %o, shape[%nq, %c128], strides[%c128, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
    %c2 = arith.constant 2 : i32
    %sd = tile.make_desc %scales, shape[%c2], strides[%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
    %scale = tile.load_scalar %sd[%c0] : !tile.desc<1, f32> -> f32
    %descale_v = tile.load_scalar %sd[%c1] : !tile.desc<1, f32> -> f32
    %pid = tile.program_id 0 : i32
    %m0 = arith.muli %pid, %c128 : i32
    %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x128xf8E4M3FN>
    %zero = arith.constant dense<0.000000e+00> : tensor<128x128xf32>
    %ninf = arith.constant dense<0xFF800000> : tensor<128xf32>
    %r:2 = scf.for %j = %c0 to %nk step %c128 iter_args(%acc = %zero, %l = %ninf) -> (tensor<128x128xf32>, tensor<128xf32>) : i32 {
      %kb = tile.load %kd[%j, %c0] : !tile.desc<2, f8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %kt = tile.trans %kb : tensor<128x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %s0 = tile.dot %qt, %kt, %zero : tensor<128x128xf8E4M3FN>, tensor<128x128xf8E4M3FN> -> tensor<128x128xf32>
      %sc = tile.splat %scale : f32 -> tensor<128x128xf32>
      %s1 = arith.mulf %s0, %sc : tensor<128x128xf32>
      %iota = tile.iota : tensor<128xi32>
      %js = tile.splat %j : i32 -> tensor<128xi32>
      %cols = arith.addi %js, %iota : tensor<128xi32>
      %row = tile.expand_dims %cols axis 0 : tensor<128xi32> -> tensor<1x128xi32>
      %kv = tile.broadcast %row : tensor<1x128xi32> -> tensor<128x128xi32>
      %nks = tile.splat %nk : i32 -> tensor<128x128xi32>
      %in = arith.cmpi slt, %kv, %nks : tensor<128x128xi32>
      %ninf2 = arith.constant dense<0xFF800000> : tensor<128x128xf32>
      %s = arith.select %in, %s1, %ninf2 : tensor<128x128xi1>, tensor<128x128xf32>
      %p, %lse = tile.softmax %s axis 1 streamed : tensor<128x128xf32> -> tensor<128xf32>
      %vb = tile.load %vd[%c0, %j] : !tile.desc<2, f8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %p8 = arith.truncf %p : tensor<128x128xf32> to tensor<128x128xf8E4M3FN>
      %vt = tile.trans %vb : tensor<128x128xf8E4M3FN> -> tensor<128x128xf8E4M3FN>
      %acc2 = tile.dot %p8, %vt, %acc : tensor<128x128xf8E4M3FN>, tensor<128x128xf8E4M3FN> -> tensor<128x128xf32>
      scf.yield %acc2, %lse : tensor<128x128xf32>, tensor<128xf32>
    }
    %dv = tile.splat %descale_v : f32 -> tensor<128x128xf32>
    %out = arith.mulf %r#0, %dv : tensor<128x128xf32>
    %ob = arith.truncf %out : tensor<128x128xf32> to tensor<128x128xbf16>
    tile.store %od[%m0, %c0], %ob : !tile.desc<2, bf16>, tensor<128x128xbf16>
    return
  }
}
