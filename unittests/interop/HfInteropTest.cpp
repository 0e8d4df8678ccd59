//===- HfInteropTest.cpp - partition <-> transformers, in-process ---------===//

#include "interop/HfConfig.h"
#include "interop/HfExport.h"
#include "interop/HfImport.h"
#include "interop/HfWeights.h"
#include "interop/InteropError.h"
#include "runtime/checkpoint/Checkpoint.h"

#include "unittests/interop/TempDirTest.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <random>
#include <set>

namespace ckpt = partition::runtime::checkpoint;
namespace fs = std::filesystem;
using namespace partition::interop;
using partition::model::Arch;
using partition::model::ModelConfig;

namespace {

using HfInteropTest = partition::interop::testing::TempDirTest;

/// Sizes where no two dimensions coincide, so a transposition or a wrong
/// split cannot go unnoticed; the GPT-2 FFN is not 4C.
ModelConfig gpt2Config() {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.layers = 2;
  c.hidden = 24;
  c.heads = 3;
  c.kvHeads = 3;
  c.ffn = 40;
  c.vocab = 50;
  c.seqLen = 16;
  c.positions = 20;
  c.batch = 2;
  return c;
}

ModelConfig llamaConfig() {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.layers = 2;
  c.hidden = 24;
  c.heads = 6;
  c.kvHeads = 2; // grouped-query attention
  c.ffn = 36;
  c.vocab = 52;
  c.seqLen = 16;
  c.positions = 16;
  c.batch = 2;
  return c;
}

/// Random bit patterns plus the values a conversion could lose: -0,
/// subnormals, the largest and smallest finite floats.
std::vector<float> awkwardValues(size_t count, std::mt19937 &random,
                                 bool extremes) {
  std::vector<float> values(count);
  std::uniform_int_distribution<uint32_t> bits;
  const float special[] = {-0.0f, std::numeric_limits<float>::denorm_min(),
                           -std::numeric_limits<float>::denorm_min(),
                           std::numeric_limits<float>::max(),
                           std::numeric_limits<float>::lowest(), 1e-40f};
  for (size_t i = 0; i < count; ++i) {
    if (extremes && i < std::size(special)) {
      values[i] = special[i];
      continue;
    }
    uint32_t word;
    float value;
    do {
      word = bits(random);
      std::memcpy(&value, &word, 4);
    } while (!std::isfinite(value) ||
             (!extremes && std::fabs(value) > 1e38f));
    values[i] = value;
  }
  return values;
}

/// A training checkpoint of `config` (parameters and moments) with awkward
/// values, as partition-run writes it; returns the parameters.
std::map<std::string, std::vector<float>>
writeCheckpoint(const std::string &dir, const ModelConfig &config,
                bool withModel = true, bool extremes = true) {
  std::mt19937 random(1);
  std::map<std::string, std::vector<float>> params;
  std::vector<std::vector<float>> moments;
  std::vector<ckpt::TensorRef> tensors;
  std::vector<ParamShape> shapes = modelParameters(config);
  for (const ParamShape &param : shapes) {
    size_t elements = 1;
    for (int64_t dim : param.shape)
      elements *= size_t(dim);
    params[param.name] = awkwardValues(elements, random, extremes);
  }
  for (const ParamShape &param : shapes) {
    const std::vector<float> &values = params[param.name];
    tensors.push_back({param.name, ckpt::DType::F32, param.shape,
                       values.data(), values.size() * 4});
  }
  moments.reserve(shapes.size());
  for (const ParamShape &param : shapes) {
    const std::vector<float> &moment =
        moments.emplace_back(params[param.name].size(), 0.5f);
    tensors.push_back({ckpt::adamMName(param.name), ckpt::DType::F32,
                       param.shape, moment.data(), moment.size() * 4});
  }
  ckpt::Metadata extra;
  if (withModel)
    extra["model"] = modelToJson(config).dump();
  ckpt::saveCheckpoint(dir, tensors, {7, 0, 0}, extra);
  return params;
}

/// The features beyond Llama 2, at the interop sizes: Llama 3 (theta
/// 500000, epsilon 1e-6), Llama 3.2 (tied), Llama with attention_bias,
/// Mistral, Qwen2 (q/k/v biases), RoPE scaling, Mistral with a window.
std::vector<ModelConfig> familyConfigs() {
  std::vector<ModelConfig> configs;
  ModelConfig llama3 = llamaConfig();
  llama3.ropeTheta = 500000.0;
  llama3.normEpsilon = 1e-6;
  llama3.positions = 40; // a context beyond the training sequence
  configs.push_back(llama3);
  ModelConfig tied = llama3;
  tied.tieEmbedding = true;
  configs.push_back(tied);
  ModelConfig biased = llama3;
  biased.qkvBias = biased.outputBias = true;
  configs.push_back(biased);
  ModelConfig mistral = llama3;
  mistral.family = "mistral";
  mistral.ropeTheta = 1e6;
  configs.push_back(mistral);
  ModelConfig qwen2 = mistral;
  qwen2.family = "qwen2";
  qwen2.qkvBias = true;
  qwen2.tieEmbedding = true;
  configs.push_back(qwen2);
  // RoPE scaling: Llama 3.1's llama3 rule and linear.
  ModelConfig llama31 = llama3;
  llama31.ropeScaling = "llama3";
  llama31.ropeFactor = 8.0;
  llama31.ropeLowFreqFactor = 1.5;
  llama31.ropeHighFreqFactor = 4.0;
  llama31.ropeOriginalContext = 20;
  configs.push_back(llama31);
  ModelConfig linear = llama3;
  linear.ropeScaling = "linear";
  linear.ropeFactor = 2.5;
  configs.push_back(linear);
  // Mistral 7B v0.1's sliding window, below the training sequence (24).
  ModelConfig window = mistral;
  window.slidingWindow = 8;
  configs.push_back(window);
  // Qwen2's window from layer 1 on (max_window_layers).
  ModelConfig qwen2Window = qwen2;
  qwen2Window.slidingWindow = 8;
  qwen2Window.windowFromLayer = 1;
  configs.push_back(qwen2Window);
  // yarn with betas of its own (transformers' defaults are 32 and 1).
  ModelConfig yarn = llama3;
  yarn.ropeScaling = "yarn";
  yarn.ropeFactor = 4.0;
  yarn.ropeBetaFast = 16.0;
  yarn.ropeBetaSlow = 2.0;
  yarn.ropeOriginalContext = 10;
  configs.push_back(yarn);
  return configs;
}

std::vector<ModelConfig> allConfigs() {
  std::vector<ModelConfig> configs = {gpt2Config(), llamaConfig()};
  for (const ModelConfig &config : familyConfigs())
    configs.push_back(config);
  return configs;
}

void expectSameConfig(const ModelConfig &a, const ModelConfig &b) {
  EXPECT_EQ(modelToJson(a), modelToJson(b));
}

} // namespace

