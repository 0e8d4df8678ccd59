//===- CpuTiers.cpp - the offload's tiers on CPU ranks --------------------===//

#include "runtime/backend/cpu/CpuTiers.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace partition::runtime::cpubackend {

using offload::AlignedBuffer;
using offload::IoEngine;
using offload::IoError;
using offload::kIoAlignment;

CpuTiers::CpuTiers(const Program &program, const OffloadOptions &options) {
  if (program.hostBytes > 0) {
    try {
      hostTier = AlignedBuffer(program.hostBytes);
    } catch (const std::bad_alloc &) {
      throw ProgramError(hostTierAllocationError(program));
    }
    // Zero, as the arena: moments start at zero.
    std::memset(hostTier.data(), 0, hostTier.size());
  }
  if (program.nvmeBytes > 0)
    nvme = std::make_unique<TierFile>(program, options);
}

std::string CpuTiers::describe() const {
  std::string text;
  if (hostTier.size() > 0)
    text = "host tier: " + std::to_string(hostTier.size()) +
           " bytes per rank in host memory beside the arena";
  if (nvme)
    text += std::string(text.empty() ? "" : "; ") + nvme->describe();
  return text;
}

void CpuTiers::read(const BufferInfo &buffer, void *destination) {
  if (buffer.tier == Tier::Host) {
    std::memcpy(destination,
                static_cast<uint8_t *>(hostTier.data()) + buffer.offset,
                buffer.bytes);
    return;
  }
  nvme->read(buffer, destination);
}

void CpuTiers::write(const BufferInfo &buffer, const void *source) {
  if (buffer.tier == Tier::Host) {
    std::memcpy(static_cast<uint8_t *>(hostTier.data()) + buffer.offset, source,
                buffer.bytes);
    return;
  }
  nvme->write(buffer, source);
}

size_t CpuTiers::compile(const Program &program, const Instruction &instruction,
                         uint8_t *arena, const std::string &name) {
  const TierCopy &tierCopy = *instruction.tierCopy;
  // The loader checked the two sides: one tier, one arena, one size.
  const BufferInfo &tiered =
      program.buffers[instruction.args[tierCopy.tierArg()]];
  const BufferInfo &staged =
      program.buffers[instruction.args[tierCopy.arenaArg()]];
  Copy copy;
  copy.write = tierCopy.write;
  copy.started = tierCopy.started;
  copy.name = name;
  copy.arena = arena + staged.offset;
  copy.bytes = tiered.bytes;
  if (tiered.tier == Tier::Host) {
    copy.host = static_cast<uint8_t *>(hostTier.data()) + tiered.offset;
  } else {
    copy.fileOffset = tiered.offset;
    copy.body = copy.bytes / kIoAlignment * kIoAlignment;
    if (copy.body < copy.bytes)
      copy.tail = AlignedBuffer(kIoAlignment);
  }
  copies.push_back(std::move(copy));
  return copies.size() - 1;
}

void CpuTiers::fail(const Copy &copy, const std::exception &error) const {
  throw ProgramError(copy.name + ": " + error.what());
}

void CpuTiers::start(size_t index) {
  Copy &copy = copies[index];
  if (copy.host) {
    // Host memory: the copy is done here, its wait has nothing to do.
    if (copy.write)
      std::memcpy(copy.host, copy.arena, copy.bytes);
    else
      std::memcpy(copy.arena, copy.host, copy.bytes);
    return;
  }
  try {
    if (copy.body > 0)
      copy.tickets.push_back(nvme->engine().submit(
          copy.write
              ? nvme->file().write(copy.fileOffset, copy.arena, copy.body)
              : nvme->file().read(copy.fileOffset, copy.arena, copy.body)));
    if (copy.tail.size() > 0) {
      // The last partial block: the buffer's padding in the file is its
      // own (tiers are laid out at whole blocks).
      auto *block = static_cast<uint8_t *>(copy.tail.data());
      uint64_t rest = copy.bytes - copy.body;
      if (copy.write) {
        std::memcpy(block, copy.arena + copy.body, rest);
        std::memset(block + rest, 0, kIoAlignment - rest);
      }
      copy.tickets.push_back(nvme->engine().submit(
          copy.write ? nvme->file().write(copy.fileOffset + copy.body, block,
                                          kIoAlignment)
                     : nvme->file().read(copy.fileOffset + copy.body, block,
                                         kIoAlignment)));
    }
  } catch (const std::exception &error) {
    fail(copy, error);
  }
  if (!copy.started)
    wait(index);
}

void CpuTiers::wait(size_t index) {
  Copy &copy = copies[index];
  if (copy.host)
    return;
  std::string error = nvme->waitAll(copy.tickets);
  if (!error.empty())
    fail(copy, std::runtime_error(error));
  if (!copy.write && copy.tail.size() > 0)
    std::memcpy(copy.arena + copy.body, copy.tail.data(),
                copy.bytes - copy.body);
}

} // namespace partition::runtime::cpubackend
