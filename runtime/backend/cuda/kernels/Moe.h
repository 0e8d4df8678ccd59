//===- Moe.h - CUDA mixture-of-experts kernels ------------------*- C++ -*-===//
//
// The CUDA counterparts of the mixture-of-experts kernels of
// runtime/backend/cpu/Kernels.h (same semantics; the ops are documented in
// dialects/Xfmr/XfmrMoeOps.td). A header of its own beside Kernels.h
// because the expert GEMMs take a cuBLAS handle, which the other kernels do
// not need.
//
// Kernels.h's conventions hold: device pointers, host sizes checked before
// any launch (std::invalid_argument), T float or bf16 with fp32 arithmetic,
// results overwritten. The choices [batch, seq, topK] are gates (T),
// expert ids and slots (i32, slot -1 for a dropped choice); expert buffers
// are [batch, experts, capacity, channels] with zeros past counts[b, e].
// Expert ids outside [0, experts), slots outside [-1, capacity) and counts
// outside [0, capacity] are read on the device: they set *badId and the
// choice (or the group's rows) is treated as dropped (empty), so corrupt
// routing never reads or writes outside a buffer. The CPU kernels throw
// instead; the backend reports *badId after the step.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_KERNELS_MOE_H
#define PARTITION_RUNTIME_CUDA_KERNELS_MOE_H

#include "runtime/backend/CountedCells.h"
#include "runtime/backend/cuda/kernels/Kernels.h"
#include "runtime/program/MoeScoring.h"

#include <cublas_v2.h>

