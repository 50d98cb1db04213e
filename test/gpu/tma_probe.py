"""In-kernel TMA, probed (docs/dev/notes/2026-12-04-tma-ptx.md): one CTA builds a 2-D tensor
map of an f16/bf16 `[rows, 128]` tensor in shared memory (`tensormap.replace`, no host
template), publishes it to global scratch (`tensormap.cp_fenceproxy`), loads a 128-row × 64-column
box through it into shared memory (`cp.async.bulk.tensor` on an `expect_tx` mbarrier) and copies
the box's bytes out as they landed; the host undoes the 128-byte swizzle and compares with the
source. It settles the field values ptxas cannot check — the rank's encoding and the element
type codes (an immediate each, so one cubin a code; the swizzle's 3 = 128 bytes) — by trying
the candidates and reporting which reproduce the box, and a box past the last row (zero
fill).

    PYTHONPATH=<bundle>/python python3 test/gpu/tma_probe.py      # needs torch, ptxas, sm_90

Prints one line per candidate and exits 1 if no candidate reproduces the box."""
import ctypes
import os
import subprocess
import sys
import tempfile

# The rank field holds the number of dims minus one: settled on the H200 (2026-12-04, run 1 of
# bench/results/2026-12-04-h200-s19: rank 1 reproduced a 2-D box, rank 2 faulted with 715).
RANK = 1

PTX = r"""
.version 8.3
.target sm_90a
.address_size 64
.extern .shared .align 1024 .b8 smem[];
.visible .entry probe(.param .u64 scratch, .param .u64 src, .param .u32 rows, .param .u64 dst,
                      .param .u32 rankv, .param .u32 y0)
{
  .reg .b64 %rd<12>;
  .reg .b32 %r<24>;
  .reg .pred %p<4>;
  ld.param.u64 %rd1, [scratch];
  ld.param.u64 %rd2, [src];
  ld.param.u32 %r2, [rows];
  ld.param.u64 %rd4, [dst];
  ld.param.u32 %r11, [rankv];
  ld.param.u32 %r13, [y0];
  mov.u32 %r0, %tid.x;
  mov.u32 %r1, smem;
  setp.ne.u32 %p0, %r0, 0;
  @%p0 bra BUILT;
  mov.b32 %r9, 0;
  st.shared.v4.b32 [%r1], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+16], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+32], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+48], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+64], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+80], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+96], {%r9, %r9, %r9, %r9};
  st.shared.v4.b32 [%r1+112], {%r9, %r9, %r9, %r9};
  tensormap.replace.tile.global_address.shared::cta.b1024.b64 [%r1], %rd2;
  tensormap.replace.tile.rank.shared::cta.b1024.b32 [%r1], %r11;
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r1], 0, 64;
  tensormap.replace.tile.box_dim.shared::cta.b1024.b32 [%r1], 1, 128;
  tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r1], 0, 128;
  tensormap.replace.tile.global_dim.shared::cta.b1024.b32 [%r1], 1, %r2;
  mov.b64 %rd3, 256;
  tensormap.replace.tile.global_stride.shared::cta.b1024.b64 [%r1], 0, %rd3;
  tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r1], 0, 1;
  tensormap.replace.tile.element_stride.shared::cta.b1024.b32 [%r1], 1, 1;
  tensormap.replace.tile.elemtype.shared::cta.b1024.b32 [%r1], ELEMTYPE;
  tensormap.replace.tile.interleave_layout.shared::cta.b1024.b32 [%r1], 0;
  tensormap.replace.tile.swizzle_mode.shared::cta.b1024.b32 [%r1], 3;
  tensormap.replace.tile.fill_mode.shared::cta.b1024.b32 [%r1], 0;
BUILT:
  bar.sync 0;
  setp.ge.u32 %p1, %r0, 32;
  @%p1 bra PUBLISHED;
  tensormap.cp_fenceproxy.global.shared::cta.tensormap::generic.release.gpu.sync.aligned [%rd1], [%r1], 128;
PUBLISHED:
  add.u32 %r5, %r1, 128;
  @%p0 bra READY;
  fence.proxy.tensormap::generic.acquire.gpu [%rd1], 128;
  mbarrier.init.shared::cta.b64 [%r5], 1;
  fence.mbarrier_init.release.cluster;
READY:
  bar.sync 0;
  add.u32 %r6, %r1, 1024;
  @%p0 bra ISSUED;
  mbarrier.arrive.expect_tx.shared::cta.b64 %rd5, [%r5], 16384;
  mov.b32 %r7, 0;
  cp.async.bulk.tensor.2d.shared::cluster.global.tile.mbarrier::complete_tx::bytes [%r6], [%rd1, {%r7, %r13}], [%r5];
ISSUED:
WAIT:
  mbarrier.try_wait.parity.shared::cta.b64 %p2, [%r5], 0;
  @!%p2 bra WAIT;
  // 16 KB out, 128 bytes a thread, as they sit in shared memory.
  shl.b32 %r14, %r0, 7;
  add.u32 %r15, %r6, %r14;
  cvt.u64.u32 %rd6, %r14;
  add.u64 %rd7, %rd4, %rd6;
  mov.u32 %r16, 0;
COPY:
  ld.shared.v4.b32 {%r17, %r18, %r19, %r20}, [%r15];
  st.global.v4.b32 [%rd7], {%r17, %r18, %r19, %r20};
  add.u32 %r15, %r15, 16;
  add.u64 %rd7, %rd7, 16;
  add.u32 %r16, %r16, 1;
  setp.lt.u32 %p3, %r16, 8;
  @%p3 bra COPY;
  ret;
}
"""


