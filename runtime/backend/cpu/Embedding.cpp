//===- Embedding.cpp - token and position embeddings ----------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>

namespace partition::runtime::cpu {

using namespace detail;

void embedding(const std::int32_t *tokens, const float *table, float *result,
               Index rows, Index vocab, Index channels) {
  checkNonNegative("embedding", {rows, vocab, channels});
  checkIds("embedding", "tokens", tokens, rows, vocab);
  const std::size_t rowBytes = channels * sizeof(float);
#pragma omp parallel for schedule(static) if (rows * channels > kParallelThreshold)
  for (Index r = 0; r < rows; ++r)
    std::memcpy(result + r * channels, table + tokens[r] * channels, rowBytes);
}

void embeddingGrad(const float *grad, const std::int32_t *tokens,
                   float *result, Index rows, Index vocab, Index channels,
                   bool accumulate) {
  checkNonNegative("embedding_grad", {rows, vocab, channels});
  checkIds("embedding_grad", "tokens", tokens, rows, vocab);
  // Repeated tokens make a row-parallel scatter race; splitting the channels
  // instead gives every thread disjoint columns of every row, no atomics, and
  // a fixed summation order (rows in order), hence reproducible sums.
#pragma omp parallel if (vocab * channels > kParallelThreshold)
  {
    const Index threads = omp_get_num_threads();
    const Index thread = omp_get_thread_num();
    if (!accumulate) {
#pragma omp for schedule(static)
      for (Index v = 0; v < vocab; ++v)
        std::memset(result + v * channels, 0, channels * sizeof(float));
    }
    // Slices are multiples of 16 floats (a cache line) so that threads do
    // not share lines.
    Index slice = (channels + threads - 1) / threads;
    slice = (slice + 15) / 16 * 16;
    const Index begin = std::min(channels, thread * slice);
    const Index end = std::min(channels, begin + slice);
    for (Index r = 0; r < rows; ++r) {
      const float *src = grad + r * channels;
      float *dst = result + tokens[r] * channels;
#pragma omp simd
      for (Index c = begin; c < end; ++c)
        dst[c] += src[c];
    }
  }
}

void positionEmbedding(const float *input, const float *table, float *result,
                       Index batch, Index seq, Index channels) {
  checkNonNegative("position_embedding", {batch, seq, channels});
  const Index rows = batch * seq;
#pragma omp parallel for schedule(static) if (rows * channels > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = input + r * channels;
    const float *p = table + (r % seq) * channels;
    float *y = result + r * channels;
#pragma omp simd
    for (Index c = 0; c < channels; ++c)
      y[c] = x[c] + p[c];
  }
}

void positionEmbeddingGrad(const float *grad, float *result, Index batch,
                           Index seq, Index positions, Index channels) {
  checkNonNegative("position_embedding_grad", {batch, seq, positions, channels});
  if (positions < seq)
    fail("position_embedding_grad",
         "the table has " + std::to_string(positions) +
             " positions, fewer than the sequence length " +
             std::to_string(seq));
#pragma omp parallel for schedule(static) if (positions * channels > kParallelThreshold)
  for (Index t = 0; t < positions; ++t) {
    float *y = result + t * channels;
    if (t >= seq || batch == 0) {
      std::memset(y, 0, channels * sizeof(float));
      continue;
    }
    std::memcpy(y, grad + t * channels, channels * sizeof(float));
    for (Index b = 1; b < batch; ++b) {
      const float *g = grad + (b * seq + t) * channels;
#pragma omp simd
      for (Index c = 0; c < channels; ++c)
        y[c] += g[c];
    }
  }
}

} // namespace partition::runtime::cpu
