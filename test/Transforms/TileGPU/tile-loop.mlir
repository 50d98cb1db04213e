// A persistent program: one scf.for in the function body walks the output tiles (tile =
// pid, pid + P, ...) and holds everything computed per tile. tilegpu-assign-layouts marks it
// `tilegpu.tile_loop`; tilegpu-allocate-shared then treats its body as it treats the function
// body of a program without one: the block it loads once a tile (Q) has a buffer of one stage
// (stage 0, not a stage of the tile loop's iterations; here the ring's last, which it reuses)
// and its copy waits at a barrier for the previous tile's reads; only the inner loop's blocks
// go through the ring.
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" | FileCheck %s --check-prefix=MARK
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared \
// RUN:   | FileCheck %s

// MARK-LABEL: func.func @persistent
// MARK: scf.for
// MARK: scf.for
// MARK: } {tilegpu.tile_loop}

// CHECK-LABEL: func.func @persistent
// CHECK-DAG: %[[KS:.*]] = tilegpu.alloc {offset = 0 : i64, stride = 8192 : i64} : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
// CHECK-DAG: %[[QS:.*]] = tilegpu.alloc {offset = 8192 : i64} : !tilegpu.smem<64x64xf16, stages = 1, swizzle = 128>
// CHECK-DAG: %[[C0:.*]] = arith.constant 0 : i32
// CHECK: scf.for %[[T:.*]] = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK: gpu.barrier
// CHECK-NEXT: %[[QT:.*]] = tilegpu.async_copy %{{.*}} into %[[QS]][%[[C0]]]
// CHECK-NEXT: %[[QG:.*]] = tilegpu.async_commit %[[QT]]
// CHECK-NEXT: tilegpu.async_wait %[[QG]] {pending = 0 : i32}
// CHECK: scf.for %[[J:.*]] = %[[LB:.*]] to
// CHECK: %[[D:.*]] = arith.subi %[[J]], %[[LB]] : i32
// CHECK: tilegpu.async_copy %{{.*}} into %[[KS]][%{{.*}}]
// CHECK: } {tilegpu.tile_loop}
func.func @persistent(%q: !tile.ptr<f16>, %k: !tile.ptr<f16>, %o: !tile.ptr<f32>, %nq: i32,
                      %nk: i32, %tiles: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %pid = tile.program_id 0 : i32
  %np = tile.num_programs 0 : i32
  %qd = tile.make_desc %q[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %kd = tile.make_desc %k[%c0], shape[%nk, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %o[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  scf.for %t = %pid to %tiles step %np : i32 {
    %row0 = arith.muli %t, %c64 : i32
    %qb = tile.load %qd[%row0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %acc = scf.for %j = %c0 to %nk step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
      %kb = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
      %kt = tile.trans %kb : tensor<64x64xf16> -> tensor<64x64xf16>
      %s = tile.dot %qb, %kt, %a : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
      scf.yield %s : tensor<64x64xf32>
    }
    tile.store %od[%row0, %c0], %acc : !tile.desc<2, f32>, tensor<64x64xf32>
  }
  return
}
