# lit configuration of tessel's FileCheck tests. Tests mirror the source tree: Dialect/, Transforms/,
# Conversion/, Target/, Pipeline/, Interpreter/.
import os
import shutil

import lit.formats
from lit.llvm import llvm_config

config.name = "tessel"
config.test_format = lit.formats.ShTest(not llvm_config.use_lit_shell)
config.suffixes = [".mlir"]
config.test_source_root = os.path.dirname(__file__)
config.test_exec_root = os.path.join(config.tessel_obj_root, "test")
config.substitutions.append(("%tessel_examples", os.path.join(config.tessel_src_root, "examples")))
config.excludes = ["CMakeLists.txt", "lit.cfg.py", "lit.site.cfg.py", "Unit", "python", "gpu"]

llvm_config.use_default_substitutions()
tool_dirs = [
    os.path.join(config.tessel_obj_root, "bin"),
    config.llvm_tools_dir,
]
llvm_config.add_tool_substitutions(["tessel-opt", "tessel-run", "tesselc", "FileCheck", "not", "count", "split-file"], tool_dirs)
config.environment["PATH"] = os.pathsep.join(tool_dirs + [config.environment.get("PATH", "")])

# ptxas is needed by the tests that make cubins; they say `REQUIRES: ptxas`.
ptxas = os.path.join(config.tessel_cuda_home, "bin", "ptxas")
if os.path.exists(ptxas):
    config.available_features.add("ptxas")
    config.environment["CUDA_HOME"] = config.tessel_cuda_home

# A CUDA driver (a GPU machine): GPU-only tests say `REQUIRES: cuda-driver`, tests of the
# no-GPU error paths `UNSUPPORTED: cuda-driver`.
try:
    import ctypes
    ctypes.CDLL("libcuda.so.1")
    config.available_features.add("cuda-driver")
except OSError:
    pass
