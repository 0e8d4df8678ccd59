//===- Sharding.h - blocks of sharded state tensors -------------*- C++ -*-===//
//
// A sharded state buffer (BufferInfo::sharding) holds one device's block of
// a logical tensor: dimension d of the logical tensor is split into as many
// equal blocks as its axes' sizes multiply to, and the device whose index in
// the group of those axes (the first listed axis major) is i holds block i.
// Initialisation and checkpoints work on logical tensors, so a run starts
// from, and saves, the same tensors under every plan; these functions move
// blocks in and out of them.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_SHARDING_H
#define PARTITION_RUNTIME_SHARDING_H

#include <cstdint>
#include <vector>

namespace partition::runtime {

/// Per dimension, the mesh axes it is split over (major first); an empty
/// list keeps the dimension whole.
using Sharding = std::vector<std::vector<uint32_t>>;

/// The block a device at mesh `coordinates` (on a mesh of `sizes`) holds,
/// as a block index per dimension.
std::vector<int64_t> blockIndices(const Sharding &sharding,
                                  const std::vector<int64_t> &coordinates,
                                  const std::vector<int64_t> &sizes);

/// The axes the sharding uses, increasing: the group whose members hold all
/// the blocks of one logical tensor between them.
std::vector<uint32_t> shardingGroup(const Sharding &sharding);

/// The coordinates of the member ranked `member` (first axis major, as
/// comm::MeshCommunicators ranks them) of the group over `axes` (increasing)
/// that holds the device at `coordinates`.
std::vector<int64_t> groupMemberCoordinates(
    const std::vector<int64_t> &coordinates, const std::vector<uint32_t> &axes,
    const std::vector<int64_t> &sizes, int64_t member);

/// Copies block `block` (indices per dimension) of shape `local` out of the
/// row-major `logical` tensor of shape `logicalShape` into `out`.
void extractBlock(const float *logical,
                  const std::vector<int64_t> &logicalShape,
                  const std::vector<int64_t> &local,
                  const std::vector<int64_t> &block, float *out);

/// The inverse: writes `in`, of shape `local`, as block `block` of
/// `logical`.
void insertBlock(const float *in, const std::vector<int64_t> &local,
                 const std::vector<int64_t> &block,
                 const std::vector<int64_t> &logicalShape, float *logical);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_SHARDING_H
