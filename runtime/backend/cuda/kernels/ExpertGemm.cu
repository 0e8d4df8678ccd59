//===- ExpertGemm.cu - the experts' linear layers on cuBLAS ---------------===//
//
// Grouped GEMMs over the (group, expert) blocks of an expert buffer
// [B, E, C, *]: one cublasGemmStridedBatchedEx per group b over its E
// experts (a constant stride between the experts' blocks and weights), at
// the full capacity C rather than each block's counts[b, e] rows.
//
// Why whole blocks are exact: every producer of an expert buffer leaves the
// rows past the counts zero (moe_dispatch and moe_combine_grad write zeros
// where no choice sits, expert_linear and its input gradient zero them
// below, and swiglu(0, 0) = 0 and its gradient at 0 is 0), so those rows
// add nothing to a product. expert_linear and its input gradient still
// rewrite their rows past the counts to zero after the GEMM (a small tail
// kernel), so their outputs keep the invariant whatever their inputs hold
// there; the weight gradient dW_e = sum_b dy[b,e]^T x[b,e] relies on it
// (its operands' rows past the counts only add zero products). Counts are
// validated (a bad one sets *badId and empties its block).
//
// The weight gradient sums over the groups in b order (beta = 1 after the
// first call): reproducible, and the CPU kernel's order. In bf16 each group
// rounds the running sum once (B roundings in all).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"
#include "runtime/backend/cuda/kernels/Moe.h"

#include <type_traits>

namespace partition::runtime::cuda {

using namespace detail;

namespace {

/// Rows of block (b, e) at or past counts[b, e] (all of them for a count
/// outside [0, C], which also sets *badId) become zero.
template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    zeroTailKernel(T *rows, const std::int32_t *counts, Index groups,
                   Index capacity, Index features, int *badId) {
  const Index size = groups * capacity * features;
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < size;
       i += Index(gridDim.x) * blockDim.x) {
    const Index row = i / features;
    const Index group = row / capacity, c = row % capacity;
    Index count = counts[group];
    if (count < 0 || count > capacity) {
      if (c == 0 && i % features == 0)
        flagBadId(badId);
      count = 0;
    }
    if (c >= count)
      store(rows + i, 0.0f);
  }
}

/// Sets *badId for a count outside [0, capacity] (the weight gradient does
/// not read the counts otherwise).
__global__ void __launch_bounds__(kFlatThreads)
    checkCountsKernel(const std::int32_t *counts, Index groups,
                      Index capacity, int *badId) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < groups;
       i += Index(gridDim.x) * blockDim.x)
    if (counts[i] < 0 || counts[i] > capacity)
      flagBadId(badId);
}

template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    zeroAllKernel(T *result, Index size) {
  for (Index i = blockIdx.x * Index(blockDim.x) + threadIdx.x; i < size;
       i += Index(gridDim.x) * blockDim.x)
    store(result + i, 0.0f);
}

template <typename T> cudaDataType_t dataType() {
  return std::is_same_v<T, float> ? CUDA_R_32F : CUDA_R_16BF;
}

template <typename T> cublasComputeType_t computeType(bool tf32) {
  return std::is_same_v<T, float> && tf32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                          : CUBLAS_COMPUTE_32F;
}

int gemmInt(const char *kernel, Index value) {
  if (value > Index(INT_MAX))
    fail(kernel, "GEMM size " + std::to_string(value) + " exceeds int");
  return int(value);
}

void checkGemm(const char *kernel, const ExpertGemmShape &g) {
  checkNonNegative(kernel, {g.batch, g.experts, g.capacity, g.inFeatures,
                            g.outFeatures});
  for (Index v : {g.experts, g.capacity, g.inFeatures, g.outFeatures})
    gemmInt(kernel, v);
}

void checkStatus(const char *kernel, const char *call, cublasStatus_t status) {
  if (status != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(kernel) + ": " + call + " failed: " +
                             cublasGetStatusString(status));
}

/// Puts `handle` on `stream` unless it is there already: cublasSetStream
/// resets the handle's workspace to cuBLAS's own pool, so the backend's
/// setting (its GEMM workspace) survives only if the stream never changes.
void onStream(const char *kernel, cublasHandle_t handle, cudaStream_t stream) {
  cudaStream_t current = nullptr;
  checkStatus(kernel, "cublasGetStream", cublasGetStream(handle, &current));
  if (current != stream)
    checkStatus(kernel, "cublasSetStream", cublasSetStream(handle, stream));
}

/// Column-major C_i = alpha op(A_i) op(B_i) + beta C_i for the E experts of
/// one group (i = 0..E-1, each operand at its own stride).
struct Batched {
  cublasOperation_t opA, opB;
  int m, n, k, lda, ldb, ldc;
  long long strideA, strideB, strideC;
};

template <typename T>
void batched(const char *kernel, cublasHandle_t handle, const Batched &p,
             const T *a, const T *b, T *c, float beta, int experts,
             bool tf32) {
  const float alpha = 1.0f;
  checkStatus(kernel, "cublasGemmStridedBatchedEx",
              cublasGemmStridedBatchedEx(
                  handle, p.opA, p.opB, p.m, p.n, p.k, &alpha, a,
                  dataType<T>(), p.lda, p.strideA, b, dataType<T>(), p.ldb,
                  p.strideB, &beta, c, dataType<T>(), p.ldc, p.strideC,
                  experts, computeType<T>(tf32), CUBLAS_GEMM_DEFAULT));
}

