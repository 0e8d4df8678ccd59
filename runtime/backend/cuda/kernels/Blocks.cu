//===- Blocks.cu - blocks of a tensor along one dimension -----------------===//
//
// A tensor split along a dimension into `blocks` equal blocks is, viewed as
// [outer, blocks * blockDim, inner], `outer` runs of blockDim * inner
// contiguous elements per block (runtime/backend/cpu/Blocks.cpp). Slicing, packing
// and unpacking move bits: each copies whole runs, one block of threads per
// run, in the widest unit (16, 8, 4, 2 or 1 bytes) that the run length and
// the pointers allow.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

constexpr int kCopyThreads = 256;

/// Copies `count` blocks between the strided [outer, blocks, run] tensor
/// and the contiguous [count, outer, run] one (pack: strided to packed).
/// Block k of the packed side is strided block *index when `index` is given
/// (count is then 1), else block k. A bad *index sets *badId and packs
/// zeros.
template <typename U>
__global__ void __launch_bounds__(kCopyThreads)
    copyRunsKernel(const U *src, U *dst, Index outer, Index run, Index blocks,
                   Index count, const std::int32_t *index, bool pack,
                   int *badId) {
  bool bad = false;
  Index chosen = -1;
  if (index) {
    chosen = *index;
    bad = chosen < 0 || chosen >= blocks;
    if (bad && blockIdx.x == 0 && threadIdx.x == 0)
      flagBadId(badId);
  }
  const Index runs = count * outer;
  for (Index i = blockIdx.x; i < runs; i += gridDim.x) {
    const Index k = i / outer;
    const Index o = i - k * outer;
    const Index block = index ? chosen : k;
    const Index strided = (o * blocks + block) * run;
    const Index packed = i * run;
    if (pack) {
      for (Index e = threadIdx.x; e < run; e += blockDim.x)
        dst[packed + e] = bad ? U{} : src[strided + e];
    } else {
      for (Index e = threadIdx.x; e < run; e += blockDim.x)
        dst[strided + e] = src[packed + e];
    }
  }
}

template <typename U>
void launchCopyRuns(const char *kernel, const void *src, void *dst, Index outer,
                    Index runBytes, Index blocks, Index count,
                    const std::int32_t *index, bool pack, int *badId,
                    cudaStream_t stream) {
  const Index run = runBytes / Index(sizeof(U));
  const Index runs = count * outer;
  const unsigned grid =
      static_cast<unsigned>(std::min<Index>(runs, Index(1) << 20));
  const int threads = static_cast<int>(
      std::min<Index>(kCopyThreads, std::max<Index>(32, roundUp(run, 32))));
  copyRunsKernel<U><<<grid, threads, 0, stream>>>(
      static_cast<const U *>(src), static_cast<U *>(dst), outer, run, blocks,
      count, index, pack, badId);
  checkLaunch(kernel);
}

void copyRuns(const char *kernel, const void *src, void *dst, Index outer,
              Index blockDim, Index inner, Index blocks, Index count,
              int bytesPerElement, const std::int32_t *index, bool pack,
              int *badId, cudaStream_t stream) {
  checkNonNegative(kernel, {outer, blockDim, inner, blocks});
  if (bytesPerElement != 2 && bytesPerElement != 4)
    fail(kernel, "bytesPerElement is " + std::to_string(bytesPerElement) +
                     ", must be 2 or 4");
  const Index runBytes = blockDim * inner * bytesPerElement;
  if (count * outer == 0 || runBytes == 0)
    return;
  // Every run starts a multiple of runBytes from its base pointer.
  const auto fits = [&](Index unit) {
    return runBytes % unit == 0 &&
           reinterpret_cast<std::uintptr_t>(src) % unit == 0 &&
           reinterpret_cast<std::uintptr_t>(dst) % unit == 0;
  };
  if (fits(16))
    launchCopyRuns<uint4>(kernel, src, dst, outer, runBytes, blocks, count,
                          index, pack, badId, stream);
  else if (fits(8))
    launchCopyRuns<uint2>(kernel, src, dst, outer, runBytes, blocks, count,
                          index, pack, badId, stream);
  else if (fits(4))
    launchCopyRuns<std::uint32_t>(kernel, src, dst, outer, runBytes, blocks,
                                  count, index, pack, badId, stream);
  else if (fits(2))
    launchCopyRuns<std::uint16_t>(kernel, src, dst, outer, runBytes, blocks,
                                  count, index, pack, badId, stream);
  else
    launchCopyRuns<std::uint8_t>(kernel, src, dst, outer, runBytes, blocks,
                                 count, index, pack, badId, stream);
}

