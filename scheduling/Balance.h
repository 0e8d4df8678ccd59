//===- Balance.h - cut a layer sequence into chunks of equal cost -*- C++ -*-===//
//
// The stage split of --dist-pipeline: L layers, each with a cost, cut into
// C contiguous chunks of at least one layer each, the embedding's cost
// (`pre`) on the first chunk and the final norm, LM head and loss
// (`post`) on the last, so that the costliest chunk is as cheap as
// possible (a pipeline runs at the pace of its slowest stage). Exact, by
// dynamic programming over (chunks, layers): L and C are small.
//
// Plain C++ (no MLIR): the pass and its unit test share it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_BALANCE_H
#define PARTITION_SCHEDULING_BALANCE_H

#include <vector>

namespace partition::pipeline {

/// The layer count of each of `chunks` chunks (summing to
/// layerCosts.size()) whose largest cost is least. Among equally good
/// splits, the earlier chunks take fewer layers. Needs
/// 1 <= chunks <= layerCosts.size().
std::vector<int> balanceLayers(const std::vector<double> &layerCosts,
                               double pre, double post, int chunks);

/// balanceLayers for `layers` layers of one cost each (a uniform plan's
/// layers), in O(chunks + log layers) rather than the dynamic program's
/// O(chunks x layers^2): the least bottleneck is one of the values pre +
/// a x cost, post + b x cost or k x cost, found by bisection over each
/// family with a closed-form feasibility test; then each chunk takes as
/// many layers as fit under it, front first (balanceLayers' own choice on
/// ties: the earlier chunks take more). The planner asks this for every
/// candidate of a search.
std::vector<int> balanceUniformLayers(int layers, double layerCost,
                                      double pre, double post, int chunks);

/// The cost of each chunk of the split `counts`.
std::vector<double> chunkCosts(const std::vector<double> &layerCosts,
                               double pre, double post,
                               const std::vector<int> &counts);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_BALANCE_H
