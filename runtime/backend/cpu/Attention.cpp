//===- Attention.cpp - multi-head attention (causal, GQA, RoPE, window) ---===//
//
// Algorithm: per (batch, head), blocks of kBlock = 64 query rows. The
// forward computes a block's scores [64, T] with one sgemm, softmaxes them
// and multiplies by V before the next block, so P never leaves L2. The
// backward keeps the head's P and dS [T, T] (it needs them column-wise for
// dK and dV): a row phase (P, dP = dO V^T, dS, dQ = dS K per query block) and
// a column phase (dV = P^T dO, dK = dS^T Q per key block). Every product is
// a cblas_sgemm on the strided head slices directly (lda = H*D: heads packed
// in the feature dimension need no transposes). When causal, a row block
// multiplies only the keys < its end, and a column block only the queries
// >= its start: the causal work is T^2/2 + T*64/2 instead of T^2. With a
// sliding window W (query t sees keys t - W < s <= t) a row block also
// starts at its first row's first key, rounded down to a 64-block, and a
// column block stops at the last query that sees its last key: about
// T * (W + 96) per product instead of T^2/2. The rounding keeps the column
// phase's reads inside what the row phase wrote (zeros outside a row's
// window), so every product stays one strided sgemm.
//
// Why not a flash-style loop (online softmax over [64, 64] tiles): the
// products here run at sgemm speed with K = T for P V, dS K, P^T dO and
// dS^T Q, whereas a flash loop either hand-writes its micro-kernels (against
// the "all matmuls via OpenBLAS" rule) or calls sgemm on [64, 64] tiles
// where call and packing overhead dominate; and its backward recomputes
// Q K^T and dO V^T once more (7 products instead of 5). The price is the
// backward's [T, T] workspace per thread (8 MB at T = 1024).
//
// Threading: the (batch, head) units (forward) or (batch, kv head) units
// (backward; the query heads of one group run in sequence inside a unit and
// accumulate dK and dV in place, so GQA needs no atomics or partial buffers)
// are spread over the OpenMP team, each thread with its own workspace slice.
// When there are fewer units than threads, the units run one at a time with
// their row and column blocks spread over the team instead. sgemm is always
// single-threaded here (SerialBlasScope): measured on 2 cores at GPT-2 sizes
// (B=4, T=1024, 12 heads of 64), units-in-sequence with OpenBLAS's own
// threads was 3.5-4x slower than this; its threads cannot use a K = 64
// product well and hand over to OpenMP's team at every row loop.
//
// Workspace: per thread, a slice holding, with RoPE, the rotated key and
// query head [T, D] each, then the forward's [64, T] score block or the
// backward's P and dS [T, T]. The caller may pass it
// (attention*WorkspaceSize); otherwise a thread_local buffer of the calling
// thread is grown once and reused. The RoPE cos/sin table [T, D/2] is
// computed in double and cached per calling thread for the last
// (T, D, theta).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/AttentionSupport.h"
#include "runtime/backend/cpu/KernelSupport.h"

#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

constexpr Index kBlock = 64;

} // namespace

namespace detail {

Geometry attentionGeometry(const char *kernel,
                           const AttentionConfig &config) {
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
  if (config.window < 0 || (config.window > 0 && !config.causal))
    fail(kernel, "sliding window " + std::to_string(config.window) +
                     " must be 0 (none) or positive with causal attention");
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
  g.window = config.window < config.seq ? config.window : 0;
  return g;
}

void fillRopeTable(const std::int32_t *positions, Index rows, Index dim,
                   float theta, const RopeScaling &scaling, float *cos,
                   float *sin) {
  const Index half = dim / 2;
  // yarn scales cos and sin (so q and k) by its attention factor.
  const double amplitude = ropeAttentionFactor(scaling);
  for (Index i = 0; i < half; ++i) {
    const double freq = ropeFrequency(i, dim, double(theta), scaling);
    for (Index t = 0; t < rows; ++t) {
      const double angle = double(positions ? positions[t] : t) * freq;
      cos[t * half + i] = static_cast<float>(amplitude * std::cos(angle));
      sin[t * half + i] = static_cast<float>(amplitude * std::sin(angle));
    }
  }
}

} // namespace detail

