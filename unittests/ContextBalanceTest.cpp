//===- ContextBalanceTest.cpp - attention work per context-parallel rank ---===//

#include "passes/analysis/ContextBalance.h"
#include "runtime/data/SequenceLayout.h"

#include <gtest/gtest.h>

#include <numeric>
#include <set>

using namespace partition;

namespace {

TEST(ContextBalanceTest, ZigzagLayoutIsAPermutationPairingEarlyAndLateChunks) {
  // 16 positions in 8 chunks of 2 (cp = 4): chunk order 0 7 1 6 2 5 3 4.
  std::vector<int64_t> order;
  for (int64_t i = 0; i < 16; ++i)
    order.push_back(runtime::data::layoutPosition(i, 16, 8));
  EXPECT_EQ(order, (std::vector<int64_t>{0, 1, 14, 15, 2, 3, 12, 13, 4, 5, 10,
                                         11, 6, 7, 8, 9}));
  EXPECT_EQ(std::set<int64_t>(order.begin(), order.end()).size(), 16u);
  // One chunk: the natural order.
  for (int64_t i = 0; i < 16; ++i)
    EXPECT_EQ(runtime::data::layoutPosition(i, 16, 1), i);
}

TEST(ContextBalanceTest, ReorderingRoundTrips) {
  std::vector<int> rows(2 * 8 * 3);
  std::iota(rows.begin(), rows.end(), 0);
  auto layout = runtime::data::reorderSequences(rows, 8, 3, 4, true);
  EXPECT_NE(layout, rows);
  // The second element of layout order is position 1, the third position 6.
  EXPECT_EQ(layout[2 * 3], rows[6 * 3]);
  EXPECT_EQ(runtime::data::reorderSequences(layout, 8, 3, 4, false), rows);
}

TEST(ContextBalanceTest, ZigzagEvensCausalWork) {
  // Contiguous blocks: rank r scores sum over its queries t of t + 1.
  std::vector<int64_t> blocks = contextAttentionPairs(16, 1, 4, true, 0);
  EXPECT_EQ(blocks, (std::vector<int64_t>{10, 26, 42, 58}));
  EXPECT_DOUBLE_EQ(imbalance(blocks), 5.8);
  // Zigzag: every rank the same, and together all T (T + 1) / 2 pairs.
  std::vector<int64_t> zigzag = contextAttentionPairs(16, 8, 4, true, 0);
  EXPECT_EQ(zigzag, (std::vector<int64_t>{34, 34, 34, 34}));
  EXPECT_DOUBLE_EQ(imbalance(zigzag), 1.0);
  // Long sequences: the imbalance without zigzag tends to 2 cp - 1.
  EXPECT_NEAR(imbalance(contextAttentionPairs(1 << 14, 1, 4, true, 0)), 7.0,
              0.01);
  EXPECT_LT(imbalance(contextAttentionPairs(1 << 14, 8, 4, true, 0)), 1.05);
}

TEST(ContextBalanceTest, WindowAndFullAttention) {
  // A window of 2: every query but the first sees two keys.
  EXPECT_EQ(contextAttentionPairs(8, 1, 2, true, 2),
            (std::vector<int64_t>{7, 8}));
  EXPECT_EQ(contextAttentionPairs(8, 4, 2, false, 0),
            (std::vector<int64_t>{32, 32}));
}

} // namespace
