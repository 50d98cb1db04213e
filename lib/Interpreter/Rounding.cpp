//===- Rounding.cpp - f8, f16, bf16 and f32 rounding of the interpreter ---===//
//
// One routine rounds a double to a binary floating-point format given by its precision and
// exponent range; one encodes a value of such a format as bits and one decodes bits. f16 and bf16
// are two instances of it. Rounding the double directly (not through float) avoids the double
// rounding that a double → float → half path would suffer.
//
//===----------------------------------------------------------------------===//

#include "tessel/Interpreter/Rounding.h"

#include <algorithm>
#include <cmath>
#include <limits>

using namespace tessel::interp;

namespace {
// A binary floating-point format: `mantissaBits` stored fraction bits, exponent field of
// `exponentBits` bits, so normal exponents are [1 - bias, bias] with bias = 2^(exponentBits-1) - 1.
struct Format {
  int mantissaBits;
  int exponentBits;
  int bias() const { return (1 << (exponentBits - 1)) - 1; }
  int minExponent() const { return 1 - bias(); }
  int maxExponent() const { return bias(); }
};

constexpr Format kF16{10, 5};
constexpr Format kBF16{7, 8};

// Rounds a non-negative finite `a` to a multiple of 2^quantumExp, ties to even. Scaling by a power
// of two is exact in double, and so are floor and the subtraction below.
double roundToQuantum(double a, int quantumExp) {
  double r = std::ldexp(a, -quantumExp);
  double lower = std::floor(r);
  double diff = r - lower;
  if (diff > 0.5 || (diff == 0.5 && std::fmod(lower, 2.0) != 0.0))
    lower += 1.0;
  return std::ldexp(lower, quantumExp);
}

double roundTo(const Format &f, double x) {
  if (std::isnan(x) || std::isinf(x) || x == 0.0)
    return x;
  double a = std::fabs(x);
  int e; // a = m · 2^e with m in [0.5, 1), so the leading bit has weight 2^(e-1)
  std::frexp(a, &e);
  int exponent = e - 1;
  if (exponent < f.minExponent())
    exponent = f.minExponent(); // subnormal: the quantum stays that of the smallest normal
  double rounded = roundToQuantum(a, exponent - f.mantissaBits);
  // Rounding may carry into the next binade; past the largest finite value it overflows.
  if (rounded >= std::ldexp(1.0, f.maxExponent() + 1))
    rounded = std::numeric_limits<double>::infinity();
  return std::copysign(rounded, x);
}

// Bits of `x` after rounding to `f` (at most 16 bits wide here).
uint32_t encode(const Format &f, double x) {
  uint32_t sign = std::signbit(x) ? 1u : 0u;
  uint32_t expAllOnes = (1u << f.exponentBits) - 1;
  uint32_t result;
  if (std::isnan(x)) {
    result = (expAllOnes << f.mantissaBits) | (1u << (f.mantissaBits - 1));
  } else {
    double a = std::fabs(roundTo(f, x));
    if (std::isinf(a)) {
      result = expAllOnes << f.mantissaBits;
    } else if (a < std::ldexp(1.0, f.minExponent())) {
      // Subnormal or zero: the fraction counts quanta of 2^(minExponent - mantissaBits).
      result = static_cast<uint32_t>(std::ldexp(a, f.mantissaBits - f.minExponent()));
    } else {
      int e;
      double m = std::frexp(a, &e); // a = m · 2^e, m in [0.5, 1)
      uint32_t biased = static_cast<uint32_t>(e - 1 + f.bias());
      uint32_t fraction = static_cast<uint32_t>(std::ldexp(m * 2.0 - 1.0, f.mantissaBits));
      result = (biased << f.mantissaBits) | fraction;
    }
  }
  return (sign << (f.exponentBits + f.mantissaBits)) | result;
}

double decode(const Format &f, uint32_t bits) {
  uint32_t fraction = bits & ((1u << f.mantissaBits) - 1);
  uint32_t biased = (bits >> f.mantissaBits) & ((1u << f.exponentBits) - 1);
  bool negative = (bits >> (f.exponentBits + f.mantissaBits)) & 1u;
  double value;
  if (biased == (1u << f.exponentBits) - 1)
    value = fraction ? std::numeric_limits<double>::quiet_NaN()
                     : std::numeric_limits<double>::infinity();
  else if (biased == 0)
    value = std::ldexp(static_cast<double>(fraction), f.minExponent() - f.mantissaBits);
  else
    value = std::ldexp(1.0 + std::ldexp(static_cast<double>(fraction), -f.mantissaBits),
                       static_cast<int>(biased) - f.bias());
  return negative ? -value : value;
}
} // namespace

