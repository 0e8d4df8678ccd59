//===- HfMoe.h - mixtures of experts: partition <-> transformers -*- C++ -*-===//
//
// The mixture-of-experts half of HfConfig (kept apart so that each file
// stays readable): transformers' MixtralForCausalLM is partition's family
// "mixtral" -- the Llama architecture with every feed-forward block a
// router over num_local_experts SwiGLU experts of intermediate_size, top
// num_experts_per_tok, softmax then renormalised (router "softmax"),
// dropless, no shared experts, the Switch load-balancing loss with
// router_aux_loss_coef and no z-loss. Anything else partition's MoE layers
// can do (capacity, shared experts, dense layers between, other routers,
// the z-loss) has no field in MixtralConfig: export refuses it rather than
// write a model transformers would compute differently.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_HFMOE_H
#define PARTITION_INTEROP_HFMOE_H

#include "interop/HfFields.h"
#include "model/ModelConfig.h"

#include <string>

namespace partition::interop {

/// Reads MixtralConfig's expert fields of `f` into `c` (whose Llama fields
/// llamaFromHf has read): num_local_experts, num_experts_per_tok,
/// router_aux_loss_coef (transformers' defaults when absent: 8, 2, 0.001),
/// output_router_logits (accepted either way: it only says whether
/// transformers returns the router logits); refuses router_jitter_noise
/// other than 0 and the routing fields of other MoE families that change
/// the maths in a relabelled config.
void mixtralFromHf(Fields &f, model::ModelConfig &c);

/// Adds MixtralConfig's expert fields of `c` to `config`.
void mixtralToHf(const model::ModelConfig &c, json &config);

/// Empty when `c` exports to transformers; else one line saying what its
/// mixture of experts has that MixtralForCausalLM cannot compute.
std::string moeExportProblem(const model::ModelConfig &c);

/// The MoE fields of the checkpoint "model" metadata (ModelBuilder's
/// xfmr.model keys and types), written only for a MoE model as the builder
/// does.
void moeToJson(const model::ModelConfig &c, json &model);
/// Reads them back (marking them used in `f`).
void moeFromJson(Fields &f, model::ModelConfig &c);

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFMOE_H
