//===- Embedding.cpp - token and position embeddings ----------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <omp.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

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

namespace {
/// Every position must name a row of the table: they are data, so the
/// program loader cannot check them.
void checkPositions(const char *kernel, const int32_t *positions, Index seq,
                    Index table) {
  for (Index t = 0; t < seq; ++t)
    if (positions[t] < 0 || positions[t] >= table)
      fail(kernel, "position " + std::to_string(positions[t]) + " at index " +
                       std::to_string(t) + " is outside the table's [0, " +
                       std::to_string(table) + ")");
}
} // namespace

void positionEmbeddingAt(const float *input, const float *table,
                         const int32_t *positions, float *result, Index batch,
                         Index seq, Index tablePositions, Index channels) {
  checkNonNegative("position_embedding_at", {batch, seq, channels});
  checkPositions("position_embedding_at", positions, seq, tablePositions);
  const Index rows = batch * seq;
#pragma omp parallel for schedule(static) if (rows * channels > kParallelThreshold)
  for (Index r = 0; r < rows; ++r) {
    const float *x = input + r * channels;
    const float *p = table + Index(positions[r % seq]) * channels;
    float *y = result + r * channels;
#pragma omp simd
    for (Index c = 0; c < channels; ++c)
      y[c] = x[c] + p[c];
  }
}

void positionEmbeddingAtGrad(const float *grad, const int32_t *positions,
                             float *result, Index batch, Index seq,
                             Index tablePositions, Index channels) {
  checkNonNegative("position_embedding_at_grad",
                   {batch, seq, tablePositions, channels});
  checkPositions("position_embedding_at_grad", positions, seq, tablePositions);
  // Each row p sums the t naming it in increasing t, then b: a fixed order
  // whatever the thread count. The t of a row are listed first (a counting
  // sort) so that rows run in parallel without atomics.
  std::vector<Index> start(tablePositions + 1, 0), order(seq);
  for (Index t = 0; t < seq; ++t)
    ++start[positions[t] + 1];
  for (Index p = 0; p < tablePositions; ++p)
    start[p + 1] += start[p];
  std::vector<Index> next(start.begin(), start.end() - 1);
  for (Index t = 0; t < seq; ++t)
    order[next[positions[t]]++] = t;
#pragma omp parallel for schedule(static) if (tablePositions * channels > kParallelThreshold)
  for (Index p = 0; p < tablePositions; ++p) {
    float *y = result + p * channels;
    std::memset(y, 0, channels * sizeof(float));
    for (Index i = start[p]; i < start[p + 1]; ++i)
      for (Index b = 0; b < batch; ++b) {
        const float *g = grad + (b * seq + order[i]) * channels;
#pragma omp simd
        for (Index c = 0; c < channels; ++c)
          y[c] += g[c];
      }
  }
}

void sequencePositions(int32_t *positions, Index length, Index chunks) {
  checkNonNegative("sequence_positions", {length});
  if (chunks < 1 || (chunks > 1 && (chunks % 2 != 0 || length % chunks != 0)))
    fail("sequence_positions",
         "chunks " + std::to_string(chunks) +
             " must be 1, or even and divide the length " +
             std::to_string(length));
  // Layout block j holds chunk j / 2 (j even) or chunks - 1 - j / 2 (j odd):
  // rank r of chunks / 2 holds chunks r and chunks - 1 - r (zigzag).
  const Index chunk = length / chunks;
  for (Index j = 0; j < chunks; ++j) {
    const Index source = j % 2 == 0 ? j / 2 : chunks - 1 - j / 2;
    for (Index i = 0; i < chunk; ++i)
      positions[j * chunk + i] = int32_t(source * chunk + i);
  }
}

} // namespace partition::runtime::cpu
