"""Ahead-of-time compilation of attention kernels into a C library (docs/aot.md).

    python -m tessel aot FILE.py --spec dtype=f16,head_dim=128,causal=1,chip=sm_90a ... -o OUT

traces the attention kernel of a DSL file (default: its `attention_kernel`, with the signature of
tessel.attention.attention_kernel) once per specialisation, compiles each through the same path
as the JIT (tessel.cache.get_binary: the disk cache, then the C++ compiler through tessel._tessel)
and writes into OUT:

- ``kernels/<function>.cubin`` and ``.ptx``;
- ``<name>.h``: one typed launch function per specialisation, e.g.
  ``int tessel_attention_f16_d128_causal_sm90a(CUstream, const void *q, ..., int32_t nq, ...)``
  — batch, heads and sequence lengths are run-time arguments;
- ``<name>.c``: the cubins as byte arrays, loaded through the driver API on first use (a
  thread-safe once-init that retries after a failure) and launched; every failure is returned as
  a CUresult value, nothing aborts;
- ``<name>.json``: the manifest (functions, chips, launch needs, cache keys, checksums).

The driver is Python because the DSL is Python: tracing needs the interpreter, and the compiler
itself is the C++ one behind tessel._tessel (docs/dev/cache-aot-decisions.md).
"""
import dataclasses
import hashlib
import importlib.util
import json
import math
import os
import pathlib
import re
import sys

import numpy as np

from . import cache as tcache
from .jit import JITFunction
from .version import VERSION

DTYPES = {"f16": np.float16, "bf16": np.uint16, "f32": np.float32}
C_SCALAR = {"f16": "uint16_t", "bf16": "uint16_t", "f32": "float"}
SPEC_KEYS = ("dtype", "head_dim", "causal", "mask", "chip", "block_m", "block_n", "num_threads")
# Names the generated <name>.h may not take: headers it or its users include (`cuda.h` would
# shadow CUDA's own header for everything compiled next to it).
RESERVED_NAMES = {"cuda", "cuda_runtime", "cuda_runtime_api", "cudaTypedefs", "builtin_types",
                  "vector_types", "stdint", "stddef", "stdlib", "stdio", "string", "pthread",
                  "math", "assert", "errno", "limits", "float", "stdbool", "stdarg", "time",
                  "signal", "setjmp", "locale", "ctype", "wchar", "inttypes", "threads", "complex"}
MAX_NAME = 64


@dataclasses.dataclass(frozen=True)
class AttentionSpec:
    """One specialisation of the attention kernel."""
    dtype: str = "f16"
    head_dim: int = 64
    causal: bool = False
    mask: str = "none"          # "none" or the name of a @tessel.jit mask_mod in the DSL file
    chip: str = "sm_90a"
    block_m: int = 0            # 0: the chip's choice (default_blocks)
    block_n: int = 0
    num_threads: int = 128

    def __post_init__(self):
        dm, dn = default_blocks(self.dtype, self.head_dim, self.chip)
        if not self.block_m:
            object.__setattr__(self, "block_m", dm)
        if not self.block_n:
            object.__setattr__(self, "block_n", dn)

    def function_name(self, prefix):
        parts = [prefix, self.dtype, f"d{self.head_dim}"]
        if self.causal:
            parts.append("causal")
        if self.mask != "none":
            parts.append(self.mask)
        if (self.block_m, self.block_n) != default_blocks(self.dtype, self.head_dim, self.chip):
            parts.append(f"b{self.block_m}x{self.block_n}")
        if self.num_threads != 128:
            parts.append(f"t{self.num_threads}")
        parts.append(self.chip.replace("_", ""))
        return "_".join(parts)


def default_blocks(dtype, head_dim, chip):
    """The blocks of a specialisation that does not name them: tessel.attention's on the GPU for
    the fast paths (f16/bf16, D 64 or 128: wgmma on sm_90a, mma.sync on sm_80), else 16x16 for
    the reference lowering (lengths are run-time arguments, so no length-based choice)."""
    from .attention import GPU_BLOCKS, _FAST_DTYPES
    if dtype in _FAST_DTYPES and (chip, head_dim) in GPU_BLOCKS:
        return GPU_BLOCKS[(chip, head_dim)]
    return 16, 16


