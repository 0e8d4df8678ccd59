//===- KernelSupport.cuh - helpers shared by the CUDA kernels ---*- C++ -*-===//
//
// Internal to runtime/backend/cuda/kernels: host-side argument checks and launch
// checks, fp32 loads / round-to-nearest-even stores of the storage types,
// 16-byte vector access, fixed-order block reductions, and the element loops
// that every kernel here is written with.
//
// Element loops. A range of n elements is walked either as packs of
// kPack = 8 consecutive elements moved with 16-byte loads and stores (when
// every pointer involved is 16-byte aligned), followed by the n % 8 tail
// element by element, or element by element throughout. Which path runs
// depends only on the shapes and the pointers, never on timing, so each
// thread always visits the same elements in the same order and reductions
// built on the loops are bitwise reproducible.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_KERNELS_KERNELSUPPORT_CUH
#define PARTITION_RUNTIME_CUDA_KERNELS_KERNELSUPPORT_CUH

#include "runtime/backend/cuda/kernels/Kernels.h"

#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <climits>
#include <cstdint>
#include <initializer_list>
#include <stdexcept>
#include <string>

namespace partition::runtime::cuda::detail {

//===----------------------------------------------------------------------===//
// Host-side checks
//===----------------------------------------------------------------------===//

[[noreturn]] inline void fail(const char *kernel, const std::string &message) {
  throw std::invalid_argument(std::string(kernel) + ": " + message);
}

inline void checkNonNegative(const char *kernel,
                             std::initializer_list<Index> sizes) {
  for (Index size : sizes)
    if (size < 0)
      fail(kernel, "negative size " + std::to_string(size));
}

/// A grid dimension (rows for the one-block-per-row kernels) must fit
/// gridDim.x.
inline unsigned gridCount(const char *kernel, Index count) {
  if (count > Index(INT_MAX))
    fail(kernel, std::to_string(count) + " rows exceed a grid's " +
                     std::to_string(INT_MAX) + " blocks");
  return static_cast<unsigned>(count);
}

/// Throws std::runtime_error if the launch just made (or an earlier
/// asynchronous error) failed.
inline void checkLaunch(const char *kernel) {
  cudaError_t error = cudaGetLastError();
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(kernel) + ": CUDA launch failed: " +
                             cudaGetErrorString(error));
}

inline void checkCuda(const char *kernel, const char *what, cudaError_t error) {
  if (error != cudaSuccess)
    throw std::runtime_error(std::string(kernel) + ": " + what +
                             " failed: " + cudaGetErrorString(error));
}

inline bool aligned16(const void *pointer) {
  return reinterpret_cast<std::uintptr_t>(pointer) % 16 == 0;
}

/// Whether rows of `n` elements of T starting at `base` are all 16-byte
/// aligned (so the pack path can run on every row).
template <typename T> bool rowsAligned16(const void *base, Index n) {
  return aligned16(base) && (n * Index(sizeof(T))) % 16 == 0;
}

constexpr Index roundUp(Index value, Index multiple) {
  return (value + multiple - 1) / multiple * multiple;
}

/// Threads per block for kernels that run one block over a row of `work`
/// items (packs or elements): enough to cover it, a multiple of the warp,
/// at most kMaxRowThreads (kernels declare it in __launch_bounds__).
constexpr int kMaxRowThreads = 1024;
inline int rowThreads(Index work) {
  return static_cast<int>(
      std::min<Index>(kMaxRowThreads, std::max<Index>(64, roundUp(work, 32))));
}

/// Blocks for grid-stride loops over `work` items: enough to fill an H200
/// several times over, capped so that huge arrays loop instead.
constexpr int kFlatThreads = 256;
inline unsigned flatBlocks(Index work) {
  return static_cast<unsigned>(std::max<Index>(
      1, std::min<Index>(8192, (work + kFlatThreads - 1) / kFlatThreads)));
}

//===----------------------------------------------------------------------===//
// Loads and stores: fp32 arithmetic whatever the storage type
//===----------------------------------------------------------------------===//

constexpr int kPack = 8;

__device__ __forceinline__ float toFloat(float x) { return x; }
__device__ __forceinline__ float toFloat(bf16 x) { return __bfloat162float(x); }

template <typename T> __device__ __forceinline__ T fromFloat(float x);
template <> __device__ __forceinline__ float fromFloat<float>(float x) {
  return x;
}
template <> __device__ __forceinline__ bf16 fromFloat<bf16>(float x) {
  return __float2bfloat16_rn(x);
}

