//===- ContextParallelTest.cpp - context parallelism's cost terms ---------===//
//
// planner/ContextParallel.h: the K/V bytes gathered per layer with GQA, the
// causal share of the slowest rank with and without zigzag, each rank's
// compute and activations a cp-th, the gather on the cp group's link, the
// ring hidden behind its blocks, the gradient reduction over dp x cp, and
// the search trying cp only where it can pay.
//
//===----------------------------------------------------------------------===//

#include "planner/Collectives.h"
#include "planner/ContextParallel.h"
#include "planner/CostModel.h"
#include "planner/LayerCost.h"
#include "planner/Search.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace partition::planner;

namespace {

/// A Llama with GQA (32 query heads, 8 key-value heads of 128) at a long
/// sequence.
ModelShape longLlama(int64_t seqLen = 65536) {
  ModelShape m;
  m.llama = true;
  m.layers = 8;
  m.hidden = 4096;
  m.heads = 32;
  m.kvHeads = 8;
  m.ffn = 14336;
  m.vocab = 32000;
  m.seqLen = seqLen;
  return m;
}

Candidate plan(int64_t cp, int64_t tp = 1) {
  Candidate p;
  p.tp = tp;
  p.cp = cp;
  p.precision = "bf16";
  return p;
}

} // namespace

TEST(ContextParallel, GatheredKeysAndValuesPerLayerWithGqa) {
  ModelShape m = longLlama(131072);
  // 2 (K and V) x 8 kv heads x 128 x 131072 tokens x 2 bytes: 512 MiB for
  // the whole group; a tp rank gathers its heads only.
  EXPECT_EQ(kvGatherBytes(m, plan(16, 1)), 2.0 * 8 * 128 * 131072 * 2);
  EXPECT_EQ(kvGatherBytes(m, plan(16, 8)), 2.0 * 1 * 128 * 131072 * 2);
  // Fewer kv heads than tp ranks: each holds one (replicated).
  EXPECT_EQ(kvGatherBytes(m, plan(16, 16)), 2.0 * 1 * 128 * 131072 * 2);
  // A fourth of what the query heads would gather without GQA.
  ModelShape mha = m;
  mha.kvHeads = mha.heads;
  EXPECT_EQ(kvGatherBytes(mha, plan(4)), 4 * kvGatherBytes(m, plan(4)));
  EXPECT_EQ(kvGatherBytes(m, plan(1)), 0);
}

TEST(ContextParallel, ZigzagEvensTheCausalWork) {
  EXPECT_EQ(causalShare(1, "zigzag"), 1);
  EXPECT_EQ(causalShare(1, "none"), 1);
  for (int64_t cp : {2, 4, 16}) {
    EXPECT_DOUBLE_EQ(causalShare(cp, "zigzag"), 1.0 / double(cp));
    // Contiguous pieces: rank r does (2r + 1) / cp^2, which sums to 1;
    // the step waits for the last.
    double sum = 0;
    for (int64_t r = 0; r < cp; ++r)
      sum += double(2 * r + 1) / double(cp * cp);
    EXPECT_DOUBLE_EQ(sum, 1);
    EXPECT_DOUBLE_EQ(causalShare(cp, "none"),
                     double(2 * cp - 1) / double(cp * cp));
  }
}

TEST(ContextParallel, EachRankComputesACpthAndTheLastRankWaits) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = longLlama();
  LayerCost one = layerCost(m, plan(1), c);
  LayerCost four = layerCost(m, plan(4), c);
  // Attention (the square's work dominates at 64k): a fourth, with zigzag.
  EXPECT_NEAR(four.attentionForward / one.attentionForward, 0.25, 0.01);
  EXPECT_NEAR(four.attentionBackward / one.attentionBackward, 0.25, 0.01);
  // The weight gradients' GEMMs: a fourth of the rows.
  EXPECT_NEAR(four.backwardWeight / one.backwardWeight, 0.25, 0.01);
  // Without zigzag the last rank does 7/16 of the work instead of 4/16
  // (the kernel skips the masked blocks: half the square plus half a block
  // of rows per query).
  Candidate unbalanced = plan(4);
  unbalanced.cpLoadBalance = "none";
  LayerCost last = layerCost(m, unbalanced, c);
  double s = double(m.seqLen);
  double expected = (s / 2 * 7.0 / 4 + 32) / (s / 2 + 32);
  EXPECT_NEAR(last.attentionForward / four.attentionForward, expected, 0.01);
  // A kernel charged the whole square: the same ratio without the block.
  Cluster square = c;
  square.attentionSkipsMasked = false;
  EXPECT_NEAR(layerCost(m, unbalanced, square).attentionForward /
                  layerCost(m, plan(4), square).attentionForward,
              7.0 / 4, 0.01);
}

