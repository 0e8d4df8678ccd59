//===- PinnedStaging.h - where the NVMe tier's copies stage -----*- C++ -*-===//
//
// A GPU's NVMe tier copy goes through pinned host memory: the I/O engine
// reads the file into a pinned block, which is then copied to the arena
// (and the other way for a write-back). One pool of pinned memory holds
// every copy in flight; this plans, once per function, where in it each
// copy's block goes, walking the copies in program order:
//  - a copy holds its block from its start to its wait (whole kIoAlignment
//    blocks, O_DIRECT's unit), and gets the lowest offset free for that
//    long (first fit), so the pool is about the most bytes in flight at
//    once: at most the plan's offload.buffer_bytes, which the compiler's
//    schedule keeps the copies within;
//  - a read's block is still being read by its host-to-device copy, on the
//    compute stream, after its wait has returned on the host. A later read
//    whose block overlaps it lets the disk write there only after that copy
//    is done: `after` names the latest such earlier read (the compute
//    stream runs in order, so its copy done means every earlier one is).
//    A write needs nothing of the kind: its device-to-host copy is ordered
//    after everything enqueued on the compute stream before it;
//  - where AdamW runs on the CPU between an NVMe read and its write-back
//    (HostUpdatePlan.h), the write-back writes the read's block, held from
//    the read to the write-back's wait (nvmeCopiesOf).
// Pure host logic, tested without a GPU (unittests/runtime/cuda).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CUDA_PINNEDSTAGING_H
#define PARTITION_RUNTIME_CUDA_PINNEDSTAGING_H

#include "runtime/program/Program.h"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <map>
#include <set>
#include <vector>

namespace partition::runtime::cuda {

/// One NVMe tier copy of a function, in program order.
struct StagedCopy {
  /// Instruction indices of the copy and of its wait (equal for a copy
  /// that is not started: it completes where it is).
  size_t start = 0, wait = 0;
  uint64_t bytes = 0;
  bool read = true;
};

struct PinnedStagingPlan {
  static constexpr size_t kNone = ~size_t(0);
  /// Per copy: its block's offset in the pool.
  std::vector<uint64_t> offset;
  /// Per copy: the earlier read whose host-to-device copy must be done
  /// before the disk writes into this read's block, or kNone.
  std::vector<size_t> after;
  /// The pool's size.
  uint64_t bytes = 0;
};

inline PinnedStagingPlan
planPinnedStaging(const std::vector<StagedCopy> &copies,
                  uint64_t block = 4096) {
  PinnedStagingPlan plan;
  plan.offset.assign(copies.size(), 0);
  plan.after.assign(copies.size(), PinnedStagingPlan::kNone);
  auto rounded = [&](uint64_t bytes) {
    return std::max<uint64_t>(1, (bytes + block - 1) / block) * block;
  };
  std::vector<size_t> live;
  for (size_t c = 0; c < copies.size(); ++c) {
    const StagedCopy &copy = copies[c];
    // Copies whose wait came before this one's start are done with their
    // blocks (on the host; a read's device copy is what `after` orders).
    live.erase(
        std::remove_if(live.begin(), live.end(),
                       [&](size_t l) { return copies[l].wait < copy.start; }),
        live.end());
    std::sort(live.begin(), live.end(), [&](size_t a, size_t b) {
      return plan.offset[a] < plan.offset[b];
    });
    uint64_t size = rounded(copy.bytes), at = 0;
    for (size_t l : live) {
      if (plan.offset[l] >= at + size)
        break;
      at = std::max(at, plan.offset[l] + rounded(copies[l].bytes));
    }
    plan.offset[c] = at;
    plan.bytes = std::max(plan.bytes, at + size);
    if (copy.read)
      for (size_t earlier = 0; earlier < c; ++earlier) {
        const StagedCopy &other = copies[earlier];
        bool overlaps = plan.offset[earlier] < at + size &&
                        at < plan.offset[earlier] + rounded(other.bytes);
        if (other.read && overlaps &&
            (plan.after[c] == PinnedStagingPlan::kNone ||
             other.wait > copies[plan.after[c]].wait))
          plan.after[c] = earlier;
      }
    live.push_back(c);
  }
  return plan;
}

/// The NVMe tier copies of `function` that take a block of their own, in
/// program order, less the copies in `replaced` (a CPU update's host-tier
/// copies); a pair of `cpuPairs` (read instruction -> write-back's) is one
/// block from the read to the write-back's wait, listed at the read.
inline std::vector<StagedCopy>
nvmeCopiesOf(const Program &program, const Function &function,
             const std::set<size_t> &replaced,
             const std::map<size_t, size_t> &cpuPairs) {
  std::set<size_t> pairedWrites;
  for (const auto &pair : cpuPairs)
    pairedWrites.insert(pair.second);
  // Each copy's wait (a copy that is not started completes where it is).
  std::map<size_t, size_t> waits;
  for (size_t i = 0; i < function.instructions.size(); ++i) {
    const Instruction &instruction = function.instructions[i];
    if (instruction.tierCopy)
      waits[i] = i;
    else if (instruction.waitFor && waits.count(*instruction.waitFor))
      waits[*instruction.waitFor] = i;
  }
  std::vector<StagedCopy> copies;
  for (size_t i = 0; i < function.instructions.size(); ++i) {
    const Instruction &instruction = function.instructions[i];
    if (!instruction.tierCopy || replaced.count(i) || pairedWrites.count(i))
      continue;
    const TierCopy &copy = *instruction.tierCopy;
    const BufferInfo &tiered =
        program.buffers[instruction.args[copy.tierArg()]];
    if (tiered.tier != Tier::Nvme)
      continue;
    auto pair = cpuPairs.find(i);
    size_t until = pair == cpuPairs.end() ? waits[i] : waits[pair->second];
    copies.push_back({i, until, tiered.bytes, !copy.write});
  }
  return copies;
}

} // namespace partition::runtime::cuda

#endif // PARTITION_RUNTIME_CUDA_PINNEDSTAGING_H
