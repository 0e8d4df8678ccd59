//===- ActivationMemoryTest.cpp - activations per layer vs Korthikanti ----===//
//
// Korthikanti et al. 2022 count the activations a GPT layer keeps for its
// backward pass, at 16 bits per element (s sequence, b batch, h hidden, a
// heads, t tensor-parallel degree):
//   no parallelism   sbh (34 + 5as/h)
//   TP               sbh (10 + 24/t + 5as/(ht))
//   TP + SP          sbh (34/t + 5as/(ht))
// Two of their terms are for what this compiler's kernels never store:
// the dropout masks (sbh bytes each after attention and after the MLP,
// split by t where the region is: 2/t with SP, 2 otherwise) and the
// attention scores, softmax and its dropout (5as^2b, over t with TP): the
// attention kernel recomputes them from Q, K and V in its backward, as
// FlashAttention does and as Korthikanti's selective recomputation keeps
// only. Everything else must match exactly, on GPT-3 shapes, from the
// partitioned IR (passes/analysis/ActivationMemory.h).
//
// With --dist-recompute: `full` keeps each layer's input, 2sbh (2sbh/t
// with SP: the sequence-split stream), Korthikanti's full recomputation;
// `selective` keeps the layer input, Q, K, V, the attention output, the
// attention projection's output and the MLP's first matmul output and
// recomputes the norms, GELU and the residual sum inside the layer:
// sbh(20) alone, sbh(4 + 16/t) with TP (the input and the all-reduced
// projection are whole on every rank), sbh(20/t) with TP + SP.
//
//===----------------------------------------------------------------------===//

#include "model/ModelBuilder.h"
#include "model/ModelConfig.h"
#include "passes/analysis/ActivationMemory.h"
#include "passes/Passes.h"
#include "passes/partition/ShardPasses.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"

#include "mlir/Pass/PassManager.h"

#include <gtest/gtest.h>

using namespace partition;
using namespace partition::model;

