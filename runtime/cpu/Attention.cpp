//===- Attention.cpp - multi-head attention (causal, GQA, RoPE) -----------===//
//
// Algorithm: per (batch, head) block, materialise the [T, T] probability
// matrix in a per-thread workspace and do the three (forward) or five
// (backward) products with cblas_sgemm on the strided head slices directly
// (lda = H*D: heads packed in the feature dimension need no transposes).
//
// Why not a flash-style loop: on a CPU the [T, T] block of one head fits
// comfortably in memory (T = 1024: 4 MB per thread), the products then run at
// sgemm speed with K = T for P V, dS K and the dK/dV products, whereas a
// flash loop either hand-writes its micro-kernels (against the "all matmuls
// via OpenBLAS" rule) or calls sgemm on [64, 64] tiles where call and packing
// overhead dominate. The one waste of the plain version, computing the masked
// upper triangle of a causal head, is avoided by blocking rows (and columns
// for dK/dV) in kBlock = 64 steps and limiting each sgemm to the columns the
// block can see: the causal work is T^2/2 + T*kBlock/2 instead of T^2.
//
// Threading: the (batch, head) units (forward) or (batch, kv head) units
// (backward; the query heads of one group run in sequence inside a unit and
// accumulate dK and dV in place, so GQA needs no atomics or partial buffers)
// are spread over the OpenMP team, each thread calling a single-threaded
// sgemm (see SerialBlasScope). When there are fewer units than threads, the
// units run one after another instead, with multi-threaded sgemm and the
// row-wise softmax / RoPE loops parallelised over the team.
//
// Workspace: per thread, P (and dP) [T, T] plus, with RoPE, the rotated query
// and key head [T, D] each. The caller may pass it (attention*WorkspaceSize);
// otherwise a thread_local buffer of the calling thread is grown once and
// reused. The RoPE cos/sin table [T, D/2] is computed in double and cached per
// calling thread for the last (T, D, theta).
//
//===----------------------------------------------------------------------===//

#include "runtime/cpu/KernelSupport.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

constexpr Index kBlock = 64;

Index round16(Index n) { return (n + 15) / 16 * 16; }

struct Geometry {
  Index batch, seq, heads, kvHeads, dim, group;
  Index ldq, ldk; // row strides of query/result/grad and of key/value
  float scale;
  bool causal;
  bool rope;
  const float *cos = nullptr; // [seq, dim/2]
  const float *sin = nullptr;
};

Geometry validate(const char *kernel, const AttentionConfig &config) {
  checkNonNegative(kernel, {config.batch, config.seq});
  if (config.numHeads <= 0 || config.numKvHeads <= 0 || config.headDim <= 0)
    fail(kernel, "num_heads, num_kv_heads and the head dimension must be "
                 "positive");
  if (config.numHeads % config.numKvHeads != 0)
    fail(kernel, "num_kv_heads (" + std::to_string(config.numKvHeads) +
                     ") does not divide num_heads (" +
                     std::to_string(config.numHeads) + ")");
  if (config.ropeTheta < 0.0f || std::isnan(config.ropeTheta))
    fail(kernel, "rope_theta must be positive (0 means no RoPE)");
  const bool rope = config.ropeTheta > 0.0f;
  if (rope && config.headDim % 2 != 0)
    fail(kernel, "RoPE needs an even head dimension, got " +
                     std::to_string(config.headDim));
  Geometry g;
  g.batch = config.batch;
  g.seq = config.seq;
  g.heads = config.numHeads;
  g.kvHeads = config.numKvHeads;
  g.dim = config.headDim;
  g.group = config.numHeads / config.numKvHeads;
  g.ldq = blasInt(kernel, config.numHeads * config.headDim);
  g.ldk = blasInt(kernel, config.numKvHeads * config.headDim);
  blasInt(kernel, config.seq);
  g.scale = static_cast<float>(1.0 / std::sqrt(double(config.headDim)));
  g.causal = config.causal;
  g.rope = rope;
  return g;
}

/// Floats per thread: `probs` [T, T] matrices plus the two rotated heads.
Index perThreadFloats(const Geometry &g, int probs) {
  return probs * round16(g.seq * g.seq) +
         (g.rope ? 2 * round16(g.seq * g.dim) : 0);
}

struct RopeTable {
  Index seq = -1, dim = -1;
  float theta = 0.0f;
  std::vector<float> cos, sin;
};

