//===- Kernels.h - fp32 CPU kernels of the xfmr ops -------------*- C++ -*-===//
//
// One plain function per xfmr op (dialects/Xfmr/XfmrOps.td gives the exact
// semantics), on raw row-major fp32 buffers. No MLIR here: the runtime calls
// these from its instruction loop.
//
// Conventions
// - Tensor operands are pointers, attributes are values. Rank-0 tensors
//   (loss_grad, step, lr, the loss) are pointers too, so the executor passes
//   every buffer the same way.
// - Leading dimensions are flattened: `rows` = the product of all but the last
//   dimension (B*T for activations).
// - Results are overwritten, never accumulated into (embeddingGrad's
//   `accumulate` is the one opt-in exception). A result never aliases an
//   operand, except where a function says so (add, scale, positionEmbedding,
//   the elementwise activations and adamw allow exact, same-index aliasing).
// - Work is parallelised with OpenMP over the calling thread's team
//   (omp_get_max_threads()); matrix products go through OpenBLAS
//   cblas_sgemm. Every sum runs in a fixed order that does not depend on
//   the thread count (no atomics, no omp reductions across threads), so
//   results are bitwise reproducible, whatever OMP_NUM_THREADS is, as far
//   as OpenBLAS's own sgemm is.
// - The library assumes one calling thread per process (the runtime's
//   executor): attention temporarily sets OpenBLAS's thread count to 1 around
//   its parallel region when OpenBLAS is the pthreads build.
// - Invalid sizes or token ids throw std::invalid_argument before any output
//   is written.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CPU_KERNELS_H
#define PARTITION_RUNTIME_CPU_KERNELS_H

#include "runtime/program/MoeScoring.h"
#include "runtime/program/Rope.h"

#include <cstddef>
#include <cstdint>

