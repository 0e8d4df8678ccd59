//===- HfConfig.cpp - model configurations: partition <-> transformers ----===//

#include "interop/HfConfig.h"

#include "interop/HfFields.h"
#include "interop/HfMoe.h"
#include "interop/InteropError.h"
#include "support/JsonReader.h"

#include <algorithm>
#include <cmath>
#include <set>

using nlohmann::json;
using partition::model::Arch;
using partition::model::ModelConfig;

namespace partition::interop {
namespace {

/// The GPT-2 tokenizer's <|endoftext|>: the bos / eos of a model trained on
/// GPT-2 tokens (vocab 50257). Other vocabularies have no known special ids.
constexpr int64_t kGpt2EndOfText = 50256;
constexpr int64_t kGpt2Vocab = 50257;

ModelConfig gpt2FromHf(Fields &f) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  // Absent fields take GPT2Config's defaults, as from_pretrained does.
  c.vocab = f.positive("vocab_size", 50257);
  c.positions = f.positive("n_positions", 1024);
  c.hidden = f.positive("n_embd", 768);
  c.layers = f.positive("n_layer", 12);
  c.heads = f.positive("n_head", 12);
  c.kvHeads = c.heads;
  std::optional<int64_t> inner = f.optionalPositive("n_inner");
  c.ffn = inner ? *inner : 4 * c.hidden;
  std::string activation = f.string("activation_function", "gelu_new");
  if (activation != "gelu_new" && activation != "gelu_pytorch_tanh")
    f.refuse("activation_function",
             "= \"" + activation +
                 "\" cannot be expressed: partition's GPT-2 uses the tanh "
                 "GELU (gelu_new or gelu_pytorch_tanh)");
  c.normEpsilon = f.number("layer_norm_epsilon", 1e-5);
  if (!(c.normEpsilon > 0.0))
    f.refuse("layer_norm_epsilon", "must be a positive number, got " +
                                       show(f.object.at("layer_norm_epsilon")));
  f.requireBool("tie_word_embeddings", true, true,
                "partition's GPT-2 ties its LM head to wte");
  f.requireBool("scale_attn_weights", true, true,
                "partition's attention scales by 1/sqrt(head dim)");
  f.requireBool("scale_attn_by_inverse_layer_idx", false, false,
                "partition's attention does not scale by layer");
  f.requireBool("add_cross_attention", false, false,
                "partition's models are decoder-only");
  return c;
}

/// transformers' defaults where a family's config class differs from
/// LlamaConfig's (an absent field means the class default, as in
/// from_pretrained).
struct FamilyDefaults {
  int64_t vocab, hidden, ffn, layers, heads, positions;
  /// kv heads; 0: num_attention_heads.
  int64_t kvHeads;
  /// MistralConfig's and Qwen2Config's absent window (Qwen2's applies only
  /// with use_sliding_window).
  std::optional<int64_t> slidingWindow;
};

FamilyDefaults familyDefaults(const std::string &type) {
  if (type == "mistral")
    return {32000, 4096, 14336, 32, 32, 4096 * 32, 8, 4096};
  if (type == "qwen2")
    return {151936, 4096, 22016, 32, 32, 32768, 32, 4096};
  // MixtralConfig: no window unless one is given.
  if (type == "mixtral")
    return {32000, 4096, 14336, 32, 32, 4096 * 32, 8, std::nullopt};
  return {32000, 4096, 11008, 32, 32, 2048, 0, std::nullopt};
}

/// The rotary base and scaling of `f` into `c`: transformers 5 keeps them
/// in "rope_parameters", older versions in "rope_theta" and "rope_scaling".
/// "linear" and "llama3" scaling are read; any other type is refused by
/// name, and so is any parameter partition would not use.
void ropeFromHf(Fields &f, ModelConfig &c, double defaultTheta) {
  auto refuseScaling = [&](const std::string &key, const std::string &type) {
    f.refuse(key, "= \"" + type +
                      "\" cannot be expressed: RoPE scaling \"" + type +
                      "\" is not supported (only linear, llama3 and yarn "
                      "are)");
  };
  // The scaling's fields from one object (rope_scaling or rope_parameters);
  // `typeKey` names its type.
  auto readScaling = [&](const std::string &name, const json &object,
                         const std::string &typeKey, Fields &r) {
    std::string type = r.string(typeKey, "default");
    auto refuseUnused = [&](const std::string &why) {
      for (const auto &[key, value] : object.items())
        if (!r.used.count(key) && key != "rope_theta" && !value.is_null())
          f.refuse(name + "." + key,
                   "= " + show(value) + " cannot be expressed: " + why);
    };
    if (type == "default")
      return refuseUnused("unscaled RoPE takes no parameters besides "
                          "rope_theta");
    if (type != "linear" && type != "llama3" && type != "yarn")
      refuseScaling(name + "." + typeKey, type);
    if (!c.ropeScaling.empty() && c.ropeScaling != type)
      f.refuse(name + "." + typeKey, "= \"" + type +
                                         "\" disagrees with rope type \"" +
                                         c.ropeScaling + "\"");
    c.ropeScaling = type;
    auto positiveNumber = [&](const std::string &key,
                              std::optional<double> fallback) {
      if (!r.has(key) && !fallback)
        r.refuse(key, "is missing; RoPE scaling \"" + type + "\" needs it");
      double value = r.number(key, fallback.value_or(0.0));
      if (!(value > 0.0) || !std::isfinite(value))
        r.refuse(key, "must be a positive number, got " + show(object.at(key)));
      return value;
    };
    c.ropeFactor = positiveNumber("factor", std::nullopt);
    if (type == "llama3") {
      c.ropeLowFreqFactor = positiveNumber("low_freq_factor", std::nullopt);
      c.ropeHighFreqFactor = positiveNumber("high_freq_factor", std::nullopt);
    }
    if (type == "yarn") {
      // transformers' defaults (`or 32`, `or 1`). Its attention factor is
      // derived from the factor here: one given (attention_factor, or
      // mscale / mscale_all_dim as DeepSeek's) is refused, as is
      // truncate = false (an untruncated ramp).
      for (const char *key : {"attention_factor", "mscale", "mscale_all_dim"})
        if (r.has(key) && !object.at(key).is_null())
          f.refuse(name + "." + key,
                   "= " + show(object.at(key)) +
                       " cannot be expressed: partition derives yarn's "
                       "attention factor from its factor (0.1 ln factor + "
                       "1) and takes no other");
      c.ropeBetaFast = positiveNumber("beta_fast", 32.0);
      c.ropeBetaSlow = positiveNumber("beta_slow", 1.0);
      if (r.has("truncate") && r.boolean("truncate", true) == false)
        r.refuse("truncate", "= false cannot be expressed: yarn's ramp is "
                             "truncated to whole pairs (truncate = true, "
                             "transformers' default) only");
    }
    if (type == "llama3" || type == "yarn") {
      // transformers falls back to max_position_embeddings.
      double original = positiveNumber("original_max_position_embeddings",
                                        double(c.positions));
      if (original != std::floor(original) || original > 1e15)
        r.refuse("original_max_position_embeddings",
                 "must be a positive integer, got " + show(original));
      c.ropeOriginalContext = int64_t(original);
    }
    refuseUnused("RoPE scaling \"" + type + "\" takes no such parameter");
  };
  f.used.insert("rope_scaling");
  if (f.has("rope_scaling")) {
    const json &scaling = f.object.at("rope_scaling");
    if (!scaling.is_object())
      f.refuse("rope_scaling", "must be an object or null, got " +
                                   show(scaling));
    Fields r(scaling, f.prefix + "rope_scaling.");
    // Old files name the type "type", newer ones "rope_type".
    readScaling("rope_scaling", scaling,
                r.has("rope_type") ? "rope_type" : "type", r);
  }
  double theta = f.number("rope_theta", defaultTheta);
  f.used.insert("rope_parameters");
  if (f.has("rope_parameters")) {
    const json &rope = f.object.at("rope_parameters");
    if (!rope.is_object())
      f.refuse("rope_parameters", "must be an object, got " + show(rope));
    Fields r(rope, f.prefix + "rope_parameters.");
    double inner = r.number("rope_theta", theta);
    if (f.has("rope_theta") && inner != theta)
      f.refuse("rope_parameters.rope_theta",
               "= " + show(rope.at("rope_theta")) +
                   " disagrees with rope_theta = " +
                   show(f.object.at("rope_theta")));
    theta = inner;
    readScaling("rope_parameters", rope, "rope_type", r);
  }
  if (!(theta > 0.0) || !std::isfinite(theta))
    f.refuse("rope_theta", "must be a positive number, got " + show(theta));
  c.ropeTheta = theta;
}

/// Llama, Mistral and Qwen2: one architecture (RMSNorm, SwiGLU, RoPE, GQA)
/// with the features each family's config selects. Every field of these
/// config classes that changes what the model computes is read here, and
/// so is every such field of related families (a Mistral relabelled llama
/// keeps its sliding_window): a value partition cannot compute is refused
/// naming the feature, never dropped.
ModelConfig llamaFromHf(Fields &f, const std::string &type) {
  FamilyDefaults d = familyDefaults(type);
  ModelConfig c;
  c.arch = Arch::Llama;
  c.family = type == "llama" ? "" : type;
  c.vocab = f.positive("vocab_size", d.vocab);
  c.hidden = f.positive("hidden_size", d.hidden);
  c.ffn = f.positive("intermediate_size", d.ffn);
  c.layers = f.positive("num_hidden_layers", d.layers);
  c.heads = f.positive("num_attention_heads", d.heads);
  c.kvHeads = f.positive("num_key_value_heads", d.kvHeads ? d.kvHeads : c.heads);
  c.positions = f.positive("max_position_embeddings", d.positions);
  std::string activation = f.string("hidden_act", "silu");
  if (activation != "silu")
    f.refuse("hidden_act", "= \"" + activation +
                               "\" cannot be expressed: partition's Llama "
                               "MLP is SwiGLU (silu)");
  if (std::optional<int64_t> headDim = f.optionalPositive("head_dim");
      headDim && (c.hidden % c.heads != 0 || *headDim != c.hidden / c.heads))
    f.refuse("head_dim", "= " + std::to_string(*headDim) +
                             " cannot be expressed: partition's head dim is "
                             "hidden_size / num_attention_heads");
  // LlamaConfig, MistralConfig and Qwen2Config default to 1e-6,
  // MixtralConfig to 1e-5.
  c.normEpsilon = f.number("rms_norm_eps", type == "mixtral" ? 1e-5 : 1e-6);
  if (!(c.normEpsilon > 0.0))
    f.refuse("rms_norm_eps", "must be a positive number, got " +
                                 show(f.object.at("rms_norm_eps")));
  // MixtralConfig's absent base is 1e6 (its default_theta).
  ropeFromHf(f, c,
             type == "mixtral" ? 1e6 : ModelConfig::kDefaultRopeTheta);
  c.tieEmbedding = f.boolean("tie_word_embeddings", false);
  // Biases: Llama's attention_bias is on q, k, v and o; Qwen2 always has
  // q, k, v biases and none on o (its config has no such field, so one
  // given would be ignored by transformers: refused as ambiguous).
  if (type == "llama") {
    c.qkvBias = c.outputBias = f.boolean("attention_bias", false);
  } else {
    c.qkvBias = type == "qwen2";
    f.requireBool("attention_bias", false, false,
                  "a " + type + " model's attention biases are fixed by "
                  "its family (" + (c.qkvBias ? "q, k and v" : "none") + ")");
  }
  f.requireBool("mlp_bias", false, false,
                "MLP biases are not supported (partition's SwiGLU has none)");
  // Sliding-window attention, whatever the family calls it. An absent
  // window is the config class's 4096, null none; one of at least the
  // context is dropped by fromHfConfig, once the context is final.
  f.used.insert("sliding_window");
  f.used.insert("max_window_layers"); // Qwen2's, read with the window.
  auto window = [&] {
    return f.has("sliding_window") ? f.positive("sliding_window")
           : f.object.contains("sliding_window") ? 0
                                                 : d.slidingWindow.value_or(0);
  };
  if (type == "qwen2") {
    // Qwen2Config: the window only with use_sliding_window, and on the
    // layers from max_window_layers (default 28) on.
    if (f.boolean("use_sliding_window", false)) {
      c.slidingWindow = window();
      c.windowFromLayer = f.nonNegative("max_window_layers", 28);
    }
  } else if (type == "mistral" || type == "mixtral") {
    c.slidingWindow = window();
  } else if (f.has("sliding_window")) {
    // LlamaForCausalLM would ignore it: the config is probably a Mistral
    // relabelled, whose weights were trained with the window.
    f.refuse("sliding_window",
             "= " + show(f.object.at("sliding_window")) +
                 " cannot be expressed: a llama model has no sliding window "
                 "(sliding-window attention is model_type mistral's and "
                 "qwen2's); only null is");
  }
  f.used.insert("layer_types");
  if (f.has("layer_types")) {
    const json &types = f.object.at("layer_types");
    if (!types.is_array())
      f.refuse("layer_types", "must be a list, got " + show(types));
    if (type == "qwen2") {
      // Qwen2's layers compute as listed: the list must be the one its
      // config derives (windowed from max_window_layers on).
      json derived = json::array();
      for (int64_t i = 0; i < c.layers; ++i)
        derived.push_back(c.slidingWindow > 0 && i >= c.windowFromLayer
                              ? "sliding_attention"
                              : "full_attention");
      if (types != derived)
        f.refuse("layer_types",
                 "= " + show(types) +
                     " cannot be expressed: only a window on the layers from "
                     "max_window_layers on (with use_sliding_window) is "
                     "supported, " + show(derived) + " here");
    } else {
      for (const json &layer : types)
        if (layer != "full_attention")
          f.refuse("layer_types",
                   "holds " + show(layer) +
                       ", which cannot be expressed: only \"full_attention\" "
                       "layers are supported (sliding_window with "
                       "layer_types is not)");
    }
  }
  // Dropout would change the training step: partition trains without.
  if (double dropout = f.number("attention_dropout", 0.0); dropout != 0.0)
    f.refuse("attention_dropout",
             "= " + show(f.object.at("attention_dropout")) +
                 " cannot be expressed: partition trains without dropout");
  // Features of related families that these classes lack: present in a
  // relabelled config, they mean the weights were trained with them.
  const std::pair<const char *, const char *> foreign[] = {
      {"attn_logit_softcapping", "attention logit soft-capping"},
      {"final_logit_softcapping", "final logit soft-capping"},
      {"partial_rotary_factor", "partial rotary embedding"},
      {"query_pre_attn_scalar", "a query scale other than 1/sqrt(head dim)"},
      {"use_qk_norm", "q/k normalisation"},
      {"qk_layernorm", "q/k normalisation"},
      {"embedding_multiplier", "an embedding multiplier"},
      {"residual_multiplier", "a residual multiplier"},
      {"attention_multiplier", "an attention multiplier"},
      {"logits_scaling", "logit scaling"},
      {"no_rope_layers", "layers without rotary embedding"},
  };
  for (const auto &[key, feature] : foreign) {
    f.used.insert(key);
    if (!f.has(key))
      continue;
    const json &value = f.object.at(key);
    bool neutral = value == false || (std::string(key) == "partial_rotary_factor" && value == 1.0);
    if (!neutral)
      f.refuse(key, "= " + show(value) + " cannot be expressed: " + feature +
                        " is not supported");
  }
  if (type == "mixtral")
    mixtralFromHf(f, c);
  return c;
}

} // namespace

