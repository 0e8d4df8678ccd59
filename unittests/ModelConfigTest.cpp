//===- ModelConfigTest.cpp - presets and configuration checks -------------===//

#include "model/ModelConfig.h"

#include <limits>

#include <gtest/gtest.h>

using namespace partition::model;

TEST(ModelConfig, EveryPresetIsValid) {
  ASSERT_EQ(presetNames().size(), 17u);
  for (const std::string &name : presetNames()) {
    std::optional<ModelConfig> config = getPreset(name);
    ASSERT_TRUE(config) << name;
    EXPECT_EQ(validate(*config), "") << name;
  }
}

TEST(ModelConfig, UnknownPresetAndArch) {
  EXPECT_FALSE(getPreset("gpt5"));
  EXPECT_FALSE(parseArch("bert"));
  EXPECT_EQ(parseArch("llama"), Arch::Llama);
}

TEST(ModelConfig, PresetShapes) {
  ModelConfig tiny = *getPreset("gpt2-tiny");
  EXPECT_EQ(tiny.layers, 2);
  EXPECT_EQ(tiny.hidden, 64);
  EXPECT_EQ(tiny.heads, 4);
  EXPECT_EQ(tiny.vocab, 256);
  EXPECT_EQ(tiny.seqLen, 64);
  EXPECT_EQ(tiny.batch, 4);
  EXPECT_TRUE(tiny.tiedEmbedding());
  ModelConfig big = *getPreset("llama-70b");
  EXPECT_EQ(big.kvHeads, 8);
  EXPECT_FALSE(big.tiedEmbedding());
}

TEST(ModelConfig, LlamaFeedForwardRule) {
  EXPECT_EQ(defaultFfn(Arch::Llama, 4096), 11008);
  EXPECT_EQ(defaultFfn(Arch::GPT2, 768), 3072);
}

// The derived width is computed in checked arithmetic: no wrapped-around
// (negative) width for a huge --hidden.
TEST(ModelConfig, DefaultFeedForwardOverflow) {
  int64_t max = std::numeric_limits<int64_t>::max();
  EXPECT_EQ(defaultFfn(Arch::GPT2, max / 4), max / 4 * 4);
  EXPECT_FALSE(defaultFfn(Arch::GPT2, max / 4 + 1).has_value());
  EXPECT_FALSE(defaultFfn(Arch::Llama, max / 8 + 1).has_value());
  EXPECT_FALSE(defaultFfn(Arch::Llama, max / 8).has_value()); // 8C + 767
  EXPECT_EQ(defaultFfn(Arch::Llama, max / 16),
            ((max / 16 * 8 + 2) / 3 + 255) / 256 * 256);
}

TEST(ModelConfig, HiddenNotDivisibleByHeads) {
  ModelConfig c = *getPreset("gpt2-tiny");
  c.hidden = 66;
  EXPECT_EQ(validate(c), "hidden (66) is not divisible by heads (4)");
}

TEST(ModelConfig, KvHeadsMustDivideHeads) {
  ModelConfig c = *getPreset("llama-tiny");
  c.kvHeads = 3;
  EXPECT_EQ(validate(c), "kv-heads (3) does not divide heads (4)");
}

TEST(ModelConfig, SizesMustBePositive) {
  ModelConfig c = *getPreset("gpt2-tiny");
  c.layers = 0;
  c.vocab = -5;
  EXPECT_EQ(validate(c),
            "layers (0) must be positive; vocab (-5) must be positive");
}

TEST(ModelConfig, GPT2HasNoGroupedQueryAttention) {
  ModelConfig c = *getPreset("gpt2-tiny");
  c.kvHeads = 2;
  EXPECT_NE(validate(c).find("must equal heads (4) for arch gpt2"),
            std::string::npos);
}

TEST(ModelConfig, RotaryNeedsEvenHeadDim) {
  ModelConfig c = *getPreset("llama-tiny");
  c.hidden = 60;
  c.heads = 4;
  c.kvHeads = 4; // head dim 15
  EXPECT_NE(validate(c).find("must be even for rotary embedding"),
            std::string::npos);
}

