// tilegpu-async-dots: each wgmma dot issued where it stands, waited for before the first op
// that reads it; groups complete in issue order, so a wait leaves the younger ones in flight.
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared --tilegpu-async-dots | FileCheck %s
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --wgmma-async-dots --emit=ptx -o - | FileCheck %s --check-prefix=PTX
// On mma.sync programs it does nothing.
// RUN: tessel-opt %s --tilegpu-assign-layouts --tilegpu-allocate-shared --tilegpu-async-dots | FileCheck %s --check-prefix=MMA
// eager: each dot waited for right after it (pending 0), the form convert-tile-to-mma lowers
// every wgmma dot in when nothing scheduled them; without --wgmma-async-dots the PTX has a
// wait after each commit.
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared --tilegpu-async-dots="eager=true" | FileCheck %s --check-prefix=EAGER
// RUN: tesselc %s --chip=sm_90a --codegen=wgmma --emit=ptx -o - | FileCheck %s --check-prefix=SYNC
// tilegpu-mma-dots, the mma.sync counterpart: each tile.dot becomes a tilegpu.mma in place (and
// does nothing on wgmma programs).
// RUN: tessel-opt %s --tilegpu-assign-layouts --tilegpu-allocate-shared --tilegpu-mma-dots | FileCheck %s --check-prefix=MMADOTS
// RUN: tessel-opt %s --tilegpu-assign-layouts="wgmma=true" --tilegpu-allocate-shared --tilegpu-mma-dots | FileCheck %s --check-prefix=MMA

// CHECK-LABEL: func.func @two_dots
// CHECK: scf.for
// CHECK: %[[S1:.*]] = tilegpu.wgmma %{{.*}} {transpose_b}
// CHECK-NEXT: %[[S2:.*]] = tilegpu.wgmma %{{.*}} {transpose_b}
// S1 is read first: S2 stays in flight over the add.
// CHECK-NEXT: %[[W1:.*]] = tilegpu.wgmma_wait %[[S1]] {pending = 1 : i32}
// CHECK-NEXT: %[[X:.*]] = arith.addf %[[W1]]
// CHECK-NEXT: %[[W2:.*]] = tilegpu.wgmma_wait %[[S2]] {pending = 0 : i32}
// CHECK-NEXT: arith.mulf %[[X]], %[[W2]]
// CHECK-NOT: tile.dot
// Lowered: two commit groups, then waits for all but one and for none.
// PTX: wgmma.commit_group.sync.aligned;
// PTX: wgmma.commit_group.sync.aligned;
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.wait_group.sync.aligned 1;
// PTX-NOT: wgmma.mma_async
// PTX: wgmma.wait_group.sync.aligned 0;
// EAGER-LABEL: func.func @two_dots
// EAGER: %[[S1:.*]] = tilegpu.wgmma %{{.*}} {transpose_b}
// EAGER-NEXT: %[[W1:.*]] = tilegpu.wgmma_wait %[[S1]] {pending = 0 : i32}
// EAGER-NEXT: %[[S2:.*]] = tilegpu.wgmma %{{.*}} {transpose_b}
// EAGER-NEXT: %[[W2:.*]] = tilegpu.wgmma_wait %[[S2]] {pending = 0 : i32}
// EAGER-NEXT: arith.addf %[[W1]]
// EAGER-NOT: tile.dot
// SYNC: wgmma.commit_group.sync.aligned;
// SYNC-NOT: wgmma.mma_async
// SYNC: wgmma.wait_group.sync.aligned 0;
// SYNC: wgmma.commit_group.sync.aligned;
// SYNC-NOT: wgmma.mma_async
// SYNC: wgmma.wait_group.sync.aligned 0;
// SYNC-NOT: wgmma.wait_group.sync.aligned 1;
// MMADOTS-LABEL: func.func @two_dots
// MMADOTS: %[[S1:.*]] = tilegpu.mma %{{.*}}, %{{.*}}, %{{.*}} :
// MMADOTS-NEXT: %[[S2:.*]] = tilegpu.mma
// MMADOTS-NEXT: arith.addf %[[S1]]
// MMADOTS-NOT: tile.dot
// MMA-LABEL: func.func @two_dots
// MMA-NOT: tilegpu.wgmma
// MMA: tile.dot
func.func @two_dots(%kp: !tile.ptr<f16>, %vp: !tile.ptr<f16>, %qp: !tile.ptr<f16>,
                    %op: !tile.ptr<f32>, %nq: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %one = arith.constant dense<1.000000e+00> : tensor<64x64xf32>
  %kd = tile.make_desc %kp[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %vd = tile.make_desc %vp[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %qd = tile.make_desc %qp[%c0], shape[%nq, %c64], strides[%c64, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %od = tile.make_desc %op[%c0], shape[%c64, %c64], strides[%c64, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %k = tile.load %kd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %v = tile.load %vd[%c0, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %acc = scf.for %i = %c0 to %nq step %c64 iter_args(%a = %zero) -> (tensor<64x64xf32>) : i32 {
    %q = tile.load %qd[%i, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    %qt = tile.trans %q : tensor<64x64xf16> -> tensor<64x64xf16>
    %s1 = tile.dot %k, %qt, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %s2 = tile.dot %v, %qt, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    %x = arith.addf %s1, %one : tensor<64x64xf32>
    %y = arith.mulf %x, %s2 : tensor<64x64xf32>
    %a2 = arith.addf %a, %y : tensor<64x64xf32>
    scf.yield %a2 : tensor<64x64xf32>
  }
  tile.store %od[%c0, %c0], %acc : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}
