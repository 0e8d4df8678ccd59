//===- partition-export.cpp - a checkpoint as a transformers model --------===//
//
//   partition-export CHECKPOINT_DIR --format hf -o OUT_DIR [--dtype fp32|bf16]
//                    [--tokenizer HF_DIR]
//
// Writes OUT_DIR/config.json, model.safetensors and generation_config.json,
// which AutoModelForCausalLM.from_pretrained(OUT_DIR) loads. The checkpoint
// may come from any plan: it holds logical tensors.
//
//===----------------------------------------------------------------------===//

#include "interop/HfConfig.h"
#include "interop/HfExport.h"
#include "tools/common/CommandLine.h"

#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/raw_ostream.h"

#include <exception>

namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("partition-export options");

cl::opt<std::string> checkpointDir(cl::Positional, cl::Required,
                                   cl::desc("<checkpoint directory>"),
                                   cl::cat(category));
cl::opt<std::string> format("format",
                            cl::desc("Output format: hf (transformers)"),
                            cl::init("hf"), cl::cat(category));
cl::opt<std::string> output("o", cl::Required,
                            cl::desc("Output directory (created if missing)"),
                            cl::value_desc("dir"), cl::cat(category));
cl::opt<std::string> dtype("dtype",
                           cl::desc("Weights in model.safetensors: fp32 "
                                    "(default, exact) or bf16"),
                           cl::init("fp32"), cl::cat(category));
cl::opt<std::string> tokenizer(
    "tokenizer",
    cl::desc("Copy the tokenizer files and generation_config.json of this "
             "transformers directory (e.g. the one the model was imported "
             "from), and its bos / eos / pad ids"),
    cl::value_desc("dir"), cl::cat(category));

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  partition::tools::parseCommandLine(
      argc, argv,
      "partition-export: writes a partition checkpoint as a Hugging Face "
      "transformers model directory (config.json, model.safetensors, "
      "generation_config.json).\n");
  if (format != "hf")
    partition::tools::usageError("partition-export",
                                 "--format must be hf, got '" + format + "'");
  if (dtype != "fp32" && dtype != "bf16")
    partition::tools::usageError("partition-export",
                                 "--dtype must be fp32 or bf16, got '" +
                                     dtype + "'");
  try {
    partition::interop::ExportResult result =
        partition::interop::exportHf(checkpointDir, output, dtype, tokenizer);
    llvm::outs() << "partition-export: " << output << ": "
                 << partition::interop::hfArchitecture(result.config)
                 << ", " << result.tensors << " tensors (" << dtype
                 << "), from step " << result.step << " of " << checkpointDir;
    if (result.tokenizerFiles)
      llvm::outs() << ", " << result.tokenizerFiles << " tokenizer files from "
                   << tokenizer;
    llvm::outs() << "\n";
  } catch (const std::exception &error) {
    return partition::tools::fail(error.what());
  }
  return 0;
}
