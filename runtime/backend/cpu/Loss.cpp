//===- Loss.cpp - softmax cross-entropy and its gradient ------------------===//
//
// One row (a position's logits, V up to ~50k: 200 KB, L2-resident) per
// iteration over the team. Both kernels subtract the row maximum before
// exponentiating. The forward keeps each row's loss in double and adds them
// serially in row order, so the mean is reproducible and does not lose the
// small per-row terms against a large running sum.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cmath>

namespace partition::runtime::cpu {

using namespace detail;

namespace {
float rowMax(const float *x, Index n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (Index i = 0; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}
} // namespace

void softmaxCrossEntropy(const float *logits, const std::int32_t *targets,
                         float *loss, Index rows, Index vocab) {
  const char *kernel = "softmax_cross_entropy";
  checkNonNegative(kernel, {rows, vocab});
  checkIds(kernel, "targets", targets, rows, vocab);
  if (rows == 0) {
    *loss = std::nanf(""); // the mean of nothing, as in PyTorch
    return;
  }
  auto *rowLoss =
      static_cast<double *>(threadScratch(sizeof(double) * rows, 0));
#pragma omp parallel for schedule(static) if (rows * vocab > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = logits + r * vocab;
    const float m = rowMax(x, vocab);
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index i = 0; i < vocab; ++i)
      sum += fastExp(x[i] - m);
    // -log softmax[target] = log(sum exp(x - m)) + m - x[target].
    rowLoss[r] = std::log(static_cast<double>(sum)) + m - x[targets[r]];
  }
  double total = 0.0;
  for (Index r = 0; r < rows; ++r)
    total += rowLoss[r];
  *loss = static_cast<float>(total / static_cast<double>(rows));
}

void softmaxCrossEntropyGrad(const float *lossGrad, const float *logits,
                             const std::int32_t *targets, float *result,
                             Index rows, Index vocab) {
  const char *kernel = "softmax_cross_entropy_grad";
  checkNonNegative(kernel, {rows, vocab});
  checkIds(kernel, "targets", targets, rows, vocab);
  if (rows == 0)
    return;
  const float factor = *lossGrad / static_cast<float>(rows);
#pragma omp parallel for schedule(static) if (rows * vocab > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = logits + r * vocab;
    float *y = result + r * vocab;
    const float m = rowMax(x, vocab);
    // Exponentials go straight to the output (one exp per logit), then one
    // in-cache pass scales them.
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index i = 0; i < vocab; ++i) {
      const float e = fastExp(x[i] - m);
      y[i] = e;
      sum += e;
    }
    const float norm = factor / sum;
#pragma omp simd
    for (Index i = 0; i < vocab; ++i)
      y[i] *= norm;
    y[targets[r]] -= factor;
  }
}

} // namespace partition::runtime::cpu
