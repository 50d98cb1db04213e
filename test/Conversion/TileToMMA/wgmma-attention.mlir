// The naive attention kernels of test/python/attention_kernels.py (f16 and bf16, d64 and d128,
// causal and not, 64- and 128-row query blocks) after --tile-optimize, through the sm_90a wgmma
// path (convert-tile-to-mma wgmma=true; tesselc --codegen=wgmma): both dots are
// wgmma.mma_async over warpgroups, S = Q·Kᵀ with K K-major (transpose-B 0), O += P·V with V
// N-major (transpose-B 1), a wgmma.fence before and one commit_group / wait_group 0 after each
// dot; the landed cp.async blocks are fenced for the async proxy before the loop's barrier.
// ptxas for sm_90a: no spill, no warning and no (C75xx) advisory ("wgmma serialized",
// "warpgroup.arrive injected"). sm_80 is refused. The 128-row kernels' K/V come from a producer
// warpgroup by default (warp-specialize.mlir); here every thread copies them, as without it.
// docs/dev/codegen-wgmma.md.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --convert-tile-to-mma="wgmma=true warp-specialize=false" | FileCheck %s --check-prefix=MLIR
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-warp-specialize --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-warp-specialize --emit=cubin -o %t.cubin --ptxas-report > %t.report 2>&1
// RUN: FileCheck %s --check-prefix=SM90 < %t.report
// RUN: FileCheck %s --check-prefix=ADVISORY < %t.report
// RUN: not tesselc %t.mlir --chip=sm_80 --codegen=wgmma --emit=ptx -o - 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not tessel-opt %t.mlir --convert-tile-to-mma="wgmma=true chip=sm_80" 2>&1 | FileCheck %s --check-prefix=SM80
// RUN: not tessel-opt %t.mlir --convert-tile-to-mma="wgmma=true warp-rows=32" 2>&1 | FileCheck %s --check-prefix=W32
// codegen=auto (tesselc's default) takes wgmma on sm_90a and mma.sync on sm_80; with fallback a
// program wgmma refuses is tried on mma.sync before the reference lowering.
// RUN: tesselc %t.mlir --chip=sm_90a --emit=ptx -o - | FileCheck %s --check-prefix=AUTO90 --implicit-check-not=mma.sync.aligned
// RUN: tesselc %t.mlir --chip=sm_80 --emit=ptx -o - | FileCheck %s --check-prefix=AUTO80 --implicit-check-not=wgmma
// RUN: tessel-opt %t.mlir --convert-tile-to-mma="wgmma=true fallback=true warp-rows=32" 2>&1 | FileCheck %s --check-prefix=CHAIN

