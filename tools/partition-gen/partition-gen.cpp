//===- partition-gen.cpp - emit a transformer's forward-plus-loss IR ------===//
//
//   partition-gen --preset gpt2-124m -o model.mlir
//   partition-gen --preset llama-tiny --layers 3 --kv-heads 1
//   partition-gen --arch llama --layers 2 --hidden 96 --heads 6 ...
//   partition-gen --preset qwen2-tiny --rope-theta 500000 --tie-embeddings
//   partition-gen --preset mistral-tiny --sliding-window 16
//   partition-gen --arch mixtral --preset llama-tiny --experts 4 --top-k 1
//   partition-gen --preset mixtral-tiny --capacity-factor 1.25
//
//===----------------------------------------------------------------------===//

#include "model/ModelBuilder.h"
#include "model/ModelConfig.h"
#include "model/ModelSizes.h"
#include "tools/common/CommandLine.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <algorithm>

using namespace partition::model;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("partition-gen options");

cl::opt<std::string> preset("preset", cl::desc("Starting configuration"),
                            cl::init("gpt2-tiny"), cl::cat(category));
cl::opt<std::string> arch("arch", cl::desc("gpt2 | llama | mixtral (llama with MoE layers)"), cl::cat(category));
cl::opt<int64_t> layers("layers", cl::desc("Transformer blocks"),
                        cl::cat(category));
cl::opt<int64_t> hidden("hidden", cl::desc("Model width C"),
                        cl::cat(category));
cl::opt<int64_t> heads("heads", cl::desc("Attention heads"),
                       cl::cat(category));
cl::opt<int64_t> kvHeads("kv-heads",
                         cl::desc("Key/value heads (grouped-query attention)"),
                         cl::cat(category));
cl::opt<int64_t> ffn("ffn", cl::desc("Feed-forward width"), cl::cat(category));
cl::opt<int64_t> vocab("vocab", cl::desc("Vocabulary size"),
                       cl::cat(category));
cl::opt<int64_t> seqLen("seq-len", cl::desc("Sequence length T"),
                        cl::cat(category));
cl::opt<int64_t> positions(
    "positions",
    cl::desc("The maximum context: rows of gpt2's learned position table, "
             "llama's max_position_embeddings (default: the preset's, "
             "raised to --seq-len)"),
    cl::cat(category));
cl::alias maxContext("max-context", cl::desc("Alias for --positions"),
                     cl::aliasopt(positions), cl::cat(category));
cl::opt<double> normEps("norm-eps",
                        cl::desc("LayerNorm / RMSNorm epsilon (default: the "
                                 "preset's, 1e-5 for gpt2 and llama-*)"),
                        cl::cat(category));
cl::opt<double> ropeTheta("rope-theta",
                          cl::desc("Rotary base (llama; default: the "
                                   "preset's, 10000 for llama-*)"),
                          cl::cat(category));
cl::opt<std::string> ropeScaling(
    "rope-scaling",
    cl::desc("RoPE scaling (llama): none | linear | llama3 | yarn (default: "
             "the preset's; llama3.2-* use llama3)"),
    cl::cat(category));
cl::opt<double> ropeFactor("rope-factor",
                           cl::desc("RoPE scaling factor (linear, llama3, "
                                    "yarn)"),
                           cl::cat(category));
cl::opt<double> ropeLowFreqFactor(
    "rope-low-freq-factor", cl::desc("llama3 scaling: low_freq_factor (1)"),
    cl::cat(category));
cl::opt<double> ropeHighFreqFactor(
    "rope-high-freq-factor", cl::desc("llama3 scaling: high_freq_factor (4)"),
    cl::cat(category));
cl::opt<double> ropeBetaFast(
    "rope-beta-fast", cl::desc("yarn scaling: beta_fast (32)"),
    cl::cat(category));
cl::opt<double> ropeBetaSlow(
    "rope-beta-slow", cl::desc("yarn scaling: beta_slow (1)"),
    cl::cat(category));
cl::opt<int64_t> ropeOriginalContext(
    "rope-original-context",
    cl::desc("llama3 and yarn scaling: original_max_position_embeddings"),
    cl::cat(category));
