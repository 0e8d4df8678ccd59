//===- MicrobatchLoopTest.cpp - the micro-batch loop's compiled step ------===//

#include "scheduling/MicrobatchLoop.h"

#include <gtest/gtest.h>

using namespace partition::pipeline;

namespace {

std::optional<LoopLayout> layoutOf(ScheduleKind kind, int p, int m, int v = 1,
                                   bool forwardOnly = false) {
  return microbatchLoopLayout({kind, p, m, v, 0}, forwardOnly);
}

/// Every compiled micro-batch maps to a real one and back.
void expectConsistent(const LoopLayout &layout) {
  std::vector<int> reals = layout.compiledMicrobatches();
  ASSERT_EQ(static_cast<int>(reals.size()), layout.compiled);
  for (int c = 0; c < layout.compiled; ++c)
    EXPECT_EQ(layout.compiledOf(reals[c]), c);
  EXPECT_EQ(layout.microbatches,
            layout.compiled + (layout.runs - 2) * layout.stride);
}

TEST(MicrobatchLoop, WithoutAPipelineTheBodyIsMicrobatchZero) {
  // The step's sums start at zero, so micro-batch 0 runs the loop's code.
  for (bool forwardOnly : {false, true}) {
    auto layout = layoutOf(ScheduleKind::OneFOneB, 1, 8, 1, forwardOnly);
    ASSERT_TRUE(layout);
    EXPECT_EQ(layout->stride, 1);
    EXPECT_EQ(layout->settle, 0);
    EXPECT_EQ(layout->split, 2);
    EXPECT_EQ(layout->runs, 7);
    EXPECT_EQ(layout->compiledMicrobatches(), (std::vector<int>{0, 1, 7}));
    expectConsistent(*layout);
  }
  // Three or fewer: nothing to loop.
  EXPECT_FALSE(layoutOf(ScheduleKind::OneFOneB, 1, 3));
  EXPECT_TRUE(layoutOf(ScheduleKind::OneFOneB, 1, 4));
  // Where the first micro-batches differ (ZeRO-3's gathers), the second.
  auto settled = microbatchLoopLayout({ScheduleKind::OneFOneB, 1, 8, 1, 0},
                                      /*forwardOnly=*/false, /*minSettle=*/1);
  ASSERT_TRUE(settled);
  EXPECT_EQ(settled->settle, 1);
  EXPECT_EQ(settled->compiledMicrobatches(), (std::vector<int>{0, 1, 2, 7}));
}

TEST(MicrobatchLoop, OneFOneBRepeatsEveryPpMicrobatches) {
  auto layout = layoutOf(ScheduleKind::OneFOneB, 2, 16);
  ASSERT_TRUE(layout);
  EXPECT_EQ(layout->stride, 2);
  EXPECT_EQ(layout->compiled, 6);
  EXPECT_EQ(layout->split, 4);
  EXPECT_EQ(layout->runs, 7);
  expectConsistent(*layout);
  // Stage 0 (one forward of warm-up): the body is the first period after
  // it, F1 B0 W0 F2 B1 W1.
  const auto &bounds = layout->bounds[0];
  std::string body;
  for (int i = bounds[0]; i < bounds[1]; ++i)
    body += formatAction(layout->actions[0][i], 1) + " ";
  EXPECT_EQ(body, "F1 B0 W0 F2 B1 W1 ");
  // An odd count keeps its remainder in the tail.
  auto odd = layoutOf(ScheduleKind::OneFOneB, 4, 1023);
  ASSERT_TRUE(odd);
  EXPECT_EQ(odd->stride, 4);
  expectConsistent(*odd);
  EXPECT_LT(odd->compiled, 20);
}

TEST(MicrobatchLoop, EverySchedulesSteadyStateLoops) {
  for (auto [kind, v] : {std::pair{ScheduleKind::OneFOneB, 1},
                         {ScheduleKind::ZeroBubbleH1, 1},
                         {ScheduleKind::Interleaved1F1B, 2},
                         {ScheduleKind::Interleaved1F1B, 3}}) {
    for (int p : {2, 4, 8})
      for (int m : {128, 256}) {
        auto layout = layoutOf(kind, p, m, v);
        ASSERT_TRUE(layout) << scheduleName(kind) << " p" << p << " m" << m;
        EXPECT_EQ(layout->stride % p, 0);
        EXPECT_LE(layout->compiled, 6 * layout->stride);
        expectConsistent(*layout);
        // The evaluation step's forwards loop too.
        auto eval = layoutOf(kind, p, m, v, /*forwardOnly=*/true);
        ASSERT_TRUE(eval);
        expectConsistent(*eval);
      }
  }
}

TEST(MicrobatchLoop, GPipeAndShortStepsDoNotLoop) {
  EXPECT_FALSE(layoutOf(ScheduleKind::GPipe, 2, 64));
  EXPECT_FALSE(layoutOf(ScheduleKind::OneFOneB, 4, 12));
  EXPECT_TRUE(layoutOf(ScheduleKind::GPipe, 2, 64, 1, /*forwardOnly=*/true));
}

TEST(MicrobatchLoop, ForwardOrderGroupsMicrobatchesByPp) {
  std::string order;
  for (const Action &a : forwardOrder(2, 2, 4))
    order += formatAction(a, 2) + " ";
  EXPECT_EQ(order, "F0.0 F1.0 F0.1 F1.1 F2.0 F3.0 F2.1 F3.1 ");
}

} // namespace
