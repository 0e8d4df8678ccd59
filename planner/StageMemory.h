//===- StageMemory.h - the closed-form memory of a plan ----------*- C++ -*-===//
//
// Internal to the cost model (CostModel.cpp): the memory per rank a plan
// needs by formula, stage by stage, where the compiler's memory plan is not
// asked (--memory closed-form, and the search's screening).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_STAGEMEMORY_H
#define PARTITION_PLANNER_STAGEMEMORY_H

#include "planner/Cluster.h"
#include "planner/CostModel.h"
#include "planner/StageSplit.h"

namespace partition::planner {

/// Closed-form memory of the stage that needs the most: the first holds
/// the most micro-batches in flight, the last the logits, and with an
/// uneven split a middle stage may hold more layers than either.
Memory stageMemory(const ModelShape &m, const Candidate &p, const Cluster &c,
                   const ChunkSplit &split);

} // namespace partition::planner

#endif // PARTITION_PLANNER_STAGEMEMORY_H
