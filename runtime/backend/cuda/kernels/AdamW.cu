//===- AdamW.cu - one AdamW step ------------------------------------------===//
//
// Elementwise over fp32 buffers; the new_* outputs may be exactly the old
// ones (each element is read before it is written). The step and the
// learning rate live on the device, so each block computes the bias
// corrections once, in double as the CPU kernel does (beta2^t for t ~ 1e5
// needs it), into shared memory.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

struct AdamWStep {
  float beta1, beta2, oneMinusBeta1, oneMinusBeta2, epsilon;
  float rate, decay, invCorrection1, invCorrection2;
  __device__ void operator()(Index, const float *in, float *out) const {
    const float p = in[0], g = in[1];
    const float m = beta1 * in[2] + oneMinusBeta1 * g;
    const float v = beta2 * in[3] + oneMinusBeta2 * g * g;
    const float mHat = m * invCorrection1;
    const float vHat = v * invCorrection2;
    out[0] = p - rate * mHat / (sqrtf(vHat) + epsilon) - decay * p;
    out[1] = m;
    out[2] = v;
  }
};

__global__ void __launch_bounds__(kFlatThreads)
    adamwKernel(PtrList<const float *, 4> in, PtrList<float *, 3> out,
                const std::int32_t *step, const float *lr, Index size,
                bool packed, AdamWConfig config, const std::int32_t *block,
                Index blocks, int *badId) {
  // adamw_block: the parameter is block *block of a flat one.
  if (block) {
    const std::int32_t chosen = *block;
    if (chosen < 0 || chosen >= blocks) {
      if (blockIdx.x == 0 && threadIdx.x == 0)
        flagBadId(badId);
      return;
    }
    in.p[0] += Index(chosen) * size;
  }
  __shared__ float coefficients[3];
  if (threadIdx.x == 0) {
    // A step below 1 is the backend's bug (the CPU kernel throws); it gives
    // infinite or NaN parameters here rather than a crash.
    const double t = *step;
    coefficients[0] = *lr;
    coefficients[1] =
        static_cast<float>(1.0 / (1.0 - pow(double(config.beta1), t)));
    coefficients[2] =
        static_cast<float>(1.0 / (1.0 - pow(double(config.beta2), t)));
  }
  __syncthreads();
  AdamWStep fn;
  fn.beta1 = config.beta1;
  fn.beta2 = config.beta2;
  fn.oneMinusBeta1 = 1.0f - config.beta1;
  fn.oneMinusBeta2 = 1.0f - config.beta2;
  fn.epsilon = config.epsilon;
  fn.rate = coefficients[0];
  fn.decay = coefficients[0] * config.weightDecay;
  fn.invCorrection1 = coefficients[1];
  fn.invCorrection2 = coefficients[2];
  mapElements(in, out, size, packed,
              Index(blockIdx.x) * blockDim.x + threadIdx.x,
              Index(gridDim.x) * blockDim.x, fn);
}

void launchAdamW(const char *kernel, const float *param, const float *grad,
                 const float *moment1, const float *moment2,
                 const std::int32_t *step, const float *lr, float *newParam,
                 float *newMoment1, float *newMoment2, Index size,
                 const AdamWConfig &config, const std::int32_t *block,
                 Index blocks, int *badId, cudaStream_t stream) {
  checkNonNegative(kernel, {size, blocks});
  if (size == 0)
    return;
  const PtrList<const float *, 4> in{{param, grad, moment1, moment2}};
  const PtrList<float *, 3> out{{newParam, newMoment1, newMoment2}};
  // A block starts 16-byte aligned, as its parameter does, when its size is
  // a multiple of four floats.
  bool packed = !block || size % 4 == 0;
  for (const float *p : in.p)
    packed = packed && aligned16(p);
  for (float *p : out.p)
    packed = packed && aligned16(p);
  adamwKernel<<<flatBlocks(loopWork(size, packed)), kFlatThreads, 0, stream>>>(
      in, out, step, lr, size, packed, config, block, blocks, badId);
  checkLaunch(kernel);
}

} // namespace

void adamw(const float *param, const float *grad, const float *moment1,
           const float *moment2, const std::int32_t *step, const float *lr,
           float *newParam, float *newMoment1, float *newMoment2, Index size,
           const AdamWConfig &config, cudaStream_t stream) {
  launchAdamW("adamw", param, grad, moment1, moment2, step, lr, newParam,
              newMoment1, newMoment2, size, config, nullptr, 0, nullptr,
              stream);
}

void adamwBlock(const float *param, const std::int32_t *block, Index blocks,
                const float *grad, const float *moment1, const float *moment2,
                const std::int32_t *step, const float *lr, float *newParam,
                float *newMoment1, float *newMoment2, Index size,
                const AdamWConfig &config, int *badId, cudaStream_t stream) {
  launchAdamW("adamw_block", param, grad, moment1, moment2, step, lr,
              newParam, newMoment1, newMoment2, size, config, block, blocks,
              badId, stream);
}

} // namespace partition::runtime::cuda
