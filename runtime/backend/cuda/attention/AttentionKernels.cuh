//===- AttentionKernels.cuh - flash attention kernels ----------*- CUDA -*-===//
//
// Algorithm (FlashAttention, Dao et al. 2022, written from the paper): a
// thread block owns 64 rows (query rows in the forward and dQ kernels, key
// rows in the dK/dV kernel) and streams tiles of 32 rows of the other side
// past them through shared memory, so no seq x seq matrix exists anywhere.
//
//   rope     (RoPE only) a [seq, D/2] cos/sin table in the workspace,
//            computed in double like the CPU kernel's. q and k are rotated
//            in fp32 as their tiles are loaded into shared memory, so no
//            rotated copy of them is ever stored.
//   forward  per (batch, head, 64 query rows): S = scale Q K^T per 32-key
//            tile, online softmax (running max m and sum l per row), O in
//            registers rescaled by exp(m_old - m_new) and divided by l at
//            the end. The backward runs the same kernel in its "statistics"
//            mode: no O is written, but lse = m + log l and
//            delta = rowsum(dO * O) (O in fp32, before any rounding to T).
//   dQ       per (batch, head, 64 query rows), over the key tiles:
//            P = exp(S - lse), dP = dO V^T, dS = scale P (dP - delta),
//            dQ += dS K; then dQ is un-rotated (the transpose rotation) and
//            stored.
//   dK, dV   per (batch, kv head, 64 key rows), over the query heads of the
//            GQA group in order and their query tiles: dV += P^T dO,
//            dK += dS^T Q, accumulated in registers in a fixed order (no
//            atomics: bitwise reproducible), then dK is un-rotated.
//
// Causal: a query block only visits keys up to its last row, a key block
// only queries from its first row; elements past the diagonal inside a tile
// are masked (-inf score, zero probability). A sliding window W (query t
// sees keys t - W < s <= t) also starts a query block at the key tile of
// its first row's first key and ends a key block at the last query that
// sees its last key, masking inside the tiles the same way: the work is
// about T (W + 96) per product instead of T^2 / 2.
//
// Explicit positions (attention_positions): the query and key sequences
// have their own lengths and i32 positions; query t sees key s iff
// !causal or kpos[s] <= qpos[t] (and kpos[s] > qpos[t] - W), checked per
// element; the RoPE tables (one for the queries, one for the keys) are
// built at the positions. Positions are device data, so a block walks
// every tile of the other side, but with causal masking skips (thread 0
// reading the tile's positions and deciding for the block) a tile all of
// whose keys come after all of its queries, or fall before all their
// windows: with zigzag or contiguous layouts about the causal half of the
// work. A query that
// sees no key gets zeros (l = 0), lse -inf, and contributes nothing.
//
// Arithmetic is fp32 on CUDA cores, not tensor cores: the brief asks for
// CPU-identical semantics within 1e-4 in fp32 storage, which TF32/bf16 mma
// inputs would not meet, and one simple code path for both storage types is
// what can be verified without a GPU at hand. Each thread owns 4 rows x
// (32/16 columns of a score tile, D/16 columns of an accumulator); the 16
// threads sharing rows are the halves of a warp, so row max / sum are
// 16-lane butterfly shuffles (identical bits on every lane). Inner products
// read shared memory as float4 along the head dimension, with rows padded by
// 4 floats so that 8 consecutive rows cover all 32 banks.
//
// The head dimension is padded to kD in {32, 64, 128} (zero-filled in shared
// memory, so the padding adds nothing); kD = 128 needs up to ~120 KB of
// shared memory per block (opted in with cudaFuncSetAttribute; sm_80 allows
// 163 KB, sm_90 227 KB).
//
// Workspace: the RoPE table (seq * D/2 float2) and, for the backward, lse
// and delta (batch * heads * seq floats each); the gradients themselves are
// accumulated in registers.
//
// The kernels and the host-side plan shared by AttentionForward.cu and
// AttentionBackward.cu (one anonymous namespace per translation unit).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_ATTENTION_ATTENTIONKERNELS_CUH
#define PARTITION_RUNTIME_CUDA_ATTENTION_ATTENTIONKERNELS_CUH

#include "runtime/backend/cuda/attention/Attention.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <stdexcept>
#include <string>
#include <type_traits>

