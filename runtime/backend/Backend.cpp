//===- Backend.cpp - what every backend shares ----------------------------===//

#include "runtime/backend/Backend.h"

#include "runtime/backend/Trace.h"
#include "runtime/comm/MeshCommunicators.h"

#include <cstdlib>
#include <cstring>
#include <stdexcept>

namespace partition::runtime {

Backend::~Backend() = default;

void traceMicrobatchSpan(TraceRecorder &trace, const Function &function,
                         int64_t index,
                         std::chrono::steady_clock::time_point start,
                         int64_t step) {
  trace.add(microbatchSpanName(function, index), "microbatch", start, step,
            {}, 0, /*tid=*/1);
}

std::string collectiveName(const Instruction &instruction,
                           const std::string &where) {
  return where + " (" + collectiveKindName(instruction.collective->kind) +
         " '" + instruction.collective->label + "')";
}

std::vector<size_t> carriedWaits(const Function &function) {
  static const bool carrying = [] {
    const char *value = std::getenv("PARTITION_CARRIED_WAITS");
    if (!value || std::strcmp(value, "1") == 0)
      return true;
    if (std::strcmp(value, "0") == 0)
      return false;
    throw std::runtime_error(std::string("PARTITION_CARRIED_WAITS=") + value +
                             ": expected 0 (wait at the end of each step) "
                             "or 1");
  }();
  std::vector<size_t> waits;
  // A walk's last instructions are its slots' copies of its regions.
  if (!carrying || function.walk)
    return waits;
  const std::vector<Instruction> &instructions = function.instructions;
  for (size_t w = instructions.size(); w-- > 0;) {
    const Instruction &wait = instructions[w];
    // Only the function's last instructions, and only waits of collectives
    // (a tier copy's wait stays: its engine's buffers are the rank's own).
    if (!wait.waitFor || !instructions[*wait.waitFor].collective)
      break;
    if (function.loop && w < function.loop->end)
      break;
    waits.push_back(w);
  }
  return waits;
}

TraceSpan traceSpanOf(const Program &program, const Function &function,
                      const Instruction &instruction) {
  TraceSpan span;
  if (instruction.transfer) {
    span.category = transferKindName(*instruction.transfer);
    span.label = instruction.transfer->label;
    span.name = span.category + " " + span.label;
  } else if (instruction.collective) {
    span.category = "collective";
    span.label = instruction.collective->label;
    span.name = std::string(collectiveKindName(instruction.collective->kind)) +
                " " + span.label;
  } else if (instruction.tierCopy) {
    // The offload's staging: the bytes of one side.
    span.category = "tier copy";
    span.label = instruction.tierCopy->label;
    span.name = std::string(tierCopyKindName(*instruction.tierCopy)) + " " +
                span.label;
    span.bytes = program.buffers[instruction.args[0]].bytes;
    return span;
  } else if (instruction.waitFor) {
    // Time blocked on a started collective (its own span is on the
    // communication track) or tier copy, named by what it waits for:
    // "wait #12 all_reduce grads bucket 3", "wait #40 tier_read moment1
    // wte [0, 4096)" (the loader checked the index).
    span.category = "wait";
    span.name = "wait #" + std::to_string(*instruction.waitFor);
    if (*instruction.waitFor < function.instructions.size()) {
      TraceSpan started = traceSpanOf(
          program, function, function.instructions[*instruction.waitFor]);
      span.label = started.name;
      span.name += " " + started.name;
    }
    return span;
  } else {
    span.category = "kernel";
    span.name = std::string(kernelName(instruction.kernel));
    return span;
  }
  for (uint32_t arg : instruction.args)
    span.bytes += program.buffers[arg].bytes;
  return span;
}

std::string transferName(const Instruction &instruction,
                         const std::string &where) {
  return where + " (" + transferKindName(*instruction.transfer) + " '" +
         instruction.transfer->label + "')";
}

std::string tierCopyName(const Instruction &instruction,
                         const std::string &where) {
  return where + " (" + tierCopyKindName(*instruction.tierCopy) + " '" +
         instruction.tierCopy->label + "')";
}

TransferRoute transferRoute(const Program &program,
                            const Instruction &instruction,
                            const comm::MeshCommunicators *communicators,
                            const std::string &where) {
  const Transfer &transfer = *instruction.transfer;
  std::string what = transferName(instruction, where);
  if (!communicators)
    throw ProgramError(what + " needs the communicators of the program's " +
                       program.describeMesh() +
                       ", but the backend has none; run it with partition-run");
  int64_t stage = static_cast<int64_t>(program.stream);
  int64_t from = transfer.send ? stage : transfer.peer;
  int64_t to = transfer.send ? transfer.peer : stage;
  TransferRoute route;
  route.group = communicators->transferGroup(from, to);
  if (!route.group)
    throw ProgramError(what + " moves data from stage " +
                       std::to_string(from) + " to stage " +
                       std::to_string(to) + ", which have no communicator");
  // The sender is rank 0 of the pair's communicator, the receiver rank 1.
  route.peer = transfer.send ? 1 : 0;
  std::vector<int64_t> coordinates = communicators->coordinates(), sizes;
  for (const comm::MeshAxisSize &axis : communicators->mesh())
    sizes.push_back(axis.size);
  coordinates[transfer.axis] = transfer.peer;
  route.peerText = "(stage " + std::to_string(stage) +
                   (transfer.send ? ", to stage " : ", from stage ") +
                   std::to_string(transfer.peer) + " = rank " +
                   std::to_string(comm::meshRank(coordinates, sizes)) + ")";
  return route;
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
