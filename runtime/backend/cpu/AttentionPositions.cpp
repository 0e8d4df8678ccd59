//===- AttentionPositions.cpp - attention at explicit positions -----------===//
//
// Attention whose mask and RoPE angles come from position arrays (context
// parallelism: a permuted, zigzag sequence; local queries against
// all-gathered keys, so Tq may differ from Tk). The blocking is that of
// Attention.cpp (blocks of 64 query rows, every product a strided
// cblas_sgemm), but a (query block, key block) pair is computed only when
// some key of the block may be visible to some query of the block: when
// causal, the key block's smallest position is at most the query block's
// largest (and, with a window W, its largest exceeds the query block's
// smallest minus W). For the zigzag layout that skips about as much as the
// plain causal kernel does. Inside a computed pair the mask is applied per
// element from the positions.
//
// The plain rows (attention, attention_scaled) keep their own kernel in
// Attention.cpp: implicit positions there let it skip by index arithmetic
// and keep its bytes.
//
// Threading: (batch, head) units forward and (batch, kv head) units
// backward (the group's query heads in sequence accumulating dK and dV) over
// the OpenMP team, each thread with its own scratch; sgemm single-threaded.
// The RoPE cos/sin table covers positions 0..max position, computed in
// double as in Attention.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <tuple>
#include <vector>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

constexpr Index kBlock = 64;

Index round16(Index n) { return (n + 15) / 16 * 16; }
Index blocksOf(Index n) { return (n + kBlock - 1) / kBlock; }

struct Geometry {
  Index batch, tq, tk, heads, kvHeads, dim, group;
  Index ldq, ldk;
  float scale;
  bool causal, rope;
  Index window;
  const std::int32_t *qpos, *kpos;
  std::vector<float> cos, sin; // [max position + 1, dim / 2]
  /// Per (query block, key block): whether any pair in it may be visible.
  std::vector<char> active;
  Index keyBlocks = 0;
  /// Per key block: its smallest and largest position.
  std::vector<Index> keyMin, keyMax;

  bool visible(Index t, Index s) const {
    if (!causal)
      return true;
    const std::int32_t q = qpos[t], k = kpos[s];
    return k <= q && (window == 0 || Index(k) > Index(q) - window);
  }
  bool pair(Index qb, Index kb) const { return active[qb * keyBlocks + kb]; }

  /// Calls f(begin, end) for each maximal run [begin, end) of computed key
  /// blocks of query block qb (one sgemm per run instead of per block).
  template <typename F> void keyRuns(Index qb, F f) const {
    for (Index kb = 0; kb < keyBlocks;) {
      if (!pair(qb, kb)) {
        ++kb;
        continue;
      }
      Index end = kb + 1;
      while (end < keyBlocks && pair(qb, end))
        ++end;
      f(kb, end);
      kb = end;
    }
  }
  /// The same for the computed query blocks of key block kb.
  template <typename F> void queryRuns(Index kb, Index queryBlocks, F f) const {
    for (Index qb = 0; qb < queryBlocks;) {
      if (!pair(qb, kb)) {
        ++qb;
        continue;
      }
      Index end = qb + 1;
      while (end < queryBlocks && pair(end, kb))
        ++end;
      f(qb, end);
      qb = end;
    }
  }
};

void gemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, Index m, Index n,
          Index k, float alpha, const float *a, Index lda, const float *b,
          Index ldb, float beta, float *c, Index ldc) {
  cblas_sgemm(CblasRowMajor, transA, transB, int(m), int(n), int(k), alpha, a,
              int(lda), b, int(ldb), beta, c, int(ldc));
}

