//===- Kernels.h - CUDA kernels of the xfmr ops -----------------*- C++ -*-===//
//
// The CUDA counterparts of runtime/backend/cpu/Kernels.h, one host function per
// runtime kernel (runtime/program/Kernels.def), each enqueuing its work on `stream`
// and returning at once. Same semantics as the CPU kernels (the GPU check,
// bench/gpu-check.sh, compares them on the same inputs); matrix products are
// not here (the CUDA backend calls cuBLAS / cuBLASLt), nor attention
// (runtime/backend/cuda/attention/Attention.h).
//
// Conventions
// - Pointers are device pointers into the backend's arena; sizes are host
//   values. Sizes are checked on the host before any launch and a bad one
//   throws std::invalid_argument (like the CPU kernels); zero sizes are
//   allowed and launch nothing beyond what the result needs.
// - Storage type T is float or __nv_bfloat16 (explicitly instantiated for
//   both); arithmetic is always fp32 (loads convert, stores round to nearest
//   even). Operands documented as `float` are fp32 whatever T is: the loss,
//   the loss gradient, the vocabulary-parallel per-row statistics, the
//   optimizer state.
// - Token and target ids are read on the device; an id outside its range
//   sets *badId to 1 (the row is then treated as all zeros / contributes
//   nothing) and the backend reports it after the step, so no kernel reads
//   or writes outside its buffers whatever the data.
// - Results are overwritten, except embeddingGrad with `accumulate`. Results
//   may alias inputs exactly where the CPU header allows it.
// - Reductions that decide a result (norm statistics, losses, bias and
//   table gradients) run in fp32 in a fixed order: results are bitwise
//   reproducible run to run.
// - Workspaces are device buffers of (at least) the bytes their
//   ...WorkspaceSize function returns, 16-byte aligned (256 is best); a size
//   of 0 means the pointer may be null. The sizes depend on the shapes only,
//   except the embedding gradients' (they include CUB's radix-sort scratch,
//   sized for the current device: call them with the device set).
// - Launch failures throw std::runtime_error naming the kernel and CUDA's
//   error string. badId may be null (bad ids are then not reported).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_KERNELS_KERNELS_H
#define PARTITION_RUNTIME_CUDA_KERNELS_KERNELS_H

#include <cuda_bf16.h>
#include <cuda_runtime_api.h>

#include <cstddef>
#include <cstdint>