json modelToJson(const ModelConfig &c) {
  // The keys and types of ModelBuilder's xfmr.model attribute.
  json model{{"arch", model::archName(c.arch)},
              {"layers", c.layers},
              {"hidden", c.hidden},
              {"heads", c.heads},
              {"kv_heads", c.kvHeads},
              {"ffn", c.ffn},
              {"vocab", c.vocab},
              {"seq_len", c.seqLen},
              {"positions", c.positions},
              {"batch", c.batch},
              {"tied_embedding", c.tiedEmbedding()}};
  // ModelBuilder writes these only where they differ from the defaults.
  if (c.normEpsilon != ModelConfig::kDefaultNormEpsilon)
    model["norm_epsilon"] = c.normEpsilon;
  if (c.arch == Arch::Llama && c.ropeTheta != ModelConfig::kDefaultRopeTheta)
    model["rope_theta"] = c.ropeTheta;
  if (c.arch == Arch::Llama && !c.ropeScaling.empty()) {
    model["rope_scaling"] = c.ropeScaling;
    model["rope_factor"] = c.ropeFactor;
    if (c.ropeScaling == "llama3") {
      model["rope_low_freq_factor"] = c.ropeLowFreqFactor;
      model["rope_high_freq_factor"] = c.ropeHighFreqFactor;
      model["rope_original_context"] = c.ropeOriginalContext;
    }
    if (c.ropeScaling == "yarn") {
      model["rope_beta_fast"] = c.ropeBetaFast;
      model["rope_beta_slow"] = c.ropeBetaSlow;
      model["rope_original_context"] = c.ropeOriginalContext;
    }
  }
  if (c.slidingWindow > 0)
    model["sliding_window"] = c.slidingWindow;
  if (c.windowFromLayer > 0)
    model["window_from_layer"] = c.windowFromLayer;
  if (c.qkvBias)
    model["qkv_bias"] = true;
  if (c.outputBias)
    model["output_bias"] = true;
  if (!c.family.empty() && c.family != model::archName(c.arch))
    model["family"] = c.family;
  moeToJson(c, model);
  return model;
}

