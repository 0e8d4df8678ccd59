//===- ScheduleTest.cpp - the four schedules' action lists and errors -----===//

#include "scheduling/Schedule.h"
#include "scheduling/ScheduleCheck.h"

#include <gtest/gtest.h>

using namespace partition::pipeline;

namespace {

Schedule make(ScheduleKind kind, int p, int m, int v = 1, int layers = 0) {
  auto schedule = generateSchedule({kind, p, m, v, layers});
  EXPECT_TRUE(bool(schedule)) << schedule.error();
  return *schedule;
}

std::string error(ScheduleKind kind, int p, int m, int v = 1, int layers = 0) {
  auto schedule = generateSchedule({kind, p, m, v, layers});
  EXPECT_FALSE(bool(schedule));
  return schedule ? std::string() : schedule.error();
}

std::string stream(const Schedule &schedule, int stage) {
  std::string out;
  for (const Action &a : schedule.actions[stage])
    out += (out.empty() ? "" : " ") + formatAction(a, schedule.chunks());
  return out;
}

int forwardsBeforeFirstBackward(const std::vector<Action> &actions) {
  int n = 0;
  for (const Action &a : actions) {
    if (a.kind == ActionKind::BackwardInput)
      break;
    n += a.kind == ActionKind::Forward;
  }
  return n;
}

TEST(ScheduleNames, RoundTrip) {
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                    ScheduleKind::Interleaved1F1B, ScheduleKind::ZeroBubbleH1})
    EXPECT_EQ(parseScheduleKind(scheduleName(kind)), kind);
  EXPECT_EQ(parseScheduleKind("zb-h1"), std::nullopt);
  EXPECT_EQ(scheduleNames(), "gpipe, 1f1b, interleaved-1f1b, zero-bubble");
}

TEST(GPipe, AllForwardsThenAllBackwards) {
  Schedule s = make(ScheduleKind::GPipe, 2, 3);
  for (int stage = 0; stage < 2; ++stage)
    EXPECT_EQ(stream(s, stage), "F0 F1 F2 B0 W0 B1 W1 B2 W2");
}

TEST(OneFOneB, WarmUpSteadyCoolDown) {
  Schedule s = make(ScheduleKind::OneFOneB, 4, 6);
  EXPECT_EQ(stream(s, 0),
            "F0 F1 F2 F3 B0 W0 F4 B1 W1 F5 B2 W2 B3 W3 B4 W4 B5 W5");
  EXPECT_EQ(stream(s, 2),
            "F0 F1 B0 W0 F2 B1 W1 F3 B2 W2 F4 B3 W3 F5 B4 W4 B5 W5");
  EXPECT_EQ(stream(s, 3),
            "F0 B0 W0 F1 B1 W1 F2 B2 W2 F3 B3 W3 F4 B4 W4 F5 B5 W5");
  // Warm-up: p - s - 1 forwards before the steady 1F1B's first forward.
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 12; ++m) {
      Schedule g = make(ScheduleKind::OneFOneB, p, m);
      for (int stage = 0; stage < p; ++stage)
        EXPECT_EQ(forwardsBeforeFirstBackward(g.actions[stage]),
                  std::min(p - stage, m))
            << "p=" << p << " m=" << m << " stage " << stage;
    }
}

TEST(Interleaved, MegatronChunkOrder) {
  // Micro-batches in groups of p through chunk 0, then chunk 1; warm-up of
  // 2 (p - s - 1) + (v - 1) p forwards.
  Schedule s = make(ScheduleKind::Interleaved1F1B, 2, 4, 2);
  EXPECT_EQ(stream(s, 0), "F0.0 F1.0 F0.1 F1.1 F2.0 B0.1 W0.1 F3.0 B1.1 W1.1 "
                          "F2.1 B0.0 W0.0 F3.1 B1.0 W1.0 B2.1 W2.1 B3.1 W3.1 "
                          "B2.0 W2.0 B3.0 W3.0");
  EXPECT_EQ(stream(s, 1), "F0.0 F1.0 F0.1 B0.1 W0.1 F1.1 B1.1 W1.1 F2.0 B0.0 "
                          "W0.0 F3.0 B1.0 W1.0 F2.1 B2.1 W2.1 F3.1 B3.1 W3.1 "
                          "B2.0 W2.0 B3.0 W3.0");
  // One chunk per stage is 1F1B.
  Schedule one = make(ScheduleKind::Interleaved1F1B, 4, 8, 1);
  Schedule plain = make(ScheduleKind::OneFOneB, 4, 8);
  EXPECT_EQ(one.actions, plain.actions);
}