def parse_spec(text):
    """`dtype=f16,head_dim=128,causal=1,mask=none,chip=sm_90a` → AttentionSpec."""
    fields = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        if "=" not in part:
            raise ValueError(f"spec '{text}': '{part}' is not key=value")
        k, v = (x.strip() for x in part.split("=", 1))
        k = {"d": "head_dim", "target": "chip"}.get(k, k)
        if k not in SPEC_KEYS:
            raise ValueError(f"spec '{text}': unknown key '{k}' (expected {', '.join(SPEC_KEYS)})")
        if k in fields:
            raise ValueError(f"spec '{text}': {k} is given twice")
        fields[k] = v
    out = {}
    for k, v in fields.items():
        if k in ("head_dim", "block_m", "block_n", "num_threads"):
            if not v.isdigit() or int(v) <= 0:
                raise ValueError(f"spec '{text}': {k} must be a positive integer, got '{v}'")
            out[k] = int(v)
        elif k == "causal":
            if v.lower() not in ("0", "1", "true", "false", "yes", "no"):
                raise ValueError(f"spec '{text}': causal must be 0 or 1, got '{v}'")
            out[k] = v.lower() in ("1", "true", "yes")
        else:
            out[k] = v
    spec = AttentionSpec(**out)     # unnamed blocks: the chip's choice for these fields
    if spec.dtype not in DTYPES:
        raise ValueError(f"spec '{text}': dtype must be one of {', '.join(DTYPES)}")
    if spec.chip not in tcache.CHIPS:
        raise ValueError(f"spec '{text}': chip must be one of {', '.join(tcache.CHIPS)}")
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", spec.mask):
        raise ValueError(f"spec '{text}': mask must name a function")
    return spec


