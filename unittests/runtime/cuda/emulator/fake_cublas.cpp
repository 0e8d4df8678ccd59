//===- fake_cublas.cpp - host stand-ins for the cuBLAS calls --------------===//
//
// The cuBLAS calls the expert GEMMs make (runtime/backend/cuda/kernels/
// ExpertGemm.cu), on host memory (emulation only): a plain column-major
// reference of cublasGemmStridedBatchedEx's documented contract, so the
// emulator checks what the kernels ask cuBLAS for (transposes, leading
// dimensions, strides, beta) against the CPU kernels. Leading dimensions
// too small for the stored operands, unsupported types and negative sizes
// are refused as cuBLAS refuses them (CUBLAS_STATUS_INVALID_VALUE /
// NOT_SUPPORTED), so a wrong layout fails rather than reads elsewhere.
// Sums are fp32 in k order, as a cuBLAS fp32-compute GEMM (in some order).
//
//===----------------------------------------------------------------------===//

#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>

namespace {

float loadAs(cudaDataType type, const void *base, long long index) {
  if (type == CUDA_R_32F)
    return static_cast<const float *>(base)[index];
  return __bfloat162float(static_cast<const __nv_bfloat16 *>(base)[index]);
}

void storeAs(cudaDataType type, void *base, long long index, float value) {
  if (type == CUDA_R_32F)
    static_cast<float *>(base)[index] = value;
  else
    static_cast<__nv_bfloat16 *>(base)[index] = __float2bfloat16_rn(value);
}

bool supported(cudaDataType type) {
  return type == CUDA_R_32F || type == CUDA_R_16BF;
}

} // namespace

extern "C" {

cublasStatus_t cublasCreate_v2(cublasHandle_t *handle) {
  static int dummy;
  *handle = reinterpret_cast<cublasHandle_t>(&dummy);
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasDestroy_v2(cublasHandle_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasSetStream_v2(cublasHandle_t, cudaStream_t) {
  return CUBLAS_STATUS_SUCCESS;
}

cublasStatus_t cublasGetStream_v2(cublasHandle_t, cudaStream_t *stream) {
  *stream = nullptr;
  return CUBLAS_STATUS_SUCCESS;
}

const char *cublasGetStatusString(cublasStatus_t status) {
  return status == CUBLAS_STATUS_SUCCESS ? "success" : "emulated failure";
}

cublasStatus_t cublasGemmStridedBatchedEx(
    cublasHandle_t, cublasOperation_t transa, cublasOperation_t transb, int m,
    int n, int k, const void *alpha, const void *A, cudaDataType Atype,
    int lda, long long strideA, const void *B, cudaDataType Btype, int ldb,
    long long strideB, const void *beta, void *C, cudaDataType Ctype, int ldc,
    long long strideC, int batchCount, cublasComputeType_t computeType,
    cublasGemmAlgo_t) {
  if (m < 0 || n < 0 || k < 0 || batchCount < 0)
    return CUBLAS_STATUS_INVALID_VALUE;
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // Stored A is m x k (k x m transposed), B k x n (n x k), C m x n.
  if (lda < std::max(1, ta ? k : m) || ldb < std::max(1, tb ? n : k) ||
      ldc < std::max(1, m))
    return CUBLAS_STATUS_INVALID_VALUE;
  if (!supported(Atype) || Atype != Btype || !supported(Ctype) ||
      (computeType != CUBLAS_COMPUTE_32F &&
       computeType != CUBLAS_COMPUTE_32F_FAST_TF32))
    return CUBLAS_STATUS_NOT_SUPPORTED;
  const float a = *static_cast<const float *>(alpha);
  const float b = *static_cast<const float *>(beta);
  for (int batch = 0; batch < batchCount; ++batch) {
    const long long offA = batch * strideA, offB = batch * strideB,
                    offC = batch * strideC;
    for (int j = 0; j < n; ++j)
      for (int i = 0; i < m; ++i) {
        float sum = 0.0f;
        for (int p = 0; p < k; ++p) {
          const long long ia = ta ? p + (long long)i * lda
                                  : i + (long long)p * lda;
          const long long ib = tb ? j + (long long)p * ldb
                                  : p + (long long)j * ldb;
          sum += loadAs(Atype, A, offA + ia) * loadAs(Btype, B, offB + ib);
        }
        const long long ic = offC + i + (long long)j * ldc;
        // beta = 0: C is not read (it may hold NaNs), as in cuBLAS.
        const float value =
            b == 0.0f ? a * sum : a * sum + b * loadAs(Ctype, C, ic);
        storeAs(Ctype, C, ic, value);
      }
  }
  return CUBLAS_STATUS_SUCCESS;
}

} // extern "C"
