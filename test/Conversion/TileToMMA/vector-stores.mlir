// convert-tile-to-mma vector-stores (GpuOptions(vector_stores), on by default): attention's
// 16-bit output tile is stored 16 bytes a thread. Per row and group of four 8-column slabs,
// the quad's threads exchange their 32-bit column pairs in two butterfly stages (shuffles
// across lanes 1 and 2 apart: a 4x4 transpose), then each stores its eight consecutive
// columns with one st.global.v4; a block whose first column does not start a 16-byte chunk
// takes the pairs (the else branch). With --no-vector-stores only pairs are stored. On the wgmma
// path (d128, 128x128: 2 rows x 4 groups = 8 vector stores a thread, 32 more shuffles) and on
// mma.sync (d64 64x64, sm_80); ptxas spills nothing.
// REQUIRES: ptxas
// RUN: tessel-opt %S/attention-f16-none-128-d128.mlir --tile-optimize -o %t.mlir
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o %t.ptx
// RUN: FileCheck %s --input-file=%t.ptx
// RUN: grep -c 'st.global.v4.b32' %t.ptx | FileCheck %s --check-prefix=EIGHT
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --no-vector-stores --emit=ptx -o - | FileCheck %s --check-prefix=OFF
// RUN: tesselc %t.mlir --chip=sm_90a --codegen=wgmma --emit=cubin -o %t.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS
// RUN: tessel-opt %S/attention-f16-causal-64.mlir --tile-optimize -o %t64.mlir
// RUN: tesselc %t64.mlir --chip=sm_80 --codegen=mma --emit=ptx -o - | FileCheck %s --check-prefix=MMA
// RUN: tesselc %t64.mlir --chip=sm_80 --codegen=mma --emit=cubin -o %t64.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=PTXAS

// The exchange, then the store of the thread's eight columns.
// CHECK: shfl.sync.bfly.b32 {{.*}}, 1, 31, -1;
// CHECK: shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// CHECK: st.global.v4.b32 [{{.*}}], {{{.*}}, {{.*}}, {{.*}}, {{.*}}};
// The fallback keeps the pairs.
// CHECK: st.global.b32
// EIGHT: 8

// OFF-NOT: st.global.v4.b32
// OFF: st.global.b32

// MMA: shfl.sync.bfly.b32 {{.*}}, 2, 31, -1;
// MMA: st.global.v4.b32

// PTXAS: 0 bytes spill stores, 0 bytes spill loads
