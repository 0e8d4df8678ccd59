//===- MoeAuxLoss.cu - the router's load-balancing and z losses -----------===//
//
// Per token (one thread each: E is small) the softmax statistics or the
// sigmoids' sum; per group (one block each) the expert fractions f_i and,
// for the loss, E sum_i f_i P_i and the z terms, summed in double over a
// fixed tree; then one thread adds the groups in order. No float atomics,
// so loss and gradient are reproducible bit for bit. The arithmetic follows
// runtime/backend/cpu/Moe.cpp (double sums, the same float roundings).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"
#include "runtime/backend/cuda/kernels/Moe.h"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

constexpr int kTokenThreads = 128;
constexpr int kGroupThreads = 256;

/// The workspace: per-token statistics, per-group fractions and sums.
struct AuxLayout {
  float *max = nullptr;       // [B*S] max logit (softmax)
  double *sum = nullptr;      // [B*S] sum exp(l - max)
  double *total = nullptr;    // [B*S] sum of the sigmoids (sigmoid)
  std::int32_t *fraction = nullptr; // [B*E] choices of each expert
  double *partial = nullptr;  // [B*2] balance and z of each group
  std::size_t bytes = 0;
};

AuxLayout auxLayout(void *base, const MoeShape &s) {
  WorkspaceCarver carve(base);
  AuxLayout layout;
  const std::size_t tokens = std::size_t(s.batch * s.seq);
  layout.max = carve.take<float>(tokens);
  layout.sum = carve.take<double>(tokens);
  layout.total = carve.take<double>(tokens);
  layout.fraction = carve.take<std::int32_t>(std::size_t(s.batch * s.experts));
  layout.partial = carve.take<double>(std::size_t(2 * s.batch));
  layout.bytes = carve.size();
  return layout;
}

__device__ __forceinline__ float sigmoidOf(float x) {
  return 1.0f / (1.0f + expf(-x));
}

/// max and sum of exp(l - max) (softmax), the sigmoids' sum (sigmoid).
template <typename T>
__global__ void __launch_bounds__(kTokenThreads)
    tokenStatsKernel(const T *logits, AuxLayout w, Index tokens, Index E,
                     MoeScoring scoring) {
  for (Index token = blockIdx.x * Index(blockDim.x) + threadIdx.x;
       token < tokens; token += Index(gridDim.x) * blockDim.x) {
    const T *l = logits + token * E;
    float max = -INFINITY;
    for (Index i = 0; i < E; ++i)
      max = maxOf(max, load(l + i));
    double sum = 0, total = 0;
    for (Index i = 0; i < E; ++i)
      sum += exp(double(load(l + i) - max));
    if (scoring == MoeScoring::Sigmoid)
      for (Index i = 0; i < E; ++i)
        total += sigmoidOf(load(l + i));
    w.max[token] = max;
    w.sum[token] = sum;
    w.total[token] = total;
  }
}

/// fraction[b, i] = the group's choices of expert i; bad ids set *badId
/// and count for no expert.
__global__ void __launch_bounds__(kGroupThreads)
    fractionKernel(const std::int32_t *experts, AuxLayout w, Index S, Index E,
                   Index K, int *badId) {
  const Index b = blockIdx.x;
  const std::int32_t *ids = experts + b * S * K;
  for (Index c = threadIdx.x; c < S * K; c += blockDim.x)
    if (ids[c] < 0 || ids[c] >= E)
      flagBadId(badId);
  for (Index i = threadIdx.x; i < E; i += blockDim.x) {
    std::int32_t count = 0;
    for (Index c = 0; c < S * K; ++c)
      count += ids[c] == i;
    w.fraction[b * E + i] = count;
  }
}

__device__ __forceinline__ float lseOf(const AuxLayout &w, Index token) {
  return w.max[token] + float(log(w.sum[token]));
}

/// A token's normalised score of expert i (cpu tokenProbabilities).
template <typename T>
__device__ __forceinline__ float probability(const T *l, Index i,
                                             const AuxLayout &w, Index token,
                                             MoeScoring scoring) {
  if (scoring == MoeScoring::Sigmoid)
    return float(sigmoidOf(load(l + i)) / w.total[token]);
  return float(exp(double(load(l + i) - w.max[token])) / w.sum[token]);
}

