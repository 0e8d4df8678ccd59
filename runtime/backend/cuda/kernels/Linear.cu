//===- Linear.cu - bias add and bias gradient around the GEMMs ------------===//
//
// The bias gradient is a column sum over rows: each block sums a fixed chunk
// of rows for a tile of columns (one column per thread, rows in order, loads
// coalesced across the columns) into the fp32 workspace, and a second kernel
// adds the chunks' partials in a fixed order. No atomics, so the result is
// bitwise reproducible.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

struct AddBias {
  __device__ void operator()(Index, const float *in, float *out) const {
    out[0] = in[0] + in[1];
  }
};

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    addBiasKernel(T *result, const T *bias, Index outFeatures, bool packed) {
  T *row = result + Index(blockIdx.x) * outFeatures;
  AddBias fn;
  mapElements(PtrList<const T *, 2>{{row, bias}}, PtrList<T *, 1>{{row}},
              outFeatures, packed, threadIdx.x, blockDim.x, fn);
}

constexpr int kColumnThreads = 256;

/// partials[chunk, o] = sum over the chunk's rows, in order, of grad[r, o].
template <typename T>
__global__ void __launch_bounds__(kColumnThreads)
    columnPartialsKernel(const T *grad, float *partials, Index rows,
                         Index columns, Index chunkRows) {
  const Index o = Index(blockIdx.x) * blockDim.x + threadIdx.x;
  if (o >= columns)
    return;
  const Index chunk = blockIdx.y;
  const Index begin = chunk * chunkRows;
  const Index end = min(rows, begin + chunkRows);
  const T *at = grad + o;
  float acc = 0.0f;
  Index r = begin;
  // Four loads in flight, then added in row order.
  for (; r + 4 <= end; r += 4) {
    const float v0 = load(at + r * columns);
    const float v1 = load(at + (r + 1) * columns);
    const float v2 = load(at + (r + 2) * columns);
    const float v3 = load(at + (r + 3) * columns);
    acc += v0;
    acc += v1;
    acc += v2;
    acc += v3;
  }
  for (; r < end; ++r)
    acc += load(at + r * columns);
  partials[chunk * columns + o] = acc;
}

} // namespace

template <typename T>
void addBias(T *result, const T *bias, Index rows, Index outFeatures,
             cudaStream_t stream) {
  const char *kernel = "add_bias";
  checkNonNegative(kernel, {rows, outFeatures});
  if (rows == 0 || outFeatures == 0)
    return;
  const bool packed = rowsAligned16<T>(result, outFeatures) && aligned16(bias);
  addBiasKernel<T>
      <<<gridCount(kernel, rows), rowThreads(loopWork(outFeatures, packed)), 0,
         stream>>>(result, bias, outFeatures, packed);
  checkLaunch(kernel);
}

std::size_t biasGradWorkspaceSize(Index rows, Index outFeatures) {
  checkNonNegative("bias_grad", {rows, outFeatures});
  return columnSumsWorkspaceSize(rows, outFeatures, 1);
}

template <typename T>
void biasGrad(const T *grad, T *biasGrad, Index rows, Index outFeatures,
              void *workspace, cudaStream_t stream) {
  const char *kernel = "bias_grad";
  checkNonNegative(kernel, {rows, outFeatures});
  if (outFeatures == 0)
    return;
  const RowChunks split = rowChunks(rows, outFeatures, 1);
  auto *partials = static_cast<float *>(workspace);
  if (split.chunks > 0) {
    checkWorkspace(kernel, workspace);
    const dim3 grid(static_cast<unsigned>((outFeatures + kColumnThreads - 1) /
                                          kColumnThreads),
                    static_cast<unsigned>(split.chunks));
    if (grid.x > unsigned(INT_MAX))
      fail(kernel, "too many output features");
    columnPartialsKernel<T><<<grid, kColumnThreads, 0, stream>>>(
        grad, partials, rows, outFeatures, split.chunkRows);
    checkLaunch(kernel);
  }
  finishColumnSums<T>(kernel, partials, biasGrad, nullptr, 1, outFeatures,
                      split.chunks, stream);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void addBias<T>(T *, const T *, Index, Index, cudaStream_t);        \
  template void biasGrad<T>(const T *, T *, Index, Index, void *, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
