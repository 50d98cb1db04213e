// Each malformed op gets its diagnostic at its own location.
// RUN: tessel-opt %s --split-input-file --verify-diagnostics

func.func @program_id_axis_out_of_range() {
  // expected-error @+1 {{attribute 'axis' failed to satisfy constraint}}
  %0 = tile.program_id 3 : i32
  return
}

// -----

func.func @make_desc_element_mismatch(%p: !tile.ptr<f16>, %n: i32) {
  // expected-error @+1 {{pointer element type 'f16' does not match descriptor element type 'f32'}}
  %d = tile.make_desc %p, shape [%n], strides [%n] : !tile.ptr<f16> -> !tile.desc<1, f32>
  return
}

// -----

func.func @make_desc_rank_mismatch(%p: !tile.ptr<f16>, %n: i32) {
  // expected-error @+1 {{needs 2 sizes and 2 strides for a rank-2 descriptor, got 2 and 1}}
  %d = tile.make_desc %p, shape [%n, %n], strides [%n] : !tile.ptr<f16> -> !tile.desc<2, f16>
  return
}

// -----

func.func @paged_desc_rank_1(%p: !tile.ptr<f16>, %t: !tile.desc<1, i32>, %n: i32) {
  // expected-error @+1 {{is paged, which needs rank 2 (rows through the page table), not rank 1}}
  %d = tile.make_desc %p, shape [%n], strides [%n], pages %t[%n] page_size 16
      : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<1, f16>
  return
}

// -----

func.func @paged_desc_table_type(%p: !tile.ptr<f16>, %t: !tile.desc<2, i32>, %n: i32) {
  // expected-error @+1 {{needs a rank-1 i32 descriptor of page numbers, not '!tile.desc<2, i32>'}}
  %d = tile.make_desc %p, shape [%n, %n], strides [%n, %n], pages %t[%n] page_size 16
      : !tile.ptr<f16>, !tile.desc<2, i32> -> !tile.desc<2, f16>
  return
}

// -----

func.func @paged_desc_page_size(%p: !tile.ptr<f16>, %t: !tile.desc<1, i32>, %n: i32) {
  // expected-error @+1 {{needs a positive page_size, got 0}}
  %d = tile.make_desc %p, shape [%n, %n], strides [%n, %n], pages %t[%n] page_size 0
      : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<2, f16>
  return
}

// -----

func.func @paged_desc_load_scalar(%p: !tile.ptr<f16>, %t: !tile.desc<1, i32>, %n: i32) {
  %d = tile.make_desc %p, shape [%n, %n], strides [%n, %n], pages %t[%n] page_size 16
      : !tile.ptr<f16>, !tile.desc<1, i32> -> !tile.desc<2, f16>
  // expected-error @+1 {{does not take a paged descriptor (tile.load, tile.store and tile.atomic_add do)}}
  %s = tile.load_scalar %d[%n, %n] : !tile.desc<2, f16> -> f16
  return
}

// -----

// expected-error @+1 {{descriptor element type must be f8E4M3FN, f16, bf16, f32 or i32, got 'i8'}}
func.func @desc_bad_element(%d: !tile.desc<2, i8>) {
  return
}

// -----

// expected-error @+1 {{descriptor rank must be between 1 and 4, got 0}}
func.func @desc_rank_zero(%d: !tile.desc<0, f16>) {
  return
}

// -----

