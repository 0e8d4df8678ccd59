//===- Budget.cpp - the cheapest recomputation within a memory budget -----===//

#include "scheduling/Budget.h"

#include <algorithm>
#include <cassert>
#include <climits>
#include <map>

namespace partition::recompute {
namespace {

int64_t saturatingAdd(int64_t a, int64_t b) {
  int64_t sum;
  return __builtin_add_overflow(a, b, &sum) ? INT64_MAX : sum;
}

/// A partial choice: the nodes rebuilt so far, as a chain of records
/// shared between the choices that extend it (-1 ends a chain).
struct Record {
  int64_t parent;
  size_t node;
};

struct Point {
  int64_t bytes, flops;
  int64_t record;
};

/// The nodes not visited yet that rebuilt nodes read, sorted.
using Cut = std::vector<size_t>;

/// Keeps the Pareto-optimal points: by increasing bytes, strictly
/// decreasing FLOPs. With a `quantum` above 1, of the points whose bytes
/// fall in one bucket of `quantum` bytes only the cheapest survives.
void prune(std::vector<Point> &points, int64_t quantum) {
  std::sort(points.begin(), points.end(), [](const Point &a, const Point &b) {
    return a.bytes != b.bytes ? a.bytes < b.bytes : a.flops < b.flops;
  });
  size_t kept = 0;
  int64_t best = INT64_MAX;
  for (const Point &point : points) {
    if (kept > 0 && point.flops >= best)
      continue;
    // A cheaper point in the last kept one's bucket replaces it.
    if (kept > 0 && quantum > 1 &&
        point.bytes / quantum == points[kept - 1].bytes / quantum)
      --kept;
    best = point.flops;
    points[kept++] = point;
  }
  points.resize(kept);
}

/// Drops the records no point reaches (pruned choices), renumbering the
/// rest, so that memory follows the live points, not the visited ones.
void compact(std::vector<Record> &records,
             std::map<Cut, std::vector<Point>> &states) {
  std::vector<int64_t> renumbered(records.size(), -1);
  std::vector<size_t> live;
  for (auto &entry : states)
    for (const Point &point : entry.second)
      for (int64_t at = point.record; at >= 0 && renumbered[at] == -1;
           at = records[at].parent) {
        renumbered[at] = 0;
        live.push_back(at);
      }
  std::sort(live.begin(), live.end());
  std::vector<Record> kept;
  kept.reserve(live.size());
  for (size_t at : live) {
    renumbered[at] = static_cast<int64_t>(kept.size());
    int64_t parent = records[at].parent;
    // Parents come first: they were recorded earlier.
    kept.push_back({parent < 0 ? -1 : renumbered[parent], records[at].node});
  }
  for (auto &entry : states)
    for (Point &point : entry.second)
      if (point.record >= 0)
        point.record = renumbered[point.record];
  records = std::move(kept);
}

} // namespace

BudgetChoice evaluateChoice(const std::vector<BudgetNode> &nodes,
                            const std::vector<bool> &recompute) {
  BudgetChoice choice;
  choice.rebuilt.assign(nodes.size(), false);
  // Read by a rebuilt node; consumers come after their inputs, so every
  // mark is set before its node is visited.
  std::vector<bool> read(nodes.size(), false);
  for (size_t v = nodes.size(); v-- > 0;) {
    const BudgetNode &node = nodes[v];
    if (!node.saved && !read[v])
      continue;
    if (node.recomputable && v < recompute.size() && recompute[v]) {
      choice.rebuilt[v] = true;
      choice.extraFlops = saturatingAdd(choice.extraFlops, node.flops);
      for (size_t input : node.inputs)
        read[input] = true;
    } else {
      choice.keptBytes = saturatingAdd(choice.keptBytes, node.bytes);
    }
  }
  return choice;
}

std::vector<BudgetChoice> budgetFrontier(const std::vector<BudgetNode> &nodes,
                                         int64_t quantum) {
  std::vector<Record> records;
  std::map<Cut, std::vector<Point>> states;
  states[Cut()].push_back({0, 0, -1});
  size_t recordsAfterCompaction = 0;
  for (size_t v = nodes.size(); v-- > 0;) {
    const BudgetNode &node = nodes[v];
    std::map<Cut, std::vector<Point>> next;
    for (auto &[cut, points] : states) {
      auto at = std::lower_bound(cut.begin(), cut.end(), v);
      bool read = at != cut.end() && *at == v;
      Cut rest = cut;
      if (read)
        rest.erase(rest.begin() + (at - cut.begin()));
      std::vector<Point> &keep = next[rest];
      if (!node.saved && !read) {
        keep.insert(keep.end(), points.begin(), points.end());
        continue;
      }
      for (const Point &point : points)
        keep.push_back(
            {saturatingAdd(point.bytes, node.bytes), point.flops, point.record});
      if (!node.recomputable)
        continue;
      Cut grown = rest;
      for (size_t input : node.inputs) {
        assert(input < v && "a node's inputs come before it");
        grown.push_back(input);
      }
      std::sort(grown.begin(), grown.end());
      grown.erase(std::unique(grown.begin(), grown.end()), grown.end());
      std::vector<Point> &rebuild = next[grown];
      for (const Point &point : points) {
        records.push_back({point.record, v});
        rebuild.push_back({point.bytes, saturatingAdd(point.flops, node.flops),
                           static_cast<int64_t>(records.size()) - 1});
      }
    }
    size_t live = 0;
    for (auto &entry : next) {
      prune(entry.second, quantum);
      live += entry.second.size();
    }
    states = std::move(next);
    if (records.size() > 2 * recordsAfterCompaction + 4 * live + (1u << 16)) {
      compact(records, states);
      recordsAfterCompaction = records.size();
    }
  }
  // Every node is visited: the only cut left is the empty one.
  std::vector<Point> &points = states[Cut()];
  std::vector<BudgetChoice> frontier;
  for (auto point = points.rbegin(); point != points.rend(); ++point) {
    BudgetChoice choice;
    choice.keptBytes = point->bytes;
    choice.extraFlops = point->flops;
    choice.rebuilt.assign(nodes.size(), false);
    for (int64_t at = point->record; at >= 0; at = records[at].parent)
      choice.rebuilt[records[at].node] = true;
    frontier.push_back(std::move(choice));
  }
  return frontier;
}

std::optional<size_t> cheapestWithin(const std::vector<BudgetChoice> &frontier,
                                     int64_t limit) {
  for (size_t i = 0; i < frontier.size(); ++i)
    if (frontier[i].keptBytes <= limit)
      return i;
  return std::nullopt;
}

BudgetSearch searchFrontier(size_t size, int64_t budget,
                            const std::function<int64_t(size_t)> &lowerBound,
                            const std::function<int64_t(size_t)> &peakOf) {
  BudgetSearch search;
  if (size == 0)
    return search;
  // The first point whose bound fits (bounds do not grow along the
  // frontier).
  size_t first = 0, end = size;
  while (first < end) {
    size_t middle = first + (end - first) / 2;
    if (lowerBound(middle) <= budget)
      end = middle;
    else
      first = middle + 1;
  }
  std::optional<int64_t> previous;
  if (first > 0)
    previous = lowerBound(first - 1); // Does not fit, without measuring.
  for (size_t index = first; index < size; ++index) {
    ++search.measured;
    int64_t peak = peakOf(index);
    if (peak <= budget) {
      search.chosen = index;
      search.peak = peak;
      search.cheaperPeak = previous;
      return search;
    }
    previous = peak;
  }
  if (first == size) {
    ++search.measured;
    search.peak = peakOf(size - 1);
  } else {
    search.peak = *previous;
  }
  return search;
}

} // namespace partition::recompute
