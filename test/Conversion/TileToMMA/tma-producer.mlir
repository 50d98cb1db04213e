// convert-tile-to-mma{warp-specialize tma-producer} (both on by default) end to end: the 128-row d128 attention of
// attention-f16-none-128-d128.mlir, three stages (over half an SM's shared memory: one CTA an
// SM, which the maps' global slots by SM need). The producer's K and V copies go through TMA:
// PTX ISA 8.3; a module global of map slots (256 SMs × 2 maps × 3 slots × 128 bytes); each map
// built by the producer's warp 0 without a branch inside the warp (lane 0's fields under a
// predicate: f16's element type code 6, the 128-byte swizzle 3; three dimensions, the third the
// descriptor's head, so that one map serves every head), published by the warp's
// `.sync.aligned` fence and acquired before use; lane 0 expects the block's bytes on the
// stage's `full` barrier and issues one box a 64-column slab; the cp.async copies stay for
// descriptors TMA cannot read, and every producer thread still arrives with
// cp.async.mbarrier.arrive.noinc. ptxas: nothing spills.
// REQUIRES: ptxas
// RUN: tessel-opt %S/attention-f16-none-128-d128.mlir --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --emit=ptx -o - | FileCheck %s
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --no-tma-producer --emit=ptx -o - | FileCheck %s --check-prefix=OFF
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --tma-only --no-drop-tma-fences --emit=ptx -o %t.ptx
// RUN: FileCheck %s --check-prefix=ONLY < %t.ptx
// RUN: grep -c cp.async.cg.shared.global %t.ptx | FileCheck %s --check-prefix=ONLY-COPIES
// RUN: grep -c fence.proxy.async %t.ptx | FileCheck %s --check-prefix=ONLY-FENCES
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --tma-only --emit=ptx -o %t.drop.ptx
// RUN: grep -c fence.proxy.async %t.drop.ptx | FileCheck %s --check-prefix=DROP-FENCES
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --tma-only --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --num-stages=3 --tma-only --no-drop-tma-fences --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS

// CHECK: .version 8.3
// CHECK: .global .align 128 .b8 __tessel_tma_maps_attention[196608];
// The map bookkeeping's registers: the producer 56 (not 40), the consumers 224 (not 232).
// CHECK: setmaxnreg.inc.sync.aligned.u32 224;
// CHECK: setmaxnreg.dec.sync.aligned.u32 56;
// CHECK: setp.eq.u32 p, %r{{[0-9]+}}, 0;
// CHECK-NEXT: @p tensormap.replace.tile.global_address.shared::cta.b1024.b64
// CHECK-NEXT: @p tensormap.replace.tile.rank.shared::cta.b1024.b32 [%r{{[0-9]+}}], 2;
// CHECK: @p tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r{{[0-9]+}}], 2, 1;
// CHECK: @p tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r{{[0-9]+}}], 1, %rd{{[0-9]+}};
// CHECK: @p tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%r{{[0-9]+}}], 6;
// CHECK: @p tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%r{{[0-9]+}}], 3;
// CHECK: bar.warp.sync -1;
// CHECK: tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd{{[0-9]+}}], [%r{{[0-9]+}}], 128;
// CHECK: fence.proxy.tensormap::generic.acquire.gpu [%rd{{[0-9]+}}], 128;
// CHECK: mbarrier.expect_tx.relaxed.cta.shared::cta.b64
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r{{[0-9]+}}], [%rd{{[0-9]+}}, {%r{{[0-9]+}}, %r{{[0-9]+}}, %r{{[0-9]+}}}]
// CHECK: cp.async.bulk.tensor.3d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
// CHECK: cp.async.mbarrier.arrive.noinc.shared.b64
// CHECK-DAG: cp.async.cg.shared.global

// tma-only (the caller guarantees aligned origins and row strides): no check, no cp.async
// copy beside the TMA copies (80 cp.async without it); the consumers' 16 cp.async of Q (8 a
// row block, whole or at the query tail) stay.
// ONLY: cp.async.bulk.tensor.3d
// ONLY-COPIES: {{^}}16{{$}}
// The consumers' proxy fences: after Q's cp.async and after each wait for K and V (6, with
// --no-drop-tma-fences). By default (tilegpu-drop-tma-fences) the consumers read what TMA
// landed without one; the one left is Q's.
// ONLY-FENCES: {{^}}6{{$}}
// DROP-FENCES: {{^}}1{{$}}

// OFF: .version 8.0
// OFF-NOT: cp.async.bulk.tensor
// OFF: cp.async.mbarrier.arrive.noinc.shared.b64

// PTXAS: ptxas sm_90a attention: 168 registers, {{[0-9]+}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