namespace partition::runtime::cuda {

namespace {

using Index = std::int64_t;

constexpr int kThreads = 256; // 16 x 16: tx = column group, ty = row group
constexpr int kRows = 64;     // rows a block owns (4 per ty)
constexpr int kInner = 32;    // rows of a streamed tile (2 per tx)
constexpr int kPStride = kInner + 4; // row stride of a probability tile
constexpr int kMaxHeadDim = 128;

template <int kD> constexpr int kRowStride = kD + 4;

/// Everything a kernel needs about the shape, by value.
struct Params {
  int seq, heads, kvHeads, group, dim, half;
  int kseq; // key rows (seq without explicit positions)
  Index ldq, ldk; // row strides of query/result/grad and of key/value
  float scale;
  bool causal;
  int window; // 0: none (also for a window of at least seq)
  /// Explicit positions (attention_positions): query t sees key s iff
  /// !causal or kpos[s] <= qpos[t] (and kpos[s] > qpos[t] - W); null for
  /// the implicit 0..seq-1 of both.
  const std::int32_t *qpos, *kpos;
};

/// Whether query `row` sees key `col` (both inside the sequence).
__device__ __forceinline__ bool visible(const Params &p, int row, int col) {
  if (p.qpos) {
    if (!p.causal)
      return true;
    const Index q = p.qpos[row], k = p.kpos[col];
    return k <= q && (p.window == 0 || k > q - p.window);
  }
  return (!p.causal || col <= row) && (p.window == 0 || col > row - p.window);
}

/// Explicit positions, causal: the smallest and largest position of rows
/// [r0, r0 + n) (clipped to `rows`); min > max when there are none.
__device__ __forceinline__ void positionRange(const std::int32_t *pos, int r0,
                                              int n, int rows, Index &lo,
                                              Index &hi) {
  lo = LLONG_MAX;
  hi = LLONG_MIN;
  for (int r = r0; r < r0 + n && r < rows; ++r) {
    const Index x = pos[r];
    lo = x < lo ? x : lo;
    hi = x > hi ? x : hi;
  }
}

/// Whether no key of a tile (positions [kLo, kHi]) is visible to any query
/// of a tile (positions [qLo, qHi]): all the keys come after all the
/// queries, or (with a window) all fall before every query's window.
/// Skipping such a tile changes no bit: it adds exp(-inf) = 0 everywhere.
__device__ __forceinline__ bool tileHidden(const Params &p, Index qLo,
                                           Index qHi, Index kLo, Index kHi) {
  if (qLo > qHi || kLo > kHi)
    return true;
  return kLo > qHi || (p.window != 0 && kHi <= qLo - p.window);
}

/// The end of the keys a block of query rows starting at q0 visits.
__device__ __forceinline__ int keyEnd(const Params &p, int q0) {
  if (p.qpos)
    return p.kseq;
  return p.causal ? min(p.seq, q0 + kRows) : p.seq;
}

/// The first key tile a block of query rows starting at q0 visits: the
/// tile of its first row's first key.
__device__ __forceinline__ int firstKeyTile(const Params &p, int q0) {
  if (p.qpos)
    return 0; // positions: every key tile (masked per element)
  const int first = q0 - p.window + 1;
  return p.window == 0 || first <= 0 ? 0 : first / kInner * kInner;
}

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(__nv_bfloat16 x) {
  return __bfloat162float(x);
}
template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 fromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ int lane16() { return threadIdx.x & 15; }
__device__ __forceinline__ int rowGroup() { return threadIdx.x >> 4; }

/// Max / sum over the 16 lanes that share rows (a half warp). Every lane of
/// the warp must call it; the butterfly gives the same bits on all 16 lanes.
__device__ __forceinline__ float halfWarpMax(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1)
    x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, offset));
  return x;
}
__device__ __forceinline__ float halfWarpSum(float x) {
#pragma unroll
  for (int offset = 8; offset > 0; offset >>= 1)
    x += __shfl_xor_sync(0xffffffffu, x, offset);
  return x;
}

/// Rows [r0, r0 + kTileRows) of a head slice (row stride ld) into shared
/// memory (row stride kD + 4) as fp32; rows at or past seq and columns at or
/// past the head dimension are zero, so they add nothing to any dot. With a
/// RoPE table, each row is rotated on the way (rotate-half at position t,
/// the CPU kernel's formula): (x1, x2) -> (x1 c - x2 s, x2 c + x1 s) for
/// x1 = x[i], x2 = x[i + D/2].
template <int kD, int kTileRows, typename T>
__device__ void loadTile(float *dst, const T *src, Index ld, int r0,
                         int rows, const Params &p, const float2 *rope) {
  for (int idx = threadIdx.x; idx < kTileRows * kD; idx += kThreads) {
    const int r = idx / kD, d = idx % kD;
    const int t = r0 + r;
    float x = 0.0f;
    if (t < rows && d < p.dim) {
      const T *row = src + Index(t) * ld;
      if (rope) {
        const int i = d < p.half ? d : d - p.half;
        const float2 cs = rope[Index(t) * p.half + i];
        const float x1 = toFloat(row[i]), x2 = toFloat(row[i + p.half]);
        x = d < p.half ? x1 * cs.x - x2 * cs.y : x2 * cs.x + x1 * cs.y;
      } else {
        x = toFloat(row[d]);
      }
    }
    dst[r * kRowStride<kD> + d] = x;
  }
}

/// acc[i][j] = sum_d a[ty*4+i][d] * b[tx+16j][d] over the padded head
/// dimension (a has kRows rows, b kInner; both row stride kD + 4).
template <int kD>
__device__ __forceinline__ void tileDots(const float *a, const float *b,
                                         float (&acc)[4][kInner / 16]) {
  constexpr int S = kRowStride<kD>;
  const int tx = lane16(), ty = rowGroup();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kInner / 16; ++j)
      acc[i][j] = 0.0f;
#pragma unroll 4
  for (int d = 0; d < kD; d += 4) {
    float4 av[4], bv[kInner / 16];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      av[i] = *reinterpret_cast<const float4 *>(a + (ty * 4 + i) * S + d);
#pragma unroll
    for (int j = 0; j < kInner / 16; ++j)
      bv[j] = *reinterpret_cast<const float4 *>(b + (tx + 16 * j) * S + d);
#pragma unroll
    for (int i = 0; i < 4; ++i)
#pragma unroll
      for (int j = 0; j < kInner / 16; ++j) {
        float s = acc[i][j];
        s = fmaf(av[i].x, bv[j].x, s);
        s = fmaf(av[i].y, bv[j].y, s);
        s = fmaf(av[i].z, bv[j].z, s);
        s = fmaf(av[i].w, bv[j].w, s);
        acc[i][j] = s;
      }
  }
}

