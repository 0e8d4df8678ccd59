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
  for (const std::vector<uint32_t> &axes : unique)
    groups_[axes] = splitGroup(axes, "", step);
}

std::unique_ptr<Communicator>
MeshCommunicators::splitGroup(const std::vector<uint32_t> &axes,
                              const std::string &suffix, int64_t step) {
  std::vector<int64_t> outside, outsideSizes, inside, insideSizes;
  for (size_t i = 0, a = 0; i < mesh_.size(); ++i) {
    bool in = a < axes.size() && axes[a] == i;
    (in ? inside : outside).push_back(coordinates_[i]);
    (in ? insideSizes : outsideSizes).push_back(mesh_[i].size);
    a += in;
  }
  int color = static_cast<int>(meshRank(outside, outsideSizes));
  int key = static_cast<int>(meshRank(inside, insideSizes));
  std::string name = groupName(axes) + suffix;
  return world_.split(color, key, {name.c_str(), step});
}

void MeshCommunicators::addStartedGroups(
    const std::vector<std::vector<uint32_t>> &groups, int64_t step) {
  // Every rank must decide alike: one rank running a started collective
  // on its own communicator while another runs it on the group's would
  // hang both.
  float concurrent = world_.concurrentThreads() ? 1.0f : 0.0f;
  if (world_.size() > 1)
    world_.allReduce(&concurrent, 1, ReduceOp::Sum,
                     {"communication thread", step});
  if (concurrent < float(world_.size()))
    return;
  std::set<std::vector<uint32_t>> unique(groups.begin(), groups.end());
  for (const std::vector<uint32_t> &axes : unique)
    if (groups_.count(axes) && !started_.count(axes))
      started_[axes] = splitGroup(axes, " (started)", step);
}

Communicator *
MeshCommunicators::startedGroup(const std::vector<uint32_t> &axes) const {
  auto found = started_.find(axes);
  return found == started_.end() ? nullptr : found->second.get();
}

void MeshCommunicators::addTransferPairs(
    uint32_t axis, const std::vector<std::pair<int64_t, int64_t>> &pairs,
    int64_t step) {
  if (axis >= mesh_.size())
    throw std::invalid_argument("transfer axis #" + std::to_string(axis) +
                                " is not an axis of the mesh");
  std::vector<int64_t> sizes;
  for (const MeshAxisSize &each : mesh_)
    sizes.push_back(each.size);
  // The ranks of one pair are told apart by every other coordinate.
  std::vector<int64_t> outside, outsideSizes;
  for (size_t i = 0; i < mesh_.size(); ++i)
    if (i != axis) {
      outside.push_back(coordinates_[i]);
      outsideSizes.push_back(sizes[i]);
    }
  int color = static_cast<int>(meshRank(outside, outsideSizes));
  std::set<std::pair<int64_t, int64_t>> unique(pairs.begin(), pairs.end());
  for (const auto &[from, to] : unique) {
    if (from == to || from < 0 || to < 0 || from >= sizes[axis] ||
        to >= sizes[axis])
      throw std::invalid_argument("transfer pair " + std::to_string(from) +
                                  "->" + std::to_string(to) +
                                  " is not two coordinates of axis '" +
                                  mesh_[axis].name + "'");
    int64_t mine = coordinates_[axis];
    bool member = mine == from || mine == to;
    std::string name = mesh_[axis].name + " " + std::to_string(from) + "->" +
                       std::to_string(to);
    std::unique_ptr<Communicator> pair =
        world_.split(member ? color : Communicator::kNoColor,
                     mine == from ? 0 : 1, {name.c_str(), step});
    if (member)
      transfers_[{from, to}] = std::move(pair);
  }
}

Communicator *MeshCommunicators::transferGroup(int64_t from,
                                               int64_t to) const {
  auto found = transfers_.find({from, to});
  return found == transfers_.end() ? nullptr : found->second.get();
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
