//===- CostModelTest.cpp - the cost model's parts -------------------------===//

#include "planner/Collectives.h"
#include "planner/CostModel.h"
#include "planner/LayerCost.h"
#include "planner/Offload.h"
#include "planner/PipelineSimulation.h"
#include "planner/Search.h"
#include "scheduling/Schedule.h"
#include "scheduling/ScheduleCheck.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace partition::planner;
using partition::OrError;

namespace {

ModelShape small() {
  ModelShape m;
  m.layers = 8;
  m.hidden = 1024;
  m.heads = m.kvHeads = 16;
  m.ffn = 4096;
  m.vocab = 32000;
  m.seqLen = m.positions = 1024;
  return m;
}

/// A validator that accepts every plan.
Validate acceptAll() {
  return [](const Candidate &, bool &hard) {
    hard = false;
    return std::string();
  };
}

/// The search pinned to dp2, no tp or pp, ZeRO-3, one sequence per
/// micro-batch.
Fixed dp2Zero3() {
  Fixed fixed;
  fixed.dp = 2;
  fixed.tp = 1;
  fixed.pp = 1;
  fixed.zeroStage = 3;
  fixed.maxMicroBatch = 1;
  return fixed;
}

} // namespace

TEST(Collectives, RingAndTreeByTheAlphaBetaModel) {
  Link link{100e9, 10e-6};
  // Large messages: the ring, 2 (n-1)/n of the bytes each way.
  EXPECT_NEAR(allReduceTime(1e9, 8, link),
              2 * 7 * (10e-6 + 1e9 / 8 / 100e9), 1e-12);
  // Tiny messages on many ranks: the tree's log2(n) latencies win.
  double ring = 2 * 1023 * (10e-6 + 8.0 / 1024 / 100e9);
  EXPECT_LT(allReduceTime(8, 1024, link), ring);
  EXPECT_NEAR(allReduceTime(8, 1024, link), 2 * 10 * 10e-6 + 16 / 100e9,
              1e-12);
  EXPECT_EQ(allReduceTime(1e9, 1, link), 0);
  EXPECT_NEAR(allGatherTime(800, 4, link), 3 * (10e-6 + 200 / 100e9), 1e-15);
}

TEST(Collectives, TensorParallelStaysInsideANode) {
  Cluster c = *getProfile("a100-80gb-dgx");
  EXPECT_EQ(groupLink(c, 8, 1).bandwidth, c.intraNodeBandwidth);
  EXPECT_EQ(groupLink(c, 2, 8).bandwidth, c.interNodeBandwidth);
  EXPECT_EQ(groupLink(c, 4, 2).bandwidth, c.intraNodeBandwidth);
}

