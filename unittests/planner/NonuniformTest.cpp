//===- NonuniformTest.cpp - per-part tensor-parallel degrees -------------===//
//
// The assignments searched (their validity is the plan.json reader's,
// asked through the Validate callback: tested here with a stand-in that
// refuses, and end to end in test/tools/partition-plan-nonuniform*.test), the
// resharding between parts (closed forms), and the cost model's terms for
// nonuniform plans: each layer costs what it costs at its own degree, the
// memory holds each part's weights at its degree, and a single part at the
// mesh's degree is the uniform plan exactly.
//
//===----------------------------------------------------------------------===//

#include "planner/Collectives.h"
#include "planner/CostModel.h"
#include "planner/Nonuniform.h"

#include <gtest/gtest.h>

using namespace partition::planner;

namespace {

ModelShape gpt(int64_t layers = 12) {
  ModelShape m;
  m.layers = layers;
  m.hidden = 1024;
  m.heads = m.kvHeads = 16;
  m.ffn = 4096;
  m.vocab = 32000;
  m.seqLen = m.positions = 1024;
  return m;
}

Candidate tp4(std::vector<TpPart> parts = {}) {
  Candidate c;
  c.tp = 4;
  c.microBatch = 2;
  c.precision = "bf16";
  c.perLayer = std::move(parts);
  return c;
}

} // namespace

TEST(Nonuniform, AssignmentsSearched) {
  // 3 layers on tp 2: (1|2), (2|1) at either cut, and 1-2-1, 2-1-2.
  auto all = perLayerAssignments(3, 2);
  EXPECT_EQ(all.size(), 6u);
  for (const auto &parts : all) {
    ASSERT_GE(parts.size(), 2u);
    EXPECT_EQ(parts.front().first, 0);
    EXPECT_EQ(parts.back().last, 2);
    for (size_t i = 1; i < parts.size(); ++i) {
      EXPECT_EQ(parts[i].first, parts[i - 1].last + 1);
      EXPECT_NE(parts[i].tp, parts[i - 1].tp);
    }
  }
  EXPECT_TRUE(perLayerAssignments(12, 1).empty());
  // Past 32 layers the cuts fall every ceil(layers / 32) layers.
  for (const auto &parts : perLayerAssignments(96, 2))
    for (const TpPart &part : parts)
      EXPECT_EQ(part.first % 3, 0);
}

TEST(Nonuniform, ReshardingClosedForms) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = gpt();
  Candidate p = tp4();
  // Without SP the activation between layers is whole on every rank.
  Reshard none = boundaryReshard(m, p, 4, 2, c);
  EXPECT_EQ(none.forward, 0);
  EXPECT_EQ(none.backward, 0);
  p.sequenceParallel = true;
  double activation = 2.0 * 1024 * 1024 * 2; // b s h, bf16
  // 4 -> 2: gather the two halves of each new slice (output activation/2)
  // from ranks 2 apart; the backward slices.
  Reshard down = boundaryReshard(m, p, 4, 2, c);
  EXPECT_DOUBLE_EQ(down.forward,
                   allGatherTime(activation / 2, 2, groupLink(c, 2, 2)));
  EXPECT_EQ(down.backward, 0);
  // 2 -> 4: slice forward, gather in the backward.
  Reshard up = boundaryReshard(m, p, 2, 4, c);
  EXPECT_EQ(up.forward, 0);
  EXPECT_DOUBLE_EQ(up.backward, down.forward);
  // 4 -> 1: the whole activation from all four.
  EXPECT_DOUBLE_EQ(boundaryReshard(m, p, 4, 1, c).forward,
                   allGatherTime(activation, 4, groupLink(c, 4, 1)));
}

