//===- VocabParallel.cu - vocabulary-parallel embedding and loss ----------===//
//
// The kernels of one tensor-parallel rank holding global ids
// [*shard * Vl, (*shard + 1) * Vl) (runtime/backend/cpu/VocabParallel.cpp): each is
// the unsharded CUDA kernel restricted to the local columns, with the same
// reductions (Loss.cu, Embedding.cu), so that the shards combine to the
// unsharded result to rounding. Ids are global; ids of other shards
// contribute zeros. A negative id sets *badId (its row gets zeros, or no
// one-hot term); so does a negative shard (or one whose ids do not fit
// i32), and every id is then treated as another shard's.
//
// A padded vocabulary (`vocab` >= 0: global ids at or beyond it are the
// padding Megatron-LM adds so that the vocabulary splits evenly): max and
// sum_exp skip those columns and their gradient is exactly zero, as on the
// CPU, so that the loss and every gradient are the unpadded model's.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

/// The leading local columns that are real ids: all without padding (no
/// shard, vocab < 0, or a bad shard, which the target-logit and gradient
/// kernels report), else those below `vocab`.
__device__ __forceinline__ Index realColumns(const std::int32_t *shard,
                                             Index localVocab, Index vocab) {
  if (!shard || vocab < 0)
    return localVocab;
  const Index begin = shardBegin(shard, localVocab);
  if (begin < 0)
    return localVocab;
  const Index real = vocab - begin;
  return real < 0 ? 0 : real > localVocab ? localVocab : real;
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    rowMaxKernel(const T *logits, float *result, Index localVocab,
                 bool packed, const std::int32_t *shard, Index vocab) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index row = blockIdx.x;
  const float m = rowMax(logits + row * localVocab,
                         realColumns(shard, localVocab, vocab), packed,
                         scratch);
  if (threadIdx.x == 0)
    result[row] = m;
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    rowSumExpKernel(const T *logits, const float *max, float *result,
                    Index localVocab, bool packed, const std::int32_t *shard,
                    Index vocab) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index row = blockIdx.x;
  const float sum =
      rowSumExp(logits + row * localVocab,
                realColumns(shard, localVocab, vocab), max[row], packed,
                scratch);
  if (threadIdx.x == 0)
    result[row] = sum;
}

/// The local column of global id `id`, -1 for another shard's, -2 for a
/// negative id.
__device__ __forceinline__ Index localColumn(std::int32_t id, Index begin,
                                             Index localVocab) {
  if (id < 0)
    return -2;
  if (begin < 0)
    return -1;
  const Index local = Index(id) - begin;
  return local >= 0 && local < localVocab ? local : -1;
}