TEST(CostModel, ParameterCountsMatchTheClosedForms) {
  // GPT-2 124M: 124,439,808 parameters with the 50257 vocabulary.
  ModelShape m;
  m.layers = 12;
  m.hidden = 768;
  m.heads = m.kvHeads = 12;
  m.ffn = 3072;
  m.vocab = 50257;
  m.seqLen = m.positions = 1024;
  EXPECT_EQ(m.parameters(), 124439808);
  // Megatron's FLOP count (eq. 3 without recomputation: 72 B s l h^2 (1 +
  // s / 6h + V / 12 l h)).
  double B = 8, s = 1024, l = 12, h = 768, V = 50257;
  double megatron = 72 * B * s * l * h * h * (1 + s / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(modelFlopsPerStep(m, 8) / megatron, 1.0, 1e-9);
  // A sliding window W < s: the attention term s / 6h becomes W / 6h; one
  // of at least s changes nothing.
  m.slidingWindow = 256;
  double W = 256;
  double windowed = 72 * B * s * l * h * h * (1 + W / (6 * h) + V / (12 * l * h));
  EXPECT_NEAR(modelFlopsPerStep(m, 8) / windowed, 1.0, 1e-9);
  // Qwen2's window on the layers from 6 of 12 on: half of each.
  m.windowFromLayer = 6;
  EXPECT_NEAR(modelFlopsPerStep(m, 8) / ((windowed + megatron) / 2), 1.0,
              1e-9);
  m.windowFromLayer = 0;
  m.slidingWindow = 4096;
  EXPECT_NEAR(modelFlopsPerStep(m, 8) / megatron, 1.0, 1e-9);
}

// A window shortens the attention products: a faster step, fewer FLOPs,
// and a materialized kernel's probabilities shrink to T x W.
TEST(CostModel, SlidingWindowAttentionCostsLess) {
  ModelShape m = small();
  m.llama = true;
  m.seqLen = 8192;
  m.positions = 0;
  Candidate p;
  p.precision = "bf16";
  p.microBatch = 1;
  Cluster flash = *getProfile("a100-80gb-dgx");
  Prediction full = predict(m, p, flash);
  ModelShape windowed = m;
  windowed.slidingWindow = 1024;
  Prediction narrow = predict(windowed, p, flash);
  EXPECT_LT(narrow.modelFlops, full.modelFlops);
  EXPECT_LT(narrow.stepSeconds, full.stepSeconds);
  Cluster materialized = flash;
  materialized.attentionKernel = "materialized";
  EXPECT_LT(predict(windowed, p, materialized).memory.activations,
            predict(m, p, materialized).memory.activations);
}

TEST(CostModel, PeakInFlightClosedFormsMatchTheScheduleGeneratorOnEveryStage) {
  using namespace partition::pipeline;
  for (int p : {2, 4, 8})
    for (int m : {8, 16, 24})
      for (auto [name, v] : {std::pair<std::string, int>{"gpipe", 1},
                             {"1f1b", 1},
                             {"zero-bubble", 1},
                             {"interleaved-1f1b", 2},
                             {"interleaved-1f1b", 4}}) {
        ScheduleConfig config;
        config.kind = *parseScheduleKind(name);
        config.stages = p;
        config.microbatches = m;
        config.chunks = v;
        OrError<Schedule> schedule = generateSchedule(config);
        ASSERT_TRUE(bool(schedule)) << schedule.error();
        std::vector<int> peaks = peakInFlight(*schedule);
        for (int stage = 0; stage < p; ++stage) {
          EXPECT_GE(stagePeakInFlight(name, p, m, v, stage), peaks[stage])
              << name << " p" << p << " m" << m << " v" << v << " stage "
              << stage;
          EXPECT_LE(stagePeakInFlight(name, p, m, v, stage),
                    peaks[stage] + 1)
              << name << " p" << p << " m" << m << " v" << v << " stage "
              << stage;
        }
      }
}

TEST(CostModel, PipelinesPayTheirBubble) {
  // 4 stages, 64 micro-batches (simulated at 8 and 16, extended
  // linearly): the simulated step exceeds the no-bubble lower bound.
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  Candidate p;
  p.pp = 4;
  p.microbatches = 64;
  p.schedule = "1f1b";
  p.precision = "bf16";
  // Two layers a stage, as written (the balanced split would give the
  // last stage, which has the LM head, fewer; see the next test).
  p.stages = {2, 2, 2, 2};
  Prediction exact = predict(m, p, c);
  Prediction bound = predict(m, p, c, /*exactPipeline=*/false);
  EXPECT_GT(exact.stepSeconds, bound.stepSeconds);
  EXPECT_GT(exact.breakdown.bubble, 0);
  // 1F1B's bubble with equal stages is (p-1)/(m+p-1) of the pipeline; the
  // last stage's LM head makes it unequal, so only bound it.
  double pipeline = exact.stepSeconds - exact.breakdown.dataComm -
                    exact.breakdown.optimizer;
  EXPECT_GT(exact.breakdown.bubble / pipeline, 3.0 / 67 * 0.5);
  EXPECT_LT(exact.breakdown.bubble / pipeline, 3.0 / 67 * 4);
}

TEST(CostModel, StagesAreSplitAsTheCompilerSplitsThemOrAsWritten) {
  // 8 layers on 4 stages, an LM head worth about 2.6 layers: the split
  // balanced by cost (--dist-pipeline's) leaves the last stage one layer
  // and is faster than two layers a stage, which a plan may still ask for.
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  Candidate p;
  p.pp = 4;
  p.microbatches = 16;
  p.precision = "bf16";
  Prediction balanced = predict(m, p, c);
  EXPECT_EQ(balanced.chunkLayers, chunkLayerCounts(m, p, c));
  ASSERT_EQ(balanced.chunkLayers.size(), 4u);
  EXPECT_EQ(balanced.chunkLayers.back(), 1);
  Candidate even = p;
  even.stages = {2, 2, 2, 2};
  Prediction written = predict(m, even, c);
  EXPECT_EQ(written.chunkLayers, (std::vector<int64_t>{2, 2, 2, 2}));
  EXPECT_LT(balanced.stepSeconds, written.stepSeconds);
  EXPECT_NE(even.planJson().find("\"stages\": [2, 2, 2, 2]"),
            std::string::npos);
  // Interleaving with a chunk count that does not divide the layers (6
  // layers in 2 x 2 chunks), as the compiler accepts it: each chunk holds
  // at least one layer.
  m.layers = 6;
  Candidate v = p;
  v.pp = 2;
  v.virtualStages = 2;
  v.schedule = "interleaved-1f1b";
  Prediction interleaved = predict(m, v, c);
  ASSERT_EQ(interleaved.chunkLayers.size(), 4u);
  int64_t sum = 0;
  for (int64_t layers : interleaved.chunkLayers) {
    EXPECT_GE(layers, 1);
    sum += layers;
  }
  EXPECT_EQ(sum, 6);
  EXPECT_TRUE(std::isfinite(interleaved.stepSeconds));
}

TEST(CostModel, CpuGemmsPackTheirOperandsBeyondTheCache) {
  // The LM head of a 32-token micro-batch, 32 x 768 x 50257 (a 154 MB
  // weight), on a CPU profile that packs at 10 GB/s: the weight's packing
  // is most of its time. An operand within the cache packs for free, and
  // a profile without the rate (every GPU's) has no such term.
  Cluster cpu = *getProfile("cpu-local");
  cpu.peakFlopsFp32 = 200e9;
  cpu.memoryBandwidth = 20e9;
  Cluster packing = cpu;
  packing.gemmPackBandwidth = 10e9;
  packing.gemmPackCachedBytes = 2 << 20;
  double weight = 4.0 * 768 * 50257;
  double plain = gemmTime(32, 50257, 768, 1, 4, cpu, "fp32");
  double packed = gemmTime(32, 50257, 768, 1, 4, packing, "fp32");
  EXPECT_NEAR(packed - plain, weight / 10e9, 1e-6);
  EXPECT_GT(packed, 2 * plain);
  // 256 x 192 x 512: both operands within 2 MiB.
  EXPECT_DOUBLE_EQ(gemmTime(256, 512, 192, 1, 4, packing, "fp32"),
                   gemmTime(256, 512, 192, 1, 4, cpu, "fp32"));
  Cluster gpu = *getProfile("h100-sxm-dgx");
  EXPECT_EQ(gpu.gemmPackBandwidth, 0);
}

TEST(CostModel, MoreWorkTakesLonger) {
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  Candidate base;
  base.precision = "bf16";
  base.microBatch = 4;
  base.microbatches = 2;
  Prediction none = predict(m, base, c);
  Candidate full = base;
  full.recompute = "full";
  Prediction recomputed = predict(m, full, c);
  EXPECT_GT(recomputed.stepSeconds, none.stepSeconds);
  EXPECT_GT(recomputed.breakdown.recompute, 0);
  EXPECT_LT(recomputed.memory.activations, none.memory.activations);
  // Recomputation is in the hardware FLOPs, not the model FLOPs.
  EXPECT_EQ(recomputed.modelFlops, none.modelFlops);
  EXPECT_GT(recomputed.hardwareFlops, none.hardwareFlops);
  // ZeRO-1 shards the optimizer state over dp.
  Candidate dp = base;
  dp.dp = 4;
  Candidate zero = dp;
  zero.zeroStage = 1;
  EXPECT_NEAR(predict(m, zero, c).memory.optimizer * 4,
              predict(m, dp, c).memory.optimizer, 1);
}

TEST(Search, OnlyWhatTheValidatorAcceptsAndEveryPlanFits) {
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  SearchOptions options;
  options.devices = 16;
  options.globalBatch = 64;
  SearchResult result = search(m, c, options, Fixed{},
                               [](const Candidate &p, bool &hard) {
                                 hard = false;
                                 return p.pp > 1 ? "no pipelines" : "";
                               });
  ASSERT_FALSE(result.ranked.empty());
  for (const Prediction &p : result.ranked) {
    EXPECT_EQ(p.plan.pp, 1);
    EXPECT_EQ(p.plan.devices(), 16);
    EXPECT_EQ(p.plan.globalBatch(), 64);
    EXPECT_TRUE(p.fits);
  }
  for (size_t i = 1; i < result.ranked.size(); ++i)
    EXPECT_LE(result.ranked[i - 1].stepSeconds, result.ranked[i].stepSeconds);
  EXPECT_GT(result.refused, 0);
}

// Optimizer offload's exposed time, by hand: 8 GB of moments per rank
// through a disk of 4 GB/s read and 2 GB/s write shared by two ranks (2
// and 1 GB/s each): 4 s of reads and 8 s of writes, one after the other.
// Slices of 4096000 bytes per moment (buffer_bytes 49152000 / 12), 8192000
// of both. The updates (5 s) move into the backward (a 3 s window) but the
// embedding's, a quarter of the bytes, which stays at the end: 9 s of I/O
// under 3 + 3.75 s leave 2.25 s, which add to the embedding's 3 s of I/O
// under its 1.25 s update: 4 s exposed.
TEST(CostModel, OffloadExposesWhatTheBackwardAndUpdatesDoNotHide) {
  Cluster node = *getProfile("a100-80gb-dgx");
  node.diskReadBandwidth = 4e9;
  node.diskWriteBandwidth = 2e9;
  int64_t buffer = 12 * 4096 * 1000;
  EXPECT_NEAR(offloadSeconds("nvme", 8e9, buffer, 5, 3, 0.25, node, node, 2),
              4.0, 1e-9);
  // A 20 s window hides the rest: the embedding's 3 s less its update.
  EXPECT_NEAR(offloadSeconds("nvme", 8e9, buffer, 5, 20, 0.25, node, node, 2),
              1.75, 1e-9);
  // Nothing at the end: only the last slice's write-back (8.192 ms).
  EXPECT_NEAR(offloadSeconds("nvme", 8e9, buffer, 5, 20, 0, node, node, 2),
              8.192e6 / 1e9, 1e-12);
  // The host link (25 GB/s each way, both ways at once): 0.32 s, of which
  // a 0.25 s update hides 0.25 s and a 0.5 s update all but the ends.
  EXPECT_NEAR(offloadSeconds("host", 8e9, buffer, 0.25, 0, 0, node, node, 8),
              8e9 / 25e9 - 0.25, 1e-12);
  EXPECT_NEAR(offloadSeconds("host", 8e9, buffer, 0.5, 0, 0, node, node, 8),
              2 * 8.192e6 / 25e9, 1e-12);
  // cpu-local's host tier: memcpys on the rank, nothing overlaps.
  Cluster cpu = *getProfile("cpu-local");
  EXPECT_NEAR(offloadSeconds("host", 1e9, buffer, 10, 1, 0.5, cpu, cpu, 1),
              2 * 1e9 / cpu.hostLinkBandwidth, 1e-12);
  EXPECT_EQ(offloadSeconds("none", 8e9, buffer, 5, 0, 0, node, node, 2), 0);
}

// The whole prediction: the moments (8 B per parameter of the rank's
// shard, ZeRO's share under ZeRO) leave the device's memory for the
// staging buffers, the exposed transfers join the step as `offload`.
TEST(CostModel, OffloadMovesTheMomentsAndCostsTheirTransfers) {
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  Candidate plain;
  plain.dp = 4;
  plain.zeroStage = 1;
  Candidate nvme = plain;
  nvme.offload = "nvme";
  Prediction a = predict(m, plain, c), b = predict(m, nvme, c);
  // (The optimizer's count leaves out a bias or two: within 1e-4.)
  EXPECT_NEAR(b.offloadedBytes, 8.0 * double(m.parameters()) / 4,
              1e-4 * b.offloadedBytes);
  EXPECT_NEAR(a.memory.optimizer, b.offloadedBytes, 1e-6 * b.offloadedBytes);
  EXPECT_LE(b.memory.optimizer, double(nvme.offloadBufferBytes) + 6 * 4096);
  EXPECT_GT(b.breakdown.offload, 0);
  EXPECT_NEAR(b.stepSeconds, a.stepSeconds + b.breakdown.offload,
              1e-9 * a.stepSeconds);
  EXPECT_EQ(a.breakdown.offload, 0);
  EXPECT_NE(
      nvme.planJson().find(R"("offload": {"optimizer": "nvme", "path": "."})"),
      std::string::npos);
  EXPECT_NE(nvme.label().find("off-nvme"), std::string::npos);
}

// ZeRO-3's shards read for the all-gathers, by hand (Offload.cpp's
// simulation): a disk reading 1 GB/s, a budget so large that every read
// starts at the first pack. The embedding's 0.2 s and the first two
// layers' 0.1 s each are read before anything computes: 0.4 s exposed;
// the backward's head (0.2 s) and layers are read under the forward's
// tail (two layers and the head, 0.7 s) and hide.
TEST(CostModel, ParameterOffloadExposesTheFirstPacksReads) {
  Cluster node = *getProfile("a100-80gb-dgx");
  node.diskReadBandwidth = 1e9;
  node.diskWriteBandwidth = 1e9;
  ParameterGathers g;
  g.embeddingBytes = 2e8;
  g.layerBytes = 1e8;
  g.headBytes = 2e8;
  g.layers = 2;
  g.layerForward = 0.3;
  g.layerBackward = 0.6;
  g.headForward = 0.1;
  g.headBackward = 0.2;
  int64_t huge = int64_t(12) << 30;
  GatherReads r = parameterGatherSeconds("nvme", g, huge, node, node, 1);
  EXPECT_NEAR(r.exposed, 0.4, 1e-9);
  EXPECT_NEAR(r.bytes, 8e8, 1e-3);
  EXPECT_NEAR(r.seconds, 0.8, 1e-9);
  EXPECT_NEAR(r.backwardSeconds, 0.4, 1e-9);
  // Each micro-batch reads them again.
  g.microbatches = 3;
  EXPECT_NEAR(parameterGatherSeconds("nvme", g, huge, node, node, 1).exposed,
              1.2, 1e-9);
  // Nothing to hide behind: every read is waited for (0.8 s a
  // micro-batch); two ranks share the disk: twice that.
  g.microbatches = 1;
  g.layerForward = g.layerBackward = g.headForward = g.headBackward = 0;
  EXPECT_NEAR(parameterGatherSeconds("nvme", g, huge, node, node, 1).exposed,
              0.8, 1e-9);
  EXPECT_NEAR(parameterGatherSeconds("nvme", g, huge, node, node, 2).exposed,
              1.6, 1e-9);
  // A small budget reads less far ahead: with compute, more is exposed
  // than with the huge budget, never less than the first pack's read.
  g.layerForward = 0.3;
  g.layerBackward = 0.6;
  g.headForward = 0.1;
  g.headBackward = 0.2;
  int64_t small = 6 * 4096 * 1000; // slices of 4.096 MB, 12.288 MB ahead
  double tight = parameterGatherSeconds("nvme", g, small, node, node, 1).exposed;
  EXPECT_GT(tight, 0.4);
  // ZeRO-3's collectives between packs widen the window: after each
  // other (CPU ranks) more than beside the compute (overlapping GPUs).
  g.layerGather = 0.2;
  g.layerBackwardComm = 0.4;
  g.embeddingGather = 0.1;
  double serial = parameterGatherSeconds("nvme", g, small, node, node, 1).exposed;
  g.overlapsCommunication = true;
  double beside = parameterGatherSeconds("nvme", g, small, node, node, 1).exposed;
  EXPECT_LT(serial, tight);
  EXPECT_LE(serial, beside + 1e-12);
  EXPECT_LE(beside, tight);
  g.layerGather = g.layerBackwardComm = g.embeddingGather = 0;
  g.overlapsCommunication = false;
  // cpu-local's host tier: memcpys on the rank, all of it exposed.
  Cluster cpu = *getProfile("cpu-local");
  GatherReads host = parameterGatherSeconds("host", g, huge, cpu, cpu, 1);
  EXPECT_NEAR(host.exposed, 8e8 / cpu.hostLinkBandwidth, 1e-12);
  EXPECT_EQ(parameterGatherSeconds("none", g, huge, node, node, 1).exposed, 0);
  // The compute beside the disk: hidden x s / (1 + s).
  node.diskComputeSlowdown = 0.5;
  EXPECT_NEAR(diskSlowdownSeconds(0.3, node), 0.1, 1e-12);
  node.diskComputeSlowdown = 0;
  EXPECT_EQ(diskSlowdownSeconds(0.3, node), 0);
}

// The whole prediction with ZeRO-3's shards offloaded: the fp32 shards
// leave the device's memory (with the moments there too, the one staging
// budget serves both), the step reads them for every all-gather and
// reads and writes them around the update; a disk that slows the
// kernels adds its share.
TEST(CostModel, ParameterOffloadMovesTheShardsAndCostsTheirReads) {
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  Candidate plain;
  plain.dp = 4;
  plain.zeroStage = 3;
  Candidate moments = plain;
  moments.offload = "nvme";
  Candidate both = moments;
  both.offloadParameters = "nvme";
  Candidate shards = plain;
  shards.offloadParameters = "nvme";
  Prediction a = predict(m, plain, c), b = predict(m, moments, c),
             d = predict(m, both, c), e = predict(m, shards, c);
  double shard = a.memory.parameters;
  EXPECT_NEAR(shard, 4.0 * double(m.parameters()) / 4, 1e-3 * shard);
  EXPECT_NEAR(d.offloadedParameterBytes, shard, 1e-9 * shard);
  EXPECT_EQ(d.memory.parameters, 0);
  EXPECT_EQ(d.memory.optimizer, b.memory.optimizer);
  EXPECT_LE(e.memory.parameters, double(shards.offloadBufferBytes) + 6 * 4096);
  EXPECT_EQ(e.memory.optimizer, a.memory.optimizer);
  // Read per step: the shard for the forward and backward gathers (the
  // head's shard again), then shard and moments for the update.
  double shardParams = d.offloadedBytes / 8;
  EXPECT_NEAR(d.offloadWriteBytes, 12 * shardParams, 1e-6);
  EXPECT_GT(d.offloadReadBytes, 12 * shardParams + 2 * 4 * shardParams * 0.99);
  EXPECT_GT(d.offloadGatherSeconds, 0);
  EXPECT_GT(d.breakdown.offload, b.breakdown.offload);
  EXPECT_NEAR(d.stepSeconds, a.stepSeconds + d.breakdown.offload,
              1e-9 * a.stepSeconds);
  EXPECT_EQ(a.offloadGatherSeconds, 0);
  EXPECT_EQ(b.offloadGatherSeconds, 0);
  EXPECT_NE(both.planJson().find(R"("offload": {"optimizer": "nvme", )"
                                 R"("parameters": "nvme", "path": "."})"),
            std::string::npos);
  EXPECT_NE(shards.planJson().find(
                R"("offload": {"parameters": "nvme", "path": "."})"),
            std::string::npos);
  EXPECT_NE(both.label().find("off-nvme offp-nvme"), std::string::npos);
  // A disk that slows the kernels by half: a third of its hidden time.
  Cluster slow = c;
  slow.diskComputeSlowdown = 0.5;
  Prediction f = predict(m, both, slow);
  EXPECT_GT(f.offloadSlowdownSeconds, 0);
  EXPECT_NEAR(f.breakdown.offload,
              d.breakdown.offload + f.offloadSlowdownSeconds, 1e-12);
  EXPECT_EQ(d.offloadSlowdownSeconds, 0);
}

// The search offloads a ZeRO-3 plan's shards only when offloading its
// moments does not make it fit: between the two plans' memory, the best
// plan is ZeRO-3 with both in the disk's tier; with more, the moments
// alone; `Fixed::offloadParameters` "none" forbids it.
TEST(Search, OffloadsZero3ShardsOnlyWhenTheMomentsAreNotEnough) {
  Cluster c = *getProfile("a100-80gb-dgx");
  c.hostMemoryBytes = 0; // the disk only
  ModelShape m = small();
  SearchOptions options;
  options.devices = 2;
  options.globalBatch = 2;
  Validate any = acceptAll();
  Fixed fixed = dp2Zero3();
  fixed.recompute = "full";
  fixed.precision = "fp32";
  Candidate plan;
  plan.dp = 2;
  plan.zeroStage = 3;
  plan.recompute = "full";
  plan.offload = "nvme";
  Candidate both = plan;
  both.offloadParameters = "nvme";
  double moments = predict(m, plan, c).memoryPerRank,
         shards = predict(m, both, c).memoryPerRank;
  ASSERT_LT(shards, moments);
  c.memoryBytes = (moments + shards) / 2;
  SearchResult tight = search(m, c, options, fixed, any);
  ASSERT_FALSE(tight.ranked.empty());
  ASSERT_TRUE(tight.ranked.front().fits);
  EXPECT_EQ(tight.ranked.front().plan.offload, "nvme");
  EXPECT_EQ(tight.ranked.front().plan.offloadParameters, "nvme");
  c.memoryBytes = moments * 1.01;
  SearchResult roomier = search(m, c, options, fixed, any);
  ASSERT_FALSE(roomier.ranked.empty());
  EXPECT_EQ(roomier.ranked.front().plan.offload, "nvme");
  EXPECT_EQ(roomier.ranked.front().plan.offloadParameters, "none");
  c.memoryBytes = (moments + shards) / 2;
  fixed.offloadParameters = "none";
  SearchResult forbid = search(m, c, options, fixed, any);
  EXPECT_TRUE(forbid.ranked.empty() || !forbid.ranked.front().fits);
}

// Where the closed form fits but the compiler's memory plan fits only
// with the shards offloaded too, the search asks the compiler for that.
TEST(Search, OffloadsZero3ShardsWhenOnlyTheCompiledMemoryNeedsIt) {
  Cluster c = *getProfile("a100-80gb-dgx");
  c.hostMemoryBytes = 0; // the disk only
  ModelShape m = small();
  SearchOptions options;
  options.devices = 2;
  options.globalBatch = 2;
  Validate any = acceptAll();
  Fixed fixed = dp2Zero3();
  MemoryOracle compiled = [&](const Candidate &p) -> std::optional<double> {
    return p.offloadParameters == "none" ? 2 * c.memoryBytes : 1e9;
  };
  SearchResult result = search(m, c, options, fixed, any, compiled);
  ASSERT_FALSE(result.ranked.empty());
  const Prediction &best = result.ranked.front();
  EXPECT_TRUE(best.fits);
  EXPECT_EQ(best.plan.offload, "nvme");
  EXPECT_EQ(best.plan.offloadParameters, "nvme");
  EXPECT_EQ(best.memorySource, "compiled");
  fixed.offloadParameters = "none";
  SearchResult none = search(m, c, options, fixed, any, compiled);
  EXPECT_TRUE(none.ranked.empty() || !none.ranked.front().fits);
}

// The search offloads a plan only when it does not fit otherwise: on one
// device of 1.8 GB the model's 135M parameters, gradients and moments (2.2
// GB) do not fit; with the moments in the host tier (faster than the
// disk) they do. With 80 GB nothing offloads; `Fixed::offload` forces a
// tier or forbids it.
TEST(Search, OffloadsOnlyWhatDoesNotFitOtherwise) {
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  SearchOptions options;
  options.devices = 1;
  options.globalBatch = 1;
  Validate any = acceptAll();
  SearchResult roomy = search(m, c, options, Fixed{}, any);
  ASSERT_FALSE(roomy.ranked.empty());
  for (const Prediction &p : roomy.ranked)
    EXPECT_EQ(p.plan.offload, "none") << p.plan.label();

  c.memoryBytes = 1.8e9;
  SearchResult tight = search(m, c, options, Fixed{}, any);
  ASSERT_FALSE(tight.ranked.empty());
  ASSERT_TRUE(tight.ranked.front().fits);
  EXPECT_EQ(tight.ranked.front().plan.offload, "host");
  Fixed forbid;
  forbid.offload = "none";
  SearchResult none = search(m, c, options, forbid, any);
  EXPECT_TRUE(none.ranked.empty() || !none.ranked.front().fits);
  // Without host memory of its own the node offloads to its disk.
  c.hostMemoryBytes = 0;
  SearchResult disk = search(m, c, options, Fixed{}, any);
  ASSERT_FALSE(disk.ranked.empty());
  EXPECT_EQ(disk.ranked.front().plan.offload, "nvme");
  EXPECT_GT(disk.ranked.front().breakdown.offload, 0);
}

// Where the closed form fits but the compiler's memory plan does not, the
// search asks the compiler again with the moments in a tier.
TEST(Search, OffloadsWhenOnlyTheCompiledMemoryDoesNotFit) {
  Cluster c = *getProfile("a100-80gb-dgx");
  ModelShape m = small();
  SearchOptions options;
  options.devices = 1;
  options.globalBatch = 1;
  Validate any = acceptAll();
  MemoryOracle compiled = [&](const Candidate &p) -> std::optional<double> {
    return p.offload == "none" ? 2 * c.memoryBytes : 1e9;
  };
  SearchResult result = search(m, c, options, Fixed{}, any, compiled);
  ASSERT_FALSE(result.ranked.empty());
  const Prediction &best = result.ranked.front();
  EXPECT_TRUE(best.fits);
  EXPECT_EQ(best.plan.offload, "host");
  EXPECT_EQ(best.memorySource, "compiled");
  EXPECT_EQ(best.memoryPerRank, 1e9);
  Fixed forbid;
  forbid.offload = "none";
  SearchResult none = search(m, c, options, forbid, any, compiled);
  EXPECT_TRUE(none.ranked.empty() || !none.ranked.front().fits);
}

// The cost model simulates long pipelines at 2p and 4p micro-batches and
// extends the step linearly (CostModel.cpp, simulatePipeline): that holds
// when every further micro-batch adds the same time, which this checks
// against full simulations, with unequal stages (a heavier last stage, as
// the LM head makes it) and a send latency.
TEST(CostModel, PipelineStepsGrowLinearlyInMicrobatches) {
  using namespace partition::pipeline;
  for (auto [name, v] : {std::pair<std::string, int>{"1f1b", 1},
                         {"gpipe", 1},
                         {"zero-bubble", 1},
                         {"interleaved-1f1b", 2}}) {
    const int p = 4;
    auto makespan = [&, name = name, v = v](int m) {
      ScheduleConfig config;
      config.kind = *parseScheduleKind(name);
      config.stages = p;
      config.microbatches = m;
      config.chunks = v;
      OrError<Schedule> schedule = generateSchedule(config);
      EXPECT_TRUE(bool(schedule)) << schedule.error();
      SimulationOptions options;
      options.cost = [&](int stage, const Action &a) {
        double scale = stage == p - 1 ? 1.5 : 1.0;
        switch (a.kind) {
        case ActionKind::Forward:
          return scale;
        case ActionKind::BackwardInput:
          return 1.2 * scale;
        case ActionKind::BackwardWeight:
          return name == "zero-bubble" ? 0.8 * scale : 0.0;
        }
        return 0.0;
      };
      options.p2pLatency = 0.05;
      OrError<Timeline> timeline = simulate(*schedule, options);
      EXPECT_TRUE(bool(timeline)) << timeline.error();
      return timeline->makespan;
    };
    double t8 = makespan(2 * p), t16 = makespan(4 * p), t64 = makespan(64);
    EXPECT_NEAR(t64, t16 + (64 - 4 * p) * (t16 - t8) / (2 * p), 1e-9 * t64)
        << name;
  }
}
