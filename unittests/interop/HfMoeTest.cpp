//===- HfMoeTest.cpp - Mixtral <-> partition's mixture of experts ---------===//
//
// The Mixtral half of the interop tests (HfInteropTest.cpp has the dense
// families): the stacked experts against transformers' per-expert and
// fused tensors element by element, the round trip bit for bit, the config
// fields and every refusal.
//
//===----------------------------------------------------------------------===//

#include "interop/HfConfig.h"
#include "interop/HfExport.h"
#include "interop/HfImport.h"
#include "interop/HfMoe.h"
#include "interop/HfWeights.h"
#include "interop/InteropError.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/checkpoint/Safetensors.h"

#include "unittests/interop/TempDirTest.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <filesystem>
#include <fstream>
#include <set>

namespace ckpt = partition::runtime::checkpoint;
namespace fs = std::filesystem;
using namespace partition::interop;
using partition::model::Arch;
using partition::model::ModelConfig;

namespace {

using HfMoeTest = partition::interop::testing::TempDirTest;

/// A Mixtral of sizes that never coincide (E 3, F 10, H 24), so that a
/// transposed or mis-split expert cannot go unnoticed; a window and GQA.
ModelConfig mixtralConfig() {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.family = "mixtral";
  c.layers = 2;
  c.hidden = 24;
  c.heads = 6;
  c.kvHeads = 2;
  c.ffn = 10;
  c.vocab = 52;
  c.seqLen = 16;
  c.positions = 40;
  c.batch = 2;
  c.slidingWindow = 8;
  c.ropeTheta = 1e6;
  c.experts = 3;
  c.topK = 2;
  c.auxLossCoef = 0.02;
  return c;
}

/// Every parameter of `config` with distinct values (its element index and
/// a per-tensor offset), as a training checkpoint.
std::map<std::string, std::vector<float>> writeCheckpoint(
    const std::string &dir, const ModelConfig &config) {
  std::map<std::string, std::vector<float>> params;
  std::vector<ckpt::TensorRef> tensors;
  float offset = 0.0f;
  std::vector<ParamShape> shapes = modelParameters(config);
  for (const ParamShape &param : shapes) {
    size_t elements = 1;
    for (int64_t dim : param.shape)
      elements *= size_t(dim);
    std::vector<float> &values = params[param.name];
    for (size_t i = 0; i < elements; ++i)
      values.push_back(offset + float(i) * 0.001f);
    offset += 1000.0f;
  }
  for (const ParamShape &param : shapes) {
    const std::vector<float> &values = params[param.name];
    tensors.push_back({param.name, ckpt::DType::F32, param.shape,
                       values.data(), values.size() * 4});
  }
  ckpt::saveCheckpoint(dir, tensors, {3, 0, 0},
                       {{"model", modelToJson(config).dump()}});
  return params;
}

std::string refusal(const nlohmann::json &config) {
  try {
    fromHfConfig(config, "config.json");
  } catch (const InteropError &error) {
    return error.what();
  }
  return "(accepted)";
}

std::string exportRefusal(const std::string &ckptDir,
                          const std::string &outDir) {
  try {
    exportHf(ckptDir, outDir, "fp32");
  } catch (const InteropError &error) {
    std::string message = error.what();
    // The checkpoint path starts the message.
    return message.substr(message.find(": ") + 2);
  }
  return "(exported)";
}

} // namespace

