//===- VocabParallel.cpp - vocabulary-parallel embedding and loss ---------===//
//
// The kernels of one tensor-parallel rank that holds rows
// [shard * Vl, (shard + 1) * Vl) of the vocabulary: its slice of the
// embedding table and the last dimension of its logits. Between them the
// runtime all-reduces per-position statistics ([rows] floats), never the
// logits. Each kernel is the matching unsharded one (Embedding.cpp,
// Loss.cpp) restricted to the local columns, computed in the same order
// with the same fastExp, so that the combined result of all shards equals
// the unsharded one to rounding.
//
// A padded vocabulary (Megatron-LM pads it to a multiple of tp x 128 so that
// it splits evenly) has global ids at or beyond the logical vocabulary `vocab`
// in the last shards: the statistics skip those columns and their gradient
// is exactly zero (not exp(-inf) rounded, which AdamW would turn into a full
// step), so the loss and every gradient are those of the unpadded model.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <string>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

/// The first global id of the shard; throws unless the shard's rows are
/// representable as i32 token ids.
Index shardBegin(const char *kernel, const std::int32_t *shard,
                 Index localVocab) {
  if (*shard < 0)
    fail(kernel, "shard " + std::to_string(*shard) + " is negative");
  const Index begin = Index(*shard) * localVocab;
  if (begin + localVocab - 1 > Index(INT32_MAX))
    fail(kernel, "shard " + std::to_string(*shard) + " of " +
                     std::to_string(localVocab) +
                     " ids starts beyond the i32 token ids");
  return begin;
}

/// Ids are global: any shard may see any id, but none is negative.
void checkNonNegativeIds(const char *kernel, const char *what,
                         const std::int32_t *ids, Index count) {
  for (Index i = 0; i < count; ++i)
    if (ids[i] < 0)
      fail(kernel, std::string(what) + "[" + std::to_string(i) + "] = " +
                       std::to_string(ids[i]) + " is negative");
}

/// The local column of global id `id`, or -1 when another shard holds it.
inline Index localId(std::int32_t id, Index begin, Index localVocab) {
  const Index local = Index(id) - begin;
  return local >= 0 && local < localVocab ? local : -1;
}

/// How many leading local columns are real ids: all of them without
/// padding (no shard, or vocab < 0), else those below `vocab`.
Index realColumns(const char *kernel, const std::int32_t *shard,
                  Index localVocab, Index vocab) {
  if (!shard || vocab < 0)
    return localVocab;
  const Index begin = shardBegin(kernel, shard, localVocab);
  return std::clamp<Index>(vocab - begin, 0, localVocab);
}

float rowMax(const float *x, Index n) {
  float m = -std::numeric_limits<float>::infinity();
#pragma omp simd reduction(max : m)
  for (Index i = 0; i < n; ++i)
    m = x[i] > m ? x[i] : m;
  return m;
}

} // namespace

void vocabParallelEmbedding(const std::int32_t *tokens, const float *table,
                            const std::int32_t *shard, float *result,
                            Index rows, Index localVocab, Index channels) {
  const char *kernel = "vocab_parallel_embedding";
  checkNonNegative(kernel, {rows, localVocab, channels});
  checkNonNegativeIds(kernel, "tokens", tokens, rows);
  const Index begin = shardBegin(kernel, shard, localVocab);
  const std::size_t rowBytes = channels * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * channels > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const Index local = localId(tokens[r], begin, localVocab);
    if (local < 0)
      std::memset(result + r * channels, 0, rowBytes);
    else
      std::memcpy(result + r * channels, table + local * channels, rowBytes);
  }
}

void vocabParallelEmbeddingGrad(const float *grad, const std::int32_t *tokens,
                                const std::int32_t *shard, float *result,
                                Index rows, Index localVocab, Index channels) {
  const char *kernel = "vocab_parallel_embedding_grad";
  checkNonNegative(kernel, {rows, localVocab, channels});
  checkNonNegativeIds(kernel, "tokens", tokens, rows);
  const Index begin = shardBegin(kernel, shard, localVocab);
  // As embeddingGrad: threads own cache-line-aligned slices of the channels
  // and visit rows in order, so sums are race-free and reproducible.
#pragma omp parallel if (localVocab * channels > kParallelThreshold)
  {
    const Index threads = omp_get_num_threads();
    const Index thread = omp_get_thread_num();
#pragma omp for schedule(static)
    for (Index v = 0; v < localVocab; ++v)
      std::memset(result + v * channels, 0, channels * sizeof(float));
    Index slice = (channels + threads - 1) / threads;
    slice = (slice + 15) / 16 * 16;
    const Index sliceBegin = std::min(channels, thread * slice);
    const Index sliceEnd = std::min(channels, sliceBegin + slice);
    for (Index r = 0; r < rows; ++r) {
      const Index local = localId(tokens[r], begin, localVocab);
      if (local < 0)
        continue;
      const float *src = grad + r * channels;
      float *dst = result + local * channels;
#pragma omp simd
      for (Index c = sliceBegin; c < sliceEnd; ++c)
        dst[c] += src[c];
    }
  }
}