Geometry setUp(const char *kernel, const AttentionConfig &config, Index keySeq,
               const std::int32_t *qpos, const std::int32_t *kpos) {
  checkNonNegative(kernel, {config.batch, config.seq, keySeq});
  if (config.numHeads <= 0 || config.numKvHeads <= 0 || config.headDim <= 0 ||
      config.numHeads % config.numKvHeads != 0)
    fail(kernel, "num_heads (" + std::to_string(config.numHeads) +
                     ") and num_kv_heads (" +
                     std::to_string(config.numKvHeads) +
                     ") must be positive, the second dividing the first");
  if (config.ropeTheta < 0.0f || std::isnan(config.ropeTheta))
    fail(kernel, "rope_theta must be positive (0 means no RoPE)");
  Geometry g;
  g.rope = config.ropeTheta > 0.0f;
  if (g.rope && config.headDim % 2 != 0)
    fail(kernel, "RoPE needs an even head dimension");
  if (config.window < 0 || (config.window > 0 && !config.causal))
    fail(kernel, "sliding window " + std::to_string(config.window) +
                     " must be 0 (none) or positive with causal attention");
  g.batch = config.batch;
  g.tq = config.seq;
  g.tk = keySeq;
  g.heads = config.numHeads;
  g.kvHeads = config.numKvHeads;
  g.dim = config.headDim;
  g.group = g.heads / g.kvHeads;
  g.ldq = blasInt(kernel, g.heads * g.dim);
  g.ldk = blasInt(kernel, g.kvHeads * g.dim);
  blasInt(kernel, g.tk);
  g.scale = static_cast<float>(1.0 / std::sqrt(double(g.dim)));
  g.causal = config.causal;
  g.window = config.window;
  g.qpos = qpos;
  g.kpos = kpos;
  std::int32_t maxPosition = 0;
  for (Index t = 0; t < g.tq; ++t)
    maxPosition = std::max(maxPosition, qpos[t]);
  for (Index s = 0; s < g.tk; ++s)
    maxPosition = std::max(maxPosition, kpos[s]);
  if (std::min(g.tq ? *std::min_element(qpos, qpos + g.tq) : 0,
               g.tk ? *std::min_element(kpos, kpos + g.tk) : 0) < 0)
    fail(kernel, "positions must be non-negative");
  if (g.rope) {
    // cos/sin of p * freq for every position up to the largest present.
    const Index half = g.dim / 2, n = Index(maxPosition) + 1;
    g.cos.resize(n * half);
    g.sin.resize(n * half);
    const double amplitude = ropeAttentionFactor(config.ropeScaling);
    for (Index i = 0; i < half; ++i) {
      const double freq =
          ropeFrequency(i, g.dim, double(config.ropeTheta), config.ropeScaling);
      for (Index p = 0; p < n; ++p) {
        const double angle = double(p) * freq;
        g.cos[p * half + i] = static_cast<float>(amplitude * std::cos(angle));
        g.sin[p * half + i] = static_cast<float>(amplitude * std::sin(angle));
      }
    }
  }
  // A pair of blocks is skipped when no key of it can be visible to any of
  // its queries: from the blocks' smallest and largest positions.
  auto range = [](const std::int32_t *pos, Index begin, Index end) {
    auto [lo, hi] = std::minmax_element(pos + begin, pos + end);
    return std::pair<Index, Index>(*lo, *hi);
  };
  const Index queryBlocks = blocksOf(g.tq);
  g.keyBlocks = blocksOf(g.tk);
  g.keyMin.resize(g.keyBlocks);
  g.keyMax.resize(g.keyBlocks);
  for (Index kb = 0; kb < g.keyBlocks; ++kb)
    std::tie(g.keyMin[kb], g.keyMax[kb]) =
        range(kpos, kb * kBlock, std::min(g.tk, (kb + 1) * kBlock));
  g.active.assign(queryBlocks * g.keyBlocks, 1);
  if (g.causal)
    for (Index qb = 0; qb < queryBlocks; ++qb) {
      auto [qmin, qmax] =
          range(qpos, qb * kBlock, std::min(g.tq, (qb + 1) * kBlock));
      for (Index kb = 0; kb < g.keyBlocks; ++kb)
        g.active[qb * g.keyBlocks + kb] =
            g.keyMin[kb] <= qmax &&
            (g.window == 0 || g.keyMax[kb] > qmin - g.window);
    }
  return g;
}

