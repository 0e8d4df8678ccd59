//===- Candidate.cpp - a plan the planner considers, written out ----------===//
//
// How a Candidate is written: as plan.json (what partition-compile reads)
// and as the one-line label of the planner's tables; and its tensor-parallel
// degree per layer. The cost model (CostModel.cpp) prices it.
//
//===----------------------------------------------------------------------===//

#include "planner/CostModel.h"

#include "passes/plan/PlanAxisNames.h"

#include <nlohmann/json.hpp>

#include <sstream>

namespace partition::planner {

std::string Candidate::planJson() const {
  std::ostringstream os;
  os << "{\"mesh\": {\"" << planfile::kDataAxis << "\": " << dp << ", \""
     << planfile::kTensorAxis << "\": " << tp << ", \""
     << planfile::kPipelineAxis << "\": " << pp;
  if (cp > 1)
    os << ", \"" << planfile::kContextAxis << "\": " << cp;
  os << "}";
  if (cp > 1)
    os << ", \"context_parallel\": {\"method\": \"" << cpMethod
       << "\", \"load_balance\": \"" << cpLoadBalance << "\"}";
  if (!perLayer.empty()) {
    // The compiler's nonuniform format (docs/planner.md, "Nonuniform
    // degrees").
    os << ", \"tensor_parallel\": {\"per_layer\": [";
    for (size_t i = 0; i < perLayer.size(); ++i) {
      const TpPart &part = perLayer[i];
      os << (i ? ", " : "") << "{\"layers\": \"" << part.first;
      if (part.last != part.first)
        os << "-" << part.last;
      os << "\", \"tp\": " << part.tp << "}";
    }
    os << "], \"sequence_parallel\": "
       << (sequenceParallel ? "true" : "false") << "}";
  } else if (sequenceParallel) {
    os << ", \"tensor_parallel\": {\"sequence_parallel\": true}";
  }
  os << ", \"pipeline\": {";
  if (pp > 1)
    os << "\"schedule\": \"" << schedule << "\", ";
  if (virtualStages > 1)
    os << "\"virtual_stages\": " << virtualStages << ", ";
  if (!stages.empty()) {
    os << "\"stages\": [";
    for (size_t i = 0; i < stages.size(); ++i)
      os << (i ? ", " : "") << stages[i];
    os << "], ";
  }
  os << "\"microbatches\": " << microbatches << "}";
  if (zeroStage > 0)
    os << ", \"zero\": {\"stage\": " << zeroStage << "}";
  if (recompute != "none")
    os << ", \"recompute\": {\"policy\": \"" << recompute << "\"}";
  if (ep > 1)
    os << ", \"moe\": {\"expert_parallel\": " << ep << "}";
  if (offload != "none" || offloadParameters != "none") {
    os << ", \"offload\": {";
    if (offload != "none")
      os << "\"optimizer\": \"" << offload << "\"";
    if (offloadParameters != "none")
      os << (offload != "none" ? ", " : "") << "\"parameters\": \""
         << offloadParameters << "\"";
    if (offload == "nvme" || offloadParameters == "nvme")
      os << ", \"path\": " << nlohmann::json(offloadPath).dump();
    if (offloadBufferBytes != planfile::kOffloadDefaultBufferBytes)
      os << ", \"buffer_bytes\": " << offloadBufferBytes;
    os << "}";
  }
  os << ", \"precision\": \"" << precision << "\"}";
  return os.str();
}

std::string Candidate::label() const {
  std::ostringstream os;
  os << "dp" << dp << " tp" << tp;
  if (!perLayer.empty()) {
    // tp4[0-5:4,6-11:2]: the layers' degrees on the tp4 mesh.
    os << "[";
    for (size_t i = 0; i < perLayer.size(); ++i) {
      const TpPart &part = perLayer[i];
      os << (i ? "," : "") << part.first;
      if (part.last != part.first)
        os << "-" << part.last;
      os << ":" << part.tp;
    }
    os << "]";
  }
  os << (sequenceParallel ? "+sp" : "");
  if (cp > 1) {
    // cp16 (all_gather, zigzag); the other choices named.
    os << " cp" << cp;
    if (cpMethod != "all_gather")
      os << " " << cpMethod;
    if (cpLoadBalance != "zigzag")
      os << " unbalanced";
  }
  if (ep > 1)
    os << " ep" << ep;
  os << " pp" << pp;
  if (pp > 1) {
    os << " " << schedule;
    if (virtualStages > 1)
      os << " v" << virtualStages;
    if (!stages.empty())
      os << " stages";
  }
  os << " mb" << microBatch << "x" << microbatches;
  if (zeroStage > 0)
    os << " zero" << zeroStage;
  if (recompute != "none")
    os << " rc-" << recompute;
  if (offload != "none")
    os << " off-" << offload;
  if (offloadParameters != "none")
    os << " offp-" << offloadParameters;
  os << " " << precision;
  return os.str();
}

int64_t Candidate::layerTp(int64_t layer) const {
  for (const TpPart &part : perLayer)
    if (layer >= part.first && layer <= part.last)
      return part.tp;
  return tp;
}

} // namespace partition::planner
