//===- HfConfig.cpp - model configurations: partition <-> transformers ----===//

#include "interop/HfConfig.h"

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
/// The epsilon and theta partition's models compute with (ModelConfig).
constexpr double kNormEpsilon = 1e-5;
constexpr double kRopeTheta = 10000.0;

std::string show(const json &value) {
  return value.dump(-1, ' ', false, json::error_handler_t::replace);
}

/// Reads the fields of one JSON object, each error naming the field.
class Fields {
public:
  /// `prefix` starts every error, followed by the key.
  Fields(const json &object, std::string prefix)
      : object(object), prefix(std::move(prefix)) {}

  bool has(const std::string &key) const {
    return object.contains(key) && !object.at(key).is_null();
  }

  [[noreturn]] void refuse(const std::string &key,
                           const std::string &problem) const {
    // Keys come from the file: escaped, so that the message is one line.
    throw InteropError(prefix + jsonreader::showKey(key) + " " + problem);
  }

  /// A positive integer; `fallback` (the transformers default) when absent.
  int64_t positive(const std::string &key,
                   std::optional<int64_t> fallback = std::nullopt) {
    used.insert(key);
    if (!has(key)) {
      if (fallback)
        return *fallback;
      refuse(key, "is missing; it must be a positive integer");
    }
    const json &value = object.at(key);
    if (!value.is_number_integer() || value.get<int64_t>() <= 0)
      refuse(key, "must be a positive integer, got " + show(value));
    return value.get<int64_t>();
  }

  std::optional<int64_t> optionalPositive(const std::string &key) {
    if (!has(key)) {
      used.insert(key);
      return std::nullopt;
    }
    return positive(key);
  }

  bool boolean(const std::string &key, bool fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_boolean())
      refuse(key, "must be true or false, got " + show(value));
    return value.get<bool>();
  }

  std::string string(const std::string &key, const std::string &fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_string())
      refuse(key, "must be a string, got " + show(value));
    return value.get<std::string>();
  }

  double number(const std::string &key, double fallback) {
    used.insert(key);
    if (!has(key))
      return fallback;
    const json &value = object.at(key);
    if (!value.is_number())
      refuse(key, "must be a number, got " + show(value));
    return value.get<double>();
  }

  /// Refuses `key` unless it equals `expected` (absent: `fallback`).
  void requireBool(const std::string &key, bool fallback, bool expected,
                   const std::string &why) {
    if (boolean(key, fallback) != expected)
      refuse(key, "= " + std::string(expected ? "false" : "true") +
                      " cannot be expressed: " + why);
  }

  void requireNumber(const std::string &key, double fallback, double expected,
                     const std::string &why) {
    double value = number(key, fallback);
    if (value != expected)
      refuse(key, "= " + (has(key) ? show(object.at(key)) : show(fallback)) +
                      (has(key) ? "" : " (the transformers default)") +
                      " cannot be expressed: " + why);
  }

  const json &object;
  std::string prefix;
  std::set<std::string> used;
};

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
  f.requireNumber("layer_norm_epsilon", 1e-5, kNormEpsilon,
                  "partition's LayerNorm epsilon is 1e-05");
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

