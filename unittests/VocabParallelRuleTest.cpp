//===- VocabParallelRuleTest.cpp - sharding rules of the vocab-parallel ops ===//
//
// The vocabulary-parallel ops appear in no preset's training step before
// the tensor-parallel pass runs, so PresetRules does not see them: here each
// is built on [B, T, C] = [2, 3, 4], Vl = 5, and its rule must list every
// operand and result with factors of the right sizes, keep b and t
// shardable, keep the local vocabulary whole, and name the mean of the two
// ops that divide by B*T.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"

#include <gtest/gtest.h>

using namespace mlir;
using namespace partition::xfmr;

namespace {

constexpr int64_t B = 2, T = 3, C = 4, Vl = 5;

class VocabParallelRules : public ::testing::Test {
protected:
  VocabParallelRules() : builder(&context) {
    context.loadDialect<XfmrDialect, func::FuncDialect>();
    module = ModuleOp::create(builder.getUnknownLoc());
    Type f32 = builder.getF32Type(), i32 = builder.getI32Type();
    tokens = RankedTensorType::get({B, T}, i32);
    shard = RankedTensorType::get({}, i32);
    scalar = RankedTensorType::get({}, f32);
    table = RankedTensorType::get({Vl, C}, f32);
    activation = RankedTensorType::get({B, T, C}, f32);
    logits = RankedTensorType::get({B, T, Vl}, f32);
    perPosition = RankedTensorType::get({B, T}, f32);
    builder.setInsertionPointToEnd(module->getBody());
    auto function = func::FuncOp::create(
        builder, builder.getUnknownLoc(), "f",
        builder.getFunctionType({tokens, table, shard, activation, logits,
                                 perPosition, scalar},
                                {}));
    Block *body = function.addEntryBlock();
    builder.setInsertionPointToEnd(body);
    args = body->getArguments();
  }

  /// Checks the rule of `op` against its types as PresetRules does, and
  /// returns it.
  ShardingRule checkedRule(Operation *op) {
    ShardingRule rule = cast<ShardingRuleOpInterface>(op).getShardingRule();
    std::string name = op->getName().getStringRef().str();
    EXPECT_EQ(rule.getNumOperands(), op->getNumOperands()) << name;
    EXPECT_EQ(rule.getNumResults(), op->getNumResults()) << name;
    auto check = [&](Value value, ArrayRef<int> dims, const std::string &what) {
      auto type = cast<RankedTensorType>(value.getType());
      ASSERT_EQ(dims.size(), size_t(type.getRank())) << name << " " << what;
      for (auto [d, factor] : llvm::enumerate(dims)) {
        ASSERT_GE(factor, 0) << name << " " << what;
        EXPECT_EQ(rule.getFactors()[factor].size, type.getDimSize(d))
            << name << " " << what << " dimension " << d;
      }
    };
    for (unsigned i = 0; i < op->getNumOperands(); ++i)
      check(op->getOperand(i), rule.getOperand(i),
            "operand #" + std::to_string(i));
    for (unsigned i = 0; i < op->getNumResults(); ++i)
      check(op->getResult(i), rule.getResult(i),
            "result #" + std::to_string(i));
    EXPECT_TRUE(succeeded(verify(op))) << name;
    return rule;
  }

  bool opaque(const ShardingRule &rule, int factor) {
    return rule.getFactors()[factor].opaque;
  }

