//===- Linear.cpp - linear layer and its two gradients --------------------===//
//
// All three are one cblas_sgemm each, called from the executor thread so that
// OpenBLAS uses its own threads. Row-major, weight [N, K]:
//   y  [M, N] = x [M, K] W^T        (NoTrans, Trans)
//   dx [M, K] = dy [M, N] W [N, K]  (NoTrans, NoTrans)
//   dW [N, K] = dy^T [N, M] x [M, K] (Trans, NoTrans)
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cstring>

namespace partition::runtime::cpu {

using namespace detail;

namespace {


/// Column sums of grad [rows, columns], summed in fp32 whatever the storage:
/// the bf16 version gives exactly what widening, summing and rounding does.
/// Each thread owns a band of columns and walks all rows, so the inner loop
/// is contiguous and the order is fixed. Bands of at most kMaxBand columns
/// (the accumulator lives in registers and L1), as many as a multiple of the
/// team size for balance.
template <typename Element>
void sumColumns(const Element *grad, Element *sums, Index rows,
                Index columns) {
  constexpr Index kMaxBand = 256;
  const Index threads = omp_get_max_threads();
  const Index wanted =
      threads * ((columns + threads * kMaxBand - 1) / (threads * kMaxBand));
  const Index band = ((columns + wanted - 1) / wanted + 15) / 16 * 16;
  const Index bands = (columns + band - 1) / band;
#pragma omp parallel for schedule(static) if (rows * columns > kParallelThreshold)
  for (Index b = 0; b < bands; ++b) {
    const Index begin = b * band;
    const Index width = std::min(band, columns - begin);
    float acc[kMaxBand];
    for (Index c = 0; c < width; ++c)
      acc[c] = 0.0f;
    for (Index r = 0; r < rows; ++r) {
      const Element *g = grad + r * columns + begin;
#pragma omp simd
      for (Index c = 0; c < width; ++c)
        acc[c] += asFloat(g[c]);
    }
    for (Index c = 0; c < width; ++c)
      store(sums[begin + c], acc[c]);
  }
}

} // namespace

void linear(const float *input, const float *weight, const float *bias,
            float *result, Index rows, Index inFeatures, Index outFeatures) {
  const char *kernel = "linear";
  const int m = blasInt(kernel, rows), k = blasInt(kernel, inFeatures),
            n = blasInt(kernel, outFeatures);
  if (m == 0 || n == 0)
    return;
  // The bias is broadcast into the result and sgemm accumulates onto it
  // (beta = 1): OpenBLAS then skips its own pass that scales C by beta, so
  // the bias costs no extra sweep over the result.
  if (bias) {
#pragma omp parallel for schedule(static) if (rows * outFeatures > kParallelThreshold)
    for (Index r = 0; r < rows; ++r)
      std::memcpy(result + r * outFeatures, bias, sizeof(float) * outFeatures);
  }
  if (k == 0) {
    if (!bias)
      std::memset(result, 0, sizeof(float) * rows * outFeatures);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, input,
              k, weight, k, bias ? 1.0f : 0.0f, result, n);
}

void linearGradInput(const float *grad, const float *weight, float *inputGrad,
                     Index rows, Index inFeatures, Index outFeatures) {
  const char *kernel = "linear_grad_input";
  const int m = blasInt(kernel, rows), k = blasInt(kernel, inFeatures),
            n = blasInt(kernel, outFeatures);
  if (m == 0 || k == 0)
    return;
  if (n == 0) {
    std::memset(inputGrad, 0, sizeof(float) * rows * inFeatures);
    return;
  }
  cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, m, k, n, 1.0f, grad,
              n, weight, k, 0.0f, inputGrad, k);
}

void linearGradWeight(const float *grad, const float *input, float *weightGrad,
                      float *biasGrad, Index rows, Index inFeatures,
                      Index outFeatures) {
  const char *kernel = "linear_grad_weight";
  const int m = blasInt(kernel, rows), k = blasInt(kernel, inFeatures),
            n = blasInt(kernel, outFeatures);
  if (n == 0)
    return;
  if (k > 0) {
    if (m == 0)
      std::memset(weightGrad, 0, sizeof(float) * outFeatures * inFeatures);
    else
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, m, 1.0f, grad,
                  n, input, k, 0.0f, weightGrad, k);
  }
  if (biasGrad)
    sumColumns(grad, biasGrad, rows, outFeatures);
}

void linearBiasGradBFloat16(const std::uint16_t *grad, std::uint16_t *biasGrad,
                            Index rows, Index outFeatures) {
  checkNonNegative("linear_grad_weight_bias", {rows, outFeatures});
  sumColumns(grad, biasGrad, rows, outFeatures);
}

} // namespace partition::runtime::cpu
