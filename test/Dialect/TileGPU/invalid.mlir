// Each malformed layout, buffer or op gets its diagnostic at its own location.
// RUN: tessel-opt %s --split-input-file --verify-diagnostics

// expected-error @+1 {{wgmma needs warp_rows = 16 and whole warpgroups}}
func.func @wgmma_layout_two_m_tiles(%s: tensor<128x64xf32, #tilegpu.mma<wgmma, warps = 4, warp_rows = 32>>) {
  return
}

// -----

// expected-error @+1 {{warp_rows must be 16 or 32}}
func.func @mma_layout_rows(%s: tensor<64x64xf32, #tilegpu.mma<mma_sync, warps = 8, warp_rows = 8>>) {
  return
}

// -----

// expected-error @+1 {{slices dim 0 (columns) or 1 (rows)}}
func.func @slice_dim(%s: tensor<64xf32, #tilegpu.slice<dim = 2, parent = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>>>) {
  return
}

// -----

func.func @smem_swizzle() {
  // expected-error @+1 {{swizzle is 0, 32, 64 or 128 bytes, got 96}}
  %b = tilegpu.alloc : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 96>
  return
}

// -----

func.func @copy_element_type(%d: !tile.desc<2, f32>, %i: i32) {
  %b = tilegpu.alloc : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
  // expected-error @+1 {{copies 'f32' elements into a buffer of 'f16'}}
  %t = tilegpu.async_copy %d[%i, %i] into %b[%i] : !tile.desc<2, f32> -> !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
  return
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
func.func @local_load_shape(%i: i32) {
  %b = tilegpu.alloc : !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>
  // expected-error @+1 {{reads a buffer of '!tilegpu.smem<64x128xf16, stages = 1, swizzle = 128>' into a tile of}}
  %t = tilegpu.local_load %b[%i] : !tilegpu.smem<64x128xf16, stages = 1, swizzle = 128> -> tensor<128x64xf16, #tilegpu.dot_operand<operand = 1, parent = #mma>>
  return
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
func.func @mma_operand_layout(%a: tensor<64x64xf16, #a>, %b: tensor<64x64xf16, #a>, %c: tensor<64x64xf32, #mma>) {
  // expected-error @+1 {{B must be in #tilegpu.dot_operand<operand = 1, …> layout}}
  %o = tilegpu.mma %a, %b, %c : tensor<64x64xf16, #a>, tensor<64x64xf16, #a> -> tensor<64x64xf32, #mma>
  return
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
#wg = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#a = #tilegpu.dot_operand<operand = 0, parent = #mma>
func.func @wgmma_on_mma_sync_layout(%a: tensor<64x64xf16, #a>, %c: tensor<64x64xf32, #mma>, %i: i32) {
  %b = tilegpu.alloc : !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128>
  // expected-error @+1 {{tilegpu.wgmma needs a wgmma layout}}
  %o = tilegpu.wgmma %a, %b[%i], %c : tensor<64x64xf16, #a>, !tilegpu.smem<64x64xf16, stages = 2, swizzle = 128> -> tensor<64x64xf32, #mma>
  return
}

// -----

// A buffer swizzled over its 64-byte rows is read K-major (transpose_b) only: N-major reads
// take 128-byte slabs.
#wg = #tilegpu.mma<wgmma, warps = 4, warp_rows = 16>
#wa = #tilegpu.dot_operand<operand = 0, parent = #wg>
func.func @wgmma_narrow_swizzle_n_major(%a: tensor<64x64xf8E4M3FN, #wa>, %c: tensor<64x256xf32, #wg>, %i: i32) {
  %b = tilegpu.alloc : !tilegpu.smem<64x256xf8E4M3FN, stages = 2, swizzle = 64>
  // expected-error @+1 {{reads B through a 128-byte-swizzle descriptor (the rows' width for 64- or 32-byte rows read K-major); the buffer has swizzle 64}}
  %o = tilegpu.wgmma %a, %b[%i], %c : tensor<64x64xf8E4M3FN, #wa>, !tilegpu.smem<64x256xf8E4M3FN, stages = 2, swizzle = 64> -> tensor<64x256xf32, #wg>
  return
}

// -----

#mma = #tilegpu.mma<mma_sync, warps = 4, warp_rows = 16>
func.func @convert_shape(%x: tensor<64x64xf16, #mma>) {
  // expected-error @+1 {{changes more than the layout}}
  %y = tilegpu.convert_layout %x : tensor<64x64xf16, #mma> -> tensor<64x64xf32, #tilegpu.blocked<threads = 128, vector = 4, threads_per_row = 16>>
  return
}