ModelConfig modelFromJson(const json &model, const std::string &where) {
  if (!model.is_object())
    throw InteropError(where + ": the \"model\" metadata is not a JSON object");
  Fields f(model, where + ": model metadata field ");
  ModelConfig c;
  std::string arch = f.string("arch", "");
  std::optional<Arch> parsed = model::parseArch(arch);
  if (!parsed)
    f.refuse("arch", "must be gpt2 or llama, got \"" + arch + "\"");
  c.arch = *parsed;
  c.layers = f.positive("layers");
  c.hidden = f.positive("hidden");
  c.heads = f.positive("heads");
  c.kvHeads = f.positive("kv_heads");
  c.ffn = f.positive("ffn");
  c.vocab = f.positive("vocab");
  c.seqLen = f.positive("seq_len");
  c.positions = f.positive("positions");
  c.batch = f.positive("batch");
  c.normEpsilon = f.number("norm_epsilon", ModelConfig::kDefaultNormEpsilon);
  c.ropeTheta = f.number("rope_theta", ModelConfig::kDefaultRopeTheta);
  c.ropeScaling = f.string("rope_scaling", "");
  c.ropeFactor = f.number("rope_factor", 1.0);
  c.ropeLowFreqFactor = f.number("rope_low_freq_factor", 1.0);
  c.ropeHighFreqFactor = f.number("rope_high_freq_factor", 4.0);
  c.ropeBetaFast = f.number("rope_beta_fast", 32.0);
  c.ropeBetaSlow = f.number("rope_beta_slow", 1.0);
  if (f.has("rope_original_context"))
    c.ropeOriginalContext = f.positive("rope_original_context");
  if (f.has("sliding_window"))
    c.slidingWindow = f.positive("sliding_window");
  if (f.has("window_from_layer"))
    c.windowFromLayer = f.positive("window_from_layer");
  c.qkvBias = f.boolean("qkv_bias", false);
  c.outputBias = f.boolean("output_bias", false);
  c.family = f.string("family", "");
  moeFromJson(f, c);
  bool tied = f.boolean("tied_embedding", c.tiedEmbedding());
  if (c.arch == Arch::Llama)
    c.tieEmbedding = tied;
  else if (!tied)
    f.refuse("tied_embedding", "disagrees with arch " + arch);
  for (const auto &[key, value] : model.items())
    if (!f.used.count(key))
      f.refuse(key, "is not known to this partition-export; export with the "
                    "partition build that wrote the checkpoint");
  if (std::string problems = model::validate(c); !problems.empty())
    throw InteropError(where + ": invalid model configuration: " + problems);
  return c;
}

