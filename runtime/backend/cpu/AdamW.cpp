//===- AdamW.cpp - one AdamW step -----------------------------------------===//
//
// Elementwise, so new_* may be exactly the old buffers: each iteration reads
// p, g, m, v before writing at the same index. The bias corrections are
// computed once, in double (beta2^t for t ~ 1e5 needs it).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cmath>

namespace partition::runtime::cpu {

using namespace detail;

void adamw(const float *param, const float *grad, const float *moment1,
           const float *moment2, const std::int32_t *step, const float *lr,
           float *newParam, float *newMoment1, float *newMoment2, Index size,
           const AdamWConfig &config) {
  const char *kernel = "adamw";
  checkNonNegative(kernel, {size});
  const std::int32_t t = *step;
  if (t < 1)
    fail(kernel, "step is " + std::to_string(t) + ", must be >= 1");
  const float beta1 = config.beta1, beta2 = config.beta2;
  const float oneMinusBeta1 = 1.0f - beta1, oneMinusBeta2 = 1.0f - beta2;
  const float rate = *lr;
  const float decay = rate * config.weightDecay;
  const float epsilon = config.epsilon;
  const float invCorrection1 =
      static_cast<float>(1.0 / (1.0 - std::pow(double(beta1), double(t))));
  const float invCorrection2 =
      static_cast<float>(1.0 / (1.0 - std::pow(double(beta2), double(t))));
#pragma omp parallel for simd schedule(static) if (size > kParallelThreshold)
  for (Index i = 0; i < size; ++i) {
    const float p = param[i];
    const float g = grad[i];
    const float m = beta1 * moment1[i] + oneMinusBeta1 * g;
    const float v = beta2 * moment2[i] + oneMinusBeta2 * g * g;
    const float mHat = m * invCorrection1;
    const float vHat = v * invCorrection2;
    newParam[i] = p - rate * mHat / (std::sqrt(vHat) + epsilon) - decay * p;
    newMoment1[i] = m;
    newMoment2[i] = v;
  }
}

void adamwBlock(const float *param, const std::int32_t *block, Index blocks,
                const float *grad, const float *moment1, const float *moment2,
                const std::int32_t *step, const float *lr, float *newParam,
                float *newMoment1, float *newMoment2, Index size,
                const AdamWConfig &config) {
  // The block comes from the arena (an axis-index buffer the runtime
  // wrote): a wrong one would read out of bounds, so check it.
  if (*block < 0 || *block >= blocks)
    fail("adamw_block", "block " + std::to_string(*block) +
                            " is out of range for " + std::to_string(blocks) +
                            " blocks");
  adamw(param + Index(*block) * size, grad, moment1, moment2, step, lr,
        newParam, newMoment1, newMoment2, size, config);
}

} // namespace partition::runtime::cpu