func.func @load_offset_count(%d: !tile.desc<2, f16>, %i: i32) {
  // expected-error @+1 {{needs one offset per descriptor axis: expected 2, got 1}}
  %t = tile.load %d[%i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  return
}

// -----

func.func @load_rank_mismatch(%d: !tile.desc<2, f16>, %i: i32) {
  // expected-error @+1 {{tile rank 1 does not match descriptor rank 2}}
  %t = tile.load %d[%i, %i] : !tile.desc<2, f16> -> tensor<64xf16>
  return
}

// -----

func.func @load_element_mismatch(%d: !tile.desc<2, f16>, %i: i32) {
  // expected-error @+1 {{tile element type 'bf16' does not match descriptor element type 'f16'}}
  %t = tile.load %d[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xbf16>
  return
}

// -----

func.func @load_dynamic_tile(%d: !tile.desc<2, f16>, %i: i32) {
  // expected-error @+1 {{must be statically shaped tensor}}
  %t = tile.load %d[%i, %i] : !tile.desc<2, f16> -> tensor<?x64xf16>
  return
}

// -----

func.func @store_mask_shape(%d: !tile.desc<1, f32>, %i: i32, %v: tensor<64xf32>, %m: tensor<32xi1>) {
  // expected-error @+1 {{mask shape 32 does not match value shape 64}}
  tile.store %d[%i], %v mask %m : !tile.desc<1, f32>, tensor<64xf32>, tensor<32xi1>
  return
}

// -----

func.func @dot_contraction(%a: tensor<64x32xf16>, %b: tensor<16x16xf16>, %c: tensor<64x16xf32>) {
  // expected-error @+1 {{contraction sizes differ: a is 64x32, b is 16x16}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<16x16xf16> -> tensor<64x16xf32>
  return
}

// -----

func.func @dot_accumulator_shape(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x32xf32>) {
  // expected-error @+1 {{accumulator is 64x32 but a·b is 64x16}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xf16> -> tensor<64x32xf32>
  return
}

// -----

func.func @dot_mixed_operands(%a: tensor<64x32xf16>, %b: tensor<32x16xbf16>, %c: tensor<64x16xf32>) {
  // expected-error @+1 {{failed to verify that all of {a, b} have same element type}}
  %d = tile.dot %a, %b, %c : tensor<64x32xf16>, tensor<32x16xbf16> -> tensor<64x16xf32>
  return
}

// -----

func.func @dot_f16_accumulator(%a: tensor<64x32xf16>, %b: tensor<32x16xf16>, %c: tensor<64x16xf16>) {
  // expected-error @+1 {{operand #2 must be 2D tensor of 32-bit float values, but got 'tensor<64x16xf16>'}}
  %d = "tile.dot"(%a, %b, %c) : (tensor<64x32xf16>, tensor<32x16xf16>, tensor<64x16xf16>) -> tensor<64x16xf16>
  return
}

// -----

func.func @reduce_axis_out_of_range(%x: tensor<64x16xf32>) {
  // expected-error @+1 {{axis 2 is out of range for a tile of rank 2}}
  %r = tile.reduce sum %x axis 2 : tensor<64x16xf32> -> tensor<64xf32>
  return
}

// -----

func.func @scan_axis_out_of_range(%x: tensor<64xf32>) {
  // expected-error @+1 {{axis 1 is out of range for a tile of rank 1}}
  %r = tile.scan sum %x axis 1 : tensor<64xf32>
  return
}

// -----

func.func @scan_mask(%x: tensor<64xi1>) {
  // expected-error @+1 {{cannot scan a mask (i1) tile}}
  %r = tile.scan sum %x axis 0 : tensor<64xi1>
  return
}

// -----

func.func @reduce_wrong_shape(%x: tensor<64x16xf32>) {
  // expected-error @+1 {{reducing 64x16 along axis 1 gives 64, not 16}}
  %r = tile.reduce max %x axis 1 : tensor<64x16xf32> -> tensor<16xf32>
  return
}

// -----

func.func @reduce_rank1(%x: tensor<64xf32>) {
  // expected-error @+1 {{gives a scalar, which tiles cannot hold}}
  %r = tile.reduce max %x axis 0 : tensor<64xf32> -> tensor<1xf32>
  return
}

// -----

func.func @reduce_unknown_kind(%x: tensor<64x16xf32>) {
  // expected-error @+1 {{expected string or keyword containing one of the following enum values for attribute 'kind' [sum, max, min]}}
  %r = tile.reduce prod %x axis 1 : tensor<64x16xf32> -> tensor<64xf32>
  return
}

// -----

func.func @splat_type(%x: f16) {
  // expected-error @+1 {{element type of the result is the scalar's type}}
  %t = tile.splat %x : f16 -> tensor<64xf32>
  return
}

// -----

func.func @iota_rank2() {
  // expected-error @+1 {{result #0 must be 1D tensor of 32-bit signless integer values, but got 'tensor<8x8xi32>'}}
  %t = tile.iota : tensor<8x8xi32>
  return
}

// -----

func.func @expand_dims_shape(%x: tensor<64xf32>) {
  // expected-error @+1 {{expected result shape 64x1, got 1x64}}
  %t = tile.expand_dims %x axis 1 : tensor<64xf32> -> tensor<1x64xf32>
  return
}

// -----

func.func @expand_dims_axis(%x: tensor<64xf32>) {
  // expected-error @+1 {{axis 2 is out of range for expanding a rank-1 tile}}
  %t = tile.expand_dims %x axis 2 : tensor<64xf32> -> tensor<64x1xf32>
  return
}

// -----

func.func @broadcast_not_one(%x: tensor<64x2xf32>) {
  // expected-error @+1 {{axis 1 has size 2, which broadcasts only to itself, not to 16}}
  %t = tile.broadcast %x : tensor<64x2xf32> -> tensor<64x16xf32>
  return
}

// -----

func.func @broadcast_rank(%x: tensor<64xf32>) {
  // expected-error @+1 {{input rank 1 differs from result rank 2; use tile.expand_dims first}}
  %t = tile.broadcast %x : tensor<64xf32> -> tensor<64x16xf32>
  return
}

// -----

func.func @trans_shape(%x: tensor<64x16xf16>) {
  // expected-error @+1 {{transposing 64x16 gives 16x64, not 64x16}}
  %t = tile.trans %x : tensor<64x16xf16> -> tensor<64x16xf16>
  return
}

// -----

func.func @softmax_lse_shape(%x: tensor<64x16xf32>) {
  // expected-error @+1 {{log-sum-exp of 64x16 along axis 1 must be 'tensor<64xf32>'}}
  %p, %l = tile.softmax %x axis 1 : tensor<64x16xf32> -> tensor<16xf32>
  return
}

// -----

func.func @softmax_streamed_outside_loop(%x: tensor<64x16xf32>) {
  // expected-error @+1 {{is streamed, so it must sit directly in the body of an scf.for}}
  %p, %l = tile.softmax %x axis 1 streamed : tensor<64x16xf32> -> tensor<64xf32>
  return
}

// -----

func.func @softmax_streamed_reads_carried(%x: tensor<64x16xf32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c16 = arith.constant 16 : i32
  %r = scf.for %j = %c0 to %n step %c16 iter_args(%acc = %x) -> (tensor<64x16xf32>) : i32 {
    %s = arith.addf %acc, %x : tensor<64x16xf32>
    // expected-error @+1 {{is streamed, so its input may not depend on the loop-carried value #0 of the enclosing scf.for}}
    %p, %l = tile.softmax %s axis 1 streamed : tensor<64x16xf32> -> tensor<64xf32>
    scf.yield %p : tensor<64x16xf32>
  }
  return
}

// -----

func.func @unknown_op() {
  // expected-error @+1 {{custom op 'tile.flash' is unknown}}
  tile.flash
  return
}

// -----

func.func @gather_index_count(%d: !tile.desc<2, f32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{needs one index per descriptor axis: expected 2, got 1}}
  %g = tile.gather %d[%i] : !tile.desc<2, f32>, tensor<4xi32> -> tensor<4xf32>
  return
}

// -----

func.func @load_scalar_index_count(%d: !tile.desc<2, i32>, %i: i32) -> i32 {
  // expected-error @+1 {{needs one index per descriptor axis: expected 2, got 1}}
  %s = tile.load_scalar %d[%i] : !tile.desc<2, i32> -> i32
  return %s : i32
}

// -----

func.func @gather_element_type(%d: !tile.desc<1, f32>, %i: tensor<4xi32>) {
  // expected-error @+1 {{result element type 'f16' does not match descriptor element type 'f32'}}
  %g = tile.gather %d[%i] : !tile.desc<1, f32>, tensor<4xi32> -> tensor<4xf16>
  return
}

// -----

func.func @load_scalar_result_type(%d: !tile.desc<1, i32>, %i: i32) -> f32 {
  // expected-error @+1 {{result type 'f32' does not match descriptor element type 'i32'}}
  %s = tile.load_scalar %d[%i] : !tile.desc<1, i32> -> f32
  return %s : f32
}

// -----

func.func @gather_index_shape(%d: !tile.desc<2, f32>, %i: tensor<4xi32>, %j: tensor<4x2xi32>) {
  // expected-error @+1 {{index 0 is a tile of shape 4; index tiles have the result's shape 4x2}}
  %g = tile.gather %d[%i, %j] : !tile.desc<2, f32>, tensor<4xi32>, tensor<4x2xi32> -> tensor<4x2xf32>
  return
}

// -----

func.func @load_scalar_fractional_padding(%d: !tile.desc<1, i32>, %i: i32) -> i32 {
  // expected-error @+1 {{pads an i32 with 5.000000e-01, which is not an i32 value}}
  %s = tile.load_scalar %d[%i] {padding = 0.5 : f64} : !tile.desc<1, i32> -> i32
  return %s : i32
}

// -----

func.func @gather_float_index(%d: !tile.desc<1, f32>, %i: tensor<4xf32>) {
  // expected-error @+1 {{operand #1 must be variadic of 32-bit signless integer or statically shaped tensor of 32-bit signless integer values}}
  %g = tile.gather %d[%i] : !tile.desc<1, f32>, tensor<4xf32> -> tensor<4xf32>
  return
}

// -----

func.func @load_scalar_tile_result(%d: !tile.desc<1, i32>, %i: i32) -> tensor<4xi32> {
  // expected-error @+1 {{result #0 must be}}
  %s = tile.load_scalar %d[%i] : !tile.desc<1, i32> -> tensor<4xi32>
  return %s : tensor<4xi32>
}

// -----

func.func @atomic_add_f16(%d: !tile.desc<1, f16>, %i: i32, %t: tensor<4xf16>) {
  // expected-error @+1 {{operand #2 must be statically shaped tensor of 32-bit float or 32-bit signless integer values}}
  tile.atomic_add %d[%i], %t : !tile.desc<1, f16>, tensor<4xf16>
  return
}

// -----

func.func @atomic_add_mask_shape(%d: !tile.desc<1, f32>, %i: i32, %t: tensor<4xf32>, %m: tensor<8xi1>) {
  // expected-error @+1 {{mask shape 8 does not match value shape 4}}
  tile.atomic_add %d[%i], %t mask %m : !tile.desc<1, f32>, tensor<4xf32>, tensor<8xi1>
  return
}
