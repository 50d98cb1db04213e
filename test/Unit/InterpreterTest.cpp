//===- InterpreterTest.cpp - the interpreter through its C++ API ----------===//
//
// Rounding to f16 and bf16 on the edge cases (ties, subnormals, largest finite, overflow, NaN)
// and exhaustively against round trips; .npy parsing; and small kernels parsed from strings and
// run through runKernel, checked against references computed here in double.
//
//===----------------------------------------------------------------------===//

#include "tessel/Interpreter/Interpreter.h"
#include "tessel/Interpreter/Npy.h"
#include "tessel/Interpreter/Rounding.h"
#include "tessel/Registration.h"

#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/DialectRegistry.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <random>

using namespace mlir;
using namespace tessel::interp;

namespace {
constexpr double kInf = std::numeric_limits<double>::infinity();

TEST(Rounding, F16EdgeCases) {
  EXPECT_EQ(f16BitsFromDouble(1.0), 0x3C00);
  EXPECT_EQ(f16BitsFromDouble(-2.0), 0xC000);
  EXPECT_EQ(f16BitsFromDouble(0.0), 0x0000);
  EXPECT_EQ(f16BitsFromDouble(-0.0), 0x8000);
  // Largest finite, and the overflow threshold halfway to 2^16 (ties to even: 65536 → inf).
  EXPECT_EQ(f16BitsFromDouble(65504.0), 0x7BFF);
  EXPECT_EQ(f16BitsFromDouble(65519.99), 0x7BFF);
  EXPECT_EQ(f16BitsFromDouble(65520.0), 0x7C00);
  EXPECT_EQ(f16BitsFromDouble(-1e9), 0xFC00);
  EXPECT_EQ(roundToF16(65520.0), kInf);
  // Ties to even in the normal range: 1 + 2^-11 is halfway between 1 and 1 + 2^-10.
  EXPECT_EQ(roundToF16(1.0 + std::ldexp(1.0, -11)), 1.0);
  EXPECT_EQ(roundToF16(1.0 + 3 * std::ldexp(1.0, -11)), 1.0 + std::ldexp(1.0, -9));
  EXPECT_EQ(roundToF16(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -30)),
            1.0 + std::ldexp(1.0, -10));
  // Subnormals: quantum 2^-24; 2^-25 ties to 0 (even), 3·2^-25 ties to 2·2^-24.
  EXPECT_EQ(f16BitsFromDouble(std::ldexp(1.0, -24)), 0x0001);
  EXPECT_EQ(f16BitsFromDouble(std::ldexp(1.0, -25)), 0x0000);
  EXPECT_EQ(f16BitsFromDouble(3 * std::ldexp(1.0, -25)), 0x0002);
  EXPECT_EQ(f16BitsFromDouble(std::ldexp(1.0, -25) * 1.0001), 0x0001);
  EXPECT_EQ(f16BitsFromDouble(-std::ldexp(1.0, -24)), 0x8001);
  EXPECT_EQ(f16BitsFromDouble(std::ldexp(1.0, -14)), 0x0400); // smallest normal
  EXPECT_EQ(f16BitsFromDouble(std::ldexp(1.0, -14) - std::ldexp(1.0, -24)), 0x03FF);
  // Rounding up out of the subnormals into the smallest normal.
  EXPECT_EQ(f16BitsFromDouble(std::ldexp(1.0, -14) - std::ldexp(1.0, -26)), 0x0400);
  EXPECT_EQ(f16BitsFromDouble(std::nan("")), 0x7E00);
  EXPECT_TRUE(std::isnan(doubleFromF16Bits(0x7C01)));
  EXPECT_EQ(doubleFromF16Bits(0x7C00), kInf);
  EXPECT_EQ(doubleFromF16Bits(0x7BFF), 65504.0);
  EXPECT_EQ(doubleFromF16Bits(0x0001), std::ldexp(1.0, -24));
  EXPECT_EQ(doubleFromF16Bits(0x3555), 0.333251953125);
}

