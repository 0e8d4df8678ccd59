//===- ExpertsTest.cpp - mixtures of experts in the cost model ------------===//
//
// planner/Experts.h on Mixtral-8x7B's shape (32 layers, hidden 4096, 32 / 8
// heads of 128, 8 experts of 14336, top-2, vocabulary 32000, dropless at a
// 4096-token sequence): the parameter counts (total and active), the FLOPs
// per token, the all-to-all's bytes and time, the expert state an EP-th
// per rank, the gradient reduction without the experts, and the degrees
// the search offers. Every number is worked out by hand in the comments.
//
//===----------------------------------------------------------------------===//

#include "planner/Collectives.h"
#include "planner/CostModel.h"
#include "planner/Experts.h"
#include "planner/LayerCost.h"

#include <gtest/gtest.h>

using namespace partition::planner;

namespace {

ModelShape mixtral() {
  ModelShape m;
  m.llama = true;
  m.layers = 32;
  m.hidden = 4096;
  m.heads = 32;
  m.kvHeads = 8;
  m.ffn = 14336;
  m.vocab = 32000;
  m.seqLen = 4096;
  m.experts = 8;
  m.topK = 2;
  m.moeEvery = 1;
  m.expertFfn = 14336;
  m.capacity = 4096; // dropless: C = S
  return m;
}

/// dp x tp on one pipeline stage, bf16, one sequence per micro-batch.
Candidate plan(int64_t dp, int64_t tp, int64_t ep) {
  Candidate p;
  p.dp = dp;
  p.tp = tp;
  p.ep = ep;
  p.precision = "bf16";
  return p;
}

Cluster h100() { return *getProfile("h100-sxm-dgx"); }

} // namespace

TEST(Experts, MixtralParameterCounts) {
  ModelShape m = mixtral();
  // A dense layer: q, k, v 4096 x (32 + 2 x 8) x 128 = 25,165,824; o
  // 16,777,216; SwiGLU 3 x 4096 x 14336 = 176,160,768; two norms 8,192:
  // 218,112,000.
  EXPECT_EQ(m.layerParameters(), 218112000);
  // A MoE block: router 8 x 4096 = 32,768, experts 8 x 176,160,768 =
  // 1,409,286,144: 1,409,318,912 in place of the dense 176,160,768.
  EXPECT_EQ(denseFfnParameters(m), 176160768);
  EXPECT_EQ(moeFfnParameters(m), 1409318912);
  EXPECT_EQ(expertWeights(m), 1409286144.0);
  // 32 layers of 1,451,270,144 = 46,440,644,608, embedding and untied
  // head 2 x 131,072,000, final norm 4,096: 46,702,792,704 (Mixtral's
  // published 46.7B).
  EXPECT_EQ(m.parameters(), 46702792704);
  EXPECT_EQ(m.meanLayerParameters(), 1451270144.0);
  EXPECT_EQ(m.meanLayerExpertParameters(), 1409286144.0);
  // Active: 6 of 8 experts skipped per layer, 32 x 6 x 176,160,768 =
  // 33,822,867,456 fewer: 12,879,925,248 (the published 12.9B).
  EXPECT_EQ(m.activeParameters(), 12879925248.0);
  // A dense model is untouched.
  ModelShape dense = mixtral();
  dense.experts = 0;
  EXPECT_EQ(dense.meanLayerParameters(), double(dense.layerParameters()));
  EXPECT_EQ(dense.meanLayerExpertParameters(), 0.0);
  EXPECT_EQ(dense.activeParameters(), double(dense.parameters()));
}

TEST(Experts, MixtralFlopsPerToken) {
  ModelShape m = mixtral();
  // Per layer the token's matmuls: q, k, v 25,165,824, o 16,777,216,
  // router 32,768, 2 experts 352,321,536: 394,297,344 weights, 2 FLOPs
  // each = 788,594,688; attention 4 x 4096 keys x 4096 = 67,108,864:
  // 855,703,552 per layer, x 32 = 27,382,513,664; LM head 2 x 4096 x
  // 32000 = 262,144,000: 27,644,657,664 forward FLOPs per token, 3 times
  // that with the backward.
  EXPECT_EQ(activeFfnMatmulParameters(m), 352354304.0);
  EXPECT_DOUBLE_EQ(modelFlopsPerStep(m, 1), 3 * 27644657664.0 * 4096);
  // Against the dense model of the same shape (one 14336 SwiGLU): the
  // top-2 MoE adds one expert's 2 x 176,160,768 and the router's 65,536
  // per layer.
  ModelShape dense = mixtral();
  dense.experts = 0;
  EXPECT_DOUBLE_EQ(modelFlopsPerStep(m, 1) - modelFlopsPerStep(dense, 1),
                   3.0 * 4096 * 32 * (2 * 176160768.0 + 65536));
}

