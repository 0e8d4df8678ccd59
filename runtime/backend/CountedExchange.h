//===- CountedExchange.h - a counted all-to-all's host side -----*- C++ -*-===//
//
// What both backends compute on the host for a mixture of experts'
// all-to-all with counts (docs/moe.md; CpuAllToAll.cpp and the CUDA
// backend's compileCountedAllToAll): a buffer's cells and the rank each
// belongs to, and, from the counts, the rows each rank sends or receives,
// which size the transfers. Header-only so that the CUDA kernel tests
// check it beside the kernels (unittests/runtime/cuda/kernels/MoeTest.cpp).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_COUNTEDEXCHANGE_H
#define PARTITION_RUNTIME_BACKEND_COUNTEDEXCHANGE_H

#include "runtime/backend/CountedCells.h"
#include "runtime/program/Program.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partition::runtime {

/// A counted all-to-all buffer's cells (its dimensions before rowsDim) and
/// which group rank each belongs to along `dim`.
inline CountedCells countedCells(const BufferInfo &buffer, uint32_t rowsDim,
                                 uint32_t dim, int64_t ranks) {
  CountedCells cells;
  cells.count = 1;
  for (uint32_t d = 0; d < rowsDim; ++d)
    cells.count *= buffer.shape[d];
  cells.rows = buffer.shape[rowsDim];
  for (size_t d = rowsDim + 1; d < buffer.shape.size(); ++d)
    cells.inner *= buffer.shape[d];
  for (uint32_t d = dim + 1; d < rowsDim; ++d)
    cells.stride *= buffer.shape[d];
  cells.dimSize = buffer.shape[dim];
  cells.per = buffer.shape[dim] / ranks;
  return cells;
}

/// The group rank of cell `cell`.
inline int64_t rankOf(const CountedCells &cells, int64_t cell) {
  return cell / cells.stride % cells.dimSize / cells.per;
}

/// The rows each group rank sends (or receives), from a cell's counts read
/// back to the host; a count outside [0, rows] is a corrupt program.
/// `what` names the collective (its label), `name` the buffer.
inline std::vector<int64_t> rowsPerRank(const int32_t *counts,
                                        const CountedCells &cells,
                                        int64_t ranks, const std::string &what,
                                        const std::string &name) {
  std::vector<int64_t> rows(size_t(ranks), 0);
  for (int64_t c = 0; c < cells.count; ++c) {
    int32_t filled = counts[c];
    if (filled < 0 || filled > cells.rows)
      throw ProgramError(what + ": " + std::to_string(filled) +
                         " filled rows counted in a cell of '" + name +
                         "', which holds " + std::to_string(cells.rows));
    rows[size_t(rankOf(cells, c))] += filled;
  }
  return rows;
}

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_BACKEND_COUNTEDEXCHANGE_H
