//===- partition-compile.cpp - a model to a runnable .ptp program ---------===//
//
//   partition-gen --preset gpt2-tiny -o model.mlir
//   partition-compile model.mlir -o model.ptp --microbatches 2 --memory-report
//   partition-compile model.mlir -o model.ptp --plan plan.json
//
// The whole pipeline in one call: --dist-apply-plan (with --plan),
// --xfmr-mixed-precision (when the plan says "precision": "bf16"),
// --xfmr-train-step (with an eval step), --lower-to-rt, --lower-memory-plan,
// then the .ptp writer.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "lowering/Passes.h"
#include "lowering/ProgramWriter.h"
#include "passes/ActivationMemory.h"
#include "passes/Passes.h"
#include "tools/common/CommandLine.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"

namespace cl = llvm::cl;
using namespace mlir;

namespace {

cl::OptionCategory category("partition-compile options");
cl::opt<std::string> input(cl::Positional, cl::desc("<model.mlir>"),
                           cl::init("-"), cl::cat(category));
cl::opt<std::string> output("o", cl::desc("Output program"),
                            cl::value_desc("file.ptp"), cl::Required,
                            cl::cat(category));
cl::opt<int64_t> microbatches("microbatches",
                              cl::desc("Micro-batches per step (gradient "
                                       "accumulation)"),
                              cl::init(1), cl::cat(category));
cl::opt<std::string> planFile("plan",
                              cl::desc("The parallelization plan (plan.json); "
                                       "its pipeline.microbatches is the "
                                       "default of --microbatches"),
                              cl::value_desc("plan.json"), cl::cat(category));
cl::opt<std::string> optimizer("optimizer",
                               cl::desc("adamw, or none to output gradients "
                                        "(gradient checks)"),
                               cl::init("adamw"), cl::cat(category));
cl::opt<double> beta1("beta1", cl::init(0.9), cl::cat(category));
cl::opt<double> beta2("beta2", cl::init(0.95), cl::cat(category));
cl::opt<double> epsilon("epsilon", cl::init(1e-8), cl::cat(category));
cl::opt<double> weightDecay("weight-decay", cl::init(0.1), cl::cat(category));
cl::opt<bool> memoryReport("memory-report",
                           cl::desc("Print bytes per buffer category and the "
                                    "arena peak"),
                           cl::cat(category));
cl::opt<std::string> emitMlir("emit-mlir",
                              cl::desc("Also write the planned rt IR here"),
                              cl::value_desc("file.mlir"), cl::cat(category));

int fail(const llvm::Twine &message) {
  llvm::errs() << "partition-compile: error: " << message << "\n";
  return 1;
}

cl::opt<double> bucketMb("bucket-mb",
                         cl::desc("Data parallelism: the largest gradient "
                                  "bucket all-reduced at once, in MiB "
                                  "(PyTorch DDP's bucket_cap_mb)"),
                         cl::init(25.0), cl::cat(category));

int64_t meshSize(DictionaryAttr plan, StringRef axis) {
  return plan.getAs<DictionaryAttr>("mesh").getAs<IntegerAttr>(axis).getInt();
}

/// The passes that split a model over a mesh axis and do not exist yet: a
/// plan that needs them is refused. Remove an axis here once its pass lands
/// (and add the pass to the pipeline).
std::string missingPartitioningPasses(DictionaryAttr plan) {
  auto size = [&](StringRef axis) { return meshSize(plan, axis); };
  SmallVector<std::string> missing;
  if (size("pp") > 1)
    missing.push_back("pipeline-parallel");
  if (missing.empty())
    return "";
  std::string passes = missing.front();
  for (size_t i = 1; i < missing.size(); ++i)
    passes += (i + 1 == missing.size() ? " and " : ", ") + missing[i];
  bool one = missing.size() == 1;
  return ("plan.json: mesh dp=" + Twine(size("dp")) + " tp=" +
          Twine(size("tp")) + " pp=" + Twine(size("pp")) + " needs the " +
          passes + (one ? " pass, which is" : " passes, which are") +
          " not implemented yet; only data, tensor and sequence parallelism compile today")
      .str();
}

/// Per transformer layer of the training step: the activations kept for
/// the backward pass (16-bit, as Korthikanti et al. count them) and the
/// tensor-parallel traffic, per rank.
void printLayerReport(ModuleOp module) {
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function.getSymName() != "train_step")
      continue;
    for (auto &[layer, memory] : partition::analyzeLayerMemory(function))
      llvm::outs() << "layer " << layer << ": activations "
                   << memory.activationBytes
                   << " bytes per rank (16-bit), tensor-parallel traffic "
                   << memory.tensorParallelBytes
                   << " bytes per rank per step\n";
  }
}

} // namespace

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  partition::tools::parseCommandLine(
      argc, argv,
      "partition-compile: compiles a model (partition-gen output) into a "
      ".ptp program for partition-run\n");
  // MiB, converted to a byte count that must fit an int64.
  if (!(bucketMb > 0 && bucketMb <= 1 << 20)) {
    char value[32];
    std::snprintf(value, sizeof(value), "%g", bucketMb.getValue());
    partition::tools::usageError(
        "partition-compile",
        Twine("--bucket-mb must be a finite number in (0, 1048576], got ") +
            value);
  }

  DialectRegistry registry;
  registry.insert<partition::xfmr::XfmrDialect, partition::rt::RtDialect,
                  partition::dist::DistDialect,
                  arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect, tensor::TensorDialect>();
  MLIRContext context(registry);

  std::string error;
  auto file = openInputFile(input, &error);
  if (!file)
    return fail(error);
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  // Diagnostics as file:line:col with the source line, without a dump of
  // the (possibly whole-model) operation they are attached to.
  SourceMgrDiagnosticHandler diagnostics(sources, &context);
  context.printOpOnDiagnostic(false);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return fail("cannot parse '" + input + "' (see the diagnostic above)");

  int64_t stepMicrobatches = microbatches;
  bool partitioned = false;
  bool bf16 = false;
  if (!planFile.empty()) {
    PassManager planning(&context);
    partition::ApplyPlanPassOptions apply;
    apply.planPath = planFile;
    planning.addPass(partition::createApplyPlanPass(apply));
    if (failed(planning.run(*module)))
      return fail("the plan cannot be applied (see the diagnostic above)");
    auto plan = (*module)->getAttrOfType<DictionaryAttr>("dist.plan");
    std::string missing = missingPartitioningPasses(plan);
    if (!missing.empty())
      return fail(missing);
    partitioned = meshSize(plan, "dp") > 1 || meshSize(plan, "tp") > 1;
    bf16 = plan.getAs<StringAttr>("precision").getValue() == "bf16";
    if (microbatches.getNumOccurrences() == 0)
      stepMicrobatches = plan.getAs<DictionaryAttr>("pipeline")
                             .getAs<IntegerAttr>("microbatches")
                             .getInt();
  }

  PassManager pm(&context);
  if (bf16)
    pm.addPass(partition::createMixedPrecisionPass());
  partition::TrainStepPassOptions step;
  step.microbatches = stepMicrobatches;
  step.optimizer = optimizer;
  step.beta1 = beta1;
  step.beta2 = beta2;
  step.epsilon = epsilon;
  step.weightDecay = weightDecay;
  step.withEval = optimizer == "adamw";
  pm.addPass(partition::createTrainStepPass(step));
  if (partitioned) {
    partition::ShardPassOptions shard;
    shard.bucketBytes = static_cast<int64_t>(bucketMb * 1024 * 1024);
    pm.addPass(partition::createShardPass(shard));
  }
  if (failed(pm.run(*module)))
    return fail("compilation failed (see the diagnostic above)");
  if (memoryReport)
    printLayerReport(*module);

  pm.clear();
  pm.addPass(partition::createLowerToRtPass());
  partition::MemoryPlanPassOptions plan;
  plan.report = memoryReport;
  pm.addPass(partition::createMemoryPlanPass(plan));
  if (failed(pm.run(*module)))
    return fail("compilation failed (see the diagnostic above)");

  if (!emitMlir.empty()) {
    auto planned = openOutputFile(emitMlir, &error);
    if (!planned)
      return fail(error);
    module->print(planned->os());
    planned->keep();
  }
  auto program = openOutputFile(output, &error);
  if (!program)
    return fail(error);
  if (failed(partition::writeProgram(*module, program->os())))
    return fail("cannot write the program (see the diagnostic above)");
  program->keep();
  return 0;
}