TEST(Nonuniform, OnePartAtTheMeshDegreeIsTheUniformPlan) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = gpt();
  for (bool sp : {false, true})
    for (int64_t pp : {1, 2}) {
      Candidate uniform = tp4();
      uniform.sequenceParallel = sp;
      uniform.pp = pp;
      uniform.dp = 2;
      uniform.microbatches = 4;
      Candidate one = uniform;
      one.perLayer = {{0, 11, 4}};
      Prediction a = predict(m, uniform, c), b = predict(m, one, c);
      EXPECT_NEAR(b.stepSeconds, a.stepSeconds, 1e-12 * a.stepSeconds);
      EXPECT_NEAR(b.memoryPerRank, a.memoryPerRank, 1e-6 * a.memoryPerRank);
      EXPECT_NEAR(b.breakdown.tensorComm, a.breakdown.tensorComm,
                  1e-9 * a.stepSeconds);
    }
}

TEST(Nonuniform, EachLayerCostsWhatItCostsAtItsDegree) {
  // One micro-batch, no pipeline, no data parallelism, no SP: the step is
  // the sum of its layers plus the ends and the optimizer, so moving one
  // more layer from tp 4 to tp 2 adds the same amount each time: the
  // layer's difference between the degrees (compute doubles, the
  // all-reduces run over two ranks) and its optimizer's (twice the
  // parameters).
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = gpt();
  auto step = [&](int64_t k) {
    return predict(m, tp4({{0, k - 1, 2}, {k, 11, 4}}), c).stepSeconds;
  };
  double slope = step(2) - step(1);
  for (int64_t k = 2; k < 11; ++k)
    EXPECT_NEAR(step(k + 1) - step(k), slope, 1e-9 * step(k));
  // On fast NVLink the compute dominates: a lower degree is slower ...
  EXPECT_GT(slope, 0);
  // ... on a slow link the all-reduces dominate: it is faster.
  Cluster slow = c;
  slow.intraNodeBandwidth = 2e9;
  EXPECT_LT(predict(m, tp4({{0, 5, 2}, {6, 11, 4}}), slow).stepSeconds,
            predict(m, tp4(), slow).stepSeconds);
}

TEST(Nonuniform, MemoryHoldsEachPartAtItsDegree) {
  Cluster c = *getProfile("h100-sxm-dgx");
  ModelShape m = gpt();
  Prediction p = predict(m, tp4({{0, 5, 4}, {6, 11, 2}}), c);
  double layer = double(m.layerParameters());
  double params = 6 * layer / 4 + 6 * layer / 2 +
                  double(m.vocab * m.hidden) / 4 +
                  double(m.positions * m.hidden);
  EXPECT_DOUBLE_EQ(p.memory.parameters, 4 * params);
  EXPECT_DOUBLE_EQ(p.memory.optimizer, 8 * params);
  // Activations: layers at tp 2 save twice the sharded part of a layer.
  Prediction uniform = predict(m, tp4(), c);
  EXPECT_GT(p.memory.activations, uniform.memory.activations);
}

TEST(Nonuniform, PlanJsonIsTheCompilersFormat) {
  Candidate p = tp4({{0, 5, 4}, {6, 11, 2}});
  EXPECT_NE(p.planJson().find(
                "\"tensor_parallel\": {\"per_layer\": [{\"layers\": \"0-5\", "
                "\"tp\": 4}, {\"layers\": \"6-11\", \"tp\": 2}], "
                "\"sequence_parallel\": false}"),
            std::string::npos)
      << p.planJson();
  Candidate single = tp4({{0, 0, 4}, {1, 11, 2}});
  EXPECT_NE(single.planJson().find("{\"layers\": \"0\", \"tp\": 4}"),
            std::string::npos);
  EXPECT_EQ(p.label(), "dp1 tp4[0-5:4,6-11:2] pp1 mb2x1 bf16");
}