template <typename T> __device__ __forceinline__ float load(const T *p) {
  return toFloat(*p);
}
template <typename T> __device__ __forceinline__ void store(T *p, float x) {
  *p = fromFloat<T>(x);
}

/// Eight elements from a 16-byte aligned address.
__device__ __forceinline__ void loadPack(const float *p, float (&v)[kPack]) {
  const float4 a = reinterpret_cast<const float4 *>(p)[0];
  const float4 b = reinterpret_cast<const float4 *>(p)[1];
  v[0] = a.x, v[1] = a.y, v[2] = a.z, v[3] = a.w;
  v[4] = b.x, v[5] = b.y, v[6] = b.z, v[7] = b.w;
}
__device__ __forceinline__ void loadPack(const bf16 *p, float (&v)[kPack]) {
  const uint4 raw = *reinterpret_cast<const uint4 *>(p);
  const unsigned words[4] = {raw.x, raw.y, raw.z, raw.w};
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    // bf16 is the high half of an fp32: widening is a shift.
    v[2 * k] = __uint_as_float(words[k] << 16);
    v[2 * k + 1] = __uint_as_float(words[k] & 0xffff0000u);
  }
}

__device__ __forceinline__ void storePack(float *p, const float (&v)[kPack]) {
  reinterpret_cast<float4 *>(p)[0] = make_float4(v[0], v[1], v[2], v[3]);
  reinterpret_cast<float4 *>(p)[1] = make_float4(v[4], v[5], v[6], v[7]);
}
__device__ __forceinline__ void storePack(bf16 *p, const float (&v)[kPack]) {
  unsigned words[4];
#pragma unroll
  for (int k = 0; k < 4; ++k) {
    const unsigned lo = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * k]));
    const unsigned hi = __bfloat16_as_ushort(__float2bfloat16_rn(v[2 * k + 1]));
    words[k] = lo | (hi << 16);
  }
  *reinterpret_cast<uint4 *>(p) =
      make_uint4(words[0], words[1], words[2], words[3]);
}

//===----------------------------------------------------------------------===//
// Element loops
//===----------------------------------------------------------------------===//

/// A fixed number of pointers, passed by value to kernels (size >= 1 so that
/// an empty list is still a valid type).
template <typename P, int N> struct PtrList { P p[N > 0 ? N : 1]; };

/// Walks elements [0, n) of NumIn inputs and NumOut outputs with thread
/// `first` of `stride`: out[k][i] = fn(i, x, y) where x[k] = in[k][i] (fp32)
/// and fn fills y[0..NumOut). Exact aliasing of an output with an input is
/// safe (every element is read before it is written, by the same thread).
template <int NumIn, int NumOut, typename TIn, typename TOut, typename Fn>
__device__ __forceinline__ void
mapElements(const PtrList<const TIn *, NumIn> &in,
            const PtrList<TOut *, NumOut> &out, Index n, bool packed,
            Index first, Index stride, Fn &fn) {
  Index tail = 0;
  if (packed) {
    const Index packs = n / kPack;
    for (Index p = first; p < packs; p += stride) {
      const Index base = p * kPack;
      float x[NumIn > 0 ? NumIn : 1][kPack];
      float y[NumOut > 0 ? NumOut : 1][kPack];
#pragma unroll
      for (int k = 0; k < NumIn; ++k)
        loadPack(in.p[k] + base, x[k]);
#pragma unroll
      for (int j = 0; j < kPack; ++j) {
        float xj[NumIn > 0 ? NumIn : 1], yj[NumOut > 0 ? NumOut : 1];
#pragma unroll
        for (int k = 0; k < NumIn; ++k)
          xj[k] = x[k][j];
        fn(base + j, xj, yj);
#pragma unroll
        for (int k = 0; k < NumOut; ++k)
          y[k][j] = yj[k];
      }
#pragma unroll
      for (int k = 0; k < NumOut; ++k)
        storePack(out.p[k] + base, y[k]);
    }
    tail = packs * kPack;
  }
  for (Index i = tail + first; i < n; i += stride) {
    float xj[NumIn > 0 ? NumIn : 1], yj[NumOut > 0 ? NumOut : 1];
#pragma unroll
    for (int k = 0; k < NumIn; ++k)
      xj[k] = load(in.p[k] + i);
    fn(i, xj, yj);
#pragma unroll
    for (int k = 0; k < NumOut; ++k)
      store(out.p[k] + i, yj[k]);
  }
}

