//===- ActionSlots.cpp - which buffers a micro-batch in flight uses -------===//

#include "scheduling/ActionSlots.h"

#include <algorithm>
#include <set>
#include <tuple>
#include <utility>

namespace partition::pipeline {

namespace {

/// Walks `order`: a micro-batch takes a slot at its first action on a
/// chunk (`choose` picks one of the free ones; a new one when none is
/// free), tells `take`, and gives it back after its last. Returns each
/// action's slot.
template <typename Choose, typename Take>
std::vector<int> assign(const std::vector<Action> &order, Choose &&choose,
                        Take &&take) {
  using Key = std::pair<int, int>; // micro-batch, chunk
  std::map<Key, size_t> last;
  for (size_t i = 0; i < order.size(); ++i)
    last[{order[i].microbatch, order[i].chunk}] = i;
  std::set<int> free;
  int slotCount = 0;
  std::map<Key, int> held;
  std::vector<int> slots(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    Key key{order[i].microbatch, order[i].chunk};
    auto it = held.find(key);
    if (it == held.end()) {
      int slot = free.empty() ? slotCount++ : choose(free, key.second);
      free.erase(slot);
      take(slot, key.second);
      it = held.insert({key, slot}).first;
    }
    slots[i] = it->second;
    if (last[key] == i) {
      free.insert(it->second);
      held.erase(it);
    }
  }
  return slots;
}

} // namespace

std::vector<int> assignSlots(const std::vector<Action> &order,
                             std::map<int, int> &slotsPerChunk) {
  // One pool per chunk: its lowest free slot.
  std::map<int, std::vector<Action>> byChunk;
  std::map<int, std::vector<size_t>> indices;
  for (size_t i = 0; i < order.size(); ++i) {
    byChunk[order[i].chunk].push_back(order[i]);
    indices[order[i].chunk].push_back(i);
  }
  std::vector<int> slots(order.size());
  for (auto &[chunk, actions] : byChunk) {
    std::vector<int> chunkSlots = assign(
        actions, [](const std::set<int> &free, int) { return *free.begin(); },
        [](int, int) {});
    for (size_t j = 0; j < actions.size(); ++j) {
      slots[indices[chunk][j]] = chunkSlots[j];
      slotsPerChunk[chunk] = std::max(slotsPerChunk[chunk], chunkSlots[j] + 1);
    }
  }
  return slots;
}

std::vector<int> assignSharedSlots(const std::vector<Action> &order,
                                   const std::map<int, double> &bytesPerChunk,
                                   std::map<int, int> &slotsPerChunk,
                                   std::vector<double> *poolBytes) {
  // Best fit: the free slot that grows least to hold the chunk, then the
  // smallest (a small chunk leaves the large slots to large ones), then
  // the lowest.
  auto bytesOf = [&](int chunk) {
    auto it = bytesPerChunk.find(chunk);
    return it == bytesPerChunk.end() ? 0.0 : it->second;
  };
  std::vector<double> sizes; // per pool slot, its largest chunk's bytes
  auto choose = [&](const std::set<int> &free, int chunk) {
    double need = bytesOf(chunk);
    auto fit = [&](int slot) {
      return std::make_tuple(std::max(0.0, need - sizes[slot]), sizes[slot],
                             slot);
    };
    return *std::min_element(free.begin(), free.end(),
                             [&](int a, int b) { return fit(a) < fit(b); });
  };
  auto take = [&](int slot, int chunk) {
    if (slot >= static_cast<int>(sizes.size()))
      sizes.resize(slot + 1, 0.0);
    sizes[slot] = std::max(sizes[slot], bytesOf(chunk));
  };
  std::vector<int> pool = assign(order, choose, take);
  // Each chunk's pool slots, renumbered from 0 in the order it first takes
  // them: it needs copies of those alone.
  std::map<std::pair<int, int>, int> local; // (chunk, pool slot) -> slot
  std::vector<int> slots(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    auto [it, inserted] = local.try_emplace({order[i].chunk, pool[i]}, 0);
    if (inserted)
      it->second = slotsPerChunk[order[i].chunk]++;
    slots[i] = it->second;
  }
  if (poolBytes)
    *poolBytes = std::move(sizes);
  return slots;
}

} // namespace partition::pipeline
