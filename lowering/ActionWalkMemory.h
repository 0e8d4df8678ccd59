//===- ActionWalkMemory.h - slot buffers a walk holds together --*- C++ -*-===//
//
// An action walk's slot buffers (rt.action_walk_begin's templates and
// copies) are live across the whole walk in the program's order, but a
// slot holds a micro-batch's values only from the first action of that
// micro-batch that touches them to the last. Two slot buffers never held
// at one same action may share bytes (one pool slot's buffers of an
// interleaved stage's two chunks: pipeline::assignSharedSlots), and within
// an action a region's own temporaries may take a slot buffer's bytes
// where no action running that region holds it (the part of a GPipe
// stage's first backward's slot it has finished reading):
// docs/action-walk.md, "Memory".
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_ACTIONWALKMEMORY_H
#define PARTITION_LOWERING_ACTIONWALKMEMORY_H

#include "lowering/MemoryReport.h"

#include "mlir/IR/Block.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstdint>
#include <utility>
#include <vector>

namespace partition {

/// How a held class holds data in an action: through the whole region
/// (an action between its micro-batch's first and last), from its first
/// touch (its first action), up to its last touch (its last), or between
/// the two (both).
enum HeldKind : uint8_t { Through = 1, FromFirst = 2, ToLast = 4, Between = 8 };

/// An action walk's slot buffers at action granularity, for the report.
struct WalkLife {
  /// Each region's op positions [its marker, its last op].
  std::vector<std::pair<unsigned, unsigned>> regions;
  /// Per action: its region, and the held classes holding data in it.
  std::vector<int32_t> actionRegions;
  std::vector<llvm::SmallVector<std::pair<int, uint8_t>, 4>> actionHolds;
  /// Per held class, its buffers (interval indices).
  std::vector<llvm::SmallVector<unsigned, 0>> members;
  /// Per held buffer (interval index), per region: its first and last
  /// touch there (first > last: none).
  llvm::DenseMap<unsigned, llvm::SmallVector<std::pair<unsigned, unsigned>, 0>>
      touches;

  /// The positions of region `region` at which a buffer touched there at
  /// `touch` holds data in an action of kind `kind`.
  std::pair<unsigned, unsigned> lifeIn(unsigned region, uint8_t kind,
                                       std::pair<unsigned, unsigned> touch) const {
    auto [first, last] = regions[region];
    if (kind == Through)
      return {first, last};
    if (kind == FromFirst)
      return {touch.first, last};
    if (kind == ToLast)
      return {first, touch.second};
    return touch;
  }
};

/// Per op position of the function (`positions` of them): the most bytes
/// the walk's slot buffers hold there over the actions running its region,
/// and their split by `category` (one of `categories`) at that action; 0
/// outside the walk's regions (before its first action and after its last
/// they hold nothing). Needs plan.walkLife.
void heldProfile(const TemporaryPlan &plan, size_t positions,
                 unsigned categories,
                 llvm::function_ref<unsigned(const Interval &)> category,
                 std::vector<int64_t> &total,
                 std::vector<llvm::SmallVector<int64_t, 5>> &parts);

/// A walk whose last slot repeats (rt.action_walk_begin slot_repeats = R):
/// each copy of that slot takes R + 1 times its size, aligned, the j-th
/// repeat at j strides past it, and the walk gets the strides. Fails when
/// that passes `maxBytes`.
mlir::LogicalResult reserveRepeatedSlots(mlir::Block &body,
                                         TemporaryPlan &plan,
                                         int64_t maxBytes);

/// Gives each slot buffer of `body`'s action walk (its interval in `plan`)
/// a held class: the buffers touched by the same regions in the same slot,
/// held at the same actions. Fills plan.heldTogether (which classes are
/// held at some same action), each interval's
/// heldAtPeak, plan.heldLife (where in each region each slot buffer holds
/// data) and plan.walkLife, and marks each region's own temporaries
/// (Interval::region). A slot buffer that an op outside the walk's regions
/// reads or writes keeps no class (it is live wherever the program says).
void findHeldSlots(mlir::Block &body, TemporaryPlan &plan);

} // namespace partition

#endif // PARTITION_LOWERING_ACTIONWALKMEMORY_H