/// cos/sin of t * theta^(-2i/D) for t < T, i < D/2, computed in double:
/// in float, the angle t * freq alone would be off by ~t * 1e-7 rad.
void attachRopeTable(Geometry &g, float theta) {
  thread_local RopeTable table;
  if (table.seq != g.seq || table.dim != g.dim || table.theta != theta) {
    const Index half = g.dim / 2;
    table.cos.resize(g.seq * half);
    table.sin.resize(g.seq * half);
    for (Index i = 0; i < half; ++i) {
      const double freq =
          std::pow(double(theta), -2.0 * double(i) / double(g.dim));
      for (Index t = 0; t < g.seq; ++t) {
        const double angle = double(t) * freq;
        table.cos[t * half + i] = static_cast<float>(std::cos(angle));
        table.sin[t * half + i] = static_cast<float>(std::sin(angle));
      }
    }
    table.seq = g.seq;
    table.dim = g.dim;
    table.theta = theta;
  }
  g.cos = table.cos.data();
  g.sin = table.sin.data();
}

void gemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, Index m, Index n,
          Index k, float alpha, const float *a, Index lda, const float *b,
          Index ldb, float beta, float *c, Index ldc) {
  cblas_sgemm(CblasRowMajor, transA, transB, int(m), int(n), int(k), alpha, a,
              int(lda), b, int(ldb), beta, c, int(ldc));
}

/// End (exclusive) of the causal row block that contains row t.
Index blockEnd(const Geometry &g, Index t) {
  return g.causal ? std::min(g.seq, (t / kBlock + 1) * kBlock) : g.seq;
}

/// Rotate-half RoPE of one head [T, D] (row stride ld) into dst [T, D]:
/// (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) for x1 = x[i], x2 = x[i+D/2].
void rotate(const Geometry &g, const float *src, Index ld, float *dst,
            bool inner) {
  const Index half = g.dim / 2;
#pragma omp parallel for schedule(static) if (inner)
  for (Index t = 0; t < g.seq; ++t) {
    const float *x = src + t * ld;
    float *y = dst + t * g.dim;
    const float *c = g.cos + t * half;
    const float *s = g.sin + t * half;
#pragma omp simd
    for (Index i = 0; i < half; ++i) {
      const float x1 = x[i], x2 = x[i + half];
      y[i] = x1 * c[i] - x2 * s[i];
      y[i + half] = x2 * c[i] + x1 * s[i];
    }
  }
}

/// Applies the transpose (= inverse) rotation in place: turns a gradient with
/// respect to the rotated head into one with respect to the un-rotated head.
void unrotateInPlace(const Geometry &g, float *x, Index ld, bool inner) {
  const Index half = g.dim / 2;
#pragma omp parallel for schedule(static) if (inner)
  for (Index t = 0; t < g.seq; ++t) {
    float *row = x + t * ld;
    const float *c = g.cos + t * half;
    const float *s = g.sin + t * half;
#pragma omp simd
    for (Index i = 0; i < half; ++i) {
      const float g1 = row[i], g2 = row[i + half];
      row[i] = g1 * c[i] + g2 * s[i];
      row[i + half] = g2 * c[i] - g1 * s[i];
    }
  }
}

/// P = softmax(scale Q K^T) with the causal mask. Row t is valid on
/// [0, L(t)) and zero on [L(t), blockEnd(t)); columns past blockEnd(t) are
/// never written nor read.
void probabilities(const Geometry &g, const float *q, Index ldq,
                   const float *k, Index ldk, float *p, bool inner) {
  const Index T = g.seq;
  if (g.causal) {
    for (Index i0 = 0; i0 < T; i0 += kBlock) {
      const Index i1 = std::min(T, i0 + kBlock);
      gemm(CblasNoTrans, CblasTrans, i1 - i0, i1, g.dim, g.scale, q + i0 * ldq,
           ldq, k, ldk, 0.0f, p + i0 * T, T);
    }
  } else {
    gemm(CblasNoTrans, CblasTrans, T, T, g.dim, g.scale, q, ldq, k, ldk, 0.0f,
         p, T);
  }
#pragma omp parallel for schedule(static) if (inner)
  for (Index t = 0; t < T; ++t) {
    float *row = p + t * T;
    const Index valid = g.causal ? t + 1 : T;
    float m = row[0];
#pragma omp simd reduction(max : m)
    for (Index s = 0; s < valid; ++s)
      m = row[s] > m ? row[s] : m;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index s = 0; s < valid; ++s) {
      const float e = fastExp(row[s] - m);
      row[s] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (Index s = 0; s < valid; ++s)
      row[s] *= inv;
    for (Index s = valid, end = blockEnd(g, t); s < end; ++s)
      row[s] = 0.0f;
  }
}

