//===- Buffer.cpp - host buffers and kernel arguments of the interpreter ---===//
//
// Buffers hold elements exactly as the GPU does (e4m3fn, f16, bf16 as bit patterns, little-endian);
// get and set convert to and from double, rounding on the way in.
//
//===----------------------------------------------------------------------===//

#include "tessel/Interpreter/Interpreter.h"
#include "tessel/Interpreter/Rounding.h"

#include "mlir/IR/BuiltinTypes.h"

#include "llvm/Support/Endian.h"

#include <cmath>
#include <cstring>

using namespace mlir;
using namespace tessel::interp;
namespace endian = llvm::support::endian;

//===----------------------------------------------------------------------===//
// Buffers and kernel arguments
//===----------------------------------------------------------------------===//

llvm::StringRef tessel::interp::elementKindName(ElementKind kind) {
  switch (kind) {
  case ElementKind::F8E4M3: return "f8e4m3fn";
  case ElementKind::F16: return "f16";
  case ElementKind::BF16: return "bf16";
  case ElementKind::F32: return "f32";
  case ElementKind::I32: return "i32";
  }
  return "?";
}

std::optional<ElementKind> tessel::interp::elementKindOf(Type type) {
  if (isa<Float8E4M3FNType>(type))
    return ElementKind::F8E4M3;
  if (type.isF16())
    return ElementKind::F16;
  if (type.isBF16())
    return ElementKind::BF16;
  if (type.isF32())
    return ElementKind::F32;
  if (type.isInteger(32))
    return ElementKind::I32;
  return std::nullopt;
}

unsigned tessel::interp::elementSize(ElementKind kind) {
  if (kind == ElementKind::F8E4M3)
    return 1;
  return kind == ElementKind::F16 || kind == ElementKind::BF16 ? 2 : 4;
}

Buffer::Buffer(ElementKind kind, int64_t count)
    : elemKind(kind), count(count < 0 ? 0 : count),
      data(static_cast<size_t>(this->count) * elementSize(kind), 0) {}

double Buffer::get(int64_t i) const {
  const uint8_t *p = data.data() + i * elementSize(elemKind);
  switch (elemKind) {
  case ElementKind::F8E4M3: return doubleFromE4M3Bits(*p);
  case ElementKind::F16: return doubleFromF16Bits(endian::read16le(p));
  case ElementKind::BF16: return doubleFromBF16Bits(endian::read16le(p));
  case ElementKind::F32: {
    uint32_t bits = endian::read32le(p);
    float f;
    std::memcpy(&f, &bits, sizeof f);
    return f;
  }
  case ElementKind::I32: return static_cast<int32_t>(endian::read32le(p));
  }
  return 0.0;
}

void Buffer::set(int64_t i, double v) {
  uint8_t *p = data.data() + i * elementSize(elemKind);
  switch (elemKind) {
  case ElementKind::F8E4M3: *p = e4m3BitsFromDouble(v); return;
  case ElementKind::F16: endian::write16le(p, f16BitsFromDouble(v)); return;
  case ElementKind::BF16: endian::write16le(p, bf16BitsFromDouble(v)); return;
  case ElementKind::F32: {
    float f = static_cast<float>(v);
    uint32_t bits;
    std::memcpy(&bits, &f, sizeof bits);
    endian::write32le(p, bits);
    return;
  }
  case ElementKind::I32: {
    // Truncate toward zero, then wrap to 32 bits; NaN stores 0. Clamp first: converting an
    // out-of-range double to an integer is undefined behaviour in C++.
    double t = std::isnan(v) ? 0.0 : std::trunc(v);
    t = std::fmax(std::fmin(t, 9.0e18), -9.0e18);
    endian::write32le(p, static_cast<uint32_t>(static_cast<int64_t>(t)));
    return;
  }
  }
}

KernelArg KernelArg::ofBuffer(Buffer b) {
  KernelArg a;
  a.kind = Kind::Buffer;
  a.buffer = std::move(b);
  return a;
}

KernelArg KernelArg::ofInt(int64_t v) {
  KernelArg a;
  a.kind = Kind::Int;
  a.intValue = v;
  return a;
}

KernelArg KernelArg::ofFloat(double v) {
  KernelArg a;
  a.kind = Kind::Float;
  a.floatValue = v;
  return a;
}
