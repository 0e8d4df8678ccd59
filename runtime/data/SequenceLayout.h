//===- SequenceLayout.h - the zigzag order of context parallelism -*- C++ -*-//
//
// With context parallelism and its zigzag load balance (docs/
// context-parallel.md) a program takes each sequence cut into N = 2 x cp
// equal chunks and reordered 0, N-1, 1, N-2, ...: the r-th of the cp
// contiguous blocks of that order holds chunks r and N-1-r, one early and
// one late, so that every rank does the same share of causal attention.
// The compiler says so in the program (ptp::Program.sequence_chunks) and
// gives attention the positions of that order (xfmr.sequence_positions,
// which computes the same layoutPosition); the runtime reorders the tokens
// and targets it feeds, and puts the logits it dumps back in order.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_DATA_SEQUENCELAYOUT_H
#define PARTITION_RUNTIME_DATA_SEQUENCELAYOUT_H

#include <algorithm>
#include <cstdint>
#include <vector>

namespace partition::runtime::data {

/// The position in the natural order of element `index` of a sequence of
/// `length` in the layout order of `chunks` chunks (1: the natural order).
inline int64_t layoutPosition(int64_t index, int64_t length, int64_t chunks) {
  if (chunks <= 1)
    return index;
  int64_t chunk = length / chunks, block = index / chunk;
  int64_t source = block % 2 == 0 ? block / 2 : chunks - 1 - block / 2;
  return source * chunk + index % chunk;
}

/// Rows of `length` x `width` elements reordered along the sequence:
/// toLayout puts each row's natural order into layout order, and the
/// reverse when !toLayout.
template <typename T>
std::vector<T> reorderSequences(const std::vector<T> &rows, int64_t length,
                                int64_t width, int64_t chunks, bool toLayout) {
  if (chunks <= 1)
    return rows;
  std::vector<T> out(rows.size());
  const int64_t rowSize = length * width;
  const int64_t count = int64_t(rows.size()) / rowSize;
  for (int64_t row = 0; row < count; ++row)
    for (int64_t index = 0; index < length; ++index) {
      int64_t natural = layoutPosition(index, length, chunks);
      int64_t from = toLayout ? natural : index, to = toLayout ? index : natural;
      std::copy_n(rows.begin() + row * rowSize + from * width, width,
                  out.begin() + row * rowSize + to * width);
    }
  return out;
}

} // namespace partition::runtime::data

#endif // PARTITION_RUNTIME_DATA_SEQUENCELAYOUT_H
