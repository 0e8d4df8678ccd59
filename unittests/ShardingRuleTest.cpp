//===- ShardingRuleTest.cpp - every op's sharding rule fits its types -----===//
//
// The partitioning passes trust the rules (dialects/Xfmr/XfmrSharding.cpp)
// to describe each op's operands and results exactly. For every op of the
// training and evaluation steps of the GPT-2 and Llama presets (micro-batches
// included), the rule must list every operand and result, one factor per
// dimension, each factor's size equal to the dimension it maps to, and name
// a mean's factors and scaled value correctly; also after
// --xfmr-explicit-positions (the positions operands of attention and the
// position embedding, xfmr.sequence_positions).
//
//===----------------------------------------------------------------------===//

#include "model/ModelBuilder.h"
#include "model/ModelConfig.h"
#include "passes/Passes.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace partition;
using namespace partition::model;
using namespace partition::xfmr;

namespace {

void checkDims(mlir::Operation *op, const ShardingRule &rule,
               mlir::Value value, llvm::ArrayRef<int> dims,
               const std::string &what) {
  auto type = mlir::cast<mlir::RankedTensorType>(value.getType());
  std::string name = op->getName().getStringRef().str() + " " + what;
  ASSERT_EQ(dims.size(), static_cast<size_t>(type.getRank())) << name;
  for (auto [dim, factor] : llvm::enumerate(dims)) {
    if (factor == ShardingRule::kNoFactor)
      continue;
    ASSERT_GE(factor, 0) << name;
    ASSERT_LT(static_cast<size_t>(factor), rule.getFactors().size()) << name;
    EXPECT_EQ(rule.getFactors()[factor].size, type.getDimSize(dim))
        << name << " dimension " << dim;
  }
}

/// A preset, and the chunks of --xfmr-explicit-positions (0: not run).
class PresetRules
    : public ::testing::TestWithParam<std::tuple<const char *, int64_t>> {};

TEST_P(PresetRules, EveryOpsRuleMatchesItsTypes) {
  mlir::MLIRContext context;
  ModelConfig config = *getPreset(std::get<0>(GetParam()));
  auto module = buildForwardModule(context, config);
  mlir::PassManager pm(&context);
  TrainStepPassOptions options;
  options.microbatches = 2;
  options.withEval = true;
  pm.addPass(createTrainStepPass(options));
  if (int64_t chunks = std::get<1>(GetParam())) {
    ExplicitPositionsPassOptions positions;
    positions.chunks = chunks;
    pm.addPass(createExplicitPositionsPass(positions));
  }
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));

  int checked = 0;
  module->walk([&](ShardingRuleOpInterface ruled) {
    mlir::Operation *op = ruled.getOperation();
    ShardingRule rule = ruled.getShardingRule();
    ASSERT_EQ(rule.getNumOperands(), op->getNumOperands())
        << op->getName().getStringRef().str();
    ASSERT_EQ(rule.getNumResults(), op->getNumResults())
        << op->getName().getStringRef().str();
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      checkDims(op, rule, op->getOperand(i), rule.getOperand(i),
                "operand #" + std::to_string(i));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      checkDims(op, rule, op->getResult(i), rule.getResult(i),
                "result #" + std::to_string(i));
    if (!rule.getMeanFactors().empty()) {
      auto scaled = rule.getMeanScaled();
      ASSERT_TRUE(scaled.has_value());
      mlir::Value value = scaled->isResult ? op->getResult(scaled->index)
                                           : op->getOperand(scaled->index);
      // Scaling a value the op is linear in: a scalar, here the loss or
      // its gradient seed.
      EXPECT_EQ(mlir::cast<mlir::RankedTensorType>(value.getType()).getRank(),
                0);
    }
    ++checked;
  });
  EXPECT_GT(checked, 50);
}

INSTANTIATE_TEST_SUITE_P(
    Presets, PresetRules,
    ::testing::Combine(::testing::Values("gpt2-tiny", "llama-tiny"),
                       ::testing::Values(int64_t(0), int64_t(4))));

/// Spot checks of what the rules say, beyond their shapes.
TEST(ShardingRules, LinearSumsOverItsInputFeatures) {
  mlir::MLIRContext context;
  auto module = buildForwardModule(context, *getPreset("gpt2-tiny"));
  bool found = false;
  module->walk([&](LinearOp linear) {
    ShardingRule rule = linear.getShardingRule();
    int k = rule.getOperand(1)[1]; // weight [n, k]
    int n = rule.getOperand(1)[0];
    int batch = rule.getOperand(0)[0];
    EXPECT_TRUE(rule.isSummedOver(k, 0));
    EXPECT_FALSE(rule.isSummedOver(n, 0));
    EXPECT_FALSE(rule.isSummedOver(batch, 0));
    EXPECT_FALSE(rule.getFactors()[batch].opaque);
    found = true;
  });
  EXPECT_TRUE(found);
}

/// With explicit positions the query sequence splits (its positions go
/// with it) and the key sequence stays whole: dK and dV sum over the
/// queries, which is how context parallelism reduces them.
TEST(ShardingRules, PositionedAttentionSplitsQueriesNotKeys) {
  mlir::MLIRContext context;
  auto module = buildForwardModule(context, *getPreset("llama-tiny"));
  mlir::PassManager pm(&context);
  pm.addPass(createTrainStepPass());
  ExplicitPositionsPassOptions positions;
  positions.chunks = 4;
  pm.addPass(createExplicitPositionsPass(positions));
  ASSERT_TRUE(mlir::succeeded(pm.run(*module)));
  int found = 0;
  module->walk([&](AttentionGradOp grad) {
    ASSERT_TRUE(grad.getQueryPositions());
    ShardingRule rule = grad.getShardingRule();
    int t = rule.getOperand(1)[1], s = rule.getOperand(2)[1];
    EXPECT_FALSE(rule.getFactors()[t].opaque);
    EXPECT_TRUE(rule.getFactors()[s].opaque);
    EXPECT_EQ(rule.getOperand(4)[0], t); // query_positions
    EXPECT_EQ(rule.getOperand(5)[0], s); // key_positions
    EXPECT_FALSE(rule.isSummedOver(t, 0));
    EXPECT_TRUE(rule.isSummedOver(t, 1));
    EXPECT_TRUE(rule.isSummedOver(t, 2));
    ++found;
  });
  EXPECT_GT(found, 0);
}

} // namespace
