//===- ProgramQueries.cpp - what a loaded program answers -----------------===//
//
// The names of Program.h's enums and the questions the runtime asks a
// loaded Program: buffers by role, functions by name, the mesh and its
// axes, the replica of a rank, the selected stream. Loading and checking a
// program is Program.cpp and ProgramChecks.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/Program.h"

#include <algorithm>

namespace partition::runtime {

std::vector<uint32_t> BufferInfo::stateGroup() const {
  std::vector<uint32_t> axes = flatAxes;
  for (const std::vector<uint32_t> &dim : sharding)
    axes.insert(axes.end(), dim.begin(), dim.end());
  std::sort(axes.begin(), axes.end());
  axes.erase(std::unique(axes.begin(), axes.end()), axes.end());
  return axes;
}

const char *roleName(Role role) {
  static const char *names[] = {"temporary", "param",   "moment1",
                                "moment2",   "step",    "lr",
                                "tokens",    "targets", "loss",
                                "gradient",  "axis_index", "logits"};
  return names[static_cast<int>(role)];
}

const char *tierName(Tier tier) {
  static const char *names[] = {"arena", "host", "nvme"};
  return names[static_cast<int>(tier)];
}

const char *dtypeName(DType dtype) {
  static const char *names[] = {"f32", "i32", "bf16"};
  return names[static_cast<int>(dtype)];
}

const char *collectiveKindName(CollectiveKind kind) {
  static const char *names[] = {"all_reduce", "all_gather", "reduce_scatter",
                                "ring_shift", "all_to_all"};
  return names[static_cast<int>(kind)];
}

std::pair<int64_t, int64_t> outerAndInner(const std::vector<int64_t> &shape,
                                          uint32_t dim) {
  int64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < dim; ++d)
    outer *= shape[d];
  for (size_t d = dim + 1; d < shape.size(); ++d)
    inner *= shape[d];
  return {outer, inner};
}

const char *reduceKindName(ReduceKind reduce) {
  static const char *names[] = {"sum", "avg", "max"};
  return names[static_cast<int>(reduce)];
}

const BufferInfo &Program::single(Role role) const {
  std::vector<size_t> found = withRole(role);
  if (found.size() != 1)
    throw ProgramError(std::string("program has ") +
                       std::to_string(found.size()) + " " + roleName(role) +
                       " buffers, expected one");
  return buffers[found.front()];
}

std::vector<size_t> Program::withRole(Role role) const {
  std::vector<size_t> result;
  for (size_t i = 0; i < buffers.size(); ++i)
    if (buffers[i].role == role)
      result.push_back(i);
  return result;
}

const Function *Program::function(const std::string &name) const {
  for (const Function &candidate : functions)
    if (candidate.name == name)
      return &candidate;
  return nullptr;
}

std::pair<size_t, int> Program::replicaOf(int rank) const {
  int first = 0;
  for (size_t i = 0; i < replicas.size(); ++i) {
    if (rank < first + replicas[i].tp)
      return {i, rank - first};
    first += int(replicas[i].tp);
  }
  throw ProgramError("rank " + std::to_string(rank) +
                     " is past the program's replicas");
}

int64_t Program::devices() const {
  if (!replicas.empty()) {
    int64_t sum = 0;
    for (const ReplicaProgram &replica : replicas)
      sum += replica.tp;
    return sum;
  }
  int64_t product = 1;
  for (const MeshAxis &axis : mesh)
    product *= axis.size;
  return product;
}

std::string Program::describeMesh() const {
  if (!replicas.empty()) {
    std::string text = "replicas tp=";
    for (size_t i = 0; i < replicas.size(); ++i)
      text += (i ? "," : "") + std::to_string(replicas[i].tp);
    return text;
  }
  if (mesh.empty())
    return "no mesh";
  std::string text = "mesh";
  for (const MeshAxis &axis : mesh)
    text += " " + axis.name + "=" + std::to_string(axis.size);
  return text;
}

int Program::dataAxisIndex() const {
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].role == AxisRole::Data)
      return static_cast<int>(i);
  return -1;
}

std::vector<uint32_t> Program::dataAxisIndices() const {
  std::vector<uint32_t> axes;
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].role == AxisRole::Data || mesh[i].role == AxisRole::Expert)
      axes.push_back(uint32_t(i));
  return axes;
}

int Program::axisIndex(const std::string &name) const {
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].name == name)
      return static_cast<int>(i);
  return -1;
}

bool Program::hasCollectives() const {
  for (const Stream &each : streams)
    for (const Function &function : each.functions)
      for (const Instruction &instruction : function.instructions)
        if (instruction.collective || instruction.transfer)
          return true;
  for (const Function &function : functions)
    for (const Instruction &instruction : function.instructions)
      if (instruction.collective || instruction.transfer)
        return true;
  return false;
}

int Program::pipelineAxisIndex() const {
  for (size_t i = 0; i < mesh.size(); ++i)
    if (mesh[i].role == AxisRole::Pipeline)
      return static_cast<int>(i);
  return -1;
}

void Program::selectStream(size_t index) {
  if (index >= streams.size())
    throw ProgramError("the program has " + std::to_string(streams.size()) +
                       " instruction streams, no stream " +
                       std::to_string(index));
  stream = index;
  arenaBytes = streams[index].arenaBytes;
  buffers = streams[index].buffers;
  functions = streams[index].functions;
  hostBytes = streams[index].hostBytes;
  nvmeBytes = streams[index].nvmeBytes;
}

bool Program::hasTiers() const {
  for (const Stream &each : streams)
    if (each.hostBytes > 0 || each.nvmeBytes > 0)
      return true;
  for (const ReplicaProgram &replica : replicas)
    if (replica.program->hasTiers())
      return true;
  return hostBytes > 0 || nvmeBytes > 0;
}

std::vector<std::pair<size_t, size_t>>
Program::withRoleInStreams(Role role) const {
  std::vector<std::pair<size_t, size_t>> result;
  for (size_t k = 0; k < streams.size(); ++k)
    for (size_t i = 0; i < streams[k].buffers.size(); ++i)
      if (streams[k].buffers[i].role == role)
        result.push_back({k, i});
  return result;
}

std::vector<uint32_t>
Program::axisIndexAxes(const BufferInfo &buffer) const {
  std::vector<uint32_t> axes;
  size_t begin = 0;
  while (true) {
    size_t end = buffer.name.find(',', begin);
    std::string axis = buffer.name.substr(
        begin, end == std::string::npos ? std::string::npos : end - begin);
    int index = axisIndex(axis);
    if (index < 0)
      throw ProgramError("'" + axis + "' is not an axis of the " +
                         describeMesh());
    if (std::find(axes.begin(), axes.end(), uint32_t(index)) != axes.end())
      throw ProgramError("axis '" + axis + "' is listed twice");
    axes.push_back(static_cast<uint32_t>(index));
    if (end == std::string::npos)
      return axes;
    begin = end + 1;
  }
}

int64_t Program::modelInt(const char *field) const {
  auto it = model.find(field);
  if (it == model.end() || !it->is_number_integer())
    throw ProgramError(std::string("the program's model description has no "
                                   "integer '") +
                       field + "'");
  return it->get<int64_t>();
}

} // namespace partition::runtime
