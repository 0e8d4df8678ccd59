//===- PredictionReport.h - partition-plan's output ------------*- C++ -*-===//
//
// How partition-plan shows predictions: sizes and times, each plan as JSON,
// the breakdown of a step and why the best plan wins; and --nonuniform's
// search for per-layer degrees over the best uniform plans, with its report.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_PARTITION_PLAN_PREDICTIONREPORT_H
#define PARTITION_TOOLS_PARTITION_PLAN_PREDICTIONREPORT_H

#include "model/ModelConfig.h"
#include "planner/CostModel.h"
#include "planner/Nonuniform.h"
#include "planner/Search.h"

#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace partition::planner {

/// "1.5 GiB" / "12.0 MiB".
std::string gib(double bytes);
/// "1.234 s" / "12.345 ms".
std::string seconds(double s);

nlohmann::ordered_json toJson(const Prediction &p);

/// A pipeline's layers per stage as the prediction split them, e.g.
/// "7, 8 x14, 7 (the plan's pipeline.stages)"; "" without a pipeline.
std::string stageLayersText(const Prediction &p);

/// The step's terms, one line each.
void printBreakdown(const Prediction &p, llvm::raw_ostream &os);

/// A mixture of experts' line: its experts, top-k and capacity, the FLOPs
/// per token, and under the plan the experts per rank and the bytes of
/// each all-to-all (planner/Experts.h).
void printExperts(const ModelShape &shape, const Prediction &p,
                  llvm::raw_ostream &os);

/// --explain: the best plan's breakdown, its dominant term, what it would
/// cost with one choice changed (interleaving, sequence parallelism, the
/// neighbouring recompute policies and ZeRO stages), and where the
/// runner-up loses.
void printExplanation(const std::vector<Prediction> &ranked,
                      const ModelShape &model, const Cluster &cluster,
                      llvm::raw_ostream &os);

/// --nonuniform: the uniform plans the per-layer degrees start from, and
/// what the search found.
struct NonuniformReport {
  std::vector<int64_t> meshTps; // the tp degrees of the bases
  int64_t bases = 0;
  NonuniformResult result;
  bool beats(const Prediction &best) const {
    return !result.ranked.empty() &&
           result.ranked.front().stepSeconds < best.stepSeconds;
  }
  /// The fastest nonuniform plan partition-compile accepts when it is
  /// faster than `than`, else null: what -o writes in place of `than`.
  const Prediction *compiledWinner(const Prediction &than) const {
    for (const Prediction &p : result.ranked)
      if (p.notCompilable.empty())
        return p.stepSeconds < than.stepSeconds ? &p : nullptr;
    return nullptr;
  }
};

/// Searches per-layer degrees over the best uniform plans (PredictionReport.cpp
/// says how the bases are chosen), keeping the `top` fastest.
NonuniformReport searchNonuniformPlans(const ModelShape &shape,
                                       const Cluster &cluster,
                                       const SearchOptions &options,
                                       const Fixed &fixed,
                                       const model::ModelConfig &config,
                                       const MemoryOracle &oracle,
                                       int64_t top);

/// Each nonuniform plan as JSON, with its gain over the best uniform plan.
nlohmann::ordered_json nonuniformJson(const NonuniformReport &report,
                                      const Prediction &best);

void printNonuniform(const NonuniformReport &report, const Prediction &best,
                     llvm::raw_ostream &os);

} // namespace partition::planner

#endif // PARTITION_TOOLS_PARTITION_PLAN_PREDICTIONREPORT_H
