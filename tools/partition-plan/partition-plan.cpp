//===- partition-plan.cpp - choose a plan, or predict a given one ---------===//
//
//   partition-plan model.mlir --cluster a100-80gb-dgx --gpus 64 \
//       --global-batch 512 [-o plan.json] [--top K] [--explain] [--json]
//   partition-plan model.mlir --cluster C --global-batch B --plan plan.json
//   partition-plan --calibrate -o cpu.json
//   partition-plan --goodput --cluster C --gpus N [model.mlir]
//
// Searches dp x tp x pp (x cp for long sequences, or where nothing fits
// without it), micro-batch size and count, schedule, virtual
// stages, SP, ZeRO and recompute for the model (its `xfmr.model`
// configuration), predicts each plan with the cost model (planner/), and
// ranks those that fit by step time. Only plans that partition-compile
// accepts are emitted: each candidate is put through the plan.json reader
// and its checks (passes/plan/Plan.h). Every plan.json field has its pass now
// (pipeline, schedules, interleaving, ZeRO, recompute budget), so the
// search covers the cost model's whole space; `--include-unimplemented`
// keeps, marked, what a field added before its pass would refuse (none
// today).
// Memory per rank comes from the compiler's memory plan for the top plans
// that compile (CompiledMemory.h), else from the closed form; the output
// says which. --nonuniform does the same for per-layer degrees (the reader
// judges them, the memory plan sizes them) and -o then writes the winner.
//
//===----------------------------------------------------------------------===//

#include "model/ModelConfig.h"
#include "runtime/backend/cpu/BlasCore.h"
#include "passes/plan/Plan.h"
#include "planner/Cluster.h"
#include "planner/ContextParallel.h"
#include "planner/CostModel.h"
#include "planner/Nonuniform.h"
#include "planner/Search.h"
#include "tools/common/CommandLine.h"
#include "tools/partition-plan/Calibrate.h"
#include "tools/partition-plan/CompiledMemory.h"
#include "tools/partition-plan/GoodputReport.h"
#include "tools/partition-plan/PlanInputs.h"
#include "tools/partition-plan/PredictionReport.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/CommandLine.h"
#include "llvm/Support/Format.h"
#include "llvm/Support/InitLLVM.h"
#include "llvm/Support/JSON.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"
#include "llvm/Support/ToolOutputFile.h"
#include "llvm/Support/raw_ostream.h"

#include <nlohmann/json.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <memory>

namespace cl = llvm::cl;
using namespace partition;
using namespace partition::planner;

