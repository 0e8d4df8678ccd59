//===- Norms.cu - layernorm and rmsnorm -----------------------------------===//
//
// One block per row for the forward kernels: the row's statistics are block
// reductions in a fixed tree (KernelSupport.cuh), the row is re-read from
// L1/L2 for each pass rather than staged. Statistics are two-pass (mean,
// then the squared deviations), as on the CPU, and the gradients recompute
// them.
//
// The gradient kernels run one block per fixed chunk of rows (rowChunks:
// the chunking depends on the shape only). A block walks its rows in order,
// writes each row's input gradient and adds dy * xhat (and dy) into a
// per-block fp32 accumulator in shared memory, where every thread owns the
// same columns for every row; the accumulators go to the workspace and a
// second kernel adds them in a fixed order. Reproducible bit for bit, no
// atomics.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

/// Shared memory a block gets without the opt-in: 48 KiB for the static
/// and the dynamic parts together.
constexpr std::size_t kDefaultBlockShared = 48 * 1024;
/// An upper bound on the kernels' static shared memory (their
/// ReduceScratch, 400 bytes at most).
constexpr std::size_t kStaticSharedBound = 1024;

void checkNorm(const char *kernel, Index rows, Index channels, float epsilon) {
  checkNonNegative(kernel, {rows, channels});
  if (!(epsilon > 0.0f))
    fail(kernel, "epsilon must be positive");
}

/// Allows `kernel` `bytes` of dynamic shared memory. The default limit of 48
/// KiB counts the kernel's static shared memory too, so the opt-in (up to
/// 227 KiB on sm_90, static included) is made whenever the two together may
/// pass it.
template <typename KernelFn>
void allowDynamicShared(const char *name, KernelFn *kernel, std::size_t bytes,
                        Index channels) {
  if (bytes + kStaticSharedBound <= kDefaultBlockShared)
    return;
  cudaError_t error = cudaFuncSetAttribute(
      kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(bytes));
  if (error != cudaSuccess) {
    (void)cudaGetLastError(); // not sticky; clear it
    fail(name, std::to_string(channels) + " channels need " +
                   std::to_string(bytes) +
                   " bytes of shared memory for the parameter gradients, "
                   "more than the device allows (" +
                   cudaGetErrorString(error) + ")");
  }
}

/// Row mean and 1 / sqrt(biased variance + epsilon), two passes.
template <typename T>
__device__ __forceinline__ void
meanAndRstd(const T *x, Index channels, bool packed, float invC, float epsilon,
            ReduceScratch<float, 1> &scratch, float &mean, float &rstd) {
  const PtrList<const T *, 1> in{{x}};
  float sum[1] = {0.0f};
  auto addX = [&](Index, const float *v) { sum[0] += v[0]; };
  visitElements(in, channels, packed, threadIdx.x, blockDim.x, addX);
  blockReduce(sum, scratch);
  mean = sum[0] * invC;
  float sq[1] = {0.0f};
  auto addSq = [&](Index, const float *v) {
    const float d = v[0] - mean;
    sq[0] += d * d;
  };
  visitElements(in, channels, packed, threadIdx.x, blockDim.x, addSq);
  blockReduce(sq, scratch);
  rstd = 1.0f / sqrtf(sq[0] * invC + epsilon);
}

/// 1 / sqrt(mean(x^2) + epsilon).
template <typename T>
__device__ __forceinline__ float rrmsOf(const T *x, Index channels, bool packed,
                                        float invC, float epsilon,
                                        ReduceScratch<float, 1> &scratch) {
  float sq[1] = {0.0f};
  auto addSq = [&](Index, const float *v) { sq[0] += v[0] * v[0]; };
  visitElements(PtrList<const T *, 1>{{x}}, channels, packed, threadIdx.x,
                blockDim.x, addSq);
  blockReduce(sq, scratch);
  return 1.0f / sqrtf(sq[0] * invC + epsilon);
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layerNormKernel(const T *input, const T *gamma, const T *beta, T *result,
                    Index channels, float invC, float epsilon, bool packed) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index row = blockIdx.x;
  const T *x = input + row * channels;
  T *y = result + row * channels;
  float mean, rstd;
  meanAndRstd(x, channels, packed, invC, epsilon, scratch, mean, rstd);
  auto normalise = [&](Index, const float *v, float *out) {
    out[0] = (v[0] - mean) * rstd * v[1] + v[2];
  };
  mapElements(PtrList<const T *, 3>{{x, gamma, beta}}, PtrList<T *, 1>{{y}},
              channels, packed, threadIdx.x, blockDim.x, normalise);
}

