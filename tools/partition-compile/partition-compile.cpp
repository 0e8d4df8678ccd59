//===- partition-compile.cpp - a model to a runnable .ptp program ---------===//
//
//   partition-gen --preset gpt2-tiny -o model.mlir
//   partition-compile model.mlir -o model.ptp --microbatches 2 --memory-report
//   partition-compile model.mlir -o model.ptp --plan plan.json
//
// The whole compile flow in one call (passes/CompileFlow.h, the same as
// `partition-opt --partition-compile-flow`): --dist-apply-plan (with
// --plan), --xfmr-mixed-precision (when the plan says "precision": "bf16"),
// --xfmr-train-step (with an eval step), the partitioner, --lower-to-rt,
// --lower-memory-plan, then the .ptp writer.
//
//===----------------------------------------------------------------------===//

#include "dialects/Dist/DistDialect.h"
#include "dialects/Rt/RtDialect.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "lowering/Passes.h"
#include "lowering/ProgramWriter.h"
#include "lowering/ReplicaProgram.h"
#include "passes/analysis/ActivationMemory.h"
#include "passes/frontend/StepEntries.h"
#include "passes/Passes.h"
#include "passes/CompileFlow.h"
#include "passes/plan/Plan.h"
#include "passes/pipeline/PipelineInfo.h"
#include "passes/pipeline/PipelineReport.h"
#include "tools/OneLineDiagnostics.h"
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
#include "mlir/Support/Timing.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ThreadPool.h"
#include "llvm/Support/Threading.h"
#include "llvm/Support/ToolOutputFile.h"

#include <optional>

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
cl::opt<bool> timing(
    "timing",
    cl::desc("Print each compiler pass's wall time to stderr at the end "
             "(MLIR's pass timing: where a compile's time goes)"),
    cl::cat(category));

/// --timing: one report for every pass manager of the compile.
mlir::TimingScope &compileTiming() {
  static mlir::DefaultTimingManager manager;
  static mlir::TimingScope root = [] {
    manager.setEnabled(timing);
    return manager.getRootScope();
  }();
  return root;
}

/// A pass manager that reports to --timing.
void addTiming(PassManager &pm) {
  if (timing)
    pm.enableTiming(compileTiming());
}

cl::opt<unsigned> jobs(
    "jobs",
    cl::desc("Threads the compile may use (default 0: the machine's hardware "
             "threads; 1: the main one alone). Pipeline stages are lowered, "
             "looped and memory-planned side by side; the program is the "
             "same byte for byte whatever the count"),
    cl::init(0), cl::cat(category));
/// More threads than this are a typo: each would be started.
constexpr unsigned kMaxJobs = 1024;

cl::opt<bool> memoryReport("memory-report",
                           cl::desc("Print bytes per buffer category and the "
                                    "arena peak"),
                           cl::cat(category));
cl::opt<std::string> scheduleSvg(
    "schedule-svg",
    cl::desc("With pipeline parallelism (mesh.pp > 1): draw the schedule, "
             "one row per stage, F / B / W boxes with the stages' costs"),
    cl::value_desc("file.svg"), cl::cat(category));
cl::opt<bool> logits(
    "logits",
    cl::desc("Also compile @logits_step: the forward pass's logits (fp32) "
             "for partition-run --dump-logits; adds a batch x seq x vocab "
             "output buffer to the arena (on the last pipeline stage). Any "
             "plan"),
    cl::cat(category));
cl::opt<bool> unrollMicrobatches(
    "unroll-microbatches",
    cl::desc("Compile every micro-batch's code: without it, a step without "
             "a pipeline keeps one copy of its middle micro-batches' code, "
             "which the runtime runs for each (docs/compiler.md)"),
    cl::init(false), cl::cat(category));
cl::opt<bool> actionWalk(
    "action-walk",
    cl::desc("Pipelines keep one copy of each kind of a stage's actions and "
             "walk the schedule as data, so the program and the compile stay "
             "flat in the micro-batches (docs/action-walk.md): the default "
             "for every schedule. --action-walk=false loops over the "
             "schedule's periods (GPipe, which has none, unrolls)"),
    cl::init(true), cl::cat(category));
cl::opt<int64_t> explicitPositions(
    "explicit-positions",
    cl::desc("Testing: run --xfmr-explicit-positions=chunks=N after the "
             "training step (N = 1: natural order through the positioned "
             "kernels; 0: not run)"),
    cl::init(0), cl::Hidden, cl::cat(category));
cl::opt<std::string> emitMlir("emit-mlir",
                              cl::desc("Also write the planned rt IR here"),
                              cl::value_desc("file.mlir"), cl::cat(category));

using partition::tools::fail;