void vocabParallelMax(const float *logits, float *result, Index rows,
                      Index localVocab, const std::int32_t *shard,
                      Index vocab) {
  const char *kernel = "vocab_parallel_max";
  checkNonNegative(kernel, {rows, localVocab});
  const Index real = realColumns(kernel, shard, localVocab, vocab);
#pragma omp parallel for schedule(static) if (rows * localVocab > kParallelThreshold)
  for (Index r = 0; r < rows; ++r)
    result[r] = rowMax(logits + r * localVocab, real);
}

void vocabParallelTargetLogit(const float *logits, const std::int32_t *targets,
                              const std::int32_t *shard, float *result,
                              Index rows, Index localVocab) {
  const char *kernel = "vocab_parallel_target_logit";
  checkNonNegative(kernel, {rows, localVocab});
  checkNonNegativeIds(kernel, "targets", targets, rows);
  const Index begin = shardBegin(kernel, shard, localVocab);
  for (Index r = 0; r < rows; ++r) {
    const Index local = localId(targets[r], begin, localVocab);
    result[r] = local < 0 ? 0.0f : logits[r * localVocab + local];
  }
}

void vocabParallelSumExp(const float *logits, const float *max, float *result,
                         Index rows, Index localVocab,
                         const std::int32_t *shard, Index vocab) {
  const char *kernel = "vocab_parallel_sum_exp";
  checkNonNegative(kernel, {rows, localVocab});
  const Index real = realColumns(kernel, shard, localVocab, vocab);
#pragma omp parallel for schedule(static) if (rows * localVocab > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = logits + r * localVocab;
    const float m = max[r];
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index i = 0; i < real; ++i)
      sum += fastExp(x[i] - m);
    result[r] = sum;
  }
}

void vocabParallelLoss(const float *max, const float *sumExp,
                       const float *targetLogit, float *loss, Index rows) {
  checkNonNegative("vocab_parallel_loss", {rows});
  if (rows == 0) {
    *loss = std::nanf(""); // the mean of nothing, as softmaxCrossEntropy
    return;
  }
  // As softmaxCrossEntropy: each row's loss in double, added in row order.
  double total = 0.0;
  for (Index r = 0; r < rows; ++r)
    total += std::log(static_cast<double>(sumExp[r])) + max[r] - targetLogit[r];
  *loss = static_cast<float>(total / static_cast<double>(rows));
}

void vocabParallelCrossEntropyGrad(const float *lossGrad, const float *logits,
                                   const std::int32_t *targets,
                                   const std::int32_t *shard, const float *max,
                                   const float *sumExp, float *result,
                                   Index rows, Index localVocab, Index vocab) {
  const char *kernel = "vocab_parallel_cross_entropy_grad";
  checkNonNegative(kernel, {rows, localVocab});
  checkNonNegativeIds(kernel, "targets", targets, rows);
  const Index begin = shardBegin(kernel, shard, localVocab);
  const Index real = realColumns(kernel, shard, localVocab, vocab);
  for (Index r = 0; r < rows; ++r)
    if (vocab >= 0 && targets[r] >= vocab)
      fail(kernel, "targets[" + std::to_string(r) + "] = " +
                       std::to_string(targets[r]) +
                       " is a padding id (the vocabulary is " +
                       std::to_string(vocab) + ")");
  if (rows == 0)
    return;
  const float factor = *lossGrad / static_cast<float>(rows);
#pragma omp parallel for schedule(static) if (rows * localVocab > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = logits + r * localVocab;
    float *y = result + r * localVocab;
    const float m = max[r];
    const float norm = factor / sumExp[r];
#pragma omp simd
    for (Index i = 0; i < real; ++i)
      y[i] = fastExp(x[i] - m) * norm;
    std::fill(y + real, y + localVocab, 0.0f);
    const Index local = localId(targets[r], begin, localVocab);
    if (local >= 0)
      y[local] -= factor;
  }
}

} // namespace partition::runtime::cpu
