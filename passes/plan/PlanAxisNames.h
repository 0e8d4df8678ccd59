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

#include <cstdint>

namespace partition::planfile {

inline constexpr char kDataAxis[] = "dp";
inline constexpr char kTensorAxis[] = "tp";
inline constexpr char kPipelineAxis[] = "pp";
inline constexpr char kContextAxis[] = "cp";
/// With expert parallelism: the part of the data-parallel ranks the experts
/// are split over (not a plan.json field: moe.expert_parallel sizes it).
inline constexpr char kExpertAxis[] = "ep";

/// offload's staging (Plan::Offload, which the planner's cost model reads
/// here): the default buffer_bytes, 64 MiB; slices are whole 4096-byte I/O
/// blocks (O_DIRECT's unit), a twelfth of the buffer per moment (at least
/// one block; the smallest buffer holds three slices of both moments).
inline constexpr int64_t kOffloadDefaultBufferBytes = int64_t(64) << 20;
inline constexpr int64_t kOffloadSliceAlignment = 4096;
inline constexpr int64_t kOffloadMinBufferBytes =
    3 * 2 * kOffloadSliceAlignment;
inline constexpr int64_t kOffloadSlicesPerBuffer = 6 * 2;
/// The bytes of one moment's slice under `bufferBytes`.
inline constexpr int64_t offloadSliceBytes(int64_t bufferBytes) {
  int64_t slice = bufferBytes / kOffloadSlicesPerBuffer /
                  kOffloadSliceAlignment * kOffloadSliceAlignment;
  return slice > kOffloadSliceAlignment ? slice : kOffloadSliceAlignment;
}

} // namespace partition::planfile

#endif // PARTITION_PASSES_PLAN_PLANAXISNAMES_H
