//===- CpuTiers.cpp - the offload's tiers on CPU ranks --------------------===//

#include "runtime/backend/cpu/CpuTiers.h"

#include "runtime/offload/Bandwidth.h"

#include <algorithm>
#include <cstring>
#include <stdexcept>

namespace partition::runtime::cpubackend {

using offload::AlignedBuffer;
using offload::IoEngine;
using offload::IoError;
using offload::kIoAlignment;

namespace {

/// read / write's bounce buffer: a few I/O chunks.
constexpr uint64_t kBounceBytes = uint64_t(4) << 20;

/// io_uring where the build and the kernel have it (measured best:
/// docs/offload.md), else the thread pool.
std::unique_ptr<IoEngine> makeEngine(std::string &name) {
  offload::IoEngineOptions options;
  options.kind = offload::preferredIoEngine();
  name = options.kind;
  return offload::makeIoEngine(options);
}

/// What `tier` holds, for its errors: "optimizer state", "parameters"
/// (ZeRO-3's shards) or both.
std::string tierContents(const Program &program, Tier tier) {
  bool state = false, parameters = false;
  for (const BufferInfo &buffer : program.buffers)
    if (buffer.tier == tier) {
      parameters |= buffer.role == Role::Param;
      state |= buffer.role == Role::Moment1 || buffer.role == Role::Moment2;
    }
  if (parameters && state)
    return "optimizer state and parameters";
  return parameters ? "parameters" : "optimizer state";
}

} // namespace

CpuTiers::CpuTiers(const Program &program, const OffloadOptions &options) {
  if (program.hostBytes > 0) {
    try {
      hostTier = AlignedBuffer(program.hostBytes);
    } catch (const std::bad_alloc &) {
      throw ProgramError("cannot allocate the host tier's " +
                         std::to_string(program.hostBytes) +
                         " bytes of host memory (the offloaded " +
                         tierContents(program, Tier::Host) + ")");
    }
    // Zero, as the arena: moments start at zero.
    std::memset(hostTier.data(), 0, hostTier.size());
  }
  if (program.nvmeBytes == 0)
    return;
  std::string directory =
      options.path.empty() ? program.offloadPath : options.path;
  try {
    // Files of runs that died are removed first, as checkpoints'
    // temporaries are: they would fill the disk run after run.
    offload::OffloadFile::removeStale(directory);
    // Preallocated at its full size: a disk too small is said before the
    // first step, with the bytes needed (a fresh file reads as zeros: the
    // moments' start).
    file = std::make_unique<offload::OffloadFile>(
        directory, options.tag.empty() ? "rank0" : options.tag,
        program.nvmeBytes);
    engine = makeEngine(engineName);
  } catch (const std::exception &error) {
    throw ProgramError(std::string("the offload's nvme tier (") +
                       std::to_string(program.nvmeBytes) + " bytes of " +
                       tierContents(program, Tier::Nvme) +
                       " for this rank): " + error.what());
  }
  bounce = AlignedBuffer(kBounceBytes);
}

std::string CpuTiers::describe() const {
  std::string text;
  if (hostTier.size() > 0)
    text = "host tier: " + std::to_string(hostTier.size()) +
           " bytes per rank in host memory beside the arena";
  if (file)
    text += std::string(text.empty() ? "" : "; ") +
            "nvme tier: " + std::to_string(file->bytes()) +
            " bytes per rank in " + file->path() + " (" + engineName +
            (file->direct() ? ", O_DIRECT)" : ", through the page cache)");
  return text;
}

void CpuTiers::moveSync(bool write, uint64_t fileOffset, uint8_t *host,
                        uint64_t bytes, const std::string &what) {
  try {
    // Whole blocks through the bounce buffer: the file's buffers were laid
    // out at whole blocks, so the last one's padding belongs to it.
    for (uint64_t done = 0; done < bytes;) {
      uint64_t part = std::min<uint64_t>(bounce.size(), bytes - done);
      uint64_t blocks = offload::alignedBytes(part);
      auto *staging = static_cast<uint8_t *>(bounce.data());
      if (write) {
        std::memcpy(staging, host + done, part);
        std::memset(staging + part, 0, blocks - part);
        engine->wait(
            engine->submit(file->write(fileOffset + done, staging, blocks)));
      } else {
        engine->wait(
            engine->submit(file->read(fileOffset + done, staging, blocks)));
        std::memcpy(host + done, staging, part);
      }
      done += part;
    }
  } catch (const std::exception &error) {
    throw ProgramError(what + ": " + error.what());
  }
}

void CpuTiers::read(const BufferInfo &buffer, void *destination) {
  if (buffer.tier == Tier::Host) {
    std::memcpy(destination,
                static_cast<uint8_t *>(hostTier.data()) + buffer.offset,
                buffer.bytes);
    return;
  }
  moveSync(/*write=*/false, buffer.offset, static_cast<uint8_t *>(destination),
           buffer.bytes,
           "reading " + std::string(roleName(buffer.role)) + " '" +
               buffer.name + "' from the nvme tier");
}

void CpuTiers::write(const BufferInfo &buffer, const void *source) {
  if (buffer.tier == Tier::Host) {
    std::memcpy(static_cast<uint8_t *>(hostTier.data()) + buffer.offset, source,
                buffer.bytes);
    return;
  }
  moveSync(/*write=*/true, buffer.offset,
           static_cast<uint8_t *>(const_cast<void *>(source)), buffer.bytes,
           "writing " + std::string(roleName(buffer.role)) + " '" +
               buffer.name + "' to the nvme tier");
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
      copy.tickets.push_back(engine->submit(
          copy.write ? file->write(copy.fileOffset, copy.arena, copy.body)
                     : file->read(copy.fileOffset, copy.arena, copy.body)));
    if (copy.tail.size() > 0) {
      // The last partial block: the buffer's padding in the file is its
      // own (tiers are laid out at whole blocks).
      auto *block = static_cast<uint8_t *>(copy.tail.data());
      uint64_t rest = copy.bytes - copy.body;
      if (copy.write) {
        std::memcpy(block, copy.arena + copy.body, rest);
        std::memset(block + rest, 0, kIoAlignment - rest);
      }
      copy.tickets.push_back(engine->submit(
          copy.write
              ? file->write(copy.fileOffset + copy.body, block, kIoAlignment)
              : file->read(copy.fileOffset + copy.body, block, kIoAlignment)));
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
  std::vector<IoEngine::Ticket> tickets;
  tickets.swap(copy.tickets);
  // Every ticket is waited for, even after a failure: the engine must not
  // keep requests on buffers the caller is done with.
  std::string error;
  for (IoEngine::Ticket ticket : tickets) {
    try {
      engine->wait(ticket);
    } catch (const std::exception &failure) {
      if (error.empty())
        error = failure.what();
    }
  }
  if (!error.empty())
    fail(copy, std::runtime_error(error));
  if (!copy.write && copy.tail.size() > 0)
    std::memcpy(copy.arena + copy.body, copy.tail.data(),
                copy.bytes - copy.body);
}

} // namespace partition::runtime::cpubackend
