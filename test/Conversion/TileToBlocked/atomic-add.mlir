// tile.atomic_add on convert-tile-to-blocked: a register vector is added element by element
// (red.global.add.f32, predicated on the element's bounds), by the one thread that owns each
// element, as its stores are (test/Conversion/TileToMMA/atomic-add.mlir: the fast paths).
// RUN: tessel-opt %s --convert-tile-to-blocked | FileCheck %s
// REQUIRES: ptxas
// RUN: tesselc %s --chip=sm_90a --codegen=auto --emit=ptx -o - | FileCheck %s --check-prefix=PTX

// CHECK-LABEL: gpu.func @column_sums
// CHECK: tessel.codegen = "blocked"
// CHECK: llvm.inline_asm has_side_effects {{.*}}"@$1 red.global.add.f32 [$2], $0;", "f,b,l"
// CHECK-NOT: st.global
// PTX-LABEL: .entry column_sums(
// PTX: red.global.add.f32
// PTX-NOT: st.global
// PTX: ret;

// Column sums of a 32x64 block added into one row of 64 floats.
func.func @column_sums(%x: !tile.ptr<f32>, %out: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c32 = arith.constant 32 : i32
  %c64 = arith.constant 64 : i32
  %pid = tile.program_id 0 : i32
  %r0 = arith.muli %pid, %c32 : i32
  %xd = tile.make_desc %x, shape [%n, %c64], strides [%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %od = tile.make_desc %out, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %xd[%r0, %c0] : !tile.desc<2, f32> -> tensor<32x64xf32>
  %s = tile.reduce sum %t axis 0 : tensor<32x64xf32> -> tensor<64xf32>
  tile.atomic_add %od[%c0], %s : !tile.desc<1, f32>, tensor<64xf32>
  return
}