/// transformers' rope_scaling object of `c`; null without scaling.
static json ropeScalingToHf(const ModelConfig &c) {
  if (c.ropeScaling.empty())
    return nullptr;
  json scaling = {{"rope_type", c.ropeScaling}, {"factor", c.ropeFactor}};
  if (c.ropeScaling == "llama3") {
    scaling["low_freq_factor"] = c.ropeLowFreqFactor;
    scaling["high_freq_factor"] = c.ropeHighFreqFactor;
    scaling["original_max_position_embeddings"] = c.ropeOriginalContext;
  }
  if (c.ropeScaling == "yarn") {
    scaling["beta_fast"] = c.ropeBetaFast;
    scaling["beta_slow"] = c.ropeBetaSlow;
    scaling["original_max_position_embeddings"] = c.ropeOriginalContext;
  }
  return scaling;
}

std::string hfArchitecture(const ModelConfig &c) {
  if (c.arch == Arch::GPT2)
    return "GPT2LMHeadModel";
  std::string family = c.familyName();
  return family == "mistral"   ? "MistralForCausalLM"
         : family == "qwen2"   ? "Qwen2ForCausalLM"
         : family == "mixtral" ? "MixtralForCausalLM"
                               : "LlamaForCausalLM";
}

json hfConfig(const ModelConfig &c, const std::string &dtype) {
  bool gpt2Tokens = c.arch == Arch::GPT2 && c.vocab == kGpt2Vocab;
  json special = gpt2Tokens ? json(kGpt2EndOfText) : json(nullptr);
  json config;
  if (c.arch == Arch::GPT2) {
    config = {{"architectures", {"GPT2LMHeadModel"}},
              {"model_type", "gpt2"},
              {"vocab_size", c.vocab},
              {"n_positions", c.positions},
              {"n_embd", c.hidden},
              {"n_layer", c.layers},
              {"n_head", c.heads},
              {"n_inner", c.ffn},
              {"activation_function", "gelu_new"},
              {"layer_norm_epsilon", c.normEpsilon},
              // partition trains without dropout.
              {"resid_pdrop", 0.0},
              {"embd_pdrop", 0.0},
              {"attn_pdrop", 0.0},
              {"scale_attn_weights", true},
              {"scale_attn_by_inverse_layer_idx", false},
              {"reorder_and_upcast_attn", false},
              {"tie_word_embeddings", true},
              {"initializer_range", 0.02}};
  } else {
    // One architecture, written as the family's transformers class.
    std::string family = c.familyName();
    config = {{"architectures", {hfArchitecture(c)}},
              {"model_type", family},
              {"vocab_size", c.vocab},
              {"hidden_size", c.hidden},
              {"intermediate_size", c.ffn},
              {"num_hidden_layers", c.layers},
              {"num_attention_heads", c.heads},
              {"num_key_value_heads", c.kvHeads},
              {"head_dim", c.headDim()},
              {"hidden_act", "silu"},
              {"max_position_embeddings", c.positions},
              {"rms_norm_eps", c.normEpsilon},
              {"rope_theta", c.ropeTheta},
              {"rope_scaling", ropeScalingToHf(c)},
              {"attention_dropout", 0.0},
              {"tie_word_embeddings", c.tieEmbedding},
              {"initializer_range", 0.02}};
    if (family == "llama") {
      // validate() keeps q/k/v and output biases together for llama.
      config["attention_bias"] = c.qkvBias;
      config["mlp_bias"] = false;
      config["pretraining_tp"] = 1;
    } else if (family == "mistral") {
      config["sliding_window"] =
          c.slidingWindow > 0 ? json(c.slidingWindow) : json(nullptr);
    } else if (family == "mixtral") {
      mixtralToHf(c, config);
    } else {
      bool window = c.slidingWindow > 0;
      config["use_sliding_window"] = window;
      config["sliding_window"] = window ? json(c.slidingWindow) : json(nullptr);
      config["max_window_layers"] = window ? c.windowFromLayer : c.layers;
    }
  }
  config["bos_token_id"] = special;
  config["eos_token_id"] = special;
  config["use_cache"] = true;
  config["dtype"] = dtype;
  config["partition_training"] = {{"seq_len", c.seqLen}, {"batch", c.batch}};
  return config;
}

