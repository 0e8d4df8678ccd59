//===- ScheduleCheckTest.cpp - deadlock checker and bubble simulator ------===//

#include "scheduling/ScheduleCheck.h"

#include <gtest/gtest.h>

#include <map>
#include <tuple>

using namespace partition::pipeline;

namespace {

constexpr ScheduleKind kAll[] = {ScheduleKind::GPipe, ScheduleKind::OneFOneB,
                                 ScheduleKind::Interleaved1F1B,
                                 ScheduleKind::ZeroBubbleH1};

Schedule make(ScheduleKind kind, int p, int m, int v = 1) {
  auto schedule = generateSchedule({kind, p, m, v, 0});
  EXPECT_TRUE(bool(schedule)) << schedule.error();
  return *schedule;
}

Timeline run(const Schedule &schedule, ActionCost cost) {
  SimulationOptions options;
  options.cost = std::move(cost);
  auto timeline = simulate(schedule, options);
  EXPECT_TRUE(bool(timeline)) << timeline.error();
  return timeline ? *timeline : Timeline{};
}

std::string rejection(const Schedule &schedule,
                      SendMode mode = SendMode::Buffered) {
  SimulationOptions options;
  options.sendMode = mode;
  auto timeline = simulate(schedule, options);
  EXPECT_FALSE(bool(timeline));
  return timeline ? std::string() : timeline.error();
}

/// Independent of the simulator's bookkeeping: on the timeline, each F
/// starts after the F of the previous model chunk ended, each B after the
/// B of the next chunk (or, on the last chunk, its own F), each W after its
/// B, and no two actions of a stage overlap.
void expectCausal(const Schedule &schedule, const Timeline &timeline,
                  const std::string &what) {
  const int p = schedule.stages(), last = p * schedule.chunks() - 1;
  using Key = std::tuple<ActionKind, int, int>; // kind, mb, model chunk
  std::map<Key, Span> at;
  for (int s = 0; s < p; ++s) {
    double free = 0;
    for (const Span &span : timeline.spans[s]) {
      EXPECT_GE(span.start, free) << what << " stage " << s;
      free = span.end;
      at[{span.action.kind, span.action.microbatch,
          schedule.modelChunk(s, span.action.chunk)}] = span;
    }
  }
  ASSERT_EQ(at.size(), 3u * schedule.microbatches() * (last + 1)) << what;
  auto end = [&](ActionKind kind, int mb, int g) {
    return at[Key(kind, mb, g)].end;
  };
  for (const auto &[key, span] : at) {
    auto [kind, mb, g] = key;
    double ready = 0;
    if (kind == ActionKind::Forward && g > 0)
      ready = end(kind, mb, g - 1);
    else if (kind == ActionKind::BackwardInput)
      ready = g < last ? end(kind, mb, g + 1) : end(ActionKind::Forward, mb, g);
    else if (kind == ActionKind::BackwardWeight)
      ready = end(ActionKind::BackwardInput, mb, g);
    EXPECT_GE(span.start, ready) << what;
  }
}

// The whole grid p <= 8, m <= 32, v <= 4 that each schedule allows
// finishes, with a timeline that respects every dependency and keeps each
// stage busy for exactly its own work.
TEST(ScheduleCheck, WholeGridFinishes) {
  int checked = 0;
  for (ScheduleKind kind : kAll)
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 32; ++m)
        for (int v = 1; v <= 4; ++v) {
          ScheduleConfig config{kind, p, m, v, 0};
          if (validateConfig(config))
            continue;
          auto schedule = generateSchedule(config);
          ASSERT_TRUE(bool(schedule)) << schedule.error();
          // Unequal costs, so that no tie hides a wrong order.
          Timeline t = run(*schedule, uniformCosts(1.0, 2.0, 0.5));
          std::string what = std::string(scheduleName(kind)) +
                             " p=" + std::to_string(p) +
                             " m=" + std::to_string(m) +
                             " v=" + std::to_string(v);
          for (int s = 0; s < p; ++s)
            EXPECT_DOUBLE_EQ(t.busy(s), 3.5 * m * v) << what;
          expectCausal(*schedule, t, what);
          ++checked;
        }
  // gpipe, 1f1b, zero-bubble: 8 x 32 each; interleaved: m % p == 0.
  EXPECT_EQ(checked, 3 * 256 + 4 * (32 + 16 + 10 + 8 + 6 + 5 + 4 + 4));
}

