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
#include <vector>

namespace partition::interop {

struct ExportResult {
  model::ModelConfig config;
  /// Tensors written to model.safetensors.
  size_t tensors = 0;
  /// The optimizer steps the checkpoint had completed.
  int64_t step = 0;
  /// Files copied from the tokenizer directory.
  size_t tokenizerFiles = 0;
};

/// The files of a transformers model directory that are not the model: the
/// tokenizer's (AutoTokenizer) and the generation settings, which
/// exportHf copies from `tokenizerDir`.
const std::vector<std::string> &tokenizerFiles();

/// `dtype` is "fp32" or "bf16" (rounded to nearest even). `tokenizerDir`
/// (optional; typically the directory the model was imported from): its
/// tokenizer files and generation_config.json are copied byte for byte, and
/// the bos / eos / pad ids of its config.json (else of its
/// generation_config.json) are written to config.json. Throws InteropError
/// or CheckpointError (one line each); writes nothing unless every tensor
/// was read and checked and every tokenizer file read.
ExportResult exportHf(const std::string &checkpointDir,
                      const std::string &outDir, const std::string &dtype,
                      const std::string &tokenizerDir = "");

} // namespace partition::interop

#endif // PARTITION_INTEROP_HFEXPORT_H
