//===- BudgetTest.cpp - the budget frontier against brute force -----------===//
//
// budgetFrontier must be exact: on small graphs (up to 20 recomputable
// nodes) every subset is enumerated, and for every byte limit the cheapest
// subset that fits must cost what the frontier's cheapest point within the
// limit costs. searchFrontier is checked against a linear scan over peaks
// that do not fall monotonically, as the memory planner's do not.
//
//===----------------------------------------------------------------------===//

#include "scheduling/Budget.h"

#include <gtest/gtest.h>

#include <map>
#include <random>

using namespace partition::recompute;

namespace {

/// Least FLOPs per exact kept size, over every subset of the recomputable
/// nodes.
std::map<int64_t, int64_t> bruteForce(const std::vector<BudgetNode> &nodes) {
  std::vector<size_t> free;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (nodes[i].recomputable)
      free.push_back(i);
  EXPECT_LE(free.size(), 20u);
  std::map<int64_t, int64_t> best;
  for (uint64_t mask = 0; mask < (uint64_t(1) << free.size()); ++mask) {
    std::vector<bool> recompute(nodes.size(), false);
    for (size_t bit = 0; bit < free.size(); ++bit)
      recompute[free[bit]] = (mask >> bit) & 1;
    BudgetChoice choice = evaluateChoice(nodes, recompute);
    auto [it, inserted] = best.try_emplace(choice.keptBytes, choice.extraFlops);
    if (!inserted)
      it->second = std::min(it->second, choice.extraFlops);
  }
  return best;
}

/// The frontier is a true Pareto frontier, each point is what its choice
/// costs, and for every limit it is as cheap as brute force.
void expectExact(const std::vector<BudgetNode> &nodes) {
  std::vector<BudgetChoice> frontier = budgetFrontier(nodes);
  ASSERT_FALSE(frontier.empty());
  EXPECT_EQ(frontier.front().extraFlops, 0);
  for (size_t i = 0; i < frontier.size(); ++i) {
    std::vector<bool> recompute = frontier[i].rebuilt;
    BudgetChoice again = evaluateChoice(nodes, recompute);
    EXPECT_EQ(again.keptBytes, frontier[i].keptBytes) << "point " << i;
    EXPECT_EQ(again.extraFlops, frontier[i].extraFlops) << "point " << i;
    EXPECT_EQ(again.rebuilt, frontier[i].rebuilt) << "point " << i;
    if (i > 0) {
      EXPECT_LT(frontier[i - 1].extraFlops, frontier[i].extraFlops);
      EXPECT_GT(frontier[i - 1].keptBytes, frontier[i].keptBytes);
    }
  }
  std::map<int64_t, int64_t> best = bruteForce(nodes);
  // Limits: every reachable size, and one byte below each.
  int64_t cheapest = INT64_MAX;
  std::map<int64_t, int64_t> cheapestWithinLimit;
  for (auto [bytes, flops] : best)
    cheapestWithinLimit[bytes] = cheapest = std::min(cheapest, flops);
  for (auto [bytes, flops] : cheapestWithinLimit) {
    std::optional<size_t> at = cheapestWithin(frontier, bytes);
    ASSERT_TRUE(at) << "limit " << bytes;
    EXPECT_EQ(frontier[*at].extraFlops, flops) << "limit " << bytes;
    EXPECT_LE(frontier[*at].keptBytes, bytes);
  }
  int64_t smallest = best.begin()->first;
  EXPECT_FALSE(cheapestWithin(frontier, smallest - 1));
  EXPECT_EQ(frontier.back().keptBytes, smallest);
}

/// A random DAG: each node reads up to three earlier ones.
std::vector<BudgetNode> randomDag(std::mt19937 &random, size_t size) {
  std::vector<BudgetNode> nodes(size);
  for (size_t i = 0; i < size; ++i) {
    BudgetNode &node = nodes[i];
    node.bytes = std::uniform_int_distribution<int64_t>(1, 50)(random);
    node.flops = std::uniform_int_distribution<int64_t>(0, 100)(random);
    node.saved = random() % 3 != 0;
    node.recomputable = i > 0 && random() % 5 != 0;
    for (int k = 0; i > 0 && k < 3; ++k)
      if (random() % 2)
        node.inputs.push_back(random() % i);
  }
  return nodes;
}

/// Transformer-like layers: a kept residual stream between layers, and in
/// each layer norm -> q, kv -> attention -> projection -> residual sum ->
/// norm -> up -> activation -> down -> residual sum (the next input), with
/// matmuls expensive and element-wise work cheap.
std::vector<BudgetNode> layerChain(size_t layers, std::mt19937 &random) {
  std::vector<BudgetNode> nodes;
  auto add = [&](int64_t bytes, int64_t flops, bool saved, bool recomputable,
                 std::vector<size_t> inputs) {
    // Jitter, so that ties do not hide a wrong choice.
    bytes += random() % 3;
    flops += random() % 3;
    nodes.push_back({bytes, flops, saved, recomputable, std::move(inputs)});
    return nodes.size() - 1;
  };
  size_t stream = add(8, 10, true, false, {});
  for (size_t layer = 0; layer < layers; ++layer) {
    size_t norm1 = add(8, 5, true, true, {stream});
    size_t q = add(8, 100, true, true, {norm1});
    size_t kv = add(16, 200, true, true, {norm1});
    size_t attention = add(8, 200, true, true, {q, kv});
    size_t proj = add(8, 100, false, true, {attention});
    size_t mid = add(8, 2, true, true, {stream, proj});
    size_t norm2 = add(8, 5, true, true, {mid});
    size_t up = add(32, 400, true, true, {norm2});
    size_t act = add(32, 8, true, true, {up});
    size_t down = add(8, 400, false, true, {act});
    stream = add(8, 2, true, false, {mid, down});
  }
  return nodes;
}

TEST(BudgetFrontier, MatchesBruteForceOnRandomGraphs) {
  std::mt19937 random(1234);
  for (int round = 0; round < 60; ++round) {
    size_t size = 4 + round % 17;
    std::vector<BudgetNode> nodes = randomDag(random, size);
    SCOPED_TRACE("round " + std::to_string(round));
    expectExact(nodes);
  }
}

TEST(BudgetFrontier, MatchesBruteForceOnALayerChain) {
  std::mt19937 random(7);
  // Two layers: 20 recomputable nodes, 2^20 subsets.
  expectExact(layerChain(2, random));
}

TEST(BudgetFrontier, ACheckpointChain) {
  // in -> a -> b -> c, all saved: keeping b and rebuilding c from it (cost
  // 1) beats rebuilding a (cost 10) for the same bytes.
  std::vector<BudgetNode> nodes = {{5, 0, true, false, {}},
                                   {4, 10, true, true, {0}},
                                   {4, 1, true, true, {1}},
                                   {4, 1, true, true, {2}}};
  std::vector<BudgetChoice> frontier = budgetFrontier(nodes);
  ASSERT_GE(frontier.size(), 2u);
  EXPECT_EQ(frontier[0].keptBytes, 17);
  EXPECT_EQ(frontier[0].extraFlops, 0);
  EXPECT_EQ(frontier[1].keptBytes, 13);
  EXPECT_EQ(frontier[1].extraFlops, 1);
  EXPECT_TRUE(frontier[1].rebuilt[3]);
  // The smallest: everything rebuilt from the input, once each.
  EXPECT_EQ(frontier.back().keptBytes, 5);
  EXPECT_EQ(frontier.back().extraFlops, 12);
}

TEST(BudgetFrontier, AnUnreadNodeCostsNothing) {
  // Node 1 is neither saved nor read by a rebuilt node: never kept.
  std::vector<BudgetNode> nodes = {{5, 0, true, false, {}},
                                   {100, 10, false, true, {0}},
                                   {4, 3, true, true, {0}}};
  std::vector<BudgetChoice> frontier = budgetFrontier(nodes);
  ASSERT_EQ(frontier.size(), 2u);
  EXPECT_EQ(frontier[0].keptBytes, 9);
  EXPECT_EQ(frontier[1].keptBytes, 5);
  EXPECT_EQ(frontier[1].extraFlops, 3);
  EXPECT_FALSE(frontier[1].rebuilt[1]);
}

TEST(BudgetFrontier, ScalesToManyLayers) {
  // 24 layers: the cuts stay small, the frontier exact and ordered.
  std::mt19937 random(3);
  std::vector<BudgetNode> nodes = layerChain(24, random);
  std::vector<BudgetChoice> frontier = budgetFrontier(nodes);
  ASSERT_GT(frontier.size(), 24u);
  std::vector<bool> all(nodes.size(), true);
  EXPECT_EQ(frontier.back().keptBytes, evaluateChoice(nodes, all).keptBytes);
  for (size_t i = 1; i < frontier.size(); ++i)
    EXPECT_LT(frontier[i - 1].extraFlops, frontier[i].extraFlops);
}

TEST(BudgetFrontier, ACoarseQuantumStaysWithinItsBound) {
  // Every exact point has a coarse one at most as expensive that keeps at
  // most nodes x quantum bytes more.
  std::mt19937 random(11);
  std::vector<BudgetNode> nodes = layerChain(8, random);
  std::vector<BudgetChoice> exact = budgetFrontier(nodes);
  const int64_t quantum = 16;
  std::vector<BudgetChoice> coarse = budgetFrontier(nodes, quantum);
  EXPECT_LT(coarse.size(), exact.size());
  for (const BudgetChoice &point : exact) {
    bool covered = false;
    for (const BudgetChoice &candidate : coarse)
      covered |= candidate.extraFlops <= point.extraFlops &&
                 candidate.keptBytes <=
                     point.keptBytes + int64_t(nodes.size()) * quantum;
    EXPECT_TRUE(covered) << point.keptBytes << " bytes, " << point.extraFlops
                         << " FLOPs";
  }
  for (const BudgetChoice &point : coarse) {
    BudgetChoice again = evaluateChoice(nodes, point.rebuilt);
    EXPECT_EQ(again.keptBytes, point.keptBytes);
    EXPECT_EQ(again.extraFlops, point.extraFlops);
  }
}

/// The cheapest index whose peak fits, by a linear scan.
std::optional<size_t> scan(const std::vector<int64_t> &peaks, int64_t budget) {
  for (size_t i = 0; i < peaks.size(); ++i)
    if (peaks[i] <= budget)
      return i;
  return std::nullopt;
}

TEST(BudgetSearch, FindsTheCheapestFittingPointOfAnUnevenPeak) {
  // Real peaks need not fall along the frontier; the bounds do not grow
  // and never exceed the peaks.
  std::vector<int64_t> peaks = {100, 96, 90, 97, 85, 70, 75, 61, 60, 42, 44};
  std::vector<int64_t> bounds = {90, 88, 80, 80, 70, 60, 60, 55, 50, 40, 40};
  for (int64_t budget = 30; budget <= 110; ++budget) {
    std::vector<size_t> asked;
    BudgetSearch search = searchFrontier(
        peaks.size(), budget, [&](size_t i) { return bounds[i]; },
        [&](size_t index) {
          asked.push_back(index);
          return peaks[index];
        });
    std::optional<size_t> expected = scan(peaks, budget);
    ASSERT_EQ(search.chosen, expected) << "budget " << budget;
    EXPECT_EQ(search.measured, asked.size());
    // Points whose bound exceeds the budget are never measured.
    for (size_t index : asked)
      EXPECT_TRUE(bounds[index] <= budget || index + 1 == peaks.size())
          << "budget " << budget << " measured " << index;
    if (!expected) {
      EXPECT_EQ(search.peak, peaks.back()) << "budget " << budget;
      continue;
    }
    EXPECT_EQ(search.peak, peaks[*expected]);
    if (*expected > 0) {
      ASSERT_TRUE(search.cheaperPeak);
      EXPECT_GT(*search.cheaperPeak, budget);
    } else {
      EXPECT_FALSE(search.cheaperPeak);
    }
  }
}

TEST(BudgetSearch, MeasuresOnlyWhereTheBoundAllows) {
  // A tight bound: only the answer is measured.
  std::vector<int64_t> peaks = {100, 90, 80, 70, 60};
  BudgetSearch search = searchFrontier(
      peaks.size(), 75, [&](size_t i) { return peaks[i]; },
      [&](size_t index) { return peaks[index]; });
  ASSERT_EQ(search.chosen, std::optional<size_t>(3));
  EXPECT_EQ(search.measured, 1u);
  EXPECT_EQ(search.cheaperPeak, std::optional<int64_t>(80));
}

} // namespace
