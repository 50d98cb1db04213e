//===- Rounding.h - f16, bf16 and f32 rounding of the interpreter -*- C++ -*-===//
//
// The interpreter computes in double and rounds every result to its element type the way the
// hardware does: round to nearest, ties to even, overflow to infinity, gradual underflow into
// subnormals, NaN kept NaN. These functions do that rounding and convert between doubles and the
// 16-bit patterns that f16 and bf16 buffers hold on the GPU.
//
//===----------------------------------------------------------------------===//

#ifndef TESSEL_INTERPRETER_ROUNDING_H
#define TESSEL_INTERPRETER_ROUNDING_H

#include <cstdint>

namespace tessel::interp {

/// Rounds `x` to the nearest IEEE binary16 value (ties to even); the result is a double.
double roundToF16(double x);
/// Rounds `x` to the nearest bfloat16 value (ties to even); the result is a double.
double roundToBF16(double x);
/// Rounds `x` to the nearest IEEE binary32 value (ties to even); the result is a double.
double roundToF32(double x);

/// Rounds `x` to the nearest FP8 e4m3fn value (ties to even), saturating at ±448 (infinities
/// too: e4m3fn has none, and cvt.rn.satfinite saturates); NaN stays NaN.
double roundToE4M3(double x);
/// The e4m3fn bit pattern of `x` rounded as roundToE4M3 does (NaN: 0x7F with the sign).
uint8_t e4m3BitsFromDouble(double x);
/// The value of an e4m3fn bit pattern.
double doubleFromE4M3Bits(uint8_t bits);

/// Rounds `x` to the binary format with `mantissaBits` fraction bits and `exponentBits` exponent
/// bits (IEEE layout, subnormals, ties to even, overflow to infinity). f16 is (10, 5), bf16 (7, 8),
/// f32 (23, 8). Exposed so tests can check the routine against the hardware's float conversion.
double roundToFormat(double x, int mantissaBits, int exponentBits);

/// The binary16 bit pattern of `x` rounded to f16. NaN becomes the quiet NaN 0x7E00 (with the
/// sign).
uint16_t f16BitsFromDouble(double x);
/// The value of a binary16 bit pattern.
double doubleFromF16Bits(uint16_t bits);
/// The bfloat16 bit pattern of `x` rounded to bf16. NaN becomes the quiet NaN 0x7FC0 (with the
/// sign).
uint16_t bf16BitsFromDouble(double x);
/// The value of a bfloat16 bit pattern.
double doubleFromBF16Bits(uint16_t bits);

} // namespace tessel::interp

#endif // TESSEL_INTERPRETER_ROUNDING_H
