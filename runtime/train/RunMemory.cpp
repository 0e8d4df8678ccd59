//===- RunMemory.cpp - every rank's peak memory, gathered and printed -----===//
//
// The summary's memory lines (Run::finish, RunLoop.cpp): rank 0 prints its
// arena, workspace and RSS beside every other rank's, and the arena each
// pipeline stage's instructions address. The ranks' figures travel as
// floats in 24-bit halves, exact up to 256 TiB.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainerRun.h"

#include <algorithm>
#include <cstdio>

namespace partition::runtime::detail {

void Run::printPeakMemory(const MemoryPeaks &memory) const {
  const std::vector<std::pair<int64_t, int64_t>> &peaks = memory.ranks;
  std::printf("peak memory: arena %llu B, workspace %llu B, process RSS "
              "%lld B",
              static_cast<unsigned long long>(program.arenaBytes),
              static_cast<unsigned long long>(backend->workspaceBytes()),
              static_cast<long long>(memory.rss));
  if (memory.device > 0)
    std::printf(", device %lld B (arena + workspaces)",
                static_cast<long long>(memory.device));
  if (peaks.size() == 2)
    std::printf(" (rank 0); rank 1:");
  else if (peaks.size() > 2)
    std::printf(" (rank 0); ranks 1-%zu:", peaks.size() - 1);
  if (peaks.size() > 1) {
    for (size_t r = 1; r < peaks.size(); ++r) {
      std::printf(" %lld", static_cast<long long>(peaks[r].first));
      if (memory.device > 0)
        std::printf("/%lld", static_cast<long long>(peaks[r].second));
    }
    std::printf(memory.device > 0 ? " B (RSS/device)" : " B");
  }
  std::printf("\n");
  if (memory.used.empty())
    return;
  // Per pipeline stage: the arena its ranks' instructions address (every
  // rank of a stage runs the same stream; the largest if they differed).
  std::vector<int64_t> stages(program.streams.size(), 0);
  int pp = program.pipelineAxisIndex();
  for (size_t r = 0; r < memory.used.size(); ++r) {
    size_t stage = pp < 0 ? 0
                          : size_t(comm::meshCoordinates(int64_t(r),
                                                         meshShape)[pp]);
    stages[stage] = std::max(stages[stage], memory.used[r]);
  }
  std::printf("peak memory per pipeline stage (measured: the arena its "
              "instructions address):");
  for (size_t stage = 0; stage < stages.size(); ++stage)
    std::printf("%s stage %zu arena %lld B", stage ? "," : "", stage,
                static_cast<long long>(stages[stage]));
  std::printf("\n");
}

std::vector<int64_t> Run::gatherBytes(int64_t bytes, const char *what) {
  // Two 24-bit halves: exact in floats up to 256 TiB.
  float mine[2] = {float(bytes >> 24), float(bytes & 0xffffff)};
  std::vector<float> all(2 * size_t(global.size()));
  global.allGather(mine, all.data(), 2, {what, -1});
  std::vector<int64_t> result;
  for (int r = 0; r < global.size(); ++r)
    result.push_back((int64_t(all[2 * r]) << 24) + int64_t(all[2 * r + 1]));
  return result;
}

std::vector<std::pair<int64_t, int64_t>> Run::gatherPeaks(int64_t rss,
                                                          int64_t device) {
  // Two 24-bit halves per value: exact in floats up to 256 TiB.
  float mine[4] = {float(rss >> 24), float(rss & 0xffffff),
                   float(device >> 24), float(device & 0xffffff)};
  std::vector<float> all(4 * size_t(global.size()));
  global.allGather(mine, all.data(), 4, {"peak memory", -1});
  std::vector<std::pair<int64_t, int64_t>> result;
  for (int r = 0; r < global.size(); ++r)
    result.push_back(
        {(int64_t(all[4 * r]) << 24) + int64_t(all[4 * r + 1]),
         (int64_t(all[4 * r + 2]) << 24) + int64_t(all[4 * r + 3])});
  return result;
}

} // namespace partition::runtime::detail