def load_dsl(path):
    """Imports a DSL file as a module (its @tessel.jit functions are traced from its source)."""
    path = pathlib.Path(path).resolve()
    if not path.is_file():
        raise FileNotFoundError(f"no DSL file {path}")
    name = "tessel_aot_" + re.sub(r"\W", "_", path.stem)
    module_spec = importlib.util.spec_from_file_location(name, path)
    if module_spec is None:
        raise ValueError(f"{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(module_spec)
    sys.modules[name] = module
    try:
        module_spec.loader.exec_module(module)
    except Exception as err:    # the user's file: any error is theirs, reported as a message
        sys.modules.pop(name, None)
        if isinstance(err, SyntaxError):
            where = f"{err.filename}:{err.lineno}: " if err.lineno else ""
            raise ValueError(f"cannot import {path}: {where}{err.msg}") from None
        raise ValueError(f"cannot import {path}: {type(err).__name__}: {err}") from None
    return module


def trace(module, spec, kernel_name="attention_kernel"):
    """The CompiledKernel of `spec` (traced, not yet compiled for the GPU)."""
    kernel = getattr(module, kernel_name, None)
    if not isinstance(kernel, JITFunction):
        raise ValueError(f"{module.__file__} has no @tessel.jit function '{kernel_name}'")
    mask_mod = None
    if spec.mask != "none":
        mask_mod = getattr(module, spec.mask, None)
        if mask_mod is None:
            raise ValueError(f"{module.__file__} has no mask_mod '{spec.mask}'")
        if not isinstance(mask_mod, JITFunction):
            raise ValueError(f"mask '{spec.mask}' must be a @tessel.jit function")
    t = DTYPES[spec.dtype]
    empty = np.empty(0, t)
    # The scale is the library's run-time argument: -1.0 keys the kernel for any float, not
    # the JIT's "moderate" specialisation (runtime.float_range), which a caller could break.
    args = (empty, empty, empty, empty, np.empty(0, np.float32), 1, 1, 1, 1, -1.0)
    constexprs = dict(D=spec.head_dim, BLOCK_M=spec.block_m, BLOCK_N=spec.block_n,
                      CAUSAL=spec.causal, SCORE_MOD=None, MASK_MOD=mask_mod)
    import inspect
    try:
        inspect.signature(kernel.fn).bind(*args, **constexprs)
    except TypeError as err:
        raise ValueError(f"'{kernel_name}' of {module.__file__} does not take the attention "
                         f"kernel's arguments (q, k, v, o, lse, nq, nk, H, HKV, scale, D, "
                         f"BLOCK_M, BLOCK_N, CAUSAL, SCORE_MOD, MASK_MOD): {err}") from None
    compiled = kernel.warmup(*args, **constexprs)
    if compiled.captures:
        names = ", ".join(c.name for c in compiled.captures)
        raise ValueError(f"'{spec.mask}' reads captured tensors ({names}): AOT libraries have "
                         "no arguments for them yet; use the JIT (tessel.attention)")
    return compiled


def _c_bytes(data, indent="  ", per_line=16):
    lines = []
    for i in range(0, len(data), per_line):
        lines.append(indent + ", ".join(f"0x{b:02x}" for b in data[i:i + per_line]) + ",")
    return "\n".join(lines)


PARAMS = ("CUstream stream, const void *q, const void *k, const void *v, void *o, void *lse, "
          "int32_t batch, int32_t heads, int32_t heads_kv, int32_t nq, int32_t nk, float scale")


def _header(name, entries):
    guard = re.sub(r"\W", "_", name).upper() + "_H"
    decls = []
    for e in entries:
        s = e["spec"]
        decls.append(f"""/* {s.dtype} q/k/v/o, head dim {s.head_dim}, {'causal' if s.causal else 'not causal'}, \
mask {s.mask}, {s.chip}; blocks {s.block_m}x{s.block_n}, {e['block'][0]} threads, \
{e['dynamic_shared_bytes']} bytes dynamic shared memory. */
int {e['function']}({PARAMS});""")
    return f"""/* {name}.h - attention kernels compiled ahead of time by tessel {VERSION}. Generated: do not edit.
 *
 * Every launch function runs O = softmax(Q K^T * scale [+ mask]) V on `stream`:
 *   q, o    [batch, heads,    nq, D] of the kernel's element type (device memory, contiguous)
 *   k, v    [batch, heads_kv, nk, D]
 *   lse     [batch, heads,    nq] float (natural log-sum-exp of each row; -inf for empty rows)
 *   scale   the softmax scale; pass 0 for 1/sqrt(D)
 * heads must be a multiple of heads_kv (grouped-query attention). Each array must have fewer
 * than 2^31 elements (the kernels index with 32-bit integers).
 *
 * The first call of a function loads its cubin into the CUDA context current on the calling
 * thread (one load per process; a failed load is retried on the next call). Returns 0
 * (CUDA_SUCCESS) or a CUresult error code; nothing aborts. {name}_unload() unloads them all.
 */
#ifndef {guard}
#define {guard}

#include <cuda.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {{
#endif

{chr(10).join(decls)}

/* Unloads every module loaded by the functions above (from the current context). */
int {name}_unload(void);

#ifdef __cplusplus
}}
#endif

#endif /* {guard} */
"""


def _source(name, entries):
    images, tables, funcs = [], [], []
    for i, e in enumerate(entries):
        s = e["spec"]
        images.append(f"/* {e['function']}: {len(e['cubin'])} bytes, sha256 {e['cubin_sha256']} */\n"
                      f"TESSEL_ALIGN16 static const unsigned char {name}_image_{i}[] = {{\n"
                      f"{_c_bytes(e['cubin'])}\n}};")
        tables.append(f"  {{{name}_image_{i}, \"{e['entry']}\", {e['dynamic_shared_bytes']}, "
                      f"{e['block'][0]}, {e['block'][1]}, {e['block'][2]}, 0, 0, 0}},")
        scale = repr(float(1.0 / math.sqrt(s.head_dim)))
        funcs.append(f"""int {e['function']}({PARAMS}) {{
  return {name}_launch(&{name}_kernels[{i}], {s.block_m}, {s.head_dim}, {scale}f, stream, q, k, v,
                       o, lse, batch, heads, heads_kv, nq, nk, scale);
}}""")
    return f"""/* {name}.c - attention kernels compiled ahead of time by tessel {VERSION}. Generated: do not edit.
 * The cubins are embedded below; they are loaded through the CUDA driver API on first use.
 * Compiles as C11 and as C++17; link with -lcuda (and -lpthread on old glibc). */
#include "{name}.h"

#include <pthread.h>
#include <stddef.h>

#ifdef __cplusplus
#define TESSEL_ALIGN16 alignas(16)
#else
#define TESSEL_ALIGN16 _Alignas(16)
#endif

{chr(10).join(images)}

struct {name}_kernel {{
  const unsigned char *image;
  const char *entry;
  int dynamic_shared_bytes;
  unsigned block_x, block_y, block_z;
  int loaded; /* read with acquire, written with release, under the lock */
  CUmodule module;
  CUfunction function;
}};

static struct {name}_kernel {name}_kernels[] = {{
{chr(10).join(tables)}
}};

static pthread_mutex_t {name}_lock = PTHREAD_MUTEX_INITIALIZER;

/* Loads the kernel's module once; a failure is returned and retried on the next call. */
static CUresult {name}_load(struct {name}_kernel *kernel) {{
  CUresult result = CUDA_SUCCESS;
  if (__atomic_load_n(&kernel->loaded, __ATOMIC_ACQUIRE))
    return CUDA_SUCCESS;
  if (pthread_mutex_lock(&{name}_lock) != 0)
    return CUDA_ERROR_UNKNOWN;
  if (!kernel->loaded) {{
    CUmodule module = NULL;
    CUfunction function = NULL;
    result = cuModuleLoadData(&module, kernel->image);
    if (result == CUDA_SUCCESS)
      result = cuModuleGetFunction(&function, module, kernel->entry);
    if (result == CUDA_SUCCESS && kernel->dynamic_shared_bytes > 48 * 1024)
      result = cuFuncSetAttribute(function, CU_FUNC_ATTRIBUTE_MAX_DYNAMIC_SHARED_SIZE_BYTES,
                                  kernel->dynamic_shared_bytes);
    if (result == CUDA_SUCCESS) {{
      kernel->module = module;
      kernel->function = function;
      __atomic_store_n(&kernel->loaded, 1, __ATOMIC_RELEASE);
    }} else if (module != NULL) {{
      cuModuleUnload(module);
    }}
  }}
  pthread_mutex_unlock(&{name}_lock);
  return result;
}}

static int {name}_launch(struct {name}_kernel *kernel, int block_m, int head_dim,
                         float default_scale, CUstream stream, const void *q, const void *k,
                         const void *v, void *o, void *lse, int32_t batch, int32_t heads,
                         int32_t heads_kv, int32_t nq, int32_t nk, float scale) {{
  const int64_t limit = 2147483647;
  CUresult result;
  unsigned grid_x, grid_y;
  void *args[10];
  if (batch < 0 || heads <= 0 || heads_kv <= 0 || heads % heads_kv != 0 || nq < 0 || nk < 0)
    return CUDA_ERROR_INVALID_VALUE;
  if ((int64_t)batch * heads * nq * head_dim > limit ||
      (int64_t)batch * heads_kv * nk * head_dim > limit || (int64_t)batch * heads > 65535)
    return CUDA_ERROR_INVALID_VALUE;
  if (batch == 0 || nq == 0)
    return CUDA_SUCCESS;
  if (q == NULL || k == NULL || v == NULL || o == NULL || lse == NULL)
    return CUDA_ERROR_INVALID_VALUE;
  if (!(scale > 0.0f))
    scale = default_scale;
  result = {name}_load(kernel);
  if (result != CUDA_SUCCESS)
    return result;
  grid_x = (unsigned)((nq + block_m - 1) / block_m);
  grid_y = (unsigned)(batch * heads);
  /* The kernel's parameters: q, k, v, o, lse (pointers), nq, nk, heads, heads_kv, scale. */
  args[0] = (void *)&q;
  args[1] = (void *)&k;
  args[2] = (void *)&v;
  args[3] = (void *)&o;
  args[4] = (void *)&lse;
  args[5] = (void *)&nq;
  args[6] = (void *)&nk;
  args[7] = (void *)&heads;
  args[8] = (void *)&heads_kv;
  args[9] = (void *)&scale;
  return cuLaunchKernel(kernel->function, grid_x, grid_y, 1, kernel->block_x, kernel->block_y,
                        kernel->block_z, (unsigned)kernel->dynamic_shared_bytes, stream, args,
                        NULL);
}}

{(chr(10) * 2).join(funcs)}

int {name}_unload(void) {{
  CUresult first = CUDA_SUCCESS;
  size_t i;
  if (pthread_mutex_lock(&{name}_lock) != 0)
    return CUDA_ERROR_UNKNOWN;
  for (i = 0; i < sizeof {name}_kernels / sizeof {name}_kernels[0]; ++i) {{
    struct {name}_kernel *kernel = &{name}_kernels[i];
    if (kernel->loaded) {{
      CUresult r = cuModuleUnload(kernel->module);
      if (first == CUDA_SUCCESS)
        first = r;
      __atomic_store_n(&kernel->loaded, 0, __ATOMIC_RELEASE);
      kernel->module = NULL;
      kernel->function = NULL;
    }}
  }}
  pthread_mutex_unlock(&{name}_lock);
  return first;
}}
"""


def check_name(name):
    """Refuses a --name that is no C identifier, too long, or the name of a header."""
    if not re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
        raise ValueError(f"--name must be a C identifier, got '{name}'")
    if len(name) > MAX_NAME:
        raise ValueError(f"--name must be at most {MAX_NAME} characters, got {len(name)}")
    if name in RESERVED_NAMES or name.startswith("cuda"):
        raise ValueError(f"--name {name} would write {name}.h, which shadows a system or CUDA "
                         "header: choose another name (e.g. my_" + name + ")")


def _check_output_directory(out):
    """Refuses an output path that is a file or cannot be written, before anything is compiled."""
    if out.exists() and not out.is_dir():
        raise ValueError(f"-o {out}: not a directory")
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"-o {out}: cannot create the directory ({err.strerror})") from None
    if not os.access(out, os.W_OK | os.X_OK):
        raise ValueError(f"-o {out}: the directory is not writable")


