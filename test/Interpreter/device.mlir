// tessel-run's --pipeline and --device options.

// --pipeline runs passes before the kernel; with it or without, every row of 12 equal scores
// gives 1/12 everywhere (and nothing outside the row is written).
// RUN: tessel-run %s --kernel=scaled_softmax --grid=2 --arg=zeros:24 --arg=zeros:26 --arg=12 \
// RUN:   --print-args | FileCheck %s --check-prefix=PLAIN
// RUN: tessel-run %s --kernel=scaled_softmax --grid=2 --arg=zeros:24 --arg=zeros:26 --arg=12 \
// RUN:   --pipeline='builtin.module(tile-optimize)' --print-args | FileCheck %s --check-prefix=PLAIN
// PLAIN: arg #1 (f32, 26 elements): 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0.0833333 0 0{{$}}

// RUN: not tessel-run %s --kernel=scaled_softmax --arg=zeros:24 --arg=zeros:24 --arg=12 \
// RUN:   --device=tpu 2>&1 | FileCheck %s --check-prefix=BADDEV
// BADDEV: tessel-run: error: --device must be cpu, gpu or both, not 'tpu'

// RUN: not tessel-run %s --kernel=scaled_softmax --arg=zeros:24 --arg=zeros:24 --arg=12 \
// RUN:   --device=gpu --validate-pipeline='builtin.module(canonicalize)' 2>&1 \
// RUN:   | FileCheck %s --check-prefix=GPUVAL
// GPUVAL: --validate-pipeline runs on the interpreter: use it with --device=cpu

// RUN: not tessel-run %s --kernel=scaled_softmax --arg=zeros:24 --arg=zeros:24 --arg=12 \
// RUN:   --pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=BADPIPE
// BADPIPE: tessel-run: error: invalid --pipeline 'builtin.module(no-such-pass)'

func.func @scaled_softmax(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c12 = arith.constant 12 : i32
  %pid = tile.program_id 0 : i32
  %off = arith.muli %pid, %c12 : i32
  %dx = tile.make_desc %x[%off], shape [%c1, %n], strides [%n, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dy = tile.make_desc %y[%off], shape [%c1, %n], strides [%n, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %t = tile.load %dx[%c0, %c0] : !tile.desc<2, f32> -> tensor<1x16xf32>
  %half = arith.constant dense<0.5> : tensor<1x16xf32>
  %s = arith.mulf %t, %half : tensor<1x16xf32>
  %i = tile.iota : tensor<16xi32>
  %i2 = tile.expand_dims %i axis 0 : tensor<16xi32> -> tensor<1x16xi32>
  %nt = tile.splat %n : i32 -> tensor<1x16xi32>
  %in = arith.cmpi slt, %i2, %nt : tensor<1x16xi32>
  %ninf = arith.constant dense<0xFF800000> : tensor<1x16xf32>
  %m = arith.select %in, %s, %ninf : tensor<1x16xi1>, tensor<1x16xf32>
  %p, %l = tile.softmax %m axis 1 : tensor<1x16xf32> -> tensor<1xf32>
  tile.store %dy[%c0, %c0], %p : !tile.desc<2, f32>, tensor<1x16xf32>
  return
}