/// One thread per element of the tensor's columns of the bucket
/// (rows * chunk of them): pack writes each (zero past the tensor), unpack
/// reads those inside the tensor.
template <typename U>
__global__ void flatKernel(const U *src, U *dst, Index size, Index rows,
                           Index columns, Index offset, Index chunk,
                           bool pack) {
  const Index total = rows * chunk;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    const Index r = i / chunk;
    const Index at = r * columns + offset + (i - r * chunk);
    if (pack)
      dst[at] = i < size ? src[i] : U{};
    else if (i < size)
      dst[i] = src[at];
  }
}

template <typename U>
void launchFlat(const char *kernel, const void *src, void *dst, Index size,
                Index rows, Index columns, Index offset, bool pack,
                cudaStream_t stream) {
  const Index chunk = (size + rows - 1) / rows;
  const Index total = rows * chunk;
  if (total == 0)
    return;
  const unsigned grid = static_cast<unsigned>(
      std::min<Index>((total + kCopyThreads - 1) / kCopyThreads, 65535));
  flatKernel<U><<<grid, kCopyThreads, 0, stream>>>(
      static_cast<const U *>(src), static_cast<U *>(dst), size, rows, columns,
      offset, chunk, pack);
  checkLaunch(kernel);
}

void flat(const char *kernel, const void *src, void *dst, Index size,
          Index rows, Index columns, Index offset, int bytesPerElement,
          bool pack, cudaStream_t stream) {
  checkNonNegative(kernel, {size, rows, columns, offset});
  if (rows < 1)
    fail(kernel, "a bucket needs at least one row");
  if (bytesPerElement == 4)
    launchFlat<std::uint32_t>(kernel, src, dst, size, rows, columns, offset,
                              pack, stream);
  else if (bytesPerElement == 2)
    launchFlat<std::uint16_t>(kernel, src, dst, size, rows, columns, offset,
                              pack, stream);
  else
    fail(kernel, "bytesPerElement is " + std::to_string(bytesPerElement) +
                     ", must be 2 or 4");
}

} // namespace

void flatPack(const void *tensor, void *bucket, Index size, Index rows,
              Index columns, Index offset, int bytesPerElement,
              cudaStream_t stream) {
  flat("flat_pack", tensor, bucket, size, rows, columns, offset,
       bytesPerElement, /*pack=*/true, stream);
}

void flatUnpack(const void *bucket, void *tensor, Index size, Index rows,
                Index columns, Index offset, int bytesPerElement,
                cudaStream_t stream) {
  flat("flat_unpack", bucket, tensor, size, rows, columns, offset,
       bytesPerElement, /*pack=*/false, stream);
}

void sliceBlock(const void *input, const std::int32_t *index, void *result,
                Index outer, Index blockDim, Index inner, Index blocks,
                int bytesPerElement, int *badId, cudaStream_t stream) {
  copyRuns("slice_block", input, result, outer, blockDim, inner, blocks,
           /*count=*/1, bytesPerElement, index, /*pack=*/true, badId, stream);
}

void packBlocks(const void *input, void *packed, Index outer, Index blockDim,
                Index inner, Index blocks, int bytesPerElement,
                cudaStream_t stream) {
  copyRuns("pack_blocks", input, packed, outer, blockDim, inner, blocks, blocks,
           bytesPerElement, nullptr, /*pack=*/true, nullptr, stream);
}

void unpackBlocks(const void *packed, void *result, Index outer, Index blockDim,
                  Index inner, Index blocks, int bytesPerElement,
                  cudaStream_t stream) {
  copyRuns("unpack_blocks", packed, result, outer, blockDim, inner, blocks,
           blocks, bytesPerElement, nullptr, /*pack=*/false, nullptr, stream);
}

} // namespace partition::runtime::cuda
