// Head dim 256 on both fast paths (issue 16): the naive kernel of
// test/python/attention_kernels.py with 64x64 blocks (f16 and bf16, no mask and causal), after
// --tile-optimize, lowers with wgmma on sm_90a (one warpgroup; Q, 64 registers a thread if
// resident, read by descriptor from its own slot: 32 KiB beside two stages of K and V) and with
// mma.sync on sm_80 (fits its 163 KB), and ptxas spills nothing. 128x64 with wgmma: two
// warpgroups, each reading its 64 rows of Q from shared memory. 64x128 needs 288 KiB.
// REQUIRES: ptxas
// RUN: rm -rf %t && mkdir -p %t
// RUN: for t in f16 bf16; do for m in none causal; do \
// RUN:   python3 -c "import sys; sys.path.insert(0, '%S/../../python'); from attention_kernels import naive_attention_kernel as k; print(k('$t', '$m', 64, 64, 256))" > %t/k.mlir && \
// RUN:   tessel-opt %t/k.mlir --tile-optimize -o %t/$t-$m.mlir || exit 1; \
// RUN: done; done
// RUN: for f in %t/*-*.mlir; do for c in sm_90a:wgmma sm_80:mma; do \
// RUN:   echo "KERNEL $(basename $f .mlir) $c"; \
// RUN:   tesselc $f --chip=${c%%:*} --codegen=${c##*:} --emit=cubin -o %t/out.cubin --ptxas-report 2>&1 | grep "^ptxas\|^kernel"; \
// RUN: done; done | FileCheck %s
// RUN: python3 -c "import sys; sys.path.insert(0, '%S/../../python'); from attention_kernels import naive_attention_kernel as k; print(k('f16', 'causal', 128, 64, 256))" > %t/tall.mlir
// RUN: tesselc %t/tall.mlir --chip=sm_90a --codegen=wgmma --no-warp-specialize --emit=cubin -o %t/tall.cubin --ptxas-report 2>&1 | FileCheck %s --check-prefix=TALL
// RUN: tesselc %t/tall.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o %t/tall-ws.ptx --ptxas-report 2>&1 | FileCheck %s --check-prefix=TALLWS
// RUN: FileCheck %s --check-prefix=TALLPTX --input-file=%t/tall-ws.ptx
// RUN: python3 -c "import sys; sys.path.insert(0, '%S/../../python'); from attention_kernels import naive_attention_kernel as k; print(k('f16', 'none', 64, 128, 256))" > %t/wide.mlir
// RUN: not tesselc %t/wide.mlir --chip=sm_90a --codegen=wgmma --emit=ptx -o %t/wide.ptx 2>&1 | FileCheck %s --check-prefix=WIDE

// CHECK-LABEL: KERNEL bf16-causal sm_90a:wgmma
// CHECK-NEXT: ptxas sm_90a attention: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// CHECK-NEXT: kernel attention: block 128x1x1, 163840 bytes dynamic smem
// CHECK-LABEL: KERNEL bf16-causal sm_80:mma
// CHECK-NEXT: ptxas sm_80 attention: {{[0-9]+}} registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// CHECK-NEXT: kernel attention: block 128x1x1, 163840 bytes dynamic smem
// CHECK-LABEL: KERNEL bf16-none sm_90a:wgmma
// CHECK-NEXT: , 0 bytes spill stores, 0 bytes spill loads
// CHECK-LABEL: KERNEL bf16-none sm_80:mma
// CHECK-NEXT: , 0 bytes spill stores, 0 bytes spill loads
// CHECK-LABEL: KERNEL f16-causal sm_90a:wgmma
// CHECK-NEXT: , 0 bytes spill stores, 0 bytes spill loads
// CHECK-LABEL: KERNEL f16-causal sm_80:mma
// CHECK-NEXT: , 0 bytes spill stores, 0 bytes spill loads
// CHECK-LABEL: KERNEL f16-none sm_90a:wgmma
// CHECK-NEXT: , 0 bytes spill stores, 0 bytes spill loads
// CHECK-LABEL: KERNEL f16-none sm_80:mma
// CHECK-NEXT: , 0 bytes spill stores, 0 bytes spill loads

// TALL: 0 bytes spill stores, 0 bytes spill loads
// TALL: kernel attention: block 256x1x1, 196608 bytes dynamic smem
// By default its K/V come from a producer warpgroup (tilegpu-warp-specialize): Q gets bytes of
// its own beside the ring, then the mbarriers; 168 registers at launch, 232 for a consumer.
// TALLWS: ptxas sm_90a attention: 168 registers, {{.*}}, 0 bytes spill stores, 0 bytes spill loads
// TALLWS: kernel attention: block 384x1x1, 196672 bytes dynamic smem
// With the TMA producer the overlapped consumers spilled (its per-tile record): the overlap
// would leave them 24 registers, fewer than TMA's 32, so convert-tile-to-mma leaves TMA out
// and keeps the overlap (before, compileModule's spill fallback dropped TMA after a compile).
// TALLPTX-NOT: cp.async.bulk.tensor
// TALLPTX: wgmma.wait_group.sync.aligned 1

// WIDE: needs 294912 bytes of shared memory, more than the 232448 a block may have