namespace {

struct RopeTable {
  Index seq = -1, dim = -1;
  float theta = 0.0f;
  RopeScaling scaling;
  std::vector<float> cos, sin;
};

/// cos/sin of t * theta^(-2i/D) for t < T, i < D/2 (fillRopeTable),
/// cached per calling thread for the last (T, D, theta, scaling).
void attachRopeTable(Geometry &g, float theta, const RopeScaling &scaling) {
  thread_local RopeTable table;
  if (table.seq != g.seq || table.dim != g.dim || table.theta != theta ||
      !(table.scaling == scaling)) {
    table.cos.resize(g.seq * (g.dim / 2));
    table.sin.resize(g.seq * (g.dim / 2));
    fillRopeTable(nullptr, g.seq, g.dim, theta, scaling, table.cos.data(),
                  table.sin.data());
    table.seq = g.seq;
    table.dim = g.dim;
    table.theta = theta;
    table.scaling = scaling;
  }
  g.cos = table.cos.data();
  g.sin = table.sin.data();
}

} // namespace

namespace detail {

void gemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, Index m, Index n,
          Index k, float alpha, const float *a, Index lda, const float *b,
          Index ldb, float beta, float *c, Index ldc) {
  cblas_sgemm(CblasRowMajor, transA, transB, int(m), int(n), int(k), alpha, a,
              int(lda), b, int(ldb), beta, c, int(ldc));
}

