//===- ModelBuilder.cpp - GPT-2 and Llama forward passes in xfmr ----------===//

#include "model/ModelBuilder.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseSet.h"

using namespace mlir;

namespace partition::model {
namespace {

/// Emits one forward function. Parameters become block arguments in the
/// order the model first uses them, always ahead of the tokens and targets.
class ForwardBuilder {
public:
  ForwardBuilder(ModuleOp module, const ModelConfig &config)
      : config(config), builder(module.getContext()),
        f32(builder.getF32Type()) {
    builder.setInsertionPointToEnd(module.getBody());
    function = func::FuncOp::create(builder, builder.getUnknownLoc(),
                                    "forward",
                                    builder.getFunctionType({}, {}));
    body = function.addEntryBlock();
    auto tokenType = RankedTensorType::get({config.batch, config.seqLen},
                                           builder.getI32Type());
    tokens = body->addArgument(tokenType, named("tokens"));
    targets = body->addArgument(tokenType, named("targets"));
    builder.setInsertionPointToStart(body);
  }

  func::FuncOp build() {
    Value loss = config.arch == Arch::GPT2 ? buildGPT2() : buildLlama();
    func::ReturnOp::create(builder, named("loss"), loss);
    function.setType(builder.getFunctionType(body->getArgumentTypes(),
                                             {loss.getType()}));
    // Every argument's attributes at once: setArgAttr rebuilds the array of
    // all arguments' dictionaries on each call, which for a 1024-layer
    // model (12,000 parameters) took 9 s and 4.3 GB.
    SmallVector<DictionaryAttr> argAttrs;
    for (auto [index, name] : llvm::enumerate(paramNames)) {
      NamedAttrList attrs;
      attrs.set(xfmr::XfmrDialect::kParamAttrName, builder.getStringAttr(name));
      if (paramLayers[index] >= 0)
        attrs.set(xfmr::XfmrDialect::kLayerAttrName,
                  builder.getI64IntegerAttr(paramLayers[index]));
      if (routingBiases.contains(index))
        attrs.set(xfmr::XfmrDialect::kRoutingBiasAttrName,
                  builder.getF32FloatAttr(config.biasUpdateRate));
      argAttrs.push_back(attrs.getDictionary(builder.getContext()));
    }
    for (StringRef input : {"tokens", "targets"})
      argAttrs.push_back(builder.getDictionaryAttr(builder.getNamedAttr(
          xfmr::XfmrDialect::kInputAttrName, builder.getStringAttr(input))));
    function.setAllArgAttrs(argAttrs);
    function->setAttr(xfmr::XfmrDialect::kModelAttrName, configAttr());
    return function;
  }

private:
  Location named(const Twine &name) {
    return NameLoc::get(builder.getStringAttr(name));
  }

  RankedTensorType tensor(ArrayRef<int64_t> shape) {
    return RankedTensorType::get(shape, f32);
  }

  /// [B, T, width]
  RankedTensorType activation(int64_t width) {
    return tensor({config.batch, config.seqLen, width});
  }

  Value param(const Twine &name, ArrayRef<int64_t> shape) {
    Value value =
        body->insertArgument(paramNames.size(), tensor(shape), named(name));
    paramNames.push_back(name.str());
    paramLayers.push_back(currentLayer);
    return value;
  }

  Value linear(const Twine &name, Value input, int64_t outFeatures,
               bool withBias) {
    int64_t inFeatures = cast<RankedTensorType>(input.getType()).getShape().back();
    Value weight = param(name + ".weight", {outFeatures, inFeatures});
    Value bias = withBias ? param(name + ".bias", {outFeatures}) : Value();
    return xfmr::LinearOp::create(builder, named(name),
                                  activation(outFeatures), input, weight,
                                  bias);
  }

  Value layerNorm(const Twine &name, Value input) {
    Value gamma = param(name + ".weight", {config.hidden});
    Value beta = param(name + ".bias", {config.hidden});
    return xfmr::LayerNormOp::create(builder, named(name), input.getType(),
                                     input, gamma, beta, epsilon());
  }