json hfGenerationConfig(const ModelConfig &c) {
  json config = {{"_from_model_config", true}};
  if (c.arch == Arch::GPT2 && c.vocab == kGpt2Vocab) {
    config["bos_token_id"] = kGpt2EndOfText;
    config["eos_token_id"] = kGpt2EndOfText;
  }
  return config;
}

ModelConfig fromHfConfig(const json &config, const std::string &file,
                         const TrainingShape &shape) {
  if (!config.is_object())
    throw InteropError(file + ": not a JSON object; expected a transformers "
                              "config.json");
  Fields f(config, file + ": ");
  std::string type = f.string("model_type", "");
  ModelConfig c;
  const std::vector<std::string> &families = model::llamaFamilies();
  if (type == "gpt2")
    c = gpt2FromHf(f);
  else if (std::find(families.begin(), families.end(), type) != families.end())
    c = llamaFromHf(f, type);
  else
    f.refuse("model_type",
             (f.has("model_type") ? "= " + show(config.at("model_type"))
                                  : std::string("is missing")) +
                 ": partition-import reads gpt2, llama, mistral, qwen2 and "
                 "mixtral models only");

  // The training shape: flags, then what partition-export recorded, then
  // defaults.
  std::optional<int64_t> seqLen = shape.seqLen, batch = shape.batch;
  if (f.has("partition_training")) {
    const json &training = config.at("partition_training");
    if (!training.is_object())
      f.refuse("partition_training",
               "must be an object, got " + show(training));
    Fields t(training, file + ": partition_training.");
    if (!seqLen)
      seqLen = t.optionalPositive("seq_len");
    if (!batch)
      batch = t.optionalPositive("batch");
  }
  c.seqLen = seqLen ? *seqLen : std::min<int64_t>(c.positions, 1024);
  c.batch = batch ? *batch : 1;
  // Rotary positions have no table: a longer training sequence only
  // raises the context, as partition-gen does.
  if (c.arch == Arch::Llama)
    c.positions = std::max(c.positions, c.seqLen);
  // A window of the whole context, or on no layer, masks nothing beyond
  // causality, in transformers as here: no window.
  if (c.slidingWindow == 0 || c.slidingWindow >= c.positions ||
      c.windowFromLayer >= c.layers) {
    c.slidingWindow = 0;
    c.windowFromLayer = 0;
  }
  if (std::string problems = model::validate(c); !problems.empty())
    throw InteropError(file + ": invalid model configuration: " + problems);
  return c;
}

} // namespace partition::interop