/// acc[i][j] += sum_c p[ty*4+i][c] * b[c][tx+16j] for c < kInner (p has row
/// stride kPStride, b row stride kD + 4): a [64, 32] x [32, kD] product.
template <int kD>
__device__ __forceinline__ void tileAccumulate(const float *p, const float *b,
                                               float (&acc)[4][kD / 16]) {
  constexpr int S = kRowStride<kD>;
  const int tx = lane16(), ty = rowGroup();
#pragma unroll 2
  for (int c = 0; c < kInner; c += 4) {
    float4 pv[4];
#pragma unroll
    for (int i = 0; i < 4; ++i)
      pv[i] =
          *reinterpret_cast<const float4 *>(p + (ty * 4 + i) * kPStride + c);
#pragma unroll
    for (int j = 0; j < kD / 16; ++j) {
      const float b0 = b[(c + 0) * S + tx + 16 * j];
      const float b1 = b[(c + 1) * S + tx + 16 * j];
      const float b2 = b[(c + 2) * S + tx + 16 * j];
      const float b3 = b[(c + 3) * S + tx + 16 * j];
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        float s = acc[i][j];
        s = fmaf(pv[i].x, b0, s);
        s = fmaf(pv[i].y, b1, s);
        s = fmaf(pv[i].z, b2, s);
        s = fmaf(pv[i].w, b3, s);
        acc[i][j] = s;
      }
    }
  }
}

/// Stores a [64, kD] fp32 tile from shared memory (row stride kD + 4) to
/// rows [r0, r0 + 64) of a head slice of T, applying the transpose RoPE
/// rotation when `rope` is set: (g1, g2) -> (g1 c + g2 s, g2 c - g1 s) for
/// g1 = g[i], g2 = g[i + D/2]. This turns a gradient with respect to the
/// rotated head into one with respect to the un-rotated head.
template <int kD, typename T>
__device__ void storeUnrotated(const float *tile, T *dst, Index ld, int r0,
                               int rows, const Params &p,
                               const float2 *rope) {
  constexpr int S = kRowStride<kD>;
  for (int idx = threadIdx.x; idx < kRows * kD; idx += kThreads) {
    const int r = idx / kD, d = idx % kD;
    const int t = r0 + r;
    if (t >= rows || d >= p.dim)
      continue;
    float value = tile[r * S + d];
    if (rope) {
      const int i = d < p.half ? d : d - p.half;
      const float2 cs = rope[Index(t) * p.half + i];
      const float g1 = tile[r * S + i], g2 = tile[r * S + i + p.half];
      value = d < p.half ? g1 * cs.x + g2 * cs.y : g2 * cs.x - g1 * cs.y;
    }
    dst[Index(t) * ld + d] = fromFloat<T>(value);
  }
}

//===----------------------------------------------------------------------===//
// RoPE table
//===----------------------------------------------------------------------===//

/// table[t * half + i] = (cos, sin)(t * theta^(-2i/D)), in double like the
/// CPU kernel's table (in float, t * freq alone is off by ~t * 1e-7 rad).
/// The frequency is scaled as runtime/program/Rope.h's ropeFrequency does
/// (repeated here in device code): kind 1 linear, 2 llama3, 3 yarn (whose
/// ramp bounds [yarnLow, yarnHigh] and attention factor `amplitude`, which
/// multiplies cos and sin, the host computes with Rope.h).
__global__ void ropeTableKernel(float2 *table, const std::int32_t *positions,
                                int seq, int half, int dim,
                                float theta, int kind, double factor,
                                double lowFreqFactor, double highFreqFactor,
                                double originalContext, double yarnLow,
                                double yarnHigh, double amplitude) {
  const Index total = Index(seq) * half;
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < total;
       idx += Index(gridDim.x) * blockDim.x) {
    const Index t = idx / half;
    const int i = int(idx % half);
    double freq = pow(double(theta), -2.0 * double(i) / double(dim));
    if (kind == 1) {
      freq /= factor;
    } else if (kind == 2) {
      const double wavelength = 2.0 * 3.14159265358979323846 / freq;
      if (wavelength > originalContext / lowFreqFactor) {
        freq /= factor;
      } else if (!(wavelength < originalContext / highFreqFactor)) {
        const double smooth = (originalContext / wavelength - lowFreqFactor) /
                              (highFreqFactor - lowFreqFactor);
        freq = (1.0 - smooth) * freq / factor + smooth * freq;
      }
    } else if (kind == 3) {
      double ramp = (double(i) - yarnLow) / (yarnHigh - yarnLow);
      ramp = ramp < 0.0 ? 0.0 : ramp > 1.0 ? 1.0 : ramp;
      freq = freq / factor * ramp + freq * (1.0 - ramp);
    }
    const double angle = double(positions ? positions[t] : t) * freq;
    table[idx] = make_float2(float(amplitude * cos(angle)),
                             float(amplitude * sin(angle)));
  }
}

/// attention_block_grad's delta[b, h, t] = sum_d grad * out (the final
/// out), in d order like the CPU kernel; one thread per row.
template <typename T>
__global__ void deltaKernel(const T *grad, const T *out, float *delta,
                            Index rows, int seq, int heads, int dim,
                            Index ldq) {
  for (Index idx = blockIdx.x * Index(blockDim.x) + threadIdx.x; idx < rows;
       idx += Index(gridDim.x) * blockDim.x) {
    const Index t = idx % seq, bh = idx / seq;
    const Index h = bh % heads, b = bh / heads;
    const Index offset = (b * seq + t) * ldq + h * dim;
    float dot = 0.0f;
    for (int d = 0; d < dim; ++d)
      dot += toFloat(grad[offset + d]) * toFloat(out[offset + d]);
    delta[idx] = dot;
  }
}