TEST(ContextParallel, AllGatherOnTheContextGroupsLink) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = longLlama();
  // cp 2 x tp 4 fits a node of 8: NVLink; cp 4 x tp 4 does not.
  for (auto [cp, inside] : {std::pair<int64_t, bool>{2, true}, {4, false}}) {
    Candidate p = plan(cp, 4);
    LayerCost l = layerCost(m, p, c);
    double bytes = kvGatherBytes(m, p);
    Link link = inside ? Link{c.intraNodeBandwidth, c.intraNodeLatency}
                       : Link{c.interNodeBandwidth, c.interNodeLatency};
    EXPECT_DOUBLE_EQ(l.forwardContext, allGatherTime(bytes, cp, link));
    // The backward gathers them again and reduce-scatters dK/dV.
    EXPECT_DOUBLE_EQ(l.backwardContext,
                     allGatherTime(bytes, cp, link) +
                         reduceScatterTime(bytes, cp, link));
    EXPECT_EQ(l.recomputeContext, 0);
  }
  // cp 1: nothing moves.
  LayerCost none = layerCost(m, plan(1, 4), c);
  EXPECT_EQ(none.forwardContext + none.backwardContext, 0);
}

TEST(ContextParallel, TheRingHidesWhatItsBlocksCover) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = longLlama();
  Candidate ring = plan(4, 2);
  ring.cpMethod = "ring";
  LayerCost r = layerCost(m, ring, c);
  LayerCost g = layerCost(m, plan(4, 2), c);
  // Same compute; at 64k tokens a block of attention outlasts a block's
  // transfer even between nodes: nothing exposed.
  EXPECT_DOUBLE_EQ(r.forwardCompute, g.forwardCompute);
  EXPECT_GT(g.forwardContext, 0);
  EXPECT_EQ(r.forwardContext, 0);
  EXPECT_EQ(r.backwardContext, 0);
  // On a slow link what a step's transfer takes beyond its block is
  // (cp 4 x tp 2 fits a node: NVLink's).
  Cluster slow = c;
  slow.intraNodeBandwidth = 1e8;
  LayerCost exposed = layerCost(m, ring, slow);
  double block = kvGatherBytes(m, ring) / 4;
  Link link{slow.intraNodeBandwidth, slow.intraNodeLatency};
  EXPECT_GT(exposed.forwardContext, 0);
  EXPECT_NEAR(exposed.forwardContext,
              3 * (sendTime(block, link) - exposed.attentionForward / 4),
              1e-12);
}

TEST(ContextParallel, ActivationsPerRankAreACpth) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = longLlama(32768);
  Candidate one = plan(1, 8), four = plan(4, 8);
  one.dp = 4; // the same 32 devices
  Prediction p1 = predict(m, one, c), p4 = predict(m, four, c);
  double transient = contextTransientBytes(m, four);
  EXPECT_EQ(transient, 2 * kvGatherBytes(m, four));
  EXPECT_NEAR((p4.memory.activations - transient) / p1.memory.activations,
              0.25, 1e-9);
  // Parameters are replicated over cp.
  EXPECT_EQ(p4.memory.parameters, p1.memory.parameters);
  // Model FLOPs are the step's, whatever splits it.
  EXPECT_EQ(p4.modelFlops, modelFlopsPerStep(m, 1));
  EXPECT_EQ(p1.modelFlops, modelFlopsPerStep(m, 4));
}

