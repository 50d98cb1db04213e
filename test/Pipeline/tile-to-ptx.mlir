// The whole pipeline, tile IR to PTX, in-process (no ptxas needed for PTX): the reference
// lowering (codegen=reference), and by default (auto) the row-blocked one, which keeps the
// tiles in registers: vector loads and stores, no barrier (BLOCKED).
// RUN: tessel-opt %s --tile-to-nvvm="chip=sm_80 format=llvm codegen=reference" | FileCheck %s --check-prefix=LLVM
// RUN: tessel-opt %s --tile-to-nvvm="chip=sm_80 codegen=reference" | FileCheck %s --check-prefix=SM80
// RUN: tessel-opt %s --tile-to-nvvm="chip=sm_90a codegen=reference" | FileCheck %s --check-prefix=SM90
// RUN: tesselc %s --chip=sm_90a --codegen=reference --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// RUN: tesselc %s --chip=sm_90a --emit=ptx -o - 2>/dev/null | FileCheck %s --check-prefix=BLOCKED

// BLOCKED-LABEL: .visible .entry scaled_exp(
// BLOCKED: .maxntid 128, 1, 1
// BLOCKED: ld.global.b32
// BLOCKED: ex2.approx
// BLOCKED-NOT: bar.sync
// BLOCKED: st.global.b32
// BLOCKED-NOT: bar.sync

// LLVM: gpu.module @tessel_kernels [#nvvm.target<O = 3, chip = "sm_80", features = "+ptx80">]
// LLVM-LABEL: llvm.func @scaled_exp
// LLVM-SAME: nvvm.kernel
// LLVM: llvm.call_intrinsic "llvm.nvvm.ex2.approx.f32"
// LLVM: nvvm.barrier0
// LLVM-NOT: __nv_

// SM80: gpu.binary @tessel_kernels
// SM80-SAME: .target sm_80
// SM80-SAME: .visible .entry scaled_exp(

// SM90: gpu.binary @tessel_kernels
// SM90-SAME: .target sm_90a
// SM90-SAME: .visible .entry scaled_exp(
// SM90-SAME: ex2.approx

// PTX: .target sm_90a
// PTX-LABEL: .visible .entry scaled_exp(
// PTX: .maxntid 128, 1, 1
// PTX: ex2.approx.f32
// PTX: bar.sync 0
// PTX-NOT: __nv_
func.func @scaled_exp(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32, %scale: f32) {
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %pid = tile.program_id 0 : i32
  %off = arith.muli %pid, %c64 : i32
  %xd = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %yd = tile.make_desc %y, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %xd[%off] : !tile.desc<1, f32> -> tensor<64xf32>
  %s = tile.splat %scale : f32 -> tensor<64xf32>
  %m = arith.mulf %t, %s : tensor<64xf32>
  %e = math.exp %m : tensor<64xf32>
  tile.store %yd[%off], %e : !tile.desc<1, f32>, tensor<64xf32>
  return
}