// transformers' tensor of expert e is slice e of our stacked weight:
// block_sparse_moe.experts.e.w1.weight [F, H] = experts.w1[e].
TEST_F(HfMoeTest, PerExpertTensorsAreSlicesOfTheStackedWeights) {
  ModelConfig config = mixtralConfig();
  auto params = writeCheckpoint(path("ckpt"), config);
  ExportResult exported = exportHf(path("ckpt"), path("hf"), "fp32");
  // embed, norm, head + per layer 2 norms, 4 attention, gate, 3 x E.
  EXPECT_EQ(exported.tensors, 3u + 2u * (2 + 4 + 1 + 3 * 3));
  ckpt::Safetensors file =
      ckpt::Safetensors::open(path("hf") + "/model.safetensors");
  auto read = [&](const std::string &name) {
    std::vector<float> values(size_t(file.info(name).elements()));
    file.readRaw(name, values.data(), values.size() * 4);
    return values;
  };
  EXPECT_EQ(file.info("model.layers.1.block_sparse_moe.gate.weight").shape,
            (Shape{3, 24}));
  EXPECT_EQ(read("model.layers.1.block_sparse_moe.gate.weight"),
            params.at("layers.1.feed_forward.router.weight"));
  for (const char *w : {"w1", "w2", "w3"})
    for (int e = 0; e < 3; ++e) {
      std::string name = "model.layers.1.block_sparse_moe.experts." +
                         std::to_string(e) + "." + w + ".weight";
      EXPECT_EQ(file.info(name).shape,
                std::string(w) == "w2" ? (Shape{24, 10}) : (Shape{10, 24}))
          << name;
      const std::vector<float> &stacked =
          params.at(std::string("layers.1.feed_forward.experts.") + w);
      std::vector<float> slice(stacked.begin() + e * 240,
                               stacked.begin() + (e + 1) * 240);
      EXPECT_EQ(read(name), slice) << name;
    }
  nlohmann::json config_json;
  std::ifstream(path("hf") + "/config.json") >> config_json;
  EXPECT_EQ(config_json["architectures"][0], "MixtralForCausalLM");
  EXPECT_EQ(config_json["model_type"], "mixtral");
  EXPECT_EQ(config_json["num_local_experts"], 3);
  EXPECT_EQ(config_json["num_experts_per_tok"], 2);
  EXPECT_EQ(config_json["intermediate_size"], 10);
  EXPECT_EQ(config_json["router_aux_loss_coef"], 0.02);
  EXPECT_EQ(config_json["router_jitter_noise"], 0.0);
  EXPECT_EQ(config_json["output_router_logits"], true);
  EXPECT_EQ(config_json["sliding_window"], 8);

  // And back, bit for bit, with the same configuration.
  HfModel imported = readHfModel(path("hf"));
  EXPECT_EQ(modelToJson(imported.config), modelToJson(config));
  for (const auto &[name, tensor] : imported.params)
    EXPECT_EQ(tensor.values, params.at(name)) << name;
}

