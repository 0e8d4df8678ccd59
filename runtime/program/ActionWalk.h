//===- ActionWalk.h - a stage's schedule as data, checked and laid out -*- C++ -*-===//
//
// A function with an action walk (ptp::ActionWalk, docs/compiler.md "The
// schedule as data") keeps one copy of each kind of action's code (a
// region) and a list of actions: region, slot, micro-batch. The loader
// checks the walk against the function and the buffers, then appends the
// code each slot > 0 runs (the region with the slot's buffers in place of
// the templates), so that a backend compiles instructions once and runs
// index ranges, as for any function.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_ACTIONWALK_H
#define PARTITION_RUNTIME_PROGRAM_ACTIONWALK_H

#include "runtime/program/Program.h"

#include <string>

namespace partition::runtime {

/// The most instructions the loader copies for a walk's slots.
inline constexpr uint64_t kMaxWalkCopies = uint64_t(1) << 22;

/// Expands each slot of `function`'s walk that repeats (GPipe's last) into
/// its 1 + repeat slots, appending to `program.buffers` the copies of each
/// repeat at its strides. Refuses, naming the entry, strides that do not
/// pair with the copies, a repeat that would overlap the copy it repeats
/// or leave the arena, and more repeats than the walk has actions.
void expandRepeatedSlots(Function &function, Program &program,
                         const std::string &origin);

/// Refuses, naming the function and the entry, a walk whose regions are
/// not contiguous instructions of the function, whose slots substitute
/// buffers of another type or size, whose actions name no region or slot,
/// whose rows copies read past their input, or whose started collectives
/// are waited for outside their region.
void checkActionWalk(const Function &function, const Program &program,
                     const std::string &origin);

/// Appends each (region, slot > 0) pair's instructions and fills
/// `walk->ranges`. The walk must be checked.
void expandActionWalk(Function &function);

/// How many times a step runs each instruction of `function`: the
/// micro-batch loop's count inside it, the number of actions that run its
/// range in a walk (0 for a range no action runs; a slot that substitutes
/// nothing shares slot 0's), else once. One pass over the instructions and
/// the walk's ranges.
inline std::vector<int64_t> instructionRuns(const Function &function) {
  std::vector<int64_t> runs(function.instructions.size(), 1);
  if (function.walk) {
    const ActionWalk &walk = *function.walk;
    std::vector<bool> inRegion(runs.size(), false);
    std::vector<int64_t> total(runs.size(), 0);
    for (size_t r = 0; r < walk.ranges.size(); ++r)
      for (size_t s = 0; s < walk.ranges[r].size(); ++s) {
        auto [begin, end] = walk.ranges[r][s];
        for (size_t i = begin; i < end && i < runs.size(); ++i) {
          inRegion[i] = true;
          total[i] += walk.runs[r][s];
        }
      }
    for (size_t i = 0; i < runs.size(); ++i)
      if (inRegion[i])
        runs[i] = total[i];
  } else if (function.loop) {
    for (size_t i = function.loop->begin;
         i < function.loop->end && i < runs.size(); ++i)
      runs[i] = function.loop->count;
  }
  return runs;
}

/// The instructions of `function` in the order a run executes them, each
/// once per time it runs (a walk's ranges in action order; a loop's body
/// once, as both ends of a transfer loop alike).
template <typename Visit>
void forEachExecuted(const Function &function, Visit &&visit) {
  if (!function.walk) {
    for (size_t i = 0; i < function.instructions.size(); ++i)
      visit(i);
    return;
  }
  const ActionWalk &walk = *function.walk;
  for (size_t i = 0; i < walk.regions.front().begin; ++i)
    visit(i);
  for (const WalkAction &action : walk.actions) {
    auto [begin, end] = walk.ranges[action.region][action.slot];
    for (size_t i = begin; i < end; ++i)
      visit(i);
  }
  for (size_t i = walk.regions.back().end; i < walk.written; ++i)
    visit(i);
}

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROGRAM_ACTIONWALK_H
