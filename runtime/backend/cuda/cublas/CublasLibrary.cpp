//===- CublasLibrary.cpp - cuBLAS and cuBLASLt, loaded on first use -------===//
//
// Why by hand: ELF has no lazily loaded dependency (a linked library's
// initialisers run at start-up whether it is used or not), and cuBLASLt's
// take 70% of a CPU rank's start-up (perf of `partition-run --help`: 95 of
// 135 ms, page faults in its static constructors). The backend is chosen at
// run time, so the library is loaded then: each entry point below has the
// signature of cublas_v2.h / cublasLt.h, resolves the real one with dlsym
// on its first call, and forwards. Only the entry points the CUDA backend
// and its kernels call are here: a new call elsewhere fails to link until
// it is added (FORWARD below), never at run time.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/cublas/CublasLibrary.h"

#include <cublasLt.h>
#include <cublas_v2.h>
#include <dlfcn.h>

#include <mutex>

namespace partition::runtime::cuda {
namespace {

struct Libraries {
  void *blas = nullptr;
  void *lt = nullptr;
  std::string error;
};

/// dlopen by soname (LD_LIBRARY_PATH, the binary's run path, the loader's
/// cache), then from the toolkit the build found.
void *open(const char *soname, std::string &error) {
  if (void *handle = dlopen(soname, RTLD_NOW | RTLD_GLOBAL))
    return handle;
  std::string first = dlerror();
  std::string inToolkit = std::string(PARTITION_CUBLAS_DIR) + "/" + soname;
  if (void *handle = dlopen(inToolkit.c_str(), RTLD_NOW | RTLD_GLOBAL))
    return handle;
  error = std::string("cannot load ") + soname + " (" + first + "; nor " +
          inToolkit + "): install cuBLAS (the CUDA toolkit's libcublas) or "
          "put its directory on LD_LIBRARY_PATH";
  return nullptr;
}

Libraries &libraries() {
  static Libraries loaded;
  static std::once_flag once;
  std::call_once(once, [] {
    // cuBLASLt first: libcublas needs it.
    loaded.lt = open(PARTITION_CUBLASLT_SONAME, loaded.error);
    if (loaded.lt)
      loaded.blas = open(PARTITION_CUBLAS_SONAME, loaded.error);
  });
  return loaded;
}

template <typename Function>
Function resolve(bool inLt, const char *name) {
  Libraries &libs = libraries();
  void *handle = inLt ? libs.lt : libs.blas;
  return handle ? reinterpret_cast<Function>(dlsym(handle, name)) : nullptr;
}

} // namespace

const std::string &loadCublas() { return libraries().error; }

} // namespace partition::runtime::cuda

using partition::runtime::cuda::resolve;

