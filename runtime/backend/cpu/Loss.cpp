//===- Loss.cpp - softmax cross-entropy and its gradient ------------------===//
//
// One row (a position's logits, V up to ~50k: 200 KB, L2-resident) per
// iteration over the team; bf16 logits are widened a row at a time into the
// thread's scratch (and a bf16 gradient computed there and rounded into its
// row), the same arithmetic as on widened copies. Both kernels subtract the
// row maximum before exponentiating. The forward keeps each row's loss in double and adds them
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

/// Row r of the logits as fp32: the row itself, or a bf16 row widened into
/// this thread's scratch (200 KB at GPT-2's vocabulary: it stays in L2).
const float *rowOf(const float *logits, Index r, Index vocab) {
  return logits + r * vocab;
}
const float *rowOf(const std::uint16_t *logits, Index r, Index vocab) {
  auto *row = static_cast<float *>(threadScratch(sizeof(float) * vocab, 1));
  const std::uint16_t *bits = logits + r * vocab;
#pragma omp simd
  for (Index i = 0; i < vocab; ++i)
    row[i] = asFloat(bits[i]);
  return row;
}

template <typename Logit>
void crossEntropy(const Logit *logits, const std::int32_t *targets,
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
    const float *x = rowOf(logits, r, vocab);
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

/// Row r of the gradient, computed in fp32: the row itself, or (bf16) this
/// thread's scratch, rounded into the row by finishRow.
float *gradRowOf(float *result, Index r, Index vocab) {
  return result + r * vocab;
}
float *gradRowOf(std::uint16_t *, Index, Index vocab) {
  return static_cast<float *>(threadScratch(sizeof(float) * vocab, 2));
}
void finishRow(const float *, float *, Index, Index) {}
void finishRow(const float *row, std::uint16_t *result, Index r, Index vocab) {
  std::uint16_t *out = result + r * vocab;
#pragma omp simd
  for (Index i = 0; i < vocab; ++i)
    store(out[i], row[i]);
}

template <typename Logit>
void crossEntropyGrad(const float *lossGrad, const Logit *logits,
                      const std::int32_t *targets, Logit *result, Index rows,
                      Index vocab) {
  const char *kernel = "softmax_cross_entropy_grad";
  checkNonNegative(kernel, {rows, vocab});
  checkIds(kernel, "targets", targets, rows, vocab);
  if (rows == 0)
    return;
  const float factor = *lossGrad / static_cast<float>(rows);
#pragma omp parallel for schedule(static) if (rows * vocab > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = rowOf(logits, r, vocab);
    float *y = gradRowOf(result, r, vocab);
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
    finishRow(y, result, r, vocab);
  }
}
} // namespace

void softmaxCrossEntropy(const float *logits, const std::int32_t *targets,
                         float *loss, Index rows, Index vocab) {
  crossEntropy(logits, targets, loss, rows, vocab);
}
void softmaxCrossEntropyBFloat16(const std::uint16_t *logits,
                                 const std::int32_t *targets, float *loss,
                                 Index rows, Index vocab) {
  crossEntropy(logits, targets, loss, rows, vocab);
}
void softmaxCrossEntropyGrad(const float *lossGrad, const float *logits,
                             const std::int32_t *targets, float *result,
                             Index rows, Index vocab) {
  crossEntropyGrad(lossGrad, logits, targets, result, rows, vocab);
}
void softmaxCrossEntropyGradBFloat16(const float *lossGrad,
                                     const std::uint16_t *logits,
                                     const std::int32_t *targets,
                                     std::uint16_t *result, Index rows,
                                     Index vocab) {
  crossEntropyGrad(lossGrad, logits, targets, result, rows, vocab);
}

} // namespace partition::runtime::cpu
