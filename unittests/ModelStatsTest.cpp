//===- ModelStatsTest.cpp - counts of every preset against closed forms ---===//
//
// The IR-derived parameter and FLOP counts (passes/analysis/ModelStats) must
// equal the textbook formulas, for the forward function and for the training
// step that --xfmr-train-step builds from it (whose backward ops are counted
// one by one, so this also checks that autodiff emitted every backward
// matmul).
//
//===----------------------------------------------------------------------===//

#include "model/ModelBuilder.h"
#include "model/ModelConfig.h"
#include "passes/analysis/ModelStats.h"
#include "passes/Passes.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace partition;
using namespace partition::model;

namespace {

struct ClosedForm {
  int64_t parameters;
  /// Parameters that take part in a matmul (all linear weights, LM head).
  int64_t matmulParameters;
};

ClosedForm closedForm(const ModelConfig &c) {
  const int64_t C = c.hidden, F = c.ffn, V = c.vocab, L = c.layers;
  const int64_t qWidth = c.heads * c.headDim();
  const int64_t kvWidth = c.kvHeads * c.headDim();
  if (c.arch == Arch::GPT2) {
    int64_t perLayer = 2 * C                 // ln_1
                       + 3 * (C * C + C)     // q, k, v with biases
                       + (C * C + C)         // attention output projection
                       + 2 * C               // ln_2
                       + (C * F + F)         // c_fc
                       + (F * C + C);        // c_proj
    int64_t params = V * C + c.positions * C + L * perLayer + 2 * C;
    return {params, L * (4 * C * C + 2 * C * F) + V * C};
  }
  int64_t attention = C * qWidth + 2 * C * kvWidth + qWidth * C;
  int64_t biases = (c.qkvBias ? qWidth + 2 * kvWidth : 0) +
                   (c.outputBias ? C : 0);
  // A MoE layer's block: the router (E x C) and E experts of three C x Fe
  // matrices (plus the shared ones); a token multiplies the router and
  // its k experts' matrices (dropless: every choice is computed).
  const int64_t moeLayers = c.moeLayers(), denseLayers = L - moeLayers;
  const int64_t Fe = c.expertWidth();
  int64_t moeParams = c.experts * C +
                      (c.experts + c.sharedExperts) * 3 * C * Fe;
  int64_t moeActive = c.experts * C + (c.topK + c.sharedExperts) * 3 * C * Fe;
  int64_t perLayer = C + attention + biases + C;
  // A tied head is the embedding: one V x C table, used twice.
  int64_t params = V * C + L * perLayer + denseLayers * 3 * C * F +
                   moeLayers * moeParams + C + (c.tieEmbedding ? 0 : V * C);
  return {params, L * attention + denseLayers * 3 * C * F +
                      moeLayers * moeActive + V * C};
}

/// 6 N_matmul + 12 L C T per token: the Megatron-LM / PaLM convention.
int64_t flopsPerToken(const ModelConfig &c) {
  return 6 * closedForm(c).matmulParameters +
         12 * c.layers * c.heads * c.headDim() * c.seqLen;
}

ModelStats statsOf(mlir::ModuleOp module) {
  auto functions = module.getOps<mlir::func::FuncOp>();
  EXPECT_EQ(std::distance(functions.begin(), functions.end()), 1);
  mlir::FailureOr<ModelStats> stats = computeModelStats(*functions.begin());
  EXPECT_TRUE(mlir::succeeded(stats));
  return *stats;
}

void buildTrainStep(mlir::ModuleOp module, int64_t microbatches) {
  mlir::PassManager pm(module.getContext());
  TrainStepPassOptions options;
  options.microbatches = microbatches;
  pm.addPass(createTrainStepPass(options));
  ASSERT_TRUE(mlir::succeeded(pm.run(module)));
  ASSERT_TRUE(mlir::succeeded(mlir::verify(module)));
}

class PresetStats : public ::testing::TestWithParam<std::string> {};

TEST_P(PresetStats, ForwardAndTrainStepMatchClosedForms) {
  ModelConfig config = *getPreset(GetParam());
  mlir::MLIRContext context;
  auto module = buildForwardModule(context, config);
  ASSERT_TRUE(mlir::succeeded(mlir::verify(*module)));

  const int64_t tokens = config.batch * config.seqLen;
  ModelStats forward = statsOf(*module);
  EXPECT_EQ(forward.parameters, closedForm(config).parameters);
  EXPECT_EQ(forward.tokensPerStep, tokens);
  EXPECT_EQ(forward.flopsPerStep, tokens * flopsPerToken(config));

  buildTrainStep(*module, /*microbatches=*/2);
  ModelStats step = statsOf(*module);
  EXPECT_EQ(step.parameters, forward.parameters);
  EXPECT_EQ(step.tokensPerStep, 2 * tokens);
  EXPECT_EQ(step.flopsPerStep, 2 * tokens * flopsPerToken(config));
}

INSTANTIATE_TEST_SUITE_P(AllPresets, PresetStats,
                         ::testing::ValuesIn(presetNames()),
                         [](const auto &info) {
                           std::string name = info.param;
                           for (char &ch : name)
                             if (!isalnum(static_cast<unsigned char>(ch)))
                               ch = '_';
                           return name;
                         });

TEST(ModelStats, GPT2SmallHasTheKnownParameterCount) {
  mlir::MLIRContext context;
  auto module = buildForwardModule(context, *getPreset("gpt2-124m"));
  EXPECT_EQ(statsOf(*module).parameters, 124439808);
}

TEST(ModelStats, Llama2SevenBHasTheKnownParameterCount) {
  mlir::MLIRContext context;
  auto module = buildForwardModule(context, *getPreset("llama-7b"));
  EXPECT_EQ(statsOf(*module).parameters, 6738415616);
}

TEST(ModelStats, Llama2SeventyBHasTheKnownParameterCount) {
  mlir::MLIRContext context;
  auto module = buildForwardModule(context, *getPreset("llama-70b"));
  EXPECT_EQ(statsOf(*module).parameters, 68976648192);
}

// Counts are checked: a model whose FLOPs overflow 64 bits is an error
// naming the op, not a wrapped-around count (issue 17).
TEST(ModelStats, FlopsOverflowIsAnError) {
  mlir::MLIRContext context;
  ModelConfig config = *getPreset("gpt2-tiny");
  config.hidden = 30000000;
  config.ffn = 4 * config.hidden;
  auto module = buildForwardModule(context, config);
  std::string message;
  mlir::ScopedDiagnosticHandler capture(&context, [&](mlir::Diagnostic &d) {
    message = d.str();
    return mlir::success();
  });
  auto functions = module->getOps<mlir::func::FuncOp>();
  EXPECT_TRUE(mlir::failed(computeModelStats(*functions.begin())));
  EXPECT_EQ(message, "'xfmr.linear' op makes the matmul FLOPs of the step "
                     "overflow 64 bits");
}

} // namespace
