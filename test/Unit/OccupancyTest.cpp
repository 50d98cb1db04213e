//===- OccupancyTest.cpp - asking ptxas for the CTAs the shared memory allows ------------===//
//
// The arithmetic of lib/Target/Occupancy.cpp against CUDA's occupancy rules (registers per warp
// in units of 256, 1 KiB of shared memory reserved per CTA), and the PTX directive's place.
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Compile.h"

#include <gtest/gtest.h>

namespace {

tessel::KernelLaunchInfo launch(unsigned threads, int64_t shared) {
  tessel::KernelLaunchInfo k;
  k.name = "k";
  k.blockSize[0] = threads;
  k.dynamicSharedBytes = shared;
  return k;
}

tessel::KernelResources used(int registers) {
  tessel::KernelResources r;
  r.kernel = "k";
  r.registers = registers;
  return r;
}

TEST(Occupancy, Limits) {
  tessel::ChipLimits h200 = tessel::chipLimits("sm_90a"), a100 = tessel::chipLimits("sm_80");
  // 64 KiB CTAs: three on an sm_90 SM (228 KiB), two on an sm_80 one (164 KiB).
  EXPECT_EQ(tessel::ctasByShared(h200, 128, 64 * 1024), 3u);
  EXPECT_EQ(tessel::ctasByShared(a100, 128, 64 * 1024), 2u);
  EXPECT_EQ(tessel::ctasByShared(h200, 1024, 0), 2u); // 2048 threads an SM
  EXPECT_EQ(tessel::ctasByShared(h200, 32, 0), 32u);  // 32 CTAs an SM
  // 171 registers round up to 176 (a warp's 5,632): two CTAs of four warps; 168 fit three.
  EXPECT_EQ(tessel::ctasByRegisters(h200, 128, 171), 2u);
  EXPECT_EQ(tessel::ctasByRegisters(h200, 128, 168), 3u);
  EXPECT_EQ(tessel::registerBudget(h200, 128, 3), 168u);
  EXPECT_EQ(tessel::registerBudget(h200, 128, 4), 128u);
  EXPECT_EQ(tessel::registerBudget(h200, 128, 1), 255u);
  EXPECT_EQ(tessel::registerBudget(h200, 256, 2), 128u);
}

TEST(Occupancy, Hint) {
  tessel::ChipLimits h200 = tessel::chipLimits("sm_90a"), a100 = tessel::chipLimits("sm_80");
  // The d128 64x64 forward: registers cap it at two CTAs where its shared memory allows three.
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 64 * 1024), used(171)), 3u);
  // A third above the budget is still asked for (ptxas came down from 206 to 152 there).
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 64 * 1024), used(206)), 3u);
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 64 * 1024), used(232)), 0u);
  // Already at the shared-memory bound: nothing to ask.
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 64 * 1024), used(158)), 0u);
  // Too far from the budget (the sm_80 forward at ~245 where three CTAs leave 168).
  EXPECT_EQ(tessel::occupancyHint(a100, launch(128, 48 * 1024), used(245)), 0u);
  // Four CTAs out of reach (128 registers, 170 with a third more), three within it.
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 48 * 1024), used(180)), 3u);
  // One CTA by shared memory: nothing to ask.
  EXPECT_EQ(tessel::occupancyHint(h200, launch(256, 128 * 1024), used(228)), 0u);
  // The static shared memory ptxas reports counts too.
  tessel::KernelResources r = used(171);
  r.sharedBytes = 16 * 1024;
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 64 * 1024), r), 0u);
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 64 * 1024), used(0)), 0u);
  // A caller that accepts a spill (the d64 causal backward's key-rows program: 255 registers,
  // 48 KiB) gets one CTA more than its registers allow, however far the budget; never more
  // than the shared memory allows.
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 48 * 1024), used(255)), 0u);
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 48 * 1024), used(255), true), 3u);
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 100 * 1024), used(255), true), 0u);
  EXPECT_EQ(tessel::occupancyHint(h200, launch(128, 48 * 1024), used(180), true), 3u);
}

TEST(Occupancy, Directive) {
  std::string ptx =
      ".visible .entry a(\n\t.param .u32 a_param_0\n)\n.maxntid 128, 1, 1\n{\n\tret;\n}\n"
      ".visible .entry b(\n\t.param .u32 b_param_0\n)\n.maxntid 128, 1, 1\n{\n\tret;\n}\n";
  std::string out = tessel::withMinCtasPerSM(ptx, "b", 3);
  EXPECT_EQ(out,
            ".visible .entry a(\n\t.param .u32 a_param_0\n)\n.maxntid 128, 1, 1\n{\n\tret;\n}\n"
            ".visible .entry b(\n\t.param .u32 b_param_0\n)\n.maxntid 128, 1, 1\n"
            ".minnctapersm 3\n{\n\tret;\n}\n");
  EXPECT_EQ(tessel::withMinCtasPerSM(ptx, "c", 3), ptx);
}

TEST(Occupancy, RegisterHandOver) {
  // Only the entry that runs setmaxnreg counts (a warp-specialised kernel beside a plain one).
  std::string ptx = ".visible .entry a(\n)\n{\n\tret;\n}\n"
                    ".visible .entry b(\n)\n{\n\tsetmaxnreg.inc.sync.aligned.u32 232;\n}\n"
                    ".visible .entry c(\n)\n{\n\tret;\n}\n";
  EXPECT_FALSE(tessel::reallocatesRegisters(ptx, "a"));
  EXPECT_TRUE(tessel::reallocatesRegisters(ptx, "b"));
  EXPECT_FALSE(tessel::reallocatesRegisters(ptx, "c"));
  EXPECT_FALSE(tessel::reallocatesRegisters(ptx, "d"));
}

} // namespace
