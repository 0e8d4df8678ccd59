//===- Backend.cpp - what every backend shares ----------------------------===//

#include "runtime/Backend.h"

#include "runtime/comm/MeshCommunicators.h"

namespace partition::runtime {

Backend::~Backend() = default;

std::string collectiveName(const Instruction &instruction,
                           const std::string &where) {
  return where + " (" + collectiveKindName(instruction.collective->kind) +
         " '" + instruction.collective->label + "')";
}

comm::Communicator &collectiveGroup(const Program &program,
                                    const Instruction &instruction,
                                    const comm::MeshCommunicators *communicators,
                                    const std::string &where) {
  std::string what = collectiveName(instruction, where);
  if (!communicators)
    throw ProgramError(what + " needs the communicators of the program's " +
                       program.describeMesh() +
                       ", but the backend has none; run it with partition-run");
  const std::vector<uint32_t> &axes = instruction.collective->axes;
  comm::Communicator *group = communicators->group(axes);
  if (!group)
    throw ProgramError(what + " runs over mesh axes '" +
                       communicators->groupName(axes) +
                       "', which have no communicator");
  return *group;
}

comm::ReduceOp reduceOpOf(ReduceKind reduce) {
  switch (reduce) {
  case ReduceKind::Sum:
    return comm::ReduceOp::Sum;
  case ReduceKind::Avg:
    return comm::ReduceOp::Avg;
  case ReduceKind::Max:
    return comm::ReduceOp::Max;
  }
  return comm::ReduceOp::Sum;
}

int32_t axisIndexValue(const Program &program, const BufferInfo &buffer,
                       const comm::MeshCommunicators *communicators) {
  std::vector<uint32_t> axes = program.axisIndexAxes(buffer);
  if (!communicators && program.devices() > 1)
    throw ProgramError("axis index '" + buffer.name + "' needs this rank's "
                       "coordinates on the program's " +
                       program.describeMesh() +
                       ", but the backend has no communicators; run it "
                       "with partition-run");
  int64_t value = 0;
  for (uint32_t axis : axes)
    value = value * program.mesh[axis].size +
            (communicators ? communicators->coordinates().at(axis) : 0);
  return static_cast<int32_t>(value);
}

} // namespace partition::runtime
