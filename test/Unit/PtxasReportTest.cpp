//===- PtxasReportTest.cpp - parsing ptxas -v -----------------------------===//
//
// The resource report tesselc prints comes from parsing `ptxas -v`; these are real lines of
// ptxas 13.0 (sm_80 and sm_90a), two kernels in one report.
//
//===----------------------------------------------------------------------===//

#include "tessel/Target/Compile.h"

#include <gtest/gtest.h>

TEST(PtxasReport, ParsesEveryKernel) {
  const char *log =
      "ptxas info    : 0 bytes gmem\n"
      "ptxas info    : Compiling entry function 'softmax_rows' for 'sm_80'\n"
      "ptxas info    : Function properties for softmax_rows\n"
      "    8 bytes stack frame, 4 bytes spill stores, 12 bytes spill loads\n"
      "ptxas info    : Used 37 registers, used 1 barriers, 12352 bytes smem, 384 bytes cmem[0]\n"
      "ptxas info    : Compiling entry function 'matmul' for 'sm_90a'\n"
      "ptxas info    : Function properties for matmul\n"
      "    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads\n"
      "ptxas info    : Used 40 registers, 14336 bytes smem\n";
  auto kernels = tessel::parsePtxasReport(log);
  ASSERT_EQ(kernels.size(), 2u);
  EXPECT_EQ(kernels[0].kernel, "softmax_rows");
  EXPECT_EQ(kernels[0].arch, "sm_80");
  EXPECT_EQ(kernels[0].registers, 37);
  EXPECT_EQ(kernels[0].barriers, 1);
  EXPECT_EQ(kernels[0].stackBytes, 8);
  EXPECT_EQ(kernels[0].spillStoreBytes, 4);
  EXPECT_EQ(kernels[0].spillLoadBytes, 12);
  EXPECT_EQ(kernels[0].sharedBytes, 12352);
  EXPECT_EQ(kernels[0].constantBytes, 384);
  EXPECT_EQ(kernels[1].kernel, "matmul");
  EXPECT_EQ(kernels[1].arch, "sm_90a");
  EXPECT_EQ(kernels[1].registers, 40);
  EXPECT_EQ(kernels[1].barriers, 0);
  EXPECT_EQ(kernels[1].sharedBytes, 14336);
}

TEST(PtxasReport, EmptyLogHasNoKernels) {
  EXPECT_TRUE(tessel::parsePtxasReport("ptxas fatal   : Unresolved extern function\n").empty());
}
