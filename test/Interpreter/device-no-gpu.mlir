// Without a GPU, --device=gpu says so and fails cleanly.
// UNSUPPORTED: cuda-driver
// RUN: not tessel-run %s --kernel=noop --device=gpu 2>&1 | FileCheck %s
// CHECK: error: no CUDA driver (libcuda.so.1 could not be opened)
func.func @noop() {
  return
}
