//===- TierFile.cpp - the NVMe tier's file, shared by the backends --------===//

#include "runtime/backend/TierFile.h"

#include "runtime/offload/Bandwidth.h"

#include <algorithm>
#include <cstring>

namespace partition::runtime {

using offload::AlignedBuffer;

namespace {

/// read / write's bounce buffer: a few I/O chunks.
constexpr uint64_t kBounceBytes = uint64_t(4) << 20;

} // namespace

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

std::string hostTierAllocationError(const Program &program) {
  return "cannot allocate the host tier's " +
         std::to_string(program.hostBytes) +
         " bytes of host memory (the "
         "offloaded " +
         tierContents(program, Tier::Host) + ")";
}

TierFile::TierFile(const Program &program, const OffloadOptions &options) {
  std::string directory =
      options.path.empty() ? program.offloadPath : options.path;
  try {
    // Files of runs that died are removed first, as checkpoints'
    // temporaries are: they would fill the disk run after run.
    offload::OffloadFile::removeStale(directory);
    // Preallocated at its full size: a disk too small is said before the
    // first step, with the bytes needed (a fresh file reads as zeros: the
    // moments' start).
    offloadFile = std::make_unique<offload::OffloadFile>(
        directory, options.tag.empty() ? "rank0" : options.tag,
        program.nvmeBytes);
    // io_uring where the build and the kernel have it (measured best:
    // docs/offload.md), else the thread pool.
    offload::IoEngineOptions engineOptions;
    engineOptions.kind = offload::preferredIoEngine();
    engineName = engineOptions.kind;
    ioEngine = offload::makeIoEngine(engineOptions);
  } catch (const std::exception &error) {
    throw ProgramError(std::string("the offload's nvme tier (") +
                       std::to_string(program.nvmeBytes) + " bytes of " +
                       tierContents(program, Tier::Nvme) +
                       " for this rank): " + error.what());
  }
  bounce = AlignedBuffer(kBounceBytes);
}

std::string
TierFile::waitAll(std::vector<offload::IoEngine::Ticket> &tickets) {
  std::vector<offload::IoEngine::Ticket> pending;
  pending.swap(tickets);
  std::string error;
  for (offload::IoEngine::Ticket ticket : pending) {
    try {
      ioEngine->wait(ticket);
    } catch (const std::exception &failure) {
      if (error.empty())
        error = failure.what();
    }
  }
  return error;
}

std::string TierFile::describe() const {
  return "nvme tier: " + std::to_string(offloadFile->bytes()) +
         " bytes per rank in " + offloadFile->path() + " (" + engineName +
         (offloadFile->direct() ? ", O_DIRECT)" : ", through the page cache)");
}

void TierFile::moveSync(bool write, uint64_t fileOffset, uint8_t *host,
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
        ioEngine->wait(ioEngine->submit(
            offloadFile->write(fileOffset + done, staging, blocks)));
      } else {
        ioEngine->wait(ioEngine->submit(
            offloadFile->read(fileOffset + done, staging, blocks)));
        std::memcpy(host + done, staging, part);
      }
      done += part;
    }
  } catch (const std::exception &error) {
    throw ProgramError(what + ": " + error.what());
  }
}

void TierFile::read(const BufferInfo &buffer, void *destination) {
  moveSync(/*write=*/false, buffer.offset, static_cast<uint8_t *>(destination),
           buffer.bytes,
           "reading " + std::string(roleName(buffer.role)) + " '" +
               buffer.name + "' from the nvme tier");
}

void TierFile::write(const BufferInfo &buffer, const void *source) {
  moveSync(/*write=*/true, buffer.offset,
           static_cast<uint8_t *>(const_cast<void *>(source)), buffer.bytes,
           "writing " + std::string(roleName(buffer.role)) + " '" +
               buffer.name + "' to the nvme tier");
}

} // namespace partition::runtime
