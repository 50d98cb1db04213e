// tessel-run --spec: a run spec names the kernel, the grid and the arguments with sizes written
// once; a run that succeeds ends with a summary; a malformed spec is one error at its
// file:line:col, exit code 1, no crash.
// RUN: rm -rf %t && split-file %s %t

// The spec gives the same arguments as the flags: same buffers after the run.
// RUN: tessel-run %t/kernel.mlir --spec=%t/good.run --print-args > %t/spec.out
// RUN: tessel-run %t/kernel.mlir --kernel=scale --grid=2 --arg=rand:10:7 --arg=zeros:10 \
// RUN:   --arg=10 --arg=2.5 --print-args > %t/flags.out
// RUN: grep "^arg #" %t/spec.out > %t/spec.args
// RUN: grep "^arg #" %t/flags.out > %t/flags.args
// RUN: diff %t/spec.args %t/flags.args
// RUN: FileCheck %s --check-prefix=GOOD < %t/spec.out
// GOOD: arg #1 (f32, 10 elements):
// GOOD: summary: ran @scale on cpu in {{[0-9.]+}} s, grid 2x1x1: 4 arguments, 2 buffers of 20 elements
// RUN: FileCheck %s --check-prefix=FLAGS < %t/flags.out
// FLAGS: summary: ran @scale on cpu in {{[0-9.]+}} s, grid 2x1x1: 4 arguments, 2 buffers of 20 elements

// The command line's --kernel and --grid win over the spec's; --out takes a spec's label.
// RUN: tessel-run %t/kernel.mlir --spec=%t/good.run --grid=1,3 --out=y:%t/y.npy \
// RUN:   --validate-pipeline='builtin.module(canonicalize)' | FileCheck %s --check-prefix=OVERRIDE
// OVERRIDE: validate: {{.*}} over 20 elements: OK
// OVERRIDE-NEXT: summary: ran @scale on cpu in {{[0-9.]+}} s, grid 1x3x1: 4 arguments, 2 buffers of 20 elements; the buffers match after builtin.module(canonicalize)
// OVERRIDE-NEXT: summary: wrote arg #1 to {{.*}}y.npy
// RUN: not tessel-run %t/kernel.mlir --spec=%t/good.run --kernel=other 2>&1 | FileCheck %s --check-prefix=NOKERNEL
// NOKERNEL: error: no kernel @other in the module; it has @scale
// .npy paths in a spec are relative to the spec's folder.
// RUN: tessel-run %t/kernel.mlir --spec=%t/npy.run | FileCheck %s --check-prefix=NPY
// NPY: summary: ran @scale on cpu in {{[0-9.]+}} s, grid 2x1x1: 4 arguments, 2 buffers of 20 elements

// The example's spec (README, docs/dev/interpreter.md) still fits the example.
// RUN: tessel-run %tessel_examples/attention_naive.mlir --spec=%tessel_examples/attention_naive.run \
// RUN:   --validate-pipeline='builtin.module(tile-optimize)' | FileCheck %s --check-prefix=EXAMPLE
// EXAMPLE: validate: {{.*}} over 51400 elements: OK
// EXAMPLE-NEXT: summary: ran @attention on cpu in {{[0-9.]+}} s, grid 2x2x1: 10 arguments, 5 buffers of 51400 elements; the buffers match after builtin.module(tile-optimize)

// --help shows the syntax.
// RUN: tessel-run --help | FileCheck %s --check-prefix=HELP
// HELP: --spec=<file>
// HELP: let NAME = EXPR

