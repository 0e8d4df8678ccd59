//===- TierFile.h - the NVMe tier's file, shared by the backends -*- C++
//-*-===//
//
// What both backends do with an offload program's NVMe tier
// (docs/offload.md): remove the files of dead runs, create this rank's
// preallocated file and an asynchronous I/O engine (io_uring, else a thread
// pool) before step 1, and move a whole tiered buffer to or from any host
// address synchronously (initialisation, checkpoints). The backends differ
// only in where a tier copy's other side is (the CPU arena, or pinned
// staging for a GPU's), so the copies themselves stay in CpuTiers and
// CudaTiers.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_TIERFILE_H
#define PARTITION_RUNTIME_BACKEND_TIERFILE_H

#include "runtime/backend/Backend.h"
#include "runtime/offload/OffloadFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace partition::runtime {

/// What `tier` of `program` holds, for its errors: "optimizer state",
/// "parameters" (ZeRO-3's shards) or "optimizer state and parameters".
std::string tierContents(const Program &program, Tier tier);

/// The one line for a host tier that cannot be allocated: "cannot allocate
/// the host tier's N bytes of host memory (the offloaded optimizer state)".
std::string hostTierAllocationError(const Program &program);

class TierFile {
public:
  /// The program's NVMe tier (Program::nvmeBytes > 0) under options.path,
  /// else the program's offload path, in the file named by options.tag
  /// (default "rank0"). Throws ProgramError with one line naming the path
  /// and the bytes when it cannot.
  TierFile(const Program &program, const OffloadOptions &options);
  TierFile(const TierFile &) = delete;
  TierFile &operator=(const TierFile &) = delete;

  const offload::OffloadFile &file() const { return *offloadFile; }
  offload::IoEngine &engine() { return *ioEngine; }

  /// The whole of a tiered buffer from or into host memory (any address),
  /// through bounce blocks; throws ProgramError naming the buffer.
  void read(const BufferInfo &buffer, void *destination);
  void write(const BufferInfo &buffer, const void *source);

  /// Waits for every ticket of `tickets` (emptied), even after one fails:
  /// the engine must not keep requests on memory the caller reuses.
  /// Returns the first failure's message, or an empty string.
  std::string waitAll(std::vector<offload::IoEngine::Ticket> &tickets);

  /// "nvme tier: 966656 bytes per rank in FILE (uring, O_DIRECT)".
  std::string describe() const;

private:
  void moveSync(bool write, uint64_t fileOffset, uint8_t *host, uint64_t bytes,
                const std::string &what);

  std::unique_ptr<offload::OffloadFile> offloadFile;
  std::unique_ptr<offload::IoEngine> ioEngine;
  std::string engineName;
  /// read / write's bounce blocks.
  offload::AlignedBuffer bounce;
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_BACKEND_TIERFILE_H
