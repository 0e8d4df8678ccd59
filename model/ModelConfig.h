//===- ModelConfig.h - transformer shapes, presets and checks ---*- C++ -*-===//
//
// The shape of a GPT-2 or Llama style model, the named presets, and the
// validation that turns an impossible configuration into one clear line.
// No MLIR here: tools and tests use it without building IR.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_MODEL_MODELCONFIG_H
#define PARTITION_MODEL_MODELCONFIG_H

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

namespace partition::model {

enum class Arch {
  /// LayerNorm, GELU MLP, learned positions, biases, tied LM head.
  GPT2,
  /// RMSNorm, SwiGLU MLP, rotary positions, grouped-query attention, no
  /// biases, untied LM head.
  Llama,
};

const char *archName(Arch arch);
std::optional<Arch> parseArch(const std::string &name);

struct ModelConfig {
  Arch arch = Arch::GPT2;
  int64_t layers = 0;
  int64_t hidden = 0;
  int64_t heads = 0;
  int64_t kvHeads = 0;
  /// Width of the feed-forward block (for Llama, of each SwiGLU branch).
  int64_t ffn = 0;
  int64_t vocab = 0;
  int64_t seqLen = 0;
  /// The model's maximum context, at least seqLen: for GPT-2 the rows of
  /// its learned position table (n_positions), so a model trained on short
  /// sequences keeps its full table; for Llama (rotary positions, no table)
  /// max_position_embeddings, which export keeps rather than the training
  /// sequence length.
  int64_t positions = 0;
  /// Sequences per forward pass: the micro-batch. Gradient accumulation over
  /// several micro-batches is an option of the training-step pass.
  int64_t batch = 0;
  /// The LayerNorm (GPT-2) or RMSNorm (Llama) epsilon.
  double normEpsilon = kDefaultNormEpsilon;
  /// The rotary base (Llama; 500000 for Llama 3, 1e6 for Mistral/Qwen2).
  double ropeTheta = kDefaultRopeTheta;
  /// Llama only (GPT-2 always ties): the LM head is the token embedding
  /// table (Llama 3.2 1B/3B, small Qwen2 models).
  bool tieEmbedding = false;
  /// Llama only: biases on the q, k and v projections (Qwen2; Llama's
  /// attention_bias), and on the attention output projection (Llama's
  /// attention_bias, not Qwen2). GPT-2 has every bias.
  bool qkvBias = false;
  bool outputBias = false;
  /// RoPE scaling (Llama only; transformers' rope_type): none; "linear"
  /// (every frequency divided by ropeFactor); "llama3" (Llama 3.1 / 3.2:
  /// wavelengths above originalContext / lowFreqFactor divided by the
  /// factor, below originalContext / highFreqFactor kept, interpolated
  /// between); "yarn" (pairs below a ramp set by ropeBetaFast and
  /// ropeBetaSlow rotations over originalContext kept, above it divided by
  /// the factor, cos and sin times 0.1 ln(factor) + 1:
  /// runtime/program/Rope.h).
  std::string ropeScaling;
  double ropeFactor = 1.0;
  double ropeLowFreqFactor = 1.0;
  double ropeHighFreqFactor = 4.0;
  int64_t ropeOriginalContext = 0;
  /// Sliding-window attention (families mistral and qwen2): a windowed
  /// layer's query at position t sees the keys at t - slidingWindow < s <= t
  /// only (transformers' sliding_window). 0 means none; a window is below
  /// the maximum context (one of at least the context masks nothing).
  int64_t slidingWindow = 0;
  /// The first windowed layer: the layers below it attend to every earlier
  /// position (Qwen2's max_window_layers); 0, every layer (Mistral's).
  int64_t windowFromLayer = 0;
  double ropeBetaFast = 32.0;
  double ropeBetaSlow = 1.0;
  /// The Hugging Face family a Llama-arch model is written as (model_type):
  /// "llama", "mistral" or "qwen2"; empty is the arch's own name. It names
  /// the model only: the features above decide what it computes.
  std::string family;