//===----------------------------------------------------------------------===//
// Forward (and the backward's statistics pass)
//===----------------------------------------------------------------------===//

template <int kD> constexpr std::size_t forwardSmemBytes() {
  return sizeof(float) *
         (std::size_t(kRows + 2 * kInner) * kRowStride<kD> + kRows * kPStride);
}

/// grid (batch * heads, query tiles). Writes result (if not null), or, in
/// the statistics mode (grad not null), lse and delta [batch, heads, seq].
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    forwardKernel(const T *query, const T *key, const T *value, T *result,
                  const T *grad, float *lse, float *delta, const float2 *rope,
                  const float2 *krope, Params p) {
  extern __shared__ float4 smemRaw[];
  constexpr int S = kRowStride<kD>;
  constexpr int kCols = kInner / 16;
  constexpr int kAcc = kD / 16;
  float *qs = reinterpret_cast<float *>(smemRaw);
  float *ks = qs + kRows * S;
  float *vs = ks + kInner * S;
  float *ps = vs + kInner * S;

  const int b = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
  const int kvh = h / p.group;
  // The last query tiles have the most causal work: start them first.
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;
  const int tx = lane16(), ty = rowGroup();
  const Index qOffset = Index(b) * p.seq * p.ldq + Index(h) * p.dim;
  const Index kOffset = Index(b) * p.kseq * p.ldk + Index(kvh) * p.dim;

  loadTile<kD, kRows>(qs, query + qOffset, p.ldq, q0, p.seq, p, rope);

  float o[4][kAcc], m[4], l[4];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    m[i] = -INFINITY;
    l[i] = 0.0f;
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
      o[i][j] = 0.0f;
  }

  // Explicit positions, causal: key tiles that no query of the block can
  // see are skipped (thread 0 decides, for the whole block).
  __shared__ int hidden;
  const bool skipping = p.qpos && p.causal;
  Index qLo = 0, qHi = 0;
  if (skipping && threadIdx.x == 0)
    positionRange(p.qpos, q0, kRows, p.seq, qLo, qHi);
  const int kEnd = keyEnd(p, q0);
  for (int k0 = firstKeyTile(p, q0); k0 < kEnd; k0 += kInner) {
    __syncthreads(); // the previous tile's readers are done
    if (skipping) {
      if (threadIdx.x == 0) {
        Index kLo, kHi;
        positionRange(p.kpos, k0, kInner, p.kseq, kLo, kHi);
        hidden = tileHidden(p, qLo, qHi, kLo, kHi);
      }
      __syncthreads();
      if (hidden)
        continue;
    }
    loadTile<kD, kInner>(ks, key + kOffset, p.ldk, k0, p.kseq, p, krope);
    loadTile<kD, kInner>(vs, value + kOffset, p.ldk, k0, p.kseq, p, nullptr);
    __syncthreads();

    float s[4][kCols];
    tileDots<kD>(qs, ks, s);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = q0 + ty * 4 + i;
      float tileMax = -INFINITY;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int col = k0 + tx + 16 * j;
        const bool valid = row < p.seq && col < p.kseq && visible(p, row, col);
        s[i][j] = valid ? p.scale * s[i][j] : -INFINITY;
        tileMax = fmaxf(tileMax, s[i][j]);
      }
      tileMax = halfWarpMax(tileMax);
      const float mNew = fmaxf(m[i], tileMax);
      // Without a window key 0 is visible to every row, so mNew is finite
      // from the first tile on; with one, a row's first tiles may be fully
      // masked (m and l stay -inf and 0, and alpha is 0 at its first
      // visible key). The guard keeps such a row NaN-free.
      const float mRef = mNew == -INFINITY ? 0.0f : mNew;
      const float alpha = expf(m[i] - mRef);
      float sum = 0.0f;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const float e = expf(s[i][j] - mRef);
        sum += e;
        ps[(ty * 4 + i) * kPStride + tx + 16 * j] = e;
      }
      sum = halfWarpSum(sum);
      l[i] = l[i] * alpha + sum;
      m[i] = mNew;
#pragma unroll
      for (int j = 0; j < kAcc; ++j)
        o[i][j] *= alpha;
    }
    __syncthreads();
    tileAccumulate<kD>(ps, vs, o);
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = q0 + ty * 4 + i;
    const bool rowValid = row < p.seq;
    // A row that sees no key (explicit positions only) gets zeros.
    const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
    float dot = 0.0f;
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      const int d = tx + 16 * j;
      const float out = o[i][j] * inv;
      const bool in = rowValid && d < p.dim;
      if (result && in)
        result[qOffset + Index(row) * p.ldq + d] = fromFloat<T>(out);
      if (grad && in)
        dot = fmaf(toFloat(grad[qOffset + Index(row) * p.ldq + d]), out, dot);
    }
    if (grad)
      dot = halfWarpSum(dot); // every lane: rows differ between half warps
    // lse: the statistics pass, or attention_block's output (-inf for a
    // row that sees no key: m = -inf, l = 0).
    if (lse && rowValid && tx == 0) {
      const Index stat = (Index(b) * p.heads + h) * p.seq + row;
      lse[stat] = m[i] + logf(l[i]);
      if (grad)
        delta[stat] = dot;
    }
  }
}

