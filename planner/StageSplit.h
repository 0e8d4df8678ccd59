//===- StageSplit.h - the layers each pipeline stage holds --------*- C++ -*-===//
//
// Internal to the cost model (CostModel.cpp, StageMemory.cpp): the plan's
// split of the layers into model chunks (chunkLayerCounts), and what a
// pipeline stage holds of them.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_STAGESPLIT_H
#define PARTITION_PLANNER_STAGESPLIT_H

#include "planner/CostModel.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace partition::planner {

/// Where each model chunk starts and how many layers it holds.
struct ChunkSplit {
  std::vector<int64_t> counts, first;
  explicit ChunkSplit(std::vector<int64_t> layers) : counts(std::move(layers)) {
    int64_t next = 0;
    for (int64_t count : counts) {
      first.push_back(next);
      next += count;
    }
  }
  /// The layers pipeline stage `stage` holds (its chunks v x pp + stage).
  int64_t stageLayers(const Candidate &p, int64_t stage) const {
    int64_t layers = 0;
    for (int64_t v = 0; v < p.virtualStages; ++v)
      layers += counts[size_t(v * p.pp + stage)];
    return layers;
  }
};

/// The layers pipeline stage `stage` holds, by index.
std::vector<int64_t> stageLayerIndices(const ChunkSplit &split,
                                       const Candidate &p, int64_t stage);

/// Parameters held by pipeline stage `stage` on one tp rank; with
/// `expertsOnly`, only its expert weights (a 1/ep share: Experts.h).
double stageParameters(const ModelShape &m, const Candidate &p,
                       const ChunkSplit &split, int64_t stage,
                       bool expertsOnly = false);

} // namespace partition::planner

#endif // PARTITION_PLANNER_STAGESPLIT_H