TEST(ModelConfig, PositionTableMustCoverTheSequence) {
  ModelConfig c = *getPreset("gpt2-tiny");
  c.positions = 32;
  EXPECT_EQ(validate(c), "positions (32) must be at least seq-len (64)");
  c.positions = 1024; // A longer table than the sequence is GPT-2's case.
  EXPECT_EQ(validate(c), "");
}

TEST(ModelConfig, ParameterCountsOfKnownModels) {
  // GPT-2 small and Llama 2 7B, as their papers and model cards count them;
  // Llama 2 70B with grouped-query attention (8 key-value heads).
  EXPECT_EQ(parameterCount(*getPreset("gpt2-124m")), 124439808);
  EXPECT_EQ(parameterCount(*getPreset("llama-7b")), 6738415616);
  EXPECT_EQ(parameterCount(*getPreset("llama-70b")), 68976648192);
  // The releases' own counts (safetensors index total_size / 2 for bf16):
  // untied Llama 3, tied Llama 3.2, Mistral v0.1 (vocabulary 32000),
  // Qwen2.5 with its q/k/v biases.
  EXPECT_EQ(parameterCount(*getPreset("llama3-8b")), 8030261248);
  EXPECT_EQ(parameterCount(*getPreset("llama3.2-1b")), 1235814400);
  EXPECT_EQ(parameterCount(*getPreset("mistral-7b")), 7241732096);
  EXPECT_EQ(parameterCount(*getPreset("qwen2.5-7b")), 7615616512);
  ModelConfig c = *getPreset("gpt2-tiny");
  c.hidden = int64_t(1) << 40;
  EXPECT_EQ(parameterCount(c), std::nullopt); // 12 C^2 overflows
}

TEST(ModelConfig, CeilingsBeforeAnyIrIsBuilt) {
  ModelConfig c = *getPreset("gpt2-tiny");
  c.layers = kMaxLayers;
  EXPECT_EQ(validate(c), "");
  c.layers = kMaxLayers + 1;
  EXPECT_EQ(validate(c), "layers (1025) exceeds the ceiling of 1024 layers");
  c = *getPreset("gpt2-tiny");
  c.vocab = int64_t(1) << 31;
  EXPECT_EQ(validate(c), "vocab (2147483648) exceeds 2147483647 (2^31-1: "
                         "token ids are i32)");
  c = *getPreset("gpt2-tiny");
  c.hidden = 8 << 20;
  c.ffn = 4 * c.hidden;
  EXPECT_NE(validate(c).find("exceed the ceiling of 2^48"), std::string::npos)
      << validate(c);
}

