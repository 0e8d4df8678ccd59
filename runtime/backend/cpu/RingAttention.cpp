//===- RingAttention.cpp - attention over key blocks, merge, backward -----===//
//
// The kernels of ring attention (context parallelism): each rank keeps its
// queries and sees the key/value blocks of the ring one at a time, at their
// original positions (with the zigzag layout a rank's positions are not
// contiguous, so every mask and rotation reads them explicitly).
//
// Algorithm, per (batch, head) unit for the forward and per (batch, kv head)
// unit for the backward (its query heads in sequence, accumulating dK and dV
// in place, as Attention.cpp): blocks of kBlock = 64 query rows against the
// block's keys, each product one strided cblas_sgemm (heads packed in the
// features need no transposes). The forward writes a row block's scores
// [64, Tk], softmaxes them with the row's log-sum-exp and multiplies by V;
// the backward recomputes P = exp(S - lse) from the final lse, forms dS and
// adds the row block's share of dK and dV at once (its key block is the
// ring's, small, so the [Tq, Tk] matrices of Attention.cpp's column phase
// are not needed). A row block none of whose queries sees any key of the
// block (causal: every key position above every query position; or every
// key out of the window) is skipped: out 0 and lse -inf, or no gradient.
// With the key positions ascending (contiguous and zigzag blocks both), a
// row block multiplies only the key columns between the first inside its
// lowest query's window and the last at or below its highest query, so a
// causal block costs about what its visible pairs do.
//
// The RoPE tables are per call, at the block's positions (fillRopeTable,
// shared with Attention.cpp, so position p rotates bit-identically there).
//
// Threading: the units are spread over the OpenMP team, each thread with
// its own scratch (threadScratch slot 2) and sgemm single-threaded; with
// fewer units than threads the rest of the team idles (Attention.cpp's
// row-block parallelism inside a unit is not repeated here: B * H units
// exceed the cores at the sizes ring attention is for).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/AttentionSupport.h"
#include "runtime/backend/cpu/KernelSupport.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>
#include <vector>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

constexpr Index kBlock = 64;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

/// The block's geometry: the query rows' (g: seq = Tq, RoPE rows by query
/// position) and the key rows' (keys: RoPE rows by key position).
struct Block {
  Geometry g, keys;
  Index keySeq;
  const std::int32_t *queryPositions, *keyPositions;
  std::int32_t keyMin, keyMax;
  std::vector<float> queryCos, querySin, keyCos, keySin;

  /// Key positions in ascending order (contiguous and zigzag blocks both):
  /// the keys a row block may see are then one range of columns.
  bool keysSorted;

  bool visible(Index t, Index s) const {
    if (!g.causal)
      return true;
    const std::int64_t q = queryPositions[t], k = keyPositions[s];
    return k <= q && (g.window == 0 || k > q - g.window);
  }
  /// The key columns [begin, end) that queries [i0, i1) may see: all, or,
  /// causal with sorted keys, those from the first inside the lowest
  /// query's window to the last at or below the highest query. Empty when
  /// no query of the rows sees any key of the block.
  std::pair<Index, Index> keyRange(Index i0, Index i1) const {
    if (!g.causal || keySeq == 0)
      return {0, keySeq};
    std::int64_t lo = queryPositions[i0], hi = lo;
    for (Index t = i0; t < i1; ++t) {
      lo = std::min<std::int64_t>(lo, queryPositions[t]);
      hi = std::max<std::int64_t>(hi, queryPositions[t]);
    }
    if (keyMin > hi || (g.window != 0 && keyMax <= lo - g.window))
      return {0, 0};
    if (!keysSorted)
      return {0, keySeq};
    const std::int32_t *k = keyPositions;
    const Index end = std::upper_bound(k, k + keySeq, hi) - k;
    const Index begin =
        g.window == 0 ? 0 : std::upper_bound(k, k + keySeq, lo - g.window) - k;
    return {begin, std::max(begin, end)};
  }
};

