//===- NormsTest.cpp - layernorm and rmsnorm kernels ----------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

DVec layerNormRef(const DVec &x, const DVec &gamma, const DVec &beta,
                  Index rows, Index channels, double eps) {
  DVec y(x.size());
  for (Index r = 0; r < rows; ++r) {
    const double *xr = &x[r * channels];
    double mean = 0, var = 0;
    for (Index c = 0; c < channels; ++c)
      mean += xr[c];
    mean /= channels;
    for (Index c = 0; c < channels; ++c)
      var += (xr[c] - mean) * (xr[c] - mean);
    var /= channels; // biased
    const double rstd = 1.0 / std::sqrt(var + eps);
    for (Index c = 0; c < channels; ++c)
      y[r * channels + c] = (xr[c] - mean) * rstd * gamma[c] + beta[c];
  }
  return y;
}

DVec rmsNormRef(const DVec &x, const DVec &gamma, Index rows, Index channels,
                double eps) {
  DVec y(x.size());
  for (Index r = 0; r < rows; ++r) {
    const double *xr = &x[r * channels];
    double ms = 0;
    for (Index c = 0; c < channels; ++c)
      ms += xr[c] * xr[c];
    ms /= channels;
    const double rrms = 1.0 / std::sqrt(ms + eps);
    for (Index c = 0; c < channels; ++c)
      y[r * channels + c] = xr[c] * rrms * gamma[c];
  }
  return y;
}

struct NormCase {
  Index rows, channels;
  std::size_t inputSamples; // FD entries of the input checked (0 = all)
};

// Small: every entry by FD. Large: over the parallel threshold, so the
// per-thread gamma/beta partials and their reduction run; FD on a sample of
// the input and on all of gamma and beta.
const NormCase kCases[] = {{6, 16, 0}, {203, 96, 48}};

// The inputs have a non-zero mean (offset 3) so that centring matters.
// Forward vs double reference: rtol 1e-5, atol 1e-5 (fp32 rows of <= 96:
// errors seen ~1e-6). Gradients vs FD: rtol 2e-5, atol 2e-5 * max|grad|
// (fp32 sums over up to 203 rows and the cancelling dx formula; the worst
// error seen is ~10x below that).
TEST(LayerNormTest, ForwardAndGradMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(10);
  const float eps = 1e-5f;
  for (const NormCase &nc : kCases) {
    SCOPED_TRACE("rows " + std::to_string(nc.rows) + " channels " +
                 std::to_string(nc.channels));
    const Index rows = nc.rows, channels = nc.channels;
    FVec xF = randomFloats(rows * channels, rng, 2.0f, 4.0f);
    FVec gF = randomFloats(channels, rng, 0.5f, 1.5f);
    FVec bF = randomFloats(channels, rng);
    FVec r = randomFloats(rows * channels, rng);
    DVec x = toDouble(xF), g = toDouble(gF), b = toDouble(bF),
         rd = toDouble(r);

    FVec y(rows * channels);
    layerNorm(xF.data(), gF.data(), bF.data(), y.data(), rows, channels, eps);
    EXPECT_TRUE(allClose(y, layerNormRef(x, g, b, rows, channels, eps), 1e-5,
                         1e-5));

    FVec dx(rows * channels), dg(channels), db(channels);
    layerNormGrad(r.data(), xF.data(), gF.data(), dx.data(), dg.data(),
                  db.data(), rows, channels, eps);
    auto objective = [&] {
      return dot(layerNormRef(x, g, b, rows, channels, eps), rd);
    };
    auto idx = sampleIndices(x.size(), nc.inputSamples ? nc.inputSamples
                                                       : x.size(),
                             rng);
    DVec fdx = finiteDifference(x, objective, idx);
    DVec fdg = finiteDifference(g, objective);
    DVec fdb = finiteDifference(b, objective);
    EXPECT_TRUE(allCloseAt(dx, idx, fdx, 2e-5, 2e-5 * maxAbs(fdx)));
    EXPECT_TRUE(allClose(dg, fdg, 2e-5, 2e-5 * maxAbs(fdg)));
    EXPECT_TRUE(allClose(db, fdb, 2e-5, 2e-5 * maxAbs(fdb)));
  }
}