/// out = P V, by row blocks when causal (block i sees columns < its end).
void probsTimes(const Geometry &g, const float *p, const float *v, Index ldv,
                float *out, Index ldo) {
  const Index T = g.seq;
  if (!g.causal) {
    gemm(CblasNoTrans, CblasNoTrans, T, g.dim, T, 1.0f, p, T, v, ldv, 0.0f,
         out, ldo);
    return;
  }
  for (Index i0 = 0; i0 < T; i0 += kBlock) {
    const Index i1 = std::min(T, i0 + kBlock);
    gemm(CblasNoTrans, CblasNoTrans, i1 - i0, g.dim, i1, 1.0f, p + i0 * T, T,
         v, ldv, 0.0f, out + i0 * ldo, ldo);
  }
}

/// out (beta: 0 = overwrite, 1 = accumulate) = M^T X for M [T, T] lower
/// block-triangular (P or dS) and X [T, D], by column blocks when causal:
/// column block j only meets rows >= its start.
void probsTransposedTimes(const Geometry &g, const float *m, const float *x,
                          Index ldx, float beta, float *out, Index ldo) {
  const Index T = g.seq;
  if (!g.causal) {
    gemm(CblasTrans, CblasNoTrans, T, g.dim, T, 1.0f, m, T, x, ldx, beta, out,
         ldo);
    return;
  }
  for (Index j0 = 0; j0 < T; j0 += kBlock) {
    const Index j1 = std::min(T, j0 + kBlock);
    gemm(CblasTrans, CblasNoTrans, j1 - j0, g.dim, T - j0, 1.0f,
         m + j0 * T + j0, T, x + j0 * ldx, ldx, beta, out + j0 * ldo, ldo);
  }
}

/// Forward of query head h of batch b.
void forwardHead(const Geometry &g, const float *query, const float *key,
                 const float *value, float *result, Index b, Index h,
                 float *work, bool inner) {
  const Index T = g.seq;
  const Index kvh = h / g.group;
  const float *q = query + b * T * g.ldq + h * g.dim;
  const float *k = key + b * T * g.ldk + kvh * g.dim;
  const float *v = value + b * T * g.ldk + kvh * g.dim;
  float *out = result + b * T * g.ldq + h * g.dim;
  float *p = work;
  Index ldq = g.ldq, ldk = g.ldk;
  if (g.rope) {
    float *qr = work + round16(T * T);
    float *kr = qr + round16(T * g.dim);
    rotate(g, q, ldq, qr, inner);
    rotate(g, k, ldk, kr, inner);
    q = qr;
    k = kr;
    ldq = ldk = g.dim;
  }
  probabilities(g, q, ldq, k, ldk, p, inner);
  probsTimes(g, p, v, g.ldk, out, g.ldq);
}

/// Backward of kv head kvh of batch b and all the query heads that read it.
void backwardKvHead(const Geometry &g, const float *grad, const float *query,
                    const float *key, const float *value, float *queryGrad,
                    float *keyGrad, float *valueGrad, Index b, Index kvh,
                    float *work, bool inner) {
  const Index T = g.seq;
  const Index kvOffset = b * T * g.ldk + kvh * g.dim;
  const float *k = key + kvOffset;
  const float *v = value + kvOffset;
  float *dk = keyGrad + kvOffset;
  float *dv = valueGrad + kvOffset;
  float *p = work;
  float *ds = work + round16(T * T);
  float *qr = ds + round16(T * T);
  float *kr = qr + round16(T * g.dim);
  Index ldkr = g.ldk;
  if (g.rope) {
    rotate(g, k, g.ldk, kr, inner);
    k = kr;
    ldkr = g.dim;
  }
  for (Index j = 0; j < g.group; ++j) {
    const Index h = kvh * g.group + j;
    const Index qOffset = b * T * g.ldq + h * g.dim;
    const float *q = query + qOffset;
    const float *dout = grad + qOffset;
    float *dq = queryGrad + qOffset;
    Index ldqr = g.ldq;
    if (g.rope) {
      rotate(g, q, g.ldq, qr, inner);
      q = qr;
      ldqr = g.dim;
    }
    probabilities(g, q, ldqr, k, ldkr, p, inner);
    // dP = dO V^T on the same block structure as P.
    if (g.causal) {
      for (Index i0 = 0; i0 < T; i0 += kBlock) {
        const Index i1 = std::min(T, i0 + kBlock);
        gemm(CblasNoTrans, CblasTrans, i1 - i0, i1, g.dim, 1.0f,
             dout + i0 * g.ldq, g.ldq, v, g.ldk, 0.0f, ds + i0 * T, T);
      }
    } else {
      gemm(CblasNoTrans, CblasTrans, T, T, g.dim, 1.0f, dout, g.ldq, v, g.ldk,
           0.0f, ds, T);
    }
    // dS = scale P (dP - rowsum(P dP)), the softmax backward with the score
    // scale folded in, written over dP.
#pragma omp parallel for schedule(static) if (inner)
    for (Index t = 0; t < T; ++t) {
      const float *pr = p + t * T;
      float *dr = ds + t * T;
      const Index valid = g.causal ? t + 1 : T;
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (Index s = 0; s < valid; ++s)
        dot += pr[s] * dr[s];
#pragma omp simd
      for (Index s = 0; s < valid; ++s)
        dr[s] = g.scale * pr[s] * (dr[s] - dot);
      for (Index s = valid, end = blockEnd(g, t); s < end; ++s)
        dr[s] = 0.0f;
    }
    // The first query head of the group overwrites dK and dV, the others
    // accumulate onto it.
    const float beta = j == 0 ? 0.0f : 1.0f;
    probsTransposedTimes(g, p, dout, g.ldq, beta, dv, g.ldk);
    probsTransposedTimes(g, ds, q, ldqr, beta, dk, g.ldk);
    probsTimes(g, ds, k, ldkr, dq, g.ldq);
    if (g.rope)
      unrotateInPlace(g, dq, g.ldq, inner);
  }
  // The rotation is linear, so un-rotating the group's summed dK is the sum
  // of the un-rotated per-head contributions.
  if (g.rope)
    unrotateInPlace(g, dk, g.ldk, inner);
}