TEST(Rounding, BF16EdgeCases) {
  EXPECT_EQ(bf16BitsFromDouble(1.0), 0x3F80);
  EXPECT_EQ(bf16BitsFromDouble(-1.0), 0xBF80);
  double maxFinite = (2.0 - std::ldexp(1.0, -7)) * std::ldexp(1.0, 127);
  double threshold = (2.0 - std::ldexp(1.0, -8)) * std::ldexp(1.0, 127);
  EXPECT_EQ(bf16BitsFromDouble(maxFinite), 0x7F7F);
  EXPECT_EQ(bf16BitsFromDouble(std::nextafter(threshold, 0.0)), 0x7F7F);
  EXPECT_EQ(bf16BitsFromDouble(threshold), 0x7F80);
  EXPECT_EQ(bf16BitsFromDouble(std::numeric_limits<float>::max()), 0x7F80);
  EXPECT_EQ(roundToBF16(1.0 + std::ldexp(1.0, -8)), 1.0);                           // tie → even
  EXPECT_EQ(roundToBF16(1.0 + 3 * std::ldexp(1.0, -8)), 1.0 + std::ldexp(1.0, -6)); // tie → even
  EXPECT_EQ(bf16BitsFromDouble(std::ldexp(1.0, -133)), 0x0001);                     // subnormal
  EXPECT_EQ(bf16BitsFromDouble(std::ldexp(1.0, -134)), 0x0000);                     // tie → 0
  EXPECT_EQ(bf16BitsFromDouble(std::ldexp(1.0, -126)), 0x0080); // smallest normal
  EXPECT_EQ(bf16BitsFromDouble(-std::nan("")), 0xFFC0);
  EXPECT_EQ(doubleFromBF16Bits(0x7F7F), maxFinite);
  EXPECT_EQ(doubleFromBF16Bits(0x4049), 3.140625);
}

// Every non-NaN bit pattern decodes and encodes back to itself.
TEST(Rounding, ExhaustiveRoundTrip) {
  for (uint32_t b = 0; b < 0x10000; ++b) {
    uint16_t bits = static_cast<uint16_t>(b);
    double h = doubleFromF16Bits(bits);
    if (!std::isnan(h))
      ASSERT_EQ(f16BitsFromDouble(h), bits) << "f16 " << b;
    double bf = doubleFromBF16Bits(bits);
    if (!std::isnan(bf))
      ASSERT_EQ(bf16BitsFromDouble(bf), bits) << "bf16 " << b;
  }
}

// The generic routine, instantiated for binary32, agrees with the hardware's double → float
// conversion; and, where the compiler has _Float16, the f16 rounding agrees with it.
TEST(Rounding, AgreesWithHardware) {
  std::mt19937_64 rng(42);
  std::uniform_real_distribution<double> mantissa(-2.0, 2.0);
  std::uniform_int_distribution<int> exponent(-160, 140);
  for (int i = 0; i < 200000; ++i) {
    double x = std::ldexp(mantissa(rng), exponent(rng));
    ASSERT_EQ(roundToFormat(x, 23, 8), static_cast<double>(static_cast<float>(x))) << x;
#ifdef __FLT16_MAX__
    double y = std::ldexp(mantissa(rng), exponent(rng) / 8);
    ASSERT_EQ(roundToF16(y), static_cast<double>(static_cast<_Float16>(y))) << y;
#endif
  }
}

