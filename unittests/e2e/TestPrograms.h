//===- TestPrograms.h - models compiled in-process for e2e tests -*- C++ -*-===//

#ifndef PARTITION_UNITTESTS_E2E_TESTPROGRAMS_H
#define PARTITION_UNITTESTS_E2E_TESTPROGRAMS_H

#include "model/ModelConfig.h"

#include <cstdint>
#include <string>

namespace partition::e2e {

/// The .ptp bytes partition-compile would write for `config`: the training
/// step (train-step pass with `microbatches` and `optimizer`, "adamw" or
/// "none"; with an eval step when `optimizer` is "adamw"), lowered to rt and
/// memory-planned. Empty when any stage fails (its diagnostic is printed).
std::string compileProgram(const model::ModelConfig &config,
                           int64_t microbatches, const std::string &optimizer);

/// GPT-2, 2 layers, C 32, 4 heads, FFN 128, V 64, T 16, B 2.
model::ModelConfig smallGpt2();
/// Llama (RMSNorm, SwiGLU, RoPE, untied head), 2 layers, C 32, 4 query heads
/// sharing 2 key/value heads (GQA), FFN 48, V 64, T 16, B 2.
model::ModelConfig smallLlama();

} // namespace partition::e2e

#endif // PARTITION_UNITTESTS_E2E_TESTPROGRAMS_H
