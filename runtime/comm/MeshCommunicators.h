//===- MeshCommunicators.h - a communicator per group of axes ---*- C++ -*-===//
//
// A program partitioned for a device mesh (say dp=2 x tp=2) runs on
// product(sizes) ranks, numbered with the first axis major: rank =
// ((c0 * s1) + c1) * s2 + c2 for coordinates c and sizes s. A collective over
// a set of axes A runs in the group of ranks that share every coordinate
// outside A (over [dp]: the ranks with the same tp coordinate), ranked by
// their coordinates on A in the same order.
//
// Every group the program needs is split from the world communicator
// eagerly, at start-up, in one order (the sets of axes sorted), on every
// rank: Communicator::split is a collective over the world, so creating
// groups lazily (on first use, in whatever order instructions reach them)
// could deadlock ranks whose programs differ in order. The NCCL
// implementation does the same with ncclCommSplit.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_COMM_MESHCOMMUNICATORS_H
#define PARTITION_RUNTIME_COMM_MESHCOMMUNICATORS_H

#include "runtime/comm/Communicator.h"

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

namespace partition::runtime::comm {

struct MeshAxisSize {
  std::string name;
  int64_t size = 1;
};

/// The coordinates of `rank` on a mesh of `sizes` (first axis major).
std::vector<int64_t> meshCoordinates(int64_t rank,
                                     const std::vector<int64_t> &sizes);
/// The inverse of meshCoordinates.
int64_t meshRank(const std::vector<int64_t> &coordinates,
                 const std::vector<int64_t> &sizes);

class MeshCommunicators {
public:
  /// Splits `world` (collective over it) into one communicator per entry of
  /// `groups` (each a strictly increasing list of indices into `mesh`).
  /// Throws std::invalid_argument, before any communication, when
  /// world.size() is not the mesh's device count or a group is malformed,
  /// so every rank fails alike. `world` must outlive this object.
  MeshCommunicators(Communicator &world, std::vector<MeshAxisSize> mesh,
                    const std::vector<std::vector<uint32_t>> &groups,
                    int64_t step = -1);

  Communicator &world() const { return world_; }
  const std::vector<MeshAxisSize> &mesh() const { return mesh_; }
  /// This rank's coordinate on each axis of the mesh.
  const std::vector<int64_t> &coordinates() const { return coordinates_; }
  /// This rank's coordinate on the axis called `name`; 0 when the mesh has
  /// no such axis (a missing axis is an axis of size 1).
  int64_t coordinate(const std::string &name) const;
  /// The size of the axis called `name`, 1 when absent.
  int64_t axisSize(const std::string &name) const;
  /// The communicator over `axes`, or null when it was not created.
  Communicator *group(const std::vector<uint32_t> &axes) const;

  /// Collective over the world (every rank, the same `groups`): when every
  /// rank's transport lets two threads communicate at once
  /// (Communicator::concurrentThreads), splits a second communicator per
  /// group for started collectives, which the CPU backend runs on a thread
  /// of its own: MPI matches collectives on one communicator by their order
  /// of issue, so the two threads must never share one. Otherwise creates
  /// none, alike on every rank, and started collectives run synchronously.
  void addStartedGroups(const std::vector<std::vector<uint32_t>> &groups,
                        int64_t step = -1);
  /// The communicator of started collectives over `axes`, or null.
  Communicator *startedGroup(const std::vector<uint32_t> &axes) const;

  /// Collective over the world (every rank, the same `pairs` in the same
  /// order): splits one communicator per ordered pair (from, to) of
  /// coordinates on mesh axis `axis` (the pipeline axis), each holding the
  /// two ranks with those coordinates that share every other coordinate:
  /// the sender (coordinate `from`) is its rank 0, the receiver its rank 1.
  /// A pair's transfers then never share a communicator with any other
  /// traffic, which NCCL needs to run sends on a stream of their own.
  void addTransferPairs(uint32_t axis,
                        const std::vector<std::pair<int64_t, int64_t>> &pairs,
                        int64_t step = -1);
  /// The communicator of transfers from coordinate `from` to `to` on the
  /// transfer axis, or null when this rank is in neither or it was not
  /// created.
  Communicator *transferGroup(int64_t from, int64_t to) const;
  /// "dp", "dp+tp": how a group is named in messages.
  std::string groupName(const std::vector<uint32_t> &axes) const;

private:
  /// Collective over the world: the group of the ranks that share this
  /// rank's coordinates outside `axes`, named groupName(axes) + suffix.
  std::unique_ptr<Communicator> splitGroup(const std::vector<uint32_t> &axes,
                                           const std::string &suffix,
                                           int64_t step);
  Communicator &world_;
  std::vector<MeshAxisSize> mesh_;
  std::vector<int64_t> coordinates_;
  std::map<std::vector<uint32_t>, std::unique_ptr<Communicator>> groups_;
  std::map<std::vector<uint32_t>, std::unique_ptr<Communicator>> started_;
  std::map<std::pair<int64_t, int64_t>, std::unique_ptr<Communicator>>
      transfers_;
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_MESHCOMMUNICATORS_H
