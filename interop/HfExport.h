//===- HfExport.h - a checkpoint as a transformers model directory -*- C++ -*-===//
//
// partition-export's work: reads a checkpoint directory (any plan's: its
// tensors are logical), verifies every parameter it exports (CRC-32C,
// finite values), and writes OUT_DIR/config.json, model.safetensors and
// generation_config.json that AutoModelForCausalLM.from_pretrained loads
// (GPT2LMHeadModel or LlamaForCausalLM). The optimizer state stays behind.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_INTEROP_HFEXPORT_H
#define PARTITION_INTEROP_HFEXPORT_H

#include "model/ModelConfig.h"

#include <cstdint>
#include <string>

namespace partition::interop {

struct ExportResult {
  model::ModelConfig config;
  /// Tensors written to model.safetensors.
  size_t tensors = 0;
  /// The optimizer steps the checkpoint had completed.
  int64_t step = 0;
};

/// `dtype` is "fp32" or "bf16" (rounded to nearest even). Throws
/// InteropError or CheckpointError (one line each); writes nothing unless
/// every tensor was read and checked.
ExportResult exportHf(const std::string &checkpointDir,
                      const std::string &outDir, const std::string &dtype);

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFEXPORT_H
