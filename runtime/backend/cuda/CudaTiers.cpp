//===- CudaTiers.cpp - the offload's tiers on a GPU rank ------------------===//

#include "runtime/backend/cuda/CudaTiers.h"

#include "runtime/backend/cuda/HostUpdatePlan.h"
#include "runtime/backend/cuda/PinnedStaging.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace partition::runtime::cudabackend {

using offload::IoEngine;
using offload::kIoAlignment;

namespace {

void checkSetup(cudaError_t error, const char *call, const std::string &where) {
  if (error == cudaSuccess)
    return;
  throw ProgramError(where + ": " + call +
                     " failed: " + cudaGetErrorName(error) + " (" +
                     cudaGetErrorString(error) + ")");
}

/// Pinned host memory (page-aligned, hence O_DIRECT-aligned too), or null
/// when the system refuses it.
uint8_t *allocatePinned(uint64_t bytes) {
  void *memory = nullptr;
  if (cudaHostAlloc(&memory, std::max<uint64_t>(bytes, 1),
                    cudaHostAllocDefault) != cudaSuccess) {
    cudaGetLastError();
    return nullptr;
  }
  return static_cast<uint8_t *>(memory);
}

} // namespace

CudaTiers::CudaTiers(const Program &program, const OffloadOptions &options,
                     cudaStream_t compute, bool cpuUpdates,
                     const std::string &setup)
    : compute(compute) {
  if (program.hostBytes > 0) {
    hostTier = allocatePinned(program.hostBytes);
    if (!hostTier)
      throw ProgramError(setup + ": " + hostTierAllocationError(program) +
                         " pinned by cudaHostAlloc");
    hostTierBytes = program.hostBytes;
    // Zero, as the arena: moments start at zero.
    std::memset(hostTier, 0, hostTierBytes);
  }
  if (program.nvmeBytes > 0)
    nvme = std::make_unique<TierFile>(program, options);
  // Non-blocking, as the compute stream: the legacy default stream must
  // not serialise the copies with the kernels.
  checkSetup(cudaStreamCreateWithFlags(&transfers, cudaStreamNonBlocking),
             "cudaStreamCreateWithFlags", setup);
  if (cpuUpdates)
    updates = std::make_unique<CudaHostUpdates>(*this, compute, setup);
}

CudaTiers::~CudaTiers() {
  // Its work runs on the copy stream, with this class's memory.
  updates.reset();
  // As the backend: after the CUDA runtime has shut down the driver frees
  // everything with the process.
  if (cudaStreamSynchronize(transfers) == cudaErrorCudartUnloading)
    return;
  // The engine must not write into memory freed below.
  if (nvme)
    for (Copy &copy : copies)
      nvme->waitAll(copy.tickets);
  for (Copy &copy : copies)
    for (cudaEvent_t event : {copy.ready, copy.done, copy.released})
      if (event)
        cudaEventDestroy(event);
  if (transfers)
    cudaStreamDestroy(transfers);
  if (pinned)
    cudaFreeHost(pinned);
  if (hostTier)
    cudaFreeHost(hostTier);
}

std::string CudaTiers::describe() const {
  std::string text;
  if (hostTier)
    text = "host tier: " + std::to_string(hostTierBytes) +
           " bytes per rank in pinned host memory";
  if (nvme)
    text += std::string(text.empty() ? "" : "; ") + nvme->describe() +
            ", staged through " + std::to_string(pinnedBytes) +
            " bytes of pinned host memory";
  return text;
}

std::vector<CudaTiers::Action>
CudaTiers::compileFunction(const Program &program, const Function &function,
                           uint8_t *arena, const std::string &setup) {
  using Kind = Action::Kind;
  std::vector<Action> actions(function.instructions.size());
  // The updates that run on the CPU, the host-tier copies they replace and
  // the NVMe copies they work between (HostUpdatePlan.h).
  std::vector<cuda::HostUpdate> planned;
  if (updates)
    planned = cuda::planHostUpdates(program, function);
  auto tierOperands = [](const cuda::HostUpdate &update) {
    std::vector<cuda::TierOperand> operands = {update.moment1, update.moment2};
    if (update.tierParam)
      operands.push_back(*update.tierParam);
    return operands;
  };
  std::set<size_t> replaced;
  std::map<size_t, size_t> cpuPairs;
  for (const cuda::HostUpdate &update : planned) {
    replaced.insert(update.replaced.begin(), update.replaced.end());
    for (const cuda::TierOperand &operand : tierOperands(update))
      if (operand.tier == Tier::Nvme)
        cpuPairs[operand.read] = operand.write;
  }
  std::map<size_t, size_t> indices =
      compileCopies(program, function, arena, replaced, cpuPairs, setup);
  for (size_t i = 0; i < function.instructions.size(); ++i) {
    const Instruction &instruction = function.instructions[i];
    Action &action = actions[i];
    if (replaced.count(i)) {
      action.kind = Kind::Skip;
    } else if (indices.count(i)) {
      action.kind = Kind::Start;
      action.index = indices.at(i);
      action.buffers = {instruction.args[instruction.tierCopy->arenaArg()]};
    } else if (instruction.waitFor && indices.count(*instruction.waitFor)) {
      action.kind = Kind::Wait;
      action.index = indices.at(*instruction.waitFor);
    }
  }
  for (const cuda::HostUpdate &update : planned) {
    const Instruction &adamw = function.instructions[update.adamw];
    Action &action = actions[update.adamw];
    action.kind = Kind::Update;
    action.index = updates->compile(
        program, update, adamw.floats, arena, indices,
        function.name + " instruction #" + std::to_string(update.adamw) +
            " (adamw on the CPU)",
        setup);
    action.buffers = {update.gradient};
    if (!update.tierParam)
      action.buffers.push_back(update.param);
    action.shared = {update.step, update.lr};
    for (const cuda::TierOperand &operand : tierOperands(update))
      if (operand.tier == Tier::Nvme)
        copies[indices.at(operand.write)].updateDone =
            updates->finished(action.index);
  }
  return actions;
}

