//===- Offload.h - the cost of optimizer offload -----------------*- C++
//-*-===//
//
// What optimizer offload (plan.json's offload.optimizer, docs/offload.md)
// costs a plan: the exposed time of the moments' transfers to and from
// their tier, and the device memory they leave. predict() (CostModel.cpp)
// adds both.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_OFFLOAD_H
#define PARTITION_PLANNER_OFFLOAD_H

#include "planner/CostModel.h"

#include <string>

namespace partition::planner {

/// The exposed seconds of optimizer offload per step : `bytes` of moments of
/// this rank read from and written back to `tier` ("host" or "nvme") around
/// updates of `update` seconds in all, which the compiler moves into the
/// backward pass (`window` seconds of it, the last micro-batch's) except the
/// update of the tensor whose gradient completes last (`lastShare` of the bytes
/// and of the update: the embedding), at the end of the step; slices of
/// planfile::offloadSliceBytes(bufferBytes) per moment. `node` is the whole
/// node, `device` this rank's share of it, `ranksOnNode` the ranks sharing
/// the node's disk.
double offloadSeconds(const std::string &tier, double bytes,
                      int64_t bufferBytes, double update, double window,
                      double lastShare, const Cluster &node,
                      const Cluster &device, int64_t ranksOnNode);

/// The memory of a plan with its moments offloaded: they leave the
/// device (the staging buffers take their place) unless the host tier is
/// the device's own memory (a shared node); a host tier must fit the
/// node's host memory (`out.tierFits`).
void offloadMemory(const Candidate &plan, const Cluster &node,
                   const Cluster &device, Prediction &out);

} // namespace partition::planner

#endif // PARTITION_PLANNER_OFFLOAD_H
