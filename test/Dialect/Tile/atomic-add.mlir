// tile.atomic_add: parsed and printed; the interpreter adds every program's tile into memory.
// RUN: tessel-opt %s | tessel-opt | FileCheck %s
// RUN: tessel-run %s --kernel=column_sums --grid=3 --arg=zeros:16 --arg=12 --print-args | FileCheck %s --check-prefix=SUMS
// RUN: tessel-run %s --kernel=tally --grid=7 --arg=zeros:1 --print-args | FileCheck %s --check-prefix=COUNT

// CHECK-LABEL: func.func @column_sums
// CHECK: tile.atomic_add %{{.*}}[%{{.*}}], %{{.*}} : !tile.desc<1, f32>, tensor<16xf32>
// Three programs each add the column sums of a 2x16 tile of ones into a descriptor of 12 of the
// buffer's 16 elements: the first 12 sum to 6, the 4 out of bounds are never written.
// SUMS: arg #0 (f32, 16 elements): 6 6 6 6 6 6 6 6 6 6 6 6 0 0 0 0
func.func @column_sums(%out: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %one = arith.constant 1.0 : f32
  %od = tile.make_desc %out, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.splat %one : f32 -> tensor<2x16xf32>
  %s = tile.reduce sum %t axis 0 : tensor<2x16xf32> -> tensor<16xf32>
  tile.atomic_add %od[%c0], %s : !tile.desc<1, f32>, tensor<16xf32>
  return
}

// CHECK-LABEL: func.func @tally
// CHECK: tile.atomic_add %{{.*}}[%{{.*}}], %{{.*}} mask %{{.*}} : !tile.desc<1, i32>, tensor<1xi32>, tensor<1xi1>
// Seven programs, each adds 1 to one i32 counter unless its id is 3 (masked off): 6.
// COUNT: arg #0 (i32, 1 elements): 6
func.func @tally(%n: !tile.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %pid = tile.program_id 0 : i32
  %d = tile.make_desc %n, shape [%c1], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %one = tile.splat %c1 : i32 -> tensor<1xi32>
  %ok = arith.cmpi ne, %pid, %c3 : i32
  %m = tile.splat %ok : i1 -> tensor<1xi1>
  tile.atomic_add %d[%c0], %one mask %m : !tile.desc<1, i32>, tensor<1xi32>, tensor<1xi1>
  return
}