cl::opt<double> bucketMb("bucket-mb",
                         cl::desc("Data parallelism: the largest gradient "
                                  "bucket all-reduced at once, in MiB "
                                  "(PyTorch DDP's bucket_cap_mb)"),
                         cl::init(25.0), cl::cat(category));

/// What the training step compiles of its micro-batches (docs/compiler.md,
/// "The micro-batch loop"): the one figure that sets how its compile time
/// and program grow with the micro-batch count. Silent for a step of one.
void printLoopReport(ModuleOp module) {
  // Pipeline stages that walk their schedule carry their actions' marks.
  bool walks = false;
  module.walk([&](partition::rt::ActionMarkOp) { walks = true; });
  for (auto function : module.getOps<func::FuncOp>()) {
    auto entry = function->getAttrOfType<DictionaryAttr>(
        partition::xfmr::XfmrDialect::kTrainStepAttrName);
    if (!entry)
      continue;
    std::optional<partition::pipeline::LoopLayout> loop =
        partition::recordedLoop(function);
    if (loop && walks) {
      llvm::outs() << "action walk: the step compiles " << loop->compiled
                   << " of its " << loop->microbatches
                   << " micro-batches; each stage keeps one copy of each "
                      "kind of its actions and walks the schedule\n";
    } else if (loop) {
      llvm::outs() << "micro-batch loop: the step compiles " << loop->compiled
                   << " of its " << loop->microbatches
                   << " micro-batches; the runtime runs a body of "
                   << loop->stride << " micro-batch"
                   << (loop->stride == 1 ? "" : "es") << " " << loop->runs
                   << " times\n";
    } else if (auto count = entry.getAs<IntegerAttr>("microbatches");
               count && count.getInt() > 1) {
      llvm::outs() << "micro-batch loop: none; the step compiles each of its "
                   << count.getInt() << " micro-batches\n";
    }
    return;
  }
}

/// Per transformer layer of the training step: the activations kept for
/// the backward pass (16-bit, as Korthikanti et al. count them) and the
/// tensor-parallel traffic, per rank. Under a pipeline each layer is
/// printed once, with the stage that holds it (the stage functions are
/// analysed one by one and their layers merged).
void printLayerReport(ModuleOp module) {
  struct Entry {
    partition::LayerMemory memory;
    int64_t stage = -1;
    int64_t stageActivations = -1;
  };
  std::map<int64_t, Entry> layers;
  std::vector<std::string> recompute;
  bool pipelined = false;
  for (auto function : module.getOps<func::FuncOp>()) {
    // The step, or each pipeline stage's step (the layers it holds).
    if (!function->hasAttr(partition::xfmr::XfmrDialect::kTrainStepAttrName))
      continue;
    int64_t stage = -1;
    if (auto attr = function->getAttrOfType<IntegerAttr>(
            partition::pipeline::kPipelineStageAttrName)) {
      stage = attr.getInt();
      pipelined = true;
    }
    for (auto &[layer, memory] : partition::analyzeLayerMemory(function)) {
      Entry &entry = layers[layer];
      entry.memory.activationBytes += memory.activationBytes;
      entry.memory.tensorParallelBytes += memory.tensorParallelBytes;
      // The stage that keeps the layer's activations is the one holding it.
      if (memory.activationBytes > entry.stageActivations) {
        entry.stage = stage;
        entry.stageActivations = memory.activationBytes;
      }
    }
    // What --dist-recompute added: the matmul FLOPs of its clones, against
    // all the step's matmul FLOPs (clones included), per rank.
    int64_t extra = 0, total = 0;
    function.walk([&](partition::xfmr::MatmulFlopsOpInterface op) {
      int64_t flops = op.getMatmulFlops().value_or(0);
      total += flops;
      if (op->hasAttr(partition::dist::DistDialect::kRecomputedAttrName))
        extra += flops;
    });
    std::string line;
    llvm::raw_string_ostream os(line);
    os << "recompute: " << extra << " extra FLOPs per step per rank ("
       << llvm::format("%.1f", total ? 100.0 * extra / total : 0.0)
       << "% of the step)";
    if (stage >= 0)
      os << " on stage " << stage;
    recompute.push_back(line);
  }
  for (auto &[layer, entry] : layers) {
    llvm::outs() << "layer " << layer << ": activations "
                 << entry.memory.activationBytes
                 << " bytes per rank (16-bit), tensor-parallel traffic "
                 << entry.memory.tensorParallelBytes
                 << " bytes per rank per step";
    if (pipelined && entry.stage >= 0)
      llvm::outs() << ", on stage " << entry.stage;
    llvm::outs() << "\n";
  }
  for (const std::string &line : recompute)
    llvm::outs() << line << "\n";
  printLoopReport(module);
}