cl::opt<bool> tieEmbeddings(
    "tie-embeddings",
    cl::desc("LM head = token embedding (llama; gpt2 always ties)"),
    cl::cat(category));
cl::opt<bool> qkvBias("qkv-bias",
                      cl::desc("Biases on q, k, v (llama arch: family qwen2, "
                               "or llama with --output-bias)"),
                      cl::cat(category));
cl::opt<bool> outputBias(
    "output-bias",
    cl::desc("A bias on the attention output projection (llama)"),
    cl::cat(category));
cl::opt<std::string> family(
    "family",
    cl::desc("The Hugging Face family a llama-arch model exports as: llama "
             "| mistral | qwen2 (qwen2 implies --qkv-bias)"),
    cl::cat(category));
cl::opt<int64_t> slidingWindow(
    "sliding-window",
    cl::desc("Sliding-window attention (families mistral and qwen2): a "
             "query sees the last W positions, itself included; 0 for none "
             "(default: the preset's, 4096 for mistral-7b)"),
    cl::value_desc("W"), cl::cat(category));
cl::opt<int64_t> windowFromLayer(
    "window-from-layer",
    cl::desc("The first layer with the sliding window; the ones below "
             "attend fully (family qwen2's max_window_layers; default 0)"),
    cl::value_desc("N"), cl::cat(category));
// Mixture of experts (docs/moe.md).
cl::opt<int64_t> experts("experts",
                         cl::desc("Experts per MoE layer (0: a dense model; "
                                  "--arch mixtral: 8)"),
                         cl::cat(category));
cl::opt<int64_t> topK("top-k",
                      cl::desc("Experts each token goes through (--arch "
                               "mixtral: 2)"),
                      cl::cat(category));
cl::opt<int64_t> moeEvery("moe-every",
                          cl::desc("Every Nth layer is a MoE layer: layer l "
                                   "when (l + 1) % N == 0 (default 1)"),
                          cl::value_desc("N"), cl::cat(category));
cl::opt<int64_t> sharedExperts(
    "shared-experts",
    cl::desc("Experts every token goes through besides its top-k (Qwen-MoE, "
             "DeepSeek; default 0)"),
    cl::cat(category));
cl::opt<int64_t> expertFfn("expert-ffn",
                           cl::desc("Width of each expert's SwiGLU (default: "
                                    "--ffn)"),
                           cl::cat(category));
cl::opt<double> capacityFactor(
    "capacity-factor",
    cl::desc("Each expert takes at most ceil(C k T / E) tokens of a "
             "sequence, the rest dropped; 0 is dropless (default)"),
    cl::value_desc("C"), cl::cat(category));
cl::opt<std::string> router("router",
                            cl::desc("Router scoring: softmax (Mixtral) | "
                                     "softmax-topk | sigmoid (DeepSeek-V3)"),
                            cl::cat(category));
cl::opt<std::string> loadBalance(
    "load-balance",
    cl::desc("aux-loss (Switch / GShard; default) | aux-free | none"),
    cl::cat(category));
cl::opt<double> auxLossCoef("aux-loss-coef",
                            cl::desc("Coefficient of the load-balancing loss "
                                     "(transformers' router_aux_loss_coef; "
                                     "default 0.01, mixtral-* 0.02)"),
                            cl::cat(category));
cl::opt<double> biasUpdateRate(
    "bias-update-rate",
    cl::desc("--load-balance aux-free: how far each step moves an expert's "
             "routing bias against its load error (DeepSeek-V3's gamma; "
             "default 0.001)"),
    cl::cat(category));
cl::opt<double> zLossCoef("z-loss-coef",
                          cl::desc("Coefficient of the router z-loss "
                                   "(default 0)"),
                          cl::cat(category));
cl::opt<int64_t> batch("batch", cl::desc("Sequences per forward pass "
                                         "(the micro-batch)"),
                       cl::cat(category));
cl::opt<std::string> output("o", cl::desc("Output file (default: stdout)"),
                            cl::value_desc("file"), cl::init("-"),
                            cl::cat(category));