// transformers 5's module state: gate_up_proj [E, 2F, H] is w1[e] then
// w3[e] for each expert (it chunks the output in two, gate first).
TEST_F(HfMoeTest, FusedStateDictReadsAsTheSameParameters) {
  ModelConfig config = mixtralConfig();
  auto params = writeCheckpoint(path("ckpt"), config);
  exportHf(path("ckpt"), path("hf"), "fp32");
  std::map<std::string, Tensor> tensors;
  for (const ParamShape &param : modelParameters(config))
    tensors[param.name] = {param.shape, params.at(param.name)};
  std::vector<Tensor> fused;
  std::vector<ckpt::TensorRef> refs;
  std::vector<HfTensorMap> maps = hfTensorMap(config, MoeLayout::Fused);
  fused.reserve(maps.size());
  std::set<std::string> names;
  for (const HfTensorMap &map : maps) {
    const Tensor &tensor = fused.emplace_back(toHf(map, tensors));
    refs.push_back({map.hfName, ckpt::DType::F32, tensor.shape,
                    tensor.values.data(), tensor.values.size() * 4});
    names.insert(map.hfName);
  }
  ASSERT_TRUE(names.count("model.layers.0.mlp.experts.gate_up_proj"));
  ASSERT_TRUE(names.count("model.layers.0.mlp.experts.down_proj"));
  ASSERT_TRUE(names.count("model.layers.0.mlp.gate.weight"));
  const HfTensorMap &gateUp = *std::find_if(
      maps.begin(), maps.end(), [](const HfTensorMap &map) {
        return map.hfName == "model.layers.0.mlp.experts.gate_up_proj";
      });
  Tensor t = toHf(gateUp, tensors);
  ASSERT_EQ(t.shape, (Shape{3, 20, 24}));
  const auto &w1 = params.at("layers.0.feed_forward.experts.w1");
  const auto &w3 = params.at("layers.0.feed_forward.experts.w3");
  for (int e = 0; e < 3; ++e)
    for (int f = 0; f < 20; ++f)
      for (int h = 0; h < 24; ++h)
        ASSERT_EQ(t.values[(e * 20 + f) * 24 + h],
                  f < 10 ? w1[(e * 10 + f) * 24 + h]
                         : w3[(e * 10 + f - 10) * 24 + h])
            << e << " " << f << " " << h;

  fs::create_directories(path("fused"));
  fs::copy_file(path("hf") + "/config.json", path("fused") + "/config.json");
  ckpt::writeSafetensors(path("fused") + "/model.safetensors", refs,
                         {{"format", "pt"}});
  HfModel imported = readHfModel(path("fused"));
  for (const auto &[name, tensor] : imported.params)
    EXPECT_EQ(tensor.values, params.at(name)) << name;

  // A directory mixing the two namings is refused, tensor by tensor.
  refs.erase(std::remove_if(refs.begin(), refs.end(),
                            [](const ckpt::TensorRef &ref) {
                              return ref.name ==
                                     "model.layers.1.mlp.experts.down_proj";
                            }),
             refs.end());
  ckpt::Safetensors legacy =
      ckpt::Safetensors::open(path("hf") + "/model.safetensors");
  std::vector<std::vector<float>> kept;
  kept.reserve(3);
  for (int e = 0; e < 3; ++e) {
    std::string name = "model.layers.1.block_sparse_moe.experts." +
                       std::to_string(e) + ".w2.weight";
    std::vector<float> &values = kept.emplace_back(240);
    legacy.readRaw(name, values.data(), 240 * 4);
    refs.push_back({name, ckpt::DType::F32, {24, 10}, values.data(), 240 * 4});
  }
  ckpt::writeSafetensors(path("fused") + "/model.safetensors", refs,
                         {{"format", "pt"}});
  try {
    readHfModel(path("fused"));
    ADD_FAILURE() << "a mixed directory was accepted";
  } catch (const InteropError &error) {
    EXPECT_NE(std::string(error.what()).find("is missing"), std::string::npos)
        << error.what();
  }
}

// MixtralConfig's fields and transformers' defaults for absent ones.
TEST_F(HfMoeTest, MixtralConfigReadsAsFeatures) {
  nlohmann::json config = hfConfig(mixtralConfig(), "float32");
  ModelConfig read = fromHfConfig(config, "config.json");
  EXPECT_EQ(modelToJson(read), modelToJson(mixtralConfig()));
  EXPECT_EQ(read.expertWidth(), 10);
  EXPECT_EQ(read.moeEvery, 1);
  EXPECT_EQ(read.router, "softmax");
  EXPECT_EQ(read.capacityFactor, 0.0);

  // transformers 5's spelling of the base; absent fields are
  // MixtralConfig's: 8 experts, top-2, aux 0.001, epsilon 1e-5, theta 1e6,
  // no window.
  nlohmann::json modern = {{"model_type", "mixtral"},
                           {"vocab_size", 52},
                           {"hidden_size", 24},
                           {"intermediate_size", 10},
                           {"num_hidden_layers", 1},
                           {"num_attention_heads", 6},
                           {"num_key_value_heads", 2},
                           {"max_position_embeddings", 64},
                           {"head_dim", nullptr},
                           {"output_router_logits", false}};
  read = fromHfConfig(modern, "config.json");
  EXPECT_EQ(read.experts, 8);
  EXPECT_EQ(read.topK, 2);
  EXPECT_EQ(read.auxLossCoef, 0.001);
  EXPECT_EQ(read.normEpsilon, 1e-5);
  EXPECT_EQ(read.ropeTheta, 1e6);
  EXPECT_EQ(read.slidingWindow, 0);
  EXPECT_EQ(read.family, "mixtral");
  modern["rope_parameters"] = {{"rope_type", "default"},
                               {"rope_theta", 5e5}};
  modern["router_aux_loss_coef"] = 0.0;
  modern["sliding_window"] = 16;
  modern["norm_topk_prob"] = true; // Mixtral's own behaviour: accepted.
  read = fromHfConfig(modern, "config.json");
  EXPECT_EQ(read.ropeTheta, 5e5);
  EXPECT_EQ(read.auxLossCoef, 0.0);
  EXPECT_EQ(read.slidingWindow, 16);
}

