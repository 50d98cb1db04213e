// tilegpu-allocate-shared needs the layouts of tilegpu-assign-layouts.
// RUN: tessel-opt %s --split-input-file --tilegpu-allocate-shared --verify-diagnostics

// expected-error @+1 {{has no tilegpu layouts: run tilegpu-assign-layouts first}}
func.func @no_layouts(%qd: !tile.desc<2, f16>, %i: i32) {
  %q = tile.load %qd[%i, %i] : !tile.desc<2, f16> -> tensor<64x64xf16>
  return
}