/// plan.json's replicas (NTP), or none when the plan has none or cannot be
/// read (--dist-apply-plan then says what is wrong with it).
llvm::SmallVector<partition::Plan::Replica> planReplicas(const std::string &path,
                                                         partition::Plan &plan) {
  if (path.empty())
    return {};
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return {};
  FailureOr<partition::Plan> parsed = partition::parsePlan(
      (*file)->getBuffer(), path, [](const llvm::Twine &) {});
  if (failed(parsed))
    return {};
  plan = *parsed;
  return plan.replicas;
}

/// NTP: each replica's step compiled on its own (the registered compile
/// flow with replica=N, so each replays in partition-opt), written as one
/// program that nests them.
int compileReplicas(ModuleOp module, const partition::Plan &plan,
                    partition::CompileFlowOptions &options) {
  auto config = [&]() -> DictionaryAttr {
    for (auto function : module.getOps<func::FuncOp>())
      if (auto model = function->getAttrOfType<DictionaryAttr>(
              partition::xfmr::XfmrDialect::kModelAttrName))
        return model;
    return {};
  }();
  auto batch = config ? config.getAs<IntegerAttr>("batch") : IntegerAttr();
  if (!batch)
    return fail("the model has no xfmr.model batch; replicas need one");
  if (!scheduleSvg.empty())
    return fail("--schedule-svg needs pipeline parallelism, which replicas "
                "do not have");
  std::vector<partition::ReplicaPart> parts;
  std::string planned;
  for (size_t index = 0; index < plan.replicas.size(); ++index) {
    OwningOpRef<ModuleOp> replica = module.clone();
    options.replica = static_cast<int64_t>(index);
    std::string which = "replica " + std::to_string(index) + " (tp " +
                        std::to_string(plan.replicas[index].tp) + ")";
    PassManager pm(module.getContext());
    partition::buildPartitionFlow(pm, options);
    addTiming(pm);
    if (failed(pm.run(*replica))) {
      if (!partition::dist::getPlan(*replica))
        return fail("the plan cannot be applied (see the diagnostic above)");
      return fail("compiling " + which + " failed (see the diagnostic above)");
    }
    // Rows the plan check guaranteed (--dist-apply-plan ran above). The
    // model's batch is one micro-batch: with gradient accumulation a step
    // takes that many of the replica's micro-batches, rows in a row.
    auto rows = plan.replicaRows(batch.getInt(), index);
    int64_t microbatches = options.microbatches.hasValue()
                               ? int64_t(options.microbatches)
                               : plan.pipeline.microbatches;
    if (memoryReport) {
      llvm::outs() << which << ": rows " << rows->first * microbatches
                   << ".." << (rows->first + rows->second) * microbatches - 1
                   << " of each batch of " << batch.getInt() * microbatches
                   << "\n";
      printLayerReport(*replica);
    }
    PassManager lowering(module.getContext());
    partition::buildLoweringFlow(lowering, options);
    addTiming(lowering);
    if (failed(lowering.run(*replica)))
      return fail("compiling " + which + " failed (see the diagnostic above)");
    if (!emitMlir.empty()) {
      llvm::raw_string_ostream os(planned);
      if (index > 0)
        os << "// -----\n";
      replica->print(os);
      os << "\n";
    }
    partition::ReplicaPart part;
    part.tp = plan.replicas[index].tp;
    part.batchOffset = rows->first * microbatches;
    part.batchRows = rows->second * microbatches;
    llvm::raw_string_ostream bytes(part.program);
    if (failed(partition::writeProgram(*replica, bytes)))
      return fail("cannot write " + which +
                  "'s program (see the diagnostic above)");
    parts.push_back(std::move(part));
  }
  std::string error;
  if (!emitMlir.empty()) {
    auto file = openOutputFile(emitMlir, &error);
    if (!file)
      return fail(error);
    file->os() << planned;
    file->keep();
  }
  auto program = openOutputFile(output, &error);
  if (!program)
    return fail(error);
  std::string problem = partition::writeReplicaProgram(parts, program->os());
  if (!problem.empty())
    return fail("cannot write the program: " + problem);
  program->keep();
  return 0;
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

  // The step's IR grows with the count: bounded before any work.
  if (microbatches.getNumOccurrences() > 0 &&
      (microbatches < 1 ||
       microbatches > partition::Plan::Pipeline::kMaxMicrobatches))
    partition::tools::usageError(
        "partition-compile",
        Twine("--microbatches must be an integer between 1 and ") +
            Twine(partition::Plan::Pipeline::kMaxMicrobatches) +
            " (micro-batches per step), got " + Twine(microbatches.getValue()));
  if (jobs > kMaxJobs)
    partition::tools::usageError(
        "partition-compile", Twine("--jobs must be between 0 (one per "
                                   "hardware thread) and ") +
                                 Twine(kMaxJobs) + ", got " +
                                 Twine(jobs.getValue()));

  DialectRegistry registry;
  registry.insert<partition::xfmr::XfmrDialect, partition::rt::RtDialect,
                  partition::dist::DistDialect,
                  arith::ArithDialect, func::FuncDialect,
                  memref::MemRefDialect, tensor::TensorDialect>();
  // --jobs: MLIR's pool, sized as asked (the verifier after each pass
  // uses it too); declared first, as it must outlive the context.
  std::optional<llvm::DefaultThreadPool> threadPool;
  MLIRContext context(registry, MLIRContext::Threading::DISABLED);
  if (jobs != 1) {
    threadPool.emplace(llvm::hardware_concurrency(jobs));
    context.setThreadPool(*threadPool);
  }

  std::string error;
  auto file = openInputFile(input, &error);
  if (!file)
    return fail(error);
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  // Diagnostics as file:line:col, one line each: neither the source line
  // (a model's signature line holds kilobytes of IR) nor a dump of the
  // (possibly whole-model) operation they are attached to.
  partition::OneLineDiagnostics diagnostics(&context);
  context.printOpOnDiagnostic(false);
  OwningOpRef<ModuleOp> module = parseSourceFile<ModuleOp>(sources, &context);
  if (!module)
    return fail("cannot parse '" + input + "' (see the diagnostic above)");

  partition::CompileFlowOptions options;
  options.plan = planFile;
  // Unset, the plan's pipeline.microbatches (else 1) applies.
  if (microbatches.getNumOccurrences() > 0)
    options.microbatches = microbatches;
  options.optimizer = optimizer;
  options.beta1 = beta1;
  options.beta2 = beta2;
  options.epsilon = epsilon;
  options.weightDecay = weightDecay;
  options.bucketMb = bucketMb;
  options.memoryReport = memoryReport;
  options.logits = logits;
  options.unrollMicrobatches = unrollMicrobatches;
  options.actionWalk = actionWalk;
  options.explicitPositions = explicitPositions;

  partition::Plan plan;
  bool replicas = !planReplicas(planFile, plan).empty();
  // Asked for by name, the walk must apply.
  const bool walkAsked = actionWalk.getNumOccurrences() > 0 && actionWalk;
  if (walkAsked && unrollMicrobatches)
    return fail("--action-walk keeps one copy of each kind of action, "
                "--unroll-microbatches every micro-batch's code; give one");
  if (logits && optimizer != "adamw")
    return fail("--logits needs the evaluation steps, which --optimizer none "
                "leaves out; use --optimizer adamw");
  if (replicas)
    return compileReplicas(*module, plan, options);

  // The registered --partition-compile-flow, in two halves so that the
  // layer report sees the partitioned step before lowering.
  PassManager pm(&context);
  partition::buildPartitionFlow(pm, options);
  addTiming(pm);
  // A pipeline that walks its schedule by default can compile without.
  const char *loopHint =
      actionWalk && !walkAsked && !unrollMicrobatches && plan.mesh.pp > 1
          ? "compilation failed (see the diagnostic above; "
            "--action-walk=false compiles the pipeline without the walk: "
            "it loops over the schedule's periods, or unrolls GPipe)"
          : "compilation failed (see the diagnostic above)";
  if (failed(pm.run(*module))) {
    if (!planFile.empty() && !partition::dist::getPlan(*module))
      return fail("the plan cannot be applied (see the diagnostic above)");
    return fail(loopHint);
  }
  if (memoryReport)
    printLayerReport(*module);
  bool pipelined = partition::pipeline::readPipelineInfo(*module).has_value();
  if (walkAsked && !pipelined)
    return fail("--action-walk walks a pipeline stage's schedule, but the "
                "plan has no pipeline (mesh.pp = 1); leave it out");
  if (memoryReport && pipelined &&
      failed(partition::pipeline::printPipelineReport(*module, llvm::outs())))
    return fail("cannot report the pipeline (see the diagnostic above)");
  if (!scheduleSvg.empty()) {
    if (!pipelined)
      return fail("--schedule-svg needs pipeline parallelism: a plan with "
                  "mesh.pp > 1");
    FailureOr<std::string> svg =
        partition::pipeline::pipelineScheduleSvg(*module);
    if (failed(svg))
      return fail("cannot draw the schedule (see the diagnostic above)");
    auto picture = openOutputFile(scheduleSvg, &error);
    if (!picture)
      return fail(error);
    picture->os() << *svg;
    picture->keep();
  }

  PassManager lowering(&context);
  partition::buildLoweringFlow(lowering, options);
  addTiming(lowering);
  if (failed(lowering.run(*module)))
    return fail(loopHint);

  if (!emitMlir.empty()) {
    auto planned = openOutputFile(emitMlir, &error);
    if (!planned)
      return fail(error);
    // As partition-opt prints it (a final newline), so the two compare.
    module->print(planned->os());
    planned->os() << "\n";
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