/// As mapElements without outputs: calls fn(i, x) on the elements this
/// thread owns, in a fixed order (for thread-local partial reductions).
template <int NumIn, typename T, typename Fn>
__device__ __forceinline__ void
visitElements(const PtrList<const T *, NumIn> &in, Index n, bool packed,
              Index first, Index stride, Fn &fn) {
  Index tail = 0;
  if (packed) {
    const Index packs = n / kPack;
    for (Index p = first; p < packs; p += stride) {
      const Index base = p * kPack;
      float x[NumIn][kPack];
#pragma unroll
      for (int k = 0; k < NumIn; ++k)
        loadPack(in.p[k] + base, x[k]);
#pragma unroll
      for (int j = 0; j < kPack; ++j) {
        float xj[NumIn];
#pragma unroll
        for (int k = 0; k < NumIn; ++k)
          xj[k] = x[k][j];
        fn(base + j, xj);
      }
    }
    tail = packs * kPack;
  }
  for (Index i = tail + first; i < n; i += stride) {
    float xj[NumIn];
#pragma unroll
    for (int k = 0; k < NumIn; ++k)
      xj[k] = load(in.p[k] + i);
    fn(i, xj);
  }
}

/// Work items (threads wanted) for a loop over n elements.
inline Index loopWork(Index n, bool packed) {
  return packed ? n / kPack + n % kPack : n;
}

/// Grid-stride elementwise kernel over a whole array.
template <int NumIn, int NumOut, typename TIn, typename TOut, typename Fn>
__global__ void __launch_bounds__(kFlatThreads)
    mapKernel(PtrList<const TIn *, NumIn> in, PtrList<TOut *, NumOut> out,
              Index n, bool packed, Fn fn) {
  const Index first = Index(blockIdx.x) * blockDim.x + threadIdx.x;
  const Index stride = Index(gridDim.x) * blockDim.x;
  mapElements(in, out, n, packed, first, stride, fn);
}

/// Launches mapKernel on `stream`; the pack path when every pointer is
/// 16-byte aligned.
template <int NumIn, int NumOut, typename TIn, typename TOut, typename Fn>
void launchMap(const char *kernel, PtrList<const TIn *, NumIn> in,
               PtrList<TOut *, NumOut> out, Index n, Fn fn,
               cudaStream_t stream) {
  if (n <= 0)
    return;
  bool packed = true;
  for (int k = 0; k < NumIn; ++k)
    packed = packed && aligned16(in.p[k]);
  for (int k = 0; k < NumOut; ++k)
    packed = packed && aligned16(out.p[k]);
  mapKernel<NumIn, NumOut, TIn, TOut, Fn>
      <<<flatBlocks(loopWork(n, packed)), kFlatThreads, 0, stream>>>(
          in, out, n, packed, fn);
  checkLaunch(kernel);
}

//===----------------------------------------------------------------------===//
// Reductions in a fixed order
//===----------------------------------------------------------------------===//

template <typename V> __device__ __forceinline__ V warpSum(V v) {
  // A butterfly: every lane ends with the same, order-fixed sum (fp
  // addition is commutative, so partners compute identical values).
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v += __shfl_xor_sync(0xffffffffu, v, offset);
  return v;
}

/// `x > m ? x : m`, as the CPU kernels: NaNs are skipped.
__device__ __forceinline__ float maxOf(float m, float x) {
  return x > m ? x : m;
}

__device__ __forceinline__ float warpMax(float v) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2)
    v = maxOf(v, __shfl_xor_sync(0xffffffffu, v, offset));
  return v;
}

/// Shared scratch for blockReduce of N values.
template <typename V, int N> struct ReduceScratch { V partial[N][33]; };

/// Sums (or maxes, with IsMax) v[0..N) over the block and returns the result
/// to every thread: warps first, then warp 0 over the warp results, a fixed
/// tree for a given blockDim. blockDim.x must be a multiple of 32. Safe to
/// call repeatedly with the same scratch.
template <bool IsMax = false, typename V, int N>
__device__ __forceinline__ void blockReduce(V (&v)[N],
                                            ReduceScratch<V, N> &scratch) {
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int warps = blockDim.x / 32;
#pragma unroll
  for (int k = 0; k < N; ++k) {
    if constexpr (IsMax)
      v[k] = warpMax(v[k]);
    else
      v[k] = warpSum(v[k]);
  }
  if (lane == 0) {
#pragma unroll
    for (int k = 0; k < N; ++k)
      scratch.partial[k][warp] = v[k];
  }
  __syncthreads();
  if (warp == 0) {
#pragma unroll
    for (int k = 0; k < N; ++k) {
      V w;
      if constexpr (IsMax) {
        w = lane < warps ? scratch.partial[k][lane] : V(-INFINITY);
        w = warpMax(w);
      } else {
        w = lane < warps ? scratch.partial[k][lane] : V(0);
        w = warpSum(w);
      }
      if (lane == 0)
        scratch.partial[k][32] = w;
    }
  }
  __syncthreads();
#pragma unroll
  for (int k = 0; k < N; ++k)
    v[k] = scratch.partial[k][32];
}