TEST_F(HfInteropTest, RoundTripIsBitForBitForEveryFamily) {
  for (const ModelConfig &config : allConfigs()) {
    SCOPED_TRACE(modelToJson(config).dump());
    std::string ckptDir = path("ckpt"), hfDir = path("hf");
    auto params = writeCheckpoint(ckptDir, config);
    ExportResult exported = exportHf(ckptDir, hfDir, "fp32");
    EXPECT_EQ(exported.step, 7);
    EXPECT_EQ(exported.tensors, hfTensorMap(config).size());
    HfModel imported = readHfModel(hfDir);
    expectSameConfig(imported.config, config);
    ASSERT_EQ(imported.params.size(), params.size());
    for (const auto &[name, tensor] : imported.params) {
      const std::vector<float> &original = params.at(name);
      ASSERT_EQ(tensor.values.size(), original.size()) << name;
      EXPECT_EQ(std::memcmp(tensor.values.data(), original.data(),
                            original.size() * 4),
                0)
          << name << " changed in the round trip";
    }
    // And the weights-only checkpoint holds them, as partition-run reads it.
    saveWeightsCheckpoint(path("imported"), imported, hfDir);
    ckpt::Checkpoint back = ckpt::openCheckpoint(path("imported"));
    EXPECT_EQ(back.state.step, 0);
    EXPECT_EQ(back.tensors.metadata("model"), modelToJson(config).dump());
    for (const auto &[name, original] : params) {
      std::vector<float> values(original.size());
      back.read(name, ckpt::DType::F32, back.tensors.info(name).shape,
                values.data(), values.size() * 4);
      EXPECT_EQ(std::memcmp(values.data(), original.data(),
                            original.size() * 4),
                0)
          << name;
    }
    fs::remove_all(ckptDir);
    fs::remove_all(hfDir);
    fs::remove_all(path("imported"));
  }
}

