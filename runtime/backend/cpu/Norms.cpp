//===- Norms.cpp - layernorm and rmsnorm ----------------------------------===//
//
// Rows are independent, so the forward kernels and the input gradients run
// one row per iteration over the OpenMP team. The gamma/beta gradients are
// sums over rows: each chunk of 32 rows accumulates into its own [C] partial
// and the partials are then added in chunk order -- a fixed order, so the
// sums are reproducible and independent of the thread count, unlike atomics
// or an omp reduction.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

void checkNorm(const char *kernel, Index rows, Index channels, float epsilon) {
  checkNonNegative(kernel, {rows, channels});
  if (!(epsilon > 0.0f))
    fail(kernel, "epsilon must be positive");
}

/// Runs rowFn(row, partials) for every row, where `partials` is the zeroed
/// [numSums * channels] accumulator of the row's chunk (kChunkRows
/// consecutive rows), then writes sums[s][c] = the sum over chunks, in chunk
/// order, of partial s at column c. The chunking does not depend on the
/// thread count, so neither do the results (bit for bit).
template <typename RowFn>
void forRowsWithColumnSums(Index rows, Index channels, int numSums,
                           float *const *sums, RowFn rowFn) {
  constexpr Index kChunkRows = 32;
  constexpr Index kBand = 64;
  const Index chunks = std::max<Index>(1, (rows + kChunkRows - 1) / kChunkRows);
  const Index stride = (numSums * channels + 15) / 16 * 16;
  auto *partials =
      static_cast<float *>(threadScratch(sizeof(float) * stride * chunks, 0));
  const Index bandsPerSum = (channels + kBand - 1) / kBand;
#pragma omp parallel if (rows * channels > kParallelThreshold)
  {
#pragma omp for schedule(static)
    for (Index chunk = 0; chunk < chunks; ++chunk) {
      float *acc = partials + chunk * stride;
      std::memset(acc, 0, sizeof(float) * numSums * channels);
      for (Index r = chunk * kChunkRows,
                 end = std::min(rows, (chunk + 1) * kChunkRows);
           r < end; ++r)
        rowFn(r, acc);
    }
#pragma omp for schedule(static)
    for (Index task = 0; task < numSums * bandsPerSum; ++task) {
      const Index s = task / bandsPerSum;
      const Index begin = (task % bandsPerSum) * kBand;
      const Index width = std::min(kBand, channels - begin);
      float total[kBand] = {};
      for (Index chunk = 0; chunk < chunks; ++chunk) {
        const float *part = partials + chunk * stride + s * channels + begin;
#pragma omp simd
        for (Index c = 0; c < width; ++c)
          total[c] += part[c];
      }
      std::memcpy(sums[s] + begin, total, sizeof(float) * width);
    }
  }
}

} // namespace

void layerNorm(const float *input, const float *gamma, const float *beta,
               float *result, Index rows, Index channels, float epsilon) {
  checkNorm("layernorm", rows, channels, epsilon);
  if (channels == 0)
    return;
  const float invC = 1.0f / static_cast<float>(channels);
#pragma omp parallel for schedule(static) if (rows * channels > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = input + r * channels;
    float *y = result + r * channels;
    // Two passes: a one-pass E[x^2] - E[x]^2 cancels badly when the row's
    // mean is large against its spread.
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index c = 0; c < channels; ++c)
      sum += x[c];
    const float mean = sum * invC;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (Index c = 0; c < channels; ++c)
      sq += (x[c] - mean) * (x[c] - mean);
    const float rstd = 1.0f / std::sqrt(sq * invC + epsilon);
#pragma omp simd
    for (Index c = 0; c < channels; ++c)
      y[c] = (x[c] - mean) * rstd * gamma[c] + beta[c];
  }
}