  Value rmsNorm(const Twine &name, Value input) {
    Value gamma = param(name + ".weight", {config.hidden});
    return xfmr::RMSNormOp::create(builder, named(name), input.getType(),
                                   input, gamma, epsilon());
  }

  Value attention(const Twine &name, Value q, Value k, Value v, bool rope,
                  int64_t layer) {
    FloatAttr theta = rope ? builder.getF32FloatAttr(config.ropeTheta)
                           : FloatAttr();
    StringAttr scaling;
    DenseF64ArrayAttr factors;
    if (rope && !config.ropeScaling.empty()) {
      scaling = builder.getStringAttr(config.ropeScaling);
      factors = config.ropeScaling == "linear"
                    ? builder.getDenseF64ArrayAttr({config.ropeFactor})
                : config.ropeScaling == "yarn"
                    ? builder.getDenseF64ArrayAttr(
                          {config.ropeFactor, config.ropeBetaFast,
                           config.ropeBetaSlow,
                           double(config.ropeOriginalContext)})
                    : builder.getDenseF64ArrayAttr(
                          {config.ropeFactor, config.ropeLowFreqFactor,
                           config.ropeHighFreqFactor,
                           double(config.ropeOriginalContext)});
    }
    IntegerAttr window =
        config.slidingWindow > 0 && layer >= config.windowFromLayer
            ? builder.getI64IntegerAttr(config.slidingWindow)
            : IntegerAttr();
    return xfmr::AttentionOp::create(
        builder, named(name), q.getType(), q, k, v,
        /*query_positions=*/Value(), /*key_positions=*/Value(),
        builder.getI64IntegerAttr(config.heads),
        builder.getI64IntegerAttr(config.kvHeads), builder.getBoolAttr(true),
        theta, scaling, factors, window);
  }

  Value add(Value lhs, Value rhs) {
    return xfmr::AddOp::create(builder, lhs.getLoc(), lhs.getType(), lhs, rhs);
  }

  /// The cross-entropy plus every MoE layer's load-balancing loss.
  Value loss(Value logits) {
    Value loss = xfmr::SoftmaxCrossEntropyOp::create(
        builder, named("loss"), RankedTensorType::get({}, f32), logits,
        targets, /*vocab=*/IntegerAttr());
    for (Value aux : auxLosses)
      loss = add(loss, aux);
    return loss;
  }

  /// Llama's feed-forward block: w2(silu(w1 x) * w3 x).
  Value swigluBlock(const Twine &name, Value input, int64_t width) {
    Value gate = linear(name + ".w1", input, width, false);
    Value up = linear(name + ".w3", input, width, false);
    Value h = xfmr::SwigluOp::create(builder, named(name + ".swiglu"),
                                     gate.getType(), gate, up);
    return linear(name + ".w2", h, config.hidden, false);
  }