ModelConfig llamaFromHf(Fields &f) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.vocab = f.positive("vocab_size", 32000);
  c.hidden = f.positive("hidden_size", 4096);
  c.ffn = f.positive("intermediate_size", 11008);
  c.layers = f.positive("num_hidden_layers", 32);
  c.heads = f.positive("num_attention_heads", 32);
  c.kvHeads = f.positive("num_key_value_heads", c.heads);
  c.positions = f.positive("max_position_embeddings", 2048);
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
  f.requireNumber("rms_norm_eps", 1e-6, kNormEpsilon,
                  "partition's RMSNorm epsilon is 1e-05");
  f.requireBool("attention_bias", false, false,
                "partition's Llama has no biases");
  f.requireBool("mlp_bias", false, false, "partition's Llama has no biases");
  f.requireBool("tie_word_embeddings", false, false,
                "partition's Llama has an untied LM head (lm_head.weight)");
  f.used.insert("rope_scaling");
  if (f.has("rope_scaling"))
    f.refuse("rope_scaling",
             "= " + show(f.object.at("rope_scaling")) +
                 " cannot be expressed: partition's rotary embedding is "
                 "unscaled; only null is supported");
  // transformers 5 keeps theta and the rope type in "rope_parameters";
  // older versions use "rope_theta" and "rope_scaling".
  f.used.insert("rope_parameters");
  if (f.has("rope_parameters")) {
    const json &rope = f.object.at("rope_parameters");
    if (!rope.is_object())
      f.refuse("rope_parameters", "must be an object, got " + show(rope));
    Fields r(rope, f.prefix + "rope_parameters.");
    std::string type = r.string("rope_type", "default");
    if (type != "default")
      f.refuse("rope_parameters.rope_type",
               "= \"" + type +
                   "\" cannot be expressed: partition's rotary embedding is "
                   "unscaled; only \"default\" is supported");
    if (r.number("rope_theta", kRopeTheta) != kRopeTheta)
      f.refuse("rope_parameters.rope_theta",
               "= " + show(rope.at("rope_theta")) +
                   " cannot be expressed: partition's rotary theta is 10000");
    for (const auto &[key, value] : rope.items())
      if (!r.used.count(key) && !value.is_null())
        f.refuse("rope_parameters." + key,
                 "= " + show(value) +
                     " cannot be expressed: partition's rotary embedding is "
                     "unscaled");
  }
  f.requireNumber("rope_theta", kRopeTheta, kRopeTheta,
                  "partition's rotary theta is 10000");
  return c;
}

} // namespace

json modelToJson(const ModelConfig &c) {
  // The keys and types of ModelBuilder's xfmr.model attribute.
  return json{{"arch", model::archName(c.arch)},
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
  if (f.boolean("tied_embedding", c.tiedEmbedding()) != c.tiedEmbedding())
    f.refuse("tied_embedding", "disagrees with arch " + arch);
  for (const auto &[key, value] : model.items())
    if (!f.used.count(key))
      f.refuse(key, "is not known to this partition-export; export with the "
                    "partition build that wrote the checkpoint");
  if (std::string problems = model::validate(c); !problems.empty())
    throw InteropError(where + ": invalid model configuration: " + problems);
  return c;
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
              {"layer_norm_epsilon", kNormEpsilon},
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
    config = {{"architectures", {"LlamaForCausalLM"}},
              {"model_type", "llama"},
              {"vocab_size", c.vocab},
              {"hidden_size", c.hidden},
              {"intermediate_size", c.ffn},
              {"num_hidden_layers", c.layers},
              {"num_attention_heads", c.heads},
              {"num_key_value_heads", c.kvHeads},
              {"head_dim", c.headDim()},
              {"hidden_act", "silu"},
              {"max_position_embeddings", c.positions},
              {"rms_norm_eps", kNormEpsilon},
              {"rope_theta", kRopeTheta},
              {"rope_scaling", nullptr},
              {"attention_bias", false},
              {"attention_dropout", 0.0},
              {"mlp_bias", false},
              {"tie_word_embeddings", false},
              {"pretraining_tp", 1},
              {"initializer_range", 0.02}};
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
  if (type == "gpt2")
    c = gpt2FromHf(f);
  else if (type == "llama")
    c = llamaFromHf(f);
  else
    f.refuse("model_type",
             (f.has("model_type") ? "= " + show(config.at("model_type"))
                                  : std::string("is missing")) +
                 ": partition-import reads gpt2 and llama models only");

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
  if (std::string problems = model::validate(c); !problems.empty())
    throw InteropError(file + ": invalid model configuration: " + problems);
  return c;
}

} // namespace partition::interop
