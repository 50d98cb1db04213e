// FA3's intra-warpgroup pipelining on the sm_90a wgmma path (convert-tile-to-mma
// wgmma=true wgmma-overlap=true; tesselc --codegen=wgmma --wgmma-overlap): in each iteration
// S_j = Q·K_jᵀ and the previous block's O += P_{j-1}·V_{j-1} are two commit groups, then
// `wgmma.wait_group 1` (S_j in, P·V still running), the softmax of S_j (its exp2s), then
// `wait_group 0` and the rescale of O; after the last loop the last P·V behind a cp.async wait,
// the async-proxy fence and the barrier. The naive kernels of test/python/attention_kernels.py,
// f16/bf16 × d64/d128 × none/causal (and window), blocks 64×64, 64×128 and 128×64, after
// --tile-optimize (a mask-free loop, then the masked ones: every loop is pipelined and drained).
// ptxas for sm_90a: no spill, no warning, no (C75xx) advisory ("wgmma serialized").
// Without the option (and without tilegpu-overlap-consumers, which overlaps the 128-row
// warp-specialized blocks by default) nothing changes (no wait_group 1). docs/dev/codegen-wgmma.md.
// REQUIRES: ptxas
// RUN: tessel-opt %s --tile-optimize -o %t.mlir
// RUN: tessel-opt %t.mlir --convert-tile-to-mma="wgmma=true wgmma-overlap=true" | FileCheck %s --check-prefix=MLIR
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --wgmma-overlap --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --wgmma-overlap --emit=cubin -o %t.cubin --ptxas-report > %t.report 2>&1
// RUN: FileCheck %s --check-prefix=SM90 < %t.report
// RUN: FileCheck %s --check-prefix=ADVISORY < %t.report
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --wgmma-overlap --emit=ptx -o - | FileCheck %s --check-prefix=W1
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --wgmma-overlap --emit=ptx -o - | FileCheck %s --check-prefix=W0
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-overlap-consumers --emit=ptx -o - | FileCheck %s --check-prefix=OFF --implicit-check-not='wait_group.sync.aligned 1'
// RUN: tesselc %t.mlir --chip=sm_90a --wgmma-overlap --emit=ptx -o - | FileCheck %s --check-prefix=PTX

// The first kernel, lowered: after Q's copy the prologue copies K_lb alone and unconditionally
// (a branch only for the ragged block), then Q's wait leaves that group in flight and ldmatrix
// reads Q (tilegpu-sink-waits); each iteration waits for its copies, fences, passes the barrier, fences
// the wgmma registers once, issues S and P·V as two commit groups, then the copies of K_{j+1}
// (predicated) and V_j, one cp.async group, then waits for S with one group pending. In control
// flow order (LLVM may lay the blocks out otherwise) the softmax's exp2s come after that wait and
// before the one with no group pending. The masked loop follows without a drain between; the
// drain after it has no branch.
// MLIR-LABEL: gpu.func @f16_none_d128_64x64
// MLIR: nvvm.cp.async.commit.group
// MLIR: gpu.barrier
// MLIR-NOT: nvvm.cp.async.commit.group
// MLIR: nvvm.cp.async.commit.group
// MLIR-NEXT: nvvm.cp.async.wait.group 1
// MLIR-NEXT: gpu.barrier
// MLIR: nvvm.ldmatrix
// MLIR-NOT: nvvm.cp.async
// MLIR: scf.for
// MLIR-NEXT: nvvm.cp.async.wait.group 0
// MLIR-NEXT: nvvm.fence.proxy
// MLIR-NEXT: gpu.barrier
// MLIR: "wgmma.fence.sync.aligned;"
// MLIR-NOT: wgmma.wait_group
// MLIR: nvvm.wgmma.commit.group.sync.aligned
// MLIR-NOT: wgmma.wait_group
// MLIR: nvvm.wgmma.commit.group.sync.aligned
// MLIR-NEXT: arith.addi
// MLIR-NEXT: arith.cmpi slt
// MLIR: scf.if
// MLIR: nvvm.cp.async.shared.global
// MLIR: nvvm.cp.async.commit.group
// MLIR-NEXT: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR-COUNT-32: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR: scf.yield
// MLIR-NOT: "wgmma.wait_group.sync.aligned 0;"
// MLIR: scf.for
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR: scf.yield
// MLIR: nvvm.cp.async.wait.group 0
// MLIR-NEXT: nvvm.fence.proxy
// MLIR-NEXT: gpu.barrier
// MLIR-NOT: scf.if
// MLIR: "wgmma.fence.sync.aligned;"
// MLIR-NOT: scf.if
// MLIR: nvvm.wgmma.commit.group.sync.aligned
// MLIR-NEXT: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @f16_causal_d128_64x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @bf16_none_d128_64x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @bf16_causal_d128_64x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @f16_none_d64_64x128
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @f16_causal_d64_64x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @bf16_none_d64_64x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @bf16_causal_d64_64x128
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @f16_causal_d128_128x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"
// MLIR-LABEL: gpu.func @bf16_window_d64_128x64
// MLIR: "wgmma.wait_group.sync.aligned 1;"
// MLIR-NOT: wgmma.mma_async
// MLIR: nvvm.ex2.approx.ftz.f32
// MLIR-NOT: wgmma.mma_async
// MLIR: "wgmma.wait_group.sync.aligned 0;"

