//===- ActionSlotsTest.cpp - slots of the micro-batches in flight ---------===//

#include "scheduling/ActionSlots.h"

#include <gtest/gtest.h>

#include <set>

using namespace partition::pipeline;

namespace {

std::vector<Action> stageActions(ScheduleKind kind, int stages, int chunks,
                                 int microbatches, int stage) {
  ScheduleConfig config;
  config.kind = kind;
  config.stages = stages;
  config.chunks = chunks;
  config.microbatches = microbatches;
  partition::OrError<Schedule> schedule = generateSchedule(config);
  EXPECT_TRUE(bool(schedule));
  return schedule->actions[stage];
}

// 1F1B keeps pp - s micro-batches in flight on stage s: that many slots,
// reused in turn, and a micro-batch keeps its slot from F to W.
TEST(ActionSlots, OneFOneBHoldsPpMinusStage) {
  for (int stage = 0; stage < 4; ++stage) {
    std::vector<Action> order =
        stageActions(ScheduleKind::OneFOneB, 4, 1, 12, stage);
    std::map<int, int> counts;
    std::vector<int> slots = assignSlots(order, counts);
    EXPECT_EQ(counts[0], 4 - stage) << "stage " << stage;
    std::map<int, int> slotOf;
    for (size_t i = 0; i < order.size(); ++i) {
      auto [it, inserted] = slotOf.insert({order[i].microbatch, slots[i]});
      EXPECT_EQ(it->second, slots[i]) << "micro-batch " << order[i].microbatch;
    }
  }
  // Stage 0 of 4: micro-batches 0-3 take slots 0-3, then 4 takes 0 (freed
  // by 0's last action, before 4's forward).
  std::vector<Action> order = stageActions(ScheduleKind::OneFOneB, 4, 1, 8, 0);
  std::map<int, int> counts;
  std::vector<int> slots = assignSlots(order, counts);
  for (size_t i = 0; i < order.size(); ++i)
    if (order[i].kind == ActionKind::Forward)
      EXPECT_EQ(slots[i], order[i].microbatch % 4) << order[i].microbatch;
}

// GPipe holds every micro-batch; interleaved 1F1B gives each chunk its own.
TEST(ActionSlots, GPipeAndInterleaved) {
  std::map<int, int> counts;
  assignSlots(stageActions(ScheduleKind::GPipe, 2, 1, 6, 0), counts);
  EXPECT_EQ(counts[0], 6);
  counts.clear();
  assignSlots(stageActions(ScheduleKind::Interleaved1F1B, 2, 2, 8, 0), counts);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_GE(counts[0], 2);
  EXPECT_GE(counts[1], 1);
  EXPECT_LE(counts[0] + counts[1], 8);
}

// One pool for an interleaved stage's chunks holds as many slots as the
// most micro-batch chunks in flight (stage 0 of pp 2, v 2, 8 micro-batches:
// 5, where the chunks' own pools hold 4 + 2), and no pool slot is held by
// two micro-batch chunks at once.
TEST(ActionSlots, SharedPoolHoldsTheMostInFlight) {
  std::vector<Action> order =
      stageActions(ScheduleKind::Interleaved1F1B, 2, 2, 8, 0);
  std::map<int, int> own;
  assignSlots(order, own);
  EXPECT_EQ(own[0] + own[1], 6);
  std::map<int, int> counts;
  std::vector<double> poolBytes;
  std::vector<int> slots =
      assignSharedSlots(order, {{0, 1.0}, {1, 1.0}}, counts, &poolBytes);
  EXPECT_EQ(poolBytes.size(), 5u);
  // Two micro-batches holding one slot of a chunk never overlap.
  std::map<std::pair<int, int>, std::pair<size_t, size_t>> spans;
  for (size_t i = 0; i < order.size(); ++i) {
    auto [it, inserted] = spans.try_emplace(
        {order[i].microbatch, order[i].chunk}, std::make_pair(i, i));
    it->second.second = i;
  }
  for (auto &[a, spanA] : spans)
    for (auto &[b, spanB] : spans)
      if (a < b && a.second == b.second &&
          slots[spanA.first] == slots[spanB.first])
        EXPECT_TRUE(spanA.second < spanB.first || spanB.second < spanA.first)
            << "chunk " << a.second << " micro-batches " << a.first << ", "
            << b.first;
  // Every local slot of a chunk is taken at some action.
  for (auto &[chunk, count] : counts) {
    std::set<int> taken;
    for (size_t i = 0; i < order.size(); ++i)
      if (order[i].chunk == chunk)
        taken.insert(slots[i]);
    EXPECT_EQ(static_cast<int>(taken.size()), count) << "chunk " << chunk;
  }
}

// A pool slot grows to its largest chunk: best fit keeps a large chunk's
// micro-batches in the slots already that large where one is free.
TEST(ActionSlots, SharedPoolFitsSizes) {
  std::vector<Action> order =
      stageActions(ScheduleKind::Interleaved1F1B, 2, 2, 8, 1);
  std::map<int, int> counts;
  std::vector<double> poolBytes;
  assignSharedSlots(order, {{0, 1.0}, {1, 3.0}}, counts, &poolBytes);
  double total = 0;
  for (double bytes : poolBytes)
    total += bytes;
  // Never more than every slot at the largest chunk's size.
  EXPECT_LE(total, 3.0 * poolBytes.size());
  EXPECT_GE(total, 3.0);
}

} // namespace
