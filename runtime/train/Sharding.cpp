//===- Sharding.cpp - blocks of sharded state tensors ---------------------===//

#include "runtime/train/Sharding.h"

#include <algorithm>
#include <cstring>

namespace partition::runtime {

std::vector<int64_t> blockIndices(const Sharding &sharding,
                                  const std::vector<int64_t> &coordinates,
                                  const std::vector<int64_t> &sizes) {
  std::vector<int64_t> block;
  for (const std::vector<uint32_t> &axes : sharding) {
    int64_t index = 0;
    for (uint32_t axis : axes)
      index = index * sizes[axis] + coordinates[axis];
    block.push_back(index);
  }
  return block;
}

std::vector<uint32_t> shardingGroup(const Sharding &sharding) {
  std::vector<uint32_t> axes;
  for (const std::vector<uint32_t> &dim : sharding)
    axes.insert(axes.end(), dim.begin(), dim.end());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

std::vector<int64_t> groupMemberCoordinates(
    const std::vector<int64_t> &coordinates, const std::vector<uint32_t> &axes,
    const std::vector<int64_t> &sizes, int64_t member) {
  std::vector<int64_t> result = coordinates;
  for (size_t i = axes.size(); i-- > 0;) {
    result[axes[i]] = member % sizes[axes[i]];
    member /= sizes[axes[i]];
  }
  return result;
}

namespace {

/// Calls copy(localOffset, logicalOffset, count) for each row (innermost
/// dimension) of the block.
template <typename Copy>
void forEachRow(const std::vector<int64_t> &logicalShape,
                const std::vector<int64_t> &local,
                const std::vector<int64_t> &block, Copy copy) {
  size_t rank = local.size();
  if (rank == 0) {
    copy(0, 0, 1);
    return;
  }
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= local[d];
  int64_t width = local[rank - 1];
  if (rows == 0 || width == 0)
    return;
  std::vector<int64_t> index(rank, 0); // within the block, the last stays 0
  for (int64_t row = 0; row < rows; ++row) {
    int64_t logicalOffset = 0;
    for (size_t d = 0; d < rank; ++d)
      logicalOffset =
          logicalOffset * logicalShape[d] + block[d] * local[d] + index[d];
    copy(row * width, logicalOffset, width);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < local[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace

void extractBlock(const float *logical,
                  const std::vector<int64_t> &logicalShape,
                  const std::vector<int64_t> &local,
                  const std::vector<int64_t> &block, float *out) {
  forEachRow(logicalShape, local, block,
             [&](int64_t localOffset, int64_t logicalOffset, int64_t count) {
               std::memcpy(out + localOffset, logical + logicalOffset,
                           size_t(count) * sizeof(float));
             });
}

void insertBlock(const float *in, const std::vector<int64_t> &local,
                 const std::vector<int64_t> &block,
                 const std::vector<int64_t> &logicalShape, float *logical) {
  forEachRow(logicalShape, local, block,
             [&](int64_t localOffset, int64_t logicalOffset, int64_t count) {
               std::memcpy(logical + logicalOffset, in + localOffset,
                           size_t(count) * sizeof(float));
             });
}

} // namespace partition::runtime