/// Rotate-half RoPE of rows [r0, r1) of one head (row stride ld) into dst
/// (row stride D): (x1, x2) -> (x1 cos - x2 sin, x2 cos + x1 sin) for
/// x1 = x[i], x2 = x[i + D/2].
void rotateRows(const Geometry &g, const float *src, Index ld, float *dst,
                Index r0, Index r1) {
  const Index half = g.dim / 2;
  for (Index t = r0; t < r1; ++t) {
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

/// Applies the transpose (= inverse) rotation in place to rows [r0, r1):
/// turns a gradient with respect to the rotated head into one with respect
/// to the un-rotated head.
void unrotateRows(const Geometry &g, float *x, Index ld, Index r0, Index r1) {
  const Index half = g.dim / 2;
  for (Index t = r0; t < r1; ++t) {
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

} // namespace detail

namespace {

/// How one unit (a head, or a kv head with its query heads) runs: alone on
/// its thread (`inner` false), or with its row/column blocks spread over a
/// team of `threads` (`inner` true).
struct Work {
  float *base = nullptr; // slice 0 of the workspace
  Index slice = 0;       // floats per slice
  int threads = 1;
  bool inner = false;
  float *unit = nullptr; // the unit's own slice: buffers shared by its blocks

  /// Scratch private to the block being processed.
  float *blockSlice() const {
    return inner ? base + omp_get_thread_num() * slice : unit;
  }
};

Index numBlocks(const Geometry &g) { return (g.seq + kBlock - 1) / kBlock; }

/// The first key query t sees.
Index firstKey(const Geometry &g, Index t) {
  return g.window ? std::max<Index>(0, t - g.window + 1) : 0;
}

/// The first key column a row block starting at i0 computes: its first
/// row's first key, rounded down to a block boundary (see the file
/// comment).
Index blockFirstKey(const Geometry &g, Index i0) {
  return firstKey(g, i0) / kBlock * kBlock;
}

/// One past the last query that sees a key below j1.
Index queryEnd(const Geometry &g, Index j1) {
  return g.window ? std::min(g.seq, j1 + g.window - 1) : g.seq;
}

/// The key columns [begin, end) a row block computes.
struct KeyRange {
  Index begin, end;
};

/// Scores of query rows [i0, i1) against the keys the block may see
/// (columns [begin, end): all, those < i1 when causal, from blockFirstKey
/// with a window), softmaxed in place into `block` (row t at
/// block + (t - i0) T, column s at s). Row t is valid on [F(t), L(t)) and
/// zero on the rest of [begin, end); columns outside are never written nor
/// read.
KeyRange probabilityBlock(const Geometry &g, const float *q, Index ldq,
                          const float *k, Index ldk, float *block, Index i0,
                          Index i1) {
  const Index T = g.seq;
  const KeyRange keys{blockFirstKey(g, i0), g.causal ? i1 : T};
  gemm(CblasNoTrans, CblasTrans, i1 - i0, keys.end - keys.begin, g.dim,
       g.scale, q + i0 * ldq, ldq, k + keys.begin * ldk, ldk, 0.0f,
       block + keys.begin, T);
  for (Index t = i0; t < i1; ++t) {
    float *row = block + (t - i0) * T;
    const Index first = firstKey(g, t), valid = g.causal ? t + 1 : T;
    float m = row[first];
#pragma omp simd reduction(max : m)
    for (Index s = first; s < valid; ++s)
      m = row[s] > m ? row[s] : m;
    float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
    for (Index s = first; s < valid; ++s) {
      const float e = fastExp(row[s] - m);
      row[s] = e;
      sum += e;
    }
    const float inv = 1.0f / sum;
#pragma omp simd
    for (Index s = first; s < valid; ++s)
      row[s] *= inv;
    for (Index s = keys.begin; s < first; ++s)
      row[s] = 0.0f;
    for (Index s = valid; s < keys.end; ++s)
      row[s] = 0.0f;
  }
  return keys;
}

/// Forward of query head h of batch b, one row block at a time: the scores
/// of a block ([64, T] floats: L2-resident) are produced, softmaxed and
/// multiplied by V before the next block.
/// Slice layout: [rotated K | rotated Q (RoPE only)] [P block].
void forwardHead(const Geometry &g, const float *query, const float *key,
                 const float *value, float *result, Index b, Index h,
                 const Work &work) {
  const Index T = g.seq;
  const Index kvh = h / g.group;
  const float *q = query + b * T * g.ldq + h * g.dim;
  const float *k = key + b * T * g.ldk + kvh * g.dim;
  const float *v = value + b * T * g.ldk + kvh * g.dim;
  float *out = result + b * T * g.ldq + h * g.dim;
  const Index headFloats = g.rope ? round16(T * g.dim) : 0;
  float *qr = work.unit + headFloats;
  Index ldq = g.ldq, ldk = g.ldk;
  if (g.rope) {
    float *kr = work.unit;
#pragma omp parallel for schedule(static) num_threads(work.threads) if (work.inner)
    for (Index blk = 0; blk < numBlocks(g); ++blk)
      rotateRows(g, k, g.ldk, kr, blk * kBlock,
                 std::min(T, (blk + 1) * kBlock));
    k = kr;
    ldk = g.dim;
  }
#pragma omp parallel for schedule(dynamic, 1) num_threads(work.threads) if (work.inner)
  for (Index blk = 0; blk < numBlocks(g); ++blk) {
    const Index i0 = blk * kBlock, i1 = std::min(T, i0 + kBlock);
    float *p = work.blockSlice() + 2 * headFloats; // [kBlock, T]
    const float *qBlock = q;
    Index ldqBlock = ldq;
    if (g.rope) {
      rotateRows(g, q, ldq, qr, i0, i1);
      qBlock = qr;
      ldqBlock = g.dim;
    }
    const KeyRange keys =
        probabilityBlock(g, qBlock, ldqBlock, k, ldk, p, i0, i1);
    gemm(CblasNoTrans, CblasNoTrans, i1 - i0, g.dim, keys.end - keys.begin,
         1.0f, p + keys.begin, T, v + keys.begin * g.ldk, g.ldk, 0.0f,
         out + i0 * g.ldq, g.ldq);
  }
}

/// Backward of kv head kvh of batch b and all the query heads that read it.
/// Per query head: a row phase (by query row blocks: P, dP, dS, dQ) and a
/// column phase (by key column blocks: dV += P^T dO, dK += dS^T Q, where
/// causal column block j only meets rows >= its start, and with a window
/// rows < queryEnd of its end).
/// Slice layout: [rotated K | rotated Q (RoPE only)] [P: T x T] [dS: T x T].
void backwardKvHead(const Geometry &g, const float *grad, const float *query,
                    const float *key, const float *value, float *queryGrad,
                    float *keyGrad, float *valueGrad, Index b, Index kvh,
                    const Work &work) {
  const Index T = g.seq;
  const Index blocks = numBlocks(g);
  const Index kvOffset = b * T * g.ldk + kvh * g.dim;
  const float *k = key + kvOffset;
  const float *v = value + kvOffset;
  float *dk = keyGrad + kvOffset;
  float *dv = valueGrad + kvOffset;
  const Index headFloats = g.rope ? round16(T * g.dim) : 0;
  float *kr = work.unit;
  float *qr = work.unit + headFloats;
  float *p = work.unit + 2 * headFloats;
  float *ds = p + round16(T * T);
  Index ldk = g.ldk;
  if (g.rope) {
#pragma omp parallel for schedule(static) num_threads(work.threads) if (work.inner)
    for (Index blk = 0; blk < blocks; ++blk)
      rotateRows(g, k, g.ldk, kr, blk * kBlock,
                 std::min(T, (blk + 1) * kBlock));
    k = kr;
    ldk = g.dim;
  }
  for (Index j = 0; j < g.group; ++j) {
    const Index h = kvh * g.group + j;
    const Index qOffset = b * T * g.ldq + h * g.dim;
    const float *dout = grad + qOffset;
    float *dq = queryGrad + qOffset;
    const float *q = g.rope ? qr : query + qOffset;
    const Index ldq = g.rope ? g.dim : g.ldq;

#pragma omp parallel for schedule(dynamic, 1) num_threads(work.threads) if (work.inner)
    for (Index blk = 0; blk < blocks; ++blk) {
      const Index i0 = blk * kBlock, i1 = std::min(T, i0 + kBlock);
      if (g.rope)
        rotateRows(g, query + qOffset, g.ldq, qr, i0, i1);
      const KeyRange keys =
          probabilityBlock(g, q, ldq, k, ldk, p + i0 * T, i0, i1);
      const Index c0 = keys.begin, cols = keys.end - keys.begin;
      // dP = dO V^T, then dS = scale P (dP - rowsum(P dP)) over it: the
      // softmax backward with the score scale folded in.
      gemm(CblasNoTrans, CblasTrans, i1 - i0, cols, g.dim, 1.0f,
           dout + i0 * g.ldq, g.ldq, v + c0 * g.ldk, g.ldk, 0.0f,
           ds + i0 * T + c0, T);
      for (Index t = i0; t < i1; ++t) {
        const float *pr = p + t * T;
        float *dr = ds + t * T;
        const Index first = firstKey(g, t), valid = g.causal ? t + 1 : T;
        float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
        for (Index s = first; s < valid; ++s)
          dot += pr[s] * dr[s];
#pragma omp simd
        for (Index s = first; s < valid; ++s)
          dr[s] = g.scale * pr[s] * (dr[s] - dot);
        for (Index s = c0; s < first; ++s)
          dr[s] = 0.0f;
        for (Index s = valid; s < keys.end; ++s)
          dr[s] = 0.0f;
      }
      gemm(CblasNoTrans, CblasNoTrans, i1 - i0, g.dim, cols, 1.0f,
           ds + i0 * T + c0, T, k + c0 * ldk, ldk, 0.0f, dq + i0 * g.ldq,
           g.ldq);
      if (g.rope)
        unrotateRows(g, dq, g.ldq, i0, i1);
    }

    // The first query head of the group overwrites dK and dV, the others
    // accumulate onto it.
    const float beta = j == 0 ? 0.0f : 1.0f;
    const bool lastOfGroup = j + 1 == g.group;
#pragma omp parallel for schedule(dynamic, 1) num_threads(work.threads) if (work.inner)
    for (Index blk = 0; blk < blocks; ++blk) {
      const Index j0 = blk * kBlock, j1 = std::min(T, j0 + kBlock);
      const Index r0 = g.causal ? j0 : 0, r1 = queryEnd(g, j1);
      gemm(CblasTrans, CblasNoTrans, j1 - j0, g.dim, r1 - r0, 1.0f,
           p + r0 * T + j0, T, dout + r0 * g.ldq, g.ldq, beta, dv + j0 * g.ldk,
           g.ldk);
      gemm(CblasTrans, CblasNoTrans, j1 - j0, g.dim, r1 - r0, 1.0f,
           ds + r0 * T + j0, T, q + r0 * ldq, ldq, beta, dk + j0 * g.ldk,
           g.ldk);
      // The rotation is linear: un-rotating the group's summed dK equals
      // summing the un-rotated per-head contributions.
      if (g.rope && lastOfGroup)
        unrotateRows(g, dk, g.ldk, j0, j1);
    }
  }
}

/// Floats per workspace slice.
Index forwardSliceFloats(const Geometry &g) {
  return (g.rope ? 2 * round16(g.seq * g.dim) : 0) +
         round16(std::min(g.seq, kBlock) * g.seq);
}
Index backwardSliceFloats(const Geometry &g) {
  return (g.rope ? 2 * round16(g.seq * g.dim) : 0) + 2 * round16(g.seq * g.seq);
}

/// Runs unit(index, work) for every unit: units in parallel over the team
/// (each with its own workspace slice) when there are at least as many units
/// as threads; otherwise one unit at a time, its blocks spread over the
/// team. sgemm is single-threaded either way.
template <typename Unit>
void runUnits(const char *kernel, Index units, Index sliceFloats,
              void *workspace, std::size_t workspaceBytes, Unit unit) {
  const std::size_t sliceBytes = sizeof(float) * sliceFloats;
  Index threads = omp_get_max_threads();
  Work work;
  work.slice = sliceFloats;
  if (workspace) {
    const Index slices = Index(workspaceBytes / sliceBytes);
    if (slices < 1)
      fail(kernel, "workspace of " + std::to_string(workspaceBytes) +
                       " bytes is smaller than one thread's " +
                       std::to_string(sliceBytes));
    threads = std::min(threads, slices);
    work.base = static_cast<float *>(workspace);
  } else {
    work.base = static_cast<float *>(threadScratch(sliceBytes * threads, 1));
  }
  work.threads = int(threads);
  SerialBlasScope serialBlas(threads > 1);
  if (units >= threads && threads > 1) {
#pragma omp parallel for schedule(static) num_threads(work.threads)
    for (Index i = 0; i < units; ++i) {
      Work mine = work;
      mine.unit = work.base + omp_get_thread_num() * sliceFloats;
      unit(i, mine);
    }
  } else {
    work.inner = threads > 1;
    work.unit = work.base;
    for (Index i = 0; i < units; ++i)
      unit(i, work);
  }
}

} // namespace

std::size_t attentionWorkspaceSize(const AttentionConfig &config) {
  Geometry g = attentionGeometry("attention", config);
  return sizeof(float) * forwardSliceFloats(g) * omp_get_max_threads();
}

std::size_t attentionGradWorkspaceSize(const AttentionConfig &config) {
  Geometry g = attentionGeometry("attention_grad", config);
  return sizeof(float) * backwardSliceFloats(g) * omp_get_max_threads();
}

void attention(const float *query, const float *key, const float *value,
               float *result, const AttentionConfig &config, void *workspace,
               std::size_t workspaceBytes) {
  const char *kernel = "attention";
  Geometry g = attentionGeometry(kernel, config);
  if (g.batch == 0 || g.seq == 0)
    return;
  if (g.rope)
    attachRopeTable(g, config.ropeTheta, config.ropeScaling);
  runUnits(kernel, g.batch * g.heads, forwardSliceFloats(g), workspace,
           workspaceBytes, [&](Index unit, const Work &work) {
             forwardHead(g, query, key, value, result, unit / g.heads,
                         unit % g.heads, work);
           });
}

void attentionGrad(const float *grad, const float *query, const float *key,
                   const float *value, float *queryGrad, float *keyGrad,
                   float *valueGrad, const AttentionConfig &config,
                   void *workspace, std::size_t workspaceBytes) {
  const char *kernel = "attention_grad";
  Geometry g = attentionGeometry(kernel, config);
  if (g.batch == 0 || g.seq == 0)
    return;
  if (g.rope)
    attachRopeTable(g, config.ropeTheta, config.ropeScaling);
  runUnits(kernel, g.batch * g.kvHeads, backwardSliceFloats(g), workspace,
           workspaceBytes, [&](Index unit, const Work &work) {
             backwardKvHead(g, grad, query, key, value, queryGrad, keyGrad,
                            valueGrad, unit / g.kvHeads, unit % g.kvHeads,
                            work);
           });
}

} // namespace partition::runtime::cpu
