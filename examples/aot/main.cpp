//===- main.cpp - run tessel's ahead-of-time attention kernels ------------===//
//
// A C++ program that uses attention kernels compiled ahead of time by `python -m tessel aot`:
// it includes the generated header, links the generated C source and libcuda only (no tessel,
// no CUDA runtime), runs each kernel on random half-precision inputs and checks O and the
// log-sum-exp against a float64 CPU reference. Build and run: examples/aot/build.sh.
//
//===----------------------------------------------------------------------===//

#include "tessel_attention.h"

#include <cuda.h>

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <random>
#include <vector>

namespace {
using LaunchFn = int (*)(CUstream, const void *, const void *, const void *, void *, void *,
                         int32_t, int32_t, int32_t, int32_t, int32_t, float);

uint16_t toHalf(float f) {
  uint32_t x;
  std::memcpy(&x, &f, 4);
  uint32_t sign = (x >> 16) & 0x8000u;
  int32_t exp = int32_t((x >> 23) & 0xff) - 127 + 15;
  uint32_t mant = x & 0x7fffffu;
  if (exp <= 0) { // subnormal or zero (inputs here are in [-1, 1]: round to nearest even)
    if (exp < -10)
      return uint16_t(sign);
    mant |= 0x800000u;
    uint32_t shift = uint32_t(14 - exp);
    uint32_t half = mant >> shift;
    uint32_t rest = mant & ((1u << shift) - 1), mid = 1u << (shift - 1);
    if (rest > mid || (rest == mid && (half & 1)))
      ++half;
    return uint16_t(sign | half);
  }
  if (exp >= 31)
    return uint16_t(sign | 0x7c00u);
  uint32_t half = sign | (uint32_t(exp) << 10) | (mant >> 13);
  uint32_t rest = mant & 0x1fffu;
  if (rest > 0x1000u || (rest == 0x1000u && (half & 1)))
    ++half;
  return uint16_t(half);
}

float fromHalf(uint16_t h) {
  uint32_t sign = uint32_t(h & 0x8000u) << 16, exp = (h >> 10) & 0x1f, mant = h & 0x3ffu;
  float f;
  if (exp == 0)
    f = std::ldexp(float(mant), -24);
  else if (exp == 31)
    f = mant ? NAN : INFINITY;
  else
    f = std::ldexp(float(mant | 0x400u), int(exp) - 25);
  uint32_t bits;
  std::memcpy(&bits, &f, 4);
  bits |= sign;
  std::memcpy(&f, &bits, 4);
  return f;
}

#define CHECK(call)                                                                                \
  do {                                                                                             \
    CUresult r_ = (call);                                                                          \
    if (r_ != CUDA_SUCCESS) {                                                                      \
      const char *s_ = nullptr;                                                                    \
      cuGetErrorString(r_, &s_);                                                                   \
      std::fprintf(stderr, "%s failed: %s\n", #call, s_ ? s_ : "?");                               \
      return false;                                                                                \
    }                                                                                              \
  } while (0)

struct Case {
  const char *name;
  LaunchFn fn;
  int headDim;
  bool causal;
};

/// Runs one kernel on B x H x N x D inputs and compares with float64 on the host.
bool runCase(const Case &c, std::mt19937 &rng) {
  const int B = 2, H = 4, HKV = 2, NQ = 100, NK = 130, D = c.headDim;
  const size_t nq = size_t(B) * H * NQ * D, nk = size_t(B) * HKV * NK * D;
  std::uniform_real_distribution<float> dist(-1.f, 1.f);
  std::vector<uint16_t> q(nq), k(nk), v(nk), o(nq);
  std::vector<float> lse(size_t(B) * H * NQ);
  for (auto *buf : {&q, &k, &v})
    for (uint16_t &x : *buf)
      x = toHalf(dist(rng));
  CUdeviceptr dq, dk, dv, dout, dlse;
  CHECK(cuMemAlloc(&dq, nq * 2));
  CHECK(cuMemAlloc(&dk, nk * 2));
  CHECK(cuMemAlloc(&dv, nk * 2));
  CHECK(cuMemAlloc(&dout, nq * 2));
  CHECK(cuMemAlloc(&dlse, lse.size() * 4));
  CHECK(cuMemcpyHtoD(dq, q.data(), nq * 2));
  CHECK(cuMemcpyHtoD(dk, k.data(), nk * 2));
  CHECK(cuMemcpyHtoD(dv, v.data(), nk * 2));
  CHECK(cuMemsetD8(dout, 0xff, nq * 2)); // NaN: an element the kernel forgets cannot look right
  auto ptr = [](CUdeviceptr p) { return reinterpret_cast<void *>(static_cast<uintptr_t>(p)); };
  CHECK(CUresult(
      c.fn(nullptr, ptr(dq), ptr(dk), ptr(dv), ptr(dout), ptr(dlse), B, H, HKV, NQ, NK, 0.0f)));
  CHECK(cuCtxSynchronize());
  CHECK(cuMemcpyDtoH(o.data(), dout, nq * 2));
  CHECK(cuMemcpyDtoH(lse.data(), dlse, lse.size() * 4));
  // A bad argument is an error code, not a crash.
  int bad = c.fn(nullptr, ptr(dq), ptr(dk), ptr(dv), ptr(dout), ptr(dlse), B, 3, HKV, NQ, NK, 0);
  for (CUdeviceptr p : {dq, dk, dv, dout, dlse})
    cuMemFree(p);

  const double scale = 1.0 / std::sqrt(double(D));
  double maxErr = 0, maxLseErr = 0;
  std::vector<double> s(NK);
  for (int b = 0; b < B; ++b)
    for (int h = 0; h < H; ++h) {
      int kh = h / (H / HKV);
      for (int i = 0; i < NQ; ++i) {
        const uint16_t *qi = &q[((size_t(b) * H + h) * NQ + i) * D];
        double m = -INFINITY;
        for (int j = 0; j < NK; ++j) {
          const uint16_t *kj = &k[((size_t(b) * HKV + kh) * NK + j) * D];
          double dot = 0;
          for (int d = 0; d < D; ++d)
            dot += double(fromHalf(qi[d])) * fromHalf(kj[d]);
          s[j] = (c.causal && j > i) ? -INFINITY : dot * scale;
          m = std::max(m, s[j]);
        }
        double l = 0;
        for (int j = 0; j < NK; ++j)
          l += std::isinf(s[j]) ? 0 : std::exp(s[j] - m);
        for (int d = 0; d < D; ++d) {
          double acc = 0;
          for (int j = 0; j < NK; ++j)
            if (!std::isinf(s[j]))
              acc += std::exp(s[j] - m) / l *
                     fromHalf(v[((size_t(b) * HKV + kh) * NK + j) * D + d]);
          double got = fromHalf(o[((size_t(b) * H + h) * NQ + i) * D + d]);
          maxErr = std::max(maxErr, std::isnan(got) ? INFINITY : std::fabs(got - acc));
        }
        double gotLse = lse[(size_t(b) * H + h) * NQ + i];
        maxLseErr = std::max(maxLseErr, std::fabs(gotLse - (m + std::log(l))));
      }
    }
  bool ok = maxErr < 1e-2 && maxLseErr < 1e-3 && bad == CUDA_ERROR_INVALID_VALUE;
  std::printf("%-44s max |O - ref| %.2e, max |lse - ref| %.2e, bad heads -> %d: %s\n", c.name,
              maxErr, maxLseErr, bad, ok ? "ok" : "FAIL");
  return ok;
}
} // namespace

int main() {
  CUdevice dev;
  CUcontext ctx;
  int major = 0, minor = 0;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS) {
    std::fprintf(stderr, "no CUDA device\n");
    return 2;
  }
  cuDeviceGetAttribute(&major, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, dev);
  cuDeviceGetAttribute(&minor, CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, dev);
  if (cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS)
    return 2;
  // A cubin runs only on its own architecture family: sm_90a on compute capability 9.0, sm_80
  // on 8.x (an sm_80 cubin does not run on 9.0 — only PTX would, through the driver's JIT).
  bool hopper = major == 9 && minor == 0;
  bool ampere = major == 8;
  std::vector<Case> cases;
  if (hopper) {
    cases.push_back(
        {"tessel_attention_f16_d64_causal_sm90a", tessel_attention_f16_d64_causal_sm90a, 64, true});
    cases.push_back(
        {"tessel_attention_f16_d128_sm90a", tessel_attention_f16_d128_sm90a, 128, false});
  }
  if (ampere) {
    cases.push_back(
        {"tessel_attention_f16_d64_causal_sm80", tessel_attention_f16_d64_causal_sm80, 64, true});
    cases.push_back({"tessel_attention_f16_d128_sm80", tessel_attention_f16_d128_sm80, 128, false});
  }
  if (cases.empty()) {
    std::printf("SKIP: no kernel of this example targets compute capability %d.%d\n", major, minor);
    return 0;
  }
  std::mt19937 rng(1234);
  bool ok = true;
  for (const Case &c : cases)
    ok = runCase(c, rng) && ok;
  int unload = tessel_attention_unload();
  cuDevicePrimaryCtxRelease(dev);
  std::printf("%s (compute capability %d.%d)\n", ok && unload == 0 ? "PASS" : "FAIL", major, minor);
  return ok && unload == 0 ? 0 : 1;
}
