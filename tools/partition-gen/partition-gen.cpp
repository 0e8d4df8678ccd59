//===- partition-gen.cpp - emit a transformer's forward-plus-loss IR ------===//
//
//   partition-gen --preset gpt2-124m -o model.mlir
//   partition-gen --preset llama-tiny --layers 3 --kv-heads 1
//   partition-gen --arch llama --layers 2 --hidden 96 --heads 6 ...
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

using namespace partition::model;
namespace cl = llvm::cl;

namespace {

cl::OptionCategory category("partition-gen options");

cl::opt<std::string> preset("preset", cl::desc("Starting configuration"),
                            cl::init("gpt2-tiny"), cl::cat(category));
cl::opt<std::string> arch("arch", cl::desc("gpt2 | llama"), cl::cat(category));
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
    cl::desc("Rows of the learned position table (gpt2; default: the "
             "preset's, raised to --seq-len)"),
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
      "partition-gen: emits the forward-plus-loss function of a GPT-2 or "
      "Llama style model in the xfmr dialect.\nPresets: " +
          presets + "\n");

  std::optional<ModelConfig> config = getPreset(preset);
  if (!config)
    partition::tools::usageError("partition-gen", "unknown preset '" + preset +
                                                      "'; known presets: " +
                                                      presets);
  if (arch.getNumOccurrences()) {
    std::optional<Arch> parsed = parseArch(arch);
    if (!parsed)
      partition::tools::usageError("partition-gen",
                                   "unknown arch '" + arch +
                                       "'; expected gpt2 or llama");
    config->arch = *parsed;
  }
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