Block makeBlock(const char *kernel, const AttentionConfig &config,
                Index keySeq, const std::int32_t *queryPositions,
                const std::int32_t *keyPositions) {
  Block block;
  block.g = attentionGeometry(kernel, config);
  checkNonNegative(kernel, {keySeq});
  blasInt(kernel, keySeq);
  // Positions, not the block's length, bound the window.
  block.g.window = config.window;
  block.keys = block.g;
  block.keySeq = keySeq;
  block.queryPositions = queryPositions;
  block.keyPositions = keyPositions;
  block.keyMin = std::numeric_limits<std::int32_t>::max();
  block.keyMax = std::numeric_limits<std::int32_t>::min();
  for (Index s = 0; s < keySeq; ++s) {
    block.keyMin = std::min(block.keyMin, keyPositions[s]);
    block.keyMax = std::max(block.keyMax, keyPositions[s]);
  }
  block.keysSorted = std::is_sorted(keyPositions, keyPositions + keySeq);
  if (block.g.rope) {
    const Index half = block.g.dim / 2;
    block.queryCos.resize(block.g.seq * half);
    block.querySin.resize(block.g.seq * half);
    block.keyCos.resize(keySeq * half);
    block.keySin.resize(keySeq * half);
    fillRopeTable(queryPositions, block.g.seq, block.g.dim, config.ropeTheta,
                  config.ropeScaling, block.queryCos.data(),
                  block.querySin.data());
    fillRopeTable(keyPositions, keySeq, block.g.dim, config.ropeTheta,
                  config.ropeScaling, block.keyCos.data(),
                  block.keySin.data());
    block.g.cos = block.queryCos.data();
    block.g.sin = block.querySin.data();
    block.keys.cos = block.keyCos.data();
    block.keys.sin = block.keySin.data();
  }
  return block;
}

/// The head's rows, rotated into `dst` (row stride D) with RoPE, else the
/// head itself (row stride ld).
const float *headRows(const Geometry &g, const float *src, Index ld,
                      Index rows, float *dst, Index &ldOut) {
  if (!g.rope) {
    ldOut = ld;
    return src;
  }
  rotateRows(g, src, ld, dst, 0, rows);
  ldOut = g.dim;
  return dst;
}

/// Runs unit(i, scratch) for i < units over the OpenMP team, each thread
/// with its own scratch of `floats` floats; sgemm single-threaded inside.
template <typename Unit>
void runUnits(Index units, Index floats, Unit unit) {
  const int threads =
      int(std::max<Index>(1, std::min<Index>(units, omp_get_max_threads())));
  SerialBlasScope serialBlas(threads > 1);
#pragma omp parallel num_threads(threads)
  {
    float *scratch =
        static_cast<float *>(threadScratch(sizeof(float) * floats, 2));
#pragma omp for schedule(dynamic, 1)
    for (Index i = 0; i < units; ++i)
      unit(i, scratch);
  }
}

/// Forward of query head h of batch b. Scratch: [rotated K | rotated Q]
/// (RoPE only), then the scores [64, Tk].
void forwardHead(const Block &block, const float *query, const float *key,
                 const float *value, float *out, float *lse, Index b, Index h,
                 float *scratch) {
  const Geometry &g = block.g;
  const Index Tq = g.seq, Tk = block.keySeq;
  const Index kvh = h / g.group;
  const float *q = query + b * Tq * g.ldq + h * g.dim;
  const float *v = value + b * Tk * g.ldk + kvh * g.dim;
  float *o = out + b * Tq * g.ldq + h * g.dim;
  float *l = lse + (b * g.heads + h) * Tq;
  const Index keyFloats = g.rope ? round16(Tk * g.dim) : 0;
  const Index queryFloats = g.rope ? round16(Tq * g.dim) : 0;
  float *scores = scratch + keyFloats + queryFloats;
  Index ldk, ldq;
  const float *k = headRows(block.keys, key + b * Tk * g.ldk + kvh * g.dim,
                            g.ldk, Tk, scratch, ldk);
  q = headRows(g, q, g.ldq, Tq, scratch + keyFloats, ldq);
  for (Index i0 = 0; i0 < Tq; i0 += kBlock) {
    const Index i1 = std::min(Tq, i0 + kBlock);
    const auto [c0, c1] = block.keyRange(i0, i1);
    const Index n = c1 - c0;
    if (n == 0) {
      for (Index t = i0; t < i1; ++t) {
        std::fill(o + t * g.ldq, o + t * g.ldq + g.dim, 0.0f);
        l[t] = kMinusInf;
      }
      continue;
    }
    // Scores [rows, n] of the key columns [c0, c1).
    gemm(CblasNoTrans, CblasTrans, i1 - i0, n, g.dim, g.scale, q + i0 * ldq,
         ldq, k + c0 * ldk, ldk, 0.0f, scores, n);
    for (Index t = i0; t < i1; ++t) {
      float *row = scores + (t - i0) * n;
      float m = kMinusInf;
      for (Index s = 0; s < n; ++s) {
        if (!block.visible(t, c0 + s))
          row[s] = kMinusInf;
        m = row[s] > m ? row[s] : m;
      }
      if (m == kMinusInf) {
        std::fill(row, row + n, 0.0f);
        l[t] = kMinusInf;
        continue;
      }
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (Index s = 0; s < n; ++s) {
        const float e = fastExp(row[s] - m); // exp(-inf) = 0: masked
        row[s] = e;
        sum += e;
      }
      const float inv = 1.0f / sum;
#pragma omp simd
      for (Index s = 0; s < n; ++s)
        row[s] *= inv;
      l[t] = m + std::log(sum);
    }
    gemm(CblasNoTrans, CblasNoTrans, i1 - i0, g.dim, n, 1.0f, scores, n,
         v + c0 * g.ldk, g.ldk, 0.0f, o + i0 * g.ldq, g.ldq);
  }
}