double tessel::interp::roundToF16(double x) { return roundTo(kF16, x); }
double tessel::interp::roundToBF16(double x) { return roundTo(kBF16, x); }
double tessel::interp::roundToF32(double x) {
  // The C++ conversion rounds to nearest even under the default floating-point environment.
  return static_cast<double>(static_cast<float>(x));
}

uint16_t tessel::interp::f16BitsFromDouble(double x) {
  return static_cast<uint16_t>(encode(kF16, x));
}
double tessel::interp::doubleFromF16Bits(uint16_t bits) { return decode(kF16, bits); }
uint16_t tessel::interp::bf16BitsFromDouble(double x) {
  return static_cast<uint16_t>(encode(kBF16, x));
}
double tessel::interp::doubleFromBF16Bits(uint16_t bits) { return decode(kBF16, bits); }

// e4m3fn (OCP FP8): 3 fraction bits, exponent bias 7, no infinities: the top binade is finite
// up to 448 and 0x7F/0xFF are NaN. Conversions saturate (cvt.rn.satfinite's rule).
namespace {
constexpr int kE4M3MinExponent = -6, kE4M3Fraction = 3;
constexpr double kE4M3Max = 448.0;
} // namespace

double tessel::interp::roundToE4M3(double x) {
  if (std::isnan(x) || x == 0.0)
    return x;
  double a = std::fabs(x);
  if (std::isinf(a))
    return std::copysign(kE4M3Max, x);
  int e;
  std::frexp(a, &e);
  int exponent = std::max(e - 1, kE4M3MinExponent);
  double rounded = std::min(roundToQuantum(a, exponent - kE4M3Fraction), kE4M3Max);
  return std::copysign(rounded, x);
}

uint8_t tessel::interp::e4m3BitsFromDouble(double x) {
  if (std::isnan(x))
    return std::signbit(x) ? 0xFF : 0x7F;
  double r = roundToE4M3(x);
  uint32_t sign = std::signbit(r) ? 0x80u : 0u;
  double a = std::fabs(r);
  if (a < std::ldexp(1.0, kE4M3MinExponent)) // subnormal (or zero): a multiple of 2^-9
    return static_cast<uint8_t>(sign | static_cast<uint32_t>(std::ldexp(a, 9)));
  int e;
  std::frexp(a, &e);
  uint32_t fraction = static_cast<uint32_t>(std::ldexp(a, kE4M3Fraction - (e - 1))) & 7u;
  return static_cast<uint8_t>(sign | static_cast<uint32_t>(e - 1 + 7) << 3 | fraction);
}

double tessel::interp::doubleFromE4M3Bits(uint8_t bits) {
  uint32_t fraction = bits & 7u, biased = (bits >> 3) & 15u;
  double value;
  if (biased == 15 && fraction == 7)
    value = std::numeric_limits<double>::quiet_NaN();
  else if (biased == 0)
    value = std::ldexp(static_cast<double>(fraction), -9);
  else
    value = std::ldexp(8.0 + fraction, static_cast<int>(biased) - 7 - kE4M3Fraction);
  return bits & 0x80u ? -value : value;
}

double tessel::interp::roundToFormat(double x, int mantissaBits, int exponentBits) {
  return roundTo(Format{mantissaBits, exponentBits}, x);
}
