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
// Where the moments are in a tier, AdamW runs on the CPU instead
// (CudaHostUpdates.h, HostUpdatePlan.h), unless the backend asks for the
// GPU's staged update. compileFunction says what the backend runs for each
// instruction (an Action), so that the backend and the emulator test
// (unittests/runtime/cuda/emulator) share one orchestration. The backend's
// read / write of a tiered buffer (initialisation, checkpoints) join the
// copy stream first.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_CUDATIERS_H
#define PARTITION_RUNTIME_CUDA_CUDATIERS_H

#include "runtime/backend/TierFile.h"
#include "runtime/backend/cuda/CudaHostUpdates.h"

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
  /// run on `compute` (of the current device); `cpuUpdates`: AdamW on the
  /// CPU where the moments are in a tier. Throws ProgramError with one
  /// line (`setup` first for CUDA errors).
  CudaTiers(const Program &program, const OffloadOptions &options,
            cudaStream_t compute, bool cpuUpdates, const std::string &setup);
  ~CudaTiers();
  CudaTiers(const CudaTiers &) = delete;
  CudaTiers &operator=(const CudaTiers &) = delete;

  /// The whole of a tiered buffer from or into host memory (any address),
  /// once every copy in flight is done.
  void read(const BufferInfo &buffer, void *destination);
  void write(const BufferInfo &buffer, const void *source);

  /// What the backend runs for one instruction.
  struct Action {
    enum class Kind {
      /// Not the tiers' (a kernel, a collective): the backend's own.
      None,
      /// A tier copy (`index`: the copy), or its wait.
      Start,
      Wait,
      /// An adamw that runs on the CPU (`index`: the update): to the stream
      /// plan, a transfer on streamOf(); the backend records the
      /// completion event after run() on that stream.
      Update,
      /// A copy (or its wait) a CPU update does the work of: nothing.
      Skip
    };
    Kind kind = Kind::None;
    size_t index = 0;
    /// The arena buffers it touches (the stream plan's byte ranges), and
    /// those every CPU update reads (the step, the learning rate: ranges
    /// later kernels wait on, not ranges an update waits on, else each
    /// update would wait for the one before it).
    std::vector<uint32_t> buffers, shared;
  };
  /// Binds `function`'s tier copies and CPU updates to the arena (device
  /// memory at `arena`) and plans the copies' pinned blocks; per
  /// instruction, its action.
  std::vector<Action> compileFunction(const Program &program,
                                      const Function &function, uint8_t *arena,
                                      const std::string &setup);
  /// Allocates the pinned memory (the NVMe tier's pool, the largest any
  /// function's plan needs; the CPU updates' scratch); after every
  /// compileFunction.
  void allocateStaging(const std::string &setup);
  /// Runs an action that is not None: starts a copy (one that is not
  /// started also completes), makes the compute stream wait for one,
  /// enqueues a CPU update.
  void run(const Action &action);
  /// The stream an action's own work runs on (profiling, traces).
  cudaStream_t streamOf(const Action &action) const;
  /// Joins the copy stream (end of a run: the host tier's bytes are final)
  /// and reports a CPU update's failure.
  void synchronize(const std::string &where);
  /// The pinned block of NVMe copy `index` (after allocateStaging).
  float *pinnedData(size_t index) const {
    return reinterpret_cast<float *>(pinnedOf(copies[index]));
  }

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
  /// Binds `function`'s tier copies, less `replaced` (a CPU update does
  /// their work, HostUpdatePlan.h); `cpuPairs` (an NVMe read's instruction
  /// -> its write-back's) are the copies a CPU update works between: the
  /// read leaves the bytes in its pinned block, the write-back writes that
  /// block once the update's event has completed; neither touches the
  /// arena. Per tier copy instruction, its copy.
  std::map<size_t, size_t>
  compileCopies(const Program &program, const Function &function,
                uint8_t *arena, const std::set<size_t> &replaced,
                const std::map<size_t, size_t> &cpuPairs,
                const std::string &setup);
  void start(size_t index);
  void wait(size_t index);
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
  /// The CPU's AdamW updates (null without: PARTITION_OFFLOAD_UPDATE=gpu).
  std::unique_ptr<CudaHostUpdates> updates;
};

} // namespace partition::runtime::cudabackend

#endif // PARTITION_RUNTIME_CUDA_CUDATIERS_H