namespace {

cl::OptionCategory category("partition-plan options");

/// Set when memory-plan compiles still ran past --memory-seconds at the end
/// (main() then ends the process without waiting for them).
bool compilesAbandoned = false;
cl::opt<std::string> input(cl::Positional, cl::desc("<model.mlir>"),
                           cl::cat(category));
cl::opt<std::string> clusterArg(
    "cluster",
    cl::desc("A profile (a100-80gb-dgx, h100-sxm-dgx, h200-dgx, "
             "gb200-nvl72, cpu-local) or a cluster JSON file"),
    cl::value_desc("profile|file.json"), cl::cat(category));
cl::opt<int64_t> gpus("gpus", cl::desc("Devices (ranks) to plan for"),
                      cl::init(0), cl::cat(category));
cl::opt<int64_t> globalBatch("global-batch",
                             cl::desc("Sequences per training step"),
                             cl::init(0), cl::cat(category));
cl::opt<std::string> output("o",
                            cl::desc("Write the best plan (plan.json; with "
                                     "--nonuniform, the nonuniform winner "
                                     "when it compiles); with --calibrate, "
                                     "the measured profile"),
                            cl::value_desc("file"), cl::cat(category));
cl::opt<int64_t> top("top", cl::desc("Plans to print (default 5)"),
                     cl::init(5), cl::cat(category));
cl::opt<bool> explain("explain",
                      cl::desc("Say why the best plan wins: its breakdown "
                               "and what the runner-up loses"),
                      cl::cat(category));
cl::opt<bool> jsonOutput("json", cl::desc("Print the predictions as JSON"),
                         cl::cat(category));
cl::opt<std::string> planFile(
    "plan",
    cl::desc("Predict this plan: every field it writes as written; what "
             "it leaves out (and the micro-batch size) is searched, and the "
             "output names it"),
    cl::value_desc("plan.json"), cl::cat(category));
cl::opt<std::string> precision(
    "precision",
    cl::desc("fp32 or bf16 (default: bf16 where the cluster's bf16 peak "
             "is higher, else fp32)"),
    cl::cat(category));
cl::opt<std::string> memorySource(
    "memory",
    cl::desc("auto (the compiler's memory plan for the top plans that "
             "compile, the closed form for the rest), compiled or "
             "closed-form"),
    cl::init("auto"), cl::cat(category));
cl::opt<double> memorySeconds(
    "memory-seconds",
    cl::desc("With --memory auto: start no memory-plan compile after this "
             "many seconds of search (those running finish); the plans "
             "asked about later keep the closed form, which the ranking's "
             "source column shows. 0: no limit. --memory compiled has none"),
    cl::init(20.0), cl::cat(category));
cl::opt<unsigned> jobs(
    "jobs",
    cl::desc("Memory plans compiled at once for --memory auto / compiled: "
             "the next plans the search will ask about start while it "
             "waits for one (default 0: the machine's hardware threads; "
             "1: one at a time); the result is the same"),
    cl::init(0), cl::cat(category));
cl::opt<bool> includeUnimplemented(
    "include-unimplemented",
    cl::desc("Also rank plans partition-compile refuses only because a "
             "pass is missing, marked (none today: every plan.json field "
             "has its pass)"),
    cl::cat(category));
cl::opt<std::string> offloadMode(
    "offload",
    cl::desc("Optimizer offload (plan.json's offload.optimizer): auto (a "
             "plan that does not fit in device memory is tried with the "
             "host tier where the node has host memory of its own, and the "
             "nvme tier where the cluster has a disk; the fastest that "
             "fits is kept; a ZeRO-3 plan that still does not fit, with "
             "its parameter shards in the same tier too: "
             "offload.parameters), none (neither), host or nvme (every "
             "plan's moments, and a ZeRO-3 plan's shards where it does "
             "not fit otherwise)"),
    cl::init("auto"), cl::cat(category));
cl::opt<std::string> offloadPath(
    "offload-path",
    cl::desc("offload.path written into plans that offload to nvme (default "
             "\".\", the directory partition-run starts in; partition-run "
             "--offload-path overrides it)"),
    cl::init(""), cl::cat(category));
cl::opt<int64_t> offloadBufferBytes(
    "offload-buffer-bytes",
    cl::desc("offload.buffer_bytes of plans that offload: the staging "
             "buffers' bytes in device memory (default: the plan's, else "
             "64 MiB)"),
    cl::init(0), cl::cat(category));
cl::opt<int64_t> maxMicroBatch(
    "max-micro-batch", cl::desc("Largest micro-batch size tried (32)"),
    cl::init(32), cl::cat(category));
cl::opt<bool> nonuniform(
    "nonuniform",
    cl::desc("Also search a tensor-parallel degree per layer range (parts "
             "at degrees dividing the mesh's tp) and say where such a plan "
             "beats the best uniform plan, and by how much"),
    cl::cat(category));
cl::opt<bool> calibrate(
    "calibrate",
    cl::desc("Time GEMMs (OpenBLAS), memory and MPI collectives here and "
             "write a cluster profile (-o, default stdout)"),
    cl::cat(category));
cl::opt<std::string> calibrateDir(
    "calibrate-dir",
    cl::desc("Where --calibrate measures the disk for the offload's nvme "
             "tier (a temporary file of --calibrate-disk-mib, removed): "
             "default the current directory, where partition-run puts "
             "offload files when the plan's path is \".\" (not $TMPDIR, "
             "often a tmpfs)"),
    cl::init("."), cl::cat(category));
cl::opt<unsigned> calibrateDiskMib(
    "calibrate-disk-mib",
    cl::desc("MiB written and read by --calibrate's disk measurement, three "
             "times each (256)"),
    cl::init(256), cl::cat(category));
cl::opt<int> calibrateRanks("calibrate-ranks",
                            cl::desc("MPI ranks for --calibrate (2)"),
                            cl::init(2), cl::cat(category));
cl::opt<bool> goodputMode(
    "goodput",
    cl::desc("Throughput loss under GPU failures (wait and restart, drop "
             "the replica, NTP, NTP with boost) by fraction of failed GPUs, "
             "for tp domains of 8 and 72; the model, if given, sets the "
             "degraded replica's speed (docs/goodput.md)"),
    cl::cat(category));
// Defaults and their sources: planner/Goodput.h (FailureModel).
cl::opt<double> failureRate("failure-rate",
                            cl::desc("--goodput: failures per GPU-hour "
                                     "(1.97e-5, Llama 3's)"),
                            cl::init(1.97e-5), cl::cat(category));
cl::opt<double> repairHours("repair-hours",
                            cl::desc("--goodput: hours until a failed GPU "
                                     "is back (48)"),
                            cl::init(48), cl::cat(category));
cl::opt<double> checkpointMinutes(
    "checkpoint-min",
    cl::desc("--goodput: minutes between checkpoints (0: Young's optimum)"),
    cl::init(0), cl::cat(category));
cl::opt<double> checkpointCostSeconds(
    "checkpoint-cost-s", cl::desc("--goodput: seconds a checkpoint takes (60)"),
    cl::init(60), cl::cat(category));
cl::opt<double> restartSeconds(
    "restart-s", cl::desc("--goodput: seconds a restart takes (300)"),
    cl::init(300), cl::cat(category));
cl::opt<int64_t> standbyGpus(
    "standby-gpus",
    cl::desc("--goodput: idle GPUs kept to replace failed ones under "
             "wait-restart (0)"),
    cl::init(0), cl::cat(category));
cl::opt<double> boost("boost",
                      cl::desc("--goodput: speed factor of a boosted "
                               "degraded replica (1.15, at least 1)"),
                      cl::init(1.15), cl::cat(category));
cl::opt<int64_t> goodputPp("pp",
                           cl::desc("--goodput: pipeline stages per "
                                    "replica (1)"),
                           cl::init(1), cl::cat(category));
cl::list<int64_t> tpDomains("tp-domains",
                            cl::desc("--goodput: tp domain sizes (8,72)"),
                            cl::CommaSeparated, cl::cat(category));
cl::list<double> failedFractions(
    "failed-fractions",
    cl::desc("--goodput: fractions of failed GPUs, the table's rows"),
    cl::CommaSeparated, cl::cat(category));
cl::opt<bool> calibrateWorker("calibrate-collectives-worker", cl::Hidden,
                              cl::cat(category));

constexpr const char *kTool = "partition-plan";

using partition::tools::fail;

int runGoodput() {
  if (clusterArg.empty())
    tools::usageError(kTool, "give --cluster PROFILE or --cluster FILE.json");
  if (gpus <= 0)
    tools::usageError(kTool, "give --gpus N (a positive integer)");
  GoodputFlags flags;
  flags.gpus = gpus;
  flags.pp = goodputPp;
  flags.standbyGpus = standbyGpus;
  flags.failureRate = failureRate;
  flags.repairHours = repairHours;
  flags.checkpointMinutes = checkpointMinutes;
  flags.checkpointCostSeconds = checkpointCostSeconds;
  flags.restartSeconds = restartSeconds;
  flags.boost = boost;
  flags.tpDomains.assign(tpDomains.begin(), tpDomains.end());
  flags.failedFractions.assign(failedFractions.begin(), failedFractions.end());
  // A bad value is bad input (exit 1, one line naming the flag); a
  // missing flag is a bad command line (exit 2, above).
  GoodputOptions options;
  std::string problem = goodputOptionsOf(flags, options);
  if (!problem.empty())
    return fail(problem);
  options.json = jsonOutput;

  OrError<Cluster> cluster = loadCluster(clusterArg);
  if (!cluster)
    return fail(cluster.error());
  std::optional<ModelShape> shape;
  if (!input.empty()) {
    std::string error;
    std::optional<model::ModelConfig> config = loadModel(input, error);
    if (!config)
      return fail(error);
    shape = shapeOf(*config);
    for (int64_t t : options.tpDomains) {
      std::string why = checkHealthyReplicaFits(*shape, *cluster, t);
      if (!why.empty())
        return fail(input + ": " + why);
    }
  }
  printGoodput(*cluster, shape, input, options, llvm::outs());
  return 0;
}

} // namespace

