//===- StageSplit.cpp - the layers each pipeline stage holds --------------===//

#include "planner/StageSplit.h"

namespace partition::planner {

std::vector<int64_t> stageLayerIndices(const ChunkSplit &split,
                                       const Candidate &p, int64_t stage) {
  std::vector<int64_t> out;
  for (int64_t v = 0; v < p.virtualStages; ++v) {
    size_t chunk = size_t(v * p.pp + stage);
    for (int64_t i = 0; i < split.counts[chunk]; ++i)
      out.push_back(split.first[chunk] + i);
  }
  return out;
}

double stageParameters(const ModelShape &m, const Candidate &p,
                       const ChunkSplit &split, int64_t stage,
                       bool expertsOnly) {
  double t = double(p.tp);
  // The mean layer, its experts split over ep ranks.
  double experts = m.meanLayerExpertParameters();
  double layer = expertsOnly ? experts / double(p.ep)
                             : m.meanLayerParameters() - experts +
                                   experts / double(p.ep);
  double params = double(split.stageLayers(p, stage)) * layer / t;
  if (!p.perLayer.empty()) {
    // Each layer of the stage at its own degree.
    params = 0;
    for (int64_t l : stageLayerIndices(split, p, stage))
      params += layer / double(p.layerTp(l));
  }
  if (expertsOnly)
    return params;
  double embedding = double(m.vocab) * double(m.hidden) / t;
  if (stage == 0)
    params += embedding + double(m.positions) * double(m.hidden);
  if (stage == p.pp - 1 && ((m.llama && !m.tiedHead) || p.pp > 1))
    params += embedding; // untied head, or the tied copy of a pipeline
  return params;
}

} // namespace partition::planner