/// inputGrad for the chunk's rows; partials[chunk] = [dgamma | dbeta].
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    layerNormGradKernel(const T *grad, const T *input, const T *gamma,
                        T *inputGrad, float *partials, Index rows,
                        Index channels, Index chunkRows, float invC,
                        float epsilon, bool packed) {
  extern __shared__ float acc[]; // [2, channels]
  __shared__ ReduceScratch<float, 1> scratch1;
  __shared__ ReduceScratch<float, 2> scratch2;
  for (Index i = threadIdx.x; i < 2 * channels; i += blockDim.x)
    acc[i] = 0.0f;
  __syncthreads();
  float *dgamma = acc;
  float *dbeta = acc + channels;
  const Index chunk = blockIdx.x;
  const Index end = min(rows, (chunk + 1) * chunkRows);
  for (Index row = chunk * chunkRows; row < end; ++row) {
    const T *x = input + row * channels;
    const T *dy = grad + row * channels;
    T *dx = inputGrad + row * channels;
    float mean, rstd;
    meanAndRstd(x, channels, packed, invC, epsilon, scratch1, mean, rstd);
    // dx = rstd (g dy - mean(g dy) - xhat mean(g dy xhat)).
    const PtrList<const T *, 3> in{{x, dy, gamma}};
    float dots[2] = {0.0f, 0.0f};
    auto addDots = [&](Index, const float *v) {
      const float xhat = (v[0] - mean) * rstd;
      const float dxhat = v[1] * v[2];
      dots[0] += dxhat;
      dots[1] += dxhat * xhat;
    };
    visitElements(in, channels, packed, threadIdx.x, blockDim.x, addDots);
    blockReduce(dots, scratch2);
    const float meanDxhat = dots[0] * invC;
    const float meanDxhatXhat = dots[1] * invC;
    auto backward = [&](Index c, const float *v, float *out) {
      const float xhat = (v[0] - mean) * rstd;
      out[0] = rstd * (v[1] * v[2] - meanDxhat - xhat * meanDxhatXhat);
      dgamma[c] += v[1] * xhat;
      dbeta[c] += v[1];
    };
    mapElements(in, PtrList<T *, 1>{{dx}}, channels, packed, threadIdx.x,
                blockDim.x, backward);
  }
  __syncthreads();
  float *out = partials + chunk * 2 * channels;
  for (Index i = threadIdx.x; i < 2 * channels; i += blockDim.x)
    out[i] = acc[i];
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    rmsNormKernel(const T *input, const T *gamma, T *result, Index channels,
                  float invC, float epsilon, bool packed) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index row = blockIdx.x;
  const T *x = input + row * channels;
  T *y = result + row * channels;
  const float rrms = rrmsOf(x, channels, packed, invC, epsilon, scratch);
  auto normalise = [&](Index, const float *v, float *out) {
    out[0] = v[0] * rrms * v[1];
  };
  mapElements(PtrList<const T *, 2>{{x, gamma}}, PtrList<T *, 1>{{y}}, channels,
              packed, threadIdx.x, blockDim.x, normalise);
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    rmsNormGradKernel(const T *grad, const T *input, const T *gamma,
                      T *inputGrad, float *partials, Index rows, Index channels,
                      Index chunkRows, float invC, float epsilon, bool packed) {
  extern __shared__ float acc[]; // [channels]
  __shared__ ReduceScratch<float, 1> scratch;
  for (Index i = threadIdx.x; i < channels; i += blockDim.x)
    acc[i] = 0.0f;
  __syncthreads();
  const Index chunk = blockIdx.x;
  const Index end = min(rows, (chunk + 1) * chunkRows);
  for (Index row = chunk * chunkRows; row < end; ++row) {
    const T *x = input + row * channels;
    const T *dy = grad + row * channels;
    T *dx = inputGrad + row * channels;
    const float rrms = rrmsOf(x, channels, packed, invC, epsilon, scratch);
    // dx = rrms (g dy - xhat mean(g dy xhat)), xhat = x rrms.
    const PtrList<const T *, 3> in{{x, dy, gamma}};
    float dot[1] = {0.0f};
    auto addDot = [&](Index, const float *v) { dot[0] += v[1] * v[2] * v[0]; };
    visitElements(in, channels, packed, threadIdx.x, blockDim.x, addDot);
    blockReduce(dot, scratch);
    const float meanDxhatXhat = dot[0] * rrms * invC;
    auto backward = [&](Index c, const float *v, float *out) {
      const float xhat = v[0] * rrms;
      out[0] = rrms * (v[1] * v[2] - xhat * meanDxhatXhat);
      acc[c] += v[1] * xhat;
    };
    mapElements(in, PtrList<T *, 1>{{dx}}, channels, packed, threadIdx.x,
                blockDim.x, backward);
  }
  __syncthreads();
  float *out = partials + chunk * channels;
  for (Index i = threadIdx.x; i < channels; i += blockDim.x)
    out[i] = acc[i];
}

} // namespace

