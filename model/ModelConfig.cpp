//===- ModelConfig.cpp - presets and validation ---------------------------===//

#include "model/ModelConfig.h"

#include "llvm/Support/CheckedArithmetic.h"

#include <algorithm>
#include <cmath>
#include <sstream>

namespace partition::model {

const char *archName(Arch arch) {
  return arch == Arch::GPT2 ? "gpt2" : "llama";
}

std::optional<Arch> parseArch(const std::string &name) {
  if (name == "gpt2")
    return Arch::GPT2;
  if (name == "llama")
    return Arch::Llama;
  return std::nullopt;
}

std::string ModelConfig::familyName() const {
  return family.empty() ? std::string(archName(arch)) : family;
}

const std::vector<std::string> &llamaFamilies() {
  static const std::vector<std::string> families = {"llama", "mistral",
                                                    "qwen2", "mixtral"};
  return families;
}

int64_t ModelConfig::expertCapacity() const {
  if (capacityFactor <= 0.0 || experts <= 0)
    return seqLen;
  double rows = std::ceil(capacityFactor * double(topK) * double(seqLen) /
                          double(experts));
  return std::clamp<int64_t>(int64_t(std::min(rows, 9e18)), 1, seqLen);
}

std::optional<int64_t> defaultFfn(Arch arch, int64_t hidden) {
  if (arch == Arch::GPT2)
    return llvm::checkedMul(hidden, int64_t(4));
  std::optional<int64_t> eight = llvm::checkedMul(hidden, int64_t(8));
  std::optional<int64_t> twoThirds =
      eight ? llvm::checkedAdd(*eight, int64_t(2 + 3 * 255)) : std::nullopt;
  if (!twoThirds)
    return std::nullopt;
  // ((8C + 2) / 3 + 255) / 256 * 256, as (8C + 2 + 3 * 255) / 3 / 256 * 256.
  return *twoThirds / 3 / 256 * 256;
}

namespace {

ModelConfig gpt2(int64_t layers, int64_t hidden, int64_t heads, int64_t vocab,
                 int64_t seqLen, int64_t batch) {
  ModelConfig c;
  c.arch = Arch::GPT2;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kvHeads = heads;
  c.ffn = 4 * hidden;
  c.vocab = vocab;
  c.seqLen = seqLen;
  c.positions = seqLen;
  c.batch = batch;
  return c;
}

ModelConfig llama(int64_t layers, int64_t hidden, int64_t heads,
                  int64_t kvHeads, int64_t ffn, int64_t vocab, int64_t seqLen,
                  int64_t batch) {
  ModelConfig c;
  c.arch = Arch::Llama;
  c.layers = layers;
  c.hidden = hidden;
  c.heads = heads;
  c.kvHeads = kvHeads;
  c.ffn = ffn;
  c.vocab = vocab;
  c.seqLen = seqLen;
  c.batch = batch;
  return c;
}

/// RoPE scaling "llama3" (Llama 3.1 / 3.2).
ModelConfig llama3Scaling(ModelConfig c, double factor, int64_t original) {
  c.ropeScaling = "llama3";
  c.ropeFactor = factor;
  c.ropeLowFreqFactor = 1.0;
  c.ropeHighFreqFactor = 4.0;
  c.ropeOriginalContext = original;
  return c;
}

/// Sliding-window attention (Mistral).
ModelConfig slidingWindow(ModelConfig c, int64_t window) {
  c.slidingWindow = window;
  return c;
}

/// A mixture of experts: E experts of width F, top-k, the aux-loss
/// coefficient.
ModelConfig moe(ModelConfig c, int64_t experts, int64_t topK, int64_t width,
                double auxCoef) {
  c.experts = experts;
  c.topK = topK;
  c.expertFfn = width == c.ffn ? 0 : width;
  c.auxLossCoef = auxCoef;
  return c;
}

/// A Llama-arch model of a newer family: its context, norm epsilon, rotary
/// base, head and biases.
ModelConfig family(ModelConfig c, const char *name, int64_t context,
                   double epsilon, double theta, bool tied, bool qkvBias) {
  c.family = name;
  c.positions = context;
  c.normEpsilon = epsilon;
  c.ropeTheta = theta;
  c.tieEmbedding = tied;
  c.qkvBias = qkvBias;
  return c;
}

// GPT-2 shapes from the OpenAI release; Llama 2 shapes from Meta's release
// (the 70B model is the GQA one: 8 key/value heads).
const std::vector<std::pair<std::string, ModelConfig>> &presets() {
  static const std::vector<std::pair<std::string, ModelConfig>> table = {
      {"gpt2-tiny", gpt2(2, 64, 4, 256, 64, 4)},
      {"gpt2-124m", gpt2(12, 768, 12, 50257, 1024, 8)},
      {"gpt2-350m", gpt2(24, 1024, 16, 50257, 1024, 8)},
      {"gpt2-1.5b", gpt2(48, 1600, 25, 50257, 1024, 4)},
      {"llama-tiny", llama(2, 64, 4, 2, 176, 256, 64, 4)},
      {"llama-7b", llama(32, 4096, 32, 32, 11008, 32000, 4096, 1)},
      {"llama-70b", llama(80, 8192, 64, 8, 28672, 32000, 4096, 1)},
      // The config.json of each release: Meta-Llama-3-8B (theta 500000,
      // 8k context), Llama-3.2-1B (tied head, llama3 RoPE scaling by 32
      // from 8k to a 128k context), Mistral-7B-v0.1 (a 4096-token sliding
      // window in a 32k context, theta 10000, vocabulary 32000),
      // Qwen2.5-7B (q/k/v biases, epsilon 1e-6).
      {"llama3-8b", family(llama(32, 4096, 32, 8, 14336, 128256, 8192, 1),
                           "llama", 8192, 1e-5, 500000.0, false, false)},
      {"llama3.2-1b",
       llama3Scaling(family(llama(16, 2048, 32, 8, 8192, 128256, 8192, 1),
                            "llama", 131072, 1e-5, 500000.0, true, false),
                     32.0, 8192)},
      {"mistral-7b",
       slidingWindow(family(llama(32, 4096, 32, 8, 14336, 32000, 4096, 1),
                            "mistral", 32768, 1e-5, 10000.0, false, false),
                     4096)},
      {"qwen2.5-7b", family(llama(28, 3584, 28, 4, 18944, 152064, 4096, 1),
                            "qwen2", 32768, 1e-6, 1000000.0, false, true)},
      // The same features at test sizes (2 layers, GQA, vocabulary 256, a
      // context twice the training sequence).
      {"llama3-tiny", family(llama(2, 64, 4, 2, 176, 256, 64, 4), "llama",
                             128, 1e-5, 500000.0, false, false)},
      // Its scaling from an original context of 64: a head of 16 has a
      // pair in each band of the llama3 rule (kept, interpolated, divided).
      {"llama3.2-tiny",
       llama3Scaling(family(llama(2, 64, 4, 2, 176, 256, 64, 4), "llama", 128,
                            1e-5, 500000.0, true, false),
                     8.0, 64)},
      {"mistral-tiny", family(llama(2, 64, 4, 2, 176, 256, 64, 4), "mistral",
                              128, 1e-5, 1000000.0, false, false)},
      {"qwen2-tiny", family(llama(2, 64, 4, 2, 176, 256, 64, 4), "qwen2",
                            128, 1e-6, 1000000.0, false, true)},
      // Mixtral-8x7B-v0.1's config.json: 8 experts of 14336, top-2, a 32k
      // context, theta 1e6, router_aux_loss_coef 0.02; and its test size
      // (4 experts of 96, top-2).
      {"mixtral-8x7b",
       moe(family(llama(32, 4096, 32, 8, 14336, 32000, 4096, 1), "mixtral",
                  32768, 1e-5, 1000000.0, false, false),
           8, 2, 14336, 0.02)},
      {"mixtral-tiny",
       moe(family(llama(2, 64, 4, 2, 176, 256, 64, 4), "mixtral", 128, 1e-5,
                  1000000.0, false, false),
           4, 2, 96, 0.02)},
  };
  return table;
}

} // namespace

const std::vector<std::string> &presetNames() {
  static const std::vector<std::string> names = [] {
    std::vector<std::string> result;
    for (const auto &[name, config] : presets())
      result.push_back(name);
    return result;
  }();
  return names;
}

std::optional<ModelConfig> getPreset(const std::string &name) {
  for (const auto &[presetName, config] : presets())
    if (presetName == name)
      return config;
  return std::nullopt;
}

std::optional<int64_t> parameterCount(const ModelConfig &c) {
  bool overflow = false;
  auto mul = [&](int64_t a, int64_t b) {
    int64_t out = 0;
    overflow = overflow || __builtin_mul_overflow(a, b, &out);
    return out;
  };
  auto add = [&](int64_t a, int64_t b) {
    int64_t out = 0;
    overflow = overflow || __builtin_add_overflow(a, b, &out);
    return out;
  };
  for (int64_t size : {c.layers, c.hidden, c.heads, c.kvHeads, c.ffn, c.vocab})
    if (size <= 0)
      return std::nullopt;
  const int64_t C = c.hidden, F = c.ffn;
  // `layer`: a layer without its feed-forward block; `dense`: that block.
  int64_t total = 0, layer = 0, dense = 0;
  if (c.arch == Arch::GPT2) {
    // wte, wpe, ln_f; per layer ln_1, ln_2 (weight and bias), q, k, v and
    // the attention projection (C x C and a bias each); the MLP's c_fc
    // (C x F, bias F) and c_proj (F x C, bias C). The LM head is wte.
    total = add(add(mul(c.vocab, C), mul(std::max<int64_t>(c.positions, 0), C)),
                mul(2, C));
    layer = add(mul(4, C), mul(4, add(mul(C, C), C)));
    dense = add(add(mul(C, F), F), add(mul(F, C), C));
  } else {
    // The embedding, the final norm and the output unless tied; per layer
    // two norms, wq and wo (C x C), wk and wv (C x kv-heads x head dim),
    // the biases it has (q, k, v; the output projection's); the SwiGLU's
    // three C x F matrices.
    int64_t kv = mul(c.kvHeads, c.hidden / c.heads);
    total = add(mul(c.tieEmbedding ? 1 : 2, mul(c.vocab, C)), C);
    layer = add(add(mul(2, C), mul(2, mul(C, C))), mul(2, mul(C, kv)));
    if (c.qkvBias)
      layer = add(layer, add(C, mul(2, kv)));
    if (c.outputBias)
      layer = add(layer, C);
    dense = mul(3, mul(C, F));
  }
  // A MoE layer's block: the router (E x C) and three C x Fe matrices per
  // expert, routed or shared.
  int64_t moeLayers = c.moeLayers();
  int64_t sparse = add(mul(c.experts, C),
                       mul(add(c.experts, c.sharedExperts),
                           mul(3, mul(C, c.expertWidth()))));
  total = add(total, mul(c.layers, layer));
  total = add(total, mul(c.layers - moeLayers, dense));
  total = add(total, mul(moeLayers, sparse));
  if (overflow)
    return std::nullopt;
  return total;
}

namespace {

/// The mixture-of-experts settings (docs/moe.md), each refusal naming
/// the flag to change.
void validateExperts(const ModelConfig &c, std::vector<std::string> &problems) {
  auto field = [](const char *name, auto value) {
    std::ostringstream os;
    os << name << " (" << value << ")";
    return os.str();
  };
  if (c.experts < 0)
    problems.push_back(field("experts", c.experts) +
                       " must be positive (0 for a dense model)");
  if (c.family == "mixtral" && c.experts <= 0)
    problems.push_back("family mixtral is a mixture of experts: give "
                       "--experts and --top-k");
  if (c.family == "mixtral" && (c.qkvBias || c.outputBias))
    problems.push_back("family mixtral has no attention biases");
  if (c.experts <= 0) {
    if (c.topK != 0 || c.sharedExperts != 0 || c.expertFfn != 0 ||
        c.capacityFactor != 0.0)
      problems.push_back("--top-k, --shared-experts, --expert-ffn and "
                         "--capacity-factor need --experts");
    return;
  }
  if (c.topK < 1 || c.topK > c.experts)
    problems.push_back(field("top-k", c.topK) + " must be in [1, " +
                       field("experts", c.experts) + "]");
  if (c.moeEvery < 1 || (c.layers > 0 && c.moeEvery > c.layers))
    problems.push_back(field("moe-every", c.moeEvery) +
                       " must be in [1, layers]: layer l is a MoE layer "
                       "when (l + 1) % moe-every == 0");
  if (c.sharedExperts < 0)
    problems.push_back(field("shared-experts", c.sharedExperts) +
                       " must not be negative");
  if (c.expertFfn < 0)
    problems.push_back(field("expert-ffn", c.expertFfn) +
                       " must be positive (0: --ffn)");
  if (!(c.capacityFactor >= 0.0) || !std::isfinite(c.capacityFactor))
    problems.push_back(field("capacity-factor", c.capacityFactor) +
                       " must be positive (0 for dropless)");
  if (c.router != "softmax" && c.router != "softmax-topk" &&
      c.router != "sigmoid")
    problems.push_back("router '" + c.router +
                       "' is not one of softmax, softmax-topk, sigmoid");
  if (c.loadBalance != "aux-loss" && c.loadBalance != "aux-free" &&
      c.loadBalance != "none")
    problems.push_back("load balance '" + c.loadBalance +
                       "' is not one of aux-loss, aux-free, none");
  if (!(c.biasUpdateRate >= 0.0) || !std::isfinite(c.biasUpdateRate))
    problems.push_back(field("bias-update-rate", c.biasUpdateRate) +
                       " must be finite and not negative");
  if (!(c.auxLossCoef >= 0.0) || !std::isfinite(c.auxLossCoef))
    problems.push_back(field("aux-loss-coef", c.auxLossCoef) +
                       " must be finite and not negative");
  if (!(c.zLossCoef >= 0.0) || !std::isfinite(c.zLossCoef))
    problems.push_back(field("z-loss-coef", c.zLossCoef) +
                       " must be finite and not negative");
}

} // namespace

std::string validate(const ModelConfig &c) {
  std::vector<std::string> problems;
  auto field = [](const char *name, int64_t value) {
    return std::string(name) + " (" + std::to_string(value) + ")";
  };
  const std::pair<const char *, int64_t> sizes[] = {
      {"layers", c.layers}, {"hidden", c.hidden},   {"heads", c.heads},
      {"kv-heads", c.kvHeads}, {"ffn", c.ffn},     {"vocab", c.vocab},
      {"seq-len", c.seqLen}, {"batch", c.batch}};
  for (const auto &[name, value] : sizes)
    if (value <= 0)
      problems.push_back(field(name, value) + " must be positive");
  // Ceilings, before any IR is built: the IR and the runtime's tables grow
  // with the layers, token ids are i32, and the parameters bound the
  // memory every tool sizes.
  if (c.layers > kMaxLayers)
    problems.push_back(field("layers", c.layers) + " exceeds the ceiling of " +
                       std::to_string(kMaxLayers) + " layers");
  if (c.vocab > kMaxVocab)
    problems.push_back(field("vocab", c.vocab) + " exceeds " +
                       std::to_string(kMaxVocab) +
                       " (2^31-1: token ids are i32)");
  bool positive = true;
  for (const auto &[name, value] : sizes)
    positive = positive && value > 0;
  if (positive && c.layers <= kMaxLayers && c.vocab <= kMaxVocab &&
      c.heads <= c.hidden) {
    std::optional<int64_t> params = parameterCount(c);
    if (!params || *params > kMaxParameters)
      problems.push_back(
          "the model's parameters (" +
          (params ? std::to_string(*params) : std::string("beyond 2^63")) +
          ") exceed the ceiling of 2^48 (" + std::to_string(kMaxParameters) +
          "); give smaller hidden, ffn, vocab or layers");
  }
  if (c.arch == Arch::GPT2 && c.seqLen > 0 && c.positions < c.seqLen)
    problems.push_back(field("positions", c.positions) +
                       " must be at least " + field("seq-len", c.seqLen));
  if (c.heads > 0 && c.hidden > 0 && c.hidden % c.heads != 0)
    problems.push_back(field("hidden", c.hidden) +
                       " is not divisible by " + field("heads", c.heads));
  if (c.heads > 0 && c.kvHeads > 0 && c.heads % c.kvHeads != 0)
    problems.push_back(field("kv-heads", c.kvHeads) + " does not divide " +
                       field("heads", c.heads));
  if (c.arch == Arch::GPT2 && c.kvHeads > 0 && c.kvHeads != c.heads)
    problems.push_back(field("kv-heads", c.kvHeads) + " must equal " +
                       field("heads", c.heads) +
                       " for arch gpt2 (grouped-query attention is llama's)");
  if (c.arch == Arch::Llama && c.heads > 0 && c.hidden > 0 &&
      c.hidden % c.heads == 0 && c.headDim() % 2 != 0)
    problems.push_back("head dim hidden/heads (" + std::to_string(c.hidden) +
                       "/" + std::to_string(c.heads) + " = " +
                       std::to_string(c.headDim()) +
                       ") must be even for rotary embedding (arch llama)");
  if (!(c.normEpsilon > 0.0))
    problems.push_back("norm epsilon must be positive");
  if (!(c.ropeTheta > 0.0) || !std::isfinite(c.ropeTheta))
    problems.push_back("rope theta must be positive");
  if (!c.ropeScaling.empty()) {
    if (c.arch != Arch::Llama)
      problems.push_back("rope scaling is a setting of arch llama");
    else if (c.ropeScaling != "linear" && c.ropeScaling != "llama3" &&
             c.ropeScaling != "yarn")
      problems.push_back("rope scaling '" + c.ropeScaling +
                         "' is not one of linear, llama3, yarn");
    if (!(c.ropeFactor > 0.0) || !std::isfinite(c.ropeFactor))
      problems.push_back("rope factor must be positive");
    if (c.ropeScaling == "llama3" &&
        (!(c.ropeLowFreqFactor > 0.0) ||
         !(c.ropeHighFreqFactor > c.ropeLowFreqFactor) ||
         !std::isfinite(c.ropeHighFreqFactor) || c.ropeOriginalContext <= 0))
      problems.push_back("llama3 rope scaling needs 0 < low-freq factor < "
                         "high-freq factor and a positive original context");
    if (c.ropeScaling == "yarn" &&
        (!(c.ropeFactor >= 1.0) || !(c.ropeBetaSlow > 0.0) ||
         !(c.ropeBetaFast > c.ropeBetaSlow) || !std::isfinite(c.ropeBetaFast) ||
         c.ropeOriginalContext <= 0 || !(c.ropeTheta > 1.0)))
      problems.push_back("yarn rope scaling needs a factor of at least 1, "
                         "0 < beta-slow < beta-fast, a positive original "
                         "context and rope theta above 1");
  }
  if (c.slidingWindow < 0)
    problems.push_back(field("sliding window", c.slidingWindow) +
                       " must be positive (0 for none)");
  else if (c.slidingWindow > 0 && c.family != "mistral" &&
           c.family != "qwen2" && c.family != "mixtral")
    problems.push_back("a sliding window is a feature of families mistral, "
                       "qwen2 and mixtral, not of " + c.familyName());
  else if (c.slidingWindow > 0 && c.positions > 0 &&
           c.slidingWindow >= c.positions)
    problems.push_back(field("sliding window", c.slidingWindow) +
                       " must be below " + field("max context", c.positions) +
                       ": a window of the whole context masks nothing (give "
                       "none)");
  if (c.windowFromLayer != 0 &&
      (c.slidingWindow <= 0 || c.windowFromLayer < 0 ||
       c.windowFromLayer >= c.layers))
    problems.push_back(field("window from layer", c.windowFromLayer) +
                       " must be 0, or with a sliding window below " +
                       field("layers", c.layers));
  else if (c.windowFromLayer > 0 && c.family == "mistral")
    problems.push_back("family mistral's window is on every layer (window "
                       "from layer 0)");
  if (c.arch == Arch::Llama && c.seqLen > 0 && c.positions > 0 &&
      c.positions < c.seqLen)
    problems.push_back(field("max context", c.positions) +
                       " must be at least " + field("seq-len", c.seqLen));
  if (c.arch == Arch::GPT2 &&
      (c.tieEmbedding || c.qkvBias || c.outputBias ||
       (!c.family.empty() && c.family != "gpt2")))
    problems.push_back("tied head, q/k/v and output biases and family are "
                       "settings of arch llama (gpt2 ties its head and has "
                       "every bias)");
  if (c.arch == Arch::Llama && !c.family.empty() &&
      std::find(llamaFamilies().begin(), llamaFamilies().end(), c.family) ==
          llamaFamilies().end())
    problems.push_back("family '" + c.family +
                       "' is not one of llama, mistral, qwen2, mixtral");
  // What each family's transformers class can hold: Mistral has no
  // biases, Qwen2 has q/k/v biases and no output bias.
  if (c.family == "mistral" && (c.qkvBias || c.outputBias))
    problems.push_back("family mistral has no attention biases");
  if (c.family == "qwen2" && (!c.qkvBias || c.outputBias))
    problems.push_back("family qwen2 has q/k/v biases and no output bias");
  if (c.arch == Arch::Llama && (c.family.empty() || c.family == "llama") &&
      c.qkvBias != c.outputBias)
    problems.push_back("family llama has biases on q, k, v and the output "
                       "projection together (attention_bias) or none; q/k/v "
                       "biases alone are family qwen2's");

  validateExperts(c, problems);

  std::ostringstream line;
  for (size_t i = 0; i < problems.size(); ++i)
    line << (i ? "; " : "") << problems[i];
  return line.str();
}

} // namespace partition::model