//===----------------------------------------------------------------------===//
// Backward: dQ
//===----------------------------------------------------------------------===//

template <int kD> constexpr std::size_t queryGradSmemBytes() {
  return sizeof(float) * (std::size_t(2 * kRows + 2 * kInner) * kRowStride<kD> +
                          kRows * kPStride);
}

/// grid (batch * heads, query tiles).
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    queryGradKernel(const T *query, const T *key, const T *value, const T *grad,
                    const float *lse, const float *delta, const float2 *rope,
                    const float2 *krope, T *queryGrad, Params p) {
  extern __shared__ float4 smemRaw[];
  constexpr int S = kRowStride<kD>;
  constexpr int kCols = kInner / 16;
  constexpr int kAcc = kD / 16;
  float *qs = reinterpret_cast<float *>(smemRaw);
  float *dos = qs + kRows * S;
  float *ks = dos + kRows * S;
  float *vs = ks + kInner * S;
  float *dss = vs + kInner * S;

  const int b = blockIdx.x / p.heads, h = blockIdx.x % p.heads;
  const int kvh = h / p.group;
  const int q0 = (gridDim.y - 1 - blockIdx.y) * kRows;
  const int tx = lane16(), ty = rowGroup();
  const Index qOffset = Index(b) * p.seq * p.ldq + Index(h) * p.dim;
  const Index kOffset = Index(b) * p.kseq * p.ldk + Index(kvh) * p.dim;
  const Index statOffset = (Index(b) * p.heads + h) * p.seq;

  loadTile<kD, kRows>(qs, query + qOffset, p.ldq, q0, p.seq, p, rope);
  loadTile<kD, kRows>(dos, grad + qOffset, p.ldq, q0, p.seq, p, nullptr);

  float rowLse[4], rowDelta[4], dq[4][kAcc];
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = q0 + ty * 4 + i;
    rowLse[i] = row < p.seq ? lse[statOffset + row] : 0.0f;
    rowDelta[i] = row < p.seq ? delta[statOffset + row] : 0.0f;
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
      dq[i][j] = 0.0f;
  }

  __shared__ int hidden;
  const bool skipping = p.qpos && p.causal;
  Index qLo = 0, qHi = 0;
  if (skipping && threadIdx.x == 0)
    positionRange(p.qpos, q0, kRows, p.seq, qLo, qHi);
  const int kEnd = keyEnd(p, q0);
  for (int k0 = firstKeyTile(p, q0); k0 < kEnd; k0 += kInner) {
    __syncthreads();
    if (skipping) {
      if (threadIdx.x == 0) {
        Index kLo, kHi;
        positionRange(p.kpos, k0, kInner, p.kseq, kLo, kHi);
        hidden = tileHidden(p, qLo, qHi, kLo, kHi);
      }
      __syncthreads();
      if (hidden)
        continue;
    }
    loadTile<kD, kInner>(ks, key + kOffset, p.ldk, k0, p.kseq, p, krope);
    loadTile<kD, kInner>(vs, value + kOffset, p.ldk, k0, p.kseq, p, nullptr);
    __syncthreads();

    float s[4][kCols], dp[4][kCols];
    tileDots<kD>(qs, ks, s);
    tileDots<kD>(dos, vs, dp);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const int row = q0 + ty * 4 + i;
#pragma unroll
      for (int j = 0; j < kCols; ++j) {
        const int col = k0 + tx + 16 * j;
        const bool valid = row < p.seq && col < p.kseq && visible(p, row, col);
        const float prob = valid ? expf(p.scale * s[i][j] - rowLse[i]) : 0.0f;
        // The softmax backward with the score scale folded in, in the CPU
        // kernel's order.
        dss[(ty * 4 + i) * kPStride + tx + 16 * j] =
            p.scale * prob * (dp[i][j] - rowDelta[i]);
      }
    }
    __syncthreads();
    tileAccumulate<kD>(dss, ks, dq);
  }

  // Through shared memory, since un-rotating pairs columns d and d + D/2
  // that different threads hold.
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
      qs[(ty * 4 + i) * S + tx + 16 * j] = dq[i][j];
  __syncthreads();
  storeUnrotated<kD>(qs, queryGrad + qOffset, p.ldq, q0, p.seq, p, rope);
}

//===----------------------------------------------------------------------===//
// Backward: dK and dV
//===----------------------------------------------------------------------===//

template <int kD> constexpr std::size_t keyValueGradSmemBytes() {
  return sizeof(float) * (std::size_t(2 * kRows + 2 * kInner) * kRowStride<kD> +
                          2 * kRows * kPStride + 2 * kInner);
}