def compile_specs(dsl_file, specs, out_dir, name="tessel_attention", kernel_name="attention_kernel",
                  progress=None):
    """Writes the cubins, PTX, header, C source and manifest; returns the manifest (a dict).

    Everything is written into a temporary directory inside `out_dir` and moved into place only
    once every specialisation has compiled: a failure leaves `out_dir` as it was, and a rerun
    never leaves an old header beside new cubins. `progress(i, n, function, chip)`, when given,
    is called before each of the n compiles (the CLI prints a line each)."""
    import shutil
    import tempfile
    check_name(name)
    if not specs:
        raise ValueError("give at least one --spec")
    module = load_dsl(dsl_file)
    out = pathlib.Path(out_dir)
    _check_output_directory(out)
    try:
        stage = pathlib.Path(tempfile.mkdtemp(prefix=".tessel-aot-", dir=out))
    except OSError as err:
        raise ValueError(f"-o {out}: cannot write into it ({err.strerror})") from None
    try:
        manifest = _write_outputs(module, dsl_file, specs, stage, name, kernel_name, progress)
        (out / "kernels").mkdir(exist_ok=True)
        files = sorted(p.relative_to(stage) for p in stage.rglob("*") if p.is_file())
        # The header last: whoever includes it finds the sources and cubins it describes.
        files.sort(key=lambda p: p.name == f"{name}.h")
        for rel in files:
            os.replace(stage / rel, out / rel)
    except OSError as err:
        raise ValueError(f"-o {out}: cannot write the outputs ({err})") from None
    finally:
        shutil.rmtree(stage, ignore_errors=True)
    return manifest


