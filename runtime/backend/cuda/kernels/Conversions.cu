//===- Conversions.cu - casts, fills, the step counter, byte copies -------===//
//
// Flat, elementwise: grid-stride loops over packs of eight elements (16-byte
// loads) when the buffers are aligned, element by element otherwise.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

struct Identity {
  __device__ void operator()(Index, const float *x, float *y) const {
    y[0] = x[0];
  }
};

struct Constant {
  float value;
  __device__ void operator()(Index, const float *, float *y) const {
    y[0] = value;
  }
};

__global__ void __launch_bounds__(kFlatThreads)
    fillI32Kernel(std::int32_t *result, std::int32_t value, Index size) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < size;
       i += Index(gridDim.x) * blockDim.x)
    result[i] = value;
}

__global__ void __launch_bounds__(kFlatThreads)
    addI32Kernel(const std::int32_t *lhs, const std::int32_t *rhs,
                 std::int32_t *result, Index size) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < size;
       i += Index(gridDim.x) * blockDim.x)
    // Wrap-around rather than undefined behaviour on overflow.
    result[i] = static_cast<std::int32_t>(static_cast<std::uint32_t>(lhs[i]) +
                                          static_cast<std::uint32_t>(rhs[i]));
}

} // namespace

template <typename From, typename To>
void cast(const From *input, To *result, Index size, cudaStream_t stream) {
  checkNonNegative("cast", {size});
  launchMap<1, 1>("cast", PtrList<const From *, 1>{{input}},
                  PtrList<To *, 1>{{result}}, size, Identity{}, stream);
}

template <typename T>
void fill(T *result, float value, Index size, cudaStream_t stream) {
  checkNonNegative("fill", {size});
  launchMap<0, 1>("fill", PtrList<const T *, 0>{{nullptr}},
                  PtrList<T *, 1>{{result}}, size, Constant{value}, stream);
}

void fillI32(std::int32_t *result, std::int32_t value, Index size,
             cudaStream_t stream) {
  checkNonNegative("fill_i32", {size});
  if (size == 0)
    return;
  fillI32Kernel<<<flatBlocks(size), kFlatThreads, 0, stream>>>(result, value,
                                                               size);
  checkLaunch("fill_i32");
}

void addI32(const std::int32_t *lhs, const std::int32_t *rhs,
            std::int32_t *result, Index size, cudaStream_t stream) {
  checkNonNegative("add_i32", {size});
  if (size == 0)
    return;
  addI32Kernel<<<flatBlocks(size), kFlatThreads, 0, stream>>>(lhs, rhs, result,
                                                              size);
  checkLaunch("add_i32");
}

void copyBytes(const void *input, void *result, std::size_t bytes,
               cudaStream_t stream) {
  if (bytes == 0 || input == result)
    return;
  checkCuda(
      "copy_bytes", "cudaMemcpyAsync",
      cudaMemcpyAsync(result, input, bytes, cudaMemcpyDeviceToDevice, stream));
}

template void cast<float, bf16>(const float *, bf16 *, Index, cudaStream_t);
template void cast<bf16, float>(const bf16 *, float *, Index, cudaStream_t);
template void cast<float, float>(const float *, float *, Index, cudaStream_t);
template void cast<bf16, bf16>(const bf16 *, bf16 *, Index, cudaStream_t);
template void fill<float>(float *, float, Index, cudaStream_t);
template void fill<bf16>(bf16 *, float, Index, cudaStream_t);

} // namespace partition::runtime::cuda
