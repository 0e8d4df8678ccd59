//===- ActionWalkMemory.h - slot buffers a walk holds together --*- C++ -*-===//
//
// An action walk's slot buffers (rt.action_walk_begin's templates and
// copies) are live across the whole walk in the program's order, but a
// slot holds a micro-batch's values only from the first action of that
// micro-batch that touches them to the last. Two slot buffers never held
// at one same action may share bytes: an interleaved stage holds its
// first chunk's deepest slots in the warm-up and its second chunk's later,
// never both (docs/action-walk.md, "Memory").
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_ACTIONWALKMEMORY_H
#define PARTITION_LOWERING_ACTIONWALKMEMORY_H

#include "lowering/MemoryReport.h"

#include "mlir/IR/Block.h"

namespace partition {

/// Gives each slot buffer of `body`'s action walk (its interval in `plan`)
/// a held class: the buffers touched by the same regions in the same slot,
/// held at the same actions. Fills plan.heldTogether (which classes are
/// held at some same action), plan.heldPeak and each interval's
/// heldAtPeak. A slot buffer that an op outside the walk's regions reads
/// or writes keeps no class (it is live wherever the program says).
void findHeldSlots(mlir::Block &body, TemporaryPlan &plan);

} // namespace partition

#endif // PARTITION_LOWERING_ACTIONWALKMEMORY_H