TEST(Experts, BufferAndAllToAllBytes) {
  ModelShape m = mixtral();
  Candidate p = plan(8, 8, 8);
  // Dropless: C = S = 4096 rows per expert, 8 experts, one sequence:
  // 32,768 rows of 4096 bf16 = 268,435,456 bytes (256 MiB), 4 times the
  // rows top-2 fills (8,192).
  EXPECT_EQ(expertBufferRows(m, p), 32768.0);
  EXPECT_EQ(expertAllToAllBytes(m, p), 268435456.0);
  // The exchanges move the filled rows: 4096 tokens x top-2 = 8,192 rows,
  // 67,108,864 bytes.
  EXPECT_EQ(expertExchangeBytes(m, p), 67108864.0);
  p.precision = "fp32";
  EXPECT_EQ(expertAllToAllBytes(m, p), 536870912.0);
  EXPECT_EQ(expertExchangeBytes(m, p), 134217728.0);
  // With a capacity factor of 1.25: ceil(1.25 x 2 x 4096 / 8) = 1280 rows.
  m.capacity = 1280;
  EXPECT_EQ(expertBufferRows(m, plan(8, 8, 8)), 10240.0);
  // Top-2 of 8 at capacity factor 1.25 fills at most 8,192 of them.
  EXPECT_EQ(expertExchangeBytes(m, plan(8, 8, 8)), 8192.0 * 4096 * 2);
  // Below the filled rows (capacity factor 0.5): the capacity bounds them.
  m.capacity = 512;
  EXPECT_EQ(expertExchangeBytes(m, plan(8, 8, 8)), 4096.0 * 4096 * 2);
}

TEST(Experts, AllToAllFormula) {
  // 8 ranks, 268,435,456 bytes each: 7 pairwise steps of 33,554,432
  // bytes at 50 GB/s (0.67108864 ms) plus 10 us latency: 4.76762048 ms,
  // (N-1)/N of the buffer on the wire.
  Link inter{50e9, 10e-6};
  EXPECT_NEAR(allToAllTime(268435456.0, 8, inter), 7 * (10e-6 + 0.00067108864),
              1e-15);
  EXPECT_EQ(allToAllTime(268435456.0, 1, inter), 0.0);
}

TEST(Experts, AllToAllOnTheLinkTheGroupSpans) {
  ModelShape m = mixtral();
  Cluster c = h100();
  // tp 8 x dp 8: the 8 EP ranks are 8 apart, one per node: inter-node,
  // 50 GB/s and 10 us. 2 all-to-alls forward, 2 backward (as the compiler
  // emits them), each moving the 67,108,864 bytes of filled rows:
  // 7 x (10 us + 8,388,608 B / 50 GB/s) = 1.24440512 ms.
  ExpertLayerCost far = expertLayerCost(m, plan(8, 8, 8), c);
  double step = 7 * (10e-6 + 8388608.0 / 50e9);
  EXPECT_NEAR(far.forwardAllToAll, 2 * step, 1e-12);
  EXPECT_NEAR(far.backwardAllToAll, 2 * step, 1e-12);
  // dp 8 x tp 1 in one node: NVLink, 360 GB/s and 5 us:
  // 7 x (5 us + 8,388,608 / 360e9) = 0.19811 ms each.
  ExpertLayerCost near = expertLayerCost(m, plan(8, 1, 8), c);
  EXPECT_NEAR(near.forwardAllToAll, 2 * 7 * (5e-6 + 8388608.0 / 360e9),
              1e-12);
  // Without expert parallelism nothing is exchanged.
  ExpertLayerCost none = expertLayerCost(m, plan(8, 8, 1), c);
  EXPECT_EQ(none.forwardAllToAll, 0.0);
  EXPECT_EQ(none.backwardAllToAll, 0.0);
  // Balanced routing: a rank's compute is the same with and without EP
  // (8,192 filled rows on one expert or 1,024 on each of 8), up to the
  // GEMMs' tiles.
  EXPECT_NEAR(far.forwardCompute / none.forwardCompute, 1.0, 0.02);
  // The layer carries them as its expert-parallel terms.
  LayerCost layer = layerCost(m, plan(8, 8, 8), c);
  EXPECT_NEAR(layer.forwardExpert, 2 * step, 1e-12);
  EXPECT_EQ(layerCost(m, plan(8, 8, 1), c).forwardExpert, 0.0);
}

