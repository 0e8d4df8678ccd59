//===- ActionSlots.h - which buffers a micro-batch in flight uses -*- C++ -*-===//
//
// An action walk (docs/action-walk.md) runs each
// action with the buffers of a slot: one copy of a chunk's activations per
// micro-batch in flight on the stage. A micro-batch takes the lowest free
// slot of its chunk at its first action there and gives it back after its
// last, so the slots of a chunk are the most micro-batches it holds at
// once (pp - s on stage s of 1F1B, all m for GPipe).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_ACTIONSLOTS_H
#define PARTITION_SCHEDULING_ACTIONSLOTS_H

#include "scheduling/Schedule.h"

#include <map>
#include <vector>

namespace partition::pipeline {

/// The slot of each action of one stage's `order` (per local chunk from 0),
/// and in `slotsPerChunk` how many slots each chunk needs.
std::vector<int> assignSlots(const std::vector<Action> &order,
                             std::map<int, int> &slotsPerChunk);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_ACTIONSLOTS_H