def unswizzle(raw, rows=128, row_bytes=128):
    """The box's rows as stored without the 128-byte swizzle: chunk c of row r sits at chunk
    c ^ (r % 8)."""
    out = bytearray(len(raw))
    for r in range(rows):
        for c in range(row_bytes // 16):
            s = r * row_bytes + ((c ^ (r % 8)) * 16)
            out[r * row_bytes + c * 16:r * row_bytes + c * 16 + 16] = raw[s:s + 16]
    return bytes(out)


def hopper_torch():
    """torch where an sm_90 GPU is there to probe, else None (the reason printed)."""
    try:
        import torch
    except ImportError:
        print("tma_probe: no torch")
        return None
    if not torch.cuda.is_available() or torch.cuda.get_device_capability() < (9, 0):
        print("tma_probe: needs an sm_90 GPU")
        return None
    return torch


def main():
    torch = hopper_torch()
    if torch is None:
        return 0
    torch.zeros(1, device="cuda")                       # the primary context, current
    cuda = ctypes.CDLL("libcuda.so.1")

    def kernel(code):
        """The probe with element type code `code` (an immediate: ptxas wants one)."""
        with tempfile.TemporaryDirectory() as d:
            ptx, cubin = os.path.join(d, "p.ptx"), os.path.join(d, "p.cubin")
            open(ptx, "w").write(PTX.replace("ELEMTYPE", str(code)))
            subprocess.run(["ptxas", "-arch=sm_90a", ptx, "-o", cubin], check=True)
            image = open(cubin, "rb").read()
        module, func = ctypes.c_void_p(), ctypes.c_void_p()
        assert cuda.cuModuleLoadData(ctypes.byref(module), image) == 0
        assert cuda.cuModuleGetFunction(ctypes.byref(func), module, b"probe") == 0
        return func

    rows = 300
    dtype_name, code = sys.argv[1], int(sys.argv[2])
    dtype = getattr(torch, dtype_name)
    src = torch.randn(rows, 128, device="cuda").to(dtype)
    func = kernel(code)
    found = False
    for y0 in (64, 256):                                # inside; past the last row (zeros)
        scratch = torch.zeros(128, dtype=torch.uint8, device="cuda")
        dst = torch.zeros(128 * 64, dtype=dtype, device="cuda")
        args = [ctypes.c_uint64(scratch.data_ptr()), ctypes.c_uint64(src.data_ptr()),
                ctypes.c_uint32(rows), ctypes.c_uint64(dst.data_ptr()),
                ctypes.c_uint32(RANK), ctypes.c_uint32(y0)]
        params = (ctypes.c_void_p * len(args))(
            *[ctypes.cast(ctypes.byref(a), ctypes.c_void_p) for a in args])
        rc = cuda.cuLaunchKernel(func, 1, 1, 1, 128, 1, 1, 2048 + 16384, None, params, None)
        rc = rc or cuda.cuCtxSynchronize()
        if rc:
            print(f"{dtype_name:>8} elemtype {code:2} y0 {y0:3}: CUDA error {rc}")
            return 1                                    # a fault leaves the context unusable
        raw = dst.view(torch.uint8).cpu().numpy().tobytes()
        got = torch.frombuffer(bytearray(unswizzle(raw)), dtype=dtype).view(128, 64)
        want = torch.zeros(128, 64, dtype=dtype)
        have = src[y0:y0 + 128, :64].cpu()
        want[:have.shape[0]] = have
        ok = torch.equal(got, want)
        found |= ok
        print(f"{dtype_name:>8} elemtype {code:2} y0 {y0:3}: "
              f"{'reproduces the box' if ok else 'differs'}")
    return 0 if found else 1


def each_candidate():
    """Every (dtype, element type code) in a process of its own: a wrong code may fault, and a
    fault leaves the CUDA context unusable. Without an sm_90 GPU, nothing to probe (0)."""
    if hopper_torch() is None:
        return 0
    found = set()
    for dtype, codes in (("float16", (6, 1)), ("bfloat16", (9, 10, 1))):
        for code in codes:
            run = subprocess.run([sys.executable, __file__, dtype, str(code)],
                                 capture_output=True, text=True)
            print(run.stdout + run.stderr, end="", flush=True)
            if run.returncode == 0 and "reproduces" in run.stdout:
                found.add(dtype)
    print("element type codes found for:", sorted(found))
    return 0 if found == {"float16", "bfloat16"} else 1


if __name__ == "__main__":
    sys.exit(main() if len(sys.argv) == 3 else each_candidate())
