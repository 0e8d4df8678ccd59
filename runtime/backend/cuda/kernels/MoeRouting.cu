//===- MoeRouting.cu - top-k routing and the router's losses --------------===//
//
// Routing is one thread per token for the scores, the top-k and the gates
// (k and E are small: a token's work is O(k E), and tokens are many), then
// one thread per group for the slots: GShard's priority (every first choice
// in sequence order before any second one) is a serial scan of the group's
// S k choices, and a single thread makes it exactly the CPU's order with
// the running counts in shared memory.
//
// The arithmetic mirrors runtime/backend/cpu/Moe.cpp (exp in double where it
// sums in double) so that the top-k, which compares scores, picks the same
// experts as the CPU on the same logits.
//
// The aux loss sums per group in double (one block per group, a fixed
// tree), then one thread adds the groups in order: no float atomics, so it
// is reproducible bit for bit.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"
#include "runtime/backend/cuda/kernels/Moe.h"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

constexpr int kRouteThreads = 128;

__device__ __forceinline__ float sigmoidOf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/// A token's softmax statistics: the max (NaNs skipped) and the sum of
/// exp(l - max) in double.
template <typename T>
__device__ void softmaxStats(const T *l, Index experts, float &max,
                             double &sum) {
  max = -INFINITY;
  for (Index i = 0; i < experts; ++i)
    max = maxOf(max, load(l + i));
  sum = 0;
  for (Index i = 0; i < experts; ++i)
    sum += exp(double(load(l + i) - max));
}

/// The gates of the chosen experts (cpu chosenGates): softmax over the
/// chosen logits, or the chosen sigmoids over their sum.
template <typename T>
__device__ void chosenGates(const T *l, const std::int32_t *chosen, Index k,
                            MoeScoring scoring, float *gates) {
  if (scoring == MoeScoring::Sigmoid) {
    double total = 0;
    for (Index j = 0; j < k; ++j)
      total += sigmoidOf(load(l + chosen[j]));
    for (Index j = 0; j < k; ++j)
      gates[j] = float(sigmoidOf(load(l + chosen[j])) / total);
    return;
  }
  float max = -INFINITY;
  for (Index j = 0; j < k; ++j)
    max = maxOf(max, load(l + chosen[j]));
  double sum = 0;
  for (Index j = 0; j < k; ++j)
    sum += exp(double(load(l + chosen[j]) - max));
  for (Index j = 0; j < k; ++j)
    gates[j] = float(exp(double(load(l + chosen[j]) - max)) / sum);
}

/// Scores, top-k (repeated selection, ties to the lower index, a NaN
/// score loses) and gates of each token.
template <typename T>
__global__ void __launch_bounds__(kRouteThreads)
    routeTokensKernel(const T *logits, const float *bias, T *gates,
                      std::int32_t *experts, Index tokens, Index E, Index K,
                      MoeScoring scoring) {
  for (Index token = blockIdx.x * Index(blockDim.x) + threadIdx.x;
       token < tokens; token += Index(gridDim.x) * blockDim.x) {
    const T *l = logits + token * E;
    float max = 0;
    double sum = 1;
    if (scoring == MoeScoring::Softmax)
      softmaxStats(l, E, max, sum);
    auto score = [&](Index i) {
      const float x = load(l + i);
      float base = scoring == MoeScoring::Softmax
                       ? float(exp(double(x - max)) / sum)
                   : scoring == MoeScoring::Sigmoid ? sigmoidOf(x)
                                                    : x;
      return base + (bias ? bias[i] : 0.0f);
    };
    std::int32_t *chosen = experts + token * K;
    for (Index j = 0; j < K; ++j) {
      Index best = -1;
      float bestScore = 0;
      for (Index i = 0; i < E; ++i) {
        bool taken = false;
        for (Index m = 0; m < j; ++m)
          taken |= chosen[m] == i;
        if (taken)
          continue;
        const float s = score(i);
        if (best < 0 || s > bestScore || (isnan(bestScore) && !isnan(s))) {
          best = i;
          bestScore = s;
        }
      }
      chosen[j] = std::int32_t(best);
    }
    // The gates in registers: top_k <= 64 (checked on the host).
    float g[kMaxRouteTopK];
    chosenGates(l, chosen, K, scoring, g);
    for (Index j = 0; j < K; ++j)
      store(gates + token * K + j, g[j]);
  }
}

