//===- StreamPlanTest.cpp - the CUDA backend's ordering, without a GPU ----===//
//
// Which kernel waits for which collective (runtime/backend/cuda/StreamPlan.h):
// by overlapping byte ranges, so a reused range is ordered too, and only once.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cuda/StreamPlan.h"

#include <gtest/gtest.h>

using namespace partition::runtime::cuda;

namespace {

PlannedInstruction kernel(std::vector<ByteRange> ranges) {
  PlannedInstruction instruction;
  instruction.ranges = std::move(ranges);
  return instruction;
}

PlannedInstruction collective(int stream, std::vector<ByteRange> ranges,
                              std::vector<ByteRange> computeRanges = {}) {
  PlannedInstruction instruction;
  instruction.collective = true;
  instruction.stream = stream;
  instruction.ranges = std::move(ranges);
  instruction.computeRanges = std::move(computeRanges);
  return instruction;
}

using Waits = std::vector<size_t>;

TEST(StreamPlan, KernelsElsewhereRunWhileABucketIsInFlight) {
  StreamPlan plan = planStreams({
      kernel({{0, 64}, {64, 128}}),  // 0: writes the gradient [64, 128)
      collective(0, {{64, 128}}),    // 1: all-reduce it (event 0)
      kernel({{128, 256}}),          // 2: elsewhere: no wait
      kernel({{256, 320}, {0, 64}}), // 3: elsewhere: no wait
      kernel({{100, 104}, {0, 64}}), // 4: reads the gradient: waits
      kernel({{64, 128}}),           // 5: already ordered: no wait
  });
  EXPECT_EQ(plan.events, 1u);
  EXPECT_EQ(plan.event[1], 0u);
  EXPECT_EQ(plan.event[0], StreamPlan::kNoEvent);
  EXPECT_EQ(plan.computeWaits[2], Waits{});
  EXPECT_EQ(plan.computeWaits[3], Waits{});
  EXPECT_EQ(plan.computeWaits[4], Waits{0});
  EXPECT_EQ(plan.computeWaits[5], Waits{});
  EXPECT_EQ(plan.finalWaits, Waits{});
}

TEST(StreamPlan, AReusedRangeWaitsThoughTheBufferDiffers) {
  // The planner gives the all-reduced bytes to a later temporary: writing it
  // must wait for the collective to have read them.
  StreamPlan plan = planStreams({
      collective(0, {{1000, 2000}}),
      kernel({{0, 100}, {1500, 1600}}),
  });
  EXPECT_EQ(plan.computeWaits[1], Waits{0});
}

TEST(StreamPlan, TouchingRangesDoNotOverlap) {
  StreamPlan plan = planStreams({
      collective(0, {{64, 128}}),
      kernel({{0, 64}, {128, 192}}),
  });
  EXPECT_EQ(plan.computeWaits[1], Waits{});
  EXPECT_EQ(plan.finalWaits, Waits{0});
}

TEST(StreamPlan, CollectivesOfDifferentCommunicatorsNeverOverlap) {
  // Overlapping bytes or not: two communicators' NCCL kernels in flight at
  // once may deadlock.
  StreamPlan plan = planStreams({
      collective(0, {{0, 100}}),   // event 0, stream 0
      collective(0, {{50, 150}}),  // event 1: same stream, ordered by it
      collective(1, {{120, 130}}), // event 2: other stream, overlaps 1
      collective(1, {{500, 600}}), // event 3: overlaps nothing
  });
  EXPECT_EQ(plan.streamWaits[1], Waits{});
  EXPECT_EQ(plan.streamWaits[2], (Waits{0, 1}));
  EXPECT_EQ(plan.streamWaits[3], (Waits{0, 1}));
  EXPECT_EQ(plan.finalWaits, (Waits{0, 1, 2, 3}));
}

TEST(StreamPlan, PackingIntoStagingWaitsForItsLastUser) {
  // A gather unpacks from staging [S, S+64) on its stream; a later
  // reduce-scatter packs into the same staging on the compute stream first.
  uint64_t S = 1 << 20;
  StreamPlan plan = planStreams({
      collective(0, {{0, 16}, {16, 64}, {S, S + 64}}),
      collective(1, {{64, 128}, {128, 144}, {S, S + 64}},
                 {{64, 128}, {S, S + 64}}),
  });
  EXPECT_EQ(plan.computeWaits[1], Waits{0});
  // The compute stream has waited: the second needs no stream wait.
  EXPECT_EQ(plan.streamWaits[1], Waits{});
  EXPECT_EQ(plan.finalWaits, Waits{1});
}

TEST(StreamPlan, AComputeWaitOrdersLaterCollectivesOnOtherStreams) {
  // Once the compute stream has waited for a collective, a later collective
  // on another stream is ordered after it through the compute stream's
  // ready event; one that is still in flight needs a stream wait.
  StreamPlan plan = planStreams({
      collective(0, {{0, 64}}),    // event 0
      collective(0, {{256, 320}}), // event 1
      kernel({{0, 16}}),           // waits for event 0
      collective(1, {{32, 48}}),   // 0 waited for; 1 on stream 0 in flight
      collective(1, {{300, 310}}), // 1 still in flight: stream wait
      kernel({{300, 304}}),        // waits for 1 and 3
  });
  EXPECT_EQ(plan.computeWaits[2], Waits{0});
  EXPECT_EQ(plan.streamWaits[3], Waits{1});
  EXPECT_EQ(plan.streamWaits[4], Waits{1});
  EXPECT_EQ(plan.computeWaits[5], (Waits{1, 3}));
  EXPECT_EQ(plan.finalWaits, Waits{2});
}

TEST(StreamPlan, WhatNobodyWaitedForIsJoinedAtTheEnd) {
  StreamPlan plan = planStreams({
      collective(0, {{0, 4}}), // the loss
      kernel({{8, 16}}),
  });
  EXPECT_EQ(plan.finalWaits, Waits{0});
}

TEST(StreamPlan, TransfersAreNotSerialisedWithOtherCommunicators) {
  // 1F1B on stage 0: the send of micro-batch 1's activations completes only
  // once stage 1 receives it, after stage 1 has sent micro-batch 0's
  // gradients, which stage 0 receives next: the receive must not wait for
  // the send, nor a collective for either.
  PlannedInstruction send = collective(0, {{4000, 4100}}, {{0, 100}});
  send.transfer = true;
  PlannedInstruction recv = collective(1, {{200, 300}});
  recv.transfer = true;
  StreamPlan plan = planStreams({
      send,                        // event 0, stream 0 (0->1)
      recv,                        // event 1, stream 1 (1->0)
      kernel({{200, 300}}),        // reads the receive: waits for it only
      collective(2, {{500, 600}}), // an all-reduce: waits for no transfer
      kernel({{0, 100}}),          // overwrites the sent buffer: no wait
  });
  EXPECT_EQ(plan.streamWaits[1], Waits{});
  EXPECT_EQ(plan.computeWaits[2], Waits{1});
  EXPECT_EQ(plan.streamWaits[3], Waits{});
  EXPECT_EQ(plan.computeWaits[4], Waits{});
  EXPECT_EQ(plan.finalWaits, (Waits{0, 2}));
}

} // namespace

