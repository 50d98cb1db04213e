// Head dim 192 on wgmma as it is (attention.NATIVE_HEAD_DIMS): three 64-column slabs. A row of
// 24 16-byte chunks does not divide the copying threads, so each block is copied a slab at a
// time (8 chunks a row: issueBlockChunks); wgmma reads Q·Kᵀ as m64n64 over 12 k-steps and P·V as
// m64n192. The naive kernel of test/python/attention_kernels.py, causal, 128x64, after
// --tile-optimize: warp-specialized (TMA K/V with the cp.async fallback) and not, 0 spill;
// 128 rows x 24 chunks over 256 threads is 12 copies a thread for Q, in either form. sm_80's
// mma.sync keeps 64/128/256 (a located refusal).
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: python3 -c "import sys; sys.path.insert(0, '%S/../../python'); from attention_kernels import naive_attention_kernel as k; print(k('f16', 'causal', 128, 64, 192))" > %t/k.mlir
// RUN: tessel-opt %t/k.mlir --tile-optimize -o %t/opt.mlir
// RUN: tesselc %t/opt.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o %t/ws.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=WS
// RUN: FileCheck %s --check-prefix=WSPTX --input-file=%t/ws.ptx
// RUN: tesselc %t/opt.mlir --chip=sm_90a --codegen=wgmma --no-warp-specialize --emit=ptx -o %t/plain.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=PLAIN
// RUN: not tesselc %t/opt.mlir --chip=sm_80 --codegen=mma --emit=ptx -o %t/m.ptx 2>&1 | FileCheck %s --check-prefix=SM80

// WS: ptxas sm_90a attention: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// WS-NEXT: kernel attention: block 384x1x1, 148224 bytes dynamic smem
// WSPTX-DAG: wgmma.mma_async.sync.aligned.m64n192k16.f32.f16.f16
// WSPTX-DAG: wgmma.mma_async.sync.aligned.m64n64k16.f32.f16.f16
// WSPTX-DAG: cp.async.bulk.tensor.3d
// WSPTX-NOT: m64n256k16

// PLAIN: ptxas sm_90a attention: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// PLAIN-NEXT: kernel attention: block 256x1x1, 147456 bytes dynamic smem

// SM80: error: 'tile.load' op loads a block of 192 columns: convert-tile-to-mma handles head dims 64, 128 and 256 (16-bit operands)