/// The search's arguments, checked before any work (usage errors, exit 2).
/// Applies --offload, --offload-path and --offload-buffer-bytes to what the
/// plan file fixed; a contradiction, a value out of range or a tier the
/// cluster has no bandwidth for is a usage error.
void applyOffloadFlags(Fixed &fixed, const Cluster &cluster) {
  if (offloadMode != "auto") {
    if (offloadMode != "none" && offloadMode != "host" && offloadMode != "nvme")
      tools::usageError(kTool, "--offload must be auto, none, host or nvme, "
                               "got '" +
                                   offloadMode.getValue() + "'");
    if (fixed.offload && *fixed.offload != offloadMode.getValue())
      tools::usageError(kTool, "--offload " + offloadMode.getValue() +
                                   " contradicts " + planFile +
                                   "'s offload.optimizer \"" + *fixed.offload +
                                   "\"");
    fixed.offload = offloadMode.getValue();
    if (offloadMode == "none") {
      // Nothing offloaded: the parameter shards neither.
      if (fixed.offloadParameters && *fixed.offloadParameters != "none")
        tools::usageError(kTool, "--offload none contradicts " + planFile +
                                     "'s offload.parameters \"" +
                                     *fixed.offloadParameters + "\"");
      fixed.offloadParameters = "none";
    }
  }
  if (offloadMode == "none" &&
      (!offloadPath.empty() || offloadBufferBytes.getNumOccurrences()))
    tools::usageError(kTool, "--offload-path and --offload-buffer-bytes "
                             "would do nothing with --offload none");
  if (!offloadPath.empty())
    fixed.offloadPath = offloadPath;
  if (offloadBufferBytes.getNumOccurrences()) {
    if (offloadBufferBytes < Plan::Offload::kMinBufferBytes)
      tools::usageError(kTool,
                        "--offload-buffer-bytes must be at least " +
                            std::to_string(Plan::Offload::kMinBufferBytes) +
                            " (six 4096-byte blocks), got " +
                            std::to_string(offloadBufferBytes));
    fixed.offloadBufferBytes = offloadBufferBytes;
  }
  for (auto [field, tier] :
       {std::pair{"optimizer", fixed.offload},
        std::pair{"parameters", fixed.offloadParameters}}) {
    if (tier && *tier == "nvme" && !cluster.hasDisk())
      tools::usageError(kTool, std::string("offload.") + field +
                                   " \"nvme\" needs the cluster's disk "
                                   "bandwidth; " +
                                   cluster.name +
                                   " has none (give disk_read_bandwidth and "
                                   "disk_write_bandwidth in a cluster file)");
    if (tier && *tier == "host" && !(cluster.hostLinkBandwidth > 0))
      tools::usageError(kTool, std::string("offload.") + field +
                                   " \"host\" needs the cluster's "
                                   "host_link_bandwidth; " +
                                   cluster.name + " has none");
  }
}