TEST(Npy, RoundTripAndRejections) {
  std::vector<uint8_t> data{1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0};
  std::string bytes = serializeNpy("<i4", {3}, data);
  EXPECT_EQ(bytes.size() % 64, 12u); // header padded to 64 bytes, then 12 data bytes
  llvm::Expected<NpyArray> a = parseNpy(bytes, "x.npy");
  ASSERT_TRUE(bool(a)) << llvm::toString(a.takeError());
  EXPECT_EQ(a->descr, "<i4");
  EXPECT_EQ(a->shape, std::vector<int64_t>{3});
  EXPECT_EQ(a->data, data);

  auto error = [](std::string contents) {
    llvm::Expected<NpyArray> r = parseNpy(contents, "x.npy");
    return r ? std::string("parsed") : llvm::toString(r.takeError());
  };
  std::string fortran = bytes;
  fortran.replace(fortran.find("False"), 5, "True ");
  EXPECT_NE(error(fortran).find("Fortran-order"), std::string::npos);
  std::string v2 = bytes;
  v2[6] = 2;
  EXPECT_NE(error(v2).find("version 2.0"), std::string::npos);
  std::string big = bytes;
  big.replace(big.find("<i4"), 3, ">i4");
  EXPECT_NE(error(big).find("big-endian"), std::string::npos);
  EXPECT_NE(error(bytes.substr(0, bytes.size() - 1)).find("expected 12 bytes"), std::string::npos);
  EXPECT_NE(error("hello").find("not a .npy file"), std::string::npos);
}

class InterpreterTest : public ::testing::Test {
protected:
  InterpreterTest() {
    DialectRegistry registry;
    tessel::registerDialects(registry);
    ctx.appendDialectRegistry(registry);
    ctx.loadAllAvailableDialects();
    ctx.printOpOnDiagnostic(false);
  }

  // Parses `source`, runs its function @k and returns "" or the first diagnostic.
  std::string run(const std::string &source, MutableArrayRef<KernelArg> args,
                  std::array<int64_t, 3> grid = {1, 1, 1}, RunOptions options = {}) {
    std::string message;
    ScopedDiagnosticHandler handler(&ctx, [&](Diagnostic &d) {
      if (message.empty())
        message = d.str();
      return success();
    });
    module = parseSourceString<ModuleOp>(source, &ctx);
    if (!module)
      return "parse error: " + message;
    auto kernel = module->lookupSymbol<func::FuncOp>("k");
    if (failed(runKernel(kernel, args, grid, options)) && message.empty())
      return "failed without a diagnostic";
    return message;
  }

  static Buffer filled(ElementKind kind, std::vector<double> values) {
    Buffer b(kind, values.size());
    for (size_t i = 0; i < values.size(); ++i)
      b.set(i, values[i]);
    return b;
  }

  MLIRContext ctx;
  OwningOpRef<ModuleOp> module;
};

