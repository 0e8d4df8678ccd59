//===- CudaTiers.h - the offload's tiers on a GPU rank ----------*- C++ -*-===//
//
// Where the CUDA backend keeps the buffers a program places outside its
// arena (docs/offload.md): the host tier in pinned host memory
// (cudaHostAlloc, so that its copies are DMA and run beside the kernels),
// the NVMe tier in one preallocated file per rank (TierFile) staged through
// a pool of pinned memory (PinnedStaging.h). The copies run as the compiler
// scheduled them (rt.tier_read / rt.tier_write, started early and waited
// for late):
//  - host tier: a copy runs on a copy stream of its own, after everything
//    the compute stream did before it (an event recorded where it starts),
//    and its wait makes the compute stream wait for its completion event;
//    the copy stream runs the copies in order, so a slice's write-back and
//    its next read never cross;
//  - NVMe tier, read: the I/O engine reads the file into the copy's pinned
//    block when the copy starts; its wait waits for the engine on the host,
//    then copies the block into the arena on the compute stream;
//  - NVMe tier, write: the block is copied out of the arena on the copy
//    stream when the copy starts; its wait waits for that copy on the host,
//    then writes the block to the file and waits for the engine.
// The backend's read / write of a tiered buffer (initialisation,
// checkpoints) join the copy stream first.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_CUDATIERS_H
#define PARTITION_RUNTIME_CUDA_CUDATIERS_H

#include "runtime/backend/TierFile.h"

#include <cuda_runtime_api.h>

#include <cstdint>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <vector>

namespace partition::runtime::cudabackend {

class CudaTiers {
public:
  /// The tiers of `program`'s selected stream, for a backend whose kernels
  /// run on `compute` (of the current device). Throws ProgramError with one
  /// line (`setup` first for CUDA errors).
  CudaTiers(const Program &program, const OffloadOptions &options,
            cudaStream_t compute, const std::string &setup);
  ~CudaTiers();
  CudaTiers(const CudaTiers &) = delete;
  CudaTiers &operator=(const CudaTiers &) = delete;

  /// The whole of a tiered buffer from or into host memory (any address),
  /// once every copy in flight is done.
  void read(const BufferInfo &buffer, void *destination);
  void write(const BufferInfo &buffer, const void *source);

  /// Binds `function`'s tier copies to the arena (device memory at `arena`)
  /// and plans their pinned blocks: per tier copy instruction, the index
  /// of its copy for start / wait. The copies in `replaced` (and their
  /// waits) are left out: a CPU update does their work (HostUpdatePlan.h).
  /// `cpuPairs` (an NVMe read's instruction -> its write-back's) are the
  /// copies a CPU update works between: the read leaves the bytes in its
  /// pinned block, the write-back writes that block once the update's
  /// event (setUpdateDone) has completed; neither touches the arena.
  std::map<size_t, size_t>
  compileFunction(const Program &program, const Function &function,
                  uint8_t *arena, const std::set<size_t> &replaced,
                  const std::map<size_t, size_t> &cpuPairs,
                  const std::string &setup);
  /// The event after the CPU update a write-back of `cpuPairs` writes.
  void setUpdateDone(size_t index, cudaEvent_t event) {
    copies[index].updateDone = event;
  }
  /// The pinned block of NVMe copy `index` (after allocateStaging).
  float *pinnedData(size_t index) const {
    return reinterpret_cast<float *>(pinnedOf(copies[index]));
  }
  /// Allocates the NVMe tier's pinned pool (the largest any function's
  /// plan needs); after every compileFunction.
  void allocateStaging(const std::string &setup);
  /// Starts copy `index` (a copy that is not started also completes).
  void start(size_t index);
  /// Completes copy `index` for the compute stream.
  void wait(size_t index);
  /// The stream a copy's own work runs on (profiling, traces).
  cudaStream_t streamOf(size_t index) const;
  /// Joins the copy stream (end of a run: the host tier's bytes are final).
  void synchronize(const std::string &where);

  /// The copy stream (the CPU's AdamW updates run on it too).
  cudaStream_t copyStream() const { return transfers; }
  /// A host tier buffer's bytes (pinned).
  float *hostTierData(const BufferInfo &buffer) const {
    return reinterpret_cast<float *>(hostTier + buffer.offset);
  }

  /// "host tier: N bytes per rank in pinned host memory; nvme tier: ..."
  std::string describe() const;

private:
  struct Copy {
    bool write = false, started = false;
    /// One of a CPU update's NVMe pair (compileFunction's cpuPairs).
    bool forCpu = false;
    /// A pair's write-back: the update's event.
    cudaEvent_t updateDone = nullptr;
    std::string name;
    /// Host tier: the tier's bytes (pinned); NVMe tier: null.
    uint8_t *host = nullptr;
    uint64_t fileOffset = 0;
    /// Device memory.
    uint8_t *arena = nullptr;
    uint64_t bytes = 0;
    /// NVMe: the block's offset in the pinned pool, and the earlier read
    /// whose device copy must be done before the disk writes there.
    uint64_t pinnedOffset = 0;
    size_t after = ~size_t(0);
    /// Recorded on the compute stream where the copy starts (the copy
    /// stream waits for it), on the copy stream after the copy, and (NVMe
    /// reads) on the compute stream after the block's device copy.
    cudaEvent_t ready = nullptr, done = nullptr, released = nullptr;
    std::vector<offload::IoEngine::Ticket> tickets;
  };
  uint8_t *pinnedOf(const Copy &copy) const {
    return pinned + copy.pinnedOffset;
  }
  [[noreturn]] void fail(const Copy &copy, const std::string &error) const;
  void check(cudaError_t error, const char *call, const Copy &copy) const;

  cudaStream_t compute = nullptr;
  /// The copy stream.
  cudaStream_t transfers = nullptr;
  /// The host tier (pinned; null without one).
  uint8_t *hostTier = nullptr;
  uint64_t hostTierBytes = 0;
  /// The NVMe tier (null without one) and its pinned pool.
  std::unique_ptr<TierFile> nvme;
  uint8_t *pinned = nullptr;
  uint64_t pinnedBytes = 0;
  std::vector<Copy> copies;
};

} // namespace partition::runtime::cudabackend

#endif // PARTITION_RUNTIME_CUDA_CUDATIERS_H