  MLIRContext context;
  OpBuilder builder;
  OwningOpRef<ModuleOp> module;
  RankedTensorType tokens, shard, scalar, table, activation, logits,
      perPosition;
  Block::BlockArgListType args;
  Value tokensArg() { return args[0]; }
  Value tableArg() { return args[1]; }
  Value shardArg() { return args[2]; }
  Value activationArg() { return args[3]; }
  Value logitsArg() { return args[4]; }
  Value perPositionArg() { return args[5]; }
  Value scalarArg() { return args[6]; }
};

TEST_F(VocabParallelRules, EmbeddingsShardTokensAndFeaturesNotTheVocabulary) {
  Location loc = builder.getUnknownLoc();
  auto lookup = VocabParallelEmbeddingOp::create(
      builder, loc, activation, tokensArg(), tableArg(), shardArg());
  ShardingRule rule = checkedRule(lookup);
  int b = rule.getOperand(0)[0], t = rule.getOperand(0)[1];
  int vl = rule.getOperand(1)[0], c = rule.getOperand(1)[1];
  EXPECT_FALSE(opaque(rule, b) || opaque(rule, t) || opaque(rule, c));
  EXPECT_TRUE(opaque(rule, vl));
  EXPECT_EQ(rule.getResult(0), ArrayRef<int>({b, t, c}));

  auto grad = VocabParallelEmbeddingGradOp::create(
      builder, loc, table, activationArg(), tokensArg(), shardArg());
  rule = checkedRule(grad);
  b = rule.getOperand(0)[0];
  t = rule.getOperand(0)[1];
  vl = rule.getResult(0)[0];
  EXPECT_TRUE(rule.isSummedOver(b, 0));
  EXPECT_TRUE(rule.isSummedOver(t, 0));
  EXPECT_TRUE(opaque(rule, vl));
  EXPECT_FALSE(opaque(rule, rule.getResult(0)[1]));
}

TEST_F(VocabParallelRules, LossStatisticsKeepTheVocabularyWhole) {
  Location loc = builder.getUnknownLoc();
  Operation *ops[] = {
      VocabParallelMaxOp::create(builder, loc, perPosition, logitsArg(),
                                 Value(), IntegerAttr()),
      VocabParallelTargetLogitOp::create(builder, loc, perPosition,
                                         logitsArg(), tokensArg(), shardArg()),
      VocabParallelSumExpOp::create(builder, loc, perPosition, logitsArg(),
                                    perPositionArg(), Value(), IntegerAttr()),
      // A padded vocabulary: the shard is one more whole operand.
      VocabParallelMaxOp::create(builder, loc, perPosition, logitsArg(),
                                 shardArg(), builder.getI64IntegerAttr(250)),
      VocabParallelSumExpOp::create(builder, loc, perPosition, logitsArg(),
                                    perPositionArg(), shardArg(),
                                    builder.getI64IntegerAttr(250))};
  for (Operation *op : ops) {
    ShardingRule rule = checkedRule(op);
    int b = rule.getOperand(0)[0], t = rule.getOperand(0)[1];
    int vl = rule.getOperand(0)[2];
    EXPECT_FALSE(opaque(rule, b) || opaque(rule, t))
        << op->getName().getStringRef().str();
    EXPECT_TRUE(opaque(rule, vl)) << op->getName().getStringRef().str();
    EXPECT_EQ(rule.getResult(0), ArrayRef<int>({b, t}));
    EXPECT_TRUE(rule.getMeanFactors().empty());
  }
}

TEST_F(VocabParallelRules, LossAndGradientAreMeansOverTheTokens) {
  Location loc = builder.getUnknownLoc();
  auto loss = VocabParallelLossOp::create(builder, loc, scalar,
                                          perPositionArg(), perPositionArg(),
                                          perPositionArg());
  ShardingRule rule = checkedRule(loss);
  int b = rule.getOperand(0)[0], t = rule.getOperand(0)[1];
  EXPECT_EQ(rule.getMeanFactors(), ArrayRef<int>({b, t}));
  ASSERT_TRUE(rule.getMeanScaled());
  EXPECT_TRUE(rule.getMeanScaled()->isResult);
  EXPECT_EQ(rule.getMeanScaled()->index, 0u);

  auto grad = VocabParallelCrossEntropyGradOp::create(
      builder, loc, logits, scalarArg(), logitsArg(), tokensArg(), shardArg(),
      perPositionArg(), perPositionArg(), IntegerAttr());
  rule = checkedRule(grad);
  b = rule.getOperand(1)[0];
  t = rule.getOperand(1)[1];
  EXPECT_TRUE(opaque(rule, rule.getOperand(1)[2]));
  EXPECT_EQ(rule.getMeanFactors(), ArrayRef<int>({b, t}));
  ASSERT_TRUE(rule.getMeanScaled());
  EXPECT_FALSE(rule.getMeanScaled()->isResult);
  EXPECT_EQ(rule.getMeanScaled()->index, 0u);
}

} // namespace