TEST_F(InterpreterTest, LoadDotStoreMatchesDoubleReference) {
  const char *src = R"mlir(
func.func @k(%a: !tile.ptr<f16>, %b: !tile.ptr<f16>, %c: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %c4 = arith.constant 4 : i32
  %c8 = arith.constant 8 : i32
  %da = tile.make_desc %a, shape [%c4, %c8], strides [%c8, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %db = tile.make_desc %b, shape [%c8, %c3], strides [%c3, %c1] : !tile.ptr<f16> -> !tile.desc<2, f16>
  %dc = tile.make_desc %c, shape [%c4, %c3], strides [%c3, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %ta = tile.load %da[%c0, %c0] : !tile.desc<2, f16> -> tensor<4x8xf16>
  %tb = tile.load %db[%c0, %c0] : !tile.desc<2, f16> -> tensor<8x3xf16>
  %acc = arith.constant dense<0.5> : tensor<4x3xf32>
  %r = tile.dot %ta, %tb, %acc : tensor<4x8xf16>, tensor<8x3xf16> -> tensor<4x3xf32>
  tile.store %dc[%c0, %c0], %r : !tile.desc<2, f32>, tensor<4x3xf32>
  return
}
)mlir";
  std::vector<double> a(32), b(24);
  for (int i = 0; i < 32; ++i)
    a[i] = roundToF16(std::sin(i + 1.0) * 3.7);
  for (int i = 0; i < 24; ++i)
    b[i] = roundToF16(std::cos(i * 0.7) / 1.3);
  SmallVector<KernelArg> args{KernelArg::ofBuffer(filled(ElementKind::F16, a)),
                              KernelArg::ofBuffer(filled(ElementKind::F16, b)),
                              KernelArg::ofBuffer(Buffer(ElementKind::F32, 12))};
  ASSERT_EQ(run(src, args), "");
  for (int m = 0; m < 4; ++m)
    for (int n = 0; n < 3; ++n) {
      double ref = 0.5;
      for (int k = 0; k < 8; ++k)
        ref += a[m * 8 + k] * b[k * 3 + n];
      EXPECT_EQ(args[2].buffer.get(m * 3 + n), static_cast<double>(static_cast<float>(ref)))
          << m << "," << n;
    }
}

TEST_F(InterpreterTest, OutOfBoundsLoadGivesPadding) {
  const char *src = R"mlir(
func.func @k(%x: !tile.ptr<f32>, %y: !tile.ptr<f32>, %off: i32) {
  %c1 = arith.constant 1 : i32
  %c5 = arith.constant 5 : i32
  %c0 = arith.constant 0 : i32
  %c8 = arith.constant 8 : i32
  %dx = tile.make_desc %x, shape [%c5], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %dy = tile.make_desc %y, shape [%c8], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %dx[%off] {padding = -1.5 : f64} : !tile.desc<1, f32> -> tensor<8xf32>
  tile.store %dy[%c0], %t : !tile.desc<1, f32>, tensor<8xf32>
  return
}
)mlir";
  // The buffer is longer than the descriptor: elements 5..7 exist but lie outside the shape.
  std::vector<double> x{10, 11, 12, 13, 14, 99, 99, 99};
  for (auto [off, expected] :
       {std::pair<int64_t, std::vector<double>>{2, {12, 13, 14, -1.5, -1.5, -1.5, -1.5, -1.5}},
        {-2, {-1.5, -1.5, 10, 11, 12, 13, 14, -1.5}}}) {
    SmallVector<KernelArg> args{KernelArg::ofBuffer(filled(ElementKind::F32, x)),
                                KernelArg::ofBuffer(Buffer(ElementKind::F32, 8)),
                                KernelArg::ofInt(off)};
    ASSERT_EQ(run(src, args), "");
    for (int i = 0; i < 8; ++i)
      EXPECT_EQ(args[1].buffer.get(i), expected[i]) << "offset " << off << " element " << i;
  }
}

TEST_F(InterpreterTest, MaskedStoreDropsMaskedAndOutOfBoundsElements) {
  const char *ordered = R"mlir(
func.func @k(%y: !tile.ptr<i32>) {
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  %c6 = arith.constant 6 : i32
  %c0 = arith.constant 0 : i32
  %dy = tile.make_desc %y, shape [%c6], strides [%c1] : !tile.ptr<i32> -> !tile.desc<1, i32>
  %i = tile.iota : tensor<8xi32>
  %three = tile.splat %c3 : i32 -> tensor<8xi32>
  %v = arith.addi %i, %three : tensor<8xi32>
  %c1s = arith.constant dense<1> : tensor<8xi32>
  %z = arith.constant dense<0> : tensor<8xi32>
  %odd = arith.andi %i, %c1s : tensor<8xi32>
  %m = arith.cmpi ne, %odd, %z : tensor<8xi32>
  tile.store %dy[%c0], %v mask %m : !tile.desc<1, i32>, tensor<8xi32>, tensor<8xi1>
  return
}
)mlir";
  SmallVector<KernelArg> args{
      KernelArg::ofBuffer(filled(ElementKind::I32, {-1, -1, -1, -1, -1, -1, -1, -1}))};
  ASSERT_EQ(run(ordered, args), "");
  // Odd indices below the shape (6) are written with i + 3; the rest stay -1.
  std::vector<double> expected{-1, 4, -1, 6, -1, 8, -1, -1};
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(args[0].buffer.get(i), expected[i]) << i;
}