TEST_F(HfInteropTest, Gpt2ConvOneDLayoutIsTheTransposeOfQkvStacked) {
  ModelConfig config = gpt2Config();
  int64_t c = config.hidden;
  std::map<std::string, Tensor> params;
  for (const ParamShape &param : modelParameters(config)) {
    size_t elements = 1;
    for (int64_t dim : param.shape)
      elements *= size_t(dim);
    Tensor &tensor = params[param.name];
    tensor.shape = param.shape;
    for (size_t i = 0; i < elements; ++i)
      tensor.values.push_back(float(i) + 0.25f * float(param.name.size()));
  }
  for (const HfTensorMap &map : hfTensorMap(config)) {
    if (map.hfName == "transformer.h.1.attn.c_attn.weight") {
      Tensor hf = toHf(map, params);
      ASSERT_EQ(hf.shape, (Shape{c, 3 * c}));
      // HF's c_attn.weight[i][j] = W_{q,k,v}[j mod C][i] (Conv1D: [in, out]).
      const char *parts[] = {"h.1.attn.q.weight", "h.1.attn.k.weight",
                             "h.1.attn.v.weight"};
      for (int64_t i = 0; i < c; ++i)
        for (int64_t j = 0; j < 3 * c; ++j)
          ASSERT_EQ(hf.values[i * 3 * c + j],
                    params[parts[j / c]].values[(j % c) * c + i])
              << i << ", " << j;
    }
    if (map.hfName == "transformer.h.0.mlp.c_fc.weight") {
      Tensor hf = toHf(map, params);
      ASSERT_EQ(hf.shape, (Shape{c, config.ffn}));
      EXPECT_EQ(hf.values[1 * config.ffn + 2],
                params["h.0.mlp.c_fc.weight"].values[2 * c + 1]);
    }
  }
}

TEST_F(HfInteropTest, Bf16ExportRoundsToNearestEvenAndImportsExactly) {
  EXPECT_EQ(floatToBf16(1.0f), 0x3f80);
  // 1 + 2^-8 is halfway between bf16 1 and 1 + 2^-7: ties to even (1).
  EXPECT_EQ(floatToBf16(1.00390625f), 0x3f80);
  // 1 + 3 * 2^-8 is halfway between 1 + 2^-7 and 1 + 2^-6: to even.
  EXPECT_EQ(floatToBf16(1.01171875f), 0x3f82);
  EXPECT_EQ(floatToBf16(-2.0f), 0xc000);
  EXPECT_TRUE(std::isnan(bf16ToFloat(
      floatToBf16(std::numeric_limits<float>::quiet_NaN()))));
  EXPECT_EQ(bf16ToFloat(0x3f82), 1.015625f);
  EXPECT_EQ(f16ToFloat(0x3c00), 1.0f);
  EXPECT_EQ(f16ToFloat(0xc000), -2.0f);
  EXPECT_EQ(f16ToFloat(0x0001), std::ldexp(1.0f, -24)); // subnormal
  EXPECT_EQ(f16ToFloat(0x03ff), std::ldexp(1023.0f, -24));
  EXPECT_EQ(f16ToFloat(0x7bff), 65504.0f);
  EXPECT_TRUE(std::isinf(f16ToFloat(0x7c00)));

  // FLT_MAX rounds to infinity in bf16: refused, nothing written.
  ModelConfig config = llamaConfig();
  writeCheckpoint(path("ckpt"), config);
  EXPECT_THROW(exportHf(path("ckpt"), path("hf"), "bf16"), InteropError);
  EXPECT_FALSE(fs::exists(path("hf")));

  auto params = writeCheckpoint(path("ckpt"), config, true,
                                /*extremes=*/false);
  exportHf(path("ckpt"), path("hf"), "bf16");
  ckpt::Safetensors file = ckpt::Safetensors::open(path("hf") +
                                                   "/model.safetensors");
  EXPECT_EQ(file.info("model.norm.weight").dtype, ckpt::DType::BF16);
  EXPECT_EQ(file.metadata("format"), "pt");
  HfModel imported = readHfModel(path("hf"));
  for (const auto &[name, tensor] : imported.params) {
    const std::vector<float> &original = params.at(name);
    for (size_t i = 0; i < original.size(); ++i) {
      float expected = bf16ToFloat(floatToBf16(original[i]));
      ASSERT_EQ(std::memcmp(&tensor.values[i], &expected, 4), 0)
          << name << "[" << i << "]";
    }
  }
}

