# Link MLIR and LLVM statically, only the components we use (TOOLCHAIN.md, pitfall 2).
#
# Debian's MLIR*.a targets list the shared `LLVM` target in their link interface, which would make
# every binary depend on libLLVM.so — and the GPU test machine has no LLVM. We substitute the static
# component libraries for it, so tessel-opt, tessel-run and the Python module are self-contained.

set(TESSEL_LLVM_COMPONENTS
  Support Core Demangle BinaryFormat BitReader BitWriter IRReader AsmParser Analysis
  TransformUtils ScalarOpts InstCombine Passes Target TargetParser MC MCParser Object
  CodeGen IPO Linker FrontendOffloading FrontendOpenMP
  NVPTXCodeGen NVPTXDesc NVPTXInfo)
llvm_map_components_to_libnames(TESSEL_LLVM_STATIC_LIBS ${TESSEL_LLVM_COMPONENTS})

# Rewrite the link interface of every imported MLIR target once.
foreach(_lib ${MLIR_EXPORTED_TARGETS})
  if(TARGET ${_lib})
    get_target_property(_type ${_lib} TYPE)
    if(_type STREQUAL "STATIC_LIBRARY" OR _type STREQUAL "INTERFACE_LIBRARY")
      get_target_property(_deps ${_lib} INTERFACE_LINK_LIBRARIES)
      if(_deps)
        list(TRANSFORM _deps REPLACE "^LLVM$" "${TESSEL_LLVM_STATIC_LIBS}")
        list(TRANSFORM _deps REPLACE "^\\$<LINK_ONLY:LLVM>$" "${TESSEL_LLVM_STATIC_LIBS}")
        set_target_properties(${_lib} PROPERTIES INTERFACE_LINK_LIBRARIES "${_deps}")
      endif()
    endif()
  endif()
endforeach()