  /// Mixture of experts (docs/moe.md); 0 experts is a dense model. Layer l
  /// is a MoE layer iff (l + 1) % moeEvery == 0 (Qwen-MoE's
  /// decoder_sparse_step): its feed-forward block is a router over
  /// `experts` SwiGLU experts of width expertFfn (0: ffn), each token going
  /// through its topK best, plus `sharedExperts` experts every token goes
  /// through (one dense SwiGLU of sharedExperts x that width).
  int64_t experts = 0;
  int64_t topK = 0;
  int64_t moeEvery = 1;
  int64_t sharedExperts = 0;
  int64_t expertFfn = 0;
  /// Each expert takes at most ceil(capacityFactor x topK x seqLen /
  /// experts) tokens of a sequence (the token group), the rest dropped; 0
  /// is dropless.
  double capacityFactor = 0.0;
  /// The router's scoring: "softmax" (Mixtral), "softmax-topk" or "sigmoid"
  /// (DeepSeek-V3).
  std::string router = "softmax";
  /// "aux-loss" (Switch / GShard, with auxLossCoef and the router z-loss
  /// zLossCoef), "aux-free" (DeepSeek-V3's per-expert bias) or "none".
  std::string loadBalance = "aux-loss";
  double auxLossCoef = 0.01;
  double zLossCoef = 0.0;
  /// "aux-free": DeepSeek-V3's bias update speed (gamma): each step every
  /// expert's routing bias moves by this much against its load error.
  double biasUpdateRate = 0.001;

  static constexpr double kDefaultNormEpsilon = 1e-5;
  static constexpr double kDefaultRopeTheta = 10000.0;

  int64_t headDim() const { return hidden / heads; }
  bool tiedEmbedding() const { return arch == Arch::GPT2 || tieEmbedding; }
  /// family, or the arch's name when none is set.
  std::string familyName() const;

  bool isMoe() const { return experts > 0; }
  bool isMoeLayer(int64_t layer) const {
    return isMoe() && moeEvery > 0 && (layer + 1) % moeEvery == 0;
  }
  int64_t moeLayers() const { return isMoe() && moeEvery > 0 ? layers / moeEvery : 0; }
  /// The width of each expert's SwiGLU.
  int64_t expertWidth() const { return expertFfn > 0 ? expertFfn : ffn; }
  /// Rows per sequence and expert: the capacity, or the sequence (dropless).
  int64_t expertCapacity() const;
};

/// The Hugging Face families of the Llama arch (model_type values).
const std::vector<std::string> &llamaFamilies();

/// Names of the built-in presets, in a stable order.
const std::vector<std::string> &presetNames();
std::optional<ModelConfig> getPreset(const std::string &name);

/// The feed-forward width a model of this arch and hidden size gets when
/// none is given: 4C for GPT-2; for Llama 2/3 of 4C rounded up to a multiple
/// of 256 (Llama's rule, which gives 11008 for C = 4096). nullopt when it
/// does not fit 64 bits.
std::optional<int64_t> defaultFfn(Arch arch, int64_t hidden);

/// Ceilings checked before any IR is built (the IR grows with the layers;
/// token ids are i32; docs/reliability.md lists them).
inline constexpr int64_t kMaxLayers = 1024;
inline constexpr int64_t kMaxVocab = 2147483647; // 2^31 - 1
/// 2^48 (2.8e14), the bytes a machine can address taken as a count of
/// parameters: 4000 times llama-70b's 6.9e10, yet every parameter count,
/// and its fp32 bytes and AdamW state, fit int64 with room to spare.
inline constexpr int64_t kMaxParameters = int64_t(1) << 48;

/// The model's parameters (elements of every weight, as partition-gen
/// builds them), in checked arithmetic: nullopt when the count or any
/// product on the way does not fit int64, or a size is not positive.
std::optional<int64_t> parameterCount(const ModelConfig &config);

/// Returns an empty string for a valid configuration, else one line naming
/// every offending field with its value.
std::string validate(const ModelConfig &config);

} // namespace partition::model

#endif // PARTITION_MODEL_MODELCONFIG_H
