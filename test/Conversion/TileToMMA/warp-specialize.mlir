// convert-tile-to-mma{warp-specialize} end to end (on by default): the 128-row d128
// attention of attention-f16-none-128-d128.mlir on wgmma, its loops' K/V copies in a producer
// warpgroup. 384 threads (two consumer warpgroups, then the producer), `.maxnreg` at what one
// CTA an SM leaves a thread, setmaxnreg moving registers to the consumers; mbarriers set up by
// one thread before a CTA barrier; the producer's cp.async arrive on `full` as they land, the
// consumers wait on it (no cp.async wait in their loops) and arrive on `empty`; the consumers'
// barrier (Q's) is the named barrier 1 of their 256 threads; their dots are overlapped with
// the softmax (tilegpu-overlap-consumers: a wait with one group in flight), the two
// warpgroups taking turns at them (tilegpu-pingpong: named barriers 2 and 3). ptxas: nothing
// spills, and no advisory (C7513: wgmmas serialized).
// REQUIRES: ptxas
// RUN: tessel-opt %S/attention-f16-none-128-d128.mlir --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not='Potential Performance Loss'
// Without the overlap the consumers' dots are synchronous (one wait_group 0 after each) and the
// two warpgroups take turns around the softmax (cuDNN's schedule): the first turn given at the
// start (bar.arrive 2), each loop's turn waited for and passed; --no-pingpong has no turns.
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-overlap-consumers --emit=ptx -o - | FileCheck %s --check-prefix=SYNC
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-overlap-consumers --no-pingpong --emit=ptx -o - | FileCheck %s --check-prefix=NOTURN
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-overlap-consumers --emit=cubin -o %t.sync.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS --implicit-check-not='Potential Performance Loss'

// CHECK: .entry attention
// CHECK: .maxntid 384, 1, 1
// CHECK-NEXT: .maxnreg 168
// CHECK: mbarrier.init.shared.b64
// CHECK: bar.sync 0;
// The two roles, in the order LLVM lays them out.
// CHECK-DAG: setmaxnreg.inc.sync.aligned.u32 232;
// CHECK-DAG: setmaxnreg.dec.sync.aligned.u32 40;
// CHECK-DAG: cp.async.mbarrier.arrive.noinc.shared.b64
// CHECK-DAG: mbarrier.try_wait.parity.shared.b64
// CHECK-DAG: bar.sync 1, 256;
// CHECK-DAG: fence.proxy.async.shared::cta;
// CHECK-DAG: mbarrier.arrive.shared.b64
// CHECK-DAG: wgmma.wait_group.sync.aligned 1;
// CHECK-DAG: bar.arrive 2, 256;
// CHECK-NOT: bar.sync 0;

// SYNC: .entry attention
// SYNC: bar.arrive 2, 256;
// SYNC: wgmma.wait_group.sync.aligned 0;
// SYNC: bar.sync %r{{[0-9]+}}, 256;
// SYNC: bar.arrive %r{{[0-9]+}}, 256;
// SYNC: wgmma.mma_async
// SYNC-NOT: wgmma.wait_group.sync.aligned 1;
// NOTURN: .entry attention
// NOTURN-NOT: bar.arrive 2, 256;
// NOTURN-NOT: bar.sync %r{{[0-9]+}}, 256;

// PTXAS: ptxas sm_90a attention: 168 registers, {{[0-9]+}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// PTXAS: kernel attention: block 384x1x1
