// convert-tile-to-gpu packs the tile buffers into one shared-memory arena by their live
// intervals: buffers whose lifetimes are disjoint share an offset, overlapping ones never do, and
// a value that a loop reads but that is defined before it stays alive for the whole loop.
// Every buffer here is 64 x f32 = 256 bytes.
// RUN: tessel-opt %s --split-input-file --convert-tile-to-gpu | FileCheck %s

// %a dies when %b is made, so %c (made from %b) takes %a's bytes: 512 bytes, not 768.
// CHECK-LABEL: gpu.func @disjoint
// CHECK-SAME: workgroup(%[[ARENA:.*]] : memref<512xi8, #gpu.address_space<workgroup>> {llvm.align = 16 : i64})
// CHECK-SAME: tessel.shared_bytes = 512
// CHECK-DAG: %[[O0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[O256:.*]] = arith.constant 256 : index
// CHECK: %[[A:.*]] = memref.view %[[ARENA]][%[[O0]]][] : memref<512xi8, #gpu.address_space<workgroup>> to memref<64xf32, #gpu.address_space<workgroup>>
// CHECK: %[[B:.*]] = memref.view %[[ARENA]][%[[O256]]][]
// CHECK: %[[C:.*]] = memref.view %[[ARENA]][%[[O0]]][]
// CHECK: memref.store %{{.*}}, %[[A]]
// CHECK: memref.load %[[A]]
// CHECK: memref.store %{{.*}}, %[[B]]
// CHECK: gpu.barrier
// CHECK: memref.load %[[B]]
// CHECK: memref.store %{{.*}}, %[[C]]
func.func @disjoint(%x: f32, %p: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %p, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %a = tile.splat %x : f32 -> tensor<64xf32>
  %b = arith.addf %a, %a : tensor<64xf32>
  %c = arith.mulf %b, %b : tensor<64xf32>
  tile.store %d[%c0], %c : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

// %a and %b are both alive when %c is made from them: three offsets.
// CHECK-LABEL: gpu.func @overlapping
// CHECK-SAME: tessel.shared_bytes = 768
// CHECK-DAG: %[[O0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[O256:.*]] = arith.constant 256 : index
// CHECK-DAG: %[[O512:.*]] = arith.constant 512 : index
// CHECK: memref.view %{{.*}}[%[[O0]]][]
// CHECK: memref.view %{{.*}}[%[[O256]]][]
// CHECK: memref.view %{{.*}}[%[[O512]]][]
func.func @overlapping(%x: f32, %y: f32, %p: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %p, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %a = tile.splat %x : f32 -> tensor<64xf32>
  %b = tile.splat %y : f32 -> tensor<64xf32>
  %c = arith.addf %a, %b : tensor<64xf32>
  tile.store %d[%c0], %c : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

// %q is defined before the loop and last read in the middle of its body: the next iteration
// reads it again, so it lives across the whole loop and %u may not take its bytes (in program
// order %q is dead when %u is made).
// CHECK-LABEL: gpu.func @outside_loop
// CHECK-SAME: tessel.shared_bytes = 768
// CHECK-DAG: %[[O0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[O256:.*]] = arith.constant 256 : index
// CHECK-DAG: %[[O512:.*]] = arith.constant 512 : index
// CHECK: %[[Q:.*]] = memref.view %{{.*}}[%[[O0]]][]
// CHECK: %[[T:.*]] = memref.view %{{.*}}[%[[O256]]][]
// CHECK: %[[U:.*]] = memref.view %{{.*}}[%[[O512]]][]
// CHECK: memref.store %{{.*}}, %[[Q]]
// CHECK: scf.for %{{.*}} = %{{.*}} to %{{.*}} step %{{.*}} : i32 {
// CHECK: memref.load %[[Q]]
// CHECK: memref.store %{{.*}}, %[[T]]
// CHECK: memref.store %{{.*}}, %[[U]]
func.func @outside_loop(%x: f32, %p: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %p, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %q = tile.splat %x : f32 -> tensor<64xf32>
  scf.for %i = %c0 to %n step %c1 : i32 {
    %t = arith.addf %q, %q : tensor<64xf32>
    %u = arith.mulf %t, %t : tensor<64xf32>
    tile.store %d[%i], %u : !tile.desc<1, f32>, tensor<64xf32>
  }
  return
}

// -----

// The loop-carried buffer (%acc) lives from the copy-in to the read after the loop; the body's
// temporaries reuse the bytes of the initial value, which dies at the copy-in, but never the
// carried buffer's.
// CHECK-LABEL: gpu.func @carried
// CHECK-SAME: tessel.shared_bytes = 768
// CHECK-DAG: %[[O0:.*]] = arith.constant 0 : index
// CHECK-DAG: %[[O256:.*]] = arith.constant 256 : index
// CHECK-DAG: %[[O512:.*]] = arith.constant 512 : index
// CHECK: %[[INIT:.*]] = memref.view %{{.*}}[%[[O0]]][]
// CHECK: %[[ACC:.*]] = memref.view %{{.*}}[%[[O256]]][]
// CHECK: %[[S:.*]] = memref.view %{{.*}}[%[[O0]]][]
// CHECK: %[[T:.*]] = memref.view %{{.*}}[%[[O512]]][]
// CHECK: memref.load %[[INIT]]
// CHECK: memref.store %{{.*}}, %[[ACC]]
// CHECK: scf.for
// CHECK: memref.load %[[ACC]]
// CHECK: memref.store %{{.*}}, %[[S]]
// CHECK: memref.store %{{.*}}, %[[T]]
// CHECK: memref.load %[[T]]
// CHECK: memref.store %{{.*}}, %[[ACC]]
func.func @carried(%x: f32, %p: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c64 = arith.constant 64 : i32
  %d = tile.make_desc %p, shape [%c64], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %init = tile.splat %x : f32 -> tensor<64xf32>
  %r = scf.for %i = %c0 to %n step %c1 iter_args(%acc = %init) -> (tensor<64xf32>) : i32 {
    %s = arith.addf %acc, %acc : tensor<64xf32>
    %t = arith.mulf %s, %s : tensor<64xf32>
    scf.yield %t : tensor<64xf32>
  }
  tile.store %d[%c0], %r : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

// Above 48 KiB the arena is dynamic shared memory; its size is a kernel attribute for the
// launcher, and there is no workgroup attribution.
// CHECK-LABEL: gpu.func @dynamic
// CHECK-SAME: (%{{.*}}: f32) kernel attributes
// CHECK-SAME: tessel.dynamic_shared_bytes = 65536
// CHECK-SAME: tessel.shared_bytes = 65536
// CHECK: %[[DYN:.*]] = gpu.dynamic_shared_memory : memref<?xi8, #gpu.address_space<workgroup>>
// CHECK: memref.view %[[DYN]][%{{.*}}][] : memref<?xi8, #gpu.address_space<workgroup>> to memref<128x128xf32, #gpu.address_space<workgroup>>
func.func @dynamic(%x: f32) {
  %t = tile.splat %x : f32 -> tensor<128x128xf32>
  return
}