def _write_outputs(module, dsl_file, specs, out, name, kernel_name, progress=None):
    """compile_specs' work, writing into `out` (the staging directory)."""
    from .attention import GPU_STAGES
    (out / "kernels").mkdir(parents=True, exist_ok=True)
    entries, seen = [], set()
    functions = list(dict.fromkeys(spec.function_name(name) for spec in specs))
    for spec in specs:
        function = spec.function_name(name)
        if function in seen:
            continue
        seen.add(function)
        if progress is not None:
            progress(len(seen), len(functions), function, spec.chip)
        kernel = trace(module, spec, kernel_name)
        # The ring tessel.attention gives these blocks (attention.GPU_STAGES).
        stages = GPU_STAGES.get((spec.chip, spec.head_dim, spec.block_m, spec.block_n), 2)
        gpu = tcache.GpuOptions(chip=spec.chip, num_threads=spec.num_threads, num_stages=stages)
        binary = kernel.binary(gpu)
        cubin_path = out / "kernels" / f"{function}.cubin"
        ptx_path = out / "kernels" / f"{function}.ptx"
        cubin_path.write_bytes(binary.cubin)
        ptx_path.write_text(binary.ptx)
        entries.append({
            "spec": spec, "function": function, "entry": binary.name, "cubin": binary.cubin,
            "cubin_sha256": hashlib.sha256(binary.cubin).hexdigest(), "block": binary.block,
            "dynamic_shared_bytes": binary.dynamic_shared_bytes, "key": binary.key,
            "registers": binary.manifest.get("registers", 0),
        })
    (out / f"{name}.h").write_text(_header(name, entries))
    (out / f"{name}.c").write_text(_source(name, entries))
    manifest = {
        "tessel": tcache.tessel_version(),
        "dsl": str(pathlib.Path(dsl_file).name),
        "header": f"{name}.h",
        "source": f"{name}.c",
        "kernels": [{
            "function": e["function"], "entry": e["entry"],
            **{k: getattr(e["spec"], k) for k in ("dtype", "head_dim", "causal", "mask", "chip",
                                                  "block_m", "block_n", "num_threads")},
            "block": list(e["block"]), "dynamic_shared_bytes": e["dynamic_shared_bytes"],
            "registers": e["registers"], "cache_key": e["key"],
            "cubin": f"kernels/{e['function']}.cubin", "ptx": f"kernels/{e['function']}.ptx",
            "cubin_sha256": e["cubin_sha256"],
            "arguments": ["stream", "q", "k", "v", "o", "lse", "batch", "heads", "heads_kv",
                          "nq", "nk", "scale"],
        } for e in entries],
    }
    (out / f"{name}.json").write_text(json.dumps(manifest, indent=2) + "\n")
    return manifest
