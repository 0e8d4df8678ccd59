//===- RtScheduleOps.cpp - code the runtime repeats ---------------------===//
//
// The verifiers of RtScheduleOps.td's ops: the micro-batch loop's and the
// action walk's markers stand where their runtime forms can be read off.
//
//===----------------------------------------------------------------------===//

#include "dialects/Rt/RtOps.h"

using namespace mlir;
using namespace partition::rt;

//===----------------------------------------------------------------------===//
// The micro-batch loop
//===----------------------------------------------------------------------===//

LogicalResult MicrobatchLoopBeginOp::verify() {
  // The block's only loop: no begin before it, its end after it.
  for (Operation *op = getOperation()->getPrevNode(); op;
       op = op->getPrevNode())
    if (isa<MicrobatchLoopBeginOp>(op))
      return emitOpError("needs the block's only micro-batch loop, but the "
                         "block begins one before it");
  for (Operation *op = getOperation()->getNextNode(); op;
       op = op->getNextNode()) {
    if (isa<MicrobatchLoopEndOp>(op))
      return success();
    if (isa<MicrobatchLoopBeginOp>(op))
      break;
  }
  return emitOpError("needs an rt.microbatch_loop_end after it in its block");
}

LogicalResult MicrobatchLoopEndOp::verify() {
  for (Operation *op = getOperation()->getPrevNode(); op;
       op = op->getPrevNode()) {
    if (isa<MicrobatchLoopBeginOp>(op))
      return success();
    if (isa<MicrobatchLoopEndOp>(op))
      break;
  }
  return emitOpError("needs an rt.microbatch_loop_begin before it in its "
                     "block, after any other rt.microbatch_loop_end");
}


//===----------------------------------------------------------------------===//
// The action walk
//===----------------------------------------------------------------------===//

namespace {

/// The block's `rt.action_walk_end` after `begin`, or null.
ActionWalkEndOp walkEndAfter(Operation *begin) {
  for (Operation *op = begin->getNextNode(); op; op = op->getNextNode()) {
    if (auto end = dyn_cast<ActionWalkEndOp>(op))
      return end;
    if (isa<ActionWalkBeginOp>(op))
      return nullptr;
  }
  return nullptr;
}

/// The block's `rt.action_walk_begin` before `op` with no end between, or
/// null.
ActionWalkBeginOp walkBeginBefore(Operation *op) {
  for (Operation *prev = op->getPrevNode(); prev; prev = prev->getPrevNode()) {
    if (auto begin = dyn_cast<ActionWalkBeginOp>(prev))
      return begin;
    if (isa<ActionWalkEndOp>(prev))
      return nullptr;
  }
  return nullptr;
}

} // namespace