TEST(ScheduleCheck, RejectsAForwardBeforeItsInput) {
  // Stage 0 starts with chunk 1, whose input stage 1 can only make from
  // stage 0's chunk 0.
  Schedule s = make(ScheduleKind::Interleaved1F1B, 2, 2, 2);
  s.actions[0] = {{ActionKind::Forward, 0, 1},
                  {ActionKind::Forward, 0, 0},
                  {ActionKind::Forward, 1, 0},
                  {ActionKind::Forward, 1, 1}};
  for (int mb = 0; mb < 2; ++mb)
    for (int c : {1, 0}) {
      s.actions[0].push_back({ActionKind::BackwardInput, mb, c});
      s.actions[0].push_back({ActionKind::BackwardWeight, mb, c});
    }
  // Both stages wait to receive from each other, whatever sends do (and
  // the rendezvous checker must not wake them for ever).
  for (SendMode mode : {SendMode::Buffered, SendMode::Rendezvous})
    EXPECT_EQ(rejection(s, mode),
              "the schedule deadlocks: stage 0 at F0.1 waits to receive the "
              "activation of micro-batch 0 from model chunk 1 from stage 1; "
              "stage 1 at F0.0 waits to receive the activation of micro-batch "
              "0 from model chunk 0 from stage 0");
}

TEST(ScheduleCheck, RejectsACycleBetweenStages) {
  // Stage 0 waits for B0 before sending F1; stage 1 runs F1 before B0.
  Schedule s = make(ScheduleKind::OneFOneB, 2, 2);
  s.actions[0] = {{ActionKind::Forward, 0, 0},        {ActionKind::BackwardInput, 0, 0},
                  {ActionKind::BackwardWeight, 0, 0}, {ActionKind::Forward, 1, 0},
                  {ActionKind::BackwardInput, 1, 0},  {ActionKind::BackwardWeight, 1, 0}};
  s.actions[1] = {{ActionKind::Forward, 0, 0},        {ActionKind::Forward, 1, 0},
                  {ActionKind::BackwardInput, 0, 0},  {ActionKind::BackwardWeight, 0, 0},
                  {ActionKind::BackwardInput, 1, 0},  {ActionKind::BackwardWeight, 1, 0}};
  EXPECT_EQ(rejection(s),
            "the schedule deadlocks: stage 0 at B0 waits to receive the "
            "gradient of micro-batch 0 from model chunk 1 from stage 1; stage "
            "1 at F1 waits to receive the activation of micro-batch 1 from "
            "model chunk 0 from stage 0");
}

TEST(ScheduleCheck, RejectsMessagesReceivedOutOfOrder) {
  Schedule s = make(ScheduleKind::GPipe, 2, 2);
  std::swap(s.actions[1][0], s.actions[1][1]); // stage 1: F1 before F0
  EXPECT_EQ(rejection(s),
            "stage 1 at F1 expects the activation of micro-batch 1 from model "
            "chunk 0 but stage 0 sends the activation of micro-batch 0 from "
            "model chunk 0 first: messages between two stages must be "
            "received in the order they are sent");
}