namespace partition::runtime::cpu {

using Index = std::int64_t;

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

/// result[r, :] = table[tokens[r], :] for r < rows; table is [vocab, channels].
void embedding(const std::int32_t *tokens, const float *table, float *result,
               Index rows, Index vocab, Index channels);

/// result[v, :] = sum of grad[r, :] over r with tokens[r] = v; result is
/// [vocab, channels] and is zeroed first unless `accumulate` (then the sums
/// are added to it, which saves a pass for a tied LM head). Deterministic:
/// each thread owns a slice of the channels and visits rows in order.
void embeddingGrad(const float *grad, const std::int32_t *tokens,
                   float *result, Index rows, Index vocab, Index channels,
                   bool accumulate = false);

/// result[b, t, :] = input[b, t, :] + table[t, :]; result may alias input.
void positionEmbedding(const float *input, const float *table, float *result,
                       Index batch, Index seq, Index channels);

/// result[t, :] = sum over b of grad[b, t, :] for t < seq, zero for
/// seq <= t < positions; result is [positions, channels].
void positionEmbeddingGrad(const float *grad, float *result, Index batch,
                           Index seq, Index positions, Index channels);

/// positionEmbedding at explicit positions (a permuted sequence):
/// result[b, t, :] = input[b, t, :] + table[positions[t], :]; every
/// position must lie in [0, tablePositions) (else it throws).
void positionEmbeddingAt(const float *input, const float *table,
                         const std::int32_t *positions, float *result,
                         Index batch, Index seq, Index tablePositions,
                         Index channels);

/// result[p, :] = sum over b and over the t with positions[t] = p of
/// grad[b, t, :]; zero for the rows no t names. result is
/// [tablePositions, channels].
void positionEmbeddingAtGrad(const float *grad, const std::int32_t *positions,
                             float *result, Index batch, Index seq,
                             Index tablePositions, Index channels);

/// The original position of each element of a sequence of `length` in the
/// layout order of `chunks` chunks: 0..length-1 for one chunk; for an even
/// number, chunk order 0, chunks-1, 1, chunks-2, ... (zigzag).
void sequencePositions(std::int32_t *positions, Index length, Index chunks);

//===----------------------------------------------------------------------===//
// Normalisation (over the last dimension, `channels`)
//===----------------------------------------------------------------------===//

void layerNorm(const float *input, const float *gamma, const float *beta,
               float *result, Index rows, Index channels, float epsilon);

/// Recomputes mean and (biased) variance; writes all three gradients.
void layerNormGrad(const float *grad, const float *input, const float *gamma,
                   float *inputGrad, float *gammaGrad, float *betaGrad,
                   Index rows, Index channels, float epsilon);

void rmsNorm(const float *input, const float *gamma, float *result, Index rows,
             Index channels, float epsilon);

void rmsNormGrad(const float *grad, const float *input, const float *gamma,
                 float *inputGrad, float *gammaGrad, Index rows,
                 Index channels, float epsilon);

//===----------------------------------------------------------------------===//
// Linear layers: input [rows, in], weight [out, in] (PyTorch layout)
//===----------------------------------------------------------------------===//

/// result = input weight^T + bias; `bias` may be null.
void linear(const float *input, const float *weight, const float *bias,
            float *result, Index rows, Index inFeatures, Index outFeatures);

/// inputGrad [rows, in] = grad [rows, out] * weight [out, in].
void linearGradInput(const float *grad, const float *weight, float *inputGrad,
                     Index rows, Index inFeatures, Index outFeatures);

/// weightGrad [out, in] = grad^T input; biasGrad [out] = column sums of grad
/// when `biasGrad` is not null.
void linearGradWeight(const float *grad, const float *input, float *weightGrad,
                      float *biasGrad, Index rows, Index inFeatures,
                      Index outFeatures);

/// biasGrad [out] = column sums of grad [rows, out], both bf16: summed in
/// fp32 and rounded once, bit for bit what linearGradWeight's sums give on
/// widened copies (the bias gradient beside a bf16 GEMM, Bf16Gemm.h).
void linearBiasGradBFloat16(const std::uint16_t *grad, std::uint16_t *biasGrad,
                            Index rows, Index outFeatures);

//===----------------------------------------------------------------------===//
// Activations and elementwise ops (`size` elements; results may alias inputs)
//===----------------------------------------------------------------------===//

/// 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), the GPT-2 GELU.
void gelu(const float *input, float *result, Index size);
void geluGrad(const float *grad, const float *input, float *result,
              Index size);

/// gate * sigmoid(gate) * up.
void swiglu(const float *gate, const float *up, float *result, Index size);
void swigluGrad(const float *grad, const float *gate, const float *up,
                float *gateGrad, float *upGrad, Index size);

void add(const float *lhs, const float *rhs, float *result, Index size);
void scale(const float *input, float factor, float *result, Index size);

/// gelu, geluGrad and add on bf16 elements (std::uint16_t), computed in fp32
/// and rounded once: bit for bit the fp32 kernels on widened copies, rounded.
void geluBFloat16(const std::uint16_t *input, std::uint16_t *result,
                  Index size);
void geluGradBFloat16(const std::uint16_t *grad, const std::uint16_t *input,
                      std::uint16_t *result, Index size);
void addBFloat16(const std::uint16_t *lhs, const std::uint16_t *rhs,
                 std::uint16_t *result, Index size);

//===----------------------------------------------------------------------===//
// Attention
//===----------------------------------------------------------------------===//

/// Shapes and attributes of xfmr.attention / xfmr.attention_grad: query and
/// result are [batch, seq, numHeads * headDim], key and value are
/// [batch, seq, numKvHeads * headDim].
struct AttentionConfig {
  Index batch = 0;
  Index seq = 0;
  Index numHeads = 0;
  Index numKvHeads = 0;
  Index headDim = 0;
  bool causal = true;
  /// RoPE base; 0 (the op's absent rope_theta) means no rotary embedding.
  float ropeTheta = 0.0f;
  /// Its frequencies' scaling (linear, llama3, yarn; none by default).
  RopeScaling ropeScaling = {};
  /// Sliding window W (causal only): query t sees keys s with
  /// t - W < s <= t. 0 means none.
  Index window = 0;
};

/// Bytes of scratch memory that attention / attentionGrad want for the
/// current omp_get_max_threads(). Pass a buffer of (at least) that size, or
/// null to let the kernel use a buffer owned by the calling thread that grows
/// once and is reused (it is never freed before the thread exits).
std::size_t attentionWorkspaceSize(const AttentionConfig &config);
std::size_t attentionGradWorkspaceSize(const AttentionConfig &config);

/// With a caller workspace, the kernel uses as many threads as
/// `workspaceBytes` holds per-thread slices for (at least one, else it
/// throws); the buffer should be 64-byte aligned.
void attention(const float *query, const float *key, const float *value,
               float *result, const AttentionConfig &config,
               void *workspace = nullptr, std::size_t workspaceBytes = 0);

/// Gradients with respect to the un-rotated query and key (and the value).
void attentionGrad(const float *grad, const float *query, const float *key,
                   const float *value, float *queryGrad, float *keyGrad,
                   float *valueGrad, const AttentionConfig &config,
                   void *workspace = nullptr, std::size_t workspaceBytes = 0);

/// Attention with explicit positions: query t (of config.seq) is at
/// queryPositions[t], key s (of keySeq) at keyPositions[s]. When causal,
/// query t sees key s iff keyPositions[s] <= queryPositions[t] (and with a
/// window, keyPositions[s] > queryPositions[t] - window); RoPE rotates each
/// row at its position. Query and result are [batch, seq, H*D], key and
/// value [batch, keySeq, Hkv*D]. A query that sees no key gets zeros.
/// Positions must be non-negative.
void attentionPositions(const float *query, const float *key,
                        const float *value, const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, float *result,
                        Index keySeq, const AttentionConfig &config);

/// Its gradients with respect to the un-rotated query and key and the value.
void attentionPositionsGrad(const float *grad, const float *query,
                            const float *key, const float *value,
                            const std::int32_t *queryPositions,
                            const std::int32_t *keyPositions, float *queryGrad,
                            float *keyGrad, float *valueGrad, Index keySeq,
                            const AttentionConfig &config);

//===----------------------------------------------------------------------===//
// Ring attention (context parallelism; RingAttention.cpp)
//===----------------------------------------------------------------------===//

/// Attention of the queries [batch, config.seq, H*D] over one block of
/// `keySeq` keys and values [batch, keySeq, Hkv*D] at explicit positions:
/// query t sees key s iff !causal or keyPositions[s] <= queryPositions[t]
/// (and, with a window W, keyPositions[s] > queryPositions[t] - W); RoPE
/// rotates each row by its position. lse [batch, H, seq] is the log-sum-exp
/// of the visible scores; a query that sees no key gets out 0, lse -inf.
void attentionBlock(const float *query, const float *key, const float *value,
                    const std::int32_t *queryPositions,
                    const std::int32_t *keyPositions, float *out, float *lse,
                    const AttentionConfig &config, Index keySeq);

/// The exact combination of two partial attentions over disjoint key sets:
/// lse = logaddexp(lseA, lseB), out = outA exp(lseA - lse) + outB exp(lseB -
/// lse) per head (outs [batch, seq, heads * headDim], lses [batch, heads,
/// seq]); both -inf gives out 0, lse -inf.
void attentionMerge(const float *outA, const float *lseA, const float *outB,
                    const float *lseB, float *out, float *lse, Index batch,
                    Index seq, Index heads, Index headDim);

/// The backward of one key block given the final out and lse of the whole
/// attention: dq (this block's term of the sum over blocks), dk and dv (the
/// block's rows), with respect to the un-rotated query and key.
void attentionBlockGrad(const float *grad, const float *query,
                        const float *key, const float *value,
                        const std::int32_t *queryPositions,
                        const std::int32_t *keyPositions, const float *out,
                        const float *lse, float *queryGrad, float *keyGrad,
                        float *valueGrad, const AttentionConfig &config,
                        Index keySeq);

//===----------------------------------------------------------------------===//
// Loss: logits [rows, vocab], targets [rows]
//===----------------------------------------------------------------------===//

/// *loss = -mean over rows of log softmax(logits[r, :])[targets[r]].
void softmaxCrossEntropy(const float *logits, const std::int32_t *targets,
                         float *loss, Index rows, Index vocab);

/// result[r, :] = *lossGrad * (softmax(logits[r, :]) - onehot(targets[r]))
/// / rows.
void softmaxCrossEntropyGrad(const float *lossGrad, const float *logits,
                             const std::int32_t *targets, float *result,
                             Index rows, Index vocab);

/// The same on bf16 logits (and a bf16 gradient): each row is widened into
/// a per-thread buffer and computed as above, bit for bit the fp32 kernels
/// on widened copies (the gradient rounded once), without copying the
/// whole [rows, vocab] tensor.
void softmaxCrossEntropyBFloat16(const std::uint16_t *logits,
                                 const std::int32_t *targets, float *loss,
                                 Index rows, Index vocab);
void softmaxCrossEntropyGradBFloat16(const float *lossGrad,
                                     const std::uint16_t *logits,
                                     const std::int32_t *targets,
                                     std::uint16_t *result, Index rows,
                                     Index vocab);

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float epsilon = 1.0e-8f;
  float weightDecay = 0.0f;
};

