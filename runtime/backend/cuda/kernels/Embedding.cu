//===- Embedding.cu - token and position embeddings -----------------------===//
//
// The embedding gradient is a scatter-add with repeated tokens. Atomics
// would make the sums depend on timing, so the rows are grouped by token
// first: a stable radix sort (CUB's DeviceRadixSort, keys = token, values =
// row, which keeps equal tokens in row order) in the workspace, a binary
// search for where each token's run starts, then one block per vocabulary
// row (and tile of channels) that adds its run's grad rows in row order in
// fp32 registers and writes the table row once. That is the CPU kernel's
// summation order exactly, with no atomics: reproducible bit for bit, and
// each table row (touched or not) is written by one block, so zeroing costs
// no extra pass.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

#include <cub/device/device_radix_sort.cuh>

namespace partition::runtime::cuda {

using namespace detail;

namespace {

struct Copy {
  __device__ void operator()(Index, const float *x, float *y) const {
    y[0] = x[0];
  }
};

struct Zero {
  __device__ void operator()(Index, const float *, float *y) const {
    y[0] = 0.0f;
  }
};

/// result[r, :] = table[local id of tokens[r], :], zeros when the id is
/// not (validly) local. Plain embedding: begin = 0, no shard.
template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    embeddingKernel(const std::int32_t *tokens, const T *table,
                    const std::int32_t *shard, T *result, Index vocab,
                    Index channels, bool packed, int *badId) {
  const Index row = blockIdx.x;
  const std::int32_t token = tokens[row];
  Index local = -1;
  if (shard) {
    const Index begin = shardBegin(shard, vocab);
    if (token < 0 || begin < 0) {
      if (threadIdx.x == 0)
        flagBadId(badId);
    } else if (Index(token) - begin < vocab && Index(token) >= begin) {
      local = Index(token) - begin;
    }
  } else if (token >= 0 && Index(token) < vocab) {
    local = token;
  } else if (threadIdx.x == 0) {
    flagBadId(badId);
  }
  T *y = result + row * channels;
  if (local < 0) {
    Zero zero;
    mapElements(PtrList<const T *, 0>{{nullptr}}, PtrList<T *, 1>{{y}},
                channels, packed, threadIdx.x, blockDim.x, zero);
    return;
  }
  Copy copy;
  mapElements(PtrList<const T *, 1>{{table + local * channels}},
              PtrList<T *, 1>{{y}}, channels, packed, threadIdx.x, blockDim.x,
              copy);
}

/// Sort keys: the vocabulary row of each grad row, or `vocab` (sorted last,
/// never summed) when it has none.
__global__ void __launch_bounds__(kFlatThreads)
    tokenKeysKernel(const std::int32_t *tokens, const std::int32_t *shard,
                    std::uint32_t *keys, std::int32_t *rowIds, Index rows,
                    Index vocab, int *badId) {
  Index begin = 0;
  if (shard) {
    begin = shardBegin(shard, vocab);
    if (begin < 0 && blockIdx.x == 0 && threadIdx.x == 0)
      flagBadId(badId);
  }
  for (Index r = Index(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += Index(gridDim.x) * blockDim.x) {
    const std::int32_t token = tokens[r];
    Index key = vocab;
    if (shard) {
      if (token < 0)
        flagBadId(badId);
      else if (begin >= 0 && Index(token) >= begin &&
               Index(token) - begin < vocab)
        key = Index(token) - begin;
    } else if (token >= 0 && Index(token) < vocab) {
      key = token;
    } else {
      flagBadId(badId);
    }
    keys[r] = static_cast<std::uint32_t>(key);
    rowIds[r] = static_cast<std::int32_t>(r);
  }
}

/// starts[v] = the first position of the sorted keys >= v, v in [0, vocab].
__global__ void __launch_bounds__(kFlatThreads)
    runStartsKernel(const std::uint32_t *keys, std::int32_t *starts, Index rows,
                    Index vocab) {
  for (Index v = Index(blockIdx.x) * blockDim.x + threadIdx.x; v <= vocab;
       v += Index(gridDim.x) * blockDim.x) {
    Index lo = 0, hi = rows;
    while (lo < hi) {
      const Index mid = (lo + hi) / 2;
      if (Index(keys[mid]) < v)
        lo = mid + 1;
      else
        hi = mid;
    }
    starts[v] = static_cast<std::int32_t>(lo);
  }
}

constexpr int kScatterThreads = 128;

/// One block per (vocabulary row, tile of channels); each thread owns
/// Width consecutive channels (8 with 16-byte access, else 1).
template <typename T, int Width>
__global__ void __launch_bounds__(kScatterThreads)
    sumRunsKernel(const T *grad, const std::int32_t *sortedRows,
                  const std::int32_t *starts, T *result, Index channels,
                  bool accumulate) {
  const Index v = blockIdx.x;
  const Index c = (Index(blockIdx.y) * blockDim.x + threadIdx.x) * Width;
  if (c >= channels)
    return;
  const Index begin = starts[v], end = starts[v + 1];
  if (begin == end && accumulate)
    return; // nothing to add; the row keeps its values
  T *y = result + v * channels + c;
  float acc[Width];
  if (accumulate) {
    if constexpr (Width == kPack)
      loadPack(y, acc);
    else
      acc[0] = load(y);
  } else {
#pragma unroll
    for (int j = 0; j < Width; ++j)
      acc[j] = 0.0f;
  }
  auto loadRow = [&](Index r, float(&x)[Width]) {
    const T *at = grad + r * channels + c;
    if constexpr (Width == kPack)
      loadPack(at, x);
    else
      x[0] = load(at);
  };
  // Four rows' loads in flight (a frequent token has a long run), added in
  // row order.
  constexpr int kInFlight = 4;
  Index i = begin;
  for (; i + kInFlight <= end; i += kInFlight) {
    float x[kInFlight][Width];
#pragma unroll
    for (int k = 0; k < kInFlight; ++k)
      loadRow(sortedRows[i + k], x[k]);
#pragma unroll
    for (int k = 0; k < kInFlight; ++k)
#pragma unroll
      for (int j = 0; j < Width; ++j)
        acc[j] += x[k][j];
  }
  for (; i < end; ++i) {
    float x[Width];
    loadRow(sortedRows[i], x);
#pragma unroll
    for (int j = 0; j < Width; ++j)
      acc[j] += x[j];
  }
  if constexpr (Width == kPack)
    storePack(y, acc);
  else
    store(y, acc[0]);
}

/// Bits that hold keys in [0, vocab] (at least one, so that CUB sorts).
int keyBits(Index vocab) {
  int bits = 1;
  while ((Index(1) << bits) <= vocab)
    ++bits;
  return bits;
}

struct ScatterLayout {
  std::uint32_t *keysIn, *keysOut;
  std::int32_t *rowsIn, *rowsOut, *starts;
  void *sortScratch;
  std::size_t sortBytes;
  std::size_t total;
};

ScatterLayout scatterLayout(const char *kernel, void *workspace, Index rows,
                            Index vocab) {
  std::size_t sortBytes = 0;
  checkCuda(kernel, "sizing cub::DeviceRadixSort::SortPairs",
            cub::DeviceRadixSort::SortPairs(
                nullptr, sortBytes, static_cast<const std::uint32_t *>(nullptr),
                static_cast<std::uint32_t *>(nullptr),
                static_cast<const std::int32_t *>(nullptr),
                static_cast<std::int32_t *>(nullptr), int(rows), 0,
                keyBits(vocab)));
  WorkspaceCarver carver(workspace);
  ScatterLayout layout;
  layout.keysIn = carver.take<std::uint32_t>(rows);
  layout.keysOut = carver.take<std::uint32_t>(rows);
  layout.rowsIn = carver.take<std::int32_t>(rows);
  layout.rowsOut = carver.take<std::int32_t>(rows);
  layout.starts = carver.take<std::int32_t>(vocab + 1);
  layout.sortScratch = carver.takeBytes(sortBytes);
  layout.sortBytes = sortBytes;
  layout.total = carver.size();
  return layout;
}

void checkScatterSizes(const char *kernel, Index rows, Index vocab) {
  // Row ids and run starts are i32, CUB's item count an int.
  if (rows > Index(INT_MAX))
    fail(kernel,
         std::to_string(rows) + " rows exceed " + std::to_string(INT_MAX));
  if (vocab >= Index(INT_MAX))
    fail(kernel, "vocabulary of " + std::to_string(vocab) +
                     " ids does not fit i32 token ids");
}

} // namespace

namespace detail {

std::size_t scatterRowsByTokenWorkspaceSize(const char *kernel, Index rows,
                                            Index vocab) {
  checkScatterSizes(kernel, rows, vocab);
  return scatterLayout(kernel, nullptr, rows, vocab).total;
}

template <typename T>
void scatterRowsByToken(const char *kernel, const T *grad,
                        const std::int32_t *tokens, const std::int32_t *shard,
                        T *result, Index rows, Index vocab, Index channels,
                        bool accumulate, void *workspace, int *badId,
                        cudaStream_t stream) {
  checkScatterSizes(kernel, rows, vocab);
  if (rows == 0 && (accumulate || vocab == 0 || channels == 0))
    return;
  checkWorkspace(kernel, workspace);
  const ScatterLayout layout = scatterLayout(kernel, workspace, rows, vocab);
  if (rows > 0) {
    tokenKeysKernel<<<flatBlocks(rows), kFlatThreads, 0, stream>>>(
        tokens, shard, layout.keysIn, layout.rowsIn, rows, vocab, badId);
    checkLaunch(kernel);
  }
  if (vocab == 0 || channels == 0)
    return; // nothing to write; the keys kernel has checked the ids
  if (rows > 0) {
    std::size_t sortBytes = layout.sortBytes;
    checkCuda(kernel, "cub::DeviceRadixSort::SortPairs",
              cub::DeviceRadixSort::SortPairs(
                  layout.sortScratch, sortBytes,
                  static_cast<const std::uint32_t *>(layout.keysIn),
                  layout.keysOut,
                  static_cast<const std::int32_t *>(layout.rowsIn),
                  layout.rowsOut, int(rows), 0, keyBits(vocab), stream));
  }
  runStartsKernel<<<flatBlocks(vocab + 1), kFlatThreads, 0, stream>>>(
      layout.keysOut, layout.starts, rows, vocab);
  checkLaunch(kernel);
  const bool packed =
      aligned16(grad) && aligned16(result) && channels % kPack == 0;
  const Index width = packed ? kPack : 1;
  const Index tiles =
      (channels / width + kScatterThreads - 1) / kScatterThreads;
  if (tiles > 65535)
    fail(kernel, std::to_string(channels) + " channels are too many");
  const dim3 grid(gridCount(kernel, vocab), static_cast<unsigned>(tiles));
  if (packed)
    sumRunsKernel<T, kPack><<<grid, kScatterThreads, 0, stream>>>(
        grad, layout.rowsOut, layout.starts, result, channels, accumulate);
  else
    sumRunsKernel<T, 1><<<grid, kScatterThreads, 0, stream>>>(
        grad, layout.rowsOut, layout.starts, result, channels, accumulate);
  checkLaunch(kernel);
}

template void scatterRowsByToken<float>(const char *, const float *,
                                        const std::int32_t *,
                                        const std::int32_t *, float *, Index,
                                        Index, Index, bool, void *, int *,
                                        cudaStream_t);
template void scatterRowsByToken<bf16>(const char *, const bf16 *,
                                       const std::int32_t *,
                                       const std::int32_t *, bf16 *, Index,
                                       Index, Index, bool, void *, int *,
                                       cudaStream_t);

/// Embedding rows by (optionally sharded) token; shared with
/// VocabParallel.cu through the declaration there.
template <typename T>
void embeddingRows(const char *kernel, const std::int32_t *tokens,
                   const T *table, const std::int32_t *shard, T *result,
                   Index rows, Index vocab, Index channels, int *badId,
                   cudaStream_t stream) {
  checkNonNegative(kernel, {rows, vocab, channels});
  if (rows == 0)
    return;
  const bool packed =
      rowsAligned16<T>(table, channels) && rowsAligned16<T>(result, channels);
  embeddingKernel<T><<<gridCount(kernel, rows),
                       rowThreads(loopWork(channels, packed)), 0, stream>>>(
      tokens, table, shard, result, vocab, channels, packed, badId);
  checkLaunch(kernel);
}

template void embeddingRows<float>(const char *, const std::int32_t *,
                                   const float *, const std::int32_t *, float *,
                                   Index, Index, Index, int *, cudaStream_t);
template void embeddingRows<bf16>(const char *, const std::int32_t *,
                                  const bf16 *, const std::int32_t *, bf16 *,
                                  Index, Index, Index, int *, cudaStream_t);

} // namespace detail

namespace {

struct AddPosition {
  __device__ void operator()(Index, const float *x, float *y) const {
    y[0] = x[0] + x[1];
  }
};

template <typename T>
__global__ void __launch_bounds__(kMaxRowThreads)
    positionEmbeddingKernel(const T *input, const T *table, T *result,
                            Index seq, Index channels, bool packed) {
  const Index row = blockIdx.x;
  const Index offset = row * channels;
  AddPosition fn;
  mapElements(
      PtrList<const T *, 2>{{input + offset, table + (row % seq) * channels}},
      PtrList<T *, 1>{{result + offset}}, channels, packed, threadIdx.x,
      blockDim.x, fn);
}

/// result[t, c] = sum over b, in order, of grad[b, t, c] (one element per
/// thread, loads coalesced across c).
template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    positionEmbeddingGradKernel(const T *grad, T *result, Index batch,
                                Index seq, Index positions, Index channels) {
  const Index total = positions * channels;
  const Index plane = seq * channels;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    float acc = 0.0f;
    if (i < plane) {
      Index b = 0;
      for (; b + 4 <= batch; b += 4) {
        const float v0 = load(grad + b * plane + i);
        const float v1 = load(grad + (b + 1) * plane + i);
        const float v2 = load(grad + (b + 2) * plane + i);
        const float v3 = load(grad + (b + 3) * plane + i);
        acc += v0;
        acc += v1;
        acc += v2;
        acc += v3;
      }
      for (; b < batch; ++b)
        acc += load(grad + b * plane + i);
    }
    store(result + i, acc);
  }
}

} // namespace

template <typename T>
void embedding(const std::int32_t *tokens, const T *table, T *result,
               Index rows, Index vocab, Index channels, int *badId,
               cudaStream_t stream) {
  embeddingRows<T>("embedding", tokens, table, nullptr, result, rows, vocab,
                   channels, badId, stream);
}

std::size_t embeddingGradWorkspaceSize(Index rows, Index vocab,
                                       Index channels) {
  checkNonNegative("embedding_grad", {rows, vocab, channels});
  return scatterRowsByTokenWorkspaceSize("embedding_grad", rows, vocab);
}

template <typename T>
void embeddingGrad(const T *grad, const std::int32_t *tokens, T *result,
                   Index rows, Index vocab, Index channels, bool accumulate,
                   void *workspace, int *badId, cudaStream_t stream) {
  const char *kernel = "embedding_grad";
  checkNonNegative(kernel, {rows, vocab, channels});
  scatterRowsByToken<T>(kernel, grad, tokens, nullptr, result, rows, vocab,
                        channels, accumulate, workspace, badId, stream);
}

template <typename T>
void positionEmbedding(const T *input, const T *table, T *result, Index batch,
                       Index seq, Index channels, cudaStream_t stream) {
  const char *kernel = "position_embedding";
  checkNonNegative(kernel, {batch, seq, channels});
  const Index rows = batch * seq;
  if (rows == 0 || channels == 0)
    return;
  const bool packed = rowsAligned16<T>(input, channels) &&
                      rowsAligned16<T>(table, channels) &&
                      rowsAligned16<T>(result, channels);
  positionEmbeddingKernel<T>
      <<<gridCount(kernel, rows), rowThreads(loopWork(channels, packed)), 0,
         stream>>>(input, table, result, seq, channels, packed);
  checkLaunch(kernel);
}

template <typename T>
void positionEmbeddingGrad(const T *grad, T *result, Index batch, Index seq,
                           Index positions, Index channels,
                           cudaStream_t stream) {
  const char *kernel = "position_embedding_grad";
  checkNonNegative(kernel, {batch, seq, positions, channels});
  if (positions < seq)
    fail(kernel, "the table has " + std::to_string(positions) +
                     " positions, fewer than the sequence length " +
                     std::to_string(seq));
  const Index total = positions * channels;
  if (total == 0)
    return;
  positionEmbeddingGradKernel<T>
      <<<flatBlocks(total), kFlatThreads, 0, stream>>>(grad, result, batch, seq,
                                                       positions, channels);
  checkLaunch(kernel);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void embedding<T>(const std::int32_t *, const T *, T *, Index,      \
                             Index, Index, int *, cudaStream_t);               \
  template void embeddingGrad<T>(const T *, const std::int32_t *, T *, Index,  \
                                 Index, Index, bool, void *, int *,            \
                                 cudaStream_t);                                \
  template void positionEmbedding<T>(const T *, const T *, T *, Index, Index,  \
                                     Index, cudaStream_t);                     \
  template void positionEmbeddingGrad<T>(const T *, T *, Index, Index, Index,  \
                                         Index, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