// Same tolerances as layernorm.
TEST(RMSNormTest, ForwardAndGradMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(11);
  const float eps = 1e-5f;
  for (const NormCase &nc : kCases) {
    SCOPED_TRACE("rows " + std::to_string(nc.rows) + " channels " +
                 std::to_string(nc.channels));
    const Index rows = nc.rows, channels = nc.channels;
    FVec xF = randomFloats(rows * channels, rng, -2.0f, 3.0f);
    FVec gF = randomFloats(channels, rng, 0.5f, 1.5f);
    FVec r = randomFloats(rows * channels, rng);
    DVec x = toDouble(xF), g = toDouble(gF), rd = toDouble(r);

    FVec y(rows * channels);
    rmsNorm(xF.data(), gF.data(), y.data(), rows, channels, eps);
    EXPECT_TRUE(
        allClose(y, rmsNormRef(x, g, rows, channels, eps), 1e-5, 1e-5));

    FVec dx(rows * channels), dg(channels);
    rmsNormGrad(r.data(), xF.data(), gF.data(), dx.data(), dg.data(), rows,
                channels, eps);
    auto objective = [&] {
      return dot(rmsNormRef(x, g, rows, channels, eps), rd);
    };
    auto idx = sampleIndices(x.size(), nc.inputSamples ? nc.inputSamples
                                                       : x.size(),
                             rng);
    DVec fdx = finiteDifference(x, objective, idx);
    DVec fdg = finiteDifference(g, objective);
    EXPECT_TRUE(allCloseAt(dx, idx, fdx, 2e-5, 2e-5 * maxAbs(fdx)));
    EXPECT_TRUE(allClose(dg, fdg, 2e-5, 2e-5 * maxAbs(fdg)));
  }
}

// epsilon matters when a row is (nearly) constant: the layernorm output is
// then beta, and the rmsnorm of a zero row is zero, not NaN.
TEST(LayerNormTest, ConstantRowsGiveBetaAndRMSNormZeroRowsGiveZero) {
  const Index channels = 8;
  FVec x(channels, 5.0f), g(channels, 2.0f), b(channels), y(channels);
  for (Index c = 0; c < channels; ++c)
    b[c] = float(c);
  layerNorm(x.data(), g.data(), b.data(), y.data(), 1, channels, 1e-5f);
  EXPECT_EQ(y, b);
  FVec zero(channels, 0.0f);
  rmsNorm(zero.data(), g.data(), y.data(), 1, channels, 1e-5f);
  EXPECT_EQ(y, zero);
}

// The gamma/beta sums are chunked independently of the thread count: the
// gradients are the same bits with 1 and with 3 threads.
TEST(LayerNormTest, GradIsIndependentOfTheThreadCount) {
  std::mt19937 rng(12);
  const Index rows = 301, channels = 130;
  FVec x = randomFloats(rows * channels, rng), g = randomFloats(channels, rng),
       dy = randomFloats(rows * channels, rng);
  FVec dx1(x.size()), dg1(channels), db1(channels);
  FVec dx3(x.size()), dg3(channels), db3(channels);
  {
    ScopedOmpThreads pin(1);
    layerNormGrad(dy.data(), x.data(), g.data(), dx1.data(), dg1.data(),
                  db1.data(), rows, channels, 1e-5f);
  }
  {
    ScopedOmpThreads pin(3);
    layerNormGrad(dy.data(), x.data(), g.data(), dx3.data(), dg3.data(),
                  db3.data(), rows, channels, 1e-5f);
  }
  EXPECT_EQ(dx1, dx3);
  EXPECT_EQ(dg1, dg3);
  EXPECT_EQ(db1, db3);
}

} // namespace