TEST(ZeroBubbleH1, WeightGradientsDeferredByStage) {
  Schedule s = make(ScheduleKind::ZeroBubbleH1, 3, 4);
  // Stage s runs 1F1B's F and B; its first s W come late.
  EXPECT_EQ(stream(s, 0), "F0 F1 F2 B0 W0 F3 B1 W1 B2 W2 B3 W3");
  EXPECT_EQ(stream(s, 1), "F0 F1 B0 F2 B1 W0 F3 B2 W1 B3 W2 W3");
  EXPECT_EQ(stream(s, 2), "F0 B0 F1 B1 F2 B2 W0 F3 B3 W1 W2 W3");
}

TEST(Schedules, EveryActionOnceInDependencyOrder) {
  for (auto kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                    ScheduleKind::Interleaved1F1B, ScheduleKind::ZeroBubbleH1})
    for (int p = 1; p <= 5; ++p)
      for (int m = p; m <= 3 * p; m += p) {
        int v = kind == ScheduleKind::Interleaved1F1B ? 3 : 1;
        Schedule s = make(kind, p, m, v);
        EXPECT_EQ(checkActions(s), std::nullopt)
            << scheduleName(kind) << " p=" << p << " m=" << m;
      }
}

TEST(ScheduleErrors, NameTheFieldsAndNumbers) {
  EXPECT_EQ(error(ScheduleKind::Interleaved1F1B, 4, 6, 2),
            "pipeline.microbatches = 6 is not divisible by mesh.pp = 4: "
            "interleaved-1f1b runs the micro-batches in groups of pp; use 4 "
            "or 8");
  EXPECT_EQ(error(ScheduleKind::Interleaved1F1B, 4, 3, 2),
            "pipeline.microbatches = 3 is not divisible by mesh.pp = 4: "
            "interleaved-1f1b runs the micro-batches in groups of pp; use 4");
  EXPECT_EQ(error(ScheduleKind::OneFOneB, 4, 8, 2),
            "pipeline.virtual_stages = 2 needs pipeline.schedule = "
            "\"interleaved-1f1b\", not \"1f1b\"; drop virtual_stages or "
            "change the schedule");
  EXPECT_EQ(error(ScheduleKind::Interleaved1F1B, 4, 8, 3, 8),
            "mesh.pp x pipeline.virtual_stages = 4 x 3 = 12 chunks, more "
            "than the model's 8 layers: every chunk needs at least one layer");
  EXPECT_EQ(error(ScheduleKind::GPipe, 8, 8, 1, 4),
            "mesh.pp = 8 is larger than the model's 4 layers: every stage "
            "needs at least one layer");
  EXPECT_EQ(error(ScheduleKind::GPipe, 0, 8),
            "mesh.pp must be at least 1, got 0");
  EXPECT_EQ(error(ScheduleKind::GPipe, 2, 0),
            "pipeline.microbatches must be at least 1, got 0");
  EXPECT_EQ(error(ScheduleKind::Interleaved1F1B, 2, 2, -1),
            "pipeline.virtual_stages must be at least 1, got -1");
  EXPECT_EQ(error(ScheduleKind::GPipe, 1 << 12, 1 << 13),
            "mesh.pp x pipeline.virtual_stages x pipeline.microbatches = 4096 "
            "x 1 x 8192 = 33554432 passes, more than the 1048576 a schedule "
            "may hold");
  // Layers that suffice, and unknown layers, are accepted.
  make(ScheduleKind::Interleaved1F1B, 4, 8, 2, 8);
  make(ScheduleKind::Interleaved1F1B, 4, 8, 4, 0);
}

} // namespace