TEST_F(HfInteropTest, ModelJsonRoundTripsAndRefusesUnknownFields) {
  for (const ModelConfig &config : allConfigs())
    expectSameConfig(modelFromJson(modelToJson(config), "f"), config);
  // A window is a Mistral's: accepted there, refused on another family.
  nlohmann::json model = modelToJson(familyConfigs()[3]);
  model["sliding_window"] = 16;
  EXPECT_EQ(modelFromJson(model, "f").slidingWindow, 16);
  model = modelToJson(gpt2Config());
  model["sliding_window"] = 16;
  auto refusal = [](const nlohmann::json &model) -> std::string {
    try {
      modelFromJson(model, "ckpt/checkpoint.safetensors");
    } catch (const InteropError &error) {
      return error.what();
    }
    return "(accepted)";
  };
  EXPECT_EQ(refusal(model),
            "ckpt/checkpoint.safetensors: invalid model configuration: a "
            "sliding window is a feature of families mistral, qwen2 and "
            "mixtral, not of gpt2");
  model = modelToJson(familyConfigs()[3]);
  model["sliding_window"] = 40; // the context
  EXPECT_EQ(refusal(model),
            "ckpt/checkpoint.safetensors: invalid model configuration: "
            "sliding window (40) must be below max context (40): a window of "
            "the whole context masks nothing (give none)");
  model = modelToJson(gpt2Config());
  model["attention_sink"] = 4;
  EXPECT_EQ(refusal(model),
            "ckpt/checkpoint.safetensors: model metadata field "
            "attention_sink is not known to this partition-export; export "
            "with the partition build that wrote the checkpoint");
}

TEST_F(HfInteropTest, ExportRefusesACheckpointWithoutItsModel) {
  writeCheckpoint(path("ckpt"), gpt2Config(), /*withModel=*/false);
  try {
    exportHf(path("ckpt"), path("hf"), "fp32");
    FAIL() << "exported without a model configuration";
  } catch (const InteropError &error) {
    EXPECT_NE(std::string(error.what())
                  .find("the checkpoint holds no model configuration "
                        "(\"model\" metadata); it was not written by "
                        "partition-run or partition-import"),
              std::string::npos)
        << error.what();
  }
  EXPECT_FALSE(fs::exists(path("hf")));
}

TEST_F(HfInteropTest, HfConfigReadsBackAsTheSameModel) {
  for (const ModelConfig &config : allConfigs()) {
    nlohmann::json hf = hfConfig(config, "float32");
    expectSameConfig(fromHfConfig(hf, "config.json"), config);
    // Without partition's training shape: min(context, 1024) and batch 1.
    hf.erase("partition_training");
    ModelConfig bare = fromHfConfig(hf, "config.json");
    EXPECT_EQ(bare.seqLen, config.positions);
    EXPECT_EQ(bare.batch, 1);
  }
}