template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    targetLogitKernel(const T *logits, const std::int32_t *targets,
                      const std::int32_t *shard, float *result, Index rows,
                      Index localVocab, int *badId) {
  const Index begin = shardBegin(shard, localVocab);
  if (begin < 0 && blockIdx.x == 0 && threadIdx.x == 0)
    flagBadId(badId);
  for (Index r = Index(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += Index(gridDim.x) * blockDim.x) {
    const Index local = localColumn(targets[r], begin, localVocab);
    if (local == -2)
      flagBadId(badId);
    result[r] = local < 0 ? 0.0f : load(logits + r * localVocab + local);
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    vocabGradKernel(const float *lossGrad, const T *logits,
                    const std::int32_t *targets, const std::int32_t *shard,
                    const float *max, const float *sumExp, T *result,
                    Index rows, Index localVocab, Index vocab, bool packed,
                    int *badId) {
  const Index row = blockIdx.x;
  const Index begin = shardBegin(shard, localVocab);
  const Index local = localColumn(targets[row], begin, localVocab);
  const bool paddingTarget = vocab >= 0 && targets[row] >= vocab;
  if (threadIdx.x == 0 &&
      (local == -2 || paddingTarget || (begin < 0 && row == 0)))
    flagBadId(badId);
  const Index real = realColumns(shard, localVocab, vocab);
  const bool valid = local != -2;
  const float factor = valid ? *lossGrad / static_cast<float>(rows) : 0.0f;
  const float m = max[row];
  const float norm = factor / sumExp[row];
  auto gradient = [&](Index c, const float *v, float *out) {
    // Rounded product first, as the CPU's y[i] = e * norm; y[t] -= factor.
    float g = __fmul_rn(expf(v[0] - m), norm);
    if (c == local)
      g -= factor;
    out[0] = valid && c < real ? g : 0.0f;
  };
  mapElements(PtrList<const T *, 1>{{logits + row * localVocab}},
              PtrList<T *, 1>{{result + row * localVocab}}, localVocab, packed,
              threadIdx.x, blockDim.x, gradient);
}

} // namespace

template <typename T>
void vocabParallelEmbedding(const std::int32_t *tokens, const T *table,
                            const std::int32_t *shard, T *result, Index rows,
                            Index localVocab, Index channels, int *badId,
                            cudaStream_t stream) {
  embeddingRows<T>("vocab_parallel_embedding", tokens, table, shard, result,
                   rows, localVocab, channels, badId, stream);
}

std::size_t vocabParallelEmbeddingGradWorkspaceSize(Index rows,
                                                    Index localVocab,
                                                    Index channels) {
  const char *kernel = "vocab_parallel_embedding_grad";
  checkNonNegative(kernel, {rows, localVocab, channels});
  return scatterRowsByTokenWorkspaceSize(kernel, rows, localVocab);
}

template <typename T>
void vocabParallelEmbeddingGrad(const T *grad, const std::int32_t *tokens,
                                const std::int32_t *shard, T *result,
                                Index rows, Index localVocab, Index channels,
                                void *workspace, int *badId,
                                cudaStream_t stream) {
  const char *kernel = "vocab_parallel_embedding_grad";
  checkNonNegative(kernel, {rows, localVocab, channels});
  scatterRowsByToken<T>(kernel, grad, tokens, shard, result, rows, localVocab,
                        channels, /*accumulate=*/false, workspace, badId,
                        stream);
}

template <typename T>
void vocabParallelMax(const T *logits, float *result, Index rows,
                      Index localVocab, cudaStream_t stream,
                      const std::int32_t *shard, Index vocab) {
  const char *kernel = "vocab_parallel_max";
  checkNonNegative(kernel, {rows, localVocab});
  if (rows == 0)
    return;
  const bool packed = rowsAligned16<T>(logits, localVocab);
  rowMaxKernel<T>
      <<<gridCount(kernel, rows), rowThreads(loopWork(localVocab, packed)), 0,
         stream>>>(logits, result, localVocab, packed, shard, vocab);
  checkLaunch(kernel);
}

template <typename T>
void vocabParallelTargetLogit(const T *logits, const std::int32_t *targets,
                              const std::int32_t *shard, float *result,
                              Index rows, Index localVocab, int *badId,
                              cudaStream_t stream) {
  const char *kernel = "vocab_parallel_target_logit";
  checkNonNegative(kernel, {rows, localVocab});
  if (rows == 0)
    return;
  targetLogitKernel<T><<<flatBlocks(rows), kFlatThreads, 0, stream>>>(
      logits, targets, shard, result, rows, localVocab, badId);
  checkLaunch(kernel);
}

template <typename T>
void vocabParallelSumExp(const T *logits, const float *max, float *result,
                         Index rows, Index localVocab, cudaStream_t stream,
                         const std::int32_t *shard, Index vocab) {
  const char *kernel = "vocab_parallel_sum_exp";
  checkNonNegative(kernel, {rows, localVocab});
  if (rows == 0)
    return;
  const bool packed = rowsAligned16<T>(logits, localVocab);
  rowSumExpKernel<T>
      <<<gridCount(kernel, rows), rowThreads(loopWork(localVocab, packed)), 0,
         stream>>>(logits, max, result, localVocab, packed, shard, vocab);
  checkLaunch(kernel);
}

std::size_t vocabParallelLossWorkspaceSize(Index rows) {
  checkNonNegative("vocab_parallel_loss", {rows});
  return 0;
}

void vocabParallelLoss(const float *max, const float *sumExp,
                       const float *targetLogit, float *loss, Index rows,
                       void * /*workspace*/, cudaStream_t stream) {
  const char *kernel = "vocab_parallel_loss";
  checkNonNegative(kernel, {rows});
  launchMeanLoss(kernel, nullptr, max, sumExp, targetLogit, loss, rows, stream);
}

template <typename T>
void vocabParallelCrossEntropyGrad(const float *lossGrad, const T *logits,
                                   const std::int32_t *targets,
                                   const std::int32_t *shard, const float *max,
                                   const float *sumExp, T *result, Index rows,
                                   Index localVocab, int *badId,
                                   cudaStream_t stream, Index vocab) {
  const char *kernel = "vocab_parallel_cross_entropy_grad";
  checkNonNegative(kernel, {rows, localVocab});
  if (rows == 0)
    return;
  const bool packed = rowsAligned16<T>(logits, localVocab) &&
                      rowsAligned16<T>(result, localVocab);
  vocabGradKernel<T>
      <<<gridCount(kernel, rows), rowThreads(loopWork(localVocab, packed)), 0,
         stream>>>(lossGrad, logits, targets, shard, max, sumExp, result, rows,
                   localVocab, vocab, packed, badId);
  checkLaunch(kernel);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void vocabParallelEmbedding<T>(const std::int32_t *, const T *,     \
                                          const std::int32_t *, T *, Index,    \
                                          Index, Index, int *, cudaStream_t);  \
  template void vocabParallelEmbeddingGrad<T>(                                 \
      const T *, const std::int32_t *, const std::int32_t *, T *, Index,       \
      Index, Index, void *, int *, cudaStream_t);                              \
  template void vocabParallelMax<T>(const T *, float *, Index, Index,          \
                                    cudaStream_t, const std::int32_t *,        \
                                    Index);                                    \
  template void vocabParallelTargetLogit<T>(                                   \
      const T *, const std::int32_t *, const std::int32_t *, float *, Index,   \
      Index, int *, cudaStream_t);                                             \
  template void vocabParallelSumExp<T>(const T *, const float *, float *,      \
                                       Index, Index, cudaStream_t,             \
                                       const std::int32_t *, Index);           \
  template void vocabParallelCrossEntropyGrad<T>(                              \
      const float *, const T *, const std::int32_t *, const std::int32_t *,    \
      const float *, const float *, T *, Index, Index, int *, cudaStream_t,    \
      Index);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
