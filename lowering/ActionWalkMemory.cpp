//===- ActionWalkMemory.cpp - slot buffers a walk holds together ----------===//
//
// Which of an action walk's slot buffers are ever held at one same action,
// read off the walk's action list (rt.action_walk_begin): the memory plan
// lets the others share bytes.
//
//===----------------------------------------------------------------------===//

#include "lowering/ActionWalkMemory.h"

#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"

#include "llvm/ADT/STLExtras.h"

#include <algorithm>
#include <cassert>
#include <map>
#include <memory>
#include <set>
#include <utility>

namespace partition {

using namespace mlir;

namespace {

/// Actions [first, last] of the list, during which a slot holds one
/// micro-batch's values.
using Span = std::pair<int64_t, int64_t>;

/// Whether two lists of spans, each sorted by start, overlap somewhere.
bool overlap(ArrayRef<Span> a, ArrayRef<Span> b) {
  size_t i = 0, j = 0;
  while (i < a.size() && j < b.size()) {
    if (a[i].first <= b[j].second && b[j].first <= a[i].second)
      return true;
    // The one that ends first overlaps nothing later in the other list.
    if (a[i].second < b[j].second)
      ++i;
    else
      ++j;
  }
  return false;
}

/// A held buffer: its owner (whose regions touch it) and slot. A template
/// with copies owns itself in slot 0, its s-th copy is in slot s; any
/// other held buffer owns itself in every slot (kAnySlot).
constexpr int kAnySlot = -1;
struct Held {
  unsigned owner;
  int slot;
};

/// findHeldSlots on one walk, step by step.
class HeldSlots {
public:
  HeldSlots(Block &body, rt::ActionWalkBeginOp begin, Operation *end,
            TemporaryPlan &plan)
      : body(body), begin(begin), end(end), plan(plan) {}

  void run() {
    findHeldBuffers();
    if (heldOf.empty())
      return;
    findTouches();
    makeClasses();
    if (spans.empty())
      return;
    classifyIntervals();
    findRegionLife();
  }

private:
  void findHeldBuffers();
  void findTouches();
  void makeClasses();
  void classifyIntervals();
  void findRegionLife();
  void findMeetings(const WalkLife &life);
  unsigned ownerIndex(Value buffer) {
    auto [it, inserted] = ownerOf.try_emplace(buffer, owners.size());
    if (inserted)
      owners.push_back(buffer);
    return it->second;
  }
  bool isHeld(Value buffer) const {
    Operation *def = buffer.getDefiningOp();
    return isa_and_nonnull<memref::AllocOp>(def) &&
           def->hasAttr(rt::RtDialect::kHeldAttrName) &&
           plan.intervalOf.count(buffer);
  }
  std::pair<int, int> keyOf(const Held &held) const {
    return {touchOf[held.owner], held.slot};
  }

