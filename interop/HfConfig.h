//===- HfConfig.h - model configurations: partition <-> transformers -*- C++ -*-===//
//
// Two translations of partition::model::ModelConfig:
//
// - the "model" metadata of a checkpoint (the program's xfmr.model as JSON,
//   written by partition-run and partition-import), read back so that
//   partition-export knows the shapes without the program;
// - a Hugging Face config.json (GPT2LMHeadModel, LlamaForCausalLM), written
//   for export and read for import. Reading refuses, naming the field, every
//   setting partition's models cannot express (rope scaling, biases on
//   Llama, an untied GPT-2 head, another norm epsilon, ...): a model that
//   loads but computes something else would be worse than an error.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_HFCONFIG_H
#define PARTITION_INTEROP_HFCONFIG_H

#include "model/ModelConfig.h"

#include <nlohmann/json.hpp>

#include <cstdint>
#include <optional>
#include <string>

namespace partition::interop {

/// The checkpoint "model" metadata of `config`: the same object (keys,
/// types) as the program's xfmr.model attribute, so that partition-run
/// accepts a checkpoint written from it.
nlohmann::json modelToJson(const model::ModelConfig &config);

/// The configuration held by a checkpoint's "model" metadata; `where` (the
/// checkpoint file) starts every error. Unknown keys are refused: a field
/// this build does not know may change the model.
model::ModelConfig modelFromJson(const nlohmann::json &model,
                                 const std::string &where);

/// config.json for `config`; `dtype` is "float32" or "bfloat16". The
/// training shape (seq_len, batch) rides along as "partition_training", so
/// that partition-import gives back the same model.
nlohmann::json hfConfig(const model::ModelConfig &config,
                        const std::string &dtype);

/// The transformers class `config` exports as (GPT2LMHeadModel,
/// LlamaForCausalLM, MistralForCausalLM, Qwen2ForCausalLM,
/// MixtralForCausalLM).
std::string hfArchitecture(const model::ModelConfig &config);

/// generation_config.json for `config`.
nlohmann::json hfGenerationConfig(const model::ModelConfig &config);

/// The training shape partition-import gives a model (flags win over
/// config.json's "partition_training", which wins over the defaults:
/// min(context, 1024) positions, batch 1).
struct TrainingShape {
  std::optional<int64_t> seqLen;
  std::optional<int64_t> batch;
};

/// The ModelConfig of a Hugging Face config.json (already parsed); `file`
/// starts every error. Throws InteropError naming the field for anything
/// the model cannot express or that is malformed.
model::ModelConfig fromHfConfig(const nlohmann::json &config,
                                const std::string &file,
                                const TrainingShape &shape = {});

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFCONFIG_H
