//===- CpuTiers.h - the offload's tiers on CPU ranks ------------*- C++ -*-===//
//
// Where the CPU backend keeps the buffers a program places outside its
// arena (docs/offload.md): the host tier in host memory beside the arena
// (on a CPU the same memory: it exists so that the compiler and runtime
// keep one contract with the CUDA backend), the NVMe tier in one
// preallocated file per rank (runtime/offload/OffloadFile.h) moved by an
// asynchronous I/O engine (io_uring, else a thread pool). Tier copies
// start and complete here; the backend's read and write of a tiered state
// buffer (initialisation, checkpoints) go through here too.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_BACKEND_CPU_CPUTIERS_H
#define PARTITION_RUNTIME_BACKEND_CPU_CPUTIERS_H

#include "runtime/backend/Backend.h"
#include "runtime/backend/TierFile.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace partition::runtime::cpubackend {

class CpuTiers {
public:
  /// The tiers of `program`'s selected stream. Creates the NVMe tier's file
  /// under options.path (else the program's offload path), after removing
  /// the files of dead runs there; throws ProgramError with one line naming
  /// the path and the bytes when it cannot.
  CpuTiers(const Program &program, const OffloadOptions &options);
  CpuTiers(const CpuTiers &) = delete;
  CpuTiers &operator=(const CpuTiers &) = delete;

  /// The whole of a tiered buffer from or into host memory (any address).
  void read(const BufferInfo &buffer, void *destination);
  void write(const BufferInfo &buffer, const void *source);

  /// A tier copy instruction bound to its buffers (`arena` is the arena's
  /// base, aligned to offload::kIoAlignment): an index for start / wait.
  /// `name` ("train_step instruction #12 (tier_write 'moment1 wte')")
  /// starts its error messages.
  size_t compile(const Program &program, const Instruction &instruction,
                 uint8_t *arena, const std::string &name);
  /// Starts copy `index` (and for a copy that is not started, completes
  /// it); throws ProgramError naming the copy and the file on failure.
  void start(size_t index);
  /// Completes copy `index` (a started one); throws like start().
  void wait(size_t index);

  /// "nvme tier: 966656 bytes per rank in FILE (uring, O_DIRECT)"; "" when
  /// the program has no tier.
  std::string describe() const;

private:
  /// A compiled tier copy.
  struct Copy {
    bool write = false, started = false;
    std::string name;
    /// Host tier: the tier's bytes; NVMe tier: the file offset.
    uint8_t *host = nullptr;
    uint64_t fileOffset = 0;
    uint8_t *arena = nullptr;
    uint64_t bytes = 0;
    /// NVMe: the whole blocks go directly, the last partial one through
    /// `tail` (one block).
    uint64_t body = 0;
    offload::AlignedBuffer tail;
    std::vector<offload::IoEngine::Ticket> tickets;
  };
  void fail(const Copy &copy, const std::exception &error) const;

  /// The host tier (empty without one).
  offload::AlignedBuffer hostTier;
  /// The NVMe tier (null without one).
  std::unique_ptr<TierFile> nvme;
  std::vector<Copy> copies;
};

} // namespace partition::runtime::cpubackend

#endif // PARTITION_RUNTIME_BACKEND_CPU_CPUTIERS_H