/// grid (batch * kvHeads, key tiles). The query heads of the kv head's
/// group run in order inside the block, so their contributions add up in
/// registers in a fixed order.
template <int kD, typename T>
__global__ void __launch_bounds__(kThreads)
    keyValueGradKernel(const T *query, const T *key, const T *value,
                       const T *grad, const float *lse, const float *delta,
                       const float2 *rope, const float2 *krope, T *keyGrad,
                       T *valueGrad, Params p) {
  extern __shared__ float4 smemRaw[];
  constexpr int S = kRowStride<kD>;
  constexpr int kCols = kInner / 16;
  constexpr int kAcc = kD / 16;
  float *ks = reinterpret_cast<float *>(smemRaw);
  float *vs = ks + kRows * S;
  float *qs = vs + kRows * S;
  float *dos = qs + kInner * S;
  float *ps = dos + kInner * S;
  float *dss = ps + kRows * kPStride;
  float *lses = dss + kRows * kPStride;
  float *deltas = lses + kInner;

  const int b = blockIdx.x / p.kvHeads, kvh = blockIdx.x % p.kvHeads;
  // Key tile 0 meets the most causal queries: start it first.
  const int k0 = blockIdx.y * kRows;
  const int tx = lane16(), ty = rowGroup();
  const Index kOffset = Index(b) * p.kseq * p.ldk + Index(kvh) * p.dim;

  loadTile<kD, kRows>(ks, key + kOffset, p.ldk, k0, p.kseq, p, krope);
  loadTile<kD, kRows>(vs, value + kOffset, p.ldk, k0, p.kseq, p, nullptr);

  float dk[4][kAcc], dv[4][kAcc];
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      dk[i][j] = 0.0f;
      dv[i][j] = 0.0f;
    }

  // k0 is a multiple of kInner: causal blocks start at their diagonal tile,
  // and with a window end after the last query that sees key k0 + 63.
  // With explicit positions every query tile (masked per element).
  const int qStart = p.qpos || !p.causal ? 0 : k0;
  const int qEnd = p.qpos || p.window == 0
                       ? p.seq
                       : min(p.seq, k0 + kRows - 1 + p.window);
  __shared__ int hidden;
  const bool skipping = p.qpos && p.causal;
  Index kLo = 0, kHi = 0;
  if (skipping && threadIdx.x == 0)
    positionRange(p.kpos, k0, kRows, p.kseq, kLo, kHi);
  for (int g = 0; g < p.group; ++g) {
    const int h = kvh * p.group + g;
    const Index qOffset = Index(b) * p.seq * p.ldq + Index(h) * p.dim;
    const Index statOffset = (Index(b) * p.heads + h) * p.seq;
    for (int q0 = qStart; q0 < qEnd; q0 += kInner) {
      __syncthreads();
      if (skipping) {
        if (threadIdx.x == 0) {
          Index qLo, qHi;
          positionRange(p.qpos, q0, kInner, p.seq, qLo, qHi);
          hidden = tileHidden(p, qLo, qHi, kLo, kHi);
        }
        __syncthreads();
        if (hidden)
          continue;
      }
      loadTile<kD, kInner>(qs, query + qOffset, p.ldq, q0, p.seq, p, rope);
      loadTile<kD, kInner>(dos, grad + qOffset, p.ldq, q0, p.seq, p, nullptr);
      if (threadIdx.x < kInner) {
        const int row = q0 + threadIdx.x;
        lses[threadIdx.x] = row < p.seq ? lse[statOffset + row] : 0.0f;
        deltas[threadIdx.x] = row < p.seq ? delta[statOffset + row] : 0.0f;
      }
      __syncthreads();

      // Transposed scores: rows are keys, columns queries.
      float s[4][kCols], dp[4][kCols];
      tileDots<kD>(ks, qs, s);
      tileDots<kD>(vs, dos, dp);
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const int col = k0 + ty * 4 + i; // key position
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          const int r = tx + 16 * j;
          const int row = q0 + r; // query position
          const bool valid =
              row < p.seq && col < p.kseq && visible(p, row, col);
          const float prob = valid ? expf(p.scale * s[i][j] - lses[r]) : 0.0f;
          ps[(ty * 4 + i) * kPStride + r] = prob;
          dss[(ty * 4 + i) * kPStride + r] =
              p.scale * prob * (dp[i][j] - deltas[r]);
        }
      }
      __syncthreads();
      tileAccumulate<kD>(ps, dos, dv);
      tileAccumulate<kD>(dss, qs, dk);
    }
  }

#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int row = k0 + ty * 4 + i;
#pragma unroll
    for (int j = 0; j < kAcc; ++j) {
      const int d = tx + 16 * j;
      if (row < p.kseq && d < p.dim)
        valueGrad[kOffset + Index(row) * p.ldk + d] = fromFloat<T>(dv[i][j]);
    }
  }
  // The rotation is linear: un-rotating the group's summed dK equals
  // summing the un-rotated per-head contributions.
  __syncthreads();
#pragma unroll
  for (int i = 0; i < 4; ++i)
#pragma unroll
    for (int j = 0; j < kAcc; ++j)
      ks[(ty * 4 + i) * S + tx + 16 * j] = dk[i][j];
  __syncthreads();
  storeUnrotated<kD>(ks, keyGrad + kOffset, p.ldk, k0, p.kseq, p, krope);
}

//===----------------------------------------------------------------------===//
// Host side
//===----------------------------------------------------------------------===//

void checkLaunch(const char *kernel, const char *what) {
  const cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(kernel) + ": " + what +
                             " failed: " + cudaGetErrorString(error));
}

void checkCall(const char *kernel, const char *what, cudaError_t error) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(kernel) + ": " + what +
                             " failed: " + cudaGetErrorString(error));
}

[[noreturn]] void fail(const char *kernel, const std::string &message) {
  throw std::invalid_argument(std::string(kernel) + ": " + message);
}

std::size_t align256(std::size_t bytes) { return (bytes + 255) / 256 * 256; }

