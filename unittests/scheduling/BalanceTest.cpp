//===- BalanceTest.cpp - the stage split of --dist-pipeline ---------------===//

#include "scheduling/Balance.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

using namespace partition::pipeline;

namespace {

/// The least largest chunk cost over every split, by enumeration.
double bruteForce(const std::vector<double> &layers, double pre, double post,
                  int chunks) {
  double best = 1e300;
  std::vector<int> counts;
  std::function<void(int, int)> go = [&](int chunk, int left) {
    if (chunk == chunks - 1) {
      if (left < 1)
        return;
      counts.push_back(left);
      std::vector<double> costs = chunkCosts(layers, pre, post, counts);
      best = std::min(best, *std::max_element(costs.begin(), costs.end()));
      counts.pop_back();
      return;
    }
    for (int take = 1; take <= left - (chunks - 1 - chunk); ++take) {
      counts.push_back(take);
      go(chunk + 1, left - take);
      counts.pop_back();
    }
  };
  go(0, static_cast<int>(layers.size()));
  return best;
}

TEST(Balance, EqualLayersSplitEvenly) {
  EXPECT_EQ(balanceLayers({1, 1, 1, 1}, 0, 0, 2), (std::vector<int>{2, 2}));
  EXPECT_EQ(balanceLayers({1, 1, 1, 1}, 0, 0, 4),
            (std::vector<int>{1, 1, 1, 1}));
}

TEST(Balance, UnevenLayerCountsWork) {
  // 3 layers on 2 stages: one stage takes two.
  std::vector<int> counts = balanceLayers({1, 1, 1}, 0, 0, 2);
  ASSERT_EQ(counts.size(), 2u);
  EXPECT_EQ(counts[0] + counts[1], 3);
  EXPECT_TRUE(counts[0] >= 1 && counts[1] >= 1);
}

TEST(Balance, AHeavyLmHeadLeavesTheLastStageFewerLayers) {
  // The LM head of a large vocabulary is worth several layers.
  EXPECT_EQ(balanceLayers({1, 1, 1, 1, 1, 1, 1, 1}, 0.1, 4, 2),
            (std::vector<int>{6, 2}));
  EXPECT_EQ(balanceLayers({1, 1, 1, 1}, 0, 10, 2),
            (std::vector<int>{3, 1}));
}

TEST(Balance, MatchesBruteForce) {
  std::vector<std::vector<double>> models = {
      {3, 1, 4, 1, 5, 9, 2, 6}, {1, 1, 1, 1, 1, 1, 1}, {5, 1, 1, 1, 1, 5}};
  for (const auto &layers : models)
    for (int chunks = 1; chunks <= static_cast<int>(layers.size()); ++chunks)
      for (double post : {0.0, 2.0, 7.0}) {
        std::vector<int> counts = balanceLayers(layers, 1.5, post, chunks);
        ASSERT_EQ(static_cast<int>(counts.size()), chunks);
        int sum = 0;
        for (int count : counts) {
          EXPECT_GE(count, 1);
          sum += count;
        }
        EXPECT_EQ(sum, static_cast<int>(layers.size()));
        std::vector<double> costs = chunkCosts(layers, 1.5, post, counts);
        EXPECT_DOUBLE_EQ(*std::max_element(costs.begin(), costs.end()),
                         bruteForce(layers, 1.5, post, chunks));
      }
}

TEST(Balance, RefusesImpossibleChunkCounts) {
  EXPECT_TRUE(balanceLayers({1, 1}, 0, 0, 3).empty());
  EXPECT_TRUE(balanceLayers({1, 1}, 0, 0, 0).empty());
}

} // namespace

TEST(Balance, UniformLayersMatchTheDynamicProgram) {
  // The planner's fast split of equal layers is the pass's own split.
  for (int layers : {1, 2, 3, 7, 10, 24, 37, 80, 126})
    for (int chunks = 1; chunks <= layers; chunks += (layers > 40 ? 7 : 1))
      for (double pre : {0.0, 0.05, 0.5, 1.5})
        for (double post : {0.0, 0.6, 1.0, 2.3, 7.0}) {
          std::vector<double> costs(layers, 1.0);
          EXPECT_EQ(balanceUniformLayers(layers, 1.0, pre, post, chunks),
                    balanceLayers(costs, pre, post, chunks))
              << layers << " layers, " << chunks << " chunks, pre " << pre
              << ", post " << post;
        }
}

TEST(Balance, Llama3FirstAndLastChunkOneLayerFewer) {
  // 126 layers in 16 x 4 chunks, the LM head worth 0.6 of a layer: the
  // first and the last chunk hold one layer, the others two (Llama 3).
  std::vector<int> counts = balanceUniformLayers(126, 1.0, 0.05, 0.6, 64);
  ASSERT_EQ(counts.size(), 64u);
  EXPECT_EQ(counts.front(), 1);
  EXPECT_EQ(counts.back(), 1);
  for (size_t c = 1; c + 1 < counts.size(); ++c)
    EXPECT_EQ(counts[c], 2);
}