TEST(ContextParallel, GradientsReduceAndShardOverDpTimesCp) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = longLlama(32768);
  Candidate p = plan(4, 2);
  p.dp = 2;
  p.zeroStage = 1;
  Candidate wide = plan(1, 2);
  wide.dp = 8;
  wide.zeroStage = 1;
  // ZeRO shards the optimizer over the 8 ranks of dp x cp, as over dp 8.
  EXPECT_DOUBLE_EQ(predict(m, p, c).memory.optimizer,
                   predict(m, wide, c).memory.optimizer);
  EXPECT_DOUBLE_EQ(predict(m, p, c).breakdown.optimizer,
                   predict(m, wide, c).breakdown.optimizer);
}

TEST(ContextParallel, PlanJsonNamesCpOnlyAboveOne) {
  Candidate p = plan(1);
  EXPECT_EQ(p.planJson().find("\"cp\""), std::string::npos);
  EXPECT_EQ(p.planJson().find("context_parallel"), std::string::npos);
  EXPECT_EQ(p.label().find("cp"), std::string::npos);
  Candidate q = plan(16, 8);
  q.cpMethod = "ring";
  EXPECT_NE(q.planJson().find("\"pp\": 1, \"cp\": 16}"), std::string::npos);
  EXPECT_NE(q.planJson().find("\"context_parallel\": {\"method\": \"ring\", "
                              "\"load_balance\": \"zigzag\"}"),
            std::string::npos);
  EXPECT_EQ(q.label(), "dp1 tp8 cp16 ring pp1 mb1x1 bf16");
  EXPECT_EQ(q.devices(), 128);
}

TEST(ContextParallel, SearchedWhereItPaysOrWhereNothingFitsWithout) {
  Cluster c = *getProfile("h100-sxm-dgx");
  auto run = [&](const ModelShape &m, const Cluster &cluster, int64_t devices,
                 int64_t batch, const Fixed &fixed) {
    SearchOptions options;
    options.devices = devices;
    options.globalBatch = batch;
    // The reader's rule that bounds tp here: it splits the heads.
    return search(m, cluster, options, fixed,
                  [&](const Candidate &p, bool &hard) {
                    hard = m.heads % p.tp != 0;
                    return hard ? std::string("tp does not divide the heads")
                                : std::string();
                  });
  };
  // Short sequences: cp is not searched (the plans stay what they were).
  SearchResult s = run(longLlama(4096), c, 16, 32, Fixed{});
  ASSERT_FALSE(s.ranked.empty());
  for (const Prediction &p : s.ranked)
    EXPECT_EQ(p.plan.cp, 1);
  // Long ones: it is, and at 128k tokens on 16 GPUs it wins.
  SearchResult l = run(longLlama(131072), c, 16, 2, Fixed{});
  ASSERT_FALSE(l.ranked.empty());
  EXPECT_GT(l.ranked.front().plan.cp, 1);

  // Below the threshold cp is tried when nothing fits without it: a small
  // model (0.5M parameters, 2 heads, 2 layers: tp and pp split its
  // activations at most 2 ways each) at 16k tokens, on a device between the
  // least memory of a cp 1 plan and of a cp 8 one.
  ModelShape m = longLlama(16384);
  m.layers = 2;
  m.hidden = 128;
  m.heads = 2;
  m.kvHeads = 1;
  m.ffn = 512;
  m.vocab = 512;
  Cluster none = c;
  none.memoryBytes = 1;
  Fixed one, eight;
  one.cp = 1;
  eight.cp = 8;
  double least1 = run(m, none, 8, 8, one).leastUnfitMemory;
  double least8 = run(m, none, 8, 8, eight).leastUnfitMemory;
  ASSERT_LT(least8, least1);
  Cluster tight = c;
  tight.memoryBytes = (least1 + least8) / 2;
  SearchResult fallback = run(m, tight, 8, 8, Fixed{});
  ASSERT_FALSE(fallback.ranked.empty());
  EXPECT_TRUE(fallback.ranked.front().fits);
  EXPECT_GT(fallback.ranked.front().plan.cp, 1);
  // cp fixed at 1 forbids it: nothing fits.
  SearchResult forbidden = run(m, tight, 8, 8, one);
  EXPECT_TRUE(forbidden.ranked.empty() || !forbidden.ranked.front().fits);
  // With room for cp 1 plans, the fallback is not taken.
  for (const Prediction &p : run(m, c, 8, 8, Fixed{}).ranked)
    EXPECT_EQ(p.plan.cp, 1);
}
