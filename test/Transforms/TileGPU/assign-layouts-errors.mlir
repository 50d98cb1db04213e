// Programs outside the class of the register-resident path, each refused with its reason at
// the op that breaks it (the reasons codegen=auto's remarks show).
// RUN: tessel-opt %s --split-input-file --tilegpu-assign-layouts --verify-diagnostics

// expected-error @+1 {{has no tile.dot whose A operand is a tile.load}}
func.func @no_dot(%d: !tile.desc<2, f32>, %i: i32) {
  %x = tile.load %d[%i, %i] : !tile.desc<2, f32> -> tensor<64x64xf32>
  tile.store %d[%i, %i], %x : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// -----

func.func @reduce_columns(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %od: !tile.desc<1, f32>, %i: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %q = tile.load %qd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %k = tile.load %kd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %s = tile.dot %q, %k, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  // expected-error @+1 {{reduces along another axis than the rows'}}
  %c = tile.reduce max %s axis 0 : tensor<64x64xf32> -> tensor<64xf32>
  tile.store %od[%i], %c : !tile.desc<1, f32>, tensor<64xf32>
  return
}

// -----

func.func @row_max_as_column(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %od: !tile.desc<2, f32>, %i: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %q = tile.load %qd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %k = tile.load %kd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  %s = tile.dot %q, %k, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  %m = tile.reduce max %s axis 1 : tensor<64x64xf32> -> tensor<64xf32>
  // A row vector (one value per query row) read as a column vector.
  // expected-error @+1 {{needs a register tile in another layout than the one it has}}
  %mc = tile.expand_dims %m axis 0 : tensor<64xf32> -> tensor<1x64xf32>
  %mb = tile.broadcast %mc : tensor<1x64xf32> -> tensor<64x64xf32>
  %x = arith.subf %s, %mb : tensor<64x64xf32>
  tile.store %od[%i, %i], %x : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}

// -----

func.func @padded_load(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %od: !tile.desc<2, f32>, %i: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %q = tile.load %qd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  // expected-error @+1 {{pads with 1.000000e+00: convert-tile-to-mma's copies fill zeros}}
  %k = tile.load %kd[%i, %i] {padding = 1.0 : f64} : !tile.desc<2, f16> -> tensor<64x64xf16>
  %s = tile.dot %q, %k, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
  tile.store %od[%i, %i], %s : !tile.desc<2, f32>, tensor<64x64xf32>
  return
}


// -----

// A loop of loops that carries values is not a walk over independent tiles.
func.func @carried_tile_loop(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %n: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  // expected-error @+1 {{is a nested loop, which convert-tile-to-mma does not handle}}
  %r = scf.for %t = %c0 to %n step %c64 iter_args(%x = %c0) -> (i32) : i32 {
    %q = tile.load %qd[%t, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    scf.for %j = %c0 to %n step %c64 : i32 {
      %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
      %s = tile.dot %q, %k, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    }
    scf.yield %x : i32
  }
  return
}

// -----

// A tile loop holds everything computed per tile: a second loop of loops is refused.
func.func @two_tile_loops(%qd: !tile.desc<2, f16>, %kd: !tile.desc<2, f16>, %n: i32) {
  %zero = arith.constant dense<0.000000e+00> : tensor<64x64xf32>
  %c0 = arith.constant 0 : i32
  %c64 = arith.constant 64 : i32
  scf.for %t = %c0 to %n step %c64 : i32 {
    %q = tile.load %qd[%t, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    scf.for %j = %c0 to %n step %c64 : i32 {
      %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
      %s = tile.dot %q, %k, %zero : tensor<64x64xf16>, tensor<64x64xf16> -> tensor<64x64xf32>
    }
  }
  // expected-error @+1 {{is a second loop of loops}}
  scf.for %t = %c0 to %n step %c64 : i32 {
    scf.for %j = %c0 to %n step %c64 : i32 {
      %k = tile.load %kd[%j, %c0] : !tile.desc<2, f16> -> tensor<64x64xf16>
    }
  }
  return
}