/// Slots and counts of group blockIdx.x, by one thread in GShard's order.
__global__ void assignSlotsKernel(const std::int32_t *experts,
                                  std::int32_t *slots, std::int32_t *counts,
                                  Index S, Index E, Index K, Index capacity) {
  extern __shared__ int filled[];
  if (threadIdx.x != 0)
    return;
  const Index b = blockIdx.x;
  for (Index e = 0; e < E; ++e)
    filled[e] = 0;
  for (Index j = 0; j < K; ++j)
    for (Index t = 0; t < S; ++t) {
      const Index choice = (b * S + t) * K + j;
      int &f = filled[experts[choice]];
      slots[choice] = f < capacity ? f++ : -1;
    }
  for (Index e = 0; e < E; ++e)
    counts[b * E + e] = filled[e];
}

/// One thread per token: the chosen logits' gradient (cpu moeRouteGrad),
/// zeros elsewhere. A bad expert id leaves the token's row zero.
template <typename T>
__global__ void __launch_bounds__(kRouteThreads)
    routeGradKernel(const T *gatesGrad, const T *logits,
                    const std::int32_t *experts, T *logitsGrad, Index tokens,
                    Index E, Index K, MoeScoring scoring, int *badId) {
  for (Index token = blockIdx.x * Index(blockDim.x) + threadIdx.x;
       token < tokens; token += Index(gridDim.x) * blockDim.x) {
    const T *l = logits + token * E;
    const std::int32_t *chosen = experts + token * K;
    T *dl = logitsGrad + token * E;
    for (Index i = 0; i < E; ++i)
      store(dl + i, 0.0f);
    bool valid = true;
    for (Index j = 0; j < K; ++j)
      valid &= chosen[j] >= 0 && chosen[j] < E;
    if (!valid) {
      flagBadId(badId);
      continue;
    }
    float g[kMaxRouteTopK];
    chosenGates(l, chosen, K, scoring, g);
    double dot = 0, total = 0;
    for (Index j = 0; j < K; ++j)
      dot += double(g[j]) * load(gatesGrad + token * K + j);
    if (scoring == MoeScoring::Sigmoid)
      for (Index j = 0; j < K; ++j)
        total += sigmoidOf(load(l + chosen[j]));
    for (Index j = 0; j < K; ++j) {
      const double centred = load(gatesGrad + token * K + j) - dot;
      const float sig = sigmoidOf(load(l + chosen[j]));
      store(dl + chosen[j], scoring == MoeScoring::Sigmoid
                                ? float(centred / total * sig * (1.0f - sig))
                                : float(g[j] * centred));
    }
  }
}

/// One thread per expert adds the rows it kept over every group (the
/// metrics' load; stream-ordered after the routing, so no atomics).
__global__ void tallyRoutingKernel(const std::int32_t *counts,
                                   unsigned long long *kept, Index B,
                                   Index E) {
  for (Index e = blockIdx.x * Index(blockDim.x) + threadIdx.x; e < E;
       e += Index(gridDim.x) * blockDim.x) {
    unsigned long long sum = 0;
    for (Index b = 0; b < B; ++b)
      sum += (unsigned long long)(counts[b * E + e]);
    kept[e] += sum;
  }
}