TEST(ModelConfig, FamilyFeatures) {
  ModelConfig qwen = *getPreset("qwen2-tiny");
  EXPECT_EQ(qwen.familyName(), "qwen2");
  EXPECT_TRUE(qwen.qkvBias);
  EXPECT_EQ(qwen.normEpsilon, 1e-6);
  EXPECT_EQ(qwen.ropeTheta, 1e6);
  EXPECT_EQ(qwen.positions, 128);
  EXPECT_TRUE(getPreset("llama3.2-tiny")->tiedEmbedding());
  EXPECT_EQ(getPreset("llama-tiny")->familyName(), "llama");
  // q/k/v biases alone are Qwen2's; Llama's attention_bias has all four.
  qwen.qkvBias = false;
  EXPECT_EQ(validate(qwen), "family qwen2 has q/k/v biases and no output bias");
  ModelConfig llama = *getPreset("llama3-tiny");
  llama.qkvBias = true;
  EXPECT_NE(validate(llama).find("family llama has biases on q, k, v and the "
                                 "output projection together"),
            std::string::npos);
  llama.outputBias = true;
  EXPECT_EQ(validate(llama), "");
  ModelConfig mistral = *getPreset("mistral-tiny");
  mistral.outputBias = true;
  EXPECT_EQ(validate(mistral), "family mistral has no attention biases");
  mistral = *getPreset("mistral-tiny");
  mistral.family = "gemma";
  EXPECT_EQ(validate(mistral),
            "family 'gemma' is not one of llama, mistral, qwen2, mixtral");
  ModelConfig gpt2 = *getPreset("gpt2-tiny");
  gpt2.qkvBias = true;
  EXPECT_NE(validate(gpt2).find("settings of arch llama"), std::string::npos);
  // RoPE scaling: a known kind with its factors.
  ModelConfig scaled = *getPreset("llama3.2-tiny");
  EXPECT_EQ(scaled.ropeScaling, "llama3");
  EXPECT_EQ(validate(scaled), "");
  scaled.ropeHighFreqFactor = 0.5;
  EXPECT_EQ(validate(scaled),
            "llama3 rope scaling needs 0 < low-freq factor < high-freq factor "
            "and a positive original context");
  scaled.ropeScaling = "dynamic";
  EXPECT_EQ(validate(scaled),
            "rope scaling 'dynamic' is not one of linear, llama3, yarn");
  // yarn: the preset's factor (32) and original context (64), the betas.
  scaled.ropeScaling = "yarn";
  EXPECT_EQ(validate(scaled), "");
  scaled.ropeBetaSlow = 64.0;
  EXPECT_EQ(validate(scaled),
            "yarn rope scaling needs a factor of at least 1, 0 < beta-slow < "
            "beta-fast, a positive original context and rope theta above 1");
  // The context is at least the training sequence.
  llama = *getPreset("llama3-tiny");
  llama.positions = 32;
  EXPECT_EQ(validate(llama), "max context (32) must be at least seq-len (64)");
  // A sliding window: Mistral's (v0.1: 4096 in a 32k context), positive,
  // below the context.
  ModelConfig window = *getPreset("mistral-7b");
  EXPECT_EQ(window.slidingWindow, 4096);
  EXPECT_EQ(window.positions, 32768);
  EXPECT_EQ(validate(window), "");
  window.slidingWindow = 32768;
  EXPECT_EQ(validate(window),
            "sliding window (32768) must be below max context (32768): a "
            "window of the whole context masks nothing (give none)");
  window.slidingWindow = -2;
  EXPECT_EQ(validate(window), "sliding window (-2) must be positive (0 for "
                              "none)");
  llama = *getPreset("llama3-tiny");
  llama.slidingWindow = 16;
  EXPECT_EQ(validate(llama),
            "a sliding window is a feature of families mistral, qwen2 and "
            "mixtral, not of llama");
  // Qwen2's window from a layer on; Mistral's on every layer.
  ModelConfig qwen2 = *getPreset("qwen2-tiny");
  qwen2.slidingWindow = 16;
  qwen2.windowFromLayer = 1;
  EXPECT_EQ(validate(qwen2), "");
  qwen2.windowFromLayer = 2;
  EXPECT_EQ(validate(qwen2), "window from layer (2) must be 0, or with a "
                             "sliding window below layers (2)");
  window = *getPreset("mistral-7b");
  window.windowFromLayer = 3;
  EXPECT_EQ(validate(window),
            "family mistral's window is on every layer (window from layer 0)");
}

// Each feature's parameters: a tied head drops V x C, q/k/v biases add
// C + 2 x kv width per layer, the output bias C per layer.
TEST(ModelConfig, FeatureParameterCounts) {
  ModelConfig c = *getPreset("llama3-tiny");
  int64_t base = *parameterCount(c);
  c.tieEmbedding = true;
  EXPECT_EQ(*parameterCount(c), base - 256 * 64);
  c.tieEmbedding = false;
  c.qkvBias = true;
  EXPECT_EQ(*parameterCount(c), base + 2 * (64 + 2 * 32));
  c.outputBias = true;
  EXPECT_EQ(*parameterCount(c), base + 2 * (64 + 2 * 32 + 64));
}
