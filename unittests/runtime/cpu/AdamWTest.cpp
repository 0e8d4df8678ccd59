//===- AdamWTest.cpp - the AdamW update -----------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <stdexcept>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

// One element worked by hand (t = 3, lr = 0.01, beta1 = 0.9, beta2 = 0.999,
// eps = 1e-8, wd = 0.1; p = 1, g = 0.5, m = 0.1, v = 0.01):
//   m' = 0.9 * 0.1 + 0.1 * 0.5                 = 0.14
//   v' = 0.999 * 0.01 + 0.001 * 0.25           = 0.01024
//   m^ = 0.14 / (1 - 0.9^3)    = 0.14 / 0.271   = 0.516605166...
//   v^ = 0.01024 / (1 - 0.999^3) = 0.01024 / 0.002997001 = 3.41674894...
//   p' = 1 - 0.01 * m^ / (sqrt(v^) + 1e-8) - 0.01 * 0.1 * 1
//      = 1 - 0.01 * 0.516605166 / 1.84844501 - 0.001 = 0.99620519...
// fp32 arithmetic: rtol 1e-6 on p', m', v'.
TEST(AdamWTest, HandComputedStep) {
  const FVec p = {1.0f}, g = {0.5f}, m = {0.1f}, v = {0.01f};
  FVec p2(1), m2(1), v2(1);
  const std::int32_t step = 3;
  const float lr = 0.01f;
  const AdamWConfig config{0.9f, 0.999f, 1e-8f, 0.1f};
  adamw(p.data(), g.data(), m.data(), v.data(), &step, &lr, p2.data(),
        m2.data(), v2.data(), 1, config);
  EXPECT_NEAR(m2[0], 0.14, 1e-6 * 0.14);
  EXPECT_NEAR(v2[0], 0.01024, 1e-6 * 0.01024);
  EXPECT_NEAR(p2[0], 0.9962051905, 1e-6);
}

double bias(double beta, int t) { return 1.0 - std::pow(beta, t); }

// Many elements (parallel path) against the formula in double, then the same
// update in place (outputs aliasing inputs) must give identical bits.
// rtol 1e-6; the parameter step is ~lr, so atol 1e-7 there.
TEST(AdamWTest, MatchesFormulaAndRunsInPlace) {
  std::mt19937 rng(50);
  const Index n = 50000;
  FVec p = randomFloats(n, rng), g = randomFloats(n, rng, -0.1f, 0.1f),
       m = randomFloats(n, rng, -0.01f, 0.01f),
       v = randomFloats(n, rng, 0.0f, 1e-3f);
  const std::int32_t step = 17;
  const float lr = 3e-3f;
  const AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  // The attributes are f32: the reference uses their exact fp32 values.
  const double b1 = config.beta1, b2 = config.beta2, eps = config.epsilon,
               wd = config.weightDecay;
  DVec pRef(n), mRef(n), vRef(n);
  for (Index i = 0; i < n; ++i) {
    mRef[i] = b1 * double(m[i]) + (1 - b1) * double(g[i]);
    vRef[i] = b2 * double(v[i]) + (1 - b2) * double(g[i]) * double(g[i]);
    const double mHat = mRef[i] / bias(b1, step);
    const double vHat = vRef[i] / bias(b2, step);
    pRef[i] = double(p[i]) - double(lr) * mHat / (std::sqrt(vHat) + eps) -
              double(lr) * wd * double(p[i]);
  }
  FVec p2(n), m2(n), v2(n);
  adamw(p.data(), g.data(), m.data(), v.data(), &step, &lr, p2.data(),
        m2.data(), v2.data(), n, config);
  // m' and v' can cancel (m and g of opposite signs): absolute error bounds
  // of a few fp32 roundings of the terms (|terms| <= 1e-2 and 1e-3).
  EXPECT_TRUE(allClose(m2, mRef, 1e-6, 5e-9));
  EXPECT_TRUE(allClose(v2, vRef, 1e-6, 5e-10));
  EXPECT_TRUE(allClose(p2, pRef, 1e-6, 1e-7));

  adamw(p.data(), g.data(), m.data(), v.data(), &step, &lr, p.data(),
        m.data(), v.data(), n, config);
  EXPECT_EQ(p, p2);
  EXPECT_EQ(m, m2);
  EXPECT_EQ(v, v2);
}

// adamw_block: block 2 of 3 of a flat parameter updates exactly as adamw on
// that block's copy would (ZeRO's chunk read in place, not sliced first).
TEST(AdamWTest, BlockOfAParameterIsAdamWOnItsCopy) {
  const Index n = 37, blocks = 3;
  std::mt19937 rng(51);
  FVec param = randomFloats(n * blocks, rng),
       g = randomFloats(n, rng, -0.1f, 0.1f),
       m = randomFloats(n, rng, -0.01f, 0.01f),
       v = randomFloats(n, rng, 0.0f, 1e-3f);
  const std::int32_t step = 5, block = 2;
  const float lr = 1e-2f;
  const AdamWConfig config{0.9f, 0.95f, 1e-8f, 0.1f};
  FVec chunk(param.begin() + block * n, param.begin() + (block + 1) * n);
  FVec p2(n), m2(n), v2(n), p3(n), m3(n), v3(n);
  adamw(chunk.data(), g.data(), m.data(), v.data(), &step, &lr, p2.data(),
        m2.data(), v2.data(), n, config);
  adamwBlock(param.data(), &block, blocks, g.data(), m.data(), v.data(),
             &step, &lr, p3.data(), m3.data(), v3.data(), n, config);
  EXPECT_EQ(p3, p2);
  EXPECT_EQ(m3, m2);
  EXPECT_EQ(v3, v2);

  const std::int32_t outside = 3;
  EXPECT_THROW(adamwBlock(param.data(), &outside, blocks, g.data(), m.data(),
                          v.data(), &step, &lr, p3.data(), m3.data(),
                          v3.data(), n, config),
               std::invalid_argument);
}

TEST(AdamWTest, RejectsStepZero) {
  FVec x(1, 1.0f);
  const std::int32_t step = 0;
  const float lr = 1e-3f;
  EXPECT_THROW(adamw(x.data(), x.data(), x.data(), x.data(), &step, &lr,
                     x.data(), x.data(), x.data(), 1, AdamWConfig{}),
               std::invalid_argument);
}

} // namespace