TEST(Nonuniform, SearchFindsTheSlowLinkWinAndNothingOnNVLink) {
  ModelShape m = gpt();
  Candidate base = tp4();
  Cluster fast = *getProfile("h100-sxm-dgx");
  NonuniformResult onFast = searchNonuniform(m, fast, {base}, 3, nullptr);
  ASSERT_FALSE(onFast.ranked.empty());
  EXPECT_GT(onFast.ranked.front().stepSeconds,
            predict(m, base, fast).stepSeconds);
  Cluster slow = fast;
  slow.intraNodeBandwidth = 2e9;
  NonuniformResult onSlow = searchNonuniform(m, slow, {base}, 3, nullptr);
  ASSERT_FALSE(onSlow.ranked.empty());
  EXPECT_LT(onSlow.ranked.front().stepSeconds,
            predict(m, base, slow).stepSeconds);
  for (const Prediction &p : onSlow.ranked) {
    EXPECT_EQ(p.memorySource, "closed-form");
    EXPECT_TRUE(p.fits);
  }
  // A memory that holds tp 4 but not every layer at tp 1: what is chosen
  // still fits.
  slow.memoryBytes = predict(m, base, slow).memoryPerRank * 1.2;
  for (const Prediction &p :
       searchNonuniform(m, slow, {base}, 3, nullptr).ranked)
    EXPECT_LE(p.memoryPerRank, slow.memoryBytes);
}

TEST(Nonuniform, SearchAsksTheValidatorAndTheMemoryOracle) {
  ModelShape m = gpt();
  Candidate base = tp4();
  Cluster slow = *getProfile("h100-sxm-dgx");
  slow.intraNodeBandwidth = 2e9;
  NonuniformResult all = searchNonuniform(m, slow, {base}, 3, nullptr);
  ASSERT_FALSE(all.ranked.empty());
  EXPECT_EQ(all.refused, 0);
  // A validator that refuses every plan with a layer at tp 1 (hard): none
  // is predicted, each is counted, the first reason kept.
  auto noTp1 = [](const Candidate &c, bool &hard) -> std::string {
    hard = true;
    for (const TpPart &part : c.perLayer)
      if (part.tp == 1)
        return "no tp 1 here";
    return "";
  };
  NonuniformResult asked = searchNonuniform(m, slow, {base}, 3, noTp1);
  EXPECT_GT(asked.refused, 0);
  EXPECT_EQ(asked.firstRefusal, "no tp 1 here");
  EXPECT_EQ(asked.evaluated + asked.refused, all.evaluated);
  ASSERT_FALSE(asked.ranked.empty());
  for (const Prediction &p : asked.ranked)
    for (const TpPart &part : p.plan.perLayer)
      EXPECT_NE(part.tp, 1);
  // A soft refusal (a pass missing) is kept, marked, when asked to.
  auto soft = [](const Candidate &, bool &hard) -> std::string {
    hard = false;
    return "not yet";
  };
  EXPECT_TRUE(searchNonuniform(m, slow, {base}, 3, soft).ranked.empty());
  NonuniformResult kept = searchNonuniform(m, slow, {base}, 3, soft, nullptr,
                                           /*includeUncompilable=*/true);
  ASSERT_FALSE(kept.ranked.empty());
  EXPECT_EQ(kept.ranked.front().notCompilable, "not yet");
  // The oracle's figure replaces the closed form for plans that compile...
  auto half = [&](const Candidate &c) -> std::optional<double> {
    return predict(m, c, slow).memoryPerRank / 2;
  };
  NonuniformResult compiled =
      searchNonuniform(m, slow, {base}, 3, nullptr, half);
  ASSERT_FALSE(compiled.ranked.empty());
  for (const Prediction &p : compiled.ranked) {
    EXPECT_EQ(p.memorySource, "compiled");
    EXPECT_DOUBLE_EQ(p.memoryPerRank,
                     predict(m, p.plan, slow).memoryPerRank / 2);
  }
  // ... not for those marked as not compiling ...
  for (const Prediction &p :
       searchNonuniform(m, slow, {base}, 3, soft, half, true).ranked)
    EXPECT_EQ(p.memorySource, "closed-form");
  // ... and a plan it says does not fit is dropped and counted.
  auto huge = [](const Candidate &) -> std::optional<double> { return 1e15; };
  NonuniformResult none = searchNonuniform(m, slow, {base}, 3, nullptr, huge);
  EXPECT_TRUE(none.ranked.empty());
  EXPECT_GT(none.unfit, all.unfit);
}