// Every refusal of a Mixtral config.json, one line naming the field.
TEST_F(HfMoeTest, MixtralConfigRefusals) {
  nlohmann::json base = hfConfig(mixtralConfig(), "float32");
  auto with = [&](const std::string &key, nlohmann::json value) {
    nlohmann::json config = base;
    config[key] = std::move(value);
    return refusal(config);
  };
  EXPECT_EQ(with("router_jitter_noise", 0.01),
            "config.json: router_jitter_noise = 0.01 cannot be expressed: "
            "partition's router has no jitter noise");
  EXPECT_EQ(with("num_experts_per_tok", 4),
            "config.json: num_experts_per_tok = 4 exceeds num_local_experts "
            "= 3");
  EXPECT_EQ(with("num_local_experts", 0),
            "config.json: num_local_experts must be a positive integer, got 0");
  EXPECT_EQ(with("router_aux_loss_coef", -1.0),
            "config.json: router_aux_loss_coef must be a finite number, not "
            "negative, got -1.0");
  EXPECT_EQ(with("attention_bias", true),
            "config.json: attention_bias = true cannot be expressed: a "
            "mixtral model's attention biases are fixed by its family (none)");
  EXPECT_EQ(with("norm_topk_prob", false),
            "config.json: norm_topk_prob = false cannot be expressed: top-k "
            "gates left unnormalised (not Mixtral's routing)");
  EXPECT_EQ(with("shared_expert_intermediate_size", 20),
            "config.json: shared_expert_intermediate_size = 20 cannot be "
            "expressed: shared experts (not Mixtral's routing)");
  EXPECT_EQ(with("moe_intermediate_size", 12),
            "config.json: moe_intermediate_size = 12 cannot be expressed: an "
            "expert width apart from intermediate_size (not Mixtral's "
            "routing)");
  EXPECT_EQ(with("decoder_sparse_step", 2),
            "config.json: decoder_sparse_step = 2 cannot be expressed: dense "
            "layers between the MoE layers (not Mixtral's routing)");
  EXPECT_EQ(with("mlp_only_layers", nlohmann::json::array({0})),
            "config.json: mlp_only_layers = [0] cannot be expressed: dense "
            "layers among the MoE layers (not Mixtral's routing)");
  EXPECT_EQ(with("scoring_func", "sigmoid"),
            "config.json: scoring_func = \"sigmoid\" cannot be expressed: a "
            "router scoring other than softmax (not Mixtral's routing)");
  EXPECT_EQ(with("router_z_loss_coef", 0.001),
            "config.json: router_z_loss_coef = 0.001 cannot be expressed: a "
            "router z-loss (not Mixtral's routing)");
  EXPECT_EQ(with("layer_types", nlohmann::json::array(
                             {"sliding_attention", "full_attention"})),
            "config.json: layer_types holds \"sliding_attention\", which "
            "cannot be expressed: only \"full_attention\" layers are "
            "supported (sliding_window with layer_types is not)");
  EXPECT_EQ(with("hidden_act", "gelu"),
            "config.json: hidden_act = \"gelu\" cannot be expressed: "
            "partition's Llama MLP is SwiGLU (silu)");
}