/// One AdamW step; *step is the 1-based number of this update. The new_*
/// outputs may alias param / moment1 / moment2 (an in-place update).
void adamw(const float *param, const float *grad, const float *moment1,
           const float *moment2, const std::int32_t *step, const float *lr,
           float *newParam, float *newMoment1, float *newMoment2, Index size,
           const AdamWConfig &config);
/// adamw on block *block of `blocks` blocks of `size` elements of a flat
/// parameter (ZeRO's chunk, read where it lies); *block is checked.
void adamwBlock(const float *param, const std::int32_t *block, Index blocks,
                const float *grad, const float *moment1, const float *moment2,
                const std::int32_t *step, const float *lr, float *newParam,
                float *newMoment1, float *newMoment2, Index size,
                const AdamWConfig &config);

//===----------------------------------------------------------------------===//
// bf16 storage (runtime/backend/cpu/BFloat16.cpp): a bf16 is the upper 16 bits of an
// fp32, held as std::uint16_t
//===----------------------------------------------------------------------===//

/// result[i] = input[i] rounded to bf16, to nearest with ties to even; NaNs
/// stay NaN.
void roundToBFloat16(const float *input, std::uint16_t *result, Index size);
/// result[i] = input[i] as fp32 (exact).
void widenBFloat16(const std::uint16_t *input, float *result, Index size);

