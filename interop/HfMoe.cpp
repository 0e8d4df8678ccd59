//===- HfMoe.cpp - mixtures of experts: partition <-> transformers --------===//

#include "interop/HfMoe.h"

#include <cmath>

using partition::model::ModelConfig;

namespace partition::interop {

void mixtralFromHf(Fields &f, ModelConfig &c) {
  c.experts = f.positive("num_local_experts", 8);
  c.topK = f.positive("num_experts_per_tok", 2);
  if (c.topK > c.experts)
    f.refuse("num_experts_per_tok",
             "= " + std::to_string(c.topK) + " exceeds num_local_experts = " +
                 std::to_string(c.experts));
  // Mixtral has one width: intermediate_size is every expert's (and, every
  // layer being a MoE layer, no dense block uses ffn).
  c.expertFfn = 0;
  c.moeEvery = 1;
  c.sharedExperts = 0;
  c.capacityFactor = 0.0;
  c.router = "softmax";
  c.loadBalance = "aux-loss";
  c.zLossCoef = 0.0;
  c.auxLossCoef = f.number("router_aux_loss_coef", 0.001);
  if (!(c.auxLossCoef >= 0.0) || !std::isfinite(c.auxLossCoef))
    f.refuse("router_aux_loss_coef",
             "must be a finite number, not negative, got " +
                 show(f.object.at("router_aux_loss_coef")));
  // Multiplicative noise on the router's input while training: partition's
  // step is deterministic.
  if (double jitter = f.number("router_jitter_noise", 0.0); jitter != 0.0)
    f.refuse("router_jitter_noise",
             "= " + show(f.object.at("router_jitter_noise")) +
                 " cannot be expressed: partition's router has no jitter "
                 "noise");
  // Whether forward() returns the router logits (and, with labels, adds
  // the aux loss): an output switch, not a property of the model. The aux
  // loss is router_aux_loss_coef's either way (docs/hf-interop.md).
  f.boolean("output_router_logits", false);

  // Routing fields of other MoE families (Qwen2-MoE, DeepSeek, OLMoE,
  // Switch): MixtralForCausalLM ignores them, so in a relabelled config
  // they mean weights trained with another routing. A neutral value (the
  // one that computes Mixtral's routing) is accepted.
  struct Foreign {
    const char *key;
    const char *feature;
    json neutral;
  };
  const Foreign foreign[] = {
      {"norm_topk_prob", "top-k gates left unnormalised", true},
      {"shared_expert_intermediate_size", "shared experts", 0},
      {"n_shared_experts", "shared experts", 0},
      {"num_shared_experts", "shared experts", 0},
      {"moe_intermediate_size", "an expert width apart from intermediate_size",
       c.ffn},
      {"decoder_sparse_step", "dense layers between the MoE layers", 1},
      {"moe_layer_freq", "dense layers between the MoE layers", 1},
      {"first_k_dense_replace", "dense layers before the MoE layers", 0},
      {"mlp_only_layers", "dense layers among the MoE layers", json::array()},
      {"scoring_func", "a router scoring other than softmax", "softmax"},
      {"topk_method", "a top-k method other than greedy", "greedy"},
      {"n_group", "grouped routing", 1},
      {"topk_group", "grouped routing", 1},
      {"routed_scaling_factor", "scaled expert outputs", 1.0},
      {"router_z_loss_coef", "a router z-loss", 0.0},
      {"capacity_factor", "expert capacity (dropped tokens)", 0.0},
      {"expert_capacity", "expert capacity (dropped tokens)", 0},
  };
  for (const Foreign &field : foreign) {
    f.used.insert(field.key);
    if (!f.has(field.key))
      continue;
    const json &value = f.object.at(field.key);
    if (value != field.neutral)
      f.refuse(field.key, "= " + show(value) + " cannot be expressed: " +
                              field.feature + " (not Mixtral's routing)");
  }
}

void mixtralToHf(const ModelConfig &c, json &config) {
  // Mixtral's one width is its experts'; every layer being a MoE layer,
  // partition's dense ffn is used by none and not exported.
  config["intermediate_size"] = c.expertWidth();
  config["num_local_experts"] = c.experts;
  config["num_experts_per_tok"] = c.topK;
  // load_balance "none" is a coefficient of 0 in transformers' terms.
  double aux = c.loadBalance == "aux-loss" ? c.auxLossCoef : 0.0;
  config["router_aux_loss_coef"] = aux;
  config["router_jitter_noise"] = 0.0;
  // transformers adds the aux loss to its training loss only when it
  // returns the router logits: on wherever partition trained with one, so
  // that fine-tuning in transformers keeps the objective.
  config["output_router_logits"] = aux > 0.0;
  config["sliding_window"] =
      c.slidingWindow > 0 ? json(c.slidingWindow) : json(nullptr);
}

std::string moeExportProblem(const ModelConfig &c) {
  if (!c.isMoe())
    return "";
  if (c.arch != model::Arch::Llama || c.familyName() != "mixtral")
    return "a " + c.familyName() +
           " model with experts has no transformers class; a mixture of "
           "experts exports as family mixtral (MixtralForCausalLM) only";
  std::string why;
  if (c.moeEvery != 1)
    why = "moe_every " + std::to_string(c.moeEvery) +
          " (Mixtral's every layer is a MoE layer)";
  else if (c.sharedExperts != 0)
    why = "shared experts (" + std::to_string(c.sharedExperts) + ")";
  else if (c.capacityFactor != 0.0)
    why = "a capacity factor (" + show(c.capacityFactor) +
          "; Mixtral is dropless)";
  else if (c.router != "softmax")
    why = "router " + c.router +
          " (Mixtral's is softmax, top-k, renormalised)";
  else if (c.zLossCoef != 0.0)
    why = "a router z-loss (coefficient " + show(c.zLossCoef) + ")";
  else if (c.loadBalance == "aux-free")
    why = "aux-free load balancing (DeepSeek-V3's routing bias; Mixtral "
          "has none)";
  if (why.empty())
    return "";
  return "the model's mixture of experts has " + why +
         ", which transformers' MixtralForCausalLM cannot express";
}

void moeToJson(const ModelConfig &c, json &model) {
  if (!c.isMoe())
    return;
  model["experts"] = c.experts;
  model["top_k"] = c.topK;
  model["moe_every"] = c.moeEvery;
  model["shared_experts"] = c.sharedExperts;
  model["expert_ffn"] = c.expertWidth();
  model["capacity_factor"] = c.capacityFactor;
  model["router"] = c.router;
  model["load_balance"] = c.loadBalance;
  model["aux_loss_coef"] = c.auxLossCoef;
  model["z_loss_coef"] = c.zLossCoef;
  if (c.loadBalance == "aux-free")
    model["bias_update_rate"] = c.biasUpdateRate;
}

void moeFromJson(Fields &f, ModelConfig &c) {
  if (!f.has("experts"))
    return;
  c.experts = f.positive("experts");
  c.topK = f.positive("top_k");
  c.moeEvery = f.positive("moe_every");
  c.sharedExperts = f.nonNegative("shared_experts", 0);
  // The builder writes the width itself; as partition-gen's presets, a
  // width equal to ffn is ffn's.
  int64_t width = f.positive("expert_ffn");
  c.expertFfn = width == c.ffn ? 0 : width;
  c.capacityFactor = f.number("capacity_factor", 0.0);
  c.router = f.string("router", "softmax");
  c.loadBalance = f.string("load_balance", "aux-loss");
  c.auxLossCoef = f.number("aux_loss_coef", 0.01);
  c.zLossCoef = f.number("z_loss_coef", 0.0);
  c.biasUpdateRate = f.number("bias_update_rate", 0.001);
}

} // namespace partition::interop