TEST(ScheduleCheck, RendezvousSendsDeadlockOneFOneB) {
  // With sends that wait for their receiver, 1F1B's steady state has both
  // neighbours sending at once (stage 0 F1 forward, stage 1 B0 backward):
  // the runtime must not block on a send. GPipe survives.
  EXPECT_EQ(rejection(make(ScheduleKind::OneFOneB, 2, 2), SendMode::Rendezvous),
            "the schedule deadlocks: stage 0 at F1 waits to send the "
            "activation of micro-batch 1 from model chunk 0 to stage 1; stage "
            "1 at B0 waits to send the gradient of micro-batch 0 from model "
            "chunk 1 to stage 0");
  SimulationOptions rendezvous;
  rendezvous.sendMode = SendMode::Rendezvous;
  EXPECT_TRUE(bool(simulate(make(ScheduleKind::GPipe, 4, 8), rendezvous)));
}

TEST(ScheduleCheck, RejectsIncompleteOrMisorderedStreams) {
  Schedule s = make(ScheduleKind::OneFOneB, 2, 2);
  Schedule missing = s;
  missing.actions[1].pop_back();
  EXPECT_EQ(rejection(missing), "stage 1 never runs W1");
  Schedule twice = s;
  twice.actions[0].push_back(twice.actions[0][0]);
  EXPECT_EQ(rejection(twice), "stage 0 runs F0 twice");
  Schedule early = s; // stage 1: F0 B0 W0 F1 B1 W1 -> W before its B
  std::swap(early.actions[1][1], early.actions[1][2]);
  EXPECT_EQ(rejection(early), "stage 1 runs W0 before B0");
  Schedule outside = s;
  outside.actions[0][0].microbatch = 5;
  EXPECT_EQ(rejection(outside),
            "stage 0 runs F5, outside the 2 micro-batches and 1 chunks");
  Schedule stages = s;
  stages.actions.pop_back();
  EXPECT_EQ(rejection(stages), "the schedule has 1 action lists for 2 stages");
}

// Closed forms with unit costs. Where the backward is not split (W = 0),
// GPipe and 1F1B idle (p - 1) / (m + p - 1) of the time.
TEST(Bubble, GPipeAndOneFOneBClosedForm) {
  for (ScheduleKind kind : {ScheduleKind::GPipe, ScheduleKind::OneFOneB})
    for (int p = 1; p <= 8; ++p)
      for (int m = 1; m <= 32; ++m)
        for (double backward : {1.0, 2.0}) {
          Timeline t = run(make(kind, p, m), uniformCosts(1, backward, 0));
          EXPECT_NEAR(t.bubbleFraction(), double(p - 1) / (m + p - 1), 1e-12)
              << scheduleName(kind) << " p=" << p << " m=" << m;
        }
}

TEST(Bubble, InterleavedClosedForm) {
  // A chunk costs 1/v of a stage: (p - 1) / (v m + p - 1).
  for (int p = 2; p <= 8; ++p)
    for (int v = 2; v <= 4; ++v)
      for (int m = p; m <= 32; m += p) {
        Timeline t = run(make(ScheduleKind::Interleaved1F1B, p, m, v),
                         uniformCosts(1.0 / v, 1.0 / v, 0));
        EXPECT_NEAR(t.bubbleFraction(), double(p - 1) / (v * m + p - 1), 1e-12)
            << "p=" << p << " v=" << v << " m=" << m;
      }
}

TEST(Bubble, ZeroBubbleH1IsAThirdOfOneFOneB) {
  // Qi et al. 2023, section 3.1: with F = B = W, 1F1B (backward not split:
  // B costs F + W) idles (p - 1)(F + B + W) per stage, ZB-H1
  // (p - 1)(F + B - W): a third.
  for (int p = 2; p <= 8; ++p)
    for (int m = p; m <= 32; ++m) {
      Timeline zb = run(make(ScheduleKind::ZeroBubbleH1, p, m),
                        uniformCosts(1, 1, 1));
      Timeline base = run(make(ScheduleKind::OneFOneB, p, m),
                          uniformCosts(1, 2, 0));
      for (int s = 0; s < p; ++s) {
        EXPECT_DOUBLE_EQ(zb.makespan - zb.busy(s), p - 1.0)
            << "p=" << p << " m=" << m << " stage " << s;
        EXPECT_DOUBLE_EQ(base.makespan - base.busy(s), 3.0 * (p - 1));
      }
      EXPECT_NEAR(zb.bubbleFraction(), (p - 1.0) / (3 * m + p - 1), 1e-12);
      // Our 1F1B sends B's input gradient before W, which saves W per hop
      // of the drain but no more: ZB-H1 still idles half as much.
      Timeline split = run(make(ScheduleKind::OneFOneB, p, m),
                           uniformCosts(1, 1, 1));
      EXPECT_DOUBLE_EQ(split.makespan - split.busy(0), 2.0 * (p - 1));
    }
}