// The shared block is 1024-byte aligned (the 128-byte swizzle is a function of the address).
// MLIR: llvm.mlir.global external @__tessel_mma_smem() {addr_space = 3 : i32, alignment = 1024 : i64}
// Q (8 KiB) is read into registers before the loops; their K/V stages (2 x 16 KiB) reuse its
// slot, behind the barrier that opens each loop's prologue: 32 KiB, not 40.
// MLIR-LABEL: gpu.func @f16_causal_d64
// MLIR-SAME: known_block_size = array<i32: 128, 1, 1>
// MLIR-SAME: tessel.codegen = "wgmma"
// MLIR-SAME: tessel.dynamic_shared_bytes = 32768
// MLIR: nvvm.ldmatrix
// MLIR: gpu.barrier
// MLIR: arith.cmpi slt
// MLIR-NEXT: scf.if
// MLIR: nvvm.cp.async.shared.global
// MLIR: scf.for
// MLIR: nvvm.cp.async.wait.group 0
// MLIR-NEXT: nvvm.fence.proxy {kind = #nvvm.proxy_kind<async.shared>, space = #nvvm.shared_space<cta>}
// MLIR-NEXT: gpu.barrier
// S = Q·Kᵀ: a zero accumulator needs no fenced registers; the descriptor of K is K-major
// 128-byte swizzle (bits 62-63 = 1), SBO 1024 B (64 << 32), LBO 16 B (unused, 1 << 16).
// MLIR: nvvm.wgmma.fence.aligned
// MLIR: arith.constant 4611686293305360384 : i64
// The first k step writes the accumulator without reading it (scale-d 0: outputs, no tied inputs).
// MLIR: llvm.inline_asm has_side_effects {{.*}}setp.ne.b32 p, $37, 0;{{.*}}m64n64k16.f32.f16.f16{{.*}}p, 1, 1, 0;
// MLIR-SAME: "{{(=f,)+}}r,r,r,r,l,r"
// MLIR: m64n64k16.f32.f16.f16{{.*}}p, 1, 1, 0;
// MLIR-SAME: "{{(=f,)+}}0,1,2,
// MLIR: nvvm.wgmma.commit.group.sync.aligned
// MLIR-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;"
// O += P·V: the fence re-defines the rescaled accumulator and the packed P; V's descriptor is
// N-major with LBO 8192 B (one 64-row block: 512 << 16) and SBO 1024 B.
// MLIR: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.fence.sync.aligned;"
// MLIR: arith.constant 4611686293338849280 : i64
// MLIR: m64n64k16.f32.f16.f16{{.*}}p, 1, 1, 1;
// MLIR: nvvm.wgmma.commit.group.sync.aligned
// MLIR-NEXT: llvm.inline_asm has_side_effects asm_dialect = att "wgmma.wait_group.sync.aligned 0;"
// A 128-row block is two warpgroups (8 warps of 16 rows).
// MLIR-LABEL: gpu.func @f16_none_d128
// MLIR-SAME: known_block_size = array<i32: 256, 1, 1>
// MLIR-SAME: tessel.dynamic_shared_bytes = 65536
// MLIR-LABEL: gpu.func @bf16_causal_d128
// MLIR-SAME: known_block_size = array<i32: 128, 1, 1>
// MLIR-LABEL: gpu.func @bf16_none_d64
// MLIR-SAME: known_block_size = array<i32: 256, 1, 1>

// PTX: .extern .shared .align 1024 .b8 __tessel_mma_smem[];
// PTX-LABEL: .entry f16_causal_d64(
// PTX: .maxntid 128, 1, 1
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: cp.async.wait_group 0;
// PTX-NEXT: fence.proxy.async.shared::cta;
// PTX-NEXT: bar.sync 0;
// PTX-NOT: mma.sync
// PTX-LABEL: .entry f16_none_d128(
// PTX: .maxntid 256, 1, 1
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: wgmma.fence.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.wait_group.sync.aligned 0;
// PTX: fence.proxy.async.shared::cta;
// PTX-NOT: mma.sync
// PTX-LABEL: .entry bf16_causal_d128(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX: fence.proxy.async.shared::cta;
// PTX-NOT: mma.sync
// PTX-LABEL: .entry bf16_none_d64(
// PTX: .maxntid 256, 1, 1
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX: fence.proxy.async.shared::cta;
// PTX-NOT: mma.sync

// ptxas reports no warning and no (C75xx) advisory (e.g. C7513: wgmma serialized because
// registers it reads are redefined while it runs).
// ADVISORY-NOT: (C75
// ADVISORY-NOT: warning
// SM90-DAG: ptxas sm_90a f16_causal_d64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a f16_none_d128: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_causal_d128: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_none_d64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: kernel f16_causal_d64: block 128x1x1, 32768 bytes dynamic smem
// SM90-DAG: kernel f16_none_d128: block 256x1x1, 65536 bytes dynamic smem
// SM90-DAG: kernel bf16_causal_d128: block 128x1x1, 65536 bytes dynamic smem
// SM90-DAG: kernel bf16_none_d64: block 256x1x1, 32768 bytes dynamic smem

// SM80: .mlir:{{[0-9]+}}:{{[0-9]+}}: error: 'func.func' op cannot use codegen=wgmma on sm_80: wgmma.mma_async needs sm_90a