  /// A MoE layer's feed-forward block (docs/moe.md): the router, top-k
  /// routing with capacity, dispatch into [B, E, C, H] buffers, the experts'
  /// SwiGLU as grouped GEMMs over stacked weights [E, Fe, H] / [E, H, Fe],
  /// the gate-weighted combine, the shared experts, and the layer's
  /// load-balancing loss (added to the model's loss).
  Value mixtureOfExperts(const Twine &name, Value input) {
    const int64_t E = config.experts, K = config.topK, H = config.hidden;
    const int64_t Fe = config.expertWidth(), C = config.expertCapacity();
    const int64_t B = config.batch, S = config.seqLen;
    Value router = param(name + ".router.weight", {E, H});
    Value logits = xfmr::LinearOp::create(builder, named(name + ".router"),
                                          activation(E), input, router,
                                          Value());
    StringAttr scoring = builder.getStringAttr(
        config.router == "softmax-topk" ? "softmax_topk" : config.router);
    // DeepSeek-V3's routing bias: state, not trained (xfmr.routing_bias).
    Value bias;
    if (config.loadBalance == "aux-free") {
      routingBiases.insert(paramNames.size());
      bias = param(name + ".router.expert_bias", {E});
    }
    Type i32 = builder.getI32Type();
    auto choices = [&](Type element) {
      return RankedTensorType::get({B, S, K}, element);
    };
    auto route = xfmr::MoeRouteOp::create(
        builder, named(name + ".route"),
        TypeRange{choices(f32), choices(i32), choices(i32),
                  RankedTensorType::get({B, E}, i32)},
        logits, bias, builder.getI64IntegerAttr(K),
        builder.getI64IntegerAttr(C), scoring);
    Value xe = xfmr::MoeDispatchOp::create(
        builder, named(name + ".dispatch"), tensor({B, E, C, H}), input,
        route.getExperts(), route.getSlots());
    IntegerAttr routedRows = builder.getI64IntegerAttr(S * K);
    auto expertLinear = [&](const Twine &weightName, Value rows,
                            int64_t outFeatures) -> Value {
      int64_t inFeatures = cast<RankedTensorType>(rows.getType()).getDimSize(3);
      Value weight = param(name + ".experts." + weightName,
                           {E, outFeatures, inFeatures});
      return xfmr::ExpertLinearOp::create(
          builder, named(name + ".experts." + weightName),
          tensor({B, E, C, outFeatures}), rows, weight, route.getCounts(),
          routedRows);
    };
    Value gate = expertLinear("w1", xe, Fe);
    Value up = expertLinear("w3", xe, Fe);
    Value h = xfmr::SwigluOp::create(builder, named(name + ".experts.swiglu"),
                                     gate.getType(), gate, up);
    Value ye = expertLinear("w2", h, H);
    Value y = xfmr::MoeCombineOp::create(builder, named(name + ".combine"),
                                         input.getType(), ye, route.getGates(),
                                         route.getExperts(), route.getSlots());
    if (config.sharedExperts > 0)
      y = add(y, swigluBlock(name + ".shared_experts", input,
                             config.sharedExperts * Fe));
    // aux-free balances by the bias alone; its router may keep a z-loss.
    double auxCoef = config.loadBalance == "aux-loss" ? config.auxLossCoef : 0;
    if (config.loadBalance != "none" && (auxCoef > 0 || config.zLossCoef > 0))
      auxLosses.push_back(xfmr::MoeAuxLossOp::create(
          builder, named(name + ".aux_loss"), RankedTensorType::get({}, f32),
          logits, route.getExperts(), builder.getF32FloatAttr(auxCoef),
          builder.getF32FloatAttr(config.zLossCoef), scoring));
    return y;
  }

  FloatAttr epsilon() { return builder.getF32FloatAttr(config.normEpsilon); }

  Value buildGPT2() {
    int64_t c = config.hidden;
    Value wte = param("wte", {config.vocab, c});
    Value x = xfmr::EmbeddingOp::create(builder, named("wte"), activation(c),
                                        tokens, wte);
    Value wpe = param("wpe", {config.positions, c});
    x = xfmr::PositionEmbeddingOp::create(builder, named("wpe"), x.getType(),
                                          x, wpe, /*positions=*/Value());
    for (int64_t layer = 0; layer < config.layers; ++layer) {
      currentLayer = layer;
      std::string prefix = "h." + std::to_string(layer);
      Value a = layerNorm(prefix + ".ln_1", x);
      Value q = linear(prefix + ".attn.q", a, c, true);
      Value k = linear(prefix + ".attn.k", a, c, true);
      Value v = linear(prefix + ".attn.v", a, c, true);
      Value o = attention(prefix + ".attn", q, k, v, /*rope=*/false, layer);
      x = add(x, linear(prefix + ".attn.c_proj", o, c, true));
      Value m = layerNorm(prefix + ".ln_2", x);
      if (config.isMoeLayer(layer)) {
        x = add(x, mixtureOfExperts(prefix + ".moe", m));
        continue;
      }
      Value h = linear(prefix + ".mlp.c_fc", m, config.ffn, true);
      h = xfmr::GeluOp::create(builder, named(prefix + ".mlp.gelu"),
                               h.getType(), h);
      x = add(x, linear(prefix + ".mlp.c_proj", h, c, true));
    }
    currentLayer = -1;
    x = layerNorm("ln_f", x);
    // Tied LM head: the token embedding table is the output projection.
    Value logits = xfmr::LinearOp::create(builder, named("lm_head"),
                                          activation(config.vocab), x, wte,
                                          Value());
    return loss(logits);
  }

