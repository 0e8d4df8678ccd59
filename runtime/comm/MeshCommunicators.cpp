//===- MeshCommunicators.cpp - one communicator per group of mesh axes ----===//

#include "runtime/comm/MeshCommunicators.h"

#include <set>
#include <stdexcept>

namespace partition::runtime::comm {

std::vector<int64_t> meshCoordinates(int64_t rank,
                                     const std::vector<int64_t> &sizes) {
  std::vector<int64_t> coordinates(sizes.size());
  for (size_t i = sizes.size(); i-- > 0;) {
    coordinates[i] = rank % sizes[i];
    rank /= sizes[i];
  }
  return coordinates;
}

int64_t meshRank(const std::vector<int64_t> &coordinates,
                 const std::vector<int64_t> &sizes) {
  int64_t rank = 0;
  for (size_t i = 0; i < sizes.size(); ++i)
    rank = rank * sizes[i] + coordinates[i];
  return rank;
}

MeshCommunicators::MeshCommunicators(
    Communicator &world, std::vector<MeshAxisSize> mesh,
    const std::vector<std::vector<uint32_t>> &groups, int64_t step)
    : world_(world), mesh_(std::move(mesh)) {
  std::vector<int64_t> sizes;
  int64_t devices = 1;
  for (const MeshAxisSize &axis : mesh_) {
    if (axis.size < 1)
      throw std::invalid_argument("mesh axis '" + axis.name +
                                  "' has a non-positive size");
    sizes.push_back(axis.size);
    devices *= axis.size;
  }
  if (devices != world.size())
    throw std::invalid_argument("the mesh has " + std::to_string(devices) +
                                " devices but the job " +
                                std::to_string(world.size()) + " ranks");
  // Sorted and deduplicated: the same splits in the same order everywhere.
  std::set<std::vector<uint32_t>> unique;
  for (const std::vector<uint32_t> &axes : groups) {
    if (axes.empty())
      throw std::invalid_argument("a group of no mesh axes");
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] >= mesh_.size() || (i > 0 && axes[i] <= axes[i - 1]))
        throw std::invalid_argument("group axes must be strictly increasing "
                                    "indices into the mesh");
    unique.insert(axes);
  }
  coordinates_ = meshCoordinates(world.rank(), sizes);
  for (const std::vector<uint32_t> &axes : unique) {
    std::vector<int64_t> outside, outsideSizes, inside, insideSizes;
    for (size_t i = 0, a = 0; i < mesh_.size(); ++i) {
      bool in = a < axes.size() && axes[a] == i;
      (in ? inside : outside).push_back(coordinates_[i]);
      (in ? insideSizes : outsideSizes).push_back(sizes[i]);
      a += in;
    }
    int color = static_cast<int>(meshRank(outside, outsideSizes));
    int key = static_cast<int>(meshRank(inside, insideSizes));
    std::string name = groupName(axes);
    groups_[axes] = world.split(color, key, {name.c_str(), step});
  }
}

int64_t MeshCommunicators::coordinate(const std::string &name) const {
  for (size_t i = 0; i < mesh_.size(); ++i)
    if (mesh_[i].name == name)
      return coordinates_[i];
  return 0;
}

int64_t MeshCommunicators::axisSize(const std::string &name) const {
  for (const MeshAxisSize &axis : mesh_)
    if (axis.name == name)
      return axis.size;
  return 1;
}

Communicator *
MeshCommunicators::group(const std::vector<uint32_t> &axes) const {
  auto found = groups_.find(axes);
  return found == groups_.end() ? nullptr : found->second.get();
}

std::string
MeshCommunicators::groupName(const std::vector<uint32_t> &axes) const {
  std::string name;
  for (uint32_t axis : axes)
    name += (name.empty() ? "" : "+") +
            (axis < mesh_.size() ? mesh_[axis].name : std::to_string(axis));
  return name;
}

} // namespace partition::runtime::comm
