//===- AttentionSupport.h - helpers of the CPU attention kernels -*- C++ -*-===//
//
// Internal to runtime/backend/cpu: what attention (Attention.cpp) and ring
// attention (RingAttention.cpp) share, so that the rotation, the checks
// and the products are one code: the head geometry, the RoPE cos/sin table
// (at positions 0..T-1 or at given positions) and the rotations by it, and
// the row-major sgemm.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CPU_ATTENTIONSUPPORT_H
#define PARTITION_RUNTIME_CPU_ATTENTIONSUPPORT_H

#include "runtime/backend/cpu/Kernels.h"

#include <cblas.h>

#include <cstdint>

namespace partition::runtime::cpu::detail {

/// n rounded up to a multiple of 16 floats (64 bytes): workspace slices
/// start on cache lines.
inline Index round16(Index n) { return (n + 15) / 16 * 16; }

/// The sizes and attributes of one attention call, checked.
struct Geometry {
  Index batch, seq, heads, kvHeads, dim, group;
  Index ldq, ldk; // row strides of query/result/grad and of key/value
  float scale;
  bool causal;
  bool rope;
  Index window; // 0: none (also for a window of at least seq)
  const float *cos = nullptr; // [rows, dim/2]: row t rotates by cos[t]
  const float *sin = nullptr;
};

/// Checks `config` (throwing with `kernel`'s name) and derives its geometry.
Geometry attentionGeometry(const char *kernel, const AttentionConfig &config);

/// cos and sin [rows, dim/2] of position(t) * frequency(i) (Rope.h), with
/// position(t) = positions[t], or t when `positions` is null. Computed in
/// double: in float, the angle t * freq alone would be off by ~t * 1e-7 rad.
void fillRopeTable(const std::int32_t *positions, Index rows, Index dim,
                   float theta, const RopeScaling &scaling, float *cos,
                   float *sin);

/// Row-major cblas_sgemm.
void gemm(CBLAS_TRANSPOSE transA, CBLAS_TRANSPOSE transB, Index m, Index n,
          Index k, float alpha, const float *a, Index lda, const float *b,
          Index ldb, float beta, float *c, Index ldc);

/// Rotate-half RoPE of rows [r0, r1) of one head (row stride ld) into dst
/// (row stride D), row t by g.cos/g.sin row t: (x1, x2) -> (x1 cos - x2 sin,
/// x2 cos + x1 sin) for x1 = x[i], x2 = x[i + D/2].
void rotateRows(const Geometry &g, const float *src, Index ld, float *dst,
                Index r0, Index r1);

/// Applies the transpose (= inverse) rotation in place to rows [r0, r1):
/// turns a gradient with respect to the rotated head into one with respect
/// to the un-rotated head.
void unrotateRows(const Geometry &g, float *x, Index ld, Index r0, Index r1);

} // namespace partition::runtime::cpu::detail

#endif // PARTITION_RUNTIME_CPU_ATTENTIONSUPPORT_H
