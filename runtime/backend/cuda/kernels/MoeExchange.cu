//===- MoeExchange.cu - the filled rows of a counted all-to-all -----------===//
//
// A counted all-to-all (docs/moe.md) moves only the rows its counts fill.
// The sender packs, per destination rank, the filled rows of the cells that
// rank takes, ranks in order and cells in order within a rank; the receiver
// unpacks each source rank's rows into its cells and zeroes the rest (the
// expert GEMMs rely on zeros past the counts). The same layout as the CPU
// backend's (runtime/backend/cpu/CpuAllToAll.cpp), so the bytes on the wire
// agree.
//
// One block per cell. Thread 0 finds the cell's first row in the packed
// buffer by summing the counts of the cells packed before it (cells are
// few, a layer's experts times a few rows of the batch), then the block
// copies the cell's rows: no two blocks touch one row, so no atomics.
// Counts are checked by the host before the launch (it reads them anyway
// to size the NCCL transfers); the kernels clamp, so a count changed
// behind its back can never index outside a buffer.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/kernels/KernelSupport.cuh"
#include "runtime/backend/cuda/kernels/Moe.h"

namespace partition::runtime::cuda {

using namespace detail;

namespace {

constexpr int kExchangeThreads = 256;

__device__ __forceinline__ Index cellRank(Index cell,
                                          const CountedCells &cells) {
  return (cell / cells.stride) % cells.dimSize / cells.per;
}

__device__ __forceinline__ Index filledRows(const std::int32_t *counts,
                                            Index cell, Index rows) {
  const Index filled = counts[cell];
  return filled < 0 ? 0 : (filled > rows ? rows : filled);
}

/// The first packed row of cell `cell`: the filled rows of every cell of a
/// lower rank, and of the cells before it of its own rank.
__device__ Index packedRow(const std::int32_t *counts, Index cell,
                           const CountedCells &cells) {
  const Index rank = cellRank(cell, cells);
  Index row = 0;
  for (Index other = 0; other < cells.count; ++other) {
    const Index otherRank = cellRank(other, cells);
    if (otherRank < rank || (otherRank == rank && other < cell))
      row += filledRows(counts, other, cells.rows);
  }
  return row;
}

/// U: the element's bits (2 or 4 bytes): the exchange moves bits.
template <typename U>
__global__ void __launch_bounds__(kExchangeThreads)
    countedRowsKernel(const U *from, const std::int32_t *counts, U *to,
                      CountedCells cells, bool pack) {
  __shared__ Index first;
  for (Index cell = blockIdx.x; cell < cells.count; cell += gridDim.x) {
    if (threadIdx.x == 0)
      first = packedRow(counts, cell, cells);
    __syncthreads();
    const Index filled = filledRows(counts, cell, cells.rows) * cells.inner;
    const Index whole = cells.rows * cells.inner;
    const Index packedAt = first * cells.inner, cellAt = cell * whole;
    if (pack) {
      for (Index i = threadIdx.x; i < filled; i += blockDim.x)
        to[packedAt + i] = from[cellAt + i];
    } else {
      for (Index i = threadIdx.x; i < whole; i += blockDim.x)
        to[cellAt + i] = i < filled ? from[packedAt + i] : U(0);
    }
    // `first` is rewritten for the block's next cell.
    __syncthreads();
  }
}

void launchCountedRows(const char *kernel, const void *from,
                       const std::int32_t *counts, void *to,
                       const CountedCells &cells, int bytesPerElement,
                       bool pack, cudaStream_t stream) {
  checkNonNegative(kernel, {cells.count, cells.rows, cells.inner});
  if (cells.stride < 1 || cells.dimSize < 1 || cells.per < 1)
    fail(kernel, "a cell's rank needs a positive stride, size and block "
                 "along the split dimension");
  if (cells.count == 0)
    return;
  const unsigned grid =
      static_cast<unsigned>(std::min<Index>(cells.count, 65535));
  if (bytesPerElement == 4)
    countedRowsKernel<std::uint32_t><<<grid, kExchangeThreads, 0, stream>>>(
        static_cast<const std::uint32_t *>(from), counts,
        static_cast<std::uint32_t *>(to), cells, pack);
  else if (bytesPerElement == 2)
    countedRowsKernel<std::uint16_t><<<grid, kExchangeThreads, 0, stream>>>(
        static_cast<const std::uint16_t *>(from), counts,
        static_cast<std::uint16_t *>(to), cells, pack);
  else
    fail(kernel, "bytesPerElement is " + std::to_string(bytesPerElement) +
                     ", must be 2 or 4");
  checkLaunch(kernel);
}

} // namespace

void packCountedRows(const void *input, const std::int32_t *counts,
                     void *packed, const CountedCells &cells,
                     int bytesPerElement, cudaStream_t stream) {
  launchCountedRows("pack_counted_rows", input, counts, packed, cells,
                    bytesPerElement, /*pack=*/true, stream);
}

void unpackCountedRows(const void *packed, const std::int32_t *counts,
                       void *output, const CountedCells &cells,
                       int bytesPerElement, cudaStream_t stream) {
  launchCountedRows("unpack_counted_rows", packed, counts, output, cells,
                    bytesPerElement, /*pack=*/false, stream);
}

} // namespace partition::runtime::cuda
