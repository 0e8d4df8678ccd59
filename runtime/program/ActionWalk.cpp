//===- ActionWalk.cpp - a stage's schedule as data, checked and laid out --===//

#include "runtime/program/ActionWalk.h"

#include "runtime/program/ProgramChecks.h"

#include <algorithm>
#include <map>
#include <set>

namespace partition::runtime {

namespace {

using check::fail;

std::string bufferText(uint32_t index) {
  return "buffer #" + std::to_string(index);
}

/// A region's rows copies: each into an arena buffer from a tokens or
/// targets input of the same type, every action's micro-batch inside it.
void checkRows(const ActionRegion &region, uint32_t lastMicrobatch,
               const Program &program, const std::string &where,
               const std::string &origin) {
  if (region.rows.size() != region.rowsSources.size())
    fail(origin, where + " copies rows into " +
                     std::to_string(region.rows.size()) + " buffers from " +
                     std::to_string(region.rowsSources.size()) +
                     " inputs; each copy needs one of each");
  for (size_t i = 0; i < region.rows.size(); ++i) {
    uint32_t into = region.rows[i], from = region.rowsSources[i];
    if (into >= program.buffers.size() || from >= program.buffers.size())
      fail(origin, where + " copies rows between " + bufferText(into) +
                       " and " + bufferText(from) + " of " +
                       std::to_string(program.buffers.size()));
    const BufferInfo &rows = program.buffers[into];
    const BufferInfo &input = program.buffers[from];
    if (input.role != Role::Tokens && input.role != Role::Targets)
      fail(origin, where + " copies rows from " + bufferText(from) +
                       ", which is no tokens or targets input");
    if (rows.tier != Tier::Arena || input.tier != Tier::Arena ||
        rows.dtype != input.dtype || rows.bytes == 0)
      fail(origin, where + " copies rows of " + bufferText(from) + " into " +
                       bufferText(into) + ", which is not a non-empty arena "
                       "buffer of its type");
    // Micro-batch m's rows: the bytes m x the copy's size past the input's
    // start.
    if ((uint64_t(lastMicrobatch) + 1) > input.bytes / rows.bytes)
      fail(origin, where + " copies micro-batch " +
                       std::to_string(lastMicrobatch) + "'s rows from " +
                       bufferText(from) + ", which holds " +
                       std::to_string(input.bytes / rows.bytes) +
                       " micro-batches of " + std::to_string(rows.bytes) +
                       " bytes");
    if (rows.offset < input.offset + input.bytes &&
        input.offset < rows.offset + rows.bytes)
      fail(origin, where + " copies rows into " + bufferText(into) +
                       ", which overlaps its input " + bufferText(from));
  }
}

void checkSlot(const ActionSlot &slot, size_t index, const Program &program,
               const std::string &where, const std::string &origin) {
  std::string name = where + " slot " + std::to_string(index);
  if (slot.templates.size() != slot.copies.size())
    fail(origin, name + " names " + std::to_string(slot.templates.size()) +
                     " buffers and " + std::to_string(slot.copies.size()) +
                     " copies of them; each buffer needs one copy");
  if (index == 0 && !slot.templates.empty())
    fail(origin, name + " substitutes buffers; slot 0 runs the regions' own");
  std::set<uint32_t> templates, copies;
  for (size_t i = 0; i < slot.templates.size(); ++i) {
    uint32_t from = slot.templates[i], to = slot.copies[i];
    if (from >= program.buffers.size() || to >= program.buffers.size())
      fail(origin, name + " substitutes " + bufferText(to) + " for " +
                       bufferText(from) + " of " +
                       std::to_string(program.buffers.size()));
    const BufferInfo &a = program.buffers[from], &b = program.buffers[to];
    if (from == to || a.dtype != b.dtype || a.shape != b.shape ||
        a.bytes != b.bytes || a.tier != Tier::Arena || b.tier != Tier::Arena)
      fail(origin, name + " substitutes " + bufferText(to) + " for " +
                       bufferText(from) + ", which is not another arena "
                       "buffer of its type and shape");
    if (!templates.insert(from).second || !copies.insert(to).second)
      fail(origin, name + " substitutes " + bufferText(from) + " or " +
                       bufferText(to) + " twice");
  }
}

/// Which region instruction `index` lies in, or -1 outside every region.
int regionOf(const ActionWalk &walk, size_t index) {
  for (size_t r = 0; r < walk.regions.size(); ++r)
    if (index >= walk.regions[r].begin && index < walk.regions[r].end)
      return static_cast<int>(r);
  return -1;
}

} // namespace

void expandRepeatedSlots(Function &function, Program &program,
                         const std::string &origin) {
  ActionWalk &walk = *function.walk;
  if (std::none_of(walk.slots.begin(), walk.slots.end(),
                   [](const ActionSlot &slot) { return slot.repeat > 0; }))
    return;
  std::vector<ActionSlot> expanded;
  for (size_t s = 0; s < walk.slots.size(); ++s) {
    ActionSlot slot = std::move(walk.slots[s]);
    const uint32_t repeat = slot.repeat;
    std::vector<uint64_t> strides = std::move(slot.strides);
    slot.repeat = 0;
    slot.strides.clear();
    expanded.push_back(slot);
    if (repeat == 0)
      continue;
    std::string name = function.name + " action walk slot " + std::to_string(s);
    // Each repeat a slot of its own, which some action must run: a small
    // corrupt file may not ask for more buffers than that.
    if (repeat > walk.actions.size() ||
        uint64_t(repeat) * slot.copies.size() > kMaxWalkCopies)
      fail(origin, name + " repeats " + std::to_string(repeat) + " times (" +
                       std::to_string(slot.copies.size()) + " copies each); "
                       "the walk has " + std::to_string(walk.actions.size()) +
                       " actions");
    if (strides.size() != slot.copies.size())
      fail(origin, name + " repeats with " + std::to_string(strides.size()) +
                       " strides for " + std::to_string(slot.copies.size()) +
                       " copies; each copy needs one");
    for (size_t i = 0; i < slot.copies.size(); ++i) {
      if (slot.copies[i] >= program.buffers.size())
        fail(origin, name + " repeats " + bufferText(slot.copies[i]) + " of " +
                         std::to_string(program.buffers.size()));
      const BufferInfo &copy = program.buffers[slot.copies[i]];
      // offset + bytes <= arena was checked as the buffer was read.
      if (copy.tier != Tier::Arena || strides[i] == 0 ||
          strides[i] < copy.bytes ||
          strides[i] % dtypeBytes(copy.dtype) != 0 ||
          repeat > (program.arenaBytes - copy.offset - copy.bytes) / strides[i])
        fail(origin, name + " repeats " + bufferText(slot.copies[i]) +
                         " every " + std::to_string(strides[i]) + " bytes " +
                         std::to_string(repeat) + " times, which overlaps it "
                         "or leaves the arena of " +
                         std::to_string(program.arenaBytes) + " bytes");
    }
    for (uint32_t j = 1; j <= repeat; ++j) {
      ActionSlot next;
      next.templates = slot.templates;
      for (size_t i = 0; i < slot.copies.size(); ++i) {
        BufferInfo copy = program.buffers[slot.copies[i]];
        copy.offset += strides[i] * j;
        next.copies.push_back(static_cast<uint32_t>(program.buffers.size()));
        program.buffers.push_back(std::move(copy));
      }
      expanded.push_back(std::move(next));
    }
  }
  walk.slots = std::move(expanded);
}

void checkActionWalk(const Function &function, const Program &program,
                     const std::string &origin) {
  if (!function.walk)
    return;
  const ActionWalk &walk = *function.walk;
  std::string where = function.name + " action walk";
  if (function.loop)
    fail(origin, where + ": the function also has a micro-batch loop; it "
                         "may have one or the other");
  const size_t size = function.instructions.size();
  if (walk.regions.empty() || walk.slots.empty() || walk.actions.empty())
    fail(origin, where + " has " + std::to_string(walk.regions.size()) +
                     " regions, " + std::to_string(walk.slots.size()) +
                     " slots and " + std::to_string(walk.actions.size()) +
                     " actions; it needs at least one of each");
  for (size_t r = 0; r < walk.regions.size(); ++r) {
    const ActionRegion &region = walk.regions[r];
    if (region.begin >= region.end || region.end > size ||
        (r > 0 && region.begin != walk.regions[r - 1].end))
      fail(origin, where + " region " + std::to_string(r) + " runs #" +
                       std::to_string(region.begin) + " to #" +
                       std::to_string(region.end) + " of " +
                       std::to_string(size) + " instructions; the regions "
                       "must be non-empty, contiguous and in order");
  }
  std::vector<uint32_t> lastMicrobatch(walk.regions.size(), 0);
  for (size_t a = 0; a < walk.actions.size(); ++a) {
    const WalkAction &action = walk.actions[a];
    if (action.region >= walk.regions.size() ||
        action.slot >= walk.slots.size())
      fail(origin, where + " action " + std::to_string(a) + " runs region " +
                       std::to_string(action.region) + " in slot " +
                       std::to_string(action.slot) + ", but the walk has " +
                       std::to_string(walk.regions.size()) + " regions and " +
                       std::to_string(walk.slots.size()) + " slots");
    lastMicrobatch[action.region] =
        std::max(lastMicrobatch[action.region], action.microbatch);
  }
  for (size_t r = 0; r < walk.regions.size(); ++r)
    checkRows(walk.regions[r], lastMicrobatch[r], program,
              where + " region " + std::to_string(r) + " ('" +
                  walk.regions[r].name + "')",
              origin);
  for (size_t s = 0; s < walk.slots.size(); ++s)
    checkSlot(walk.slots[s], s, program, where, origin);
  // The loader lays out a copy of each region for each slot that runs it
  // (expandActionWalk): bound what a small corrupt file can ask for.
  std::set<std::pair<uint32_t, uint32_t>> pairs;
  uint64_t copied = 0;
  for (const WalkAction &action : walk.actions)
    if (!walk.slots[action.slot].templates.empty() &&
        pairs.insert({action.region, action.slot}).second)
      copied += walk.regions[action.region].end -
                walk.regions[action.region].begin;
  if (copied > kMaxWalkCopies)
    fail(origin, where + " runs its regions in slots that need " +
                     std::to_string(copied) + " instructions of copies; at "
                     "most " + std::to_string(kMaxWalkCopies));
  // A region runs on its own, in any order with the others: what it starts
  // it waits for.
  for (size_t i = 0; i < size; ++i) {
    const Instruction &wait = function.instructions[i];
    if (wait.waitFor && regionOf(walk, i) != regionOf(walk, *wait.waitFor))
      fail(origin, function.name + " instruction #" + std::to_string(i) +
                       " waits for instruction #" +
                       std::to_string(*wait.waitFor) +
                       " of another action region (or of none); a region "
                       "waits for what it starts");
  }
}

void expandActionWalk(Function &function) {
  ActionWalk &walk = *function.walk;
  walk.written = function.instructions.size();
  walk.ranges.assign(walk.regions.size(),
                     std::vector<std::pair<size_t, size_t>>(walk.slots.size(),
                                                            {0, 0}));
  walk.runs.assign(walk.regions.size(),
                   std::vector<int64_t>(walk.slots.size(), 0));
  for (size_t r = 0; r < walk.regions.size(); ++r)
    walk.ranges[r][0] = {walk.regions[r].begin, walk.regions[r].end};
  for (const WalkAction &action : walk.actions) {
    ++walk.runs[action.region][action.slot];
    auto &range = walk.ranges[action.region][action.slot];
    if (action.slot == 0 || range.second != 0)
      continue;
    const ActionRegion &region = walk.regions[action.region];
    const ActionSlot &slot = walk.slots[action.slot];
    // A slot that substitutes nothing runs the region's own instructions.
    if (slot.templates.empty()) {
      range = walk.ranges[action.region][0];
      continue;
    }
    std::map<uint32_t, uint32_t> copyOf;
    for (size_t i = 0; i < slot.templates.size(); ++i)
      copyOf[slot.templates[i]] = slot.copies[i];
    const size_t begin = function.instructions.size();
    for (size_t i = region.begin; i < region.end; ++i) {
      Instruction copy = function.instructions[i];
      for (uint32_t &arg : copy.args)
        if (auto it = copyOf.find(arg); it != copyOf.end())
          arg = it->second;
      if (copy.waitFor)
        *copy.waitFor = static_cast<uint32_t>(*copy.waitFor - region.begin +
                                              begin);
      function.instructions.push_back(std::move(copy));
    }
    range = {begin, function.instructions.size()};
  }
}

} // namespace partition::runtime
