// The bundled examples go all the way to cubins through ptxas, for both chips, and ptxas' report
// is parsed (registers, shared memory, spills).
// REQUIRES: ptxas
// RUN: tesselc %S/../../examples/softmax_rows.mlir --chip=sm_80 --emit=cubin -o %t.sm80.cubin --ptxas-report | FileCheck %s --check-prefix=SM80
// RUN: tesselc %S/../../examples/softmax_rows.mlir --chip=sm_90a --emit=cubin -o %t.sm90.cubin --ptxas-report | FileCheck %s --check-prefix=SM90
// RUN: od -A n -t x1 -N 4 %t.sm90.cubin | FileCheck %s --check-prefix=ELF
// RUN: tesselc %S/../../examples/matmul.mlir --chip=sm_90a --emit=cubin -o %t.mm.cubin --ptxas-report | FileCheck %s --check-prefix=MM
// RUN: tessel-opt %S/../../examples/matmul.mlir --tile-to-nvvm="chip=sm_80 format=bin" | FileCheck %s --check-prefix=BIN

// SM80: ptxas sm_80 softmax_rows: {{[0-9]+}} registers, {{[1-9][0-9]*}} bytes smem, 0 bytes stack, 0 bytes spill stores, 0 bytes spill loads
// SM90: ptxas sm_90a softmax_rows: {{[0-9]+}} registers, {{[1-9][0-9]*}} bytes smem
// ELF: 7f 45 4c 46
// MM: ptxas sm_90a matmul: {{[0-9]+}} registers
// BIN: gpu.binary @tessel_kernels [#gpu.object<#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">
// BIN-SAME: bin = "\7FELF