TEST(Experts, ExpertStateAnEpThPerRank) {
  ModelShape m = mixtral();
  Cluster c = h100();
  Candidate one = plan(8, 8, 1), eight = plan(8, 8, 8);
  one.recompute = eight.recompute = "full";
  Prediction p1 = predict(m, one, c), p8 = predict(m, eight, c);
  // Expert weights per tp rank: 32 x 1,409,286,144 / 8 = 5,637,144,576;
  // under ep 8 an eighth of them, 704,643,072. The rest per tp rank:
  // (32 x 41,984,000 + 262,144,000) / 8 = 200,704,000 (norms counted / tp,
  // as for dense models).
  double experts = 5637144576.0, dense = 200704000.0;
  EXPECT_DOUBLE_EQ(p1.memory.parameters, 4 * (dense + experts));
  EXPECT_DOUBLE_EQ(p8.memory.parameters, 4 * (dense + experts / 8));
  EXPECT_DOUBLE_EQ(p8.memory.optimizer, 8 * (dense + experts / 8));
  // ZeRO-1 shards the rest over dp 8 and leaves the experts' moments:
  // at ep = dp no other rank holds the same experts.
  eight.zeroStage = 1;
  Prediction z = predict(m, eight, c);
  EXPECT_DOUBLE_EQ(z.memory.optimizer, 8 * (dense / 8 + experts / 8));
  // ep 4 of dp 8: each expert's state sits on 2 ranks, the
  // expert-data-parallel group ZeRO shards it over (ZeRO-3: the weights
  // too).
  Candidate four = plan(8, 8, 4);
  four.recompute = "full";
  four.zeroStage = 3;
  Prediction z4 = predict(m, four, c);
  EXPECT_DOUBLE_EQ(z4.memory.optimizer, 8 * (dense / 8 + experts / 4 / 2));
  EXPECT_DOUBLE_EQ(z4.memory.parameters, 4 * (dense / 8 + experts / 4 / 2));
  // Without EP ZeRO-1 shards every moment, experts' too.
  one.zeroStage = 1;
  EXPECT_DOUBLE_EQ(predict(m, one, c).memory.optimizer,
                   8 * (dense + experts) / 8);
}

TEST(Experts, ExpertsReducedOverTheirOwnGroup) {
  ModelShape m = mixtral();
  Cluster c = h100();
  c.overlapsCommunication = false; // the whole reduction, exposed
  Candidate one = plan(8, 8, 1), eight = plan(8, 8, 8);
  // dp ranks 8 apart: across nodes. ep 8 reduces the 200,704,000 dense
  // parameters per rank (fp32), the experts nowhere (one rank holds
  // each); without EP the experts' 5,637,144,576 too.
  Link inter = groupLink(c, 8, 8);
  EXPECT_NEAR(predict(m, eight, c).breakdown.dataComm,
              allReduceTime(4 * 200704000.0, 8, inter), 1e-9);
  EXPECT_NEAR(predict(m, one, c).breakdown.dataComm,
              allReduceTime(4 * (200704000.0 + 5637144576.0), 8, inter), 1e-9);
  // ep 4 of dp 8: the experts' quarter, 1,409,286,144 per rank, reduced
  // over their group of 2 ranks, 4 x 8 apart, beside the dense ones.
  Candidate four = plan(8, 8, 4);
  EXPECT_NEAR(predict(m, four, c).breakdown.dataComm,
              allReduceTime(4 * 200704000.0, 8, inter) +
                  allReduceTime(4 * 5637144576.0 / 4, 2,
                                groupLink(c, 2, 4 * 8)),
              1e-9);
  // The all-to-alls are the expert-parallel term: 32 layers x 4 x
  // 1.24440512 ms = 159.3 ms per micro-batch; full recomputation replays
  // the forward's 2: 32 x 6 x 1.24440512 ms = 238.9 ms.
  EXPECT_NEAR(predict(m, eight, c).breakdown.expertComm,
              32 * 4 * 7 * (10e-6 + 8388608.0 / 50e9), 1e-9);
  eight.recompute = "full";
  EXPECT_NEAR(predict(m, eight, c).breakdown.expertComm,
              32 * 6 * 7 * (10e-6 + 8388608.0 / 50e9), 1e-9);
}

TEST(Experts, DegreesTheCompilerAccepts) {
  ModelShape m = mixtral();
  // Every degree dividing dp and the 8 experts.
  EXPECT_EQ(expertParallelDegrees(m, 8), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(expertParallelDegrees(m, 2), (std::vector<int64_t>{1, 2}));
  EXPECT_EQ(expertParallelDegrees(m, 16), (std::vector<int64_t>{1, 2, 4, 8}));
  EXPECT_EQ(expertParallelDegrees(m, 12), (std::vector<int64_t>{1, 2, 4}));
  EXPECT_EQ(expertParallelDegrees(m, 1), (std::vector<int64_t>{1}));
  m.experts = 0;
  EXPECT_EQ(expertParallelDegrees(m, 8), (std::vector<int64_t>{1}));
  // plan.json: moe.expert_parallel only when above 1.
  EXPECT_NE(plan(8, 8, 8).planJson().find("\"moe\": {\"expert_parallel\": 8}"),
            std::string::npos);
  EXPECT_EQ(plan(8, 8, 1).planJson().find("moe"), std::string::npos);
  EXPECT_EQ(plan(8, 8, 8).label(), "dp8 tp8 ep8 pp1 mb1x1 bf16");
}