void checkMoe(const char *kernel, const MoeShape &s) {
  checkNonNegative(kernel, {s.batch, s.seq, s.experts, s.topK, s.capacity});
  if (s.topK < 1 || s.topK > s.experts)
    fail(kernel, "top_k " + std::to_string(s.topK) + " is not in [1, " +
                     std::to_string(s.experts) + "]");
  // The gates of a token live in registers.
  if (s.topK > kMaxRouteTopK)
    fail(kernel, "top_k " + std::to_string(s.topK) + " exceeds " +
                     std::to_string(kMaxRouteTopK));
}

unsigned tokenBlocks(Index tokens) {
  return unsigned(std::max<Index>(
      1, std::min<Index>(65535, (tokens + kRouteThreads - 1) / kRouteThreads)));
}

} // namespace

template <typename T>
void moeRoute(const T *logits, const float *bias, T *gates,
              std::int32_t *experts, std::int32_t *slots,
              std::int32_t *counts, const MoeShape &s, MoeScoring scoring,
              cudaStream_t stream) {
  const char *kernel = "moe_route";
  checkMoe(kernel, s);
  if (s.capacity < 1 || s.capacity > s.seq)
    fail(kernel, "capacity " + std::to_string(s.capacity) +
                     " is not in [1, " + std::to_string(s.seq) + "]");
  if (s.experts > kMaxRouteExperts)
    fail(kernel, std::to_string(s.experts) + " experts exceed the counters' "
                                             "48 KiB of shared memory");
  const Index tokens = s.batch * s.seq;
  if (tokens == 0)
    return;
  routeTokensKernel<T><<<tokenBlocks(tokens), kRouteThreads, 0, stream>>>(
      logits, bias, gates, experts, tokens, s.experts, s.topK, scoring);
  checkLaunch(kernel);
  assignSlotsKernel<<<gridCount(kernel, s.batch), 32,
                      s.experts * sizeof(int), stream>>>(
      experts, slots, counts, s.seq, s.experts, s.topK, s.capacity);
  checkLaunch(kernel);
}

template <typename T>
void moeRouteGrad(const T *gatesGrad, const T *logits,
                  const std::int32_t *experts, T *logitsGrad,
                  const MoeShape &s, MoeScoring scoring, int *badId,
                  cudaStream_t stream) {
  const char *kernel = "moe_route_grad";
  checkMoe(kernel, s);
  const Index tokens = s.batch * s.seq;
  if (tokens == 0)
    return;
  routeGradKernel<T><<<tokenBlocks(tokens), kRouteThreads, 0, stream>>>(
      gatesGrad, logits, experts, logitsGrad, tokens, s.experts, s.topK,
      scoring, badId);
  checkLaunch(kernel);
}

void moeRoutingTally(const std::int32_t *counts, unsigned long long *kept,
                     const MoeShape &s, cudaStream_t stream) {
  const char *kernel = "moe_routing_tally";
  checkNonNegative(kernel, {s.batch, s.experts});
  if (s.experts == 0)
    return;
  tallyRoutingKernel<<<tokenBlocks(s.experts), kRouteThreads, 0, stream>>>(
      counts, kept, s.batch, s.experts);
  checkLaunch(kernel);
}

template void moeRoute<float>(const float *, const float *, float *,
                              std::int32_t *, std::int32_t *, std::int32_t *,
                              const MoeShape &, MoeScoring, cudaStream_t);
template void moeRoute<bf16>(const bf16 *, const float *, bf16 *,
                             std::int32_t *, std::int32_t *, std::int32_t *,
                             const MoeShape &, MoeScoring, cudaStream_t);
template void moeRouteGrad<float>(const float *, const float *,
                                  const std::int32_t *, float *,
                                  const MoeShape &, MoeScoring, int *,
                                  cudaStream_t);
template void moeRouteGrad<bf16>(const bf16 *, const bf16 *,
                                 const std::int32_t *, bf16 *,
                                 const MoeShape &, MoeScoring, int *,
                                 cudaStream_t);

} // namespace partition::runtime::cuda
