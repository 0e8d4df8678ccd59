//===- Balance.cpp - cut a layer sequence into chunks of equal cost -------===//

#include "scheduling/Balance.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
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

std::vector<int> balanceUniformLayers(int layers, double layerCost,
                                      double pre, double post, int chunks) {
  if (chunks < 1 || chunks > layers)
    return {};
  if (!(layerCost > 0)) // free layers: any split is as good
    layerCost = 1e-300;
  // Layers a chunk holds under the bottleneck `bound` with `extra` cost of
  // its own; the relative tolerance lets pre + a x cost hold a layers.
  auto capacity = [&](double bound, double extra) -> int64_t {
    double room = (bound - extra) / layerCost;
    return room < 0 ? -1 : int64_t(std::floor(room * (1 + 1e-12)));
  };
  // The most layers chunks 0..n-1 (the first with `pre`, the last with
  // `last`) hold under `bound`, each at least one; -1 when one cannot.
  auto cover = [&](int n, double bound, double last) -> int64_t {
    if (n == 1)
      return capacity(bound, pre + last);
    int64_t first = capacity(bound, pre), end = capacity(bound, last),
            middle = capacity(bound, 0);
    if (first < 1 || end < 1 || (n > 2 && middle < 1))
      return -1;
    return first + end + int64_t(n - 2) * middle;
  };
  // The least bottleneck of n chunks over l layers: one of offset + k x
  // cost, the least k of each offset (cover grows with k). No chunk holds
  // more than offset / cost + k layers, so k >= l / n - offset / cost:
  // a few steps up from there find it (the planner asks this for every
  // candidate), bisection when they do not.
  auto optimum = [&](int n, int l, double last) {
    double best = std::numeric_limits<double>::infinity();
    double offsets[] = {pre, last, 0.0, pre + last};
    for (double offset : offsets) {
      int lo = 1, hi = l;
      if (cover(n, offset + hi * layerCost, last) < l)
        continue;
      double floorK = double(l) / n - offset / layerCost - 1;
      if (floorK > 1)
        lo = int(std::min<double>(floorK, l));
      for (int step = 0; step < 4 && lo < hi; ++step) {
        if (cover(n, offset + lo * layerCost, last) >= l) {
          hi = lo;
          break;
        }
        ++lo;
      }
      while (lo < hi) {
        int mid = lo + (hi - lo) / 2;
        if (cover(n, offset + mid * layerCost, last) >= l)
          hi = mid;
        else
          lo = mid + 1;
      }
      best = std::min(best, offset + lo * layerCost);
    }
    return best;
  };
  // As balanceLayers rebuilds its split: the last chunk of each prefix
  // takes the fewest layers that keep the prefix's own optimum, and the
  // chunks before it are balanced to theirs.
  std::vector<int> counts(chunks, 0);
  int end = layers;
  double bound = optimum(chunks, layers, post);
  for (int c = chunks - 1; c > 0; --c) {
    double last = c == chunks - 1 ? post : 0.0;
    int64_t before = std::min<int64_t>(end - 1, cover(c, bound, 0.0));
    // Chunk c itself must fit: it takes at least end - capacity layers.
    int64_t own = capacity(bound, last);
    before = std::max<int64_t>(before, end - std::max<int64_t>(1, own));
    counts[c] = end - int(before);
    end = int(before);
    bound = optimum(c, end, 0.0);
  }
  counts[0] = end;
  return counts;
}

} // namespace partition::pipeline
