// RUN: tessel-opt %s --split-input-file --tessel-split-kernel-modules | FileCheck %s

// Three kernels that share the dynamic shared-memory declaration; @b also has a global of its
// own. Each kernel lands in a module of its own with what it references, in module order.

// CHECK-LABEL: module @three_kernels
// CHECK-NEXT:    module {
// CHECK-NEXT:      gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
// CHECK-NEXT:        llvm.mlir.global external @smem()
// CHECK-NEXT:        llvm.func @a()
// CHECK-NOT:         llvm.func
// CHECK:           module {
// CHECK-NEXT:      gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
// CHECK-NEXT:        llvm.mlir.global external @smem()
// CHECK-NEXT:        llvm.mlir.global internal @own()
// CHECK-NEXT:        llvm.func @b()
// CHECK-NOT:         llvm.func
// CHECK:           module {
// CHECK-NEXT:      gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
// CHECK-NEXT:        llvm.mlir.global external @smem()
// CHECK-NEXT:        llvm.func @c()
// CHECK-NOT:       gpu.module
module @three_kernels {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.mlir.global external @smem() {addr_space = 3 : i32, alignment = 16 : i64} : !llvm.array<0 x i8>
    llvm.mlir.global internal @own() {addr_space = 3 : i32} : !llvm.array<4 x i8>
    llvm.func @a() attributes {gpu.kernel, nvvm.kernel} {
      %p = llvm.mlir.addressof @smem : !llvm.ptr<3>
      llvm.return
    }
    llvm.func @b() attributes {gpu.kernel, nvvm.kernel} {
      %p = llvm.mlir.addressof @smem : !llvm.ptr<3>
      %q = llvm.mlir.addressof @own : !llvm.ptr<3>
      llvm.return
    }
    llvm.func @c() attributes {nvvm.kernel} {
      %p = llvm.mlir.addressof @smem : !llvm.ptr<3>
      llvm.return
    }
  }
}

// -----

// A helper with a body that two kernels call: LLVM could compile its two copies differently,
// so the gpu.module stays whole.

// CHECK-LABEL: module @shared_definition
// CHECK-NEXT:    gpu.module @kernels
// CHECK-NEXT:      llvm.func @helper()
// CHECK-NEXT:        llvm.return
// CHECK-NEXT:      }
// CHECK-NEXT:      llvm.func @a()
// CHECK:           llvm.func @b()
module @shared_definition {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.func @helper() {
      llvm.return
    }
    llvm.func @a() attributes {gpu.kernel, nvvm.kernel} {
      llvm.call @helper() : () -> ()
      llvm.return
    }
    llvm.func @b() attributes {gpu.kernel, nvvm.kernel} {
      llvm.call @helper() : () -> ()
      llvm.return
    }
  }
}

// -----

// A helper only one kernel calls goes with that kernel; a declaration may be shared.

// CHECK-LABEL: module @private_helper
// CHECK-NEXT:    module {
// CHECK-NEXT:      gpu.module @kernels
// CHECK-NEXT:        llvm.func @extern_fn()
// CHECK-NEXT:        llvm.func @helper()
// CHECK:             llvm.func @a()
// CHECK:           module {
// CHECK-NEXT:      gpu.module @kernels
// CHECK-NEXT:        llvm.func @extern_fn()
// CHECK-NEXT:        llvm.func @b()
// CHECK-NOT:         llvm.func
module @private_helper {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.func @extern_fn()
    llvm.func @helper() {
      llvm.return
    }
    llvm.func @a() attributes {gpu.kernel, nvvm.kernel} {
      llvm.call @helper() : () -> ()
      llvm.call @extern_fn() : () -> ()
      llvm.return
    }
    llvm.func @b() attributes {gpu.kernel, nvvm.kernel} {
      llvm.call @extern_fn() : () -> ()
      llvm.return
    }
  }
}

// -----

// One kernel: nothing to split.

// CHECK-LABEL: module @one_kernel
// CHECK-NEXT:    gpu.module @kernels
// CHECK-NEXT:      llvm.func @a()
module @one_kernel {
  gpu.module @kernels [#nvvm.target<chip = "sm_90a">] {
    llvm.func @a() attributes {gpu.kernel, nvvm.kernel} {
      llvm.return
    }
  }
}