void CudaTiers::run(const Action &action) {
  switch (action.kind) {
  case Action::Kind::Start:
    start(action.index);
    return;
  case Action::Kind::Wait:
    wait(action.index);
    return;
  case Action::Kind::Update:
    updates->enqueue(action.index);
    return;
  case Action::Kind::None:
  case Action::Kind::Skip:
    return;
  }
}

cudaStream_t CudaTiers::streamOf(const Action &action) const {
  switch (action.kind) {
  case Action::Kind::Update:
    return updates->stream();
  case Action::Kind::Start: {
    // An NVMe read's own work is the host's and, at its wait, the compute
    // stream's.
    const Copy &copy = copies[action.index];
    return copy.host || copy.write ? transfers : compute;
  }
  case Action::Kind::None:
  case Action::Kind::Wait:
  case Action::Kind::Skip:
    break;
  }
  return compute;
}

std::map<size_t, size_t>
CudaTiers::compileCopies(const Program &program, const Function &function,
                         uint8_t *arena, const std::set<size_t> &replaced,
                         const std::map<size_t, size_t> &cpuPairs,
                         const std::string &setup) {
  std::map<size_t, size_t> indices;
  for (size_t i = 0; i < function.instructions.size(); ++i) {
    const Instruction &instruction = function.instructions[i];
    if (replaced.count(i) || !instruction.tierCopy)
      continue;
    const TierCopy &tierCopy = *instruction.tierCopy;
    // The loader checked the two sides: one tier, one arena, one size.
    const BufferInfo &tiered =
        program.buffers[instruction.args[tierCopy.tierArg()]];
    const BufferInfo &side =
        program.buffers[instruction.args[tierCopy.arenaArg()]];
    Copy copy;
    copy.write = tierCopy.write;
    copy.started = tierCopy.started;
    copy.name = tierCopyName(instruction, function.name + " instruction #" +
                                              std::to_string(i));
    copy.arena = arena + side.offset;
    copy.bytes = tiered.bytes;
    if (tiered.tier == Tier::Host)
      copy.host = hostTier + tiered.offset;
    else
      copy.fileOffset = tiered.offset;
    for (cudaEvent_t *event : {&copy.ready, &copy.done, &copy.released})
      checkSetup(cudaEventCreateWithFlags(event, cudaEventDisableTiming),
                 "cudaEventCreateWithFlags", setup);
    indices[i] = copies.size();
    copies.push_back(std::move(copy));
  }
  // An NVMe pair a CPU update works between: the write-back writes the
  // read's block (PinnedStaging.h).
  for (const auto &[read, write] : cpuPairs)
    copies[indices.at(read)].forCpu = copies[indices.at(write)].forCpu = true;
  std::vector<cuda::StagedCopy> staged =
      cuda::nvmeCopiesOf(program, function, replaced, cpuPairs);
  cuda::PinnedStagingPlan plan = cuda::planPinnedStaging(staged, kIoAlignment);
  for (size_t s = 0; s < staged.size(); ++s) {
    Copy &copy = copies[indices.at(staged[s].start)];
    copy.pinnedOffset = plan.offset[s];
    if (plan.after[s] != cuda::PinnedStagingPlan::kNone)
      copy.after = indices.at(staged[plan.after[s]].start);
  }
  for (const auto &[read, write] : cpuPairs)
    copies[indices.at(write)].pinnedOffset =
        copies[indices.at(read)].pinnedOffset;
  pinnedBytes = std::max(pinnedBytes, plan.bytes);
  return indices;
}

void CudaTiers::allocateStaging(const std::string &setup) {
  if (updates)
    updates->allocate(setup);
  if (!nvme || pinnedBytes == 0)
    return;
  pinned = allocatePinned(pinnedBytes);
  if (!pinned)
    throw ProgramError(setup + ": cannot allocate the nvme tier's " +
                       std::to_string(pinnedBytes) +
                       " bytes of pinned staging (cudaHostAlloc; give a "
                       "smaller offload.buffer_bytes)");
}