  Block &body;
  rt::ActionWalkBeginOp begin;
  Operation *end;
  TemporaryPlan &plan;
  DenseMap<Value, Held> heldOf;
  SmallVector<Value> owners;
  DenseMap<Value, unsigned> ownerOf;
  unsigned numRegions = 0;
  /// Per owner and region, its first and last touch's positions (first >
  /// last: the region does not touch it); each region's positions.
  SmallVector<SmallVector<std::pair<unsigned, unsigned>, 0>> touchSpans;
  std::vector<std::pair<unsigned, unsigned>> regionPositions;
  /// The owners an op outside the regions touches (they keep their life
  /// in the program's order).
  llvm::BitVector outside;
  /// Per owner, the id of its regions; per region, the ids touching it.
  SmallVector<int> touchOf;
  std::vector<SmallVector<int>> touchIdsOfRegion;
  /// (touch id, slot) -> class, and per class its spans, sorted.
  std::map<std::pair<int, int>, int> classOf;
  std::vector<SmallVector<Span>> spans;
};

void HeldSlots::findHeldBuffers() {
  auto templates = begin.getTemplates();
  auto copies = begin.getCopies();
  size_t at = 0;
  for (auto [index, size] : llvm::enumerate(begin.getSlotSizes()))
    for (int32_t i = 0; i < size && at < templates.size(); ++i, ++at)
      if (isHeld(templates[at]) && isHeld(copies[at])) {
        unsigned owner = ownerIndex(templates[at]);
        heldOf[templates[at]] = {owner, 0};
        heldOf[copies[at]] = {owner, int(index) + 1};
      }
  for (Operation &op : body)
    if (auto alloc = dyn_cast<memref::AllocOp>(op);
        alloc && isHeld(alloc) && !heldOf.count(alloc))
      heldOf[alloc] = {ownerIndex(alloc), kAnySlot};
}

void HeldSlots::findTouches() {
  for (Operation *op = begin->getNextNode(); op != end; op = op->getNextNode())
    numRegions += isa<rt::ActionRegionOp>(op);
  touchSpans.assign(owners.size(),
                    SmallVector<std::pair<unsigned, unsigned>, 0>(
                        numRegions, {~0u, 0u}));
  outside.resize(owners.size());
  bool inWalk = false;
  int region = -1;
  unsigned position = 0;
  for (Operation &op : body) {
    unsigned at = position++;
    if (&op == begin.getOperation() || &op == end) {
      inWalk = &op == begin.getOperation();
      if (&op == end && region >= 0)
        regionPositions.back().second = at - 1;
      continue;
    }
    if (isa<rt::ActionRegionOp>(op)) {
      if (region >= 0)
        regionPositions.back().second = at - 1;
      regionPositions.push_back({at, at});
      ++region;
      continue;
    }
    if (isa<memref::AllocOp>(op) || rt::isView(&op))
      continue;
    for (Value operand : op.getOperands()) {
      auto it = heldOf.find(rt::viewedBuffer(operand));
      if (it == heldOf.end())
        continue;
      // Regions name templates only: the runtime puts the copies in.
      if (inWalk && region >= 0 && it->second.slot <= 0) {
        auto &[first, last] = touchSpans[it->second.owner][region];
        first = std::min(first, at);
        last = std::max(last, at);
      } else
        outside.set(it->second.owner);
    }
  }
}

void HeldSlots::makeClasses() {
  // A held class per (regions touching the owner, slot): its spans, one per
  // micro-batch, from its first action there to its last.
  std::map<std::vector<bool>, int> touchId;
  touchOf.resize(owners.size());
  for (auto [owner, touches] : llvm::enumerate(touchSpans)) {
    std::vector<bool> touched(numRegions);
    for (unsigned r = 0; r < numRegions; ++r)
      touched[r] = touches[r].first <= touches[r].second;
    touchOf[owner] = touchId.try_emplace(touched, touchId.size()).first->second;
  }
  touchIdsOfRegion.resize(numRegions);
  for (auto &[touched, id] : touchId)
    for (unsigned r = 0; r < numRegions; ++r)
      if (touched[r])
        touchIdsOfRegion[r].push_back(id);
  for (auto &[buffer, held] : heldOf)
    if (!outside.test(held.owner))
      classOf.try_emplace(keyOf(held), 0);
  for (auto [index, entry] : llvm::enumerate(classOf))
    entry.second = static_cast<int>(index);
  std::vector<std::map<int32_t, Span>> spansByMicrobatch(classOf.size());
  ArrayRef<int32_t> actions = begin.getActions();
  // Slots past the last copied one repeat its copies (slot_repeats): one
  // class with them.
  const int32_t lastSlot = static_cast<int32_t>(begin.getSlotSizes().size());
  for (size_t k = 0; k + 2 < actions.size(); k += 3) {
    int32_t r = actions[k], slot = std::min(actions[k + 1], lastSlot),
            microbatch = actions[k + 2];
    if (r < 0 || r >= int32_t(numRegions))
      continue; // The verifier refuses it.
    int64_t action = static_cast<int64_t>(k / 3);
    for (int id : touchIdsOfRegion[r])
      for (int slotKey : {int(slot), kAnySlot}) {
        auto it = classOf.find({id, slotKey});
        if (it == classOf.end())
          continue;
        auto [span, inserted] = spansByMicrobatch[it->second].try_emplace(
            microbatch, action, action);
        span->second.second = action;
      }
  }
  spans.resize(classOf.size());
  for (auto [cls, byMicrobatch] : llvm::enumerate(spansByMicrobatch)) {
    std::vector<Span> sorted;
    for (auto &[microbatch, span] : byMicrobatch)
      sorted.push_back(span);
    llvm::sort(sorted);
    // A repeated slot's class holds each of its micro-batches, several at
    // once: one span over their union (a slot held by one at a time has
    // spans apart).
    for (Span span : sorted)
      if (!spans[cls].empty() && span.first <= spans[cls].back().second)
        spans[cls].back().second =
            std::max(spans[cls].back().second, span.second);
      else
        spans[cls].push_back(span);
  }
  plan.heldActions.assign(spans.size(), 0);
  for (auto [cls, classSpans] : llvm::enumerate(spans))
    for (auto [first, last] : classSpans)
      plan.heldActions[cls] += last - first + 1;
  // A class no action holds (slot 0 of a chunk that never takes it) is
  // still code the loader checks: it keeps its place apart from all.
  plan.heldTogether.assign(classOf.size(), llvm::BitVector(classOf.size()));
  for (size_t a = 0; a < spans.size(); ++a)
    for (size_t b = a; b < spans.size(); ++b)
      if (spans[a].empty() || spans[b].empty() ||
          overlap(spans[a], spans[b])) {
        plan.heldTogether[a].set(b);
        plan.heldTogether[b].set(a);
      }
}

void HeldSlots::classifyIntervals() {
  // Each held buffer's class, and the action where the walk holds the most
  // bytes of them.
  std::vector<int64_t> classBytes(classOf.size(), 0);
  for (auto &[buffer, held] : heldOf) {
    if (outside.test(held.owner))
      continue;
    Interval &interval = plan.intervals[plan.intervalOf.lookup(buffer)];
    interval.heldClass = classOf.at(keyOf(held));
    classBytes[interval.heldClass] += interval.bytes;
  }
  std::vector<int64_t> delta(begin.getActions().size() / 3 + 1, 0);
  for (auto [cls, classSpans] : llvm::enumerate(spans))
    for (auto [first, last] : classSpans) {
      delta[first] += classBytes[cls];
      delta[last + 1] -= classBytes[cls];
    }
  int64_t peakAction = 0, most = 0;
  for (int64_t held = 0, k = 0; k + 1 < int64_t(delta.size()); ++k) {
    held += delta[k];
    if (held > most)
      most = held, peakAction = k;
  }
  for (Interval &interval : plan.intervals)
    if (interval.heldClass >= 0)
      interval.heldAtPeak = llvm::any_of(
          spans[interval.heldClass], [&](const Span &span) {
            return span.first <= peakAction && peakAction <= span.second;
          });
}

void HeldSlots::findRegionLife() {
  // How each class holds data in each action (from its micro-batch's first
  // touch, through the region, up to its last touch, or between), and so
  // where in each region each held buffer may: a region's own temporaries
  // may take its bytes elsewhere (the part of a slot a GPipe stage's first
  // backward has finished reading, which no other action holds then).
  auto life = std::make_shared<WalkLife>();
  life->regions = regionPositions;
  ArrayRef<int32_t> actions = begin.getActions();
  size_t numActions = actions.size() / 3;
  life->actionRegions.resize(numActions);
  for (size_t k = 0; k < numActions; ++k)
    life->actionRegions[k] = actions[3 * k];
  life->actionHolds.resize(numActions);
  std::vector<std::vector<uint8_t>> kinds(spans.size(),
                                          std::vector<uint8_t>(numRegions));
  for (auto [cls, classSpans] : llvm::enumerate(spans))
    for (auto [first, last] : classSpans)
      for (int64_t k = first; k <= last; ++k) {
        uint8_t kind = first == last ? Between
                       : k == first  ? FromFirst
                       : k == last   ? ToLast
                                     : Through;
        int32_t r = life->actionRegions[k];
        if (r < 0 || r >= int32_t(numRegions))
          continue;
        kinds[cls][r] |= kind;
        life->actionHolds[k].push_back({int(cls), kind});
      }
  life->members.resize(spans.size());
  plan.heldLife.resize(plan.intervals.size());
  for (auto &[buffer, held] : heldOf) {
    if (outside.test(held.owner))
      continue;
    unsigned index = plan.intervalOf.lookup(buffer);
    int cls = plan.intervals[index].heldClass;
    life->members[cls].push_back(index);
    life->touches[index] = touchSpans[held.owner];
    auto &hulls = plan.heldLife[index];
    hulls.assign(numRegions, {~0u, 0u});
    if (spans[cls].empty()) {
      // Never held, but still code the loader checks: apart from all.
      hulls.assign(regionPositions.begin(), regionPositions.end());
      continue;
    }
    for (unsigned r = 0; r < numRegions; ++r)
      for (uint8_t kind : {Through, FromFirst, ToLast, Between})
        if (kinds[cls][r] & kind) {
          auto [first, last] = life->lifeIn(r, kind, touchSpans[held.owner][r]);
          hulls[r] = {std::min(hulls[r].first, first),
                      std::max(hulls[r].second, last)};
        }
  }
  for (auto &members : life->members)
    llvm::sort(members); // In program order: deterministic sums.
  findMeetings(*life);
  // A region's own temporaries: allocated after its marker, last used
  // before the next.
  for (Interval &interval : plan.intervals) {
    if (interval.heldClass >= 0)
      continue;
    auto it = llvm::upper_bound(
        regionPositions, interval.first,
        [](unsigned at, const std::pair<unsigned, unsigned> &region) {
          return at < region.first;
        });
    if (it == regionPositions.begin())
      continue;
    --it;
    if (interval.first > it->first && interval.last <= it->second)
      interval.region = static_cast<int>(it - regionPositions.begin());
  }
  plan.walkLife = std::move(life);
}

void HeldSlots::findMeetings(const WalkLife &life) {
  // Pairs of classes both at a boundary (from a first touch, up to a last,
  // or between) at every action holding both: their buffers conflict only
  // where their positions overlap there.
  std::map<std::pair<int, int>, std::set<std::tuple<unsigned, uint8_t, uint8_t>>>
      meetings;
  std::map<std::pair<int, int>, int64_t> boundaryActions;
  for (auto [k, holds] : llvm::enumerate(life.actionHolds))
    for (auto [a, kindA] : holds) {
      if (kindA == Through)
        continue;
      for (auto [b, kindB] : holds) {
        if (kindB == Through || b < a)
          continue;
        meetings[{a, b}].insert(
            {unsigned(life.actionRegions[k]), kindA, kindB});
        if (a == b)
          meetings[{a, b}].insert(
              {unsigned(life.actionRegions[k]), kindB, kindA});
        ++boundaryActions[{a, b}];
      }
    }
  for (auto &[pair, kinds] : meetings) {
    // The actions holding both, against those where both are at a boundary.
    int64_t together = 0;
    for (auto [firstA, lastA] : spans[pair.first])
      for (auto [firstB, lastB] : spans[pair.second])
        together += std::max<int64_t>(
            0, std::min(lastA, lastB) - std::max(firstA, firstB) + 1);
    if (together != boundaryActions[pair])
      continue;
    plan.heldMeetings[pair].assign(kinds.begin(), kinds.end());
  }
}

} // namespace

bool TemporaryPlan::heldBuffersMeet(const Interval &a, const Interval &b) const {
  auto pair = std::make_pair(std::min(a.heldClass, b.heldClass),
                             std::max(a.heldClass, b.heldClass));
  auto it = heldMeetings.find(pair);
  if (it == heldMeetings.end())
    return true;
  const Interval &lower = a.heldClass <= b.heldClass ? a : b;
  const Interval &upper = a.heldClass <= b.heldClass ? b : a;
  const auto &lowerTouches =
      walkLife->touches.find(&lower - intervals.data())->second;
  const auto &upperTouches =
      walkLife->touches.find(&upper - intervals.data())->second;
  for (auto [region, kindLower, kindUpper] : it->second) {
    auto [lowFirst, lowLast] =
        walkLife->lifeIn(region, kindLower, lowerTouches[region]);
    auto [upFirst, upLast] =
        walkLife->lifeIn(region, kindUpper, upperTouches[region]);
    if (lowFirst <= upLast && upFirst <= lowLast)
      return true;
  }
  return false;
}

void heldProfile(const TemporaryPlan &plan, size_t positions,
                 unsigned categories,
                 function_ref<unsigned(const Interval &)> category,
                 std::vector<int64_t> &total,
                 std::vector<SmallVector<int64_t, 5>> &parts) {
  total.assign(positions, 0);
  parts.assign(positions, SmallVector<int64_t, 5>(categories, 0));
  const WalkLife *life = plan.walkLife.get();
  assert(life && "heldProfile needs an action walk's life");
  // Per region, each distinct set of (class, kind) its actions hold once.
  std::vector<std::set<SmallVector<std::pair<int, uint8_t>, 4>>> configs(
      life->regions.size());
  for (auto [k, holds] : llvm::enumerate(life->actionHolds)) {
    int32_t r = life->actionRegions[k];
    if (r < 0 || r >= int32_t(configs.size()))
      continue;
    SmallVector<std::pair<int, uint8_t>, 4> sorted(holds);
    llvm::sort(sorted);
    configs[r].insert(std::move(sorted));
  }
  // A class held through a region adds its bytes at every position of it.
  std::vector<SmallVector<int64_t, 5>> classBytes(
      life->members.size(), SmallVector<int64_t, 5>(categories, 0));
  for (auto [cls, members] : llvm::enumerate(life->members))
    for (unsigned index : members)
      classBytes[cls][category(plan.intervals[index])] +=
          plan.intervals[index].bytes;
  for (auto [r, regionConfigs] : llvm::enumerate(configs)) {
    auto [first, last] = life->regions[r];
    size_t width = last - first + 2;
    for (const auto &config : regionConfigs) {
      std::vector<std::vector<int64_t>> delta(categories,
                                              std::vector<int64_t>(width, 0));
      SmallVector<int64_t, 5> running(categories, 0);
      for (auto [cls, kind] : config) {
        if (kind == Through) {
          for (unsigned c = 0; c < categories; ++c)
            running[c] += classBytes[cls][c];
          continue;
        }
        for (unsigned index : life->members[cls]) {
          const Interval &interval = plan.intervals[index];
          auto [from, to] = life->lifeIn(
              r, kind, life->touches.lookup(index)[r]);
          if (from > to)
            continue;
          delta[category(interval)][from - first] += interval.bytes;
          delta[category(interval)][to - first + 1] -= interval.bytes;
        }
      }
      for (size_t p = 0; p + 1 < width; ++p) {
        int64_t sum = 0;
        for (unsigned c = 0; c < categories; ++c)
          sum += running[c] += delta[c][p];
        if (sum > total[first + p]) {
          total[first + p] = sum;
          parts[first + p] = running;
        }
      }
    }
  }
}

LogicalResult reserveRepeatedSlots(Block &body, TemporaryPlan &plan,
                                   int64_t maxBytes) {
  auto begins = body.getOps<rt::ActionWalkBeginOp>();
  if (begins.empty() || (*begins.begin()).getSlotRepeats() == 0)
    return success();
  rt::ActionWalkBeginOp begin = *begins.begin();
  const int64_t count = int64_t(begin.getSlotRepeats()) + 1;
  SmallVector<int64_t> strides;
  for (Value copy : begin.getCopies().take_back(begin.getSlotSizes().back())) {
    auto it = plan.intervalOf.find(copy);
    if (it == plan.intervalOf.end())
      return begin.emitOpError("repeats a slot whose copy is no buffer "
                               "allocated in its function");
    Interval &interval = plan.intervals[it->second];
    int64_t stride = (interval.bytes + interval.alignment - 1) /
                     interval.alignment * interval.alignment;
    if (stride > maxBytes / count)
      return begin.emitOpError("repeats a slot ")
             << count - 1 << " times: a copy of " << interval.bytes
             << " bytes would take more than " << maxBytes
             << "; use fewer micro-batches or a schedule that holds fewer "
                "at once (1F1B)";
    interval.bytes = stride * count;
    strides.push_back(stride);
  }
  begin.setSlotStrides(strides);
  return success();
}

void findHeldSlots(Block &body, TemporaryPlan &plan) {
  auto begins = body.getOps<rt::ActionWalkBeginOp>();
  if (begins.empty())
    return;
  rt::ActionWalkBeginOp begin = *begins.begin();
  Operation *end = begin->getNextNode();
  while (end && !isa<rt::ActionWalkEndOp>(end))
    end = end->getNextNode();
  if (!end)
    return; // The verifier refuses it.
  HeldSlots(body, begin, end, plan).run();
}

} // namespace partition