// Per kernel, each loop (in the order LLVM lays them out) issues S (k steps with scale-d 0
// first: K-major, transpose-B 0) and P·V (transpose-B 1) with no wait and no exp2 between, two
// commit groups, then wait_group 1.
// PTX-LABEL: .entry f16_none_d128_64x64(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry f16_causal_d128_64x64(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry bf16_none_d128_64x64(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry bf16_causal_d128_64x64(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry f16_none_d64_64x128(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry f16_causal_d64_64x64(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry bf16_none_d64_64x64(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry bf16_causal_d64_64x128(
// PTX: .maxntid 128, 1, 1
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry f16_causal_d128_128x64(
// PTX: .maxntid 256, 1, 1
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-8: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n128k16.f32.f16.f16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// PTX-LABEL: .entry bf16_window_d64_128x64(
// PTX: .maxntid 256, 1, 1
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 0;
// PTX-NOT: wgmma.wait_group
// PTX: wgmma.commit_group.sync.aligned;
// PTX-COUNT-4: wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 {{.*}}, p, 1, 1, 1;
// PTX-NOT: wgmma.wait_group
// PTX-NOT: ex2.approx
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: ex2.approx
// PTX: wgmma.wait_group.sync.aligned 1;

// One wait_group 1 per loop; one wait_group 0 per loop plus the drain's (one per kernel).
// W1-LABEL: .entry f16_none_d128_64x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry f16_none_d128_64x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry f16_causal_d128_64x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry f16_causal_d128_64x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry bf16_none_d128_64x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry bf16_none_d128_64x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry bf16_causal_d128_64x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry bf16_causal_d128_64x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry f16_none_d64_64x128(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry f16_none_d64_64x128(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry f16_causal_d64_64x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry f16_causal_d64_64x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry bf16_none_d64_64x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry bf16_none_d64_64x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry bf16_causal_d64_64x128(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry bf16_causal_d64_64x128(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry f16_causal_d128_128x64(
// W1-COUNT-2: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry f16_causal_d128_128x64(
// W0-COUNT-3: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;
// W1-LABEL: .entry bf16_window_d64_128x64(
// W1-COUNT-3: wgmma.wait_group.sync.aligned 1;
// W1-NOT: wgmma.wait_group.sync.aligned 1;
// W0-LABEL: .entry bf16_window_d64_128x64(
// W0-COUNT-4: wgmma.wait_group.sync.aligned 0;
// W0-NOT: wgmma.wait_group.sync.aligned 0;

// ptxas reports no warning and no (C75xx) advisory (e.g. C7513: wgmma serialized because
// registers it reads are redefined while it runs).
// ADVISORY-NOT: (C75
// ADVISORY-NOT: warning
// SM90-DAG: ptxas sm_90a f16_none_d128_64x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a f16_causal_d128_64x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_none_d128_64x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_causal_d128_64x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a f16_none_d64_64x128: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a f16_causal_d64_64x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_none_d64_64x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_causal_d64_64x128: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a f16_causal_d128_128x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90-DAG: ptxas sm_90a bf16_window_d64_128x64: {{[0-9]+}} registers, 0 bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads

// OFF-LABEL: .entry f16_none_d128_64x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry f16_causal_d128_64x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry bf16_none_d128_64x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry bf16_causal_d128_64x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry f16_none_d64_64x128(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry f16_causal_d64_64x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry bf16_none_d64_64x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry bf16_causal_d64_64x128(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry f16_causal_d128_128x64(
// OFF: wgmma.wait_group.sync.aligned 0;
// OFF-LABEL: .entry bf16_window_d64_128x64(
// OFF: wgmma.wait_group.sync.aligned 0;

func.func @f16_none_d128_64x64(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
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
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
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
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %ktt = tile.trans %kt : tensor<64x128xf16> -> tensor<128x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x64xi32>
    %sm = arith.select %in_range, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
    scf.yield %acc_n, %row_lse : tensor<64x128xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x128xf32> to tensor<64x128xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x128xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @f16_causal_d128_64x64(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
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
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
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
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %ktt = tile.trans %kt : tensor<64x128xf16> -> tensor<128x64xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
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
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x128xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
    scf.yield %acc_n, %row_lse : tensor<64x128xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x128xf32> to tensor<64x128xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x128xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @bf16_none_d128_64x64(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
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
    %sm = arith.select %in_range, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
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


func.func @bf16_causal_d128_64x64(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
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


func.func @f16_none_d64_64x128(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
                     %o: !tile.ptr<f16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 64 : i32
  %cbn = arith.constant 128 : i32
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
  %q_idx = tile.broadcast %q_idx2 : tensor<64x1xi32> -> tensor<64x128xi32>
  %win_t = tile.splat %window : i32 -> tensor<64x128xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<64x128xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<64x128xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<64x128xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x128xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x128xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<64x64xf32>, tensor<64xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %ktt = tile.trans %kt : tensor<128x64xf16> -> tensor<64x128xf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x64xf16>, tensor<64x128xf16> -> tensor<64x128xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x128xf32>
    %kv_start = tile.splat %j : i32 -> tensor<128xi32>
    %cols = tile.iota : tensor<128xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<128xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<128xi32> -> tensor<1x128xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x128xi32> -> tensor<64x128xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x128xi32>
    %sm = arith.select %in_range, %s, %ninf : tensor<64x128xi1>, tensor<64x128xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x128xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x128xf32> to tensor<64x128xf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, f16> -> tensor<128x64xf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x128xf16>, tensor<128x64xf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %row_lse : tensor<64x64xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x64xf32> to tensor<64x64xf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, f16>, tensor<64x64xf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @f16_causal_d64_64x64(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
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


func.func @bf16_none_d64_64x64(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
                     %o: !tile.ptr<bf16>, %lse_out: !tile.ptr<f32>,
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
  %qd = tile.make_desc %q[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %kd = tile.make_desc %k[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %vd = tile.make_desc %v[%kv_off], shape [%nk, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %od = tile.make_desc %o[%q_off], shape [%nq, %d], strides [%d, %c1] : !tile.ptr<bf16> -> !tile.desc<2, bf16>
  %ld = tile.make_desc %lse_out[%q_rows], shape [%nq], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %m0 = arith.muli %pid_m, %cbm : i32
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, bf16> -> tensor<64x64xbf16>
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
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, bf16> -> tensor<64x64xbf16>
    %ktt = tile.trans %kt : tensor<64x64xbf16> -> tensor<64x64xbf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x64xf32>
    %kv_start = tile.splat %j : i32 -> tensor<64xi32>
    %cols = tile.iota : tensor<64xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<64xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<64xi32> -> tensor<1x64xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x64xi32> -> tensor<64x64xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x64xi32>
    %sm = arith.select %in_range, %s, %ninf : tensor<64x64xi1>, tensor<64x64xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x64xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x64xf32> to tensor<64x64xbf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, bf16> -> tensor<64x64xbf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x64xbf16>, tensor<64x64xbf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %row_lse : tensor<64x64xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x64xf32> to tensor<64x64xbf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, bf16>, tensor<64x64xbf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @bf16_causal_d64_64x128(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
                     %o: !tile.ptr<bf16>, %lse_out: !tile.ptr<f32>,
                     %nq: i32, %nk: i32, %h: i32, %hkv: i32, %scale: f32, %window: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %cbm = arith.constant 64 : i32
  %cbn = arith.constant 128 : i32
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
  %qt = tile.load %qd[%m0, %c0] : !tile.desc<2, bf16> -> tensor<64x64xbf16>
  %q_start = tile.splat %m0 : i32 -> tensor<64xi32>
  %rows = tile.iota : tensor<64xi32>
  %q_idx1 = arith.addi %q_start, %rows : tensor<64xi32>
  %q_idx2 = tile.expand_dims %q_idx1 axis 1 : tensor<64xi32> -> tensor<64x1xi32>
  %q_idx = tile.broadcast %q_idx2 : tensor<64x1xi32> -> tensor<64x128xi32>
  %win_t = tile.splat %window : i32 -> tensor<64x128xi32>
  %win_lo = arith.subi %q_idx, %win_t : tensor<64x128xi32>
  %nk_t = tile.splat %nk : i32 -> tensor<64x128xi32>
  %scale_t = tile.splat %scale : f32 -> tensor<64x128xf32>
  %ninf = arith.constant dense<0xFF800000> : tensor<64x128xf32>
  %zero_s = arith.constant dense<0.0> : tensor<64x128xf32>
  %zero_o = arith.constant dense<0.0> : tensor<64x64xf32>
  %lse_init = arith.constant dense<0xFF800000> : tensor<64xf32>
  %acc, %lse = scf.for %j = %c0 to %nk step %cbn
      iter_args(%acc_i = %zero_o, %lse_i = %lse_init) -> (tensor<64x64xf32>, tensor<64xf32>) : i32 {
    %kt = tile.load %kd[%j, %c0] : !tile.desc<2, bf16> -> tensor<128x64xbf16>
    %ktt = tile.trans %kt : tensor<128x64xbf16> -> tensor<64x128xbf16>
    %s0 = tile.dot %qt, %ktt, %zero_s : tensor<64x64xbf16>, tensor<64x128xbf16> -> tensor<64x128xf32>
    %s = arith.mulf %s0, %scale_t : tensor<64x128xf32>
    %kv_start = tile.splat %j : i32 -> tensor<128xi32>
    %cols = tile.iota : tensor<128xi32>
    %kv_idx1 = arith.addi %kv_start, %cols : tensor<128xi32>
    %kv_idx2 = tile.expand_dims %kv_idx1 axis 0 : tensor<128xi32> -> tensor<1x128xi32>
    %kv_idx = tile.broadcast %kv_idx2 : tensor<1x128xi32> -> tensor<64x128xi32>
    %in_range = arith.cmpi slt, %kv_idx, %nk_t : tensor<64x128xi32>
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<64x128xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<64x128xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<64x128xi1>, tensor<64x128xf32>
    %p, %row_lse = tile.softmax %sm axis 1 streamed : tensor<64x128xf32> -> tensor<64xf32>
    %pc = arith.truncf %p : tensor<64x128xf32> to tensor<64x128xbf16>
    %vt = tile.load %vd[%j, %c0] : !tile.desc<2, bf16> -> tensor<128x64xbf16>
    %acc_n = tile.dot %pc, %vt, %acc_i : tensor<64x128xbf16>, tensor<128x64xbf16> -> tensor<64x64xf32>
    scf.yield %acc_n, %row_lse : tensor<64x64xf32>, tensor<64xf32>
  }
  %out = arith.truncf %acc : tensor<64x64xf32> to tensor<64x64xbf16>
  tile.store %od[%m0, %c0], %out : !tile.desc<2, bf16>, tensor<64x64xbf16>
  tile.store %ld[%m0], %lse : !tile.desc<1, f32>, tensor<64xf32>
  return
}


func.func @f16_causal_d128_128x64(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %v: !tile.ptr<f16>,
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
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<128x64xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<128x64xi1>
    %sm = arith.select %mask0, %s, %ninf : tensor<128x64xi1>, tensor<128x64xf32>
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


func.func @bf16_window_d64_128x64(%q: !tile.ptr<bf16>, %k: !tile.ptr<bf16>, %v: !tile.ptr<bf16>,
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
    %causal_ok = arith.cmpi sge, %q_idx, %kv_idx : tensor<128x64xi32>
    %win_ok = arith.cmpi sgt, %kv_idx, %win_lo : tensor<128x64xi32>
    %mask0 = arith.andi %in_range, %causal_ok : tensor<128x64xi1>
    %mask1 = arith.andi %mask0, %win_ok : tensor<128x64xi1>
    %sm = arith.select %mask1, %s, %ninf : tensor<128x64xi1>, tensor<128x64xf32>
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