  Value buildLlama() {
    int64_t c = config.hidden;
    int64_t qWidth = config.heads * config.headDim();
    int64_t kvWidth = config.kvHeads * config.headDim();
    Value table = param("tok_embeddings.weight", {config.vocab, c});
    Value x = xfmr::EmbeddingOp::create(builder, named("tok_embeddings"),
                                        activation(c), tokens, table);
    for (int64_t layer = 0; layer < config.layers; ++layer) {
      currentLayer = layer;
      std::string prefix = "layers." + std::to_string(layer);
      Value a = rmsNorm(prefix + ".attention_norm", x);
      Value q = linear(prefix + ".attention.wq", a, qWidth, config.qkvBias);
      Value k = linear(prefix + ".attention.wk", a, kvWidth, config.qkvBias);
      Value v = linear(prefix + ".attention.wv", a, kvWidth, config.qkvBias);
      Value o = attention(prefix + ".attention", q, k, v, /*rope=*/true, layer);
      x = add(x, linear(prefix + ".attention.wo", o, c, config.outputBias));
      Value m = rmsNorm(prefix + ".ffn_norm", x);
      x = add(x, config.isMoeLayer(layer)
                     ? mixtureOfExperts(prefix + ".feed_forward", m)
                     : swigluBlock(prefix + ".feed_forward", m, config.ffn));
    }
    currentLayer = -1;
    x = rmsNorm("norm", x);
    // A tied head is the embedding table, as GPT-2's.
    Value logits = config.tieEmbedding
                       ? xfmr::LinearOp::create(builder, named("output"),
                                                activation(config.vocab), x,
                                                table, Value())
                       : linear("output", x, config.vocab, false);
    return loss(logits);
  }