using partition::tools::fail;

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  std::string presets;
  for (const std::string &name : presetNames())
    presets += (presets.empty() ? "" : ", ") + name;
  partition::tools::parseCommandLine(
      argc, argv,
      "partition-gen: emits the forward-plus-loss function of a GPT-2, "
      "Llama or Mixtral style model in the xfmr dialect.\nPresets: " +
          presets + "\n");

  std::optional<ModelConfig> config = getPreset(preset);
  if (!config)
    partition::tools::usageError("partition-gen", "unknown preset '" + preset +
                                                      "'; known presets: " +
                                                      presets);
  // mixtral is a Llama with MoE feed-forward blocks: 8 experts, top-2,
  // unless given.
  bool mixtral = arch == "mixtral";
  if (mixtral) {
    arch = "llama";
    if (config->experts == 0) {
      config->experts = 8;
      config->topK = 2;
    }
  }
  if (arch.getNumOccurrences()) {
    std::optional<Arch> parsed = parseArch(arch);
    if (!parsed)
      partition::tools::usageError("partition-gen",
                                   "unknown arch '" + arch +
                                       "'; expected gpt2, llama or mixtral "
                                       "(mistral and qwen2 are llama with "
                                       "--family)");
    config->arch = *parsed;
    // The newer features belong to the llama arch: a gpt2 starts plain.
    if (config->arch == Arch::GPT2) {
      ModelConfig plain;
      config->family = plain.family;
      config->tieEmbedding = plain.tieEmbedding;
      config->qkvBias = plain.qkvBias;
      config->outputBias = plain.outputBias;
      config->ropeTheta = plain.ropeTheta;
      config->ropeScaling = plain.ropeScaling;
      config->slidingWindow = plain.slidingWindow;
      config->windowFromLayer = plain.windowFromLayer;
    }
  }
  if (mixtral && !family.getNumOccurrences())
    config->family = "mixtral";
  if (family.getNumOccurrences()) {
    const std::vector<std::string> &known = llamaFamilies();
    if (std::find(known.begin(), known.end(), family.getValue()) ==
        known.end())
      partition::tools::usageError("partition-gen",
                                   "unknown family '" + family +
                                       "'; expected llama, mistral, qwen2 "
                                       "or mixtral");
    const std::string presetFamily = config->familyName();
    config->family = family == "llama" ? "" : family.getValue();
    // Each family's biases, unless given.
    if (!qkvBias.getNumOccurrences())
      config->qkvBias = family == "qwen2";
    if (!outputBias.getNumOccurrences())
      config->outputBias = false;
    // A preset's window stays with its family unless given.
    if (family != presetFamily) {
      config->slidingWindow = 0;
      config->windowFromLayer = 0;
    }
  }
  if (slidingWindow.getNumOccurrences())
    config->slidingWindow = slidingWindow;
  if (windowFromLayer.getNumOccurrences())
    config->windowFromLayer = windowFromLayer;
  if (normEps.getNumOccurrences())
    config->normEpsilon = normEps;
  if (ropeTheta.getNumOccurrences())
    config->ropeTheta = ropeTheta;
  if (ropeScaling.getNumOccurrences()) {
    if (ropeScaling != "none" && ropeScaling != "linear" &&
        ropeScaling != "llama3" && ropeScaling != "yarn")
      partition::tools::usageError(
          "partition-gen", "unknown --rope-scaling '" + ropeScaling +
                               "'; expected none, linear, llama3 or yarn");
    config->ropeScaling = ropeScaling == "none" ? "" : ropeScaling.getValue();
  }
  if (ropeFactor.getNumOccurrences())
    config->ropeFactor = ropeFactor;
  if (ropeLowFreqFactor.getNumOccurrences())
    config->ropeLowFreqFactor = ropeLowFreqFactor;
  if (ropeHighFreqFactor.getNumOccurrences())
    config->ropeHighFreqFactor = ropeHighFreqFactor;
  if (ropeBetaFast.getNumOccurrences())
    config->ropeBetaFast = ropeBetaFast;
  if (ropeBetaSlow.getNumOccurrences())
    config->ropeBetaSlow = ropeBetaSlow;
  if (ropeOriginalContext.getNumOccurrences())
    config->ropeOriginalContext = ropeOriginalContext;
  if (tieEmbeddings.getNumOccurrences())
    config->tieEmbedding = tieEmbeddings;
  if (qkvBias.getNumOccurrences())
    config->qkvBias = qkvBias;
  if (outputBias.getNumOccurrences())
    config->outputBias = outputBias;
  // A new width or arch re-derives the dependent sizes unless they are given.
  if (hidden.getNumOccurrences())
    config->hidden = hidden;
  if (heads.getNumOccurrences())
    config->heads = heads;
  config->kvHeads = kvHeads.getNumOccurrences() ? kvHeads.getValue()
                    : (heads.getNumOccurrences() ||
                       config->arch == Arch::GPT2)
                        ? config->heads
                        : config->kvHeads;
  if (ffn.getNumOccurrences()) {
    config->ffn = ffn;
  } else if (hidden.getNumOccurrences() || arch.getNumOccurrences()) {
    std::optional<int64_t> derived = defaultFfn(config->arch, config->hidden);
    if (!derived)
      return fail("model too large: the default ffn for hidden " +
                  llvm::Twine(config->hidden) +
                  " does not fit 64 bits; give a smaller --hidden");
    config->ffn = *derived;
  }
  if (layers.getNumOccurrences())
    config->layers = layers;
  if (vocab.getNumOccurrences())
    config->vocab = vocab;
  if (seqLen.getNumOccurrences())
    config->seqLen = seqLen;
  if (positions.getNumOccurrences())
    config->positions = positions;
  else
    config->positions = std::max(config->positions, config->seqLen);
  if (batch.getNumOccurrences())
    config->batch = batch;
  if (experts.getNumOccurrences())
    config->experts = experts;
  if (topK.getNumOccurrences())
    config->topK = topK;
  else if (config->experts > 0 && config->topK == 0)
    config->topK = std::min<int64_t>(2, config->experts);
  if (moeEvery.getNumOccurrences())
    config->moeEvery = moeEvery;
  if (sharedExperts.getNumOccurrences())
    config->sharedExperts = sharedExperts;
  if (expertFfn.getNumOccurrences())
    config->expertFfn = expertFfn;
  if (capacityFactor.getNumOccurrences())
    config->capacityFactor = capacityFactor;
  if (router.getNumOccurrences())
    config->router = router;
  if (loadBalance.getNumOccurrences())
    config->loadBalance = loadBalance;
  if (auxLossCoef.getNumOccurrences())
    config->auxLossCoef = auxLossCoef;
  if (zLossCoef.getNumOccurrences())
    config->zLossCoef = zLossCoef;
  if (biasUpdateRate.getNumOccurrences()) {
    if (config->loadBalance != "aux-free")
      return fail("--bias-update-rate is the rate of --load-balance "
                  "aux-free's routing bias: give --load-balance aux-free "
                  "or drop it");
    config->biasUpdateRate = biasUpdateRate;
  }

  if (std::string problems = validate(*config); !problems.empty())
    return fail("invalid model configuration: " + problems);

  mlir::MLIRContext context;
  mlir::OwningOpRef<mlir::ModuleOp> module =
      buildForwardModule(context, *config);
  // Sizes first: a model too large for 64-bit sizes is the user's, not a
  // verifier failure.
  if (std::string problem = checkModelSizes(*module); !problem.empty())
    return fail("model too large: " + problem +
                "; give a smaller --hidden, --ffn, --vocab, --layers, "
                "--seq-len or --batch");
  if (failed(mlir::verify(*module)))
    return fail("generated IR does not verify (a bug in partition-gen)");

  std::string error;
  std::unique_ptr<llvm::ToolOutputFile> file =
      mlir::openOutputFile(output, &error);
  if (!file)
    return fail(error);
  module->print(file->os());
  file->os() << "\n";
  file->keep();
  return 0;
}