// A started collective's wait (from --rt-overlap-collectives) makes the
// compute stream wait for it there, though no kernel before it touches its
// bytes; kernels in between still run while it is in flight.
TEST(StreamPlan, AWaitInstructionWaitsForItsStartedCollective) {
  PlannedInstruction wait;
  wait.waitFor = 1;
  PlannedInstruction waitAgain;
  waitAgain.waitFor = 0;
  StreamPlan plan = planStreams({
      kernel({{0, 64}}),        // 0: writes the bucket
      collective(0, {{0, 64}}), // 1: started (event 0)
      kernel({{128, 256}}),     // 2: backward goes on: no wait
      wait,                     // 3: the wait: waits for event 0
      kernel({{0, 64}}),        // 4: AdamW reads it: already ordered
  });
  EXPECT_EQ(plan.computeWaits[2], Waits{});
  EXPECT_EQ(plan.computeWaits[3], Waits{0});
  EXPECT_EQ(plan.computeWaits[4], Waits{});
  EXPECT_EQ(plan.finalWaits, Waits{});
  // Already waited for by an overlapping kernel: the wait adds nothing.
  plan = planStreams({collective(0, {{0, 64}}), kernel({{0, 64}}), waitAgain});
  EXPECT_EQ(plan.computeWaits[1], Waits{0});
  EXPECT_EQ(plan.computeWaits[2], Waits{});
}