namespace partition::runtime::cuda {

struct MoeShape {
  Index batch = 0, seq = 0, channels = 0, experts = 0, topK = 0, capacity = 0;
};

/// The routing kernel's limits: a token's k gates live in registers, a
/// group's per-expert counters in 48 KiB of shared memory. The backend
/// refuses a program beyond them when it compiles it, before any step.
inline constexpr Index kMaxRouteTopK = 64;
inline constexpr Index kMaxRouteExperts = 48 * 1024 / Index(sizeof(int));

/// Top-k routing of every token (ties to the lower expert), gates from
/// `scoring`; `bias` [experts] (f32, may be null) shifts the selection
/// only. Each group's capacity is filled in GShard's priority: every
/// token's first choice in sequence order, then every second, ...
template <typename T>
void moeRoute(const T *logits, const float *bias, T *gates,
              std::int32_t *experts, std::int32_t *slots, std::int32_t *counts,
              const MoeShape &shape, MoeScoring scoring, cudaStream_t stream);
/// kept[e] += the rows expert e kept over every group of `counts`
/// [batch, experts] (a moe_route's): the metrics' expert load, summed on
/// the device so that a step reads it back once.
void moeRoutingTally(const std::int32_t *counts, unsigned long long *kept,
                     const MoeShape &shape, cudaStream_t stream);
/// The logits' gradient from the gates', the selection held fixed.
template <typename T>
void moeRouteGrad(const T *gatesGrad, const T *logits,
                  const std::int32_t *experts, T *logitsGrad,
                  const MoeShape &shape, MoeScoring scoring, int *badId,
                  cudaStream_t stream);

/// buffer rows = the tokens of their (expert, slot); every other row zero.
template <typename T>
void moeDispatch(const T *input, const std::int32_t *experts,
                 const std::int32_t *slots, T *buffer, const MoeShape &shape,
                 int *badId, cudaStream_t stream);
/// result[token] = the sum over its kept choices (in choice order) of
/// gate * row; gates null: weight 1, which is moe_dispatch_grad.
template <typename T>
void moeCombine(const T *buffer, const T *gates, const std::int32_t *experts,
                const std::int32_t *slots, T *result, const MoeShape &shape,
                int *badId, cudaStream_t stream);
/// bufferGrad rows = gate * resultGrad[token] (zero where no choice sits);
/// gatesGrad = <resultGrad[token], row>, 0 for a dropped choice.
template <typename T>
void moeCombineGrad(const T *resultGrad, const T *buffer, const T *gates,
                    const std::int32_t *experts, const std::int32_t *slots,
                    T *bufferGrad, T *gatesGrad, const MoeShape &shape,
                    int *badId, cudaStream_t stream);

/// *sum += *loss * weight (f32 loss, double sum; the metrics' router
/// losses, weighted by the groups the loss is a mean over).
void moeAuxLossTally(const float *loss, double *sum, double weight,
                     cudaStream_t stream);
/// Workspace of moeAuxLoss and moeAuxLossGrad (per-token statistics,
/// per-group fractions and partial sums).
std::size_t moeAuxLossWorkspaceSize(const MoeShape &shape);
/// *loss (f32) = auxCoef * mean over groups of E sum_i f_i P_i + zCoef *
/// mean over tokens of logsumexp(logits)^2, summed in double in a fixed
/// order (no atomics).
template <typename T>
void moeAuxLoss(const T *logits, const std::int32_t *experts, float *loss,
                const MoeShape &shape, MoeScoring scoring, float auxCoef,
                float zCoef, void *workspace, int *badId, cudaStream_t stream);
template <typename T>
void moeAuxLossGrad(const float *lossGrad, const T *logits,
                    const std::int32_t *experts, T *logitsGrad,
                    const MoeShape &shape, MoeScoring scoring, float auxCoef,
                    float zCoef, void *workspace, int *badId,
                    cudaStream_t stream);

/// The experts' linear layers: rows [batch, experts, capacity, *], weights
/// [experts, outFeatures, inFeatures], counts [batch, experts]. cuBLAS
/// strided-batched GEMMs over whole blocks of `capacity` rows on `handle`
/// (its stream is set to `stream`); `tf32` allows TF32 for fp32 storage.
struct ExpertGemmShape {
  Index batch = 0, experts = 0, capacity = 0, inFeatures = 0, outFeatures = 0;
};
/// result[b, e, c] = input[b, e, c] W_e^T for c < counts[b, e], else 0.
template <typename T>
void expertLinear(cublasHandle_t handle, const T *input, const T *weight,
                  const std::int32_t *counts, T *result,
                  const ExpertGemmShape &shape, bool tf32, int *badId,
                  cudaStream_t stream);
/// inputGrad[b, e, c] = grad[b, e, c] W_e for c < counts[b, e], else 0.
template <typename T>
void expertLinearGradInput(cublasHandle_t handle, const T *grad,
                           const T *weight, const std::int32_t *counts,
                           T *inputGrad, const ExpertGemmShape &shape,
                           bool tf32, int *badId, cudaStream_t stream);
/// weightGrad[e] = sum over b (in b order) of grad[b, e]^T input[b, e].
/// Whole blocks: exact only because rows past the counts are zero in
/// grad and input (see ExpertGemm.cu); counts are only validated.
template <typename T>
void expertLinearGradWeight(cublasHandle_t handle, const T *grad,
                            const T *input, const std::int32_t *counts,
                            T *weightGrad, const ExpertGemmShape &shape,
                            bool tf32, int *badId, cudaStream_t stream);

/// A counted all-to-all's buffer (runtime/backend/CountedCells.h).
using CountedCells = runtime::CountedCells;
/// packed = the first counts[c] rows of every cell, grouped by rank (ranks
/// in order, cells in order within a rank): what the NCCL sends move.
/// Elements of 2 or 4 bytes; counts (device) are clamped to [0, rows].
void packCountedRows(const void *input, const std::int32_t *counts,
                     void *packed, const CountedCells &cells,
                     int bytesPerElement, cudaStream_t stream);
/// The inverse into the output's cells, with the rows past each count
/// zeroed.
void unpackCountedRows(const void *packed, const std::int32_t *counts,
                       void *output, const CountedCells &cells,
                       int bytesPerElement, cudaStream_t stream);

/// DeepSeek-V3's auxiliary-loss-free balancing, as the CPU kernels
/// (runtime/backend/cpu/Kernels.h): load[e] = sum over b of counts[b, e];
/// newBias[e] = bias[e] + rate * sign(mean(load) - load[e]) (may be in
/// place).
void moeExpertLoad(const std::int32_t *counts, float *load, Index batch,
                   Index experts, cudaStream_t stream);
void moeBiasUpdate(const float *bias, const float *load, float *newBias,
                   Index experts, float rate, cudaStream_t stream);

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_KERNELS_MOE_H