/// The validated shape and the workspace layout (byte offsets; every part
/// 256-byte aligned relative to the workspace start).
struct Plan {
  Params params;
  Index batch = 0;
  bool rope = false;
  float theta = 0.0f;
  RopeScaling scaling;
  int paddedDim = 0;
  std::size_t table = 0;          // RoPE only
  std::size_t keyTable = 0;       // RoPE at explicit positions: the keys'
  bool positioned = false;
  std::size_t lse = 0, delta = 0; // backward only
  std::size_t forwardBytes = 0, backwardBytes = 0;
};

/// keySeq < 0: implicit positions (keys are the query's sequence);
/// otherwise explicit positions with keySeq keys.
Plan makePlan(const char *kernel, const AttentionShape &shape,
              Index keySeq = -1) {
  if (shape.batch < 0 || shape.seq < 0)
    fail(kernel, "negative batch or sequence length");
  const bool positioned = keySeq >= 0;
  const Index kseq = positioned ? keySeq : shape.seq;
  if (kseq > Index(65535) * kRows)
    fail(kernel, "key sequence length " + std::to_string(kseq) +
                     " is above the CUDA kernel's limit of " +
                     std::to_string(Index(65535) * kRows));
  if (shape.numHeads <= 0 || shape.numKvHeads <= 0 || shape.headDim <= 0)
    fail(kernel, "num_heads, num_kv_heads and the head dimension must be "
                 "positive");
  if (shape.numHeads % shape.numKvHeads != 0)
    fail(kernel, "num_kv_heads (" + std::to_string(shape.numKvHeads) +
                     ") does not divide num_heads (" +
                     std::to_string(shape.numHeads) + ")");
  if (shape.headDim > kMaxHeadDim)
    fail(kernel, "head dimension " + std::to_string(shape.headDim) +
                     " is above the CUDA kernel's limit of " +
                     std::to_string(kMaxHeadDim));
  if (shape.ropeTheta < 0.0f || std::isnan(shape.ropeTheta))
    fail(kernel, "rope_theta must be positive (0 means no RoPE)");
  const bool rope = shape.ropeTheta > 0.0f;
  if (rope && shape.headDim % 2 != 0)
    fail(kernel, "RoPE needs an even head dimension, got " +
                     std::to_string(shape.headDim));
  if (shape.window < 0 || (shape.window > 0 && !shape.causal))
    fail(kernel, "sliding window " + std::to_string(shape.window) +
                     " must be 0 (none) or positive with causal attention");
  // Grid limits: (batch * heads) in x, 64-row tiles in y (at most 65535).
  if (shape.seq > Index(65535) * kRows)
    fail(kernel, "sequence length " + std::to_string(shape.seq) +
                     " is above the CUDA kernel's limit of " +
                     std::to_string(Index(65535) * kRows));
  if (shape.batch > INT_MAX / shape.numHeads)
    fail(kernel, "batch * num_heads does not fit a grid dimension");

  Plan plan;
  Params &p = plan.params;
  p.seq = int(shape.seq);
  p.heads = int(shape.numHeads);
  p.kvHeads = int(shape.numKvHeads);
  p.group = int(shape.numHeads / shape.numKvHeads);
  p.dim = int(shape.headDim);
  p.half = p.dim / 2;
  p.ldq = shape.numHeads * shape.headDim;
  p.ldk = shape.numKvHeads * shape.headDim;
  p.scale = static_cast<float>(1.0 / std::sqrt(double(shape.headDim)));
  p.causal = shape.causal;
  p.kseq = int(kseq);
  p.qpos = p.kpos = nullptr;
  // Positions may exceed seq: the window is kept as given (it fits an int
  // as positions do).
  p.window = positioned ? int(std::min<Index>(shape.window, INT_MAX))
             : shape.window < shape.seq ? int(shape.window)
                                        : 0;
  plan.positioned = positioned;
  plan.batch = shape.batch;
  plan.rope = rope;
  plan.theta = shape.ropeTheta;
  plan.scaling = shape.ropeScaling;
  plan.paddedDim = p.dim <= 32 ? 32 : p.dim <= 64 ? 64 : 128;

  const std::size_t rows = std::size_t(shape.batch) * std::size_t(shape.seq);
  std::size_t offset = 0;
  if (rope) {
    plan.table = offset;
    offset += align256(sizeof(float2) * std::size_t(shape.seq) * p.half);
    plan.keyTable = plan.table;
    if (positioned) {
      plan.keyTable = offset;
      offset += align256(sizeof(float2) * std::size_t(kseq) * p.half);
    }
  }
  plan.forwardBytes = offset;
  const std::size_t stats = sizeof(float) * rows * std::size_t(p.heads);
  plan.lse = offset;
  offset += align256(stats);
  plan.delta = offset;
  offset += align256(stats);
  plan.backwardBytes = offset;
  return plan;
}

void checkWorkspace(const char *kernel, void *workspace, std::size_t bytes,
                    std::size_t needed) {
  if (needed == 0)
    return;
  if (!workspace || bytes < needed)
    fail(kernel, "workspace of " + std::to_string(bytes) +
                     " bytes is smaller than the " + std::to_string(needed) +
                     " it needs");
  // The parts sit at 256-byte offsets; float2 / float loads need the base
  // aligned too (cudaMalloc's 256 bytes are plenty).
  if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
    fail(kernel, "workspace is not 16-byte aligned");
}

unsigned blocksFor(Index work) {
  return unsigned(std::min<Index>((work + 255) / 256, 4096));
}

