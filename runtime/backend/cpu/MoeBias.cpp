//===- MoeBias.cpp - DeepSeek-V3's routing-bias update ---------------------===//
//
// Once per step, not per token: E floats. The load is a sum of integer
// counts (exact in f32 below 2^24); the mean and the comparison are done in
// double, so the sign, and therefore the new bias, is the same on every plan
// and on the CUDA backend (runtime/backend/cuda/kernels/MoeBias.cu).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cmath>
#include <string>

namespace partition::runtime::cpu {

using namespace detail;

void moeExpertLoad(const std::int32_t *counts, float *load, Index batch,
                   Index experts) {
  checkNonNegative("moe_expert_load", {batch, experts});
  for (Index e = 0; e < experts; ++e) {
    double sum = 0;
    for (Index b = 0; b < batch; ++b)
      sum += counts[b * experts + e];
    load[e] = float(sum);
  }
}

void moeBiasUpdate(const float *bias, const float *load, float *newBias,
                   Index experts, float rate) {
  const char *kernel = "moe_bias_update";
  checkNonNegative(kernel, {experts});
  if (!(rate >= 0.0f) || !std::isfinite(rate))
    fail(kernel, "rate " + std::to_string(rate) +
                     " must be finite and not negative");
  double total = 0;
  for (Index e = 0; e < experts; ++e)
    total += load[e];
  const double mean = experts > 0 ? total / double(experts) : 0.0;
  // newBias may be bias (in place): each element is read before written.
  for (Index e = 0; e < experts; ++e) {
    double error = mean - double(load[e]);
    float step = error > 0 ? rate : error < 0 ? -rate : 0.0f;
    newBias[e] = bias[e] + step;
  }
}

} // namespace partition::runtime::cpu
