//===- Attention.h - flash attention forward and backward -------*- C++ -*-===//
//
// Causal (or full) multi-head attention with grouped-query heads and rotary
// position embeddings, the CUDA counterpart of cpu::attention /
// cpu::attentionGrad (same layouts and semantics: query and result are
// [batch, seq, numHeads * headDim], key and value [batch, seq,
// numKvHeads * headDim]; gradients are with respect to the un-rotated query
// and key). Flash-attention style: tiles of queries against tiles of keys
// with an online softmax, never a seq x seq matrix in memory; the backward
// recomputes the probabilities from the per-row log-sum-exp the forward
// saves. T is float or __nv_bfloat16 storage; arithmetic is fp32.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_ATTENTION_ATTENTION_H
#define PARTITION_RUNTIME_CUDA_ATTENTION_ATTENTION_H

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include "runtime/program/Rope.h"

#include <cstddef>
#include <cstdint>

namespace partition::runtime::cuda {

struct AttentionShape {
  std::int64_t batch = 0;
  std::int64_t seq = 0;
  std::int64_t numHeads = 0;
  std::int64_t numKvHeads = 0;
  std::int64_t headDim = 0;
  bool causal = true;
  /// RoPE base; 0 means no rotary embedding.
  float ropeTheta = 0.0f;
  /// Its frequencies' scaling (linear, llama3, yarn; none by default).
  RopeScaling ropeScaling = {};
  /// Sliding window W (causal only): query t sees keys s with
  /// t - W < s <= t. 0 means none.
  std::int64_t window = 0;
};

/// Device scratch bytes the kernels want: the RoPE cos/sin table (RoPE
/// only) and, for the backward, the per-row log-sum-exp and rowsum(dO * O)
/// in fp32. 0 for a forward without RoPE (the workspace may then be null).
/// The backend allocates max(forward, backward) once and passes it to both.
/// The workspace must be at least 16-byte aligned (cudaMalloc's is).
std::size_t attentionWorkspaceSize(const AttentionShape &shape, bool bf16);
std::size_t attentionGradWorkspaceSize(const AttentionShape &shape, bool bf16);

/// Throws std::invalid_argument for shapes the kernels do not support (the
/// message names the limit, e.g. a head dimension above 128 or odd with
/// RoPE) before launching anything.
template <typename T>
void attention(const T *query, const T *key, const T *value, T *result,
               const AttentionShape &shape, void *workspace,
               std::size_t workspaceBytes, cudaStream_t stream);

/// The forward's log-sum-exp is not kept between instructions (the program
/// has no buffer for it): the backward recomputes it in a first pass.
template <typename T>
void attentionGrad(const T *grad, const T *query, const T *key,
                   const T *value, T *queryGrad, T *keyGrad, T *valueGrad,
                   const AttentionShape &shape, void *workspace,
                   std::size_t workspaceBytes, cudaStream_t stream);

/// Attention at explicit positions (context parallelism's
/// attention_positions, cpu::attentionPositions): query t (of shape.seq)
/// sees key s (of keySeq, which may differ) iff !causal or kpos[s] <=
/// qpos[t] (with a window W also kpos[s] > qpos[t] - W); RoPE rotates each
/// row at its position; a query that sees no key gets zeros. Positions are
/// i32 device vectors [shape.seq] and [keySeq]. The workspace holds the
/// queries' and keys' RoPE tables (and the backward's statistics).
std::size_t attentionPositionsWorkspaceSize(const AttentionShape &shape,
                                           std::int64_t keySeq, bool grad);
template <typename T>
void attentionPositions(const T *query, const T *key, const T *value,
                        const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, T *result,
                        const AttentionShape &shape, std::int64_t keySeq,
                        void *workspace, std::size_t workspaceBytes,
                        cudaStream_t stream);
template <typename T>
void attentionPositionsGrad(const T *grad, const T *query, const T *key,
                            const T *value, const std::int32_t *queryPositions,
                            const std::int32_t *keyPositions, T *queryGrad,
                            T *keyGrad, T *valueGrad,
                            const AttentionShape &shape, std::int64_t keySeq,
                            void *workspace, std::size_t workspaceBytes,
                            cudaStream_t stream);

/// Ring attention (cpu::attentionBlock / attentionBlockGrad): attention
/// over one block of keySeq keys at explicit positions, as
/// attentionPositions, also writing the per-row log-sum-exp lse [batch,
/// numHeads, seq] (fp32; -inf, with out 0, for a query that sees no key of
/// the block). Same workspace as attentionPositions.
template <typename T>
void attentionBlock(const T *query, const T *key, const T *value,
                    const std::int32_t *queryPositions,
                    const std::int32_t *keyPositions, T *result, float *lse,
                    const AttentionShape &shape, std::int64_t keySeq,
                    void *workspace, std::size_t workspaceBytes,
                    cudaStream_t stream);
/// The flash backward of one key block from the final out and lse of the
/// whole attention: dq (this block's term), dk and dv (the block's rows).
/// Workspace: attentionPositionsWorkspaceSize(shape, keySeq, true).
template <typename T>
void attentionBlockGrad(const T *grad, const T *query, const T *key,
                        const T *value, const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, const T *out,
                        const float *lse, T *queryGrad, T *keyGrad,
                        T *valueGrad, const AttentionShape &shape,
                        std::int64_t keySeq, void *workspace,
                        std::size_t workspaceBytes, cudaStream_t stream);

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_ATTENTION_ATTENTION_H