/// Runs unit(index, workspace slice, inner) for every unit: in parallel over
/// the team with single-threaded sgemm when there are enough units,
/// otherwise one after another with threaded sgemm and parallel row loops.
template <typename Unit>
void runUnits(const char *kernel, Index units, Index sliceFloats,
              void *workspace, std::size_t workspaceBytes, Unit unit) {
  const std::size_t sliceBytes = sizeof(float) * sliceFloats;
  Index threads = omp_get_max_threads();
  float *base;
  if (workspace) {
    const Index slices = Index(workspaceBytes / std::max<std::size_t>(sliceBytes, 1));
    if (slices < 1)
      fail(kernel, "workspace of " + std::to_string(workspaceBytes) +
                       " bytes is smaller than one thread's " +
                       std::to_string(sliceBytes));
    threads = std::min(threads, slices);
    base = static_cast<float *>(workspace);
  } else {
    base = static_cast<float *>(threadScratch(sliceBytes * threads, 1));
  }
  if (units >= threads && threads > 1) {
    SerialBlasScope serialBlas(true);
#pragma omp parallel for schedule(static) num_threads(int(threads))
    for (Index i = 0; i < units; ++i)
      unit(i, base + omp_get_thread_num() * sliceFloats, false);
  } else {
    for (Index i = 0; i < units; ++i)
      unit(i, base, threads > 1);
  }
}

} // namespace

std::size_t attentionWorkspaceSize(const AttentionConfig &config) {
  Geometry g = validate("attention", config);
  return sizeof(float) * perThreadFloats(g, 1) * omp_get_max_threads();
}

std::size_t attentionGradWorkspaceSize(const AttentionConfig &config) {
  Geometry g = validate("attention_grad", config);
  return sizeof(float) * perThreadFloats(g, 2) * omp_get_max_threads();
}

void attention(const float *query, const float *key, const float *value,
               float *result, const AttentionConfig &config, void *workspace,
               std::size_t workspaceBytes) {
  const char *kernel = "attention";
  Geometry g = validate(kernel, config);
  if (g.batch == 0 || g.seq == 0)
    return;
  if (g.rope)
    attachRopeTable(g, config.ropeTheta);
  runUnits(kernel, g.batch * g.heads, perThreadFloats(g, 1), workspace,
           workspaceBytes, [&](Index unit, float *work, bool inner) {
             forwardHead(g, query, key, value, result, unit / g.heads,
                         unit % g.heads, work, inner);
           });
}

void attentionGrad(const float *grad, const float *query, const float *key,
                   const float *value, float *queryGrad, float *keyGrad,
                   float *valueGrad, const AttentionConfig &config,
                   void *workspace, std::size_t workspaceBytes) {
  const char *kernel = "attention_grad";
  Geometry g = validate(kernel, config);
  if (g.batch == 0 || g.seq == 0)
    return;
  if (g.rope)
    attachRopeTable(g, config.ropeTheta);
  runUnits(kernel, g.batch * g.kvHeads, perThreadFloats(g, 2), workspace,
           workspaceBytes, [&](Index unit, float *work, bool inner) {
             backwardKvHead(g, grad, query, key, value, queryGrad, keyGrad,
                            valueGrad, unit / g.kvHeads, unit % g.kvHeads,
                            work, inner);
           });
}

} // namespace partition::runtime::cpu
