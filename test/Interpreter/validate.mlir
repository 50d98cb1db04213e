// --validate-pipeline runs the kernel before and after the pipeline and compares the buffers.
// RUN: tessel-run %s --kernel=axpy --grid=3 --arg=rand:40:1 --arg=rand:40:2 --arg=40 --arg=0.5 \
// RUN:   --validate-pipeline='builtin.module(canonicalize,cse)' | FileCheck %s
// CHECK: validate: max abs err 0, max rel err 0 over 80 elements: OK

// Inlining the callee and dropping it keeps the meaning exactly.
// RUN: tessel-run %s --kernel=axpy --grid=3 --arg=rand:40:1 --arg=rand:40:2 --arg=40 --arg=0.5 \
// RUN:   --validate-pipeline='builtin.module(inline,symbol-dce)' | FileCheck %s --check-prefix=INLINE
// INLINE: validate: max abs err 0, max rel err 0 over 80 elements: OK

// A difference is caught: canonicalize folds math.tanh of a constant with the host's float tanhf,
// which is off by one ulp on these inputs from the correctly rounded tanh the interpreter computes.
// Within the default tolerance that is OK; with none it is a MISMATCH and exit code 1.
// RUN: tessel-run %s --kernel=tanh_fold --arg=zeros:4 --validate-pipeline='builtin.module(canonicalize)' \
// RUN:   | FileCheck %s --check-prefix=TANH-OK
// TANH-OK: validate: max abs err {{.*}}e-08, max rel err {{.*}}e-07 over 4 elements: OK
// RUN: not tessel-run %s --kernel=tanh_fold --arg=zeros:4 --validate-pipeline='builtin.module(canonicalize)' \
// RUN:   --rtol=0 --atol=0 | FileCheck %s --check-prefix=TANH-EXACT
// TANH-EXACT: validate: max abs err {{.*}}e-08, max rel err {{.*}}e-07 over 4 elements: MISMATCH
func.func @tanh_fold(%y: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c4 = arith.constant 4 : i32
  %d = tile.make_desc %y, shape [%c4], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %c = arith.constant dense<[0.43624991178512573, 0.41461220383644104, 0.2535432279109955, -0.14164641499519348]> : tensor<4xf32>
  %t = math.tanh %c : tensor<4xf32>
  tile.store %d[%c0], %t : !tile.desc<1, f32>, tensor<4xf32>
  return
}

func.func private @twice(%t: tensor<16xf32>) -> tensor<16xf32> {
  %r = arith.addf %t, %t : tensor<16xf32>
  return %r : tensor<16xf32>
}

// y = a·x + 2y over blocks of 16.
func.func @axpy(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32, %a: f32) {
  %c1 = arith.constant 1 : i32
  %c16 = arith.constant 16 : i32
  %pid = tile.program_id 0 : i32
  %off = arith.muli %pid, %c16 : i32
  %dx = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %dy = tile.make_desc %y, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %tx = tile.load %dx[%off] : !tile.desc<1, f32> -> tensor<16xf32>
  %ty = tile.load %dy[%off] : !tile.desc<1, f32> -> tensor<16xf32>
  %as = tile.splat %a : f32 -> tensor<16xf32>
  %ax = arith.mulf %as, %tx : tensor<16xf32>
  %y2 = func.call @twice(%ty) : (tensor<16xf32>) -> tensor<16xf32>
  %r = arith.addf %ax, %y2 : tensor<16xf32>
  tile.store %dy[%off], %r : !tile.desc<1, f32>, tensor<16xf32>
  return
}
