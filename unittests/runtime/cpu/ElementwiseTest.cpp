//===- ElementwiseTest.cpp - gelu, swiglu, add, scale, fastExp ------------===//

#include "runtime/backend/cpu/KernelSupport.h"
#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <limits>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

double geluRef(double x, double cubic = 0.044715) {
  return 0.5 * x *
         (1.0 + std::tanh(std::sqrt(2.0 / M_PI) * (x + cubic * x * x * x)));
}
double siluRef(double x) { return x / (1.0 + std::exp(-x)); }

/// Elementwise central differences: for J = sum_i f(x_i) R_i, dJ/dx_i only
/// involves term i, so differencing f at x_i alone is the same quantity as
/// differencing J (and avoids O(n^2) work).
double centralDiff(double (*f)(double), double x) {
  return (f(x + kFdStep) - f(x - kFdStep)) / (2.0 * kFdStep);
}
double geluDefault(double x) { return geluRef(x); }

/// Over the parallel threshold (2^14), in [-6, 6] plus the tails.
FVec activationInputs(std::mt19937 &rng) {
  FVec x = randomFloats(20000, rng, -6.0f, 6.0f);
  const float specials[] = {0.0f, 1e-3f, -1e-3f, 20.0f, -20.0f, 100.0f, -100.0f};
  for (std::size_t i = 0; i < std::size(specials); ++i)
    x[i] = specials[i];
  return x;
}

// fastExp against exp in double over its whole finite range: within 3e-7
// relative (2.5 ulp; Cephes' polynomial is ~1 ulp, plus the rounding of the
// final scaling); and its edge cases.
TEST(FastExpTest, AccurateOverTheRangeAndAtTheEdges) {
  double worst = 0.0;
  for (int i = 0; i <= 200000; ++i) {
    const float x = -87.0f + 175.0f * float(i) / 200000.0f;
    const double expected = std::exp(double(x));
    worst = std::max(worst,
                     std::abs(detail::fastExp(x) - expected) / expected);
  }
  EXPECT_LT(worst, 3e-7);
  const float inf = std::numeric_limits<float>::infinity();
  EXPECT_EQ(detail::fastExp(0.0f), 1.0f);
  EXPECT_EQ(detail::fastExp(-inf), 0.0f);
  EXPECT_EQ(detail::fastExp(-200.0f), 0.0f);
  EXPECT_EQ(detail::fastExp(inf), inf);
  EXPECT_EQ(detail::fastExp(100.0f), inf);
  EXPECT_TRUE(std::isnan(detail::fastExp(std::nanf(""))));
}

// Forward vs double reference: rtol 1e-5, atol 1e-6 (the fp32 cubic inside
// the exponent costs ~1e-6 relative at |x| ~ 6). Gradient vs FD: rtol 2e-5,
// atol 1e-6. In place gives the same bits.
TEST(GeluTest, ForwardAndGradMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(30);
  FVec x = activationInputs(rng), r = randomFloats(x.size(), rng);
  DVec yRef(x.size()), gRef(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) {
    yRef[i] = geluRef(x[i]);
    gRef[i] = r[i] * centralDiff(geluDefault, x[i]);
  }
  FVec y(x.size()), g(x.size());
  gelu(x.data(), y.data(), Index(x.size()));
  geluGrad(r.data(), x.data(), g.data(), Index(x.size()));
  EXPECT_TRUE(allClose(y, yRef, 1e-5, 1e-6));
  EXPECT_TRUE(allClose(g, gRef, 2e-5, 1e-6));

  FVec inPlace = x;
  gelu(inPlace.data(), inPlace.data(), Index(x.size()));
  EXPECT_EQ(inPlace, y);
}

// The tolerances above are tight enough to catch a typo in a constant: a
// GELU with 0.04475 instead of 0.044715 (0.08% off) must fail them.
TEST(GeluTest, ToleranceCatchesAWrongConstant) {
  std::mt19937 rng(31);
  FVec x = activationInputs(rng);
  DVec wrong(x.size());
  for (std::size_t i = 0; i < x.size(); ++i)
    wrong[i] = geluRef(x[i], 0.04475);
  FVec y(x.size());
  gelu(x.data(), y.data(), Index(x.size()));
  EXPECT_FALSE(allClose(y, wrong, 1e-5, 1e-6));
}

// silu(g) * up and its two gradients; same tolerances as gelu.
TEST(SwigluTest, ForwardAndGradsMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(32);
  FVec gate = activationInputs(rng);
  FVec up = randomFloats(gate.size(), rng, -2.0f, 2.0f);
  FVec r = randomFloats(gate.size(), rng);
  DVec yRef(gate.size()), dgRef(gate.size()), duRef(gate.size());
  for (std::size_t i = 0; i < gate.size(); ++i) {
    yRef[i] = siluRef(gate[i]) * up[i];
    dgRef[i] = r[i] * up[i] * centralDiff(siluRef, gate[i]);
    // y is linear in up: the central difference is exact up to rounding.
    duRef[i] = r[i] *
               (siluRef(gate[i]) * (up[i] + kFdStep) -
                siluRef(gate[i]) * (up[i] - kFdStep)) /
               (2.0 * kFdStep);
  }
  FVec y(gate.size()), dg(gate.size()), du(gate.size());
  swiglu(gate.data(), up.data(), y.data(), Index(gate.size()));
  swigluGrad(r.data(), gate.data(), up.data(), dg.data(), du.data(),
             Index(gate.size()));
  EXPECT_TRUE(allClose(y, yRef, 1e-5, 1e-6));
  EXPECT_TRUE(allClose(dg, dgRef, 2e-5, 1e-6));
  EXPECT_TRUE(allClose(du, duRef, 2e-5, 1e-6));
}

// One fp32 operation each: exact, in place included.
TEST(AddScaleTest, ExactAndInPlace) {
  std::mt19937 rng(33);
  for (Index n : {Index(5), Index(40000)}) {
    FVec a = randomFloats(n, rng), b = randomFloats(n, rng), y(n);
    add(a.data(), b.data(), y.data(), n);
    for (Index i = 0; i < n; ++i)
      ASSERT_EQ(y[i], a[i] + b[i]);
    FVec lhs = a;
    add(lhs.data(), b.data(), lhs.data(), n);
    EXPECT_EQ(lhs, y);
    scale(a.data(), -0.25f, y.data(), n);
    for (Index i = 0; i < n; ++i)
      ASSERT_EQ(y[i], a[i] * -0.25f);
    scale(a.data(), -0.25f, a.data(), n);
    EXPECT_EQ(a, y);
  }
}

} // namespace