TEST(PeakInFlight, OneFOneBGPipeZeroBubble) {
  for (int p = 1; p <= 8; ++p)
    for (int m = 1; m <= 32; ++m) {
      auto gpipe = peakInFlight(make(ScheduleKind::GPipe, p, m));
      auto ofob = peakInFlight(make(ScheduleKind::OneFOneB, p, m));
      auto zb = peakInFlight(make(ScheduleKind::ZeroBubbleH1, p, m));
      int ofobPeak = 0, zbPeak = 0;
      for (int s = 0; s < p; ++s) {
        EXPECT_EQ(gpipe[s], m);
        EXPECT_EQ(ofob[s], std::min(p - s, m)) << "p=" << p << " m=" << m;
        ofobPeak = std::max(ofobPeak, ofob[s]);
        zbPeak = std::max(zbPeak, zb[s]);
      }
      // ZB-H1's peak is no higher than 1F1B's (stage 0's).
      EXPECT_EQ(zbPeak, ofobPeak) << "p=" << p << " m=" << m;
    }
}

TEST(Timeline, LatencyDelaysTheReceiver) {
  SimulationOptions options;
  options.cost = uniformCosts(1, 1, 0);
  options.p2pLatency = 0.5;
  auto t = simulate(make(ScheduleKind::GPipe, 2, 1), options);
  ASSERT_TRUE(bool(t)) << t.error();
  // F0 on stage 0 [0, 1], on stage 1 [1.5, 2.5], B0 on stage 1 [2.5, 3.5],
  // B0 on stage 0 [4, 5].
  EXPECT_DOUBLE_EQ(t->spans[1][0].start, 1.5);
  EXPECT_DOUBLE_EQ(t->spans[0][1].start, 4.0);
  EXPECT_DOUBLE_EQ(t->makespan, 5.0);
  EXPECT_DOUBLE_EQ(t->idleFraction(1), 1.0 - 2.0 / 5.0);
}

} // namespace

namespace {

TEST(Timeline, PerStageCosts) {
  // GPipe, 2 stages, 2 micro-batches; stage 1's forward takes 2, B 1, W 0.
  SimulationOptions options;
  options.cost = [](int stage, const Action &a) {
    if (a.kind == ActionKind::Forward)
      return stage == 1 ? 2.0 : 1.0;
    return a.kind == ActionKind::BackwardInput ? 1.0 : 0.0;
  };
  auto t = simulate(make(ScheduleKind::GPipe, 2, 2), options);
  ASSERT_TRUE(bool(t)) << t.error();
  // Stage 1: F0 [1, 3], F1 [3, 5], B0 [5, 6], B1 [6, 7]; stage 0: B0 [6, 7],
  // B1 [7, 8].
  EXPECT_DOUBLE_EQ(t->spans[1][1].end, 5.0);
  EXPECT_DOUBLE_EQ(t->spans[0][2].start, 6.0);
  EXPECT_DOUBLE_EQ(t->makespan, 8.0);
  EXPECT_DOUBLE_EQ(t->busy(1), 6.0);
  EXPECT_DOUBLE_EQ(t->bubbleFraction(), 1.0 - (4.0 + 6.0) / 16.0);
}

} // namespace