void checkSearchArguments() {
  if (input.empty())
    tools::usageError(kTool, "give a model (partition-gen output)");
  if (clusterArg.empty())
    tools::usageError(kTool, "give --cluster PROFILE or --cluster FILE.json");
  if (globalBatch <= 0)
    tools::usageError(kTool, "give --global-batch N, the sequences per "
                             "step (a positive integer)");
  if (planFile.empty() && gpus <= 0)
    tools::usageError(kTool, "give --gpus N (a positive integer)");
  if (top < 1)
    tools::usageError(kTool, "--top must be at least 1");
  if (maxMicroBatch < 1 || maxMicroBatch > INT32_MAX)
    tools::usageError(kTool, "--max-micro-batch must be an integer in [1, "
                             "2147483647] (the largest micro-batch size "
                             "tried), got " +
                                 std::to_string(maxMicroBatch.getValue()));
  if (memorySource != "auto" && memorySource != "compiled" &&
      memorySource != "closed-form")
    tools::usageError(kTool, "--memory must be auto, compiled or "
                             "closed-form, got '" + memorySource + "'");
  if (!(memorySeconds >= 0))
    tools::usageError(kTool, "--memory-seconds must be 0 (no limit) or "
                             "more, got " +
                                 std::to_string(memorySeconds.getValue()));
  if (!precision.empty() && precision != "fp32" && precision != "bf16")
    tools::usageError(kTool, "--precision must be fp32 or bf16, got '" +
                                 precision + "'");

}