TEST_F(InterpreterTest, OutOfBufferAccessIsALocatedError) {
  const char *src = R"mlir(
func.func @k(%x: !tile.ptr<f32>, %n: i32) {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %dx = tile.make_desc %x, shape [%n], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = tile.load %dx[%c0] : !tile.desc<1, f32> -> tensor<16xf32>
  tile.store %dx[%c0], %t : !tile.desc<1, f32>, tensor<16xf32>
  return
}
)mlir";
  SmallVector<KernelArg> args{KernelArg::ofBuffer(Buffer(ElementKind::F32, 8)),
                              KernelArg::ofInt(100)};
  EXPECT_EQ(run(src, args),
            "'tile.load' op reads element 8 of argument #0, a buffer of 8 elements");
}

TEST_F(InterpreterTest, FailingStoreWritesNothing) {
  const char *src = R"mlir(
func.func @k(%x: !tile.ptr<f32>) {
  %c1 = arith.constant 1 : i32
  %c0 = arith.constant 0 : i32
  %c9 = arith.constant 9 : i32
  %dx = tile.make_desc %x, shape [%c9], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %t = arith.constant dense<5.0> : tensor<16xf32>
  tile.store %dx[%c0], %t : !tile.desc<1, f32>, tensor<16xf32>
  return
}
)mlir";
  SmallVector<KernelArg> args{KernelArg::ofBuffer(Buffer(ElementKind::F32, 8))};
  EXPECT_EQ(run(src, args),
            "'tile.store' op writes element 8 of argument #0, a buffer of 8 elements");
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(args[0].buffer.get(i), 0.0);
}

TEST_F(InterpreterTest, ErrorsNameTheOp) {
  const char *unsupported = R"mlir(
func.func @k(%x: f32) {
  %s = math.atan %x : f32
  return
}
)mlir";
  SmallVector<KernelArg> args{KernelArg::ofFloat(1.0)};
  EXPECT_EQ(run(unsupported, args), "the interpreter does not support 'math.atan'");

  const char *divide = R"mlir(
func.func @k(%x: i32) {
  %c0 = arith.constant 0 : i32
  %d = arith.divsi %x, %c0 : i32
  return
}
)mlir";
  SmallVector<KernelArg> intArgs{KernelArg::ofInt(7)};
  EXPECT_EQ(run(divide, intArgs), "'arith.divsi' op divides by zero (operands 7 and 0)");

  SmallVector<KernelArg> wrong{KernelArg::ofInt(7), KernelArg::ofInt(8)};
  EXPECT_EQ(run(divide, wrong), "'func.func' op kernel @k takes 1 arguments, but 2 were given");

  const char *loop = R"mlir(
func.func @k(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    %x = arith.addi %i, %c1 : i32
  }
  return
}
)mlir";
  RunOptions limited;
  limited.maxSteps = 1000;
  SmallVector<KernelArg> big{KernelArg::ofInt(1 << 30)};
  EXPECT_NE(run(loop, big, {1, 1, 1}, limited).find("step limit of 1000"), std::string::npos);
  SmallVector<KernelArg> medium{KernelArg::ofInt(600)};
  EXPECT_NE(run(loop, medium, {1, 1, 1}, limited).find("step limit of 1000"), std::string::npos);
}

// Issue 15, finding 5: the induction values of a loop are not materialised (2^31 of them were
// 16 GB: "LLVM ERROR: out of memory"), and a run has a step budget by default.
TEST_F(InterpreterTest, LongLoopsNeedNoMemoryAndHaveADefaultBudget) {
  const char *failsAtThree = R"mlir(
func.func @k(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c3 = arith.constant 3 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    %d = arith.subi %c3, %i : i32
    %q = arith.divsi %c1, %d : i32
  }
  return
}
)mlir";
  RunOptions unlimited;
  unlimited.maxSteps = 0;
  SmallVector<KernelArg> huge{KernelArg::ofInt(0x7fffffff)};
  EXPECT_EQ(run(failsAtThree, huge, {1, 1, 1}, unlimited),
            "'arith.divsi' op divides by zero (operands 1 and 0)");

  const char *spins = R"mlir(
