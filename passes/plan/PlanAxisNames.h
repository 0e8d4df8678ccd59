//===- PlanAxisNames.h - plan.json's mesh axis names ------------*- C++ -*-===//
//
// The names of the mesh's axes: plan.json's fields under "mesh", spelled
// once here. The plan reader (Plan.h) gives them as Plan::kDataAxis,
// kTensorAxis, kPipelineAxis and kContextAxis; the planner, which writes plans in plain
// C++ without LLVM, uses these. Everyone else looks an axis up by its role
// or uses Plan's constants.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PLAN_PLANAXISNAMES_H
#define PARTITION_PASSES_PLAN_PLANAXISNAMES_H

namespace partition::planfile {

inline constexpr char kDataAxis[] = "dp";
inline constexpr char kTensorAxis[] = "tp";
inline constexpr char kPipelineAxis[] = "pp";
inline constexpr char kContextAxis[] = "cp";
/// With expert parallelism: the part of the data-parallel ranks the experts
/// are split over (not a plan.json field: moe.expert_parallel sizes it).
inline constexpr char kExpertAxis[] = "ep";

} // namespace partition::planfile

#endif // PARTITION_PASSES_PLAN_PLANAXISNAMES_H