//===----------------------------------------------------------------------===//
// Blocks along one dimension: a tensor viewed as [outer, blocks * blockDim,
// inner] (runtime/backend/cpu/Blocks.cpp)
//===----------------------------------------------------------------------===//

/// result [outer, blockDim, inner] = block *index of input; throws
/// std::invalid_argument unless 0 <= *index < blocks.
void sliceBlock(const float *input, const std::int32_t *index, float *result,
                Index outer, Index blockDim, Index inner, Index blocks);
/// packed = the blocks of input one after the other, each contiguous.
void packBlocks(const float *input, float *packed, Index outer, Index blockDim,
                Index inner, Index blocks);
/// The inverse of packBlocks.
void unpackBlocks(const float *packed, float *result, Index outer,
                  Index blockDim, Index inner, Index blocks);

/// Flat buckets (ZeRO): a tensor of `size` elements of `elementBytes` bytes
/// takes columns [offset, offset + chunk) of a bucket [rows, columns],
/// chunk = ceil(size / rows); row r holds elements [r chunk, (r + 1) chunk),
/// zeros past the end. flatPack writes those columns, flatUnpack reads them.
void flatPack(const void *tensor, void *bucket, Index size, Index rows,
              Index columns, Index offset, Index elementBytes);
void flatUnpack(const void *bucket, void *tensor, Index size, Index rows,
                Index columns, Index offset, Index elementBytes);

