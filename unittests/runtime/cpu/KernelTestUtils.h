//===- KernelTestUtils.h - helpers for the CPU kernel tests -----*- C++ -*-===//
//
// Double-precision references, central finite differences and a comparison
// that names the worst element. The finite differences are taken in double
// on the double references, at the fp32 inputs the kernels saw: with
// h = 1e-5 their own error (truncation ~h^2, rounding ~1e-16/h relative) is
// below 1e-9 relative, so the tolerances in the tests measure the fp32
// kernels alone.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_UNITTESTS_RUNTIME_CPU_KERNELTESTUTILS_H
#define PARTITION_UNITTESTS_RUNTIME_CPU_KERNELTESTUTILS_H

#include <gtest/gtest.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <sstream>
#include <vector>

namespace partition::runtime::cpu::testing {

using DVec = std::vector<double>;
using FVec = std::vector<float>;

inline FVec randomFloats(std::size_t n, std::mt19937 &rng, float lo = -1.0f,
                         float hi = 1.0f) {
  std::uniform_real_distribution<float> dist(lo, hi);
  FVec v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

inline std::vector<std::int32_t> randomIds(std::size_t n, std::int32_t limit,
                                           std::mt19937 &rng) {
  std::uniform_int_distribution<std::int32_t> dist(0, limit - 1);
  std::vector<std::int32_t> v(n);
  for (auto &x : v)
    x = dist(rng);
  return v;
}

inline DVec toDouble(const FVec &v) { return DVec(v.begin(), v.end()); }

inline double maxAbs(const DVec &v) {
  double m = 0.0;
  for (double x : v)
    m = std::max(m, std::abs(x));
  return m;
}

inline double dot(const DVec &a, const DVec &b) {
  double s = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i)
    s += a[i] * b[i];
  return s;
}

/// |actual - expected| <= atol + rtol |expected| for every element; on
/// failure, reports how many elements fail and the worst one.
inline ::testing::AssertionResult allClose(const FVec &actual,
                                           const DVec &expected, double rtol,
                                           double atol) {
  if (actual.size() != expected.size())
    return ::testing::AssertionFailure()
           << "size " << actual.size() << " vs " << expected.size();
  std::size_t failures = 0, worst = 0;
  double worstExcess = -1.0;
  for (std::size_t i = 0; i < actual.size(); ++i) {
    const double err = std::abs(double(actual[i]) - expected[i]);
    const double bound = atol + rtol * std::abs(expected[i]);
    const bool bad = !(err <= bound); // NaN fails
    if (bad)
      ++failures;
    const double excess = std::isnan(err) ? 1e300 : err - bound;
    if (bad && excess > worstExcess) {
      worstExcess = excess;
      worst = i;
    }
  }
  if (failures == 0)
    return ::testing::AssertionSuccess();
  return ::testing::AssertionFailure()
         << failures << " of " << actual.size()
         << " elements differ; worst at [" << worst << "]: actual "
         << actual[worst] << ", expected " << expected[worst]
         << " (rtol " << rtol << ", atol " << atol << ")";
}

/// Same, on a subset of indices: the finite-difference estimate `expected`
/// is given for `indices` only.
inline ::testing::AssertionResult allCloseAt(const FVec &actual,
                                             const std::vector<std::size_t> &indices,
                                             const DVec &expected, double rtol,
                                             double atol) {
  FVec picked;
  for (std::size_t i : indices)
    picked.push_back(actual[i]);
  return allClose(picked, expected, rtol, atol);
}

constexpr double kFdStep = 1e-5;

/// Central differences of `objective` with respect to x[i] for i in
/// `indices` (all of x if empty), perturbing x in place and restoring it.
inline DVec finiteDifference(DVec &x, const std::function<double()> &objective,
                             const std::vector<std::size_t> &indices = {},
                             double h = kFdStep) {
  std::vector<std::size_t> all;
  const std::vector<std::size_t> *which = &indices;
  if (indices.empty()) {
    all.resize(x.size());
    for (std::size_t i = 0; i < x.size(); ++i)
      all[i] = i;
    which = &all;
  }
  DVec g;
  g.reserve(which->size());
  for (std::size_t i : *which) {
    const double saved = x[i];
    x[i] = saved + h;
    const double plus = objective();
    x[i] = saved - h;
    const double minus = objective();
    x[i] = saved;
    g.push_back((plus - minus) / (2.0 * h));
  }
  return g;
}

/// `count` distinct random indices below n (sorted), or all if n <= count.
inline std::vector<std::size_t> sampleIndices(std::size_t n, std::size_t count,
                                              std::mt19937 &rng) {
  std::vector<std::size_t> all(n);
  for (std::size_t i = 0; i < n; ++i)
    all[i] = i;
  if (n <= count)
    return all;
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(count);
  std::sort(all.begin(), all.end());
  return all;
}

/// Pins the OpenMP team size for one test (the attention kernels pick their
/// threading mode from it), restoring the previous value after.
class ScopedOmpThreads {
public:
  explicit ScopedOmpThreads(int threads) : saved(omp_get_max_threads()) {
    omp_set_num_threads(threads);
  }
  ~ScopedOmpThreads() { omp_set_num_threads(saved); }

private:
  int saved;
};

} // namespace partition::runtime::cpu::testing

#endif // PARTITION_UNITTESTS_RUNTIME_CPU_KERNELTESTUTILS_H