func.func @k(%n: i32) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  scf.for %i = %c0 to %n step %c1 : i32 {
    %x = arith.addi %i, %c1 : i32
    %y = arith.addi %x, %c1 : i32
  }
  return
}
)mlir";
  EXPECT_EQ(RunOptions().maxSteps, tessel::interp::kDefaultMaxSteps);
  SmallVector<KernelArg> spinArgs{KernelArg::ofInt(0x7fffffff)};
  std::string error = run(spins, spinArgs);
  EXPECT_NE(error.find("would run 2147483647 iterations, past the interpreter's step limit of "
                       "4294967296 (tessel-run --max-steps=N"),
            std::string::npos)
      << error;
}

// The three-pass meaning of a streamed softmax: one row split over four iterations of 2
// elements; each iteration stores its slice of the softmax of the whole row, and lse.
TEST_F(InterpreterTest, StreamedSoftmaxNormalisesOverTheWholeRow) {
  const char *src = R"mlir(
func.func @k(%x: !tile.ptr<f32>, %p: !tile.ptr<f32>, %lse: !tile.ptr<f32>) {
  %c0 = arith.constant 0 : i32
  %c1 = arith.constant 1 : i32
  %c2 = arith.constant 2 : i32
  %c8 = arith.constant 8 : i32
  %dx = tile.make_desc %x, shape [%c1, %c8], strides [%c8, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dp = tile.make_desc %p, shape [%c1, %c8], strides [%c8, %c1] : !tile.ptr<f32> -> !tile.desc<2, f32>
  %dl = tile.make_desc %lse, shape [%c1], strides [%c1] : !tile.ptr<f32> -> !tile.desc<1, f32>
  %l0 = arith.constant dense<0.0> : tensor<1xf32>
  %r = scf.for %j = %c0 to %c8 step %c2 iter_args(%l = %l0) -> (tensor<1xf32>) : i32 {
    %s = tile.load %dx[%c0, %j] : !tile.desc<2, f32> -> tensor<1x2xf32>
    %q, %ls = tile.softmax %s axis 1 streamed : tensor<1x2xf32> -> tensor<1xf32>
    tile.store %dp[%c0, %j], %q : !tile.desc<2, f32>, tensor<1x2xf32>
    scf.yield %ls : tensor<1xf32>
  }
  tile.store %dl[%c0], %r : !tile.desc<1, f32>, tensor<1xf32>
  return
}
)mlir";
  std::vector<double> x{0.5, -1.0, 3.0, -kInf, 2.0, 0.0, -kInf, 1.0};
  SmallVector<KernelArg> args{KernelArg::ofBuffer(filled(ElementKind::F32, x)),
                              KernelArg::ofBuffer(Buffer(ElementKind::F32, 8)),
                              KernelArg::ofBuffer(Buffer(ElementKind::F32, 1))};
  ASSERT_EQ(run(src, args), "");
  double l = 0;
  for (double v : x)
    l += std::exp(v - 3.0);
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(args[1].buffer.get(i), roundToF32(std::exp(x[i] - 3.0) / l)) << i;
  EXPECT_EQ(args[2].buffer.get(0), roundToF32(3.0 + std::log(l)));

  // Every element masked: p = 0 and lse = -inf, never NaN.
  SmallVector<KernelArg> masked{
      KernelArg::ofBuffer(filled(ElementKind::F32, std::vector<double>(8, -kInf))),
      KernelArg::ofBuffer(filled(ElementKind::F32, std::vector<double>(8, 7.0))),
      KernelArg::ofBuffer(Buffer(ElementKind::F32, 1))};
  ASSERT_EQ(run(src, masked), "");
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(masked[1].buffer.get(i), 0.0);
  EXPECT_EQ(masked[2].buffer.get(0), -kInf);
}
} // namespace
