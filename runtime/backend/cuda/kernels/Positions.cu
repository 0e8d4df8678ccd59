//===- Positions.cu - explicit positions and the attention merge ----------===//
//
// The kernels of context parallelism that are not attention itself:
// sequence_positions (the layout's original positions, zigzag or
// contiguous), position_embedding_at (+ its gradient) and attention_merge
// (the exact combination of two partial attentions by their lse).
//
// position_embedding_at_grad is a scatter-add over the t naming each table
// row. Without atomics: one block per table row (and tile of channels)
// scans the positions in increasing t, a tile at a time through shared
// memory, and adds the grad rows of the t naming it over b in order in an
// fp32 register, writing the row once (zeros for rows no t names). That is
// the CPU kernel's summation order exactly: bitwise reproducible.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

/// positions[j * chunk + i] = source(j) * chunk + i, source(j) = j / 2 (j
/// even) or chunks - 1 - j / 2 (j odd); chunks == 1 gives 0..T-1.
__global__ void __launch_bounds__(kFlatThreads)
    sequencePositionsKernel(std::int32_t *positions, Index length,
                            Index chunks) {
  const Index chunk = length / chunks;
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < length;
       i += Index(gridDim.x) * blockDim.x) {
    const Index j = i / chunk, k = i % chunk;
    const Index source = j % 2 == 0 ? j / 2 : chunks - 1 - j / 2;
    positions[i] = static_cast<std::int32_t>(source * chunk + k);
  }
}

/// result[b, t, :] = input[b, t, :] + table[positions[t], :]; a position
/// outside [0, tablePositions) sets *badId and adds nothing.
template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    positionEmbeddingAtKernel(const T *input, const T *table,
                              const std::int32_t *positions, T *result,
                              Index seq, Index tablePositions, Index channels,
                              Index total, int *badId) {
  for (Index i = Index(blockIdx.x) * blockDim.x + threadIdx.x; i < total;
       i += Index(gridDim.x) * blockDim.x) {
    const Index row = i / channels, c = i % channels;
    const Index p = positions[row % seq];
    float x = load(input + i);
    if (p < 0 || p >= tablePositions) {
      if (c == 0)
        flagBadId(badId);
    } else {
      x += load(table + p * channels + c);
    }
    store(result + i, x);
  }
}

constexpr int kScanThreads = 128;

/// One block per table row p (blockIdx.x) and tile of kScanThreads channels
/// (blockIdx.y): result[p, c] = sum over t with positions[t] == p, in
/// increasing t, of the sum over b in order of grad[b, t, c].
template <typename T>
__global__ void __launch_bounds__(kScanThreads)
    positionEmbeddingAtGradKernel(const T *grad,
                                  const std::int32_t *positions, T *result,
                                  Index batch, Index seq,
                                  Index tablePositions, Index channels,
                                  int *badId) {
  __shared__ std::int32_t tile[kScanThreads];
  const Index p = blockIdx.x;
  const Index c = Index(blockIdx.y) * kScanThreads + threadIdx.x;
  const Index plane = seq * channels;
  float acc = 0.0f;
  for (Index t0 = 0; t0 < seq; t0 += kScanThreads) {
    const Index n = seq - t0 < kScanThreads ? seq - t0 : kScanThreads;
    __syncthreads(); // the previous tile is read by every thread
    if (threadIdx.x < n) {
      const std::int32_t q = positions[t0 + threadIdx.x];
      tile[threadIdx.x] = q;
      // One block reports the bad positions.
      if (p == 0 && blockIdx.y == 0 && (q < 0 || q >= tablePositions))
        flagBadId(badId);
    }
    __syncthreads();
    if (c < channels)
      for (Index j = 0; j < n; ++j) {
        if (tile[j] != p)
          continue;
        const T *g = grad + (t0 + j) * channels + c;
        for (Index b = 0; b < batch; ++b)
          acc += load(g + b * plane);
      }
  }
  if (c < channels)
    store(result + p * channels + c, acc);
}