/// The one line when no plan is left: none fits, or none uses the devices.
int noPlan(const SearchResult &result, const Cluster &cluster,
           int64_t devices) {
  if (result.unfit > 0)
    return fail(llvm::Twine("no plan fits: the smallest of the ") +
                llvm::Twine(result.unfit) + " plans that " +
                (planFile.empty() ? "" : "follow the plan and ") +
                "the model allows needs " +
                gib(result.leastUnfitMemory) + " per rank, " +
                cluster.name + " has " + gib(cluster.memoryBytes) +
                "; use more GPUs or a smaller model");
  return fail(llvm::Twine("no plan ") +
              (planFile.empty() ? "" : "that follows '" + planFile +
                                           "' ") +
              "uses " + llvm::Twine(devices) +
              " devices for this model and a global batch of " +
              llvm::Twine(globalBatch) +
              (result.firstRefusal.empty()
                   ? std::string()
                   : " (e.g. " + result.firstRefusal + ")") +
              "; choose a device count that divides the batch, heads "
              "and layers");
}

/// The text output: the ranking, the best plan's micro-batch, and what
/// --plan, --explain, --nonuniform and -o add.
void printRanking(const model::ModelConfig &config, const ModelShape &shape,
                  const Cluster &cluster, int64_t devices,
                  const SearchResult &result, double planningSeconds,
                  int compiledPlans, int skippedPlans,
                  const NonuniformReport *nonuniformReport,
                  const Prediction &written, const Fixed &fixed) {
  llvm::raw_ostream &os = llvm::outs();
  std::vector<Prediction> shown = result.ranked;
  if (int64_t(shown.size()) > top)
    shown.resize(top);
  const Prediction &best = result.ranked.front();
  os << kTool << ": " << input << " (" << model::archName(config.arch)
     << ", " << llvm::format("%.3g", double(shape.parameters()))
     << " parameters";
  if (shape.isMoe())
    os << ", " << llvm::format("%.3g", shape.activeParameters())
       << " active";
  os << ") on " << devices << " x " << cluster.name
     << ", global batch " << globalBatch << ": " << result.evaluated
     << " plans predicted, " << result.refused << " refused, "
     << result.unfit << " do not fit ("
     << llvm::format("%.2f", planningSeconds) << " s";
  if (compiledPlans > 0)
    os << ", " << compiledPlans << " memory plan"
       << (compiledPlans == 1 ? "" : "s") << " compiled";
  if (skippedPlans > 0)
    os << ", " << skippedPlans << " left to the closed form after "
       << llvm::format("%g", double(memorySeconds))
       << " s of compiles (--memory-seconds)";
  os << ")\n";
  os << llvm::format("%4s  %-48s %12s %9s %6s %10s  %s\n", "rank", "plan",
                     "step", "TFLOP/s", "MFU", "memory", "source");
  for (size_t i = 0; i < shown.size(); ++i) {
    const Prediction &p = shown[i];
    os << llvm::format("%4d  %-48s %12s %9.4g %5.1f%% %10s  %s%s\n",
                       int(i + 1), p.plan.label().c_str(),
                       seconds(p.stepSeconds).c_str(), p.tflopsPerGpu,
                       100 * p.mfu, gib(p.memoryPerRank).c_str(),
                       p.memorySource.c_str(),
                       p.notCompilable.empty() ? ""
                                               : " (does not compile yet)");
  }
  os << "micro-batch: " << best.plan.microBatch
     << " sequences per replica, " << best.plan.microbatches
     << " per step: generate the model with batch "
     << best.plan.microBatch * best.plan.dp << " (partition-gen --batch "
     << best.plan.microBatch * best.plan.dp << ")\n";
  if (!best.notCompilable.empty())
    os << "note: partition-compile refuses this plan today: "
       << best.notCompilable << "\n";
  // The precision every figure assumes, and where it came from: a plan
  // without "precision" compiles as fp32.
  os << "precision: " << best.plan.precision;
  if (fixed.precision && !planFile.empty() && precision.empty())
    os << " (the plan's)";
  else if (fixed.precision)
    os << " (--precision)";
  else
    os << " (not given: " << best.plan.precision
       << (best.plan.precision == "bf16"
               ? ", the cluster's faster; write \"precision\": \"bf16\" "
                 "in plan.json, which partition-compile otherwise reads as "
                 "fp32"
               : ", the cluster has no faster bf16")
       << ")";
  os << "\n";
  std::string stages = stageLayersText(best);
  if (!stages.empty())
    os << "layers per stage: " << stages << "\n";
  if (shape.isMoe())
    printExperts(shape, best, os);
  if (!planFile.empty()) {
    std::vector<std::string> open =
        searchedFields(fixed, searchContextParallel(shape), shape.isMoe(),
                       best.plan.offload != "none",
                       best.plan.offloadParameters != "none");
    os << "searched (not in " << planFile << "): micro-batch size";
    for (const std::string &field : open)
      os << ", " << field;
    os << "; everything else as written\n";
  }
  if (!planFile.empty() && !explain) {
    os << "breakdown:\n";
    printBreakdown(best, os);
  }
  if (explain)
    printExplanation(result.ranked, shape, cluster, os);
  if (nonuniformReport)
    printNonuniform(*nonuniformReport, best, os);
  if (!output.empty()) {
    os << "wrote " << output << " (" << written.plan.label();
    if (!written.notCompilable.empty())
      os << "; partition-compile refuses it today";
    int64_t batch = written.plan.microBatch * written.plan.dp;
    if (batch != best.plan.microBatch * best.plan.dp)
      os << "; generate the model with batch " << batch;
    os << ")\n";
  }
}

