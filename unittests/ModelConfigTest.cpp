//===- ModelConfigTest.cpp - presets and configuration checks -------------===//

#include "model/ModelConfig.h"

#include <limits>

#include <gtest/gtest.h>

using namespace partition::model;

TEST(ModelConfig, EveryPresetIsValid) {
  ASSERT_EQ(presetNames().size(), 7u);
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