[[noreturn]] void CudaTiers::fail(const Copy &copy,
                                  const std::string &error) const {
  throw ProgramError(copy.name + ": " + error);
}

void CudaTiers::check(cudaError_t error, const char *call,
                      const Copy &copy) const {
  if (error != cudaSuccess)
    fail(copy, std::string(call) + " failed: " + cudaGetErrorName(error) +
                   " (" + cudaGetErrorString(error) + ")");
}

void CudaTiers::start(size_t index) {
  Copy &copy = copies[index];
  if (copy.forCpu && copy.write) {
    // The CPU update writes the block itself: the write-back has nothing
    // to copy out of the arena.
  } else if (copy.host || copy.write) {
    // After everything the compute stream did before: the kernel that
    // completed the bytes written back, or the last use of the staging
    // bytes a read overwrites (the memory plan reuses them).
    check(cudaEventRecord(copy.ready, compute), "cudaEventRecord", copy);
    check(cudaStreamWaitEvent(transfers, copy.ready, 0), "cudaStreamWaitEvent",
          copy);
    uint8_t *host = copy.host ? copy.host : pinnedOf(copy);
    check(copy.write ? cudaMemcpyAsync(host, copy.arena, copy.bytes,
                                       cudaMemcpyDeviceToHost, transfers)
                     : cudaMemcpyAsync(copy.arena, host, copy.bytes,
                                       cudaMemcpyHostToDevice, transfers),
          "cudaMemcpyAsync", copy);
    check(cudaEventRecord(copy.done, transfers), "cudaEventRecord", copy);
  } else {
    // An NVMe read into the copy's pinned block, once the device copy of
    // the last read there is done.
    if (copy.after != ~size_t(0))
      check(cudaEventSynchronize(copies[copy.after].released),
            "cudaEventSynchronize", copy);
    try {
      copy.tickets.push_back(nvme->engine().submit(nvme->file().read(
          copy.fileOffset, pinnedOf(copy), offload::alignedBytes(copy.bytes))));
    } catch (const std::exception &error) {
      fail(copy, error.what());
    }
  }
  if (!copy.started)
    wait(index);
}

void CudaTiers::wait(size_t index) {
  Copy &copy = copies[index];
  if (copy.host) {
    check(cudaStreamWaitEvent(compute, copy.done, 0), "cudaStreamWaitEvent",
          copy);
    return;
  }
  if (copy.write) {
    // The block holds the bytes once the device copy (or the CPU update)
    // is done; the padding of the last block is the buffer's own in the
    // file (whole blocks).
    check(cudaEventSynchronize(copy.forCpu ? copy.updateDone : copy.done),
          "cudaEventSynchronize", copy);
    uint64_t blocks = offload::alignedBytes(copy.bytes);
    std::memset(pinnedOf(copy) + copy.bytes, 0, blocks - copy.bytes);
    try {
      nvme->engine().wait(nvme->engine().submit(
          nvme->file().write(copy.fileOffset, pinnedOf(copy), blocks)));
    } catch (const std::exception &error) {
      fail(copy, error.what());
    }
    return;
  }
  // Even after a failure: the next copy reuses the block.
  std::string error = nvme->waitAll(copy.tickets);
  if (!error.empty())
    fail(copy, error);
  // A CPU update reads the block where it is.
  if (copy.forCpu)
    return;
  check(cudaMemcpyAsync(copy.arena, pinnedOf(copy), copy.bytes,
                        cudaMemcpyHostToDevice, compute),
        "cudaMemcpyAsync", copy);
  check(cudaEventRecord(copy.released, compute), "cudaEventRecord", copy);
}

void CudaTiers::synchronize(const std::string &where) {
  checkSetup(cudaStreamSynchronize(transfers), "cudaStreamSynchronize", where);
  if (updates) {
    checkSetup(cudaStreamSynchronize(updates->stream()),
               "cudaStreamSynchronize", where);
    updates->checkErrors();
  }
}

void CudaTiers::read(const BufferInfo &buffer, void *destination) {
  std::string where = "reading '" + buffer.name + "'";
  checkSetup(cudaStreamSynchronize(compute), "cudaStreamSynchronize", where);
  synchronize(where);
  if (buffer.tier == Tier::Host) {
    std::memcpy(destination, hostTier + buffer.offset, buffer.bytes);
    return;
  }
  nvme->read(buffer, destination);
}

void CudaTiers::write(const BufferInfo &buffer, const void *source) {
  std::string where = "writing '" + buffer.name + "'";
  checkSetup(cudaStreamSynchronize(compute), "cudaStreamSynchronize", where);
  synchronize(where);
  if (buffer.tier == Tier::Host) {
    std::memcpy(hostTier + buffer.offset, source, buffer.bytes);
    return;
  }
  nvme->write(buffer, source);
}

} // namespace partition::runtime::cudabackend