//===----------------------------------------------------------------------===//
// Vocabulary parallelism (runtime/backend/cpu/VocabParallel.cpp): the local shard
// holds global ids [*shard * localVocab, (*shard + 1) * localVocab); tokens
// and targets are global ids (non-negative, else std::invalid_argument), and
// ids of other shards contribute zeros. Per-position results are [rows].
//===----------------------------------------------------------------------===//

/// result[r, :] = table[tokens[r] - begin, :] when local, else zeros.
void vocabParallelEmbedding(const std::int32_t *tokens, const float *table,
                            const std::int32_t *shard, float *result,
                            Index rows, Index localVocab, Index channels);
/// result [localVocab, channels] = the scatter-add of the rows of grad whose
/// token is local (zeros elsewhere); deterministic as embeddingGrad.
void vocabParallelEmbeddingGrad(const float *grad, const std::int32_t *tokens,
                                const std::int32_t *shard, float *result,
                                Index rows, Index localVocab, Index channels);
/// With a padded vocabulary (`shard` given and vocab >= 0), the max, sum_exp
/// and gradient kernels treat the local columns whose global id
/// *shard * localVocab + v is at or beyond `vocab` as absent: no term of the
/// statistics, a gradient of exactly zero.
///
/// result[r] = max of logits[r, :] (-inf when every column is padding).
void vocabParallelMax(const float *logits, float *result, Index rows,
                      Index localVocab, const std::int32_t *shard = nullptr,
                      Index vocab = -1);
/// result[r] = logits[r, targets[r] - begin] when local, else 0.
void vocabParallelTargetLogit(const float *logits, const std::int32_t *targets,
                              const std::int32_t *shard, float *result,
                              Index rows, Index localVocab);
/// result[r] = sum over the local columns of exp(logits[r, v] - max[r]).
void vocabParallelSumExp(const float *logits, const float *max, float *result,
                         Index rows, Index localVocab,
                         const std::int32_t *shard = nullptr,
                         Index vocab = -1);
/// *loss = mean over rows of log(sumExp[r]) + max[r] - targetLogit[r].
void vocabParallelLoss(const float *max, const float *sumExp,
                       const float *targetLogit, float *loss, Index rows);
/// result[r, v] = *lossGrad * (exp(logits[r, v] - max[r]) / sumExp[r]
/// - onehot(targets[r] - begin)[v]) / rows; 0 at padding columns (a target
/// at or beyond a padded `vocab` throws).
void vocabParallelCrossEntropyGrad(const float *lossGrad, const float *logits,
                                   const std::int32_t *targets,
                                   const std::int32_t *shard, const float *max,
                                   const float *sumExp, float *result,
                                   Index rows, Index localVocab,
                                   Index vocab = -1);

//===----------------------------------------------------------------------===//
// Mixture of experts (runtime/backend/cpu/Moe.cpp; the ops are in
// dialects/Xfmr/XfmrMoeOps.td). Each of the `batch` sequences is a token
// group; the choices are [batch, seq, topK] (gates, expert ids and slots
// i32, slot -1 for a choice dropped past the capacity); an expert buffer is
// [batch, experts, capacity, channels], its rows past counts[b, e] zero.
// Expert ids and slots out of range, and counts above the capacity, throw.
//===----------------------------------------------------------------------===//

struct MoeShape {
  Index batch = 0, seq = 0, channels = 0, experts = 0, topK = 0,
        capacity = 0;
};

/// Top-k routing of every token, gates from `scoring`; `bias` [experts]
/// (may be null) shifts the selection scores only. Fills each group's
/// capacity in GShard's priority (every first choice in sequence order,
/// then every second, ...).
void moeRoute(const float *logits, const float *bias, float *gates,
              std::int32_t *experts, std::int32_t *slots,
              std::int32_t *counts, const MoeShape &shape, MoeScoring scoring);
