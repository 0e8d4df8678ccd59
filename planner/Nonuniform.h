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
// The plan.json reader on this branch does not know "per_layer" yet, so
// the planner checks the rule itself (checkPerLayer) and the memory of
// these plans is the closed form.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_NONUNIFORM_H
#define PARTITION_PLANNER_NONUNIFORM_H

#include "planner/CostModel.h"

#include <string>
#include <vector>

namespace partition::planner {

/// "" when `parts` is a per-layer assignment the planner may emit for a
/// model of `layers` layers on a mesh of tp = `meshTp`, else the first
/// broken rule: the parts are contiguous ranges in layer order covering
/// layers 0 .. layers-1 once; every degree is at least 1 and divides
/// `meshTp`; the largest degree is `meshTp` (the mesh's tp is the largest
/// degree); the distinct degrees form a divisibility chain (of any two,
/// one divides the other); adjacent parts differ in degree; there are at
/// least two parts. (A degree dividing `meshTp` divides whatever `meshTp`
/// divides: heads, kv heads, ffn, vocabulary.)
std::string checkPerLayer(const std::vector<TpPart> &parts, int64_t layers,
                          int64_t meshTp);

/// The assignments searched on a tp = `meshTp` mesh: two and three parts
/// (a, b) and (a, b, c), degrees from the divisors of `meshTp`, every one
/// that checkPerLayer accepts, with part boundaries at every layer for
/// models of up to 32 layers and every ceil(layers / 32)-th layer above.
/// Layers are alike, so more parts than three gain nothing but balance
/// across pipeline stages, which boundaries at any layer already give.
std::vector<std::vector<TpPart>> perLayerAssignments(int64_t layers,
                                                     int64_t meshTp);

struct NonuniformResult {
  /// Fitting nonuniform plans, fastest first, at most `top`.
  std::vector<Prediction> ranked;
  int64_t evaluated = 0, unfit = 0;
};

/// Every assignment on each of `bases` (uniform plans with tp > 1; their
/// other fields stay), predicted with closed-form memory.
NonuniformResult searchNonuniform(const ModelShape &model,
                                  const Cluster &cluster,
                                  const std::vector<Candidate> &bases,
                                  int64_t top);

} // namespace partition::planner

#endif // PARTITION_PLANNER_NONUNIFORM_H