template <typename T>
void layerNorm(const T *input, const T *gamma, const T *beta, T *result,
               Index rows, Index channels, float epsilon, cudaStream_t stream) {
  const char *kernel = "layernorm";
  checkNorm(kernel, rows, channels, epsilon);
  if (rows == 0 || channels == 0)
    return;
  const bool packed = rowsAligned16<T>(input, channels) &&
                      rowsAligned16<T>(result, channels) && aligned16(gamma) &&
                      aligned16(beta);
  layerNormKernel<T>
      <<<gridCount(kernel, rows), rowThreads(loopWork(channels, packed)), 0,
         stream>>>(input, gamma, beta, result, channels, 1.0f / float(channels),
                   epsilon, packed);
  checkLaunch(kernel);
}

std::size_t layerNormGradWorkspaceSize(Index rows, Index channels) {
  checkNonNegative("layernorm_grad", {rows, channels});
  return columnSumsWorkspaceSize(rows, channels, 2);
}

template <typename T>
void layerNormGrad(const T *grad, const T *input, const T *gamma, T *inputGrad,
                   T *gammaGrad, T *betaGrad, Index rows, Index channels,
                   float epsilon, void *workspace, cudaStream_t stream) {
  const char *kernel = "layernorm_grad";
  checkNorm(kernel, rows, channels, epsilon);
  if (channels == 0)
    return;
  const RowChunks split = rowChunks(rows, channels, 2);
  auto *partials = static_cast<float *>(workspace);
  if (split.chunks > 0) {
    checkWorkspace(kernel, workspace);
    const bool packed =
        rowsAligned16<T>(grad, channels) && rowsAligned16<T>(input, channels) &&
        rowsAligned16<T>(inputGrad, channels) && aligned16(gamma);
    const std::size_t shared = 2 * channels * sizeof(float);
    allowDynamicShared(kernel, layerNormGradKernel<T>, shared, channels);
    layerNormGradKernel<T>
        <<<gridCount(kernel, split.chunks),
           rowThreads(loopWork(channels, packed)), shared, stream>>>(
            grad, input, gamma, inputGrad, partials, rows, channels,
            split.chunkRows, 1.0f / float(channels), epsilon, packed);
    checkLaunch(kernel);
  }
  finishColumnSums<T>(kernel, partials, gammaGrad, betaGrad, 2, channels,
                      split.chunks, stream);
}

template <typename T>
void rmsNorm(const T *input, const T *gamma, T *result, Index rows,
             Index channels, float epsilon, cudaStream_t stream) {
  const char *kernel = "rmsnorm";
  checkNorm(kernel, rows, channels, epsilon);
  if (rows == 0 || channels == 0)
    return;
  const bool packed = rowsAligned16<T>(input, channels) &&
                      rowsAligned16<T>(result, channels) && aligned16(gamma);
  rmsNormKernel<T><<<gridCount(kernel, rows),
                     rowThreads(loopWork(channels, packed)), 0, stream>>>(
      input, gamma, result, channels, 1.0f / float(channels), epsilon, packed);
  checkLaunch(kernel);
}

std::size_t rmsNormGradWorkspaceSize(Index rows, Index channels) {
  checkNonNegative("rmsnorm_grad", {rows, channels});
  return columnSumsWorkspaceSize(rows, channels, 1);
}

template <typename T>
void rmsNormGrad(const T *grad, const T *input, const T *gamma, T *inputGrad,
                 T *gammaGrad, Index rows, Index channels, float epsilon,
                 void *workspace, cudaStream_t stream) {
  const char *kernel = "rmsnorm_grad";
  checkNorm(kernel, rows, channels, epsilon);
  if (channels == 0)
    return;
  const RowChunks split = rowChunks(rows, channels, 1);
  auto *partials = static_cast<float *>(workspace);
  if (split.chunks > 0) {
    checkWorkspace(kernel, workspace);
    const bool packed =
        rowsAligned16<T>(grad, channels) && rowsAligned16<T>(input, channels) &&
        rowsAligned16<T>(inputGrad, channels) && aligned16(gamma);
    const std::size_t shared = channels * sizeof(float);
    allowDynamicShared(kernel, rmsNormGradKernel<T>, shared, channels);
    rmsNormGradKernel<T>
        <<<gridCount(kernel, split.chunks),
           rowThreads(loopWork(channels, packed)), shared, stream>>>(
            grad, input, gamma, inputGrad, partials, rows, channels,
            split.chunkRows, 1.0f / float(channels), epsilon, packed);
    checkLaunch(kernel);
  }
  finishColumnSums<T>(kernel, partials, gammaGrad, static_cast<T *>(nullptr), 1,
                      channels, split.chunks, stream);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void layerNorm<T>(const T *, const T *, const T *, T *, Index,      \
                             Index, float, cudaStream_t);                      \
  template void layerNormGrad<T>(const T *, const T *, const T *, T *, T *,    \
                                 T *, Index, Index, float, void *,             \
                                 cudaStream_t);                                \
  template void rmsNorm<T>(const T *, const T *, T *, Index, Index, float,     \
                           cudaStream_t);                                      \
  template void rmsNormGrad<T>(const T *, const T *, const T *, T *, T *,      \
                               Index, Index, float, void *, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