/// Under --memory compiled: the first of `ranked` whose memory is not the
/// compiler's (its compile failed), or null.
const Prediction *uncompiled(const std::vector<Prediction> &ranked) {
  if (memorySource != "compiled")
    return nullptr;
  for (const Prediction &p : ranked)
    if (p.notCompilable.empty() && p.memorySource != "compiled")
      return &p;
  return nullptr;
}

/// --json: the shown plans, each with what its figures are relative to (a
/// device's memory and its peak at the plan's precision, which the
/// scorecard prints); with --nonuniform the uniform ranking and the
/// nonuniform one, each nonuniform plan with its gain over the best uniform
/// plan.
void printJson(const std::vector<Prediction> &shown, const Cluster &cluster,
               const Prediction &best, const NonuniformReport *nonuniform) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Prediction &p : shown) {
    all.push_back(toJson(p));
    Cluster device = deviceShare(cluster, p.plan.devices());
    all.back()["device_memory_bytes"] = device.memoryBytes;
    all.back()["device_peak_flops"] = device.peakFlops(p.plan.precision);
  }
  if (!nonuniform) {
    llvm::outs() << all.dump(2) << "\n";
    return;
  }
  nlohmann::ordered_json out;
  out["uniform"] = all;
  out["nonuniform"] = nonuniformJson(*nonuniform, best);
  out["nonuniform_beats_uniform"] = nonuniform->beats(best);
  llvm::outs() << out.dump(2) << "\n";
}

