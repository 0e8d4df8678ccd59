//===- CudaGemm.cpp - the linear layers on cuBLASLt -----------------------===//
//
// One cuBLASLt plan (descriptors and the heuristic's algorithm) per distinct
// GEMM shape, and the five linear kernels bound to them: the row-major
// products of the program expressed as column-major cuBLASLt calls.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/CudaBackendImpl.h"

#include <algorithm>

namespace partition::runtime::cudabackend {

GemmPlan *CudaBackend::planGemm(const GemmShape &shape,
                                const std::string &where) {
  auto found = gemmPlans.find(shape.key());
  if (found != gemmPlans.end())
    return found->second.get();
  auto plan = std::make_unique<GemmPlan>();
  cudaDataType_t type =
      shape.dtype == DType::BF16 ? CUDA_R_16BF : CUDA_R_32F;
  cublasComputeType_t computeType =
      tf32 && shape.dtype == DType::F32 ? CUBLAS_COMPUTE_32F_FAST_TF32
                                        : CUBLAS_COMPUTE_32F;
  checkCublas(cublasLtMatmulDescCreate(&plan->desc, computeType, CUDA_R_32F),
              "cublasLtMatmulDescCreate", where);
  cublasOperation_t opA = shape.transA ? CUBLAS_OP_T : CUBLAS_OP_N;
  cublasOperation_t opB = shape.transB ? CUBLAS_OP_T : CUBLAS_OP_N;
  checkCublas(cublasLtMatmulDescSetAttribute(plan->desc,
                                             CUBLASLT_MATMUL_DESC_TRANSA, &opA,
                                             sizeof(opA)),
              "cublasLtMatmulDescSetAttribute", where);
  checkCublas(cublasLtMatmulDescSetAttribute(plan->desc,
                                             CUBLASLT_MATMUL_DESC_TRANSB, &opB,
                                             sizeof(opB)),
              "cublasLtMatmulDescSetAttribute", where);
  // Stored shapes (column-major): A is m x k, or k x m when transposed.
  uint64_t aRows = shape.transA ? shape.k : shape.m;
  uint64_t aCols = shape.transA ? shape.m : shape.k;
  uint64_t bRows = shape.transB ? shape.n : shape.k;
  uint64_t bCols = shape.transB ? shape.k : shape.n;
  checkCublas(cublasLtMatrixLayoutCreate(&plan->a, type, aRows, aCols,
                                         shape.lda),
              "cublasLtMatrixLayoutCreate", where);
  checkCublas(cublasLtMatrixLayoutCreate(&plan->b, type, bRows, bCols,
                                         shape.ldb),
              "cublasLtMatrixLayoutCreate", where);
  checkCublas(cublasLtMatrixLayoutCreate(&plan->c, type, shape.m, shape.n,
                                         shape.ldc),
              "cublasLtMatrixLayoutCreate", where);

  cublasLtMatmulPreference_t preference = nullptr;
  checkCublas(cublasLtMatmulPreferenceCreate(&preference),
              "cublasLtMatmulPreferenceCreate", where);
  uint64_t workspaceLimit = gemmWorkspaceSize;
  cublasLtMatmulPreferenceSetAttribute(
      preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspaceLimit,
      sizeof(workspaceLimit));
  // The arena's buffers are 64-byte aligned, not the 256 bytes cuBLASLt
  // assumes by default: say what they are.
  uint32_t alignment = shape.alignment;
  for (auto attribute : {CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES,
                         CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES})
    cublasLtMatmulPreferenceSetAttribute(preference, attribute, &alignment,
                                         sizeof(alignment));

  auto heuristic = [&]() {
    cublasLtMatmulHeuristicResult_t result{};
    int count = 0;
    cublasStatus_t status = cublasLtMatmulAlgoGetHeuristic(
        lt, plan->desc, plan->a, plan->b, plan->c, plan->c, preference, 1,
        &result, &count);
    if (status == CUBLAS_STATUS_SUCCESS && count > 0 &&
        result.state == CUBLAS_STATUS_SUCCESS) {
      plan->algo = result.algo;
      return true;
    }
    return false;
  };
  if (shape.bias) {
    // The bias has D's type (the default of BIAS_DATA_TYPE).
    cublasLtEpilogue_t epilogue = CUBLASLT_EPILOGUE_BIAS;
    cublasLtMatmulDescSetAttribute(plan->desc, CUBLASLT_MATMUL_DESC_EPILOGUE,
                                   &epilogue, sizeof(epilogue));
    plan->biasEpilogue = plan->haveAlgo = heuristic();
    if (!plan->biasEpilogue) {
      // No algorithm with the epilogue: plain GEMM, then addBias.
      epilogue = CUBLASLT_EPILOGUE_DEFAULT;
      cublasLtMatmulDescSetAttribute(plan->desc,
                                     CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue,
                                     sizeof(epilogue));
    }
  }
  if (!plan->haveAlgo)
    plan->haveAlgo = heuristic();
  cublasLtMatmulPreferenceDestroy(preference);
  if (!plan->haveAlgo)
    throw ProgramError(where + ": cuBLASLt has no algorithm for the GEMM m=" +
                       std::to_string(shape.m) + " n=" +
                       std::to_string(shape.n) + " k=" +
                       std::to_string(shape.k) + " (" +
                       dtypeName(shape.dtype) + ", alignment " +
                       std::to_string(shape.alignment) + " bytes)");
  GemmPlan *result = plan.get();
  gemmPlans.emplace(shape.key(), std::move(plan));
  return result;
}

void CudaBackend::gemm(const GemmPlan &plan, const void *a, const void *b,
                       void *c, const void *bias, const std::string &where) {
  if (plan.biasEpilogue)
    checkCublas(cublasLtMatmulDescSetAttribute(
                    plan.desc, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias,
                    sizeof(bias)),
                "cublasLtMatmulDescSetAttribute", where);
  const float alpha = 1.0f, beta = 0.0f;
  checkCublas(cublasLtMatmul(lt, plan.desc, &alpha, a, plan.a, b, plan.b,
                             &beta, c, plan.c, c, plan.c, &plan.algo,
                             gemmWorkspace, gemmWorkspaceSize, compute),
              "cublasLtMatmul", where);
}

std::function<void()> CudaBackend::compileLinear(const KernelArgs &a,
                                                 const std::string &where) {
  // Row-major X[M,K], W[N,K], Y[M,N] are column-major X^T (K x M, ld K),
  // W^T (K x N, ld K), Y^T (N x M, ld N); cuBLASLt computes C = op(A) op(B)
  // in column-major terms:
  //   y  = x w^T  :  Y^T  (N x M) = (W^T)^T X^T   A = W^T (T), B = X^T (N)
  //   dx = dy w   :  DX^T (K x M) = W^T DY^T      A = W^T (N), B = DY^T (N)
  //   dw = dy^T x :  DW^T (K x N) = X^T DY        A = X^T (N), B = DY^T (T)
  std::vector<uint8_t *> p;
  for (const BufferInfo *buffer : a.buffers)
    p.push_back(arena + buffer->offset);
  int64_t M = a.rows, K = a.inFeatures, N = a.outFeatures;
  GemmShape shape;
  shape.dtype = a.floatType;
  uint32_t alignment = 256;
  for (uint8_t *pointer : p)
    alignment = std::min(alignment, alignmentOf(pointer));
  shape.alignment = alignment;
  cudaStream_t s = compute;
  void *ws = workspace;
  bool bf = a.floatType == DType::BF16;
  // Only the linear kernels reach here (compileKernel's switch dispatches).
  if (a.kernel == KernelId::Linear || a.kernel == KernelId::LinearBias) {
    bool bias = a.kernel == KernelId::LinearBias;
    shape.transA = true;
    shape.m = N, shape.n = M, shape.k = K;
    shape.lda = K, shape.ldb = K, shape.ldc = N;
    shape.bias = bias;
    GemmPlan *plan = planGemm(shape, where);
    uint8_t *x = p[0], *w = p[1], *b = bias ? p[2] : nullptr,
            *y = p[bias ? 3 : 2];
    return [=] {
      gemm(*plan, w, x, y, b, where);
      if (bias && !plan->biasEpilogue) {
        if (bf)
          cuda::addBias<bf16>(reinterpret_cast<bf16 *>(y),
                              reinterpret_cast<const bf16 *>(b), M, N, s);
        else
          cuda::addBias<float>(reinterpret_cast<float *>(y),
                               reinterpret_cast<const float *>(b), M, N, s);
      }
    };
  }
  if (a.kernel == KernelId::LinearGradInput) {
    shape.m = K, shape.n = M, shape.k = N;
    shape.lda = K, shape.ldb = N, shape.ldc = K;
    GemmPlan *plan = planGemm(shape, where);
    uint8_t *dy = p[0], *w = p[1], *dx = p[2];
    return [=] { gemm(*plan, w, dy, dx, nullptr, where); };
  }
  if (a.kernel == KernelId::LinearGradWeight ||
      a.kernel == KernelId::LinearGradWeightBias) {
    bool bias = a.kernel == KernelId::LinearGradWeightBias;
    shape.transB = true;
    shape.m = K, shape.n = N, shape.k = M;
    shape.lda = K, shape.ldb = N, shape.ldc = K;
    GemmPlan *plan = planGemm(shape, where);
    uint8_t *dy = p[0], *x = p[1], *dw = p[2], *db = bias ? p[3] : nullptr;
    return [=] {
      gemm(*plan, x, dy, dw, nullptr, where);
      if (!bias)
        return;
      // Deterministic column sums (cuBLASLt's BGRADB epilogue is not).
      if (bf)
        cuda::biasGrad<bf16>(reinterpret_cast<const bf16 *>(dy),
                             reinterpret_cast<bf16 *>(db), M, N, ws, s);
      else
        cuda::biasGrad<float>(reinterpret_cast<const float *>(dy),
                              reinterpret_cast<float *>(db), M, N, ws, s);
    };
  }
  throw ProgramError(where + ": not a linear kernel");
}

} // namespace partition::runtime::cudabackend
