//===- MoeDispatch.cu - tokens to expert buffers and back -----------------===//
//
// One block per token, threads over the channels: a token's k rows are
// touched by its block only, and every expert-buffer row belongs to at most
// one (token, choice), so no two blocks write one row and nothing needs
// atomics. The buffers' rows that no choice fills (past the counts) are
// zeroed by a flat pass first: the expert GEMMs rely on them being zero.
// A choice with a bad expert id or slot sets *badId and is treated as
// dropped, so corrupt routing never indexes outside the buffer.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"
#include "runtime/backend/cuda/kernels/Moe.h"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    zeroKernel(T *result, Index size) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < size;
       i += Index(gridDim.x) * blockDim.x)
    store(result + i, 0.0f);
}

template <typename T> void zero(const char *kernel, T *result, Index size,
                                cudaStream_t stream) {
  if (size == 0)
    return;
  zeroKernel<T><<<flatBlocks(size), kFlatThreads, 0, stream>>>(result, size);
  checkLaunch(kernel);
}

/// The buffer row of choice `choice` of token `token`, or -1 when the
/// choice is dropped or invalid (invalid also flags *badId, by thread 0).
__device__ __forceinline__ Index choiceRow(const std::int32_t *experts,
                                           const std::int32_t *slots,
                                           Index token, Index choice,
                                           const MoeShape &s, int *badId) {
  const std::int32_t e = experts[choice], slot = slots[choice];
  if (e < 0 || e >= s.experts || slot < -1 || slot >= s.capacity) {
    if (threadIdx.x == 0)
      flagBadId(badId);
    return -1;
  }
  if (slot < 0)
    return -1;
  const Index b = token / s.seq;
  return (b * s.experts + e) * s.capacity + slot;
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    dispatchKernel(const T *input, const std::int32_t *experts,
                   const std::int32_t *slots, T *buffer, MoeShape s,
                   int *badId) {
  const Index token = blockIdx.x, H = s.channels;
  for (Index j = 0; j < s.topK; ++j) {
    const Index row =
        choiceRow(experts, slots, token, token * s.topK + j, s, badId);
    if (row < 0)
      continue;
    for (Index c = threadIdx.x; c < H; c += blockDim.x)
      buffer[row * H + c] = input[token * H + c];
  }
}

/// result[token] = sum over kept choices, in choice order, of g * row
/// (g = 1 without gates: moe_dispatch_grad).
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    combineKernel(const T *buffer, const T *gates,
                  const std::int32_t *experts, const std::int32_t *slots,
                  T *result, MoeShape s, int *badId) {
  const Index token = blockIdx.x, H = s.channels;
  for (Index c = threadIdx.x; c < H; c += blockDim.x) {
    float acc = 0.0f;
    for (Index j = 0; j < s.topK; ++j) {
      const Index choice = token * s.topK + j;
      const Index row = choiceRow(experts, slots, token, choice, s, badId);
      if (row < 0)
        continue;
      const float g = gates ? load(gates + choice) : 1.0f;
      acc += g * load(buffer + row * H + c);
    }
    store(result + token * H + c, acc);
  }
}

/// bufferGrad rows of the kept choices (the rest zeroed before) and the
/// gates' gradient <dy, row> by a fixed-order block reduction.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    combineGradKernel(const T *resultGrad, const T *buffer, const T *gates,
                      const std::int32_t *experts, const std::int32_t *slots,
                      T *bufferGrad, T *gatesGrad, MoeShape s, int *badId) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index token = blockIdx.x, H = s.channels;
  const T *dy = resultGrad + token * H;
  for (Index j = 0; j < s.topK; ++j) {
    const Index choice = token * s.topK + j;
    const Index row = choiceRow(experts, slots, token, choice, s, badId);
    // Uniform over the block: every thread sees the same row.
    if (row < 0) {
      if (threadIdx.x == 0)
        store(gatesGrad + choice, 0.0f);
      continue;
    }
    const float g = load(gates + choice);
    float dot[1] = {0.0f};
    for (Index c = threadIdx.x; c < H; c += blockDim.x) {
      const float d = load(dy + c);
      store(bufferGrad + row * H + c, g * d);
      dot[0] += d * load(buffer + row * H + c);
    }
    blockReduce(dot, scratch);
    if (threadIdx.x == 0)
      store(gatesGrad + choice, dot[0]);
  }
}

void checkMoe(const char *kernel, const MoeShape &s) {
  checkNonNegative(kernel, {s.batch, s.seq, s.channels, s.experts, s.topK,
                            s.capacity});
  gridCount(kernel, s.batch * s.seq);
}

} // namespace

template <typename T>
void moeDispatch(const T *input, const std::int32_t *experts,
                 const std::int32_t *slots, T *buffer, const MoeShape &s,
                 int *badId, cudaStream_t stream) {
  const char *kernel = "moe_dispatch";
  checkMoe(kernel, s);
  zero(kernel, buffer, s.batch * s.experts * s.capacity * s.channels, stream);
  const Index tokens = s.batch * s.seq;
  if (tokens == 0 || s.channels == 0)
    return;
  dispatchKernel<T><<<unsigned(tokens), rowThreads(s.channels), 0, stream>>>(
      input, experts, slots, buffer, s, badId);
  checkLaunch(kernel);
}

template <typename T>
void moeCombine(const T *buffer, const T *gates, const std::int32_t *experts,
                const std::int32_t *slots, T *result, const MoeShape &s,
                int *badId, cudaStream_t stream) {
  const char *kernel = gates ? "moe_combine" : "moe_dispatch_grad";
  checkMoe(kernel, s);
  const Index tokens = s.batch * s.seq;
  if (tokens == 0 || s.channels == 0)
    return;
  combineKernel<T><<<unsigned(tokens), rowThreads(s.channels), 0, stream>>>(
      buffer, gates, experts, slots, result, s, badId);
  checkLaunch(kernel);
}

template <typename T>
void moeCombineGrad(const T *resultGrad, const T *buffer, const T *gates,
                    const std::int32_t *experts, const std::int32_t *slots,
                    T *bufferGrad, T *gatesGrad, const MoeShape &s,
                    int *badId, cudaStream_t stream) {
  const char *kernel = "moe_combine_grad";
  checkMoe(kernel, s);
  zero(kernel, bufferGrad, s.batch * s.experts * s.capacity * s.channels,
       stream);
  const Index tokens = s.batch * s.seq;
  if (tokens == 0)
    return;
  // Launched even for zero channels: the gates' gradient is then 0.
  combineGradKernel<T>
      <<<unsigned(tokens), rowThreads(s.channels), 0, stream>>>(
          resultGrad, buffer, gates, experts, slots, bufferGrad, gatesGrad, s,
          badId);
  checkLaunch(kernel);
}

#define PARTITION_MOE_DISPATCH(T)                                              \
  template void moeDispatch<T>(const T *, const std::int32_t *,                \
                               const std::int32_t *, T *, const MoeShape &,    \
                               int *, cudaStream_t);                           \
  template void moeCombine<T>(const T *, const T *, const std::int32_t *,      \
                              const std::int32_t *, T *, const MoeShape &,     \
                              int *, cudaStream_t);                            \
  template void moeCombineGrad<T>(const T *, const T *, const T *,             \
                                  const std::int32_t *, const std::int32_t *,  \
                                  T *, T *, const MoeShape &, int *,           \
                                  cudaStream_t);
PARTITION_MOE_DISPATCH(float)
PARTITION_MOE_DISPATCH(bf16)
#undef PARTITION_MOE_DISPATCH

} // namespace partition::runtime::cuda
