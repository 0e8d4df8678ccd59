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

/// The same from one pool of slots for all of the stage's chunks: as many
/// as the most micro-batch chunks in flight at once (an interleaved stage
/// of pp 2, v 2 over 8 micro-batches: 5, where each chunk's own pool needs
/// 4 + 2). A pool slot needs the bytes of the largest chunk that takes it
/// (`bytesPerChunk`: one micro-batch's slot buffers of each), so a chunk
/// takes the free slot that grows least, then the smallest. Each chunk's
/// pool slots are renumbered from 0 (its slots, in the result and
/// `slotsPerChunk`); `poolBytes`, when given, gets each pool slot's
/// bytes. A chunk then has more slots than with its own pool, but one pool
/// slot's buffers of two chunks are never held at once and may share bytes
/// (lowering/ActionWalkMemory.h).
std::vector<int> assignSharedSlots(const std::vector<Action> &order,
                                   const std::map<int, double> &bytesPerChunk,
                                   std::map<int, int> &slotsPerChunk,
                                   std::vector<double> *poolBytes = nullptr);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_ACTIONSLOTS_H