// The real NAME from cuBLAS (IN_LT false) or cuBLASLt (true), resolved once;
// CUBLAS_STATUS_NOT_INITIALIZED where the library did not load (the backend
// asks loadCublas() first and reports why).
#define FORWARD(IN_LT, NAME, PARAMS, ARGS)                                     \
  extern "C" cublasStatus_t NAME PARAMS {                                      \
    using Real = cublasStatus_t(*) PARAMS;                                     \
    static const Real real = resolve<Real>(IN_LT, #NAME);                      \
    return real ? real ARGS : CUBLAS_STATUS_NOT_INITIALIZED;                   \
  }

FORWARD(false, cublasCreate_v2, (cublasHandle_t * handle), (handle))
FORWARD(false, cublasDestroy_v2, (cublasHandle_t handle), (handle))
FORWARD(false, cublasSetStream_v2,
        (cublasHandle_t handle, cudaStream_t stream), (handle, stream))
FORWARD(false, cublasGetStream_v2,
        (cublasHandle_t handle, cudaStream_t *stream), (handle, stream))
FORWARD(false, cublasSetWorkspace_v2,
        (cublasHandle_t handle, void *workspace, size_t bytes),
        (handle, workspace, bytes))
FORWARD(false, cublasGemmStridedBatchedEx,
        (cublasHandle_t handle, cublasOperation_t transa,
         cublasOperation_t transb, int m, int n, int k, const void *alpha,
         const void *A, cudaDataType Atype, int lda, long long int strideA,
         const void *B, cudaDataType Btype, int ldb, long long int strideB,
         const void *beta, void *C, cudaDataType Ctype, int ldc,
         long long int strideC, int batchCount,
         cublasComputeType_t computeType, cublasGemmAlgo_t algo),
        (handle, transa, transb, m, n, k, alpha, A, Atype, lda, strideA, B,
         Btype, ldb, strideB, beta, C, Ctype, ldc, strideC, batchCount,
         computeType, algo))
FORWARD(true, cublasLtCreate, (cublasLtHandle_t * handle), (handle))
FORWARD(true, cublasLtDestroy, (cublasLtHandle_t handle), (handle))
FORWARD(true, cublasLtMatmulDescCreate,
        (cublasLtMatmulDesc_t * desc, cublasComputeType_t computeType,
         cudaDataType_t scaleType),
        (desc, computeType, scaleType))
FORWARD(true, cublasLtMatmulDescDestroy, (cublasLtMatmulDesc_t desc), (desc))
FORWARD(true, cublasLtMatmulDescSetAttribute,
        (cublasLtMatmulDesc_t desc, cublasLtMatmulDescAttributes_t attr,
         const void *buf, size_t size),
        (desc, attr, buf, size))
FORWARD(true, cublasLtMatrixLayoutCreate,
        (cublasLtMatrixLayout_t * layout, cudaDataType type, uint64_t rows,
         uint64_t cols, int64_t ld),
        (layout, type, rows, cols, ld))
FORWARD(true, cublasLtMatrixLayoutDestroy, (cublasLtMatrixLayout_t layout),
        (layout))
FORWARD(true, cublasLtMatmulPreferenceCreate,
        (cublasLtMatmulPreference_t * pref), (pref))
FORWARD(true, cublasLtMatmulPreferenceDestroy,
        (cublasLtMatmulPreference_t pref), (pref))
FORWARD(true, cublasLtMatmulPreferenceSetAttribute,
        (cublasLtMatmulPreference_t pref,
         cublasLtMatmulPreferenceAttributes_t attr, const void *buf,
         size_t size),
        (pref, attr, buf, size))
FORWARD(true, cublasLtMatmulAlgoGetHeuristic,
        (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
         cublasLtMatrixLayout_t a, cublasLtMatrixLayout_t b,
         cublasLtMatrixLayout_t c, cublasLtMatrixLayout_t d,
         cublasLtMatmulPreference_t pref, int requested,
         cublasLtMatmulHeuristicResult_t results[], int *returned),
        (handle, desc, a, b, c, d, pref, requested, results, returned))
FORWARD(true, cublasLtMatmul,
        (cublasLtHandle_t handle, cublasLtMatmulDesc_t desc,
         const void *alpha, const void *A, cublasLtMatrixLayout_t Adesc,
         const void *B, cublasLtMatrixLayout_t Bdesc, const void *beta,
         const void *C, cublasLtMatrixLayout_t Cdesc, void *D,
         cublasLtMatrixLayout_t Ddesc, const cublasLtMatmulAlgo_t *algo,
         void *workspace, size_t workspaceSize, cudaStream_t stream),
        (handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc,
         algo, workspace, workspaceSize, stream))

#undef FORWARD

// The status strings: the library's where it loaded, else a fixed text
// (the error itself is loadCublas()'s).
extern "C" const char *cublasGetStatusString(cublasStatus_t status) {
  static const auto real = resolve<decltype(&cublasGetStatusString)>(
      false, "cublasGetStatusString");
  return real ? real(status) : "cuBLAS is not loaded";
}

extern "C" const char *cublasLtGetStatusString(cublasStatus_t status) {
  static const auto real = resolve<decltype(&cublasLtGetStatusString)>(
      true, "cublasLtGetStatusString");
  return real ? real(status) : "cuBLASLt is not loaded";
}
