//===- ActionSlots.cpp - which buffers a micro-batch in flight uses -------===//

#include "scheduling/ActionSlots.h"

#include <algorithm>
#include <utility>

namespace partition::pipeline {

std::vector<int> assignSlots(const std::vector<Action> &order,
                             std::map<int, int> &slotsPerChunk) {
  using Key = std::pair<int, int>; // micro-batch, chunk
  std::map<Key, size_t> last;
  for (size_t i = 0; i < order.size(); ++i)
    last[{order[i].microbatch, order[i].chunk}] = i;
  std::map<int, std::vector<int>> free; // per chunk, sorted
  std::map<Key, int> held;
  std::vector<int> slots(order.size());
  for (size_t i = 0; i < order.size(); ++i) {
    Key key{order[i].microbatch, order[i].chunk};
    auto it = held.find(key);
    if (it == held.end()) {
      std::vector<int> &available = free[key.second];
      int slot;
      if (available.empty()) {
        slot = slotsPerChunk[key.second]++;
      } else {
        slot = available.front();
        available.erase(available.begin());
      }
      it = held.insert({key, slot}).first;
    }
    slots[i] = it->second;
    if (last[key] == i) {
      std::vector<int> &available = free[key.second];
      available.insert(
          std::upper_bound(available.begin(), available.end(), it->second),
          it->second);
      held.erase(it);
    }
  }
  return slots;
}

} // namespace partition::pipeline