template <typename T>
void zeroTail(const char *kernel, T *rows, const std::int32_t *counts,
              const ExpertGemmShape &g, Index features, int *badId,
              cudaStream_t stream) {
  const Index size = g.batch * g.experts * g.capacity * features;
  if (size == 0)
    return;
  zeroTailKernel<T><<<flatBlocks(size), kFlatThreads, 0, stream>>>(
      rows, counts, g.batch * g.experts, g.capacity, features, badId);
  checkLaunch(kernel);
}

} // namespace

// Row-major blocks are column-major transposes (see CudaGemm.cpp):
//   y  = x W^T :  Y^T (N x C, ld N) = (W^T)^T X^T,  A = W (K x N, ld K, T)
//   dx = dy W  :  DX^T (K x C, ld K) = W^T DY^T,   A = W (K x N, ld K, N)
//   dW = dy^T x:  DW^T (K x N, ld K) = X^T DY,     B = DY^T (N x C, ld N, T)
/// Each group's expert blocks [C, inner] times its expert's weight, into
/// [C, outer]: transposed (forward: inner K, outer N) or as it is (input
/// gradient: inner N, outer K); the rows past the counts zeroed after.
template <typename T>
void rowsTimesWeight(const char *kernel, cublasHandle_t handle, const T *rows,
                     const T *weight, const std::int32_t *counts, T *result,
                     const ExpertGemmShape &g, bool transposeWeight,
                     bool tf32, int *badId, cudaStream_t stream) {
  checkGemm(kernel, g);
  const Index C = g.capacity, K = g.inFeatures, N = g.outFeatures,
              E = g.experts;
  const Index inner = transposeWeight ? K : N, outer = transposeWeight ? N : K;
  if (g.batch * E * C * outer == 0)
    return;
  if (inner > 0) {
    onStream(kernel, handle, stream);
    Batched p{transposeWeight ? CUBLAS_OP_T : CUBLAS_OP_N, CUBLAS_OP_N,
              int(outer), int(C), int(inner), int(K), int(inner), int(outer),
              N * K, C * inner, C * outer};
    for (Index b = 0; b < g.batch; ++b)
      batched<T>(kernel, handle, p, weight, rows + b * E * C * inner,
                 result + b * E * C * outer, 0.0f, int(E), tf32);
  } else {
    zeroAllKernel<T><<<flatBlocks(g.batch * E * C * outer), kFlatThreads, 0,
                       stream>>>(result, g.batch * E * C * outer);
    checkLaunch(kernel);
  }
  zeroTail(kernel, result, counts, g, outer, badId, stream);
}

template <typename T>
void expertLinear(cublasHandle_t handle, const T *input, const T *weight,
                  const std::int32_t *counts, T *result,
                  const ExpertGemmShape &g, bool tf32, int *badId,
                  cudaStream_t stream) {
  rowsTimesWeight("expert_linear", handle, input, weight, counts, result, g,
                  /*transposeWeight=*/true, tf32, badId, stream);
}

template <typename T>
void expertLinearGradInput(cublasHandle_t handle, const T *grad,
                           const T *weight, const std::int32_t *counts,
                           T *inputGrad, const ExpertGemmShape &g, bool tf32,
                           int *badId, cudaStream_t stream) {
  rowsTimesWeight("expert_linear_grad_input", handle, grad, weight, counts,
                  inputGrad, g, /*transposeWeight=*/false, tf32, badId,
                  stream);
}

template <typename T>
void expertLinearGradWeight(cublasHandle_t handle, const T *grad,
                            const T *input, const std::int32_t *counts,
                            T *weightGrad, const ExpertGemmShape &g,
                            bool tf32, int *badId, cudaStream_t stream) {
  const char *kernel = "expert_linear_grad_weight";
  checkGemm(kernel, g);
  const Index C = g.capacity, K = g.inFeatures, N = g.outFeatures,
              E = g.experts;
  if (g.batch * E > 0) {
    checkCountsKernel<<<flatBlocks(g.batch * E), kFlatThreads, 0, stream>>>(
        counts, g.batch * E, C, badId);
    checkLaunch(kernel);
  }
  if (E * N * K == 0)
    return;
  if (g.batch == 0 || C == 0) {
    zeroAllKernel<T><<<flatBlocks(E * N * K), kFlatThreads, 0, stream>>>(
        weightGrad, E * N * K);
    checkLaunch(kernel);
    return;
  }
  onStream(kernel, handle, stream);
  Batched p{CUBLAS_OP_N, CUBLAS_OP_T, int(K), int(N), int(C),
            int(K), int(N), int(K), C * K, C * N, N * K};
  for (Index b = 0; b < g.batch; ++b)
    batched<T>(kernel, handle, p, input + b * E * C * K, grad + b * E * C * N,
               weightGrad, b == 0 ? 0.0f : 1.0f, int(E), tf32);
}

#define PARTITION_EXPERT_GEMM(T)                                               \
  template void expertLinear<T>(cublasHandle_t, const T *, const T *,          \
                                const std::int32_t *, T *,                     \
                                const ExpertGemmShape &, bool, int *,          \
                                cudaStream_t);                                 \
  template void expertLinearGradInput<T>(cublasHandle_t, const T *, const T *, \
                                         const std::int32_t *, T *,            \
                                         const ExpertGemmShape &, bool, int *, \
                                         cudaStream_t);                        \
  template void expertLinearGradWeight<T>(                                     \
      cublasHandle_t, const T *, const T *, const std::int32_t *, T *,         \
      const ExpertGemmShape &, bool, int *, cudaStream_t);
PARTITION_EXPERT_GEMM(float)
PARTITION_EXPERT_GEMM(bf16)
#undef PARTITION_EXPERT_GEMM

} // namespace partition::runtime::cuda
