//===- IndexDivisionTest.cpp - the uniform floor quotient against brute force ----------------===//
//
// tile-fold-index-division replaces Python's `x // c` of a whole index tile by one scalar where
// uniformFloorQuotient says the quotient is the same for every element. Checked here against the
// definition: for random linear index tiles, every scalar value tried and every offset of the
// tile, floor(x / c) must equal the scalar it gives; and the aligned cases the kernels produce
// (a block's indices under a table of its size or coarser) must be recognised.
//
//===------------------------------------------------------------------------------------------===//

#include "tile/Transforms/MaskAnalysis.h"

#include "llvm/Support/MathExtras.h"

#include <gtest/gtest.h>
#include <random>

using llvm::divideFloorSigned;
using tessel::tile::uniformFloorQuotient;

namespace {

TEST(UniformFloorQuotient, MatchesFloorDivisionOnEveryElement) {
  std::mt19937 rng(7);
  auto pick = [&](int64_t lo, int64_t hi) {
    return std::uniform_int_distribution<int64_t>(lo, hi)(rng);
  };
  int found = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    // Mostly tiles on a grid of some unit with a divisor a multiple of it (the kernels'
    // case), widths around the unit so that some straddle and some do not.
    int64_t unit = pick(1, 64);
    int64_t c = unit * pick(1, 4) + (pick(0, 9) == 0 ? pick(1, 5) : 0);
    std::vector<int64_t> a = {unit * pick(-4, 4), unit * pick(-3, 3) + (pick(0, 9) == 0)};
    int64_t k = pick(-1000, 1000);
    int64_t lo = pick(-200, 200), hi = lo + pick(0, unit + 4);
    auto q = uniformFloorQuotient(a, k, lo, hi, c);
    if (!q)
      continue;
    ++found;
    ASSERT_EQ(c % q->g, 0);
    for (int sample = 0; sample < 8; ++sample) {
      int64_t s0 = pick(-50, 50), s1 = pick(-50, 50);
      int64_t l = a[0] / q->g * s0 + a[1] / q->g * s1 + q->constant;
      int64_t want = divideFloorSigned(l, c / q->g);
      for (int64_t off = lo; off <= hi; ++off)
        ASSERT_EQ(divideFloorSigned(a[0] * s0 + a[1] * s1 + k + off, c), want)
            << "c " << c << " a " << a[0] << "," << a[1] << " k " << k << " off " << off;
    }
  }
  EXPECT_GT(found, 500);
}

TEST(UniformFloorQuotient, RecognisesBlocksUnderTables) {
  // 128·t + [0, 128) under a 128 table: t. Under 256: t // 2. 32·j + [0, 32) under 128: j // 4.
  auto same = uniformFloorQuotient({128}, 0, 0, 127, 128);
  ASSERT_TRUE(same);
  EXPECT_EQ(same->g, 128);
  EXPECT_EQ(same->constant, 0);
  auto coarser = uniformFloorQuotient({128}, 0, 0, 127, 256);
  ASSERT_TRUE(coarser);
  EXPECT_EQ(coarser->g, 128);
  auto narrow = uniformFloorQuotient({32}, 0, 0, 31, 128);
  ASSERT_TRUE(narrow);
  EXPECT_EQ(narrow->g, 32);
  // A block that starts 16 rows in: 64·t + 16 + [0, 16) under 64 is still t.
  auto inside = uniformFloorQuotient({64}, 16, 0, 15, 64);
  ASSERT_TRUE(inside);
  EXPECT_EQ(inside->constant, 0);
  // Finer tables and straddling offsets are not uniform.
  EXPECT_FALSE(uniformFloorQuotient({128}, 0, 0, 127, 64));
  EXPECT_FALSE(uniformFloorQuotient({64}, 32, 0, 63, 64));
}

} // namespace
