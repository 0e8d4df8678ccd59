//===- ZeroMemoryTest.cpp - the memory report's ZeRO accounting -----------===//
//
// The closed forms the memory report prints (lowering/ZeroMemory.h): the
// ZeRO paper's worked example and this project's fp32 layout.
//
//===----------------------------------------------------------------------===//

#include "lowering/ZeroMemory.h"

#include <gtest/gtest.h>

using partition::kFp32AdamW;
using partition::kPaperMixedPrecisionAdam;
using partition::zeroStateBytes;

namespace {

// The paper (section 1 and figure 1): a 7.5B-parameter model on 64 GPUs
// with mixed-precision Adam (K = 12) needs 120 GB, 31.4 GB, 16.6 GB and
// 1.88 GB per GPU under stages 0 to 3.
TEST(ZeroMemory, PaperExample) {
  const double psi = 7.5e9;
  const double expected[] = {120.0, 31.4, 16.6, 1.88};
  for (int stage = 0; stage <= 3; ++stage)
    EXPECT_NEAR(zeroStateBytes(stage, psi, 64, kPaperMixedPrecisionAdam)
                        .total() /
                    1e9,
                expected[stage], 0.05)
        << "stage " << stage;
}

// This project's layout: 4 Psi parameters + 4 Psi gradients + 8 Psi
// moments = 16 Psi, each kind divided by N from its stage on.
TEST(ZeroMemory, Fp32Layout) {
  const double psi = 1000;
  auto zero = zeroStateBytes(0, psi, 4, kFp32AdamW);
  EXPECT_EQ(zero.parameters, 4000);
  EXPECT_EQ(zero.gradients, 4000);
  EXPECT_EQ(zero.optimizerState, 8000);
  EXPECT_EQ(zero.total(), 16 * psi);
  auto one = zeroStateBytes(1, psi, 4);
  EXPECT_EQ(one.parameters, 4000);
  EXPECT_EQ(one.gradients, 4000);
  EXPECT_EQ(one.optimizerState, 2000);
  auto two = zeroStateBytes(2, psi, 4);
  EXPECT_EQ(two.gradients, 1000);
  EXPECT_EQ(two.optimizerState, 2000);
  EXPECT_EQ(two.parameters, 4000);
  auto three = zeroStateBytes(3, psi, 4);
  EXPECT_EQ(three.total(), 16 * psi / 4);
  // One rank: nothing to divide.
  EXPECT_EQ(zeroStateBytes(3, psi, 1).total(), 16 * psi);
  // Out of range: nothing.
  EXPECT_EQ(zeroStateBytes(4, psi, 4).total(), 0);
  EXPECT_EQ(zeroStateBytes(1, psi, 0).total(), 0);
}

} // namespace