void layerNormGrad(const float *grad, const float *input, const float *gamma,
                   float *inputGrad, float *gammaGrad, float *betaGrad,
                   Index rows, Index channels, float epsilon) {
  checkNorm("layernorm_grad", rows, channels, epsilon);
  if (channels == 0)
    return;
  const float invC = 1.0f / static_cast<float>(channels);
  float *sums[2] = {gammaGrad, betaGrad};
  forRowsWithColumnSums(rows, channels, 2, sums, [&](Index r, float *acc) {
    const float *x = input + r * channels;
    const float *dy = grad + r * channels;
    float *dx = inputGrad + r * channels;
    float *dgamma = acc;
    float *dbeta = acc + channels;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index c = 0; c < channels; ++c)
      sum += x[c];
    const float mean = sum * invC;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (Index c = 0; c < channels; ++c)
      sq += (x[c] - mean) * (x[c] - mean);
    const float rstd = 1.0f / std::sqrt(sq * invC + epsilon);
    // dx = rstd (g dy - mean(g dy) - xhat mean(g dy xhat)).
    float dotSum = 0.0f, dotXhat = 0.0f;
#pragma omp simd reduction(+ : dotSum, dotXhat)
    for (Index c = 0; c < channels; ++c) {
      const float xhat = (x[c] - mean) * rstd;
      const float dxhat = dy[c] * gamma[c];
      dotSum += dxhat;
      dotXhat += dxhat * xhat;
    }
    const float meanDxhat = dotSum * invC;
    const float meanDxhatXhat = dotXhat * invC;
#pragma omp simd
    for (Index c = 0; c < channels; ++c) {
      const float xhat = (x[c] - mean) * rstd;
      dx[c] = rstd * (dy[c] * gamma[c] - meanDxhat - xhat * meanDxhatXhat);
      dgamma[c] += dy[c] * xhat;
      dbeta[c] += dy[c];
    }
  });
}

void rmsNorm(const float *input, const float *gamma, float *result, Index rows,
             Index channels, float epsilon) {
  checkNorm("rmsnorm", rows, channels, epsilon);
  if (channels == 0)
    return;
  const float invC = 1.0f / static_cast<float>(channels);
#pragma omp parallel for schedule(static) if (rows * channels > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = input + r * channels;
    float *y = result + r * channels;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (Index c = 0; c < channels; ++c)
      sq += x[c] * x[c];
    const float rrms = 1.0f / std::sqrt(sq * invC + epsilon);
#pragma omp simd
    for (Index c = 0; c < channels; ++c)
      y[c] = x[c] * rrms * gamma[c];
  }
}

void rmsNormGrad(const float *grad, const float *input, const float *gamma,
                 float *inputGrad, float *gammaGrad, Index rows,
                 Index channels, float epsilon) {
  checkNorm("rmsnorm_grad", rows, channels, epsilon);
  if (channels == 0)
    return;
  const float invC = 1.0f / static_cast<float>(channels);
  float *sums[1] = {gammaGrad};
  forRowsWithColumnSums(rows, channels, 1, sums, [&](Index r, float *dgamma) {
    const float *x = input + r * channels;
    const float *dy = grad + r * channels;
    float *dx = inputGrad + r * channels;
    float sq = 0.0f;
#pragma omp simd reduction(+ : sq)
    for (Index c = 0; c < channels; ++c)
      sq += x[c] * x[c];
    const float rrms = 1.0f / std::sqrt(sq * invC + epsilon);
    // dx = rrms (g dy - xhat mean(g dy xhat)), xhat = x rrms.
    float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
    for (Index c = 0; c < channels; ++c)
      dot += dy[c] * gamma[c] * x[c];
    const float meanDxhatXhat = dot * rrms * invC;
#pragma omp simd
    for (Index c = 0; c < channels; ++c) {
      const float xhat = x[c] * rrms;
      dx[c] = rrms * (dy[c] * gamma[c] - xhat * meanDxhatXhat);
      dgamma[c] += dy[c] * xhat;
    }
  });
}

} // namespace partition::runtime::cpu
