//===- ExternDynamicSharedMemory.cpp - dynamic shared memory as .extern ---===//
//
// tessel-extern-dynamic-shared-memory: after convert-gpu-to-nvvm, gives the zero-sized global
// that stands for a kernel's dynamic shared memory `external` linkage, so that PTX declares it
// `.extern .shared … []` (the launch provides its bytes) instead of a one-byte static variable.
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Passes.h"

#include "mlir/Dialect/GPU/IR/GPUDialect.h"
#include "mlir/Dialect/LLVMIR/LLVMDialect.h"

namespace tessel {
#define GEN_PASS_DEF_EXTERNDYNAMICSHAREDMEMORY
#include "tessel/Target/Passes.h.inc"
} // namespace tessel

using namespace mlir;

namespace {

/// NVVM's shared address space.
constexpr unsigned kSharedAddressSpace = 3;

struct ExternDynamicSharedMemory
    : tessel::impl::ExternDynamicSharedMemoryBase<ExternDynamicSharedMemory> {
  void runOnOperation() override {
    for (auto global : getOperation().getOps<LLVM::GlobalOp>()) {
      auto array = dyn_cast<LLVM::LLVMArrayType>(global.getGlobalType());
      if (global.getAddrSpace() != kSharedAddressSpace || !array || array.getNumElements() != 0 ||
          global.getValueOrNull() || !global.getInitializerRegion().empty())
        continue;
      global.setLinkage(LLVM::Linkage::External);
    }
  }
};

} // namespace