/// max over x[0..n) by the block (-inf for an empty row; NaNs skipped).
template <typename T>
__device__ __forceinline__ float rowMax(const T *x, Index n, bool packed,
                                        ReduceScratch<float, 1> &scratch) {
  float m[1] = {-INFINITY};
  auto visit = [&](Index, const float *v) { m[0] = maxOf(m[0], v[0]); };
  visitElements(PtrList<const T *, 1>{{x}}, n, packed, threadIdx.x, blockDim.x,
                visit);
  blockReduce<true>(m, scratch);
  return m[0];
}

/// sum over x[0..n) of expf(x - m) by the block. expf (within 2 ulp) rather
/// than __expf, like the CPU kernels' fastExp.
template <typename T>
__device__ __forceinline__ float rowSumExp(const T *x, Index n, float m,
                                           bool packed,
                                           ReduceScratch<float, 1> &scratch) {
  float sum[1] = {0.0f};
  auto visit = [&](Index, const float *v) { sum[0] += expf(v[0] - m); };
  visitElements(PtrList<const T *, 1>{{x}}, n, packed, threadIdx.x, blockDim.x,
                visit);
  blockReduce(sum, scratch);
  return sum[0];
}

//===----------------------------------------------------------------------===//
// Column sums in a fixed order (bias, gamma and beta gradients)
//===----------------------------------------------------------------------===//

/// Rows are split into `chunks` consecutive chunks of `chunkRows` rows; each
/// chunk (one block) writes a partial [numSums, columns] to the fp32
/// workspace and finishColumnSums adds the partials in a fixed order. The
/// split depends on the shape only (not on the device): up to 1024 chunks
/// for parallelism, fewer when the partials would pass 16 MiB.
struct RowChunks {
  Index chunkRows = 0;
  Index chunks = 0;
};
inline RowChunks rowChunks(Index rows, Index columns, int numSums) {
  constexpr Index kMinChunkRows = 8;
  constexpr Index kPartialFloats = Index(1) << 22;
  const Index width = std::max<Index>(1, columns * numSums);
  const Index maxChunks =
      std::min<Index>(1024, std::max<Index>(64, kPartialFloats / width));
  RowChunks result;
  result.chunkRows =
      std::max(kMinChunkRows, (rows + maxChunks - 1) / maxChunks);
  result.chunks = (rows + result.chunkRows - 1) / result.chunkRows;
  return result;
}
inline std::size_t columnSumsWorkspaceSize(Index rows, Index columns,
                                           int numSums) {
  return std::size_t(rowChunks(rows, columns, numSums).chunks) * numSums *
         columns * sizeof(float);
}

/// sums[s][c] = the sum over chunks of partials[chunk][s][c], zero when
/// there are no chunks; sums[s] may be any storage type. One warp per
/// column: lane l adds chunks l, l + 32, ... in order, then the warp's
/// fixed butterfly adds the lanes (32 loads in flight instead of a serial
/// chain over the chunks).
template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    finishColumnSumsKernel(const float *partials, PtrList<T *, 2> sums,
                           Index columns, Index total, Index chunks) {
  const int lane = threadIdx.x % 32;
  const Index warpsPerGrid = Index(gridDim.x) * (blockDim.x / 32);
  for (Index i = Index(blockIdx.x) * (blockDim.x / 32) + threadIdx.x / 32;
       i < total; i += warpsPerGrid) {
    float acc = 0.0f;
    for (Index chunk = lane; chunk < chunks; chunk += 32)
      acc += partials[chunk * total + i];
    acc = warpSum(acc);
    if (lane != 0)
      continue;
    // A select rather than sums.p[s]: a dynamic index would put the
    // pointer list in local memory.
    if (i < columns)
      store(sums.p[0] + i, acc);
    else
      store(sums.p[1] + (i - columns), acc);
  }
}