// The offload's AdamW on the CPU (CudaTiers, docs/offload.md) is a transfer
// on the updates' stream whose own bytes (gradient, parameter) are also its
// compute ranges: it starts after the bucket that reduces its gradient (a
// collective the compute stream has not waited for yet included), the
// backward pass runs on beside it, the next kernel that touches its
// gradient, parameter, step or learning rate waits for it, it neither waits
// for other buckets nor makes them wait, and the step ends waiting for the
// rest. The step and learning rate, which every update reads, are not
// compute ranges: else each update would hold the compute stream until the
// one before it is done.
TEST(StreamPlan, ACpuUpdateOverlapsTheBackwardPassAndTheBuckets) {
  auto update = [](std::vector<ByteRange> own) {
    std::vector<ByteRange> ranges = own;
    ranges.push_back({900, 908}); // step, lr
    PlannedInstruction instruction = collective(7, ranges, own);
    instruction.transfer = true;
    instruction.ordersCollectives = true;
    return instruction;
  };
  StreamPlan plan = planStreams({
      kernel({{0, 64}}),                // 0: completes grad A
      collective(0, {{0, 64}}),         // 1: its bucket (event 0)
      kernel({{0, 64}, {64, 96}}),      // 2: waits for 1
      update({{0, 64}, {64, 96}}),      // 3: A's update (event 1)
      kernel({{200, 300}}),             // 4: backward goes on
      collective(0, {{200, 264}}),      // 5: bucket B (event 2)
      collective(0, {{400, 464}}),      // 6: bucket C (event 3)
      update({{200, 264}, {300, 332}}), // 7: B's update (event 4)
      kernel({{0, 32}}),                // 8: reuses A's bytes
  });
  EXPECT_EQ(plan.computeWaits[2], Waits{0});
  EXPECT_EQ(plan.computeWaits[3], Waits{});
  EXPECT_EQ(plan.streamWaits[3], Waits{});
  EXPECT_EQ(plan.computeWaits[4], Waits{});
  // The buckets do not wait for the update in flight.
  EXPECT_EQ(plan.streamWaits[5], Waits{});
  // B's update starts after B's all-reduce, which nothing had waited for
  // (without --rt-overlap-collectives there is no wait instruction), not
  // after C's.
  EXPECT_EQ(plan.computeWaits[7], Waits{2});
  EXPECT_EQ(plan.streamWaits[7], Waits{});
  EXPECT_EQ(plan.computeWaits[8], Waits{1});
  // C and B's update are left for the end of the step.
  EXPECT_EQ(plan.finalWaits, (Waits{3, 4}));

  // An all-gather whose output takes the bytes of a gradient still being
  // read by its update (ZeRO-3's gathers in the backward pass) waits for
  // the update; one elsewhere does not.
  plan = planStreams({
      update({{0, 64}}),           // 0: event 0
      collective(0, {{512, 576}}), // 1: elsewhere: event 1
      collective(0, {{32, 96}}),   // 2: into the gradient's bytes: event 2
  });
  EXPECT_EQ(plan.streamWaits[1], Waits{});
  EXPECT_EQ(plan.streamWaits[2], Waits{0});
}

// A ZeRO-1 step's last all-gather of updated parameters, carried into the
// next run (Backend.h, carriedWaits): the run does not wait for it at its
// end; the next run starts with it in flight, so its first kernel on the
// parameter waits for it (the previous run's event), a collective of
// another communicator is serialised after it, and its own restart, on its
// stream, retires it.
TEST(StreamPlan, ACarriedGatherIsWaitedForWhereTheNextRunFirstTouchesIt) {
  PlannedInstruction trailing;
  trailing.waitFor = 5;
  trailing.carried = true;
  StreamPlan plan = planStreams({
      kernel({{512, 576}}),        // 0: forward, elsewhere: no wait
      kernel({{0, 64}, {512, 576}}), // 1: reads the parameter: waits for 2
      collective(1, {{600, 700}}), // 2: tp: after the carried gather
      collective(0, {{800, 900}}), // 3: a bucket on the gather's stream
      kernel({{0, 32}}),           // 4: AdamW writes its shard: in order
      collective(0, {{0, 64}}),    // 5: the gather (event 2), restarted
      trailing,                    // 6: carried: no wait here
  });
  EXPECT_EQ(plan.events, 3u);
  EXPECT_EQ(plan.computeWaits[0], Waits{});
  EXPECT_EQ(plan.computeWaits[1], Waits{2});
  // Waited for by the compute stream already (kernel 1): nothing to add.
  EXPECT_EQ(plan.streamWaits[2], Waits{});
  EXPECT_EQ(plan.computeWaits[6], Waits{});
  EXPECT_EQ(plan.carriedEvents, Waits{2});
  EXPECT_EQ(plan.finalWaits, (Waits{0, 1}));
}

TEST(StreamPlan, ACarriedGatherNobodyTouchedIsSerialisedAndReplaced) {
  PlannedInstruction trailing;
  trailing.waitFor = 2;
  trailing.carried = true;
  StreamPlan plan = planStreams({
      collective(1, {{600, 700}}), // 0: another communicator: waits for it
      kernel({{600, 700}}),        // 1: waits for 0 only
      collective(0, {{0, 64}}),    // 2: the gather restarted: replaces it
      kernel({{0, 64}}),           // 3: waits for this run's gather
      trailing,
  });
  EXPECT_EQ(plan.streamWaits[0], Waits{1});
  EXPECT_EQ(plan.computeWaits[1], Waits{0});
  EXPECT_EQ(plan.streamWaits[2], Waits{});
  EXPECT_EQ(plan.computeWaits[3], Waits{1});
  EXPECT_EQ(plan.carriedEvents, Waits{});
  EXPECT_EQ(plan.finalWaits, Waits{});
}
