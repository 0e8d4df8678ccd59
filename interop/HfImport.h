//===- HfImport.h - a transformers model directory as a partition model -*- C++ -*-===//
//
// partition-import's work: reads HF_DIR/config.json and its weights
// (model.safetensors, or the shards model.safetensors.index.json lists;
// F32, BF16 or F16, widened to fp32 exactly), refuses what partition's
// models cannot express (HfConfig.h) and any tensor that is missing, of
// another shape (a padded vocabulary), not finite or not part of the model,
// and gives back the configuration and the parameters.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_HFIMPORT_H
#define PARTITION_INTEROP_HFIMPORT_H

#include "interop/HfConfig.h"
#include "interop/HfWeights.h"
#include "model/ModelConfig.h"

#include <string>
#include <vector>

namespace partition::interop {

struct HfModel {
  model::ModelConfig config;
  /// The parameters in the model's argument order (modelParameters).
  std::vector<std::pair<std::string, Tensor>> params;
};

/// Throws InteropError or CheckpointError (one line each).
HfModel readHfModel(const std::string &dir, const TrainingShape &shape = {});

/// Writes `model`'s parameters as a weights-only checkpoint in `dir` (step
/// 0, no optimizer state; its "model" metadata is the configuration), the
/// checkpoint partition-run --init-from starts from.
void saveWeightsCheckpoint(const std::string &dir, const HfModel &model,
                           const std::string &source);

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFIMPORT_H