// W32: error: 'func.func' op asks for 32 rows per warp: codegen=wgmma runs 16 (a warpgroup of 4 warps per 64 query rows)


func.func @f16_causal_d64(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 64 : i32
  %cbn = arith.constant 64 : i32
  %d = arith.constant 64 : i32
  %pid_m = tile.program_id 0 : i32
  %bh = tile.program_id 1 : i32
  %b = arith.divsi %bh, %h : i32
  %head = arith.remsi %bh, %h : i32
  %group = arith.divsi %h, %hkv : i32
  %kv_head = arith.divsi %head, %group : i32
  %q_rows = arith.muli %bh, %nq : i32
  %q_off = arith.muli %q_rows, %d : i32
  %b_kv = arith.muli %b, %hkv : i32
  %bkv_head = arith.addi %b_kv, %kv_head : i32
  %kv_rows = arith.muli %bkv_head, %nk : i32
  %kv_off = arith.muli %kv_rows, %d : i32
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %q_start = tile.splat %m0 : i32 -> tensor<64xi32>
  %rows = tile.iota : tensor<64xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<64xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %win_t = tile.splat %window : i32 -> tensor<64x64xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<64x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<64x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<64x64xf32>, tensor<64xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %ktt = tile.trans %kt : tensor<64x64xf16> -> tensor<64x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x64xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<64x64xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<64x64xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %row_lse : tensor<64x64xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @f16_none_d128(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 128 : i32
  %cbn = arith.constant 64 : i32
  %d = arith.constant 128 : i32
  %pid_m = tile.program_id 0 : i32
  %bh = tile.program_id 1 : i32
  %b = arith.divsi %bh, %h : i32
  %head = arith.remsi %bh, %h : i32
  %group = arith.divsi %h, %hkv : i32
  %kv_head = arith.divsi %head, %group : i32
  %q_rows = arith.muli %bh, %nq : i32
  %q_off = arith.muli %q_rows, %d : i32
  %b_kv = arith.muli %b, %hkv : i32
  %bkv_head = arith.addi %b_kv, %kv_head : i32
  %kv_rows = arith.muli %bkv_head, %nk : i32
  %kv_off = arith.muli %kv_rows, %d : i32
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<128x128xf16>
  %q_start = tile.splat %m0 : i32 -> tensor<128xi32>
  %rows = tile.iota : tensor<128xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<128xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<128xi32> -> tensor<128x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<128x1xi32> -> tensor<128x64xi32>
  %win_t = tile.splat %window : i32 -> tensor<128x64xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<128x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<128x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<128x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<128x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<128x128xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<128xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<128x128xf32>, tensor<128xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %ktt = tile.trans %kt : tensor<64x128xf16> -> tensor<128x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<128x128xf16>, tensor<128x64xf16> -> tensor<128x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<128x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<128x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<128x64xi32>
    %sm = arith.select %in_range, %s, %ninf : tensor<128x64xi1>, tensor<128x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<128x64xf32> -> tensor<128xf32>
    %pc = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<128x64xf16>, tensor<64x128xf16> -> tensor<128x128xf32>
    scf.yield %acc_n, %row_lse : tensor<128x128xf32>, tensor<128xf32>
  }
  %out = arith.truncf %acc : tensor<128x128xf32> to tensor<128x128xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<128x128xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<128xf32>
  return
}