namespace partition::runtime::cuda {

using Index = std::int64_t;
using bf16 = __nv_bfloat16;

//===----------------------------------------------------------------------===//
// Conversions
//===----------------------------------------------------------------------===//

/// result[i] = input[i] converted (f32 -> bf16 rounds to nearest even).
template <typename From, typename To>
void cast(const From *input, To *result, Index size, cudaStream_t stream);

/// Every element = value.
template <typename T>
void fill(T *result, float value, Index size, cudaStream_t stream);
void fillI32(std::int32_t *result, std::int32_t value, Index size,
             cudaStream_t stream);
/// result = lhs + rhs (i32, the step counter).
void addI32(const std::int32_t *lhs, const std::int32_t *rhs,
            std::int32_t *result, Index size, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

template <typename T>
void embedding(const std::int32_t *tokens, const T *table, T *result,
               Index rows, Index vocab, Index channels, int *badId,
               cudaStream_t stream);

/// result [vocab, channels] = scatter-add of grad rows by token (zeroed
/// first unless `accumulate`). `workspace` holds embeddingGradWorkspaceSize
/// bytes: the rows are stably sorted by token there (CUB radix sort), and
/// each table row is then summed by one block in fp32, adding its rows in
/// row order (the CPU kernel's order; no atomics).
std::size_t embeddingGradWorkspaceSize(Index rows, Index vocab,
                                       Index channels);
template <typename T>
void embeddingGrad(const T *grad, const std::int32_t *tokens, T *result,
                   Index rows, Index vocab, Index channels, bool accumulate,
                   void *workspace, int *badId, cudaStream_t stream);

/// result[b, t, :] = input[b, t, :] + table[t, :]; result may alias input.
template <typename T>
void positionEmbedding(const T *input, const T *table, T *result, Index batch,
                       Index seq, Index channels, cudaStream_t stream);
/// result[t, :] = sum over b of grad[b, t, :] (t < seq), 0 for the rest of
/// the `positions` rows.
template <typename T>
void positionEmbeddingGrad(const T *grad, T *result, Index batch, Index seq,
                           Index positions, Index channels,
                           cudaStream_t stream);

/// Context parallelism's explicit positions (Positions.cu).
/// positions[T] (i32): chunks == 1 gives 0..T-1; chunks even (dividing T)
/// gives the zigzag layout (layout block j holds chunk j / 2, j even, or
/// chunks - 1 - j / 2, j odd), as cpu::sequencePositions.
void sequencePositions(std::int32_t *positions, Index length, Index chunks,
                       cudaStream_t stream);
/// result[b, t, :] = input[b, t, :] + table[positions[t], :] (table
/// [tablePositions, channels]); result may alias input. A position outside
/// the table sets *badId (that row then adds nothing).
template <typename T>
void positionEmbeddingAt(const T *input, const T *table,
                         const std::int32_t *positions, T *result, Index batch,
                         Index seq, Index tablePositions, Index channels,
                         int *badId, cudaStream_t stream);
/// result[p, :] = the sum over the t with positions[t] == p (increasing t)
/// and then over b (in order) of grad[b, t, :]; zeros for the rows no t
/// names. No atomics: bitwise reproducible, the CPU kernel's order. A bad
/// position sets *badId and contributes nothing.
template <typename T>
void positionEmbeddingAtGrad(const T *grad, const std::int32_t *positions,
                             T *result, Index batch, Index seq,
                             Index tablePositions, Index channels, int *badId,
                             cudaStream_t stream);
/// Ring attention's merge of two partial attentions over disjoint keys:
/// lse = logaddexp(lseA, lseB), out = outA exp(lseA - lse) + outB exp(lseB -
/// lse) per head (outs [batch, seq, heads * headDim] in T, lses [batch,
/// heads, seq] fp32); both -inf gives out 0 and lse -inf. out may alias outA
/// or outB, lse lseA or lseB.
template <typename T>
void attentionMerge(const T *outA, const float *lseA, const T *outB,
                    const float *lseB, T *out, float *lse, Index batch,
                    Index seq, Index heads, Index headDim,
                    cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Normalisation over the last dimension
//===----------------------------------------------------------------------===//

template <typename T>
void layerNorm(const T *input, const T *gamma, const T *beta, T *result,
               Index rows, Index channels, float epsilon, cudaStream_t stream);
/// gammaGrad / betaGrad are reduced over rows in a fixed order through
/// `workspace` (layerNormGradWorkspaceSize bytes). Each block accumulates
/// its chunk of rows in shared memory, which limits channels to about 28k
/// here and 56k for rmsNormGrad (std::invalid_argument beyond the device's
/// limit).
std::size_t layerNormGradWorkspaceSize(Index rows, Index channels);
template <typename T>
void layerNormGrad(const T *grad, const T *input, const T *gamma,
                   T *inputGrad, T *gammaGrad, T *betaGrad, Index rows,
                   Index channels, float epsilon, void *workspace,
                   cudaStream_t stream);

template <typename T>
void rmsNorm(const T *input, const T *gamma, T *result, Index rows,
             Index channels, float epsilon, cudaStream_t stream);
std::size_t rmsNormGradWorkspaceSize(Index rows, Index channels);
template <typename T>
void rmsNormGrad(const T *grad, const T *input, const T *gamma, T *inputGrad,
                 T *gammaGrad, Index rows, Index channels, float epsilon,
                 void *workspace, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Linear-layer helpers around the cuBLAS GEMMs
//===----------------------------------------------------------------------===//

/// result[r, :] += bias (for GEMM paths without a bias epilogue).
template <typename T>
void addBias(T *result, const T *bias, Index rows, Index outFeatures,
             cudaStream_t stream);
/// biasGrad[o] = sum over rows of grad[r, o], fixed order via `workspace`
/// (biasGradWorkspaceSize bytes).
std::size_t biasGradWorkspaceSize(Index rows, Index outFeatures);
template <typename T>
void biasGrad(const T *grad, T *biasGrad, Index rows, Index outFeatures,
              void *workspace, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Activations and elementwise ops (`size` elements; results may alias)
//===----------------------------------------------------------------------===//

template <typename T>
void gelu(const T *input, T *result, Index size, cudaStream_t stream);
template <typename T>
void geluGrad(const T *grad, const T *input, T *result, Index size,
              cudaStream_t stream);
template <typename T>
void swiglu(const T *gate, const T *up, T *result, Index size,
            cudaStream_t stream);
template <typename T>
void swigluGrad(const T *grad, const T *gate, const T *up, T *gateGrad,
                T *upGrad, Index size, cudaStream_t stream);
template <typename T>
void add(const T *lhs, const T *rhs, T *result, Index size,
         cudaStream_t stream);
template <typename T>
void scale(const T *input, float factor, T *result, Index size,
           cudaStream_t stream);
/// result = input (any bytes; cudaMemcpyAsync device to device).
void copyBytes(const void *input, void *result, std::size_t bytes,
               cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Loss: logits [rows, vocab], targets [rows]; loss and lossGrad are fp32
//===----------------------------------------------------------------------===//

/// Per-row losses go to `workspace` (softmaxCrossEntropyWorkspaceSize
/// bytes) and are averaged in a fixed order. A bad target sets *badId; its
/// row adds 0 to the loss (which is still divided by `rows`) and gets a zero
/// gradient. No rows give a NaN loss, as on the CPU.
std::size_t softmaxCrossEntropyWorkspaceSize(Index rows);
template <typename T>
void softmaxCrossEntropy(const T *logits, const std::int32_t *targets,
                         float *loss, Index rows, Index vocab,
                         void *workspace, int *badId, cudaStream_t stream);
template <typename T>
void softmaxCrossEntropyGrad(const float *lossGrad, const T *logits,
                             const std::int32_t *targets, T *result,
                             Index rows, Index vocab, int *badId,
                             cudaStream_t stream);

//===----------------------------------------------------------------------===//
// AdamW (fp32 master weights, gradients and moments; may run in place)
//===----------------------------------------------------------------------===//

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1.0e-8f;
  float weightDecay = 0.0f;
};
/// *step is read on the device and is not checked (the CPU kernel throws
/// below 1): the backend guarantees it.
void adamw(const float *param, const float *grad, const float *moment1,
           const float *moment2, const std::int32_t *step, const float *lr,
           float *newParam, float *newMoment1, float *newMoment2, Index size,
           const AdamWConfig &config, cudaStream_t stream);
/// adamw on block *block of `blocks` blocks of `size` elements of a flat
/// parameter (ZeRO's chunk, read where it lies). A block outside [0,
/// blocks) sets *badId and updates nothing.
void adamwBlock(const float *param, const std::int32_t *block, Index blocks,
                const float *grad, const float *moment1, const float *moment2,
                const std::int32_t *step, const float *lr, float *newParam,
                float *newMoment1, float *newMoment2, Index size,
                const AdamWConfig &config, int *badId, cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Blocks along one dimension: [outer, blocks * blockDim, inner]
//===----------------------------------------------------------------------===//

/// Element type of `bytesPerElement` bytes (2 or 4): slicing moves bits.
/// An index outside [0, blocks) sets *badId (the result is then zeros).
void sliceBlock(const void *input, const std::int32_t *index, void *result,
                Index outer, Index blockDim, Index inner, Index blocks,
                int bytesPerElement, int *badId, cudaStream_t stream);
void packBlocks(const void *input, void *packed, Index outer, Index blockDim,
                Index inner, Index blocks, int bytesPerElement,
                cudaStream_t stream);
void unpackBlocks(const void *packed, void *result, Index outer,
                  Index blockDim, Index inner, Index blocks,
                  int bytesPerElement, cudaStream_t stream);

/// Flat buckets (ZeRO; see runtime/backend/cpu/Kernels.h): a tensor of `size`
/// elements takes columns [offset, offset + ceil(size / rows)) of the bucket
/// [rows, columns]; flatPack writes them (zeros past the end), flatUnpack
/// reads them back. Elements of 2 or 4 bytes.
void flatPack(const void *tensor, void *bucket, Index size, Index rows,
              Index columns, Index offset, int bytesPerElement,
              cudaStream_t stream);
void flatUnpack(const void *bucket, void *tensor, Index size, Index rows,
                Index columns, Index offset, int bytesPerElement,
                cudaStream_t stream);

//===----------------------------------------------------------------------===//
// Vocabulary parallelism (see runtime/backend/cpu/Kernels.h); the per-row
// statistics max, sumExp and targetLogit are fp32 [rows]
//===----------------------------------------------------------------------===//

// Ids are global. A negative token or target sets *badId (the row embeds as
// zeros, adds nothing to the gradient table, has target logit 0 and a zero
// loss gradient); so does a negative *shard, or one whose ids do not fit
// i32, and every id is then treated as another shard's.

template <typename T>
void vocabParallelEmbedding(const std::int32_t *tokens, const T *table,
                            const std::int32_t *shard, T *result, Index rows,
                            Index localVocab, Index channels, int *badId,
                            cudaStream_t stream);
/// Workspace of vocabParallelEmbeddingGrad (as embeddingGrad's, for the
/// local vocabulary).
std::size_t vocabParallelEmbeddingGradWorkspaceSize(Index rows,
                                                    Index localVocab,
                                                    Index channels);
template <typename T>
void vocabParallelEmbeddingGrad(const T *grad, const std::int32_t *tokens,
                                const std::int32_t *shard, T *result,
                                Index rows, Index localVocab, Index channels,
                                void *workspace, int *badId,
                                cudaStream_t stream);
/// With a padded vocabulary (`shard` given and vocab >= 0), max, sum_exp
/// and the gradient treat local columns whose global id is at or beyond
/// `vocab` as absent (no term; a gradient of exactly zero; a target among
/// them sets *badId).
template <typename T>
void vocabParallelMax(const T *logits, float *result, Index rows,
                      Index localVocab, cudaStream_t stream,
                      const std::int32_t *shard = nullptr, Index vocab = -1);
template <typename T>
void vocabParallelTargetLogit(const T *logits, const std::int32_t *targets,
                              const std::int32_t *shard, float *result,
                              Index rows, Index localVocab, int *badId,
                              cudaStream_t stream);
template <typename T>
void vocabParallelSumExp(const T *logits, const float *max, float *result,
                         Index rows, Index localVocab, cudaStream_t stream,
                         const std::int32_t *shard = nullptr,
                         Index vocab = -1);
/// vocabParallelLoss needs no workspace: this is 0 (the parameter is kept
/// for symmetry with softmaxCrossEntropy and may be null).
std::size_t vocabParallelLossWorkspaceSize(Index rows);
void vocabParallelLoss(const float *max, const float *sumExp,
                       const float *targetLogit, float *loss, Index rows,
                       void *workspace, cudaStream_t stream);
template <typename T>
void vocabParallelCrossEntropyGrad(const float *lossGrad, const T *logits,
                                   const std::int32_t *targets,
                                   const std::int32_t *shard, const float *max,
                                   const float *sumExp, T *result, Index rows,
                                   Index localVocab, int *badId,
                                   cudaStream_t stream, Index vocab = -1);

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_KERNELS_KERNELS_H
