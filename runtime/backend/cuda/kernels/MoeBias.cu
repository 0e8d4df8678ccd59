//===- MoeBias.cu - DeepSeek-V3's routing-bias update ---------------------===//
//
// Once per step over E values: one thread per expert sums its counts, and
// one block of one thread updates the bias with the mean in double, the
// arithmetic of runtime/backend/cpu/MoeBias.cpp, so both backends move the
// bias identically (E is at most the routing kernel's limit).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"
#include "runtime/backend/cuda/kernels/Moe.h"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

constexpr int kLoadThreads = 128;

__global__ void expertLoadKernel(const std::int32_t *counts, float *load,
                                 Index batch, Index experts) {
  Index e = Index(blockIdx.x) * blockDim.x + threadIdx.x;
  if (e >= experts)
    return;
  double sum = 0;
  for (Index b = 0; b < batch; ++b)
    sum += counts[b * experts + e];
  load[e] = float(sum);
}

__global__ void biasUpdateKernel(const float *bias, const float *load,
                                 float *newBias, Index experts, float rate) {
  double total = 0;
  for (Index e = 0; e < experts; ++e)
    total += load[e];
  const double mean = total / double(experts);
  for (Index e = 0; e < experts; ++e) {
    double error = mean - double(load[e]);
    float step = error > 0 ? rate : error < 0 ? -rate : 0.0f;
    newBias[e] = bias[e] + step;
  }
}

} // namespace

void moeExpertLoad(const std::int32_t *counts, float *load, Index batch,
                   Index experts, cudaStream_t stream) {
  const char *kernel = "moe_expert_load";
  checkNonNegative(kernel, {batch, experts});
  if (experts == 0)
    return;
  Index blocks = (experts + kLoadThreads - 1) / kLoadThreads;
  expertLoadKernel<<<unsigned(blocks), kLoadThreads, 0, stream>>>(
      counts, load, batch, experts);
  checkLaunch(kernel);
}

void moeBiasUpdate(const float *bias, const float *load, float *newBias,
                   Index experts, float rate, cudaStream_t stream) {
  const char *kernel = "moe_bias_update";
  checkNonNegative(kernel, {experts});
  if (!(rate >= 0.0f) || !(rate < INFINITY))
    throw std::invalid_argument(std::string(kernel) +
                                ": rate must be finite and not negative");
  if (experts == 0)
    return;
  biasUpdateKernel<<<1, 1, 0, stream>>>(bias, load, newBias, experts, rate);
  checkLaunch(kernel);
}

} // namespace partition::runtime::cuda