TEST_F(HfInteropTest, EveryPresetMapsEveryParameterAndReadsBack) {
  for (const std::string &name : partition::model::presetNames()) {
    SCOPED_TRACE(name);
    ModelConfig config = *partition::model::getPreset(name);
    config.positions = std::max(config.positions, config.seqLen);
    // Mixtral has one width, its experts' (intermediate_size): a
    // mixtral-* preset's dense ffn, which no layer uses, is not exported.
    if (config.isMoe() && config.moeEvery == 1) {
      config.ffn = config.expertWidth();
      config.expertFfn = 0;
    }
    // hfTensorMap checks that every parameter maps exactly once.
    std::vector<HfTensorMap> maps = hfTensorMap(config);
    std::map<std::string, Shape> shapes;
    int64_t partitionElements = 0, hfElements = 0;
    for (const ParamShape &param : modelParameters(config)) {
      shapes[param.name] = param.shape;
      int64_t elements = 1;
      for (int64_t dim : param.shape)
        elements *= dim;
      partitionElements += elements;
    }
    for (const HfTensorMap &map : maps) {
      int64_t elements = 1;
      for (int64_t dim : hfShape(map, shapes))
        elements *= dim;
      hfElements += elements;
    }
    EXPECT_EQ(hfElements, partitionElements);
    expectSameConfig(fromHfConfig(hfConfig(config, "bfloat16"), "config.json"),
                     config);
  }
}