LogicalResult ActionWalkBeginOp::verify() {
  Block *block = getOperation()->getBlock();
  for (Operation &op : *block)
    if ((isa<ActionWalkBeginOp>(op) && &op != getOperation()) ||
        isa<MicrobatchLoopBeginOp>(op))
      return emitOpError("needs the block's only action walk and no "
                         "micro-batch loop beside it");
  ActionWalkEndOp end = walkEndAfter(getOperation());
  if (!end)
    return emitOpError("needs an rt.action_walk_end after it in its block");
  if (!isa_and_nonnull<ActionRegionOp>(getOperation()->getNextNode()))
    return emitOpError("must be followed by its first rt.action_region");
  int64_t regions = 0;
  for (Operation *op = getOperation()->getNextNode(); op != end;
       op = op->getNextNode())
    regions += isa<ActionRegionOp>(op);
  // Slots after slot 0: their substitutions, pairwise of one type.
  int64_t substitutions = 0;
  for (int32_t size : getSlotSizes()) {
    if (size < 0)
      return emitOpError("has a slot of ") << size << " buffers";
    substitutions += size;
  }
  if (substitutions != static_cast<int64_t>(getTemplates().size()) ||
      getTemplates().size() != getCopies().size())
    return emitOpError("substitutes ")
           << getCopies().size() << " copies for " << getTemplates().size()
           << " buffers, but its slots hold " << substitutions;
  for (auto [from, to] : llvm::zip(getTemplates(), getCopies()))
    if (from.getType() != to.getType() || from == to)
      return emitOpError("substitutes a ")
             << to.getType() << " for a " << from.getType()
             << "; a slot's buffer is another of the same type";
  // Repeats of the last slot, each its copies at a stride past the last.
  if (getSlotRepeats() < 0 || (getSlotRepeats() > 0 && getSlotSizes().empty()))
    return emitOpError("repeats its last slot ")
           << getSlotRepeats() << " times; it needs a slot after slot 0 and "
           << "a count of at least 0";
  if (std::optional<ArrayRef<int64_t>> strides = getSlotStrides()) {
    if (getSlotRepeats() == 0 ||
        static_cast<int64_t>(strides->size()) != getSlotSizes().back() ||
        llvm::any_of(*strides, [](int64_t stride) { return stride <= 0; }))
      return emitOpError("has ")
             << strides->size() << " slot strides; a repeated last slot "
             << "needs one positive stride per copy, "
             << (getSlotSizes().empty() ? 0 : getSlotSizes().back());
  }
  // Rows: per region, each copy from an input of its element type.
  if (static_cast<int64_t>(getRegionRows().size()) != regions)
    return emitOpError("copies rows for ")
           << getRegionRows().size() << " regions, but the walk has "
           << regions;
  int64_t rows = 0;
  for (int32_t count : getRegionRows())
    rows += count < 0 ? 0 : count;
  if (rows != static_cast<int64_t>(getRows().size()) ||
      getRows().size() != getRowsSources().size())
    return emitOpError("copies ")
           << getRowsSources().size() << " inputs' rows into "
           << getRows().size() << " buffers, but its regions copy " << rows;
  for (auto [into, from] : llvm::zip(getRows(), getRowsSources()))
    if (cast<MemRefType>(into.getType()).getElementType() !=
        cast<MemRefType>(from.getType()).getElementType())
      return emitOpError("copies rows of a ")
             << from.getType() << " into a " << into.getType();
  // Actions: triples naming a region and a slot.
  ArrayRef<int32_t> actions = getActions();
  if (actions.empty() || actions.size() % 3 != 0)
    return emitOpError("needs actions as (region, slot, micro-batch) "
                       "triples, but has ")
           << actions.size() << " numbers";
  const int64_t slots =
      static_cast<int64_t>(getSlotSizes().size()) + 1 + getSlotRepeats();
  for (size_t i = 0; i < actions.size(); i += 3)
    if (actions[i] < 0 || actions[i] >= regions || actions[i + 1] < 0 ||
        actions[i + 1] >= slots || actions[i + 2] < 0)
      return emitOpError("action ")
             << i / 3 << " runs region " << actions[i] << " in slot "
             << actions[i + 1] << " on micro-batch " << actions[i + 2]
             << ", but the walk has " << regions << " regions and " << slots
             << " slots";
  return success();
}

LogicalResult ActionRegionOp::verify() {
  if (!walkBeginBefore(getOperation()) ||
      !walkEndAfter(walkBeginBefore(getOperation())))
    return emitOpError("must lie between an rt.action_walk_begin and its "
                       "rt.action_walk_end");
  return success();
}

LogicalResult ActionWalkEndOp::verify() {
  if (!walkBeginBefore(getOperation()))
    return emitOpError("needs an rt.action_walk_begin before it in its "
                       "block, after any other rt.action_walk_end");
  return success();
}

LogicalResult ActionMarkOp::verify() {
  StringRef phase = getPhase();
  if (phase != "F" && phase != "B" && phase != "W" && phase != "update")
    return emitOpError("marks phase '")
           << phase << "'; an action is F, B or W, or the update after them";
  if (phase == "update" && (getModelChunk() != 0 || getMicrobatch() != 0))
    return emitOpError("marks the update with model_chunk ")
           << getModelChunk() << " and microbatch " << getMicrobatch()
           << "; the update is of no chunk or micro-batch (0 and 0)";
  return success();
}
