//===- partition-import.cpp - a transformers model as a partition model ---===//
//
//   partition-import HF_DIR -o model.mlir --checkpoint DIR
//                   [--seq-len T] [--batch B]
//
// Reads a GPT-2 or Llama transformers directory (config.json plus
// model.safetensors or a sharded model.safetensors.index.json) and writes the
// xfmr model partition-gen would build for that configuration, plus a
// weights-only checkpoint that partition-run --init-from DIR trains from
// (fresh optimizer, step 0).
//
//===----------------------------------------------------------------------===//

#include "interop/HfImport.h"
#include "model/ModelBuilder.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "tools/common/CommandLine.h"

#include "mlir/IR/MLIRContext.h"
#include "mlir/IR/Verifier.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <exception>

namespace cl = llvm::cl;
namespace ckpt = partition::runtime::checkpoint;
using namespace partition;

namespace {

cl::OptionCategory category("partition-import options");

cl::opt<std::string> hfDir(cl::Positional, cl::Required,
                           cl::desc("<transformers model directory>"),
                           cl::cat(category));
cl::opt<std::string> output("o", cl::Required,
                            cl::desc("The model, as partition-gen writes it"),
                            cl::value_desc("model.mlir"), cl::cat(category));
cl::opt<std::string> checkpoint(
    "checkpoint", cl::Required,
    cl::desc("Directory of the weights-only checkpoint to write"),
    cl::value_desc("dir"), cl::cat(category));
cl::opt<bool> force("force",
                    cl::desc("Replace a training checkpoint (one with "
                             "optimizer state) or an unreadable file in the "
                             "--checkpoint directory"),
                    cl::cat(category));
cl::opt<int64_t> seqLen("seq-len",
                        cl::desc("Training sequence length (default: what "
                                 "partition-export recorded, else "
                                 "min(context, 1024))"),
                        cl::cat(category));
cl::opt<int64_t> batch("batch",
                       cl::desc("Sequences per forward pass (default: what "
                                "partition-export recorded, else 1)"),
                       cl::cat(category));

using partition::tools::fail;

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  tools::parseCommandLine(
      argc, argv,
      "partition-import: reads a Hugging Face GPT-2, Llama, Mistral, Qwen2 or "
      "Mixtral model directory "
      "and writes the xfmr model and a checkpoint of its weights.\n");
  interop::TrainingShape shape;
  if (seqLen.getNumOccurrences()) {
    if (seqLen <= 0)
      tools::usageError("partition-import", "--seq-len must be positive");
    shape.seqLen = seqLen;
  }
  if (batch.getNumOccurrences()) {
    if (batch <= 0)
      tools::usageError("partition-import", "--batch must be positive");
    shape.batch = batch;
  }
  // A training checkpoint (AdamW state, the work of a run) is not replaced
  // by weights without being told to.
  int64_t existingStep = 0;
  switch (force ? ckpt::ExistingCheckpoint::None
                : ckpt::existingCheckpoint(checkpoint, &existingStep)) {
  case ckpt::ExistingCheckpoint::Training:
    return fail(ckpt::checkpointFile(checkpoint) +
                " is a training checkpoint (step " +
                std::to_string(existingStep) +
                ", with optimizer state), which the weights-only import "
                "would replace; give another --checkpoint directory, or "
                "--force to replace it");
  case ckpt::ExistingCheckpoint::Unreadable:
    return fail(ckpt::checkpointFile(checkpoint) +
                " exists and is not a checkpoint partition can read; give "
                "another --checkpoint directory, or --force to replace it");
  case ckpt::ExistingCheckpoint::None:
  case ckpt::ExistingCheckpoint::WeightsOnly:
    break;
  }
  try {
    // Everything is read and checked before anything is written.
    interop::HfModel model = interop::readHfModel(hfDir, shape);
    mlir::MLIRContext context;
    mlir::OwningOpRef<mlir::ModuleOp> module =
        model::buildForwardModule(context, model.config);
    if (failed(mlir::verify(*module)))
      return fail("generated IR does not verify (a bug in partition-import)");
    std::string error;
    std::unique_ptr<llvm::ToolOutputFile> file =
        mlir::openOutputFile(output, &error);
    if (!file)
      return fail(error);
    interop::saveWeightsCheckpoint(checkpoint, model, hfDir);
    module->print(file->os());
    file->os() << "\n";
    file->keep();
    llvm::outs() << "partition-import: " << hfDir << ": "
                 << model.config.familyName() << ", "
                 << model.config.layers << " layers, hidden "
                 << model.config.hidden << ", " << model.params.size()
                 << " parameters -> " << output << " and " << checkpoint
                 << " (train it with partition-run --init-from " << checkpoint
                 << ")\n";
  } catch (const std::exception &error) {
    return fail(error.what());
  }
  return 0;
}