/// Rotate-half RoPE of rows [r0, r1) (row stride ld) into dst (stride D),
/// row t at angle positions[t] * freq.
void rotateRows(const Geometry &g, const std::int32_t *positions,
                const float *src, Index ld, float *dst, Index r0, Index r1) {
  const Index half = g.dim / 2;
  for (Index t = r0; t < r1; ++t) {
    const float *x = src + t * ld;
    float *y = dst + t * g.dim;
    const float *c = g.cos.data() + Index(positions[t]) * half;
    const float *s = g.sin.data() + Index(positions[t]) * half;
#pragma omp simd
    for (Index i = 0; i < half; ++i) {
      const float x1 = x[i], x2 = x[i + half];
      y[i] = x1 * c[i] - x2 * s[i];
      y[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
}

/// The inverse rotation in place: a gradient with respect to the rotated
/// rows into one with respect to the un-rotated rows.
void unrotateRows(const Geometry &g, const std::int32_t *positions, float *x,
                  Index ld, Index r0, Index r1) {
  const Index half = g.dim / 2;
  for (Index t = r0; t < r1; ++t) {
    float *row = x + t * ld;
    const float *c = g.cos.data() + Index(positions[t]) * half;
    const float *s = g.sin.data() + Index(positions[t]) * half;
#pragma omp simd
    for (Index i = 0; i < half; ++i) {
      const float g1 = row[i], g2 = row[i + half];
      row[i] = g1 * c[i] + g2 * s[i];
      row[i + half] = g2 * c[i] - g1 * s[i];
    }
  }
}

/// Softmaxed scores of query rows [i0, i1) into `block` (row t at
/// block + (t - i0) * Tk): computed key blocks by sgemm, then masked per
/// element; every column of the row is written (zero where not visible).
void probabilityBlock(const Geometry &g, Index qb, const float *q, Index ldq,
                      const float *k, Index ldk, float *block) {
  const Index i0 = qb * kBlock, i1 = std::min(g.tq, i0 + kBlock);
  g.keyRuns(qb, [&](Index kb0, Index kb1) {
    const Index j0 = kb0 * kBlock, j1 = std::min(g.tk, kb1 * kBlock);
    gemm(CblasNoTrans, CblasTrans, i1 - i0, j1 - j0, g.dim, g.scale,
         q + i0 * ldq, ldq, k + j0 * ldk, ldk, 0.0f, block + j0, g.tk);
  });
  // Per row, each computed key block is wholly visible, wholly hidden or
  // mixed (checked per element); only visible columns are exponentiated.
  constexpr float lowest = -std::numeric_limits<float>::infinity();
  enum Visibility : char { None, All, Mixed };
  std::vector<char> visibility(g.keyBlocks);
  for (Index t = i0; t < i1; ++t) {
    float *row = block + (t - i0) * g.tk;
    const Index q = g.qpos[t];
    float m = lowest;
    for (Index kb = 0; kb < g.keyBlocks; ++kb) {
      const Index j0 = kb * kBlock, j1 = std::min(g.tk, j0 + kBlock);
      char &v = visibility[kb];
      if (!g.pair(qb, kb))
        v = None;
      else if (!g.causal)
        v = All;
      else if (g.keyMin[kb] > q || (g.window && g.keyMax[kb] <= q - g.window))
        v = None;
      else if (g.keyMax[kb] <= q && (!g.window || g.keyMin[kb] > q - g.window))
        v = All;
      else
        v = Mixed;
      if (v == None) {
        std::fill(row + j0, row + j1, 0.0f);
        continue;
      }
      if (v == Mixed)
        for (Index s = j0; s < j1; ++s)
          if (!g.visible(t, s))
            row[s] = lowest;
      for (Index s = j0; s < j1; ++s)
        m = row[s] > m ? row[s] : m;
    }
    if (m == lowest) { // sees no key: a zero row
      std::fill(row, row + g.tk, 0.0f);
      continue;
    }
    float sum = 0.0f;
    for (Index kb = 0; kb < g.keyBlocks; ++kb) {
      if (visibility[kb] == None)
        continue;
      const Index j0 = kb * kBlock, j1 = std::min(g.tk, j0 + kBlock);
      for (Index s = j0; s < j1; ++s) {
        const float e = row[s] == lowest ? 0.0f : fastExp(row[s] - m);
        row[s] = e;
        sum += e;
      }
    }
    const float inv = 1.0f / sum;
    for (Index kb = 0; kb < g.keyBlocks; ++kb) {
      if (visibility[kb] == None)
        continue;
      const Index j0 = kb * kBlock, j1 = std::min(g.tk, j0 + kBlock);
#pragma omp simd
      for (Index s = j0; s < j1; ++s)
        row[s] *= inv;
    }
  }
}

/// Scratch per thread: [rotated K: Tk x D | rotated Q: Tq x D] (RoPE only)
/// then the forward's [64, Tk] block or the backward's P and dS [Tq, Tk].
Index ropeFloats(const Geometry &g) {
  return g.rope ? round16(g.tk * g.dim) + round16(g.tq * g.dim) : 0;
}

template <typename Unit>
void runUnits(Index units, Index sliceFloats, Unit unit) {
  const Index threads = std::max<Index>(1, std::min<Index>(
                                               omp_get_max_threads(), units));
  float *base = static_cast<float *>(
      threadScratch(sizeof(float) * sliceFloats * threads, 2));
  SerialBlasScope serialBlas(threads > 1);
#pragma omp parallel for schedule(dynamic, 1) num_threads(int(threads))
  for (Index i = 0; i < units; ++i)
    unit(i, base + omp_get_thread_num() * sliceFloats);
}

void forwardHead(const Geometry &g, const float *query, const float *key,
                 const float *value, float *result, Index b, Index h,
                 float *slice) {
  const Index kvh = h / g.group;
  const float *q = query + b * g.tq * g.ldq + h * g.dim;
  const float *k = key + b * g.tk * g.ldk + kvh * g.dim;
  const float *v = value + b * g.tk * g.ldk + kvh * g.dim;
  float *out = result + b * g.tq * g.ldq + h * g.dim;
  Index ldq = g.ldq, ldk = g.ldk;
  float *p = slice + ropeFloats(g);
  if (g.rope) {
    float *kr = slice, *qr = slice + round16(g.tk * g.dim);
    rotateRows(g, g.kpos, k, g.ldk, kr, 0, g.tk);
    rotateRows(g, g.qpos, q, g.ldq, qr, 0, g.tq);
    k = kr;
    q = qr;
    ldk = ldq = g.dim;
  }
  for (Index qb = 0; qb < blocksOf(g.tq); ++qb) {
    const Index i0 = qb * kBlock, i1 = std::min(g.tq, i0 + kBlock);
    probabilityBlock(g, qb, q, ldq, k, ldk, p);
    float beta = 0.0f;
    g.keyRuns(qb, [&](Index kb0, Index kb1) {
      const Index j0 = kb0 * kBlock, j1 = std::min(g.tk, kb1 * kBlock);
      gemm(CblasNoTrans, CblasNoTrans, i1 - i0, g.dim, j1 - j0, 1.0f, p + j0,
           g.tk, v + j0 * g.ldk, g.ldk, beta, out + i0 * g.ldq, g.ldq);
      beta = 1.0f;
    });
    if (beta == 0.0f) // no visible key in the whole block
      for (Index t = i0; t < i1; ++t)
        std::fill(out + t * g.ldq, out + t * g.ldq + g.dim, 0.0f);
  }
}

void backwardKvHead(const Geometry &g, const float *grad, const float *query,
                    const float *key, const float *value, float *queryGrad,
                    float *keyGrad, float *valueGrad, Index b, Index kvh,
                    float *slice) {
  const Index kvOffset = b * g.tk * g.ldk + kvh * g.dim;
  const float *k = key + kvOffset;
  const float *v = value + kvOffset;
  float *dk = keyGrad + kvOffset;
  float *dv = valueGrad + kvOffset;
  float *kr = slice, *qr = slice + round16(g.tk * g.dim);
  float *p = slice + ropeFloats(g);
  float *ds = p + round16(g.tq * g.tk);
  Index ldk = g.ldk;
  if (g.rope) {
    rotateRows(g, g.kpos, k, g.ldk, kr, 0, g.tk);
    k = kr;
    ldk = g.dim;
  }
  // dK and dV accumulate over the group's heads and the query blocks.
  for (Index s = 0; s < g.tk; ++s) {
    std::fill(dk + s * g.ldk, dk + s * g.ldk + g.dim, 0.0f);
    std::fill(dv + s * g.ldk, dv + s * g.ldk + g.dim, 0.0f);
  }
  const Index queryBlocks = blocksOf(g.tq);
  for (Index j = 0; j < g.group; ++j) {
    const Index h = kvh * g.group + j;
    const Index qOffset = b * g.tq * g.ldq + h * g.dim;
    const float *dout = grad + qOffset;
    float *dq = queryGrad + qOffset;
    const float *q = query + qOffset;
    Index ldq = g.ldq;
    if (g.rope) {
      rotateRows(g, g.qpos, q, g.ldq, qr, 0, g.tq);
      q = qr;
      ldq = g.dim;
    }
    // Row phase: P, dS = scale P (dP - rowsum(P dP)) with dP = dO V^T, and
    // dQ = dS K over the computed key blocks.
    for (Index qb = 0; qb < queryBlocks; ++qb) {
      const Index i0 = qb * kBlock, i1 = std::min(g.tq, i0 + kBlock);
      probabilityBlock(g, qb, q, ldq, k, ldk, p + i0 * g.tk);
      for (Index kb = 0; kb < g.keyBlocks; ++kb) {
        const Index j0 = kb * kBlock, j1 = std::min(g.tk, j0 + kBlock);
        if (!g.pair(qb, kb))
          for (Index t = i0; t < i1; ++t)
            std::fill(ds + t * g.tk + j0, ds + t * g.tk + j1, 0.0f);
      }
      g.keyRuns(qb, [&](Index kb0, Index kb1) {
        const Index j0 = kb0 * kBlock, j1 = std::min(g.tk, kb1 * kBlock);
        gemm(CblasNoTrans, CblasTrans, i1 - i0, j1 - j0, g.dim, 1.0f,
             dout + i0 * g.ldq, g.ldq, v + j0 * g.ldk, g.ldk, 0.0f,
             ds + i0 * g.tk + j0, g.tk);
      });
      // The pairs not computed are zero in both P and dS already.
      for (Index t = i0; t < i1; ++t) {
        const float *pr = p + t * g.tk;
        float *dr = ds + t * g.tk;
        float dot = 0.0f;
        for (Index kb = 0; kb < g.keyBlocks; ++kb) {
          if (!g.pair(qb, kb))
            continue;
          const Index j1 = std::min(g.tk, (kb + 1) * kBlock);
          for (Index s = kb * kBlock; s < j1; ++s)
            dot += pr[s] * dr[s];
        }
        for (Index kb = 0; kb < g.keyBlocks; ++kb) {
          if (!g.pair(qb, kb))
            continue;
          const Index j1 = std::min(g.tk, (kb + 1) * kBlock);
#pragma omp simd
          for (Index s = kb * kBlock; s < j1; ++s)
            dr[s] = g.scale * pr[s] * (dr[s] - dot);
        }
      }
      float beta = 0.0f;
      g.keyRuns(qb, [&](Index kb0, Index kb1) {
        const Index j0 = kb0 * kBlock, j1 = std::min(g.tk, kb1 * kBlock);
        gemm(CblasNoTrans, CblasNoTrans, i1 - i0, g.dim, j1 - j0, 1.0f,
             ds + i0 * g.tk + j0, g.tk, k + j0 * ldk, ldk, beta,
             dq + i0 * g.ldq, g.ldq);
        beta = 1.0f;
      });
      if (beta == 0.0f)
        for (Index t = i0; t < i1; ++t)
          std::fill(dq + t * g.ldq, dq + t * g.ldq + g.dim, 0.0f);
      else if (g.rope)
        unrotateRows(g, g.qpos, dq, g.ldq, i0, i1);
    }
    // Column phase: dV += P^T dO, dK += dS^T Q over the computed pairs.
    for (Index kb = 0; kb < g.keyBlocks; ++kb) {
      const Index j0 = kb * kBlock, j1 = std::min(g.tk, j0 + kBlock);
      g.queryRuns(kb, queryBlocks, [&](Index qb0, Index qb1) {
        const Index i0 = qb0 * kBlock, i1 = std::min(g.tq, qb1 * kBlock);
        gemm(CblasTrans, CblasNoTrans, j1 - j0, g.dim, i1 - i0, 1.0f,
             p + i0 * g.tk + j0, g.tk, dout + i0 * g.ldq, g.ldq, 1.0f,
             dv + j0 * g.ldk, g.ldk);
        gemm(CblasTrans, CblasNoTrans, j1 - j0, g.dim, i1 - i0, 1.0f,
             ds + i0 * g.tk + j0, g.tk, q + i0 * ldq, ldq, 1.0f,
             dk + j0 * g.ldk, g.ldk);
      });
    }
  }
  // The rotation is linear: un-rotating the group's summed dK once.
  if (g.rope)
    unrotateRows(g, g.kpos, dk, g.ldk, 0, g.tk);
}

} // namespace

void attentionPositions(const float *query, const float *key,
                        const float *value, const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, float *result,
                        Index keySeq, const AttentionConfig &config) {
  const char *kernel = "attention_positions";
  Geometry g = setUp(kernel, config, keySeq, queryPositions, keyPositions);
  if (g.batch == 0 || g.tq == 0)
    return;
  if (g.tk == 0) {
    std::fill(result, result + g.batch * g.tq * g.ldq, 0.0f);
    return;
  }
  const Index slice = ropeFloats(g) + round16(std::min(g.tq, kBlock) * g.tk);
  runUnits(g.batch * g.heads, slice, [&](Index unit, float *mine) {
    forwardHead(g, query, key, value, result, unit / g.heads, unit % g.heads,
                mine);
  });
}

void attentionPositionsGrad(const float *grad, const float *query,
                            const float *key, const float *value,
                            const std::int32_t *queryPositions,
                            const std::int32_t *keyPositions, float *queryGrad,
                            float *keyGrad, float *valueGrad, Index keySeq,
                            const AttentionConfig &config) {
  const char *kernel = "attention_positions_grad";
  Geometry g = setUp(kernel, config, keySeq, queryPositions, keyPositions);
  if (g.batch == 0)
    return;
  if (g.tq == 0 || g.tk == 0) {
    std::fill(queryGrad, queryGrad + g.batch * g.tq * g.ldq, 0.0f);
    std::fill(keyGrad, keyGrad + g.batch * g.tk * g.ldk, 0.0f);
    std::fill(valueGrad, valueGrad + g.batch * g.tk * g.ldk, 0.0f);
    return;
  }
  const Index slice = ropeFloats(g) + 2 * round16(g.tq * g.tk);
  runUnits(g.batch * g.kvHeads, slice, [&](Index unit, float *mine) {
    backwardKvHead(g, grad, query, key, value, queryGrad, keyGrad, valueGrad,
                   unit / g.kvHeads, unit % g.kvHeads, mine);
  });
}

} // namespace partition::runtime::cpu
