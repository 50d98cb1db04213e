// RUN: tessel-opt %s --tessel-module-to-binary=format=isa | FileCheck %s --check-prefix=OURS
// RUN: tessel-opt %s --gpu-module-to-binary=format=isa | FileCheck %s --check-prefix=UPSTREAM

// tessel-module-to-binary is gpu-module-to-binary without the NVPTX back end's straight-line
// strength reduction and LLVM's SLP vectorizer (`noimplicitfloat` on the functions during the
// optimisation pipeline, removed before the back end). @k: three stores at p + (i + c)·s: SLSR
// rewrites the second and third addresses as the first plus s·4 (one multiply); without it
// each index is computed on its own (two multiplies: LLVM folds the second into i·s + s).
// @v: four f32 stores at a 16-byte aligned p: the back end's load-store vectorizer, which
// `noimplicitfloat` would stop too, still makes them one 16-byte store.

// OURS:     gpu.binary @kernels
// OURS-SAME: assembly = "{{.*}}mul.lo.s64{{.*}}st.global.b32{{.*}}mul.lo.s64{{.*}}st.global.b32{{.*}}ret;{{.*}}.entry v({{.*}}st.global.v4.b32

// UPSTREAM: gpu.binary @kernels
// UPSTREAM-SAME: assembly = "{{([^m]|m[^u])*}}mul.lo.s64{{([^m]|m[^u])*}}ret;

module attributes {gpu.container_module} {
  gpu.module @kernels [#nvvm.target<O = 3, chip = "sm_90a">] {
    llvm.func @k(%p: !llvm.ptr<1>, %i: i64, %s: i64) attributes {gpu.kernel, nvvm.kernel} {
      %one = llvm.mlir.constant(1 : i64) : i64
      %two = llvm.mlir.constant(2 : i64) : i64
      %f1 = llvm.mlir.constant(1.0 : f32) : f32
      %f2 = llvm.mlir.constant(2.0 : f32) : f32
      %f3 = llvm.mlir.constant(3.0 : f32) : f32
      %m1 = llvm.mul %i, %s : i64
      %a1 = llvm.getelementptr %p[%m1] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      llvm.store %f1, %a1 : f32, !llvm.ptr<1>
      %i2 = llvm.add %i, %one : i64
      %m2 = llvm.mul %i2, %s : i64
      %a2 = llvm.getelementptr %p[%m2] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      llvm.store %f2, %a2 : f32, !llvm.ptr<1>
      %i3 = llvm.add %i, %two : i64
      %m3 = llvm.mul %i3, %s : i64
      %a3 = llvm.getelementptr %p[%m3] : (!llvm.ptr<1>, i64) -> !llvm.ptr<1>, f32
      llvm.store %f3, %a3 : f32, !llvm.ptr<1>
      llvm.return
    }
    llvm.func @v(%p: !llvm.ptr<1> {llvm.align = 16 : i64}, %x: f32) attributes {gpu.kernel, nvvm.kernel} {
      %a1 = llvm.getelementptr %p[1] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
      %a2 = llvm.getelementptr %p[2] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
      %a3 = llvm.getelementptr %p[3] : (!llvm.ptr<1>) -> !llvm.ptr<1>, f32
      %y = llvm.fadd %x, %x : f32
      %z = llvm.fmul %x, %x : f32
      %w = llvm.fsub %x, %y : f32
      llvm.store %x, %p {alignment = 16 : i64} : f32, !llvm.ptr<1>
      llvm.store %y, %a1 : f32, !llvm.ptr<1>
      llvm.store %z, %a2 : f32, !llvm.ptr<1>
      llvm.store %w, %a3 : f32, !llvm.ptr<1>
      llvm.return
    }
  }
}