int planMain(int argc, char **argv) {
  cl::HideUnrelatedOptions(category);
  tools::parseCommandLine(
      argc, argv,
      "partition-plan: chooses a plan (dp, tp, pp, micro-batches, schedule, "
      "SP, ZeRO, recompute) for a model on a cluster, or predicts a given "
      "plan\n");

  // Calibration times sgemm: with the kernels partition-run would use.
  if (calibrate || calibrateWorker)
    partition::runtime::cpu::ensureBestBlasCore(argv);
  if (calibrateWorker)
    return runCollectivesWorker();
  if (calibrate)
    return runCalibration(argv[0], calibrateRanks, output, calibrateDir,
                          std::size_t(calibrateDiskMib) << 20);

  if (goodputMode)
    return runGoodput();
  checkSearchArguments();
  OrError<Cluster> cluster = loadCluster(clusterArg);
  if (!cluster)
    return fail(cluster.error());

  std::string error;
  std::optional<model::ModelConfig> config = loadModel(input, error);
  if (!config)
    return fail(error);
  ModelShape shape = shapeOf(*config);

  // What is fixed.
  Fixed fixed;
  if (!planFile.empty()) {
    llvm::FailureOr<Fixed> read = readFixedPlan(planFile, gpus > 0, error);
    if (failed(read))
      return fail(error);
    fixed = *read;
  }
  if (!precision.empty()) {
    // A plan's own field is predicted as written.
    if (fixed.precision && *fixed.precision != precision.getValue())
      tools::usageError(kTool, "--precision " + precision.getValue() +
                                   " contradicts " + planFile +
                                   "'s \"precision\": \"" +
                                   *fixed.precision + "\"");
    fixed.precision = precision.getValue();
  }
  applyOffloadFlags(fixed, *cluster);
  fixed.maxMicroBatch = maxMicroBatch;
  int64_t devices = gpus;
  if (devices <= 0)
    devices = *fixed.dp * fixed.cp.value_or(1) * *fixed.tp * *fixed.pp;

  SearchOptions options;
  options.devices = devices;
  options.globalBatch = globalBatch;
  options.top = std::max<int64_t>(top, 2);
  options.includeUncompilable = includeUnimplemented || !planFile.empty();

  // Left alive when compiles still run past --memory-seconds: their
  // threads use it, and main() then ends the process without waiting.
  std::unique_ptr<CompiledMemory, void (*)(CompiledMemory *)> compiledOwner(
      new CompiledMemory(*config, jobs), [](CompiledMemory *memory) {
        if (memory->abandoned())
          compilesAbandoned = true;
        else
          delete memory;
      });
  CompiledMemory &compiled = *compiledOwner;
  MemoryOracle oracle = nullptr;
  if (memorySource != "closed-form") {
    oracle = [&](const Candidate &c) { return compiled.bytes(c); };
    options.prefetchMemory = [&](const Candidate &c) { compiled.prefetch(c); };
  }

  auto start = std::chrono::steady_clock::now();
  if (memorySource == "auto" && memorySeconds > 0)
    compiled.setDeadline(
        start + std::chrono::duration_cast<std::chrono::steady_clock::duration>(
                    std::chrono::duration<double>(double(memorySeconds))));
  SearchResult result = search(
      shape, *cluster, options, fixed,
      [&](const Candidate &c, bool &hard) {
        return validate(c, *config, hard);
      },
      oracle);
  double planningSeconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();

  if (result.ranked.empty())
    return noPlan(result, *cluster, devices);
  if (const Prediction *p = uncompiled(result.ranked))
    return fail("the compiler's memory plan failed for " + p->plan.label() +
                ": " + compiled.lastError());

  std::vector<Prediction> shown = result.ranked;
  if (int64_t(shown.size()) > top)
    shown.resize(top);
  const Prediction &best = result.ranked.front();

  std::optional<NonuniformReport> nonuniformReport;
  if (nonuniform) {
    nonuniformReport = searchNonuniformPlans(shape, *cluster, options, fixed,
                                             *config, oracle, top);
    if (const Prediction *p = uncompiled(nonuniformReport->result.ranked))
      return fail("the compiler's memory plan failed for " + p->plan.label() +
                  ": " + compiled.lastError());
  }

  // -o writes the fastest plan partition-compile accepts today (the best
  // overall when none of them does; a note says so); with --nonuniform,
  // the fastest nonuniform plan it accepts where that beats it.
  const Prediction *written = &best;
  for (const Prediction &p : result.ranked)
    if (p.notCompilable.empty()) {
      written = &p;
      break;
    }
  if (nonuniformReport)
    if (const Prediction *p = nonuniformReport->compiledWinner(*written))
      written = p;
  if (!output.empty()) {
    std::string outError;
    auto out = mlir::openOutputFile(output, &outError);
    if (!out)
      return fail(outError);
    out->os() << nlohmann::ordered_json::parse(written->plan.planJson())
                     .dump(2)
              << "\n";
    out->keep();
  }

  if (jsonOutput) {
    printJson(shown, *cluster, best,
              nonuniformReport ? &*nonuniformReport : nullptr);
    return 0;
  }

  printRanking(*config, shape, *cluster, devices, result, planningSeconds,
               compiled.compiles(), compiled.skipped(),
               nonuniformReport ? &*nonuniformReport : nullptr, *written,
               fixed);
  return 0;
}

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  int code = planMain(argc, argv);
  if (compilesAbandoned) {
    // Memory-plan compiles past --memory-seconds still run on their
    // threads; their results are not needed. End without waiting for them
    // or destroying what they use (static destructors would).
    llvm::outs().flush();
    llvm::errs().flush();
    std::fflush(nullptr);
    std::quick_exit(code);
  }
  return code;
}
