//===- CountedCells.h - the cells of a counted all-to-all -------*- C++ -*-===//
//
// A mixture of experts' all-to-all with counts (docs/moe.md) moves, per
// cell of its buffer, only the rows its count fills. Both backends lay the
// moved rows out alike (rank by rank, cells in order within a rank): the
// CPU one for MPI_Alltoallv (runtime/backend/cpu/CpuAllToAll.cpp), the
// CUDA one for its pack kernels and NCCL (kernels/MoeExchange.cu). No
// dependencies, so that device code includes it too.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_COUNTEDCELLS_H
#define PARTITION_RUNTIME_BACKEND_COUNTEDCELLS_H

#include <cstdint>

namespace partition::runtime {

/// A counted all-to-all's buffer: `count` cells (its dimensions before
/// rows_dim, row-major), each `rows` rows of `inner` elements; cell c goes
/// to (or comes from) group rank (c / stride) % dimSize / per, where
/// stride is the product of the cell dimensions after the split (or
/// concat) dimension and dimSize its size.
struct CountedCells {
  std::int64_t count = 0, rows = 0, inner = 1;
  std::int64_t stride = 1, dimSize = 1, per = 1;
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_BACKEND_COUNTEDCELLS_H
