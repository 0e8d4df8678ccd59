//===- Nonuniform.h - a tensor-parallel degree per part of the model -*- C++ -*-===//
//
// Nonuniform tensor parallelism (docs/planner.md, "Nonuniform degrees"):
// on a mesh whose tp is T, layer ranges ("parts") may run at smaller
// degrees d dividing T. A part at degree d runs on sub-groups of d ranks;
// the T/d sub-groups of a tp group compute it redundantly (the same FLOPs
// per rank as a uniform tp = d, collectives over d ranks) and each holds
// its weights at degree d. It trades compute and memory for communication:
// it pays where tensor-parallel collectives are slow and a uniform lower
// degree (more data parallelism) does not fit or costs more elsewhere.
//
// Which assignments are valid is the plan.json reader's say
// (passes/plan/Plan.cpp, asked through a Validate callback, as the uniform
// search asks it); the memory of those that compile is the compiler's
// memory plan (a MemoryOracle), the closed form otherwise.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_NONUNIFORM_H
#define PARTITION_PLANNER_NONUNIFORM_H

#include "planner/CostModel.h"
#include "planner/Search.h"

#include <string>
#include <vector>

namespace partition::planner {

/// The assignments searched on a tp = `meshTp` mesh: two and three parts
/// (a, b) and (a, b, c) covering layers 0 .. layers-1 in order, adjacent
/// parts at different degrees, degrees from the divisors of `meshTp`, with
/// part boundaries at every layer for models of up to 32 layers and every
/// ceil(layers / 32)-th layer above. Layers are alike, so more parts than
/// three gain nothing but balance across pipeline stages, which boundaries
/// at any layer already give. Whether the compiler accepts one (degrees
/// in a divisibility chain, dividing the heads, with pp or ZeRO) is the
/// plan.json reader's to say, not this function's.
std::vector<std::vector<TpPart>> perLayerAssignments(int64_t layers,
                                                     int64_t meshTp);

struct NonuniformResult {
  /// Fitting nonuniform plans, fastest first, at most `top`. A plan the
  /// reader refused softly (kept under `includeUncompilable`) carries the
  /// refusal in notCompilable.
  std::vector<Prediction> ranked;
  int64_t evaluated = 0, unfit = 0;
  /// Assignments the reader refused (not predicted), and the first reason.
  int64_t refused = 0;
  std::string firstRefusal;
};

/// Every assignment on each of `bases` (uniform plans with tp > 1; their
/// other fields stay) that `validate` accepts (or refuses softly, when
/// `includeUncompilable`), predicted as the uniform search predicts: a
/// lower bound first, then, by branch and bound, the exact step time and,
/// for the plans that compile, `memory`'s figure (memorySource
/// "compiled"; a plan that then does not fit is dropped and counted
/// unfit). Without `memory`, or where it cannot say, the closed form.
NonuniformResult searchNonuniform(const ModelShape &model,
                                  const Cluster &cluster,
                                  const std::vector<Candidate> &bases,
                                  int64_t top, const Validate &validate,
                                  const MemoryOracle &memory = nullptr,
                                  bool includeUncompilable = false);

} // namespace partition::planner

#endif // PARTITION_PLANNER_NONUNIFORM_H
