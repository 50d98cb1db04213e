// The bundled naive attention (examples/attention_naive.mlir, 64-row blocks, d64) through each
// code generation path end to end: tile-optimize, the tilegpu layouts, the lowering, NVPTX, and
// ptxas' report. One RUN per path: reference (every tile in shared memory), mma.sync (sm_80),
// wgmma (sm_90a), and auto on each chip (which takes the fast path for this class).
// REQUIRES: ptxas
// RUN: tessel-opt %tessel_examples/attention_naive.mlir --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=reference --emit=cubin -o %t.ref.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=REF
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=ptx -o - | FileCheck %s --check-prefix=MMA-PTX
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=cubin -o %t.mma.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=WG-PTX
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.wg.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=WG
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=auto --emit=cubin -o %t.auto.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=WG
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=auto --emit=cubin -o %t.auto80.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=MMA
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=SINK
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-sink-waits --emit=ptx -o - | FileCheck %s --check-prefix=NOSINK --implicit-check-not='cp.async.wait_group 1'

// The reference lowering: 128 threads, the tiles in (dynamic) shared memory.
// REF: ptxas sm_80 attention: {{[0-9]+}} registers, {{[0-9]+}} bytes smem, 0 bytes stack
// REF: kernel attention: block 128x1x1

// mma.sync: tensor-core instructions fed by ldmatrix from cp.async'd shared memory.
// MMA-PTX: .entry attention
// MMA-PTX: cp.async.cg.shared.global
// MMA-PTX: ldmatrix.sync.aligned
// MMA-PTX: mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
// MMA: ptxas sm_80 attention: {{[0-9]+}} registers, {{[0-9]+}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// MMA: kernel attention: block 128x1x1

// wgmma: the warpgroup instruction with its fence, commit and wait.
// WG-PTX: .entry attention
// WG-PTX: wgmma.fence.sync.aligned
// WG-PTX: wgmma.mma_async.sync.aligned.m64n{{[0-9]+}}k16.f32.f16.f16
// WG-PTX: wgmma.commit_group.sync.aligned
// WG-PTX: wgmma.wait_group.sync.aligned
// WG: ptxas sm_90a attention: {{[0-9]+}} registers, {{[0-9]+}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// WG: kernel attention: block 128x1x1

// tilegpu-sink-waits (on by default): Q's copy, then the loop's first K/V copies, then one wait
// that leaves their group in flight and the ldmatrix of Q. --no-sink-waits: Q waited for alone.
// SINK: cp.async.commit_group;
// SINK: bar.sync 0;
// SINK: cp.async.commit_group;
// SINK-NEXT: cp.async.wait_group 1;
// SINK-NEXT: bar.sync 0;
// SINK: ldmatrix.sync.aligned
// NOSINK: cp.async.commit_group;
// NOSINK-NEXT: cp.async.wait_group 0;
// NOSINK-NEXT: bar.sync 0;
// NOSINK: ldmatrix.sync.aligned
