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
#include <map>
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
  }

private:
  void findHeldBuffers();
  void findTouches();
  void makeClasses();
  void classifyIntervals();
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
  /// Per owner: the regions touching it, and whether an op outside the
  /// regions does (it then keeps its life in the program's order).
  SmallVector<std::vector<bool>> touchedBy;
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
  touchedBy.assign(owners.size(), std::vector<bool>(numRegions));
  outside.resize(owners.size());
  bool inWalk = false;
  int region = -1;
  for (Operation &op : body) {
    if (&op == begin.getOperation() || &op == end) {
      inWalk = &op == begin.getOperation();
      continue;
    }
    if (isa<rt::ActionRegionOp>(op)) {
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
      if (inWalk && region >= 0 && it->second.slot <= 0)
        touchedBy[it->second.owner][region] = true;
      else
        outside.set(it->second.owner);
    }
  }
}

void HeldSlots::makeClasses() {
  // A held class per (regions touching the owner, slot): its spans, one per
  // micro-batch, from its first action there to its last.
  std::map<std::vector<bool>, int> touchId;
  touchOf.resize(owners.size());
  for (auto [owner, touched] : llvm::enumerate(touchedBy))
    touchOf[owner] = touchId.try_emplace(touched, touchId.size()).first->second;
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
  for (size_t k = 0; k + 2 < actions.size(); k += 3) {
    int32_t r = actions[k], slot = actions[k + 1], microbatch = actions[k + 2];
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
    for (auto &[microbatch, span] : byMicrobatch)
      spans[cls].push_back(span);
    llvm::sort(spans[cls]);
  }
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
  int64_t peakAction = 0;
  for (int64_t held = 0, k = 0; k + 1 < int64_t(delta.size()); ++k) {
    held += delta[k];
    if (held > plan.heldPeak)
      plan.heldPeak = held, peakAction = k;
  }
  for (Interval &interval : plan.intervals)
    if (interval.heldClass >= 0)
      interval.heldAtPeak = llvm::any_of(
          spans[interval.heldClass], [&](const Span &span) {
            return span.first <= peakAction && peakAction <= span.second;
          });
}

} // namespace

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