/// One block per (b, t) row; threads over its features. out may alias
/// outA or outB and lse lseA or lseB: every lse is read before the
/// barrier and written after it.
template <typename T>
__global__ void __launch_bounds__(kFlatThreads)
    attentionMergeKernel(const T *outA, const float *lseA, const T *outB,
                         const float *lseB, T *out, float *lse, Index rows,
                         Index seq, Index heads, Index headDim) {
  const Index features = heads * headDim;
  for (Index bt = blockIdx.x; bt < rows; bt += gridDim.x) {
    const Index b = bt / seq, t = bt % seq;
    for (Index f = threadIdx.x; f < features; f += blockDim.x) {
      const Index h = f / headDim;
      const Index row = (b * heads + h) * seq + t;
      const float la = lseA[row], lb = lseB[row];
      const float m = la > lb ? la : lb;
      const Index i = bt * features + f;
      if (m == -INFINITY) {
        store(out + i, 0.0f);
        continue;
      }
      const float wa = expf(la - m), wb = expf(lb - m);
      const float total = wa + wb;
      const float ca = wa / total, cb = wb / total;
      store(out + i, ca * load(outA + i) + cb * load(outB + i));
    }
    // Thread h of each chunk of heads merges head h's lse (every lse of
    // the row was read above, before the first barrier).
    for (Index h0 = 0; h0 < heads; h0 += blockDim.x) {
      const Index h = h0 + threadIdx.x;
      Index row = -1;
      float value = -INFINITY;
      if (h < heads) {
        row = (b * heads + h) * seq + t;
        const float la = lseA[row], lb = lseB[row];
        const float m = la > lb ? la : lb;
        if (m != -INFINITY) {
          const float wa = expf(la - m), wb = expf(lb - m);
          value = m + log1pf(wa < wb ? wa : wb);
        }
      }
      __syncthreads();
      if (row >= 0)
        lse[row] = value;
    }
  }
}

} // namespace

void sequencePositions(std::int32_t *positions, Index length, Index chunks,
                       cudaStream_t stream) {
  const char *kernel = "sequence_positions";
  checkNonNegative(kernel, {length});
  if (chunks < 1 || (chunks > 1 && (chunks % 2 != 0 || length % chunks != 0)))
    fail(kernel, "chunks " + std::to_string(chunks) +
                     " must be 1, or even and divide the length " +
                     std::to_string(length));
  if (length == 0)
    return;
  sequencePositionsKernel<<<flatBlocks(length), kFlatThreads, 0, stream>>>(
      positions, length, chunks);
  checkLaunch(kernel);
}

template <typename T>
void positionEmbeddingAt(const T *input, const T *table,
                         const std::int32_t *positions, T *result, Index batch,
                         Index seq, Index tablePositions, Index channels,
                         int *badId, cudaStream_t stream) {
  const char *kernel = "position_embedding_at";
  checkNonNegative(kernel, {batch, seq, tablePositions, channels});
  const Index total = batch * seq * channels;
  if (total == 0)
    return;
  positionEmbeddingAtKernel<T><<<flatBlocks(total), kFlatThreads, 0, stream>>>(
      input, table, positions, result, seq, tablePositions, channels, total,
      badId);
  checkLaunch(kernel);
}

template <typename T>
void positionEmbeddingAtGrad(const T *grad, const std::int32_t *positions,
                             T *result, Index batch, Index seq,
                             Index tablePositions, Index channels, int *badId,
                             cudaStream_t stream) {
  const char *kernel = "position_embedding_at_grad";
  checkNonNegative(kernel, {batch, seq, tablePositions, channels});
  if (tablePositions == 0 || channels == 0)
    return;
  const Index tiles = (channels + kScanThreads - 1) / kScanThreads;
  if (tiles > 65535)
    fail(kernel, std::to_string(channels) + " channels exceed the grid");
  const dim3 grid(gridCount(kernel, tablePositions),
                  static_cast<unsigned>(tiles));
  positionEmbeddingAtGradKernel<T><<<grid, kScanThreads, 0, stream>>>(
      grad, positions, result, batch, seq, tablePositions, channels, badId);
  checkLaunch(kernel);
}

template <typename T>
void attentionMerge(const T *outA, const float *lseA, const T *outB,
                    const float *lseB, T *out, float *lse, Index batch,
                    Index seq, Index heads, Index headDim,
                    cudaStream_t stream) {
  const char *kernel = "attention_merge";
  checkNonNegative(kernel, {batch, seq, heads, headDim});
  const Index rows = batch * seq;
  if (rows == 0 || heads == 0)
    return;
  const unsigned blocks =
      static_cast<unsigned>(std::min<Index>(rows, Index(1) << 16));
  attentionMergeKernel<T><<<blocks, kFlatThreads, 0, stream>>>(
      outA, lseA, outB, lseB, out, lse, rows, seq, heads, headDim);
  checkLaunch(kernel);
}

#define PARTITION_INSTANTIATE(T)                                               \
  template void positionEmbeddingAt<T>(const T *, const T *,                   \
                                       const std::int32_t *, T *, Index,       \
                                       Index, Index, Index, int *,             \
                                       cudaStream_t);                          \
  template void positionEmbeddingAtGrad<T>(const T *, const std::int32_t *,    \
                                           T *, Index, Index, Index, Index,    \
                                           int *, cudaStream_t);               \
  template void attentionMerge<T>(const T *, const float *, const T *,         \
                                  const float *, T *, float *, Index, Index,   \
                                  Index, Index, cudaStream_t);
PARTITION_INSTANTIATE(float)
PARTITION_INSTANTIATE(bf16)
#undef PARTITION_INSTANTIATE

} // namespace partition::runtime::cuda
