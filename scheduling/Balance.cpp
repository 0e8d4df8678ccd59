//===- Balance.cpp - cut a layer sequence into chunks of equal cost -------===//

#include "scheduling/Balance.h"

#include <algorithm>
#include <limits>

namespace partition::pipeline {

std::vector<double> chunkCosts(const std::vector<double> &layerCosts,
                               double pre, double post,
                               const std::vector<int> &counts) {
  std::vector<double> costs;
  size_t layer = 0;
  for (size_t c = 0; c < counts.size(); ++c) {
    double cost = 0;
    for (int i = 0; i < counts[c] && layer < layerCosts.size(); ++i)
      cost += layerCosts[layer++];
    if (c == 0)
      cost += pre;
    if (c + 1 == counts.size())
      cost += post;
    costs.push_back(cost);
  }
  return costs;
}

std::vector<int> balanceLayers(const std::vector<double> &layerCosts,
                               double pre, double post, int chunks) {
  const int L = static_cast<int>(layerCosts.size());
  if (chunks < 1 || chunks > L)
    return {};
  std::vector<double> prefix(L + 1, 0);
  for (int i = 0; i < L; ++i)
    prefix[i + 1] = prefix[i] + layerCosts[i];
  auto cost = [&](int c, int from, int to) { // layers [from, to)
    double value = prefix[to] - prefix[from];
    if (c == 0)
      value += pre;
    if (c == chunks - 1)
      value += post;
    return value;
  };
  constexpr double kInf = std::numeric_limits<double>::infinity();
  // best[c][l]: the least largest cost of chunks 0..c over layers [0, l);
  // cut[c][l]: where chunk c starts in that split.
  std::vector<std::vector<double>> best(chunks,
                                        std::vector<double>(L + 1, kInf));
  std::vector<std::vector<int>> cut(chunks, std::vector<int>(L + 1, 0));
  for (int l = 1; l <= L; ++l)
    best[0][l] = cost(0, 0, l);
  for (int c = 1; c < chunks; ++c)
    for (int l = c + 1; l <= L; ++l)
      // Latest start first, so that on ties chunk c takes the most layers
      // and the earlier chunks the fewest.
      for (int start = l - 1; start >= c; --start) {
        double value = std::max(best[c - 1][start], cost(c, start, l));
        // A relative tolerance: sums of the same costs in another order
        // must compare equal.
        if (value < best[c][l] * (1 - 1e-12)) {
          best[c][l] = value;
          cut[c][l] = start;
        }
      }
  std::vector<int> counts(chunks, 0);
  int end = L;
  for (int c = chunks - 1; c > 0; --c) {
    counts[c] = end - cut[c][end];
    end = cut[c][end];
  }
  counts[0] = end;
  return counts;
}

} // namespace partition::pipeline
