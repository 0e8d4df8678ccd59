//===- MegatronTest.cpp - the cost model against Megatron-LM's Table 1 ----===//
//
// Narayanan et al., "Efficient Large-Scale Language Model Training on GPU
// Clusters Using Megatron-LM" (SC21), Table 1 (../shared/reference/
// megatron-2021-table1.md): ten GPT models from 1.7B to 1T parameters on
// 32 to 3072 A100s. With each row's own configuration (tp, pp, dp, full
// recomputation, 16-bit; the micro-batch size, not in the table, and the
// interleaving depth are what the planner chooses) the a100-80gb-dgx
// profile must predict the published TFLOP/s per GPU within 10%; the
// planner's own choice for the same model, GPUs and batch must be
// predicted at least as fast, and fit.
//
//===----------------------------------------------------------------------===//

#include "planner/Search.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdio>

using namespace partition::planner;

namespace {

struct Row {
  double billions;
  int64_t heads, hidden, layers, tp, pp, gpus, batch;
  double tflops; // published, per GPU
};

const Row kTable1[] = {
    {1.7, 24, 2304, 24, 1, 1, 32, 512, 137},
    {3.6, 32, 3072, 30, 2, 1, 64, 512, 138},
    {7.5, 32, 4096, 36, 4, 1, 128, 512, 142},
    {18.4, 48, 6144, 40, 8, 1, 256, 1024, 135},
    {39.1, 64, 8192, 48, 8, 2, 512, 1536, 138},
    {76.1, 80, 10240, 60, 8, 4, 1024, 1792, 140},
    {145.6, 96, 12288, 80, 8, 8, 1536, 2304, 148},
    {310.1, 128, 16384, 96, 8, 16, 1920, 2160, 155},
    {529.6, 128, 20480, 105, 8, 35, 2520, 2520, 163},
    {1008.0, 160, 25600, 128, 8, 64, 3072, 3072, 163},
};

ModelShape gpt(const Row &row) {
  ModelShape m;
  m.layers = row.layers;
  m.hidden = row.hidden;
  m.heads = m.kvHeads = row.heads;
  m.ffn = 4 * row.hidden;
  m.vocab = 51200;
  m.seqLen = m.positions = 2048;
  return m;
}

/// What the plan.json reader refuses for any model (the library test has
/// no compiler): heads and layers must split.
std::string modelCheck(const ModelShape &m, const Candidate &c, bool &hard) {
  hard = true;
  if (m.heads % c.tp != 0)
    return "heads not divisible by tp";
  if (m.layers < c.pp)
    return "fewer layers than stages";
  hard = false;
  return "";
}

/// The row's own configuration: the mesh, full recomputation, 16-bit,
/// interleaved 1F1B where there is a pipeline, no SP, no ZeRO (2021).
Fixed paperPlan(const Row &row) {
  Fixed f;
  f.tp = row.tp;
  f.pp = row.pp;
  f.dp = row.gpus / (row.tp * row.pp);
  f.recompute = "full";
  f.precision = "bf16";
  f.sequenceParallel = false;
  f.zeroStage = 0;
  if (row.pp > 1)
    f.schedule = "interleaved-1f1b";
  // The reference: the paper's runs use micro-batches of 1 to 8.
  f.maxMicroBatch = 8;
  return f;
}

TEST(Megatron, Table1WithinTenPercent) {
  Cluster a100 = *getProfile("a100-80gb-dgx");
  for (const Row &row : kTable1) {
    ModelShape m = gpt(row);
    SearchOptions options;
    options.devices = row.gpus;
    options.globalBatch = row.batch;
    options.includeUncompilable = true;
    SearchResult result =
        search(m, a100, options, paperPlan(row),
               [&](const Candidate &c, bool &hard) {
                 return modelCheck(m, c, hard);
               });
    ASSERT_FALSE(result.ranked.empty()) << row.billions << "B";
    const Prediction &best = result.ranked.front();
    EXPECT_TRUE(best.fits) << row.billions << "B: " << best.plan.label();
    double error = best.tflopsPerGpu / row.tflops - 1;
    std::printf("%7.1fB  %-44s predicted %6.1f published %5.1f  %+5.1f%%\n",
                row.billions, best.plan.label().c_str(), best.tflopsPerGpu,
                row.tflops, 100 * error);
    const Breakdown &bd = best.breakdown;
    std::printf("          step %.3f s: compute %.3f recompute %.3f tp %.3f "
                "pp %.3f bubble %.3f dp %.3f optimizer %.3f; memory %.1f GiB\n",
                best.stepSeconds, bd.compute, bd.recompute, bd.tensorComm,
                bd.pipelineComm, bd.bubble, bd.dataComm, bd.optimizer,
                best.memoryPerRank / (1 << 30));
    EXPECT_LT(std::fabs(error), 0.10)
        << row.billions << "B: " << best.plan.label();
  }
}

} // namespace

namespace {

// The planner's own choice for each row's model, GPUs and batch, searching
// everything the cost model covers (pipeline, interleaving, ZeRO, SP,
// recompute), must fit and be predicted at least as fast as the paper's.
TEST(Megatron, PlannerChoiceAtLeastAsFast) {
  Cluster a100 = *getProfile("a100-80gb-dgx");
  for (const Row &row : kTable1) {
    ModelShape m = gpt(row);
    SearchOptions options;
    options.devices = row.gpus;
    options.globalBatch = row.batch;
    options.includeUncompilable = true;
    auto check = [&](const Candidate &c, bool &hard) {
      return modelCheck(m, c, hard);
    };
    SearchResult paper = search(m, a100, options, paperPlan(row), check);
    Fixed own;
    own.precision = "bf16";
    own.maxMicroBatch = 8;
    SearchResult ours = search(m, a100, options, own, check);
    ASSERT_FALSE(paper.ranked.empty());
    ASSERT_FALSE(ours.ranked.empty());
    const Prediction &best = ours.ranked.front();
    std::printf("%7.1fB  planner %-52s %6.1f TFLOP/s (paper's %6.1f)\n",
                row.billions, best.plan.label().c_str(), best.tflopsPerGpu,
                paper.ranked.front().tflopsPerGpu);
    EXPECT_TRUE(best.fits);
    EXPECT_LE(best.stepSeconds, paper.ranked.front().stepSeconds);
  }
}

} // namespace
