// convert-tile-to-gpu refuses what it cannot lower, with a located error and never a crash.
// RUN: tessel-opt %s --split-input-file --verify-diagnostics --convert-tile-to-gpu

func.func @streamed_softmax(%x: f32, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %s = tile.splat %x : f32 -> tensor<4x8xf32>
  scf.for %j = %c0 to %n step %c8 : i32 {
    // expected-error @+1 {{'tile.softmax' op is streamed: run tile-online-softmax before convert-tile-to-gpu}}
    %p, %l = tile.softmax %s axis 1 streamed : tensor<4x8xf32> -> tensor<4xf32>
  }
  return
}

// -----

func.func private @helper(i32)

func.func @unsupported_call(%n: i32) {
  // expected-error @+1 {{'func.call' op is not supported by convert-tile-to-gpu}}
  func.call @helper(%n) : (i32) -> ()
  return
}

// -----

// expected-error @+1 {{'func.func' op is a tile program, so it must return nothing}}
func.func @returns_value(%n: i32) -> i32 {
  return %n : i32
}

// -----

// expected-error @+1 {{'func.func' op argument #0 has type 'tensor<4xf32>': a kernel takes !tile.ptr and scalar arguments}}
func.func @tile_argument(%t: tensor<4xf32>) {
  return
}

// -----

func.func @non_splat_constant() {
  // expected-error @+1 {{'arith.constant' op is a non-splat tile constant}}
  %c = arith.constant dense<[1.0, 2.0]> : tensor<2xf32>
  return
}

// -----

// More than the 227 KiB a CTA may use on sm_90 (with the dynamic-shared-memory opt-in).
// expected-error @+1 {{'func.func' op needs 262144 bytes of shared memory for its tiles (262144 before reuse), more than the 232448 a CTA may use}}
func.func @too_much_shared(%x: f32) {
  %t = tile.splat %x : f32 -> tensor<256x256xf32>
  return
}
