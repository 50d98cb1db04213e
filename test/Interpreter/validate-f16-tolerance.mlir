// --validate-pipeline's default tolerances follow each buffer's element type: the bundled f16
// attention kernel, naive vs tile-optimize (online softmax, exp2 with the scale folded in),
// differs by an f16 ulp or two in o, which f16's defaults (rtol 2e-3, atol 1e-3) accept and
// f32's (rtol 1e-5, atol 1e-6) did not. Explicit --rtol/--atol still apply to every buffer.
// RUN: tessel-run %tessel_examples/attention_naive.mlir --kernel=attention --grid=2,2 \
// RUN:   --arg=rand:12800:1 --arg=rand:12800:2 --arg=rand:12800:3 --arg=zeros:12800 \
// RUN:   --arg=zeros:200 --arg=100 --arg=100 --arg=2 --arg=2 --arg=0.125 \
// RUN:   --validate-pipeline='builtin.module(tile-optimize)' | FileCheck %s
// CHECK: validate: {{.*}} over 51400 elements: OK
// RUN: not tessel-run %tessel_examples/attention_naive.mlir --kernel=attention --grid=2,2 \
// RUN:   --arg=rand:12800:1 --arg=rand:12800:2 --arg=rand:12800:3 --arg=zeros:12800 \
// RUN:   --arg=zeros:200 --arg=100 --arg=100 --arg=2 --arg=2 --arg=0.125 --rtol=1e-5 --atol=1e-6 \
// RUN:   --validate-pipeline='builtin.module(tile-optimize)' | FileCheck %s --check-prefix=STRICT
// STRICT: validate: {{.*}} over 51400 elements: MISMATCH

// --help shows the defaults.
// RUN: tessel-run --help | FileCheck %s --check-prefix=HELP
// HELP: --atol{{.*}}default per element type: f32 1e-6, f16 1e-3, bf16 1e-2, i32 0
// HELP: --rtol{{.*}}default per element type: f32 1e-5, f16 2e-3, bf16 1.6e-2, i32 0

// RUN: tessel-run --version | FileCheck %s --check-prefix=VERSION
// VERSION: tessel-run (tessel {{[0-9]+\.[0-9]+\.[0-9]+}}) on LLVM/MLIR 22.