  DictionaryAttr configAttr() {
    auto i64 = [&](int64_t v) { return builder.getI64IntegerAttr(v); };
    SmallVector<NamedAttribute> fields = {
        builder.getNamedAttr("arch", builder.getStringAttr(archName(config.arch))),
        builder.getNamedAttr("layers", i64(config.layers)),
        builder.getNamedAttr("hidden", i64(config.hidden)),
        builder.getNamedAttr("heads", i64(config.heads)),
        builder.getNamedAttr("kv_heads", i64(config.kvHeads)),
        builder.getNamedAttr("ffn", i64(config.ffn)),
        builder.getNamedAttr("vocab", i64(config.vocab)),
        builder.getNamedAttr("seq_len", i64(config.seqLen)),
        builder.getNamedAttr("positions", i64(config.positions)),
        builder.getNamedAttr("batch", i64(config.batch)),
        builder.getNamedAttr("tied_embedding",
                             builder.getBoolAttr(config.tiedEmbedding())),
    };
    // The features beyond GPT-2 and Llama 2, only where they differ from
    // the defaults: a model without them keeps the description (and the
    // .ptp bytes) it always had. f64, so that the value written to a
    // checkpoint and config.json is the double given.
    if (config.normEpsilon != ModelConfig::kDefaultNormEpsilon)
      fields.push_back(builder.getNamedAttr(
          "norm_epsilon", builder.getF64FloatAttr(config.normEpsilon)));
    if (config.arch == Arch::Llama &&
        config.ropeTheta != ModelConfig::kDefaultRopeTheta)
      fields.push_back(builder.getNamedAttr(
          "rope_theta", builder.getF64FloatAttr(config.ropeTheta)));
    if (config.arch == Arch::Llama && !config.ropeScaling.empty()) {
      fields.push_back(builder.getNamedAttr(
          "rope_scaling", builder.getStringAttr(config.ropeScaling)));
      fields.push_back(builder.getNamedAttr(
          "rope_factor", builder.getF64FloatAttr(config.ropeFactor)));
      if (config.ropeScaling == "llama3") {
        fields.push_back(builder.getNamedAttr(
            "rope_low_freq_factor",
            builder.getF64FloatAttr(config.ropeLowFreqFactor)));
        fields.push_back(builder.getNamedAttr(
            "rope_high_freq_factor",
            builder.getF64FloatAttr(config.ropeHighFreqFactor)));
        fields.push_back(builder.getNamedAttr(
            "rope_original_context", i64(config.ropeOriginalContext)));
      }
      if (config.ropeScaling == "yarn") {
        fields.push_back(builder.getNamedAttr(
            "rope_beta_fast", builder.getF64FloatAttr(config.ropeBetaFast)));
        fields.push_back(builder.getNamedAttr(
            "rope_beta_slow", builder.getF64FloatAttr(config.ropeBetaSlow)));
        fields.push_back(builder.getNamedAttr(
            "rope_original_context", i64(config.ropeOriginalContext)));
      }
    }
    if (config.slidingWindow > 0)
      fields.push_back(
          builder.getNamedAttr("sliding_window", i64(config.slidingWindow)));
    if (config.windowFromLayer > 0)
      fields.push_back(builder.getNamedAttr("window_from_layer",
                                            i64(config.windowFromLayer)));
    if (config.qkvBias)
      fields.push_back(
          builder.getNamedAttr("qkv_bias", builder.getBoolAttr(true)));
    if (config.outputBias)
      fields.push_back(
          builder.getNamedAttr("output_bias", builder.getBoolAttr(true)));
    if (!config.family.empty() && config.family != archName(config.arch))
      fields.push_back(builder.getNamedAttr(
          "family", builder.getStringAttr(config.family)));
    if (config.isMoe()) {
      fields.push_back(builder.getNamedAttr("experts", i64(config.experts)));
      fields.push_back(builder.getNamedAttr("top_k", i64(config.topK)));
      fields.push_back(builder.getNamedAttr("moe_every", i64(config.moeEvery)));
      fields.push_back(builder.getNamedAttr("shared_experts",
                                            i64(config.sharedExperts)));
      fields.push_back(builder.getNamedAttr("expert_ffn",
                                            i64(config.expertWidth())));
      fields.push_back(builder.getNamedAttr(
          "capacity_factor", builder.getF64FloatAttr(config.capacityFactor)));
      fields.push_back(builder.getNamedAttr(
          "router", builder.getStringAttr(config.router)));
      fields.push_back(builder.getNamedAttr(
          "load_balance", builder.getStringAttr(config.loadBalance)));
      fields.push_back(builder.getNamedAttr(
          "aux_loss_coef", builder.getF64FloatAttr(config.auxLossCoef)));
      fields.push_back(builder.getNamedAttr(
          "z_loss_coef", builder.getF64FloatAttr(config.zLossCoef)));
      if (config.loadBalance == "aux-free")
        fields.push_back(builder.getNamedAttr(
            "bias_update_rate", builder.getF64FloatAttr(config.biasUpdateRate)));
    }
    return builder.getDictionaryAttr(fields);
  }

  const ModelConfig &config;
  OpBuilder builder;
  Type f32;
  func::FuncOp function;
  Block *body = nullptr;
  Value tokens, targets;
  SmallVector<std::string> paramNames;
  /// Per parameter: its transformer layer, -1 outside the layers.
  SmallVector<int64_t> paramLayers;
  /// The parameters that are routing biases (their indices).
  llvm::DenseSet<unsigned> routingBiases;
  /// The layer being built, -1 outside the layers.
  int64_t currentLayer = -1;
  /// The load-balancing loss of each MoE layer built so far.
  SmallVector<Value> auxLosses;
};

} // namespace

OwningOpRef<ModuleOp> buildForwardModule(MLIRContext &context,
                                         const ModelConfig &config) {
  context.loadDialect<func::FuncDialect, xfmr::XfmrDialect>();
  OwningOpRef<ModuleOp> module = ModuleOp::create(UnknownLoc::get(&context));
  ForwardBuilder(*module, config).build();
  return module;
}

} // namespace partition::model