func.func @bf16_causal_d128(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
                     %o: !tile.ptr<bf16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 64 : i32
  %cbn = arith.constant 64 : i32
  %d = arith.constant 128 : i32
  %pid_m = tile.program_id 0 : i32
  %bh = tile.program_id 1 : i32
  %b = arith.divsi %bh, %h : i32
  %head = arith.remsi %bh, %h : i32
  %group = arith.divsi %h, %hkv : i32
  %kv_head = arith.divsi %head, %group : i32
  %q_rows = arith.muli %bh, %nq : i32
  %q_off = arith.muli %q_rows, %d : i32
  %b_kv = arith.muli %b, %hkv : i32
  %bkv_head = arith.addi %b_kv, %kv_head : i32
  %kv_rows = arith.muli %bkv_head, %nk : i32
  %kv_off = arith.muli %kv_rows, %d : i32
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, bf16> -> tensor<64x128xbf16>
  %q_start = tile.splat %m0 : i32 -> tensor<64xi32>
  %rows = tile.iota : tensor<64xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<64xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<64x1xi32> -> tensor<64x64xi32>
  %win_t = tile.splat %window : i32 -> tensor<64x64xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<64x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<64x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<64x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x128xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<64x128xf32>, tensor<64xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, bf16> -> tensor<64x128xbf16>
    %ktt = tile.trans %kt : tensor<64x128xbf16> -> tensor<128x64xbf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x128xbf16>, tensor<128x64xbf16> -> tensor<64x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x64xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<64x64xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<64x64xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xbf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, bf16> -> tensor<64x128xbf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x64xbf16>, tensor<64x128xbf16> -> tensor<64x128xf32>
    scf.yield %acc_n, %row_lse : tensor<64x128xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x128xf32> to tensor<64x128xbf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, bf16>, tensor<64x128xbf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @bf16_none_d64(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
                     %o: !tile.ptr<bf16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 128 : i32
  %cbn = arith.constant 64 : i32
  %d = arith.constant 64 : i32
  %pid_m = tile.program_id 0 : i32
  %bh = tile.program_id 1 : i32
  %b = arith.divsi %bh, %h : i32
  %head = arith.remsi %bh, %h : i32
  %group = arith.divsi %h, %hkv : i32
  %kv_head = arith.divsi %head, %group : i32
  %q_rows = arith.muli %bh, %nq : i32
  %q_off = arith.muli %q_rows, %d : i32
  %b_kv = arith.muli %b, %hkv : i32
  %bkv_head = arith.addi %b_kv, %kv_head : i32
  %kv_rows = arith.muli %bkv_head, %nk : i32
  %kv_off = arith.muli %kv_rows, %d : i32
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, bf16> -> tensor<128x64xbf16>
  %q_start = tile.splat %m0 : i32 -> tensor<128xi32>
  %rows = tile.iota : tensor<128xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<128xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<128xi32> -> tensor<128x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<128x1xi32> -> tensor<128x64xi32>
  %win_t = tile.splat %window : i32 -> tensor<128x64xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<128x64xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<128x64xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<128x64xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<128x64xf32>
  %zero_s = arith.constant dense<0.0> : tensor<128x64xf32>
  %zero_o = arith.constant dense<0.0> : tensor<128x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<128xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<128x64xf32>, tensor<128xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, bf16> -> tensor<64x64xbf16>
    %ktt = tile.trans %kt : tensor<64x64xbf16> -> tensor<64x64xbf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<128x64xbf16>, tensor<64x64xbf16> -> tensor<128x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<128x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<128x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<128x64xi32>
    %sm = arith.select %in_range, %s, %ninf : tensor<128x64xi1>, tensor<128x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<128x64xf32> -> tensor<128xf32>
    %pc = arith.truncf %p : tensor<128x64xf32> to tensor<128x64xbf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, bf16> -> tensor<64x64xbf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<128x64xbf16>, tensor<64x64xbf16> -> tensor<128x64xf32>
    scf.yield %acc_n, %row_lse : tensor<128x64xf32>, tensor<128xf32>
  }
  %out = arith.truncf %acc : tensor<128x64xf32> to tensor<128x64xbf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, bf16>, tensor<128x64xbf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<128xf32>
  return
}

// AUTO90: .entry f16_causal_d64
// AUTO90: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// AUTO80: .entry f16_causal_d64
// AUTO80: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32

// CHAIN: remark: convert-tile-to-mma lowers @f16_causal_d64 with mma.sync, not wgmma: 'func.func' op asks for 32 rows per warp
// CHAIN: gpu.func @f16_causal_d64
// CHAIN-NOT: tessel.codegen = "wgmma"
// CHAIN: nvvm.mma.sync