/// partial[b] = {E sum_i f_i P_i / S^2, sum_t lse_t^2} of group b.
template <typename T>
__global__ void __launch_bounds__(kGroupThreads)
    groupTermsKernel(const T *logits, AuxLayout w, Index S, Index E,
                     MoeScoring scoring) {
  __shared__ ReduceScratch<double, 2> scratch;
  const Index b = blockIdx.x;
  double v[2] = {0.0, 0.0};
  for (Index i = threadIdx.x; i < E; i += blockDim.x) {
    double mean = 0;
    for (Index t = 0; t < S; ++t) {
      const Index token = b * S + t;
      mean += probability(logits + token * E, i, w, token, scoring);
    }
    v[0] += double(w.fraction[b * E + i]) * mean;
  }
  for (Index t = threadIdx.x; t < S; t += blockDim.x) {
    const float lse = lseOf(w, b * S + t);
    v[1] += double(lse) * lse;
  }
  blockReduce(v, scratch);
  if (threadIdx.x == 0) {
    w.partial[2 * b] = double(E) * v[0] / (double(S) * double(S));
    w.partial[2 * b + 1] = v[1];
  }
}

__global__ void finalLossKernel(AuxLayout w, float *loss, Index B, Index S,
                                float auxCoef, float zCoef) {
  if (threadIdx.x != 0)
    return;
  double balance = 0, z = 0;
  for (Index b = 0; b < B; ++b) {
    balance += w.partial[2 * b];
    z += w.partial[2 * b + 1];
  }
  const double groups = double(B > 1 ? B : 1);
  const double tokens = double(B * S > 1 ? B * S : 1);
  *loss = float(auxCoef * balance / groups + zCoef * z / tokens);
}

/// One thread per token: the logits' gradient (cpu moeAuxLossGrad).
template <typename T>
__global__ void __launch_bounds__(kTokenThreads)
    auxGradKernel(const float *lossGrad, const T *logits, T *logitsGrad,
                  AuxLayout w, Index B, Index S, Index E, MoeScoring scoring,
                  float auxCoef, float zCoef) {
  const double groups = double(B > 1 ? B : 1);
  const double tokens = double(B * S > 1 ? B * S : 1);
  const double seq = double(S > 1 ? S : 1);
  const double scale = *lossGrad;
  for (Index token = blockIdx.x * Index(blockDim.x) + threadIdx.x;
       token < B * S; token += Index(gridDim.x) * blockDim.x) {
    const Index b = token / S;
    const T *l = logits + token * E;
    T *dl = logitsGrad + token * E;
    const std::int32_t *fraction = w.fraction + b * E;
    auto dp = [&](Index i) {
      return auxCoef * double(E) * fraction[i] / (seq * seq * groups);
    };
    double dot = 0;
    for (Index i = 0; i < E; ++i)
      dot += probability(l, i, w, token, scoring) * dp(i);
    const float lse = lseOf(w, token);
    const double zScale = zCoef * 2.0 * lse / tokens;
    double sigmoidTotal = 0;
    if (scoring == MoeScoring::Sigmoid)
      for (Index i = 0; i < E; ++i)
        sigmoidTotal += 1.0 / (1.0 + exp(-double(load(l + i))));
    for (Index i = 0; i < E; ++i) {
      double balance;
      if (scoring == MoeScoring::Sigmoid) {
        const double sig = 1.0 / (1.0 + exp(-double(load(l + i))));
        balance = (dp(i) - dot) / sigmoidTotal * sig * (1.0 - sig);
      } else {
        balance = probability(l, i, w, token, scoring) * (dp(i) - dot);
      }
      // d lse / d l_i is softmax(l)_i whatever the scoring.
      const double softmax = exp(double(load(l + i)) - lse);
      store(dl + i, float(scale * (balance + zScale * softmax)));
    }
  }
}

void checkAux(const char *kernel, const MoeShape &s, void *workspace) {
  checkNonNegative(kernel, {s.batch, s.seq, s.experts, s.topK});
  if (s.topK < 1 || s.topK > s.experts)
    fail(kernel, "top_k " + std::to_string(s.topK) + " is not in [1, " +
                     std::to_string(s.experts) + "]");
  gridCount(kernel, s.batch);
  // No tokens: the workspace is empty and may be null.
  if (s.batch * s.seq > 0)
    checkWorkspace(kernel, workspace);
}

