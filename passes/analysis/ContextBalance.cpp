//===- ContextBalance.cpp - attention work per context-parallel rank ------===//

#include "passes/analysis/ContextBalance.h"

#include "runtime/data/SequenceLayout.h"

#include <algorithm>

namespace partition {

std::vector<int64_t> contextAttentionPairs(int64_t seqLen, int64_t chunks,
                                           int64_t cp, bool causal,
                                           int64_t window) {
  std::vector<int64_t> pairs(cp, 0);
  if (cp < 1 || seqLen % cp != 0)
    return pairs;
  const int64_t block = seqLen / cp;
  for (int64_t index = 0; index < seqLen; ++index) {
    // The query's position in the natural order: the keys it sees follow.
    int64_t position =
        runtime::data::layoutPosition(index, seqLen, chunks);
    int64_t seen = causal ? position + 1 : seqLen;
    if (causal && window > 0)
      seen = std::min(seen, window);
    pairs[index / block] += seen;
  }
  return pairs;
}

double imbalance(const std::vector<int64_t> &perRank) {
  if (perRank.empty())
    return 1.0;
  auto [low, high] = std::minmax_element(perRank.begin(), perRank.end());
  return *low > 0 ? double(*high) / double(*low) : 0.0;
}

} // namespace partition