namespace {

struct Shape {
  int64_t s, b, h, a;
};

/// GPT-3 175B's layer shape (s 2048, h 12288, a 96), batch 1, two layers
/// (the IR does not grow with the sizes).
ModelConfig gpt3Like(const Shape &shape) {
  ModelConfig config = *getPreset("gpt2-tiny");
  config.layers = 2;
  config.hidden = shape.h;
  config.heads = shape.a;
  config.kvHeads = shape.a;
  config.ffn = 4 * shape.h;
  config.vocab = 512;
  config.seqLen = shape.s;
  config.positions = shape.s;
  config.batch = shape.b;
  return config;
}

/// The plan --dist-apply-plan would record: dp, pp, tp with their roles;
/// `tensorRole` false leaves tp without the tensor role.
dist::PlanAttr planFor(mlir::MLIRContext &context, bool sequenceParallel,
                       bool tensorRole) {
  using dist::AxisRole;
  llvm::SmallVector<dist::PlanAxisAttr> axes = {
      dist::PlanAxisAttr::get(&context, "dp", AxisRole::Data),
      dist::PlanAxisAttr::get(&context, "pp", AxisRole::Pipeline)};
  if (tensorRole)
    axes.push_back(dist::PlanAxisAttr::get(&context, "tp", AxisRole::Tensor));
  return dist::PlanAttr::get(
      &context, mlir::FlatSymbolRefAttr::get(&context, "mesh"), axes,
      sequenceParallel, "1f1b", 1, 0, dist::RecomputePolicy::None, 0,
      "fp32", /*vocabMultiple=*/128, /*layerTp=*/nullptr,
      /*embeddingTp=*/0, /*contextChunks=*/0, "all_gather",
      /*expertParallel=*/1);
}

std::map<int64_t, LayerMemory> analyze(const Shape &shape, int64_t tp,
                                       bool sequenceParallel,
                                       int64_t dp = 1,
                                       bool tensorRole = true,
                                       llvm::StringRef recompute = "none") {
  mlir::MLIRContext context;
  context.loadDialect<dist::DistDialect>();
  auto module = buildForwardModule(context, gpt3Like(shape));
  mlir::OpBuilder builder = mlir::OpBuilder::atBlockBegin(module->getBody());
  dist::MeshOp::create(builder, module->getLoc(), "mesh",
                       builder.getStrArrayAttr({"dp", "pp", "tp"}),
                       builder.getDenseI64ArrayAttr({dp, 1, tp}));
  (*module)->setAttr(dist::DistDialect::kPlanAttrName,
                     planFor(context, sequenceParallel, tensorRole));
  mlir::PassManager pm(&context);
  pm.addPass(createTrainStepPass());
  buildShardPasses(pm, ShardPassesOptions());
  RecomputePassOptions options;
  options.policy = recompute.str();
  pm.addPass(createRecomputePass(options));
  EXPECT_TRUE(mlir::succeeded(pm.run(*module)));
  mlir::func::FuncOp step;
  module->walk([&](mlir::func::FuncOp function) {
    if (function.getSymName() == "train_step")
      step = function;
  });
  return analyzeLayerMemory(step);
}

const Shape kGpt3{2048, 1, 12288, 96};

TEST(ActivationMemory, NoParallelism) {
  auto [s, b, h, a] = kGpt3;
  int64_t korthikanti = s * b * h * 34 + 5 * a * s * s * b;
  int64_t neverStored = 2 * s * b * h + 5 * a * s * s * b;
  auto layers = analyze(kGpt3, 1, false);
  ASSERT_EQ(layers.size(), 2u);
  for (auto &[layer, memory] : layers) {
    EXPECT_EQ(memory.activationBytes, korthikanti - neverStored) << layer;
    EXPECT_EQ(memory.tensorParallelBytes, 0) << layer;
  }
}

TEST(ActivationMemory, TensorParallel) {
  auto [s, b, h, a] = kGpt3;
  for (int64_t t : {2, 4, 8}) {
    int64_t korthikanti =
        s * b * h * 10 + s * b * h * 24 / t + 5 * a * s * s * b / t;
    int64_t neverStored = 2 * s * b * h + 5 * a * s * s * b / t;
    for (auto &[layer, memory] : analyze(kGpt3, t, false)) {
      EXPECT_EQ(memory.activationBytes, korthikanti - neverStored)
          << "t = " << t << ", layer " << layer;
      // Megatron: two all-reduces of [s, b, h] forward and two backward,
      // fp32 here: 4 x 2(t-1)/t x 4sbh bytes.
      EXPECT_EQ(memory.tensorParallelBytes, 4 * 2 * (t - 1) * 4 * s * b * h / t)
          << "t = " << t << ", layer " << layer;
    }
  }
}

TEST(ActivationMemory, TensorAndSequenceParallel) {
  auto [s, b, h, a] = kGpt3;
  for (int64_t t : {2, 4, 8}) {
    int64_t korthikanti = s * b * h * 34 / t + 5 * a * s * s * b / t;
    int64_t neverStored = 2 * s * b * h / t + 5 * a * s * s * b / t;
    auto layers = analyze(kGpt3, t, true);
    // Every layer, the first too: the position embedding adds the table
    // rows of each rank's positions, so the embedding output is
    // reduce-scattered along the sequence as in Megatron-LM.
    for (auto &[layer, memory] : layers)
      EXPECT_EQ(memory.activationBytes, korthikanti - neverStored)
          << "t = " << t << ", layer " << layer;
    // Megatron's SP traffic: forward two all-gathers and two
    // reduce-scatters of [s, b, h]; backward two reduce-scatters and four
    // all-gathers (the output gradients of the row-parallel linears, and
    // the split norm outputs again for the weight gradients): ten, each
    // (t-1)/t of 4sbh fp32 bytes; plus the all-reduce of the two norms'
    // weight and bias gradients (4h fp32), summed over the sequence blocks.
    int64_t expected = 10 * (t - 1) * 4 * s * b * h / t +
                       4 * 2 * (t - 1) * 4 * h / t;
    for (int64_t layer = 1; layer < static_cast<int64_t>(layers.size());
         ++layer)
      EXPECT_EQ(layers[layer].tensorParallelBytes, expected)
          << "t = " << t << ", layer " << layer;
  }
}

// The tensor-parallel axis is the one the plan gives the tensor role: a
// plan without one counts no tensor-parallel traffic.
TEST(ActivationMemory, TensorAxisFromThePlan) {
  for (auto &[layer, memory] :
       analyze(kGpt3, 2, false, /*dp=*/1, /*tensorRole=*/false))
    EXPECT_EQ(memory.tensorParallelBytes, 0) << "layer " << layer;
}

// With dp the batch halves per rank, and the gradient buckets (one
// all-reduce for many layers' gradients) must not blur which layer reads
// what.
TEST(ActivationMemory, DataTensorAndSequenceParallel) {
  Shape shape = kGpt3;
  shape.b = 2;
  auto [s, b, h, a] = shape;
  int64_t t = 2, dp = 2;
  int64_t local = s * (b / dp) * h;
  auto layers = analyze(shape, t, true, dp);
  ASSERT_EQ(layers.size(), 2u);
  EXPECT_EQ(layers[1].activationBytes, 32 * local / t);
  EXPECT_EQ(layers[1].tensorParallelBytes,
            10 * (t - 1) * 4 * local / t);
}

TEST(ActivationMemory, FullRecomputation) {
  auto [s, b, h, a] = kGpt3;
  for (int64_t t : {1, 2, 4, 8})
    for (bool sp : {false, true}) {
      if (sp && t == 1)
        continue;
      auto layers = analyze(kGpt3, t, sp, 1, true, "full");
      ASSERT_EQ(layers.size(), 2u);
      for (auto &[layer, memory] : layers)
        EXPECT_EQ(memory.activationBytes, 2 * s * b * h / (sp ? t : 1))
            << "t = " << t << (sp ? " + SP" : "") << ", layer " << layer;
    }
}

TEST(ActivationMemory, SelectiveRecomputation) {
  auto [s, b, h, a] = kGpt3;
  for (int64_t t : {1, 2, 4, 8})
    for (bool sp : {false, true}) {
      if (sp && t == 1)
        continue;
      int64_t expected = sp ? 20 * s * b * h / t
                            : 4 * s * b * h + 16 * s * b * h / t;
      auto layers = analyze(kGpt3, t, sp, 1, true, "selective");
      ASSERT_EQ(layers.size(), 2u);
      for (auto &[layer, memory] : layers)
        EXPECT_EQ(memory.activationBytes, expected)
            << "t = " << t << (sp ? " + SP" : "") << ", layer " << layer;
    }
}

} // namespace