// What each family's config.json says, read as features: the values
// transformers computes with, including its defaults for absent fields.
TEST_F(HfInteropTest, FamilyConfigsReadAsFeatures) {
  nlohmann::json llama3 = hfConfig(familyConfigs()[0], "float32");
  EXPECT_EQ(llama3["model_type"], "llama");
  EXPECT_EQ(llama3["rope_theta"], 500000.0);
  EXPECT_EQ(llama3["rms_norm_eps"], 1e-6);
  EXPECT_EQ(llama3["max_position_embeddings"], 40);
  // transformers 5 writes theta in rope_parameters.
  llama3.erase("rope_theta");
  llama3["rope_parameters"] = {{"rope_type", "default"},
                               {"rope_theta", 500000.0}};
  ModelConfig read = fromHfConfig(llama3, "config.json");
  EXPECT_EQ(read.ropeTheta, 500000.0);
  EXPECT_EQ(read.positions, 40);
  // An absent epsilon is transformers' 1e-6; an absent theta 10000.
  llama3.erase("rms_norm_eps");
  llama3.erase("rope_parameters");
  read = fromHfConfig(llama3, "config.json");
  EXPECT_EQ(read.normEpsilon, 1e-6);
  EXPECT_EQ(read.ropeTheta, 10000.0);

  nlohmann::json qwen2 = hfConfig(familyConfigs()[4], "float32");
  EXPECT_EQ(qwen2["architectures"][0], "Qwen2ForCausalLM");
  EXPECT_EQ(qwen2["use_sliding_window"], false);
  EXPECT_TRUE(qwen2["sliding_window"].is_null());
  EXPECT_FALSE(qwen2.contains("attention_bias"));
  qwen2["layer_types"] = {"full_attention", "full_attention"};
  read = fromHfConfig(qwen2, "config.json");
  EXPECT_TRUE(read.qkvBias);
  EXPECT_FALSE(read.outputBias);
  EXPECT_TRUE(read.tieEmbedding);
  EXPECT_EQ(read.family, "qwen2");

  // RoPE scaling in both spellings: rope_scaling (what export writes) and
  // transformers 5's rope_parameters.
  nlohmann::json llama31 = hfConfig(familyConfigs()[5], "float32");
  EXPECT_EQ(llama31["rope_scaling"]["rope_type"], "llama3");
  EXPECT_EQ(llama31["rope_scaling"]["original_max_position_embeddings"], 20);
  nlohmann::json modern = llama31;
  modern.erase("rope_scaling");
  modern.erase("rope_theta");
  modern["rope_parameters"] = llama31["rope_scaling"];
  modern["rope_parameters"]["rope_theta"] = 500000.0;
  expectSameConfig(fromHfConfig(modern, "config.json"), familyConfigs()[5]);
  // An absent original context is max_position_embeddings, as in
  // transformers.
  modern["rope_parameters"].erase("original_max_position_embeddings");
  EXPECT_EQ(fromHfConfig(modern, "config.json").ropeOriginalContext, 40);
  nlohmann::json linear = hfConfig(familyConfigs()[6], "float32");
  EXPECT_EQ(linear["rope_scaling"],
            (nlohmann::json{{"rope_type", "linear"}, {"factor", 2.5}}));
  nlohmann::json yarn = hfConfig(familyConfigs()[9], "float32");
  EXPECT_EQ(yarn["rope_scaling"],
            (nlohmann::json{{"rope_type", "yarn"},
                            {"factor", 4.0},
                            {"beta_fast", 16.0},
                            {"beta_slow", 2.0},
                            {"original_max_position_embeddings", 10}}));
  // Absent betas are transformers' 32 and 1.
  yarn["rope_scaling"].erase("beta_fast");
  yarn["rope_scaling"].erase("beta_slow");
  ModelConfig defaults = fromHfConfig(yarn, "config.json");
  EXPECT_EQ(defaults.ropeBetaFast, 32.0);
  EXPECT_EQ(defaults.ropeBetaSlow, 1.0);

  nlohmann::json mistral = hfConfig(familyConfigs()[3], "float32");
  EXPECT_EQ(mistral["architectures"][0], "MistralForCausalLM");
  EXPECT_TRUE(mistral["sliding_window"].is_null());
  read = fromHfConfig(mistral, "config.json");
  EXPECT_FALSE(read.qkvBias);
  EXPECT_EQ(read.family, "mistral");
  EXPECT_EQ(read.slidingWindow, 0);
  // An absent window is MistralConfig's 4096: none in a context of 40, the
  // window in a longer one.
  mistral.erase("sliding_window");
  EXPECT_EQ(fromHfConfig(mistral, "config.json").slidingWindow, 0);
  mistral["max_position_embeddings"] = 32768;
  EXPECT_EQ(fromHfConfig(mistral, "config.json").slidingWindow, 4096);

  // A window is written and read back; one of at least the context (the
  // longer of max_position_embeddings and the training sequence) is none.
  nlohmann::json window = hfConfig(familyConfigs()[7], "float32");
  EXPECT_EQ(window["sliding_window"], 8);
  expectSameConfig(fromHfConfig(window, "config.json"), familyConfigs()[7]);
  window["sliding_window"] = 40;
  EXPECT_EQ(fromHfConfig(window, "config.json").slidingWindow, 0);
  window["sliding_window"] = 39;
  EXPECT_EQ(fromHfConfig(window, "config.json").slidingWindow, 39);
  // Training beyond the context, transformers' mask still narrows.
  window["sliding_window"] = 40;
  EXPECT_EQ(fromHfConfig(window, "config.json", {48, std::nullopt})
                .slidingWindow,
            40);
}

// Qwen2's window: with use_sliding_window, on the layers from
// max_window_layers on (transformers' defaults 4096 and 28 when absent);
// layer_types, where given, must be the list those derive.
TEST_F(HfInteropTest, Qwen2WindowFromMaxWindowLayers) {
  nlohmann::json qwen2 = hfConfig(familyConfigs()[8], "float32");
  EXPECT_EQ(qwen2["use_sliding_window"], true);
  EXPECT_EQ(qwen2["sliding_window"], 8);
  EXPECT_EQ(qwen2["max_window_layers"], 1);
  expectSameConfig(fromHfConfig(qwen2, "config.json"), familyConfigs()[8]);
  qwen2["layer_types"] = {"full_attention", "sliding_attention"};
  expectSameConfig(fromHfConfig(qwen2, "config.json"), familyConfigs()[8]);
  // Two layers, max_window_layers absent (28): no windowed layer.
  qwen2.erase("layer_types");
  qwen2.erase("max_window_layers");
  EXPECT_EQ(fromHfConfig(qwen2, "config.json").slidingWindow, 0);
  qwen2["max_window_layers"] = 0;
  ModelConfig every = fromHfConfig(qwen2, "config.json");
  EXPECT_EQ(every.slidingWindow, 8);
  EXPECT_EQ(every.windowFromLayer, 0);
  // Without use_sliding_window the window is transformers' None.
  qwen2["use_sliding_window"] = false;
  EXPECT_EQ(fromHfConfig(qwen2, "config.json").slidingWindow, 0);
}