unsigned tokenBlocks(Index tokens) {
  return unsigned(std::max<Index>(
      1, std::min<Index>(65535, (tokens + kTokenThreads - 1) / kTokenThreads)));
}

/// *sum += *loss * weight, by one thread (stream-ordered after the loss).
__global__ void tallyAuxLossKernel(const float *loss, double *sum,
                                   double weight) {
  if (blockIdx.x == 0 && threadIdx.x == 0)
    *sum += double(*loss) * weight;
}

} // namespace

void moeAuxLossTally(const float *loss, double *sum, double weight,
                     cudaStream_t stream) {
  tallyAuxLossKernel<<<1, 32, 0, stream>>>(loss, sum, weight);
  checkLaunch("moe_aux_loss_tally");
}

std::size_t moeAuxLossWorkspaceSize(const MoeShape &shape) {
  return auxLayout(nullptr, shape).bytes;
}

template <typename T>
void moeAuxLoss(const T *logits, const std::int32_t *experts, float *loss,
                const MoeShape &s, MoeScoring scoring, float auxCoef,
                float zCoef, void *workspace, int *badId,
                cudaStream_t stream) {
  const char *kernel = "moe_aux_loss";
  checkAux(kernel, s, workspace);
  AuxLayout w = auxLayout(workspace, s);
  const Index tokens = s.batch * s.seq;
  if (tokens > 0) {
    tokenStatsKernel<T><<<tokenBlocks(tokens), kTokenThreads, 0, stream>>>(
        logits, w, tokens, s.experts, scoring);
    checkLaunch(kernel);
    fractionKernel<<<unsigned(s.batch), kGroupThreads, 0, stream>>>(
        experts, w, s.seq, s.experts, s.topK, badId);
    checkLaunch(kernel);
    groupTermsKernel<T><<<unsigned(s.batch), kGroupThreads, 0, stream>>>(
        logits, w, s.seq, s.experts, scoring);
    checkLaunch(kernel);
  }
  finalLossKernel<<<1, 32, 0, stream>>>(w, loss, s.batch, s.seq, auxCoef,
                                        zCoef);
  checkLaunch(kernel);
}

template <typename T>
void moeAuxLossGrad(const float *lossGrad, const T *logits,
                    const std::int32_t *experts, T *logitsGrad,
                    const MoeShape &s, MoeScoring scoring, float auxCoef,
                    float zCoef, void *workspace, int *badId,
                    cudaStream_t stream) {
  const char *kernel = "moe_aux_loss_grad";
  checkAux(kernel, s, workspace);
  AuxLayout w = auxLayout(workspace, s);
  const Index tokens = s.batch * s.seq;
  if (tokens == 0)
    return;
  tokenStatsKernel<T><<<tokenBlocks(tokens), kTokenThreads, 0, stream>>>(
      logits, w, tokens, s.experts, scoring);
  checkLaunch(kernel);
  fractionKernel<<<unsigned(s.batch), kGroupThreads, 0, stream>>>(
      experts, w, s.seq, s.experts, s.topK, badId);
  checkLaunch(kernel);
  auxGradKernel<T><<<tokenBlocks(tokens), kTokenThreads, 0, stream>>>(
      lossGrad, logits, logitsGrad, w, s.batch, s.seq, s.experts, scoring,
      auxCoef, zCoef);
  checkLaunch(kernel);
}

#define PARTITION_MOE_AUX(T)                                                   \
  template void moeAuxLoss<T>(const T *, const std::int32_t *, float *,        \
                              const MoeShape &, MoeScoring, float, float,      \
                              void *, int *, cudaStream_t);                    \
  template void moeAuxLossGrad<T>(const float *, const T *,                    \
                                  const std::int32_t *, T *, const MoeShape &, \
                                  MoeScoring, float, float, void *, int *,     \
                                  cudaStream_t);
PARTITION_MOE_AUX(float)
PARTITION_MOE_AUX(bf16)
#undef PARTITION_MOE_AUX

} // namespace partition::runtime::cuda