/// The logits' gradient from the gates', the selection held fixed.
void moeRouteGrad(const float *gatesGrad, const float *logits,
                  const std::int32_t *experts, float *logitsGrad,
                  const MoeShape &shape, MoeScoring scoring);
/// buffer rows = the tokens of their (expert, slot); the rest zero.
void moeDispatch(const float *input, const std::int32_t *experts,
                 const std::int32_t *slots, float *buffer,
                 const MoeShape &shape);
/// inputGrad[token] = the sum of its kept choices' rows of bufferGrad.
void moeDispatchGrad(const float *bufferGrad, const std::int32_t *experts,
                     const std::int32_t *slots, float *inputGrad,
                     const MoeShape &shape);
/// result[token] = sum over its kept choices of gate * row (gates null:
/// weight 1, which is moeDispatchGrad).
void moeCombine(const float *buffer, const float *gates,
                const std::int32_t *experts, const std::int32_t *slots,
                float *result, const MoeShape &shape);
/// bufferGrad rows = gate * resultGrad[token] (zero where no choice sits);
/// gatesGrad = <resultGrad[token], row>, 0 for a dropped choice.
void moeCombineGrad(const float *resultGrad, const float *buffer,
                    const float *gates, const std::int32_t *experts,
                    const std::int32_t *slots, float *bufferGrad,
                    float *gatesGrad, const MoeShape &shape);

/// The grouped GEMMs of the experts' linear layers: rows
/// [batch, experts, capacity, *], weights [experts, outFeatures,
/// inFeatures], counts [batch, experts].
struct ExpertGemmShape {
  Index batch = 0, experts = 0, capacity = 0, inFeatures = 0,
        outFeatures = 0;
};
/// result[b, e, c] = input[b, e, c] W_e^T for c < counts[b, e], else 0.
void expertLinear(const float *input, const float *weight,
                  const std::int32_t *counts, float *result,
                  const ExpertGemmShape &shape);
/// inputGrad[b, e, c] = grad[b, e, c] W_e for c < counts[b, e], else 0.
void expertLinearGradInput(const float *grad, const float *weight,
                           const std::int32_t *counts, float *inputGrad,
                           const ExpertGemmShape &shape);
/// weightGrad[e] = sum over b of grad[b, e, :n]^T input[b, e, :n],
/// n = counts[b, e] (summed in b order).
void expertLinearGradWeight(const float *grad, const float *input,
                            const std::int32_t *counts, float *weightGrad,
                            const ExpertGemmShape &shape);

/// *loss = auxCoef * mean over groups of E sum_i f_i P_i + zCoef * mean
/// over tokens of logsumexp(logits)^2 (f_i: the group's choices of expert
/// i over its tokens; P_i: the mean normalised score).
void moeAuxLoss(const float *logits, const std::int32_t *experts, float *loss,
                const MoeShape &shape, MoeScoring scoring, float auxCoef,
                float zCoef);
void moeAuxLossGrad(const float *lossGrad, const float *logits,
                    const std::int32_t *experts, float *logitsGrad,
                    const MoeShape &shape, MoeScoring scoring, float auxCoef,
                    float zCoef);

/// DeepSeek-V3's auxiliary-loss-free balancing (MoeBias.cpp): load[e] = the
/// sum over b of counts[b, e] (i32 [batch, experts]) ...
void moeExpertLoad(const std::int32_t *counts, float *load, Index batch,
                   Index experts);
/// ... and newBias[e] = bias[e] + rate * sign(mean(load) - load[e]) (may be
/// in place).
void moeBiasUpdate(const float *bias, const float *load, float *newBias,
                   Index experts, float rate);

} // namespace partition::runtime::cpu

#endif // PARTITION_RUNTIME_CPU_KERNELS_H