template <typename T>
void finishColumnSums(const char *kernel, const float *partials, T *sum0,
                      T *sum1, int numSums, Index columns, Index chunks,
                      cudaStream_t stream) {
  const Index total = numSums * columns;
  if (total == 0)
    return;
  PtrList<T *, 2> sums{{sum0, sum1}};
  const Index warpsPerBlock = kFlatThreads / 32;
  const unsigned blocks = static_cast<unsigned>(
      std::min<Index>(65535, (total + warpsPerBlock - 1) / warpsPerBlock));
  finishColumnSumsKernel<T><<<blocks, kFlatThreads, 0, stream>>>(
      partials, sums, columns, total, chunks);
  checkLaunch(kernel);
}

//===----------------------------------------------------------------------===//
// Workspace layout
//===----------------------------------------------------------------------===//

/// Carves consecutive 256-byte aligned regions out of a workspace (or, with
/// a null base, just measures them).
class WorkspaceCarver {
public:
  explicit WorkspaceCarver(void *base) : base(static_cast<char *>(base)) {}
  template <typename U> U *take(std::size_t count) {
    offset = (offset + 255) / 256 * 256;
    U *at = base ? reinterpret_cast<U *>(base + offset) : nullptr;
    offset += count * sizeof(U);
    return at;
  }
  void *takeBytes(std::size_t bytes) { return take<char>(bytes); }
  std::size_t size() const { return offset; }

private:
  char *base;
  std::size_t offset = 0;
};

inline void checkWorkspace(const char *kernel, const void *workspace) {
  if (!workspace)
    fail(kernel, "workspace is null");
  if (reinterpret_cast<std::uintptr_t>(workspace) % 16 != 0)
    fail(kernel, "workspace is not 16-byte aligned");
}

//===----------------------------------------------------------------------===//
// Scatter-add of rows by token (Embedding.cu; also the vocabulary-parallel
// embedding gradient)
//===----------------------------------------------------------------------===//

/// Workspace bytes of scatterRowsByToken; needs the current device (CUB's
/// radix sort sizes its scratch for the device's architecture).
std::size_t scatterRowsByTokenWorkspaceSize(const char *kernel, Index rows,
                                            Index vocab);

/// result[v, :] = (accumulate ? result[v, :] : 0) + the sum, in row order,
/// of grad[r, :] over the rows r whose token maps to v. Without `shard`
/// the token is v itself (ids outside [0, vocab) set *badId); with it, v =
/// token - *shard * vocab when that lies in [0, vocab) and the row is
/// skipped otherwise (negative ids, or a negative shard, set *badId).
template <typename T>
void scatterRowsByToken(const char *kernel, const T *grad,
                        const std::int32_t *tokens, const std::int32_t *shard,
                        T *result, Index rows, Index vocab, Index channels,
                        bool accumulate, void *workspace, int *badId,
                        cudaStream_t stream);

/// result[r, :] = table[id, :] for each row's token, id = token (plain,
/// `shard` null) or token - *shard * vocab (vocabulary parallel, zeros when
/// the id is another shard's); bad ids set *badId and give zeros.
template <typename T>
void embeddingRows(const char *kernel, const std::int32_t *tokens,
                   const T *table, const std::int32_t *shard, T *result,
                   Index rows, Index vocab, Index channels, int *badId,
                   cudaStream_t stream);

/// *result = mean over rows of rowLoss[r] (when given) or of
/// log(sumExp[r]) + max[r] - targetLogit[r], summed in double in a fixed
/// order by one block; NaN for no rows (Loss.cu).
void launchMeanLoss(const char *kernel, const double *rowLoss, const float *max,
                    const float *sumExp, const float *targetLogit,
                    float *result, Index rows, cudaStream_t stream);

/// The first global id of shard *shard of `localVocab` ids, or -1 when the
/// shard is negative or its ids do not fit i32 (the backend reports it
/// through badId).
__device__ __forceinline__ Index shardBegin(const std::int32_t *shard,
                                            Index localVocab) {
  const Index s = *shard;
  if (s < 0)
    return -1;
  const Index begin = s * localVocab;
  if (localVocab > 0 && begin + localVocab - 1 > Index(INT32_MAX))
    return -1;
  return begin;
}

/// Sets *badId (a device int) to 1.
__device__ __forceinline__ void flagBadId(int *badId) {
  if (badId)
    *badId = 1;
}

} // namespace partition::runtime::cuda::detail

#endif // PARTITION_RUNTIME_CUDA_KERNELS_KERNELSUPPORT_CUH