/// Backward of kv head kvh of batch b and its query heads. Scratch:
/// [rotated K | rotated Q] (RoPE only), then P and dS [64, Tk] each.
void backwardKvHead(const Block &block, const float *grad, const float *query,
                    const float *key, const float *value, const float *out,
                    const float *lse, float *queryGrad, float *keyGrad,
                    float *valueGrad, Index b, Index kvh, float *scratch) {
  const Geometry &g = block.g;
  const Index Tq = g.seq, Tk = block.keySeq;
  const Index kvOffset = b * Tk * g.ldk + kvh * g.dim;
  const float *v = value + kvOffset;
  float *dk = keyGrad + kvOffset;
  float *dv = valueGrad + kvOffset;
  const Index keyFloats = g.rope ? round16(Tk * g.dim) : 0;
  const Index queryFloats = g.rope ? round16(Tq * g.dim) : 0;
  float *p = scratch + keyFloats + queryFloats;
  float *ds = p + round16(kBlock * Tk);
  Index ldk, ldq;
  const float *k = headRows(block.keys, key + kvOffset, g.ldk, Tk, scratch, ldk);
  for (Index s = 0; s < Tk; ++s) {
    std::fill(dk + s * g.ldk, dk + s * g.ldk + g.dim, 0.0f);
    std::fill(dv + s * g.ldk, dv + s * g.ldk + g.dim, 0.0f);
  }
  for (Index j = 0; j < g.group; ++j) {
    const Index h = kvh * g.group + j;
    const Index qOffset = b * Tq * g.ldq + h * g.dim;
    const float *dout = grad + qOffset;
    const float *o = out + qOffset;
    const float *l = lse + (b * g.heads + h) * Tq;
    float *dq = queryGrad + qOffset;
    const float *q =
        headRows(g, query + qOffset, g.ldq, Tq, scratch + keyFloats, ldq);
    for (Index i0 = 0; i0 < Tq; i0 += kBlock) {
      const Index i1 = std::min(Tq, i0 + kBlock), rows = i1 - i0;
      const auto [c0, c1] = block.keyRange(i0, i1);
      const Index n = c1 - c0;
      if (n == 0) {
        for (Index t = i0; t < i1; ++t)
          std::fill(dq + t * g.ldq, dq + t * g.ldq + g.dim, 0.0f);
        continue;
      }
      // P = exp(S - lse) over the visible keys of columns [c0, c1): the
      // probabilities of the whole attention, restricted to this block.
      gemm(CblasNoTrans, CblasTrans, rows, n, g.dim, g.scale, q + i0 * ldq,
           ldq, k + c0 * ldk, ldk, 0.0f, p, n);
      // dP = dO V^T.
      gemm(CblasNoTrans, CblasTrans, rows, n, g.dim, 1.0f, dout + i0 * g.ldq,
           g.ldq, v + c0 * g.ldk, g.ldk, 0.0f, ds, n);
      for (Index t = i0; t < i1; ++t) {
        float *pr = p + (t - i0) * n;
        float *dr = ds + (t - i0) * n;
        // D_t = sum_d dO O: the softmax backward's rowsum(P dP) over all
        // blocks, which this block alone cannot form.
        const float *gt = dout + t * g.ldq, *ot = o + t * g.ldq;
        float dot = 0.0f;
        for (Index d = 0; d < g.dim; ++d)
          dot += gt[d] * ot[d];
        const float lt = l[t];
        for (Index s = 0; s < n; ++s) {
          const float e = lt == kMinusInf || !block.visible(t, c0 + s)
                              ? 0.0f
                              : fastExp(pr[s] - lt);
          pr[s] = e;
          dr[s] = g.scale * e * (dr[s] - dot);
        }
      }
      gemm(CblasNoTrans, CblasNoTrans, rows, g.dim, n, 1.0f, ds, n,
           k + c0 * ldk, ldk, 0.0f, dq + i0 * g.ldq, g.ldq);
      if (g.rope)
        unrotateRows(g, dq, g.ldq, i0, i1);
      gemm(CblasTrans, CblasNoTrans, n, g.dim, rows, 1.0f, p, n,
           dout + i0 * g.ldq, g.ldq, 1.0f, dv + c0 * g.ldk, g.ldk);
      gemm(CblasTrans, CblasNoTrans, n, g.dim, rows, 1.0f, ds, n,
           q + i0 * ldq, ldq, 1.0f, dk + c0 * g.ldk, g.ldk);
    }
  }
  // The rotation is linear: un-rotating the group's summed dK equals
  // summing the un-rotated per-head contributions.
  if (g.rope)
    unrotateRows(block.keys, dk, g.ldk, 0, Tk);
}

