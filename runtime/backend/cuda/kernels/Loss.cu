//===- Loss.cu - softmax cross-entropy and its gradient -------------------===//
//
// One block per row of logits: the row maximum, then the sum of
// exp(x - max), as block reductions in a fixed tree. The forward writes each
// row's loss, in double as on the CPU, to the workspace, and one block then
// adds them (each thread a fixed strided subset, then a fixed tree) and
// divides by the row count: reproducible bit for bit. A target outside
// [0, vocab) sets *badId; its row then adds 0 to the loss and gets a zero
// gradient.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace detail {

constexpr int kMeanThreads = 1024;

/// *result = (sum of the rows' terms) / rows, NaN for no rows; the term of
/// row r is rowLoss[r] when rowLoss is given, else
/// log(sumExp[r]) + max[r] - targetLogit[r], in double.
__global__ void __launch_bounds__(kMeanThreads)
    meanLossKernel(const double *rowLoss, const float *max, const float *sumExp,
                   const float *targetLogit, float *result, Index rows) {
  __shared__ ReduceScratch<double, 1> scratch;
  double total[1] = {0.0};
  for (Index r = threadIdx.x; r < rows; r += blockDim.x)
    total[0] +=
        rowLoss ? rowLoss[r]
                : log(static_cast<double>(sumExp[r])) + max[r] - targetLogit[r];
  blockReduce(total, scratch);
  if (threadIdx.x == 0)
    *result = rows == 0
                  ? NAN
                  : static_cast<float>(total[0] / static_cast<double>(rows));
}

void launchMeanLoss(const char *kernel, const double *rowLoss, const float *max,
                    const float *sumExp, const float *targetLogit,
                    float *result, Index rows, cudaStream_t stream) {
  meanLossKernel<<<1, kMeanThreads, 0, stream>>>(rowLoss, max, sumExp,
                                                 targetLogit, result, rows);
  checkLaunch(kernel);
}

} // namespace detail

namespace {

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    crossEntropyRowsKernel(const T *logits, const std::int32_t *targets,
                           double *rowLoss, Index vocab, bool packed,
                           int *badId) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index row = blockIdx.x;
  const T *x = logits + row * vocab;
  const float m = rowMax(x, vocab, packed, scratch);
  const float sum = rowSumExp(x, vocab, m, packed, scratch);
  if (threadIdx.x == 0) {
    const std::int32_t target = targets[row];
    if (target < 0 || Index(target) >= vocab) {
      flagBadId(badId);
      rowLoss[row] = 0.0;
    } else {
      // -log softmax[target] = log(sum exp(x - m)) + m - x[target].
      rowLoss[row] = log(static_cast<double>(sum)) + m - load(x + target);
    }
  }
}

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    crossEntropyGradKernel(const float *lossGrad, const T *logits,
                           const std::int32_t *targets, T *result, Index rows,
                           Index vocab, bool packed, int *badId) {
  __shared__ ReduceScratch<float, 1> scratch;
  const Index row = blockIdx.x;
  const T *x = logits + row * vocab;
  T *y = result + row * vocab;
  const std::int32_t target = targets[row];
  const bool valid = target >= 0 && Index(target) < vocab;
  const float factor = valid ? *lossGrad / static_cast<float>(rows) : 0.0f;
  if (!valid && threadIdx.x == 0)
    flagBadId(badId);
  const float m = rowMax(x, vocab, packed, scratch);
  const float sum = rowSumExp(x, vocab, m, packed, scratch);
  const float norm = factor / sum;
  auto gradient = [&](Index c, const float *v, float *out) {
    // Rounded product first, as the CPU's separate scaling pass.
    float g = __fmul_rn(expf(v[0] - m), norm);
    if (c == target)
      g -= factor;
    out[0] = valid ? g : 0.0f;
  };
  mapElements(PtrList<const T *, 1>{{x}}, PtrList<T *, 1>{{y}}, vocab, packed,
              threadIdx.x, blockDim.x, gradient);
}

} // namespace

std::size_t softmaxCrossEntropyWorkspaceSize(Index rows) {
  checkNonNegative("softmax_cross_entropy", {rows});
  return std::size_t(rows) * sizeof(double);
}

template <typename T>
void softmaxCrossEntropy(const T *logits, const std::int32_t *targets,
                         float *loss, Index rows, Index vocab, void *workspace,
                         int *badId, cudaStream_t stream) {
  const char *kernel = "softmax_cross_entropy";
  checkNonNegative(kernel, {rows, vocab});
  auto *rowLoss = static_cast<double *>(workspace);
  if (rows > 0) {
    checkWorkspace(kernel, workspace);
    const bool packed = rowsAligned16<T>(logits, vocab);
    crossEntropyRowsKernel<T>
        <<<gridCount(kernel, rows), rowThreads(loopWork(vocab, packed)), 0,
           stream>>>(logits, targets, rowLoss, vocab, packed, badId);
    checkLaunch(kernel);
  }
  launchMeanLoss(kernel, rowLoss, nullptr, nullptr, nullptr, loss, rows,
                 stream);
}

template <typename T>
void softmaxCrossEntropyGrad(const float *lossGrad, const T *logits,
                             const std::int32_t *targets, T *result, Index rows,
                             Index vocab, int *badId, cudaStream_t stream) {
  const char *kernel = "softmax_cross_entropy_grad";
  checkNonNegative(kernel, {rows, vocab});
  if (rows == 0)
    return;
  const bool packed =
      rowsAligned16<T>(logits, vocab) && rowsAligned16<T>(result, vocab);
  crossEntropyGradKernel<T><<<gridCount(kernel, rows),
                              rowThreads(loopWork(vocab, packed)), 0, stream>>>(
      lossGrad, logits, targets, result, rows, vocab, packed, badId);
  checkLaunch(kernel);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void softmaxCrossEntropy<T>(const T *, const std::int32_t *,        \
                                       float *, Index, Index, void *, int *,   \
                                       cudaStream_t);                          \
  template void softmaxCrossEntropyGrad<T>(const float *, const T *,           \
                                           const std::int32_t *, T *, Index,   \
                                           Index, int *, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