/// Fills a RoPE cos/sin table of `rows` rows at `offset` in the workspace
/// (at positions[t], or t without positions); null without RoPE.
const float2 *ropeTable(const char *kernel, const Plan &plan, char *ws,
                        cudaStream_t stream, std::size_t offset, int rows,
                        const std::int32_t *positions) {
  if (!plan.rope || rows == 0)
    return nullptr;
  const Params &p = plan.params;
  auto *table = reinterpret_cast<float2 *>(ws + offset);
  double yarnLow = 0.0, yarnHigh = 1.0;
  if (plan.scaling.kind == RopeScalingKind::Yarn)
    yarnRamp(p.dim, double(plan.theta), plan.scaling, yarnLow, yarnHigh);
  ropeTableKernel<<<blocksFor(Index(rows) * p.half), 256, 0, stream>>>(
      table, positions, rows, p.half, p.dim, plan.theta,
      int(plan.scaling.kind), plan.scaling.factor, plan.scaling.lowFreqFactor,
      plan.scaling.highFreqFactor, plan.scaling.originalContext, yarnLow,
      yarnHigh, ropeAttentionFactor(plan.scaling));
  checkLaunch(kernel, "ropeTableKernel launch");
  return table;
}

/// The queries' table (the keys' too without explicit positions).
const float2 *ropeTable(const char *kernel, const Plan &plan, char *ws,
                        cudaStream_t stream) {
  return ropeTable(kernel, plan, ws, stream, plan.table, plan.params.seq,
                   plan.params.qpos);
}

/// The keys' table: the queries' one without explicit positions.
const float2 *keyRopeTable(const char *kernel, const Plan &plan, char *ws,
                           cudaStream_t stream, const float2 *queryTable) {
  if (!plan.positioned)
    return queryTable;
  return ropeTable(kernel, plan, ws, stream, plan.keyTable, plan.params.kseq,
                   plan.params.kpos);
}

template <typename Kernel>
void allowSmem(const char *kernel, const char *name, Kernel *function,
               std::size_t bytes) {
  checkCall(kernel, name,
            cudaFuncSetAttribute(reinterpret_cast<const void *>(function),
                                 cudaFuncAttributeMaxDynamicSharedMemorySize,
                                 int(bytes)));
}

unsigned tiles(int seq) { return unsigned((seq + kRows - 1) / kRows); }

template <int kD, typename T>
void launchForward(const char *kernel, const Plan &plan, const T *query,
                   const T *key, const T *value, T *result, const T *grad,
                   float *lse, float *delta, const float2 *rope,
                   const float2 *krope, cudaStream_t stream) {
  const Params &p = plan.params;
  if (tiles(p.seq) == 0)
    return;
  auto *function = forwardKernel<kD, T>;
  constexpr std::size_t smem = forwardSmemBytes<kD>();
  allowSmem(kernel, "cudaFuncSetAttribute(forwardKernel)", function, smem);
  const dim3 grid(unsigned(plan.batch * p.heads), tiles(p.seq));
  function<<<grid, kThreads, smem, stream>>>(query, key, value, result, grad,
                                             lse, delta, rope, krope, p);
  checkLaunch(kernel, "forwardKernel launch");
}

template <int kD, typename T>
void launchBackward(const char *kernel, const Plan &plan, const T *query,
                    const T *key, const T *value, const T *grad,
                    const float2 *rope, const float2 *krope, T *queryGrad,
                    T *keyGrad, T *valueGrad, const float *lse, float *delta,
                    cudaStream_t stream, bool statistics = true) {
  const Params &p = plan.params;
  // Statistics pass: lse and delta = rowsum(dO * O), no O written (not for
  // attention_block_grad, which is given lse and computes delta from out).
  if (statistics)
    launchForward<kD, T>(kernel, plan, query, key, value, nullptr, grad,
                         const_cast<float *>(lse), delta, rope, krope, stream);

  auto *dq = queryGradKernel<kD, T>;
  constexpr std::size_t dqSmem = queryGradSmemBytes<kD>();
  allowSmem(kernel, "cudaFuncSetAttribute(queryGradKernel)", dq, dqSmem);
  if (tiles(p.seq) > 0) {
    dq<<<dim3(unsigned(plan.batch * p.heads), tiles(p.seq)), kThreads, dqSmem,
         stream>>>(query, key, value, grad, lse, delta, rope, krope, queryGrad,
                   p);
    checkLaunch(kernel, "queryGradKernel launch");
  }

  auto *dkv = keyValueGradKernel<kD, T>;
  constexpr std::size_t dkvSmem = keyValueGradSmemBytes<kD>();
  allowSmem(kernel, "cudaFuncSetAttribute(keyValueGradKernel)", dkv, dkvSmem);
  if (tiles(p.kseq) > 0) {
    dkv<<<dim3(unsigned(plan.batch * p.kvHeads), tiles(p.kseq)), kThreads,
          dkvSmem, stream>>>(query, key, value, grad, lse, delta, rope, krope,
                             keyGrad, valueGrad, p);
    checkLaunch(kernel, "keyValueGradKernel launch");
  }
}

/// Calls f(std::integral_constant<int, kD>) for the plan's padded dimension.
template <typename F> void withPaddedDim(int paddedDim, F &&f) {
  switch (paddedDim) {
  case 32:
    f(std::integral_constant<int, 32>());
    break;
  case 64:
    f(std::integral_constant<int, 64>());
    break;
  default:
    f(std::integral_constant<int, 128>());
    break;
  }
}

} // namespace

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_ATTENTION_ATTENTIONKERNELS_CUH