Index scratchFloats(const Block &block, int products) {
  const Geometry &g = block.g;
  return (g.rope ? round16(block.keySeq * g.dim) + round16(g.seq * g.dim)
                 : 0) +
         products * round16(kBlock * block.keySeq);
}

} // namespace

void attentionBlock(const float *query, const float *key, const float *value,
                    const std::int32_t *queryPositions,
                    const std::int32_t *keyPositions, float *out, float *lse,
                    const AttentionConfig &config, Index keySeq) {
  const Block block = makeBlock("attention_block", config, keySeq,
                                queryPositions, keyPositions);
  const Geometry &g = block.g;
  if (g.batch == 0 || g.seq == 0)
    return;
  runUnits(g.batch * g.heads, scratchFloats(block, 1),
           [&](Index unit, float *scratch) {
             forwardHead(block, query, key, value, out, lse, unit / g.heads,
                         unit % g.heads, scratch);
           });
}

void attentionBlockGrad(const float *grad, const float *query,
                        const float *key, const float *value,
                        const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, const float *out,
                        const float *lse, float *queryGrad, float *keyGrad,
                        float *valueGrad, const AttentionConfig &config,
                        Index keySeq) {
  const Block block = makeBlock("attention_block_grad", config, keySeq,
                                queryPositions, keyPositions);
  const Geometry &g = block.g;
  if (g.batch == 0)
    return;
  runUnits(g.batch * g.kvHeads, scratchFloats(block, 2),
           [&](Index unit, float *scratch) {
             backwardKvHead(block, grad, query, key, value, out, lse,
                            queryGrad, keyGrad, valueGrad, unit / g.kvHeads,
                            unit % g.kvHeads, scratch);
           });
}

void attentionMerge(const float *outA, const float *lseA, const float *outB,
                    const float *lseB, float *out, float *lse, Index batch,
                    Index seq, Index heads, Index headDim) {
  checkNonNegative("attention_merge", {batch, seq, heads, headDim});
  const Index features = heads * headDim;
#pragma omp parallel for schedule(static) if (batch * seq * features > kParallelThreshold)
  for (Index bt = 0; bt < batch * seq; ++bt) {
    const Index b = bt / seq, t = bt % seq;
    for (Index h = 0; h < heads; ++h) {
      const Index row = (b * heads + h) * seq + t;
      const float la = lseA[row], lb = lseB[row];
      const float m = std::max(la, lb);
      const Index f0 = bt * features + h * headDim;
      if (m == kMinusInf) {
        std::fill(out + f0, out + f0 + headDim, 0.0f);
        lse[row] = kMinusInf;
        continue;
      }
      // logaddexp, exact in the larger term: 1 + exp(-|la - lb|).
      const float wa = std::exp(la - m), wb = std::exp(lb - m);
      const float total = wa + wb;
      const float ca = wa / total, cb = wb / total;
      for (Index d = 0; d < headDim; ++d)
        out[f0 + d] = ca * outA[f0 + d] + cb * outB[f0 + d];
      lse[row] = m + std::log1p(std::min(wa, wb));
    }
  }
}

} // namespace partition::runtime::cpu
