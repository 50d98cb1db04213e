// The split's masked loops, end to end. convert-tile-to-mma{fuse-masked-loops}:
// tessel.attention's persistent causal
// programs of pipeline-tiles.mlir (d128 at 128×128, overlapped consumers; d64 at 192×128,
// three synchronous consumer warpgroups) and the sm_80 causal program of
// attention-f16-causal-64.mlir. tilegpu-fuse-masked-loops runs the unmasked loop and the
// diagonal's masked loop as one, so each program has one loop pipeline instead of two: half
// the wgmma (88 -> 44) and mma.sync (128 -> 64) instructions, and ptxas still reports no
// spill and no advisory (the guard's branch holds no wgmma).
// By default (convert-tile-to-mma sync-masked-loops; tilegpu-overlap-consumers
// masked-synchronous) the masked loop stays synchronous instead — d128's 64 wgmma become 48
// (the masked loop's peel and drain gone), d64's synchronous consumers keep their 24: 88 -> 72;
// ptxas still clean, with Q from the producer and pipelined tiles too.
// REQUIRES: ptxas
// RUN: tesselc %S/pipeline-tiles.mlir --chip=sm_90a --codegen=wgmma \
// RUN:   --emit=ptx -o - | grep -c wgmma.mma_async | FileCheck %s --check-prefix=SYNC
// RUN: tesselc %S/pipeline-tiles.mlir --chip=sm_90a --codegen=wgmma \
// RUN:   --producer-once --pipeline-tiles --emit=cubin -o %t.sync.cubin --ptxas-report 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PTXAS --implicit-check-not='Potential Performance Loss'
// RUN: tesselc %S/pipeline-tiles.mlir --chip=sm_90a --codegen=wgmma --no-sync-masked-loops \
// RUN:   --emit=ptx -o - | grep -c wgmma.mma_async | FileCheck %s --check-prefix=SPLIT
// RUN: tesselc %S/pipeline-tiles.mlir --chip=sm_90a --codegen=wgmma --fuse-masked-loops \
// RUN:   --emit=ptx -o - | grep -c wgmma.mma_async | FileCheck %s --check-prefix=FUSED
// RUN: tesselc %S/pipeline-tiles.mlir --chip=sm_90a --codegen=wgmma --fuse-masked-loops \
// RUN:   --emit=cubin -o %t.cubin --ptxas-report 2>&1 \
// RUN:   | FileCheck %s --check-prefix=PTXAS --implicit-check-not='Potential Performance Loss'
// RUN: tessel-opt %S/attention-f16-causal-64.mlir --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --emit=ptx -o - | grep -c mma.sync \
// RUN:   | FileCheck %s --check-prefix=SPLIT80
// RUN: tesselc %t.mlir --chip=sm_80 --codegen=mma --fuse-masked-loops --emit=ptx -o - \
// RUN:   | grep -c mma.sync | FileCheck %s --check-prefix=FUSED80
// The guard: one warp-uniform branch a block around the mask's compares and selects.
// RUN: tessel-opt %t.mlir --convert-tile-to-mma=fuse-masked-loops | FileCheck %s --check-prefix=IF

// SPLIT: 88
// FUSED: 44
// SYNC: 72
// PTXAS-DAG: ptxas sm_90a d64_causal: {{[0-9]+}} registers, {{[0-9]+}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// PTXAS-DAG: ptxas sm_90a d128_causal: {{[0-9]+}} registers, {{[0-9]+}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SPLIT80: 128
// FUSED80: 64
// IF:      scf.for
// IF:        %[[G:.*]] = arith.cmpi slt
// IF:        scf.if %[[G]] -> (f32,
// IF-NEXT:     scf.yield
// IF-NEXT:   } else {
// IF:          arith.cmpi
// IF:          arith.select
// IF-NOT:    scf.for
