// tessel-run's errors: one located message, exit code 1.
// RUN: not tessel-run %s --kernel=oob --arg=zeros:8 --arg=9 2>&1 | FileCheck %s --check-prefix=OOB
// RUN: not tessel-run %s --kernel=oob --arg=zeros:8 2>&1 | FileCheck %s --check-prefix=COUNT
// RUN: not tessel-run %s --kernel=oob --arg=zeros:8 --arg=1.5 2>&1 | FileCheck %s --check-prefix=SCALAR
// RUN: not tessel-run %s --kernel=oob --arg=7 --arg=8 2>&1 | FileCheck %s --check-prefix=BUFFER
// RUN: not tessel-run %s --kernel=oob --arg=%t.missing.npy --arg=8 2>&1 | FileCheck %s --check-prefix=MISSING
// RUN: not tessel-run %s --kernel=unsupported --arg=1.0 2>&1 | FileCheck %s --check-prefix=NOTSUPPORTED
// RUN: not tessel-run %s --kernel=nope 2>&1 | FileCheck %s --check-prefix=NOKERNEL
// RUN: not tessel-run %s 2>&1 | FileCheck %s --check-prefix=NONAME
// RUN: not tessel-run %s --kernel=div --arg=0 2>&1 | FileCheck %s --check-prefix=DIV
// RUN: not tessel-run %s --kernel=forever --max-steps=5000 2>&1 | FileCheck %s --check-prefix=STEPS
// RUN: not tessel-run %s --kernel=oob --grid=0 --arg=zeros:8 --arg=1 2>&1 | FileCheck %s --check-prefix=GRID
// RUN: not tessel-run %s --no-such-option 2>&1 | FileCheck %s --check-prefix=OPTION
// RUN: not tessel-run %s --kernel=oob --arg=zeros:8 --arg=1 --validate-pipeline='builtin.module(no-such-pass)' 2>&1 | FileCheck %s --check-prefix=PIPELINE

// OOB: errors.mlir:[[@LINE+6]]:8: error: 'tile.load' op reads element 8 of argument #0, a buffer of 8 elements
// OOB-NOT: Stack dump
func.func @oob(%x: !tile.ptr<f32>, %n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %d = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %d[%c0] : !tile.desc<1, f32> -> tensor<16xf32>
  return
}
// COUNT: errors.mlir:[[@LINE-7]]:1: error: kernel @oob takes 2 arguments, but 1 --arg were given
// SCALAR: error: --arg #1 ('1.5') for parameter #1 of type 'i32': expected an integer literal
// BUFFER: error: --arg #0 ('7') for parameter #0 of type '!tile.ptr<f32>': a buffer parameter needs file.npy, zeros:N or rand:N[:SEED]
// MISSING: error: --arg #0 ({{.*}}missing.npy') for parameter #0 of type '!tile.ptr<f32>': {{.*}}missing.npy: cannot read file: No such file or directory
// GRID: tessel-run: error: --grid: '0' is not a grid size in [1, 2^20]

// NOTSUPPORTED: errors.mlir:[[@LINE+2]]:8: error: the interpreter does not support 'math.atan'
func.func @unsupported(%x: f32) {
  %s = math.atan %x : f32
  return
}

// NOKERNEL: error: no kernel @nope in the module; it has @oob, @unsupported, @div, @forever
// NONAME: error: name the kernel to run with --kernel=NAME; the module has @oob, @unsupported, @div, @forever

// DIV: errors.mlir:[[@LINE+3]]:8: error: 'arith.divsi' op divides by zero (operands 7 and 0)
func.func @div(%x: i32) {
  %c7 = arith.constant 7 : i32
  %d = arith.divsi %c7, %x : i32
  return
}

// STEPS: error: 'scf.for' op would run 2000000000 iterations, past the interpreter's step limit of 5000
func.func @forever() {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %big = arith.constant 2000000000 : i32
  scf.for %i = %c0 to %big step %c1 : i32 {
    %x = arith.addi %i, %c1 : i32
  }
  return
}

// OPTION: Unknown command line argument '--no-such-option'
// PIPELINE: tessel-run: error: invalid --validate-pipeline 'builtin.module(no-such-pass)': {{.*}}no-such-pass