// Errors.
// RUN: not tessel-run %t/kernel.mlir --spec=%t/good.run --arg=1 2>&1 | FileCheck %s --check-prefix=BOTH
// BOTH: tessel-run: error: give the arguments with --spec or with --arg, not both
// RUN: not tessel-run %t/kernel.mlir --spec=%t/missing.run 2>&1 | FileCheck %s --check-prefix=MISSING
// MISSING: tessel-run: error: cannot read '{{.*}}missing.run': No such file or directory
// RUN: not tessel-run %t/kernel.mlir --spec=%t/unknown-name.run 2>&1 | FileCheck %s --check-prefix=UNKNOWN
// UNKNOWN: unknown-name.run:4:13: error: unknown name 'M' (define it first with 'let M = ...')
// UNKNOWN-NEXT: arg y zeros:M
// UNKNOWN-NEXT: {{^}}            ^
// UNKNOWN-NOT: Stack dump
// RUN: not tessel-run %t/kernel.mlir --spec=%t/keyword.run 2>&1 | FileCheck %s --check-prefix=KEYWORD
// KEYWORD: keyword.run:2:1: error: expected 'kernel', 'let', 'grid' or 'arg', not 'argument'
// RUN: not tessel-run %t/kernel.mlir --spec=%t/count.run 2>&1 | FileCheck %s --check-prefix=COUNT
// COUNT: count.run:4:1: error: the spec gives 3 arguments, but kernel @scale takes 4
// RUN: not tessel-run %t/kernel.mlir --spec=%t/type.run 2>&1 | FileCheck %s --check-prefix=TYPE
// TYPE: type.run:6:7: error: arg n ('2.5') for parameter #2 of type 'i32': expected an integer literal
// RUN: not tessel-run %t/kernel.mlir --spec=%t/buffer.run 2>&1 | FileCheck %s --check-prefix=BUFFER
// BUFFER: buffer.run:3:7: error: arg x ('10') for parameter #0 of type '!tile.ptr<f32>': a buffer parameter needs file.npy, zeros:N or rand:N[:SEED]
// RUN: not tessel-run %t/kernel.mlir --spec=%t/size.run 2>&1 | FileCheck %s --check-prefix=SIZE
// SIZE: size.run:3:7: error: arg x ('zeros:-10') for parameter #0 of type '!tile.ptr<f32>': expected zeros:N with N an element count
// RUN: not tessel-run %t/kernel.mlir --spec=%t/expr.run 2>&1 | FileCheck %s --check-prefix=EXPR
// EXPR: expr.run:2:19: error: expected ')'
// RUN: not tessel-run %t/kernel.mlir --spec=%t/trailing.run 2>&1 | FileCheck %s --check-prefix=TRAILING
// TRAILING: trailing.run:2:11: error: unexpected 'N' after an expression
// RUN: not tessel-run %t/kernel.mlir --spec=%t/div.run 2>&1 | FileCheck %s --check-prefix=DIV
// DIV: div.run:2:11: error: division by zero
// RUN: not tessel-run %t/kernel.mlir --spec=%t/overflow.run 2>&1 | FileCheck %s --check-prefix=OVERFLOW
// OVERFLOW: overflow.run:1:29: error: the result overflows 64 bits
// RUN: not tessel-run %t/kernel.mlir --spec=%t/grid.run 2>&1 | FileCheck %s --check-prefix=GRID
// GRID: grid.run:2:9: error: grid size 0 is not in [1, 2^20]
// RUN: not tessel-run %t/kernel.mlir --spec=%t/again.run 2>&1 | FileCheck %s --check-prefix=AGAIN
// AGAIN: again.run:2:5: error: 'N' is already defined
// RUN: not tessel-run %t/kernel.mlir --spec=%t/empty.run 2>&1 | FileCheck %s --check-prefix=EMPTY
// EMPTY: empty.run:1:1: error: the spec gives 0 arguments, but kernel @scale takes 4

//--- kernel.mlir
// y[i] = x[i] * s for i < n, eight elements a program.
func.func @scale(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %n: i32, %s: f32) {
  %c1 = arith.constant 1 : i32
  %c8 = arith.constant 8 : i32
  %pid = tile.program_id 0 : i32
  %off = arith.muli %pid, %c8 : i32
  %dx = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %dy = tile.make_desc %y, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %dx[%off] : !tile.desc<1, f32> -> tensor<8xf32>
  %st = tile.splat %s : f32 -> tensor<8xf32>
  %r = arith.mulf %t, %st : tensor<8xf32>
  tile.store %dy[%off], %r : !tile.desc<1, f32>, tensor<8xf32>
  return
}

#--- good.run
# Ten elements: two programs of eight, the second partial.
kernel scale
let N = 3 * 4 - 2
grid cdiv(N, 8)
arg x rand:N:7
arg y zeros:N      # the output
arg n N
arg s 2.5

#--- npy.run
kernel scale
let N = 10
grid cdiv(N, 8)
arg x y.npy
arg y zeros:N
arg n N
arg s 2.5

#--- unknown-name.run
kernel scale
let N = 10
arg x zeros:N
arg y zeros:M
arg n N
arg s 1.0

#--- keyword.run
let N = 10
argument x zeros:N

#--- count.run
let N = 10
arg x zeros:N
arg y zeros:N
arg n N

#--- type.run
kernel scale
let N = 10
grid 2
arg x zeros:N
arg y zeros:N
arg n 2.5
arg s 1.0

#--- buffer.run
kernel scale
let N = 10
arg x N
arg y zeros:N
arg n N
arg s 1.0

#--- size.run
kernel scale
let N = 10
arg x zeros:-N
arg y zeros:N
arg n N
arg s 1.0

#--- expr.run
let N = 10
let M = (N + 1 * 2

#--- trailing.run
let N = 10
let M = N N

#--- div.run
let N = 10
let M = N / (N - N)

#--- overflow.run
let M = 4611686018427387904 * 2

#--- grid.run
let N = 10
grid 2, N - N

#--- again.run
let N = 10
let N = 20

#--- empty.run
# Nothing but a comment.