// What MixtralForCausalLM cannot compute is refused at export, before
// anything is written; a dense model is unaffected.
TEST_F(HfMoeTest, ExportRefusesWhatMixtralCannotExpress) {
  struct Case {
    std::function<void(ModelConfig &)> change;
    std::string message;
  };
  const std::string tail = ", which transformers' MixtralForCausalLM cannot "
                           "express";
  std::vector<Case> cases = {
      {[](ModelConfig &c) { c.sharedExperts = 1; },
       "the model's mixture of experts has shared experts (1)" + tail},
      {[](ModelConfig &c) { c.moeEvery = 2; },
       "the model's mixture of experts has moe_every 2 (Mixtral's every "
       "layer is a MoE layer)" + tail},
      {[](ModelConfig &c) { c.capacityFactor = 1.25; },
       "the model's mixture of experts has a capacity factor (1.25; Mixtral "
       "is dropless)" + tail},
      {[](ModelConfig &c) { c.router = "sigmoid"; },
       "the model's mixture of experts has router sigmoid (Mixtral's is "
       "softmax, top-k, renormalised)" + tail},
      {[](ModelConfig &c) { c.router = "softmax-topk"; },
       "the model's mixture of experts has router softmax-topk (Mixtral's "
       "is softmax, top-k, renormalised)" + tail},
      {[](ModelConfig &c) { c.zLossCoef = 0.001; },
       "the model's mixture of experts has a router z-loss (coefficient "
       "0.001)" + tail},
      {[](ModelConfig &c) { c.loadBalance = "aux-free"; },
       "the model's mixture of experts has aux-free load balancing "
       "(DeepSeek-V3's routing bias; Mixtral has none)" + tail},
      {[](ModelConfig &c) { c.family = "mistral"; },
       "a mistral model with experts has no transformers class; a mixture "
       "of experts exports as family mixtral (MixtralForCausalLM) only"},
  };
  for (const Case &test : cases) {
    ModelConfig config = mixtralConfig();
    test.change(config);
    fs::remove_all(path("ckpt"));
    writeCheckpoint(path("ckpt"), config);
    EXPECT_EQ(exportRefusal(path("ckpt"), path("out")), test.message);
    EXPECT_FALSE(fs::exists(path("out")));
  }
  // load_balance none exports as a coefficient of 0.
  ModelConfig none = mixtralConfig();
  none.loadBalance = "none";
  fs::remove_all(path("ckpt"));
  writeCheckpoint(path("ckpt"), none);
  exportHf(path("ckpt"), path("out"), "fp32");
  nlohmann::json written;
  std::ifstream(path("out") + "/config.json") >> written;
  EXPECT_EQ(written["router_aux_loss_coef"], 0.0);
  EXPECT_EQ(written["output_router_logits"], false);
}

// The checkpoint metadata carries the MoE fields (partition-export reads
// a mixtral checkpoint of partition-run's) and refuses unknown ones still.
TEST_F(HfMoeTest, ModelJsonCarriesTheExperts) {
  ModelConfig config = mixtralConfig();
  config.expertFfn = 14;
  nlohmann::json model = modelToJson(config);
  EXPECT_EQ(model["experts"], 3);
  EXPECT_EQ(model["expert_ffn"], 14);
  EXPECT_EQ(model["router"], "softmax");
  EXPECT_EQ(modelToJson(modelFromJson(model, "m")), model);
  model["expert_bias"] = true;
  EXPECT_THROW(modelFromJson(model, "m"), InteropError);
  // A dense model has no MoE fields.
  config.experts = config.topK = config.expertFfn = 0;
  config.family = "mistral";
  EXPECT_FALSE(modelToJson(config).contains("experts"));
}
