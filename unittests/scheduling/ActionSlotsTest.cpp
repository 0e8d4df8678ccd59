//===- ActionSlotsTest.cpp - slots of the micro-batches in flight ---------===//

#include "scheduling/ActionSlots.h"

#include <gtest/gtest.h>

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

} // namespace