// What is still refused about windows, naming the feature: a llama's
// window (LlamaForCausalLM ignores it: a relabelled Mistral), layer_types
// other than a family's own rule, a window that is not a positive integer.
TEST_F(HfInteropTest, WindowRefusals) {
  auto refusal = [](nlohmann::json config) -> std::string {
    try {
      fromHfConfig(config, "config.json");
    } catch (const InteropError &error) {
      return error.what();
    }
    return "(accepted)";
  };
  nlohmann::json llama = hfConfig(familyConfigs()[0], "float32");
  llama["sliding_window"] = 16;
  EXPECT_EQ(refusal(llama),
            "config.json: sliding_window = 16 cannot be expressed: a llama "
            "model has no sliding window (sliding-window attention is "
            "model_type mistral's and qwen2's); only null is");
  nlohmann::json qwen2 = hfConfig(familyConfigs()[8], "float32");
  qwen2["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_EQ(refusal(qwen2),
            "config.json: layer_types = [\"sliding_attention\",\"full_attention\"] "
            "cannot be expressed: only a window on the layers from "
            "max_window_layers on (with use_sliding_window) is supported, "
            "[\"full_attention\",\"sliding_attention\"] here");
  qwen2.erase("layer_types");
  qwen2["max_window_layers"] = -1;
  EXPECT_EQ(refusal(qwen2), "config.json: max_window_layers must be a "
                            "non-negative integer, got -1");
  nlohmann::json mistral = hfConfig(familyConfigs()[7], "float32");
  mistral["layer_types"] = {"sliding_attention", "full_attention"};
  EXPECT_EQ(refusal(mistral),
            "config.json: layer_types holds \"sliding_attention\", which "
            "cannot be expressed: only \"full_attention\" layers are "
            "supported (sliding_window with layer_types is not)");
  mistral.erase("layer_types");
  mistral["sliding_window"] = 0;
  EXPECT_EQ(refusal(mistral), "config.json: sliding_window must be a positive "
                              "integer, got 0");
  mistral["sliding_window"] = 4.5;
  EXPECT_EQ(refusal(mistral), "config.json: sliding_window must be a positive "
                              "integer, got 4.5");
}

// q/k/v biases map to self_attn.{q,k,v}_proj.bias, the output bias to
// o_proj.bias; a tied head has no lm_head.
TEST_F(HfInteropTest, BiasesAndTiedHeadMap) {
  ModelConfig biased = familyConfigs()[2];
  std::set<std::string> names;
  for (const HfTensorMap &map : hfTensorMap(biased))
    names.insert(map.hfName);
  for (const char *name : {"model.layers.1.self_attn.q_proj.bias",
                           "model.layers.1.self_attn.k_proj.bias",
                           "model.layers.1.self_attn.v_proj.bias",
                           "model.layers.1.self_attn.o_proj.bias",
                           "lm_head.weight"})
    EXPECT_TRUE(names.count(name)) << name;
  std::map<std::string, Shape> shapes;
  for (const ParamShape &param : modelParameters(biased))
    shapes[param.name] = param.shape;
  EXPECT_EQ(shapes.at("layers.0.attention.wk.bias"), Shape{8}); // 2 x 24/6
  EXPECT_EQ(shapes.at("layers.0.attention.wq.bias"), Shape{24});
  EXPECT_EQ(shapes.at("layers.0.attention.wo.bias"), Shape{24});

  names.clear();
  for (const HfTensorMap &map : hfTensorMap(familyConfigs()[4]))
    names.insert(map.hfName);
  EXPECT_TRUE(names.count("model.layers.0.self_attn.q_proj.bias"));
  EXPECT_FALSE(names.count("model.layers.0.self_attn.o_proj.bias"));
  EXPECT_FALSE(names.count("lm_head.weight"));
}
