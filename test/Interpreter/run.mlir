// tessel-run on small kernels; --print-args shows the buffers after the run.
// RUN: tessel-run %s --kernel=grid_ids --grid=2,3 --arg=zeros:6 --print-args | FileCheck %s --check-prefix=GRID
// RUN: tessel-run %s --kernel=scale_bf16 --arg=rand:6:7 --arg=zeros:6 --arg=3 --print-args | FileCheck %s --check-prefix=BF16
// RUN: tessel-run %s --kernel=loop_if --arg=zeros:5 --arg=5 --print-args | FileCheck %s --check-prefix=LOOP
// RUN: tessel-run %s --kernel=shapes --arg=zeros:6 --print-args | FileCheck %s --check-prefix=SHAPES
// RUN: tessel-run %s --kernel=scans --arg=zeros:8 --arg=zeros:8 --print-args | FileCheck %s --check-prefix=SCANS

// Each program writes pid_y * 10 + pid_x at pid_y * 2 + pid_x.
// GRID: arg #0 (i32, 6 elements): 0 1 10 11 20 21
func.func @grid_ids(%out: !tile.ptr<i32>) {
  %c1 = arith.constant 1 : i32
  %c6 = arith.constant 6 : i32
  %c10 = arith.constant 10 : i32
  %x = tile.program_id 0 : i32
  %y = tile.program_id 1 : i32
  %nx = tile.num_programs 0 : i32
  %row = arith.muli %y, %nx : i32
  %at = arith.addi %row, %x : i32
  %ty = arith.muli %y, %c10 : i32
  %v = arith.addi %ty, %x : i32
  %d = tile.make_desc %out, shape [%c6], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %t = tile.splat %v : i32 -> tensor<1xi32>
  tile.store %d[%at], %t : !tile.desc<1, i32>, tensor<1xi32>
  return
}

// bf16 in, bf16 out: y = x * 3 rounded to bf16; rand data is uniform in [-1, 1) rounded to bf16.
// BF16: arg #0 (bf16, 6 elements): -0.142578 0.4375 -0.742188 -0.109863 -0.132812 0.9375
// BF16: arg #1 (bf16, 6 elements): -0.427734 1.3125 -2.21875 -0.330078 -0.398438 2.8125
func.func @scale_bf16(%x: !tile.ptr<bf16>, %y: !tile.ptr<bf16>, %s: f32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c6 = arith.constant 6 : i32
  %dx = tile.make_desc %x, shape [%c6], strides [%c1] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  %dy = tile.make_desc %y, shape [%c6], strides [%c1] : !tile.ptr<bf16> -> !tile.desc<1, bf16>
  %t = tile.load %dx[%c0] : !tile.desc<1, bf16> -> tensor<8xbf16>
  %sb = arith.truncf %s : f32 to bf16
  %st = tile.splat %sb : bf16 -> tensor<8xbf16>
  %r = arith.mulf %t, %st : tensor<8xbf16>
  tile.store %dy[%c0], %r : !tile.desc<1, bf16>, tensor<8xbf16>
  return
}

// out[i] = sum_{k < i} k, odd i negated, through scf.for with iter_args and scf.if with results.
// LOOP: arg #0 (i32, 5 elements): 0 0 1 -3 6
func.func @loop_if(%out: !tile.ptr<i32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %out, shape [%n], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %s = scf.for %k = %c0 to %i step %c1 iter_args(%acc = %c0) -> (i32) : i32 {
      %a = arith.addi %acc, %k : i32
      scf.yield %a : i32
    }
    %c2 = arith.constant 2 : i32
    %odd = arith.remsi %i, %c2 : i32
    %isodd = arith.cmpi eq, %odd, %c1 : i32
    %v = scf.if %isodd -> (i32) {
      %neg = arith.subi %c0, %s : i32
      scf.yield %neg : i32
    } else {
      scf.yield %s : i32
    }
    %t = tile.splat %v : i32 -> tensor<1xi32>
    tile.store %d[%i], %t : !tile.desc<1, i32>, tensor<1xi32>
  }
  return
}

// expand_dims, broadcast, trans, reduce and a non-splat constant.
// [[1,2,3],[4,5,6]] transposed is [[1,4],[2,5],[3,6]], whose row sums are 5 7 9; the row maxima
// 3 6 broadcast to 3x2 land in a 1x3 view at offset 3, which keeps only the first row.
// SHAPES: arg #0 (f32, 6 elements): 5 7 9 3 6 0
func.func @shapes(%out: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %c6 = arith.constant 6 : i32
  %m = arith.constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %t = tile.trans %m : tensor<2x3xf32> -> tensor<3x2xf32>
  %s = tile.reduce sum %t axis 1 : tensor<3x2xf32> -> tensor<3xf32>
  %mx = tile.reduce max %m axis 1 : tensor<2x3xf32> -> tensor<2xf32>
  %e = tile.expand_dims %mx axis 0 : tensor<2xf32> -> tensor<1x2xf32>
  %b = tile.broadcast %e : tensor<1x2xf32> -> tensor<3x2xf32>
  %d = tile.make_desc %out, shape [%c6], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %d2 = tile.make_desc %out[%c3], shape [%c1, %c3], strides [%c3, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  tile.store %d[%c0], %s : !tile.desc<1, f32>, tensor<3xf32>
  tile.store %d2[%c0, %c0], %b : !tile.desc<2, f32>, tensor<3x2xf32>
  return
}

// Prefix sums of 0..7, and the running maximum from the end of 3 - i·(i - 5) (int32).
// SCANS: arg #0 (i32, 8 elements): 0 1 3 6 10 15 21 28
// SCANS: arg #1 (i32, 8 elements): 9 9 9 9 7 3 -3 -11
func.func @scans(%a: !tile.ptr<i32>, %b: !tile.ptr<i32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %da = tile.make_desc %a, shape [%c8], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %db = tile.make_desc %b, shape [%c8], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %i = tile.iota : tensor<8xi32>
  %s = tile.scan sum %i axis 0 : tensor<8xi32>
  tile.store %da[%c0], %s : !tile.desc<1, i32>, tensor<8xi32>
  %three = arith.constant dense<3> : tensor<8xi32>
  %five = arith.constant dense<5> : tensor<8xi32>
  %d = arith.subi %i, %five : tensor<8xi32>
  %p = arith.muli %i, %d : tensor<8xi32>
  %v = arith.subi %three, %p : tensor<8xi32>
  %m = tile.scan max %v axis 0 reverse : tensor<8xi32>
  tile.store %db[%c0], %m : !tile.desc<1, i32>, tensor<8xi32>
  return
}
