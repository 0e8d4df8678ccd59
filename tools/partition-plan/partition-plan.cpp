//===- partition-plan.cpp - choose a plan, or predict a given one ---------===//
//
//   partition-plan model.mlir --cluster a100-80gb-dgx --gpus 64 \
//       --global-batch 512 [-o plan.json] [--top K] [--explain] [--json]
//   partition-plan model.mlir --cluster C --global-batch B --plan plan.json
//   partition-plan --calibrate -o cpu.json
//   partition-plan --goodput --cluster C --gpus N [model.mlir]
//
// Searches dp x tp x pp, micro-batch size and count, schedule, virtual
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
#include "passes/plan/Plan.h"
#include "planner/Cluster.h"
#include "planner/CostModel.h"
#include "planner/Nonuniform.h"
#include "planner/Search.h"
#include "tools/common/CommandLine.h"
#include "tools/partition-plan/Calibrate.h"
#include "tools/partition-plan/CompiledMemory.h"
#include "tools/partition-plan/GoodputReport.h"

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

namespace cl = llvm::cl;
using namespace partition;
using namespace partition::planner;

namespace {

cl::OptionCategory category("partition-plan options");
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
    cl::desc("Predict this plan; what it leaves out (micro-batch size and "
             "count, schedule, virtual stages) is searched"),
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
cl::opt<bool> includeUnimplemented(
    "include-unimplemented",
    cl::desc("Also rank plans partition-compile refuses only because a "
             "pass is missing, marked (none today: every plan.json field "
             "has its pass)"),
    cl::cat(category));
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

int fail(const llvm::Twine &message) {
  llvm::errs() << kTool << ": error: " << message << "\n";
  return 1;
}

std::string gib(double bytes) {
  char text[32];
  if (bytes >= (1 << 30))
    std::snprintf(text, sizeof(text), "%.1f GiB", bytes / (1 << 30));
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / (1 << 20));
  return text;
}

std::string seconds(double s) {
  char text[32];
  if (s >= 1)
    std::snprintf(text, sizeof(text), "%.3f s", s);
  else
    std::snprintf(text, sizeof(text), "%.3f ms", s * 1e3);
  return text;
}

/// The model's configuration from its forward function's `xfmr.model`.
std::optional<model::ModelConfig> readModel(mlir::ModuleOp module,
                                            std::string &error) {
  for (auto function : module.getOps<mlir::func::FuncOp>()) {
    auto dict = function->getAttrOfType<mlir::DictionaryAttr>(
        xfmr::XfmrDialect::kModelAttrName);
    if (!dict)
      continue;
    model::ModelConfig c;
    auto field = [&](llvm::StringRef name, int64_t &out) {
      if (auto v = dict.getAs<mlir::IntegerAttr>(name))
        out = v.getInt();
      else
        error = ("the model's xfmr.model has no integer '" + name + "'")
                    .str();
    };
    auto arch = dict.getAs<mlir::StringAttr>("arch");
    std::optional<model::Arch> parsed =
        arch ? model::parseArch(arch.getValue().str()) : std::nullopt;
    if (!parsed) {
      error = "the model's xfmr.model has no known 'arch'";
      return std::nullopt;
    }
    c.arch = *parsed;
    field("layers", c.layers);
    field("hidden", c.hidden);
    field("heads", c.heads);
    field("kv_heads", c.kvHeads);
    field("ffn", c.ffn);
    field("vocab", c.vocab);
    field("seq_len", c.seqLen);
    field("positions", c.positions);
    field("batch", c.batch);
    if (!error.empty())
      return std::nullopt;
    return c;
  }
  error = "no function carries an xfmr.model configuration (give "
          "partition-gen output)";
  return std::nullopt;
}

ModelShape shapeOf(const model::ModelConfig &c) {
  ModelShape m;
  m.llama = c.arch == model::Arch::Llama;
  m.layers = c.layers;
  m.hidden = c.hidden;
  m.heads = c.heads;
  m.kvHeads = c.kvHeads;
  m.ffn = c.ffn;
  m.vocab = c.vocab;
  m.seqLen = c.seqLen;
  m.positions = m.llama ? 0 : c.positions;
  return m;
}

/// Asks the plan.json reader: "" when partition-compile accepts the plan
/// for this model, else its first message. A plan the reader cannot parse
/// (a field it does not know yet, as virtual_stages) or a pass it lacks is
/// a soft refusal; one the model cannot follow is hard, and so is a
/// per-layer plan it cannot parse: it reads per_layer, so the degrees or
/// ranges break its rules (a chain, the mesh's tp), which no pass lifts.
std::string validate(const Candidate &c, const model::ModelConfig &model,
                     bool &hard) {
  std::string first;
  auto record = [&](const llvm::Twine &message) {
    if (first.empty())
      first = message.str();
  };
  std::string text = c.planJson();
  llvm::FailureOr<Plan> plan = parsePlan(text, "plan", record);
  if (failed(plan)) {
    hard = !c.perLayer.empty();
    return first;
  }
  PlanModel pm{c.microBatch * c.dp, model.heads, model.kvHeads,
               model.layers, model.vocab, model.seqLen};
  if (failed(checkPlanAgainstModel(*plan, pm, "plan", record))) {
    hard = true;
    return first;
  }
  hard = false;
  if (failed(checkPlanImplemented(*plan, "plan", record)))
    return first;
  return "";
}

/// What --plan fixes: the plan's fields that the search would otherwise
/// choose; plan.json defaults stand for the fields it leaves out, except
/// the micro-batch count, the schedule and the mesh axes --gpus leaves
/// open.
llvm::FailureOr<Fixed> readFixedPlan(const std::string &path,
                                     std::string &error) {
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file) {
    error = "cannot read '" + path + "': " + file.getError().message();
    return llvm::failure();
  }
  llvm::StringRef text = (*file)->getBuffer();
  llvm::FailureOr<Plan> plan =
      parsePlan(text, path, [&](const llvm::Twine &message) {
        if (error.empty())
          error = message.str();
      });
  if (failed(plan))
    return llvm::failure();
  // The cost model predicts uniform meshes; it would read replicas as a
  // uniform dp x (largest) tp.
  if (!plan->replicas.empty()) {
    error = path + ": replicas (nonuniform tensor parallelism) are not "
                   "predicted by the cost model; predict each replica's "
                   "uniform plan, or simulate NTP with --goodput";
    return llvm::failure();
  }
  // parsePlan accepted it: valid JSON.
  nlohmann::json root =
      nlohmann::json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  auto has = [&](const char *object, const char *key) {
    return root.contains(object) && root[object].is_object() &&
           root[object].contains(key);
  };
  Fixed f;
  bool gpusGiven = gpus > 0;
  if (has("mesh", "dp") || !gpusGiven)
    f.dp = plan->mesh.dp;
  if (has("mesh", "tp") || !gpusGiven)
    f.tp = plan->mesh.tp;
  if (has("mesh", "pp") || !gpusGiven)
    f.pp = plan->mesh.pp;
  f.sequenceParallel = plan->tensorParallel.sequenceParallel;
  f.zeroStage = int(plan->zero.stage);
  f.recompute = plan->recompute.policy;
  f.precision = plan->precision;
  if (plan->pipeline.schedule)
    f.schedule = *plan->pipeline.schedule;
  if (has("pipeline", "microbatches"))
    f.microbatches = plan->pipeline.microbatches;
  return f;
}

nlohmann::ordered_json toJson(const Prediction &p) {
  nlohmann::ordered_json out;
  out["plan"] = nlohmann::ordered_json::parse(p.plan.planJson());
  out["label"] = p.plan.label();
  out["micro_batch_size"] = p.plan.microBatch;
  out["model_batch"] = p.plan.microBatch * p.plan.dp;
  out["step_s"] = p.stepSeconds;
  out["tflops_per_gpu"] = p.tflopsPerGpu;
  out["mfu"] = p.mfu;
  out["memory_per_rank_bytes"] = p.memoryPerRank;
  out["memory_source"] = p.memorySource;
  out["fits"] = p.fits;
  out["compiles"] = p.notCompilable.empty();
  if (!p.notCompilable.empty())
    out["not_compilable"] = p.notCompilable;
  const Breakdown &b = p.breakdown;
  out["breakdown"] = {{"compute_s", b.compute},
                      {"recompute_s", b.recompute},
                      {"tensor_parallel_comm_s", b.tensorComm},
                      {"pipeline_comm_s", b.pipelineComm},
                      {"bubble_s", b.bubble},
                      {"data_parallel_comm_s", b.dataComm},
                      {"optimizer_s", b.optimizer}};
  return out;
}

/// The breakdown's terms, named, in a stable order.
std::vector<std::pair<const char *, double>> terms(const Breakdown &b) {
  return {{"compute", b.compute},
          {"recompute", b.recompute},
          {"tensor-parallel communication", b.tensorComm},
          {"pipeline communication", b.pipelineComm},
          {"pipeline bubble", b.bubble},
          {"data-parallel communication", b.dataComm},
          {"optimizer", b.optimizer}};
}

void printBreakdown(const Prediction &p, llvm::raw_ostream &os) {
  for (auto [name, value] : terms(p.breakdown))
    if (value > 0)
      os << llvm::format("  %-31s %12s  %5.1f%%\n", name,
                         seconds(value).c_str(),
                         100 * value / p.stepSeconds);
  const Memory &m = p.memory;
  os << "  memory per rank " << gib(p.memoryPerRank) << " ("
     << p.memorySource;
  if (p.memorySource == "closed-form")
    os << ": parameters " << gib(m.parameters) << ", gradients "
       << gib(m.gradients) << ", optimizer " << gib(m.optimizer)
       << ", activations " << gib(m.activations) << ", other "
       << gib(m.other);
  else
    os << ": the compiler's memory plan";
  os << ")\n";
}

void printExplanation(const std::vector<Prediction> &ranked,
                      llvm::raw_ostream &os) {
  const Prediction &best = ranked.front();
  os << "why " << best.plan.label() << ":\n";
  printBreakdown(best, os);
  auto all = terms(best.breakdown);
  auto dominant = std::max_element(
      all.begin(), all.end(),
      [](const auto &a, const auto &b) { return a.second < b.second; });
  os << "  dominant term: " << dominant->first << " ("
     << llvm::format("%.0f%%", 100 * dominant->second / best.stepSeconds)
     << " of the step)\n";
  if (ranked.size() < 2) {
    os << "  no runner-up\n";
    return;
  }
  const Prediction &second = ranked[1];
  auto other = terms(second.breakdown);
  size_t worst = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (other[i].second - all[i].second >
        other[worst].second - all[worst].second)
      worst = i;
  os << "  runner-up " << second.plan.label() << " is "
     << llvm::format("%.1f%%",
                     100 * (second.stepSeconds / best.stepSeconds - 1))
     << " slower: +" << seconds(other[worst].second - all[worst].second)
     << " of " << all[worst].first << "\n";
}

/// The configuration of the model in `path`, or the message why not.
std::optional<model::ModelConfig> loadModel(const std::string &path,
                                            std::string &error) {
  mlir::DialectRegistry registry;
  registry.insert<xfmr::XfmrDialect, dist::DistDialect,
                  mlir::func::FuncDialect, mlir::tensor::TensorDialect>();
  mlir::MLIRContext context(registry);
  context.printOpOnDiagnostic(false);
  auto file = mlir::openInputFile(path, &error);
  if (!file)
    return std::nullopt;
  llvm::SourceMgr sources;
  sources.AddNewSourceBuffer(std::move(file), llvm::SMLoc());
  std::string parseError;
  mlir::ScopedDiagnosticHandler handler(&context, [&](mlir::Diagnostic &d) {
    if (parseError.empty())
      parseError = d.str();
    return mlir::success();
  });
  mlir::OwningOpRef<mlir::ModuleOp> module =
      mlir::parseSourceFile<mlir::ModuleOp>(sources, &context);
  if (!module) {
    error = "cannot parse '" + path + "': " + parseError;
    return std::nullopt;
  }
  std::optional<model::ModelConfig> config = readModel(*module, error);
  if (!config)
    error = path + ": " + error;
  return config;
}

/// --nonuniform: the uniform plans the per-layer degrees start from, and
/// what the search found.
struct NonuniformReport {
  std::vector<int64_t> meshTps; // the tp degrees of the bases
  int64_t bases = 0;
  NonuniformResult result;
  bool beats(const Prediction &best) const {
    return !result.ranked.empty() &&
           result.ranked.front().stepSeconds < best.stepSeconds;
  }
  /// The fastest nonuniform plan partition-compile accepts when it is
  /// faster than `than`, else null: what -o writes in place of `than`.
  const Prediction *compiledWinner(const Prediction &than) const {
    for (const Prediction &p : result.ranked)
      if (p.notCompilable.empty())
        return p.stepSeconds < than.stepSeconds ? &p : nullptr;
    return nullptr;
  }
};

/// The bases are the fastest uniform plans (three per mesh tp) with tp > 1
/// that fit and that the plan.json reader accepts with per-layer degrees
/// too (under what --plan fixes; a probe assignment, layer 0 at tp 1 and
/// the rest at the mesh's, asks it: whether per_layer goes with the base's
/// pp or ZeRO is the reader's rule, not the planner's); every per-layer
/// assignment is tried on each and put to the reader, and those that
/// compile get the compiler's memory plan from `oracle`.
NonuniformReport searchNonuniformPlans(const ModelShape &shape,
                                       const Cluster &cluster,
                                       const SearchOptions &options,
                                       const Fixed &fixed,
                                       const model::ModelConfig &config,
                                       const MemoryOracle &oracle) {
  NonuniformReport report;
  std::vector<Candidate> bases;
  for (int64_t t = 2; t <= options.devices; ++t) {
    if (options.devices % t != 0 || (fixed.tp && *fixed.tp != t))
      continue;
    Fixed f = fixed;
    f.tp = t;
    SearchOptions o = options;
    o.top = 3;
    o.keepUnfit = false;
    SearchResult r = search(
        shape, cluster, o, f,
        [&](const Candidate &c, bool &hard) {
          std::string why = validate(c, config, hard);
          if (!why.empty() || shape.layers < 2)
            return why;
          Candidate probe = c;
          probe.perLayer = {{0, 0, 1}, {1, shape.layers - 1, c.tp}};
          return validate(probe, config, hard);
        });
    bool any = false;
    for (const Prediction &p : r.ranked)
      if (p.fits) {
        bases.push_back(p.plan);
        any = true;
      }
    if (any)
      report.meshTps.push_back(t);
  }
  report.bases = int64_t(bases.size());
  report.result = searchNonuniform(shape, cluster, bases,
                                   std::max<int64_t>(top, 1),
                                   [&](const Candidate &c, bool &hard) {
                                     return validate(c, config, hard);
                                   },
                                   oracle,
                                   options.includeUncompilable);
  return report;
}

nlohmann::ordered_json nonuniformJson(const NonuniformReport &report,
                                      const Prediction &best) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Prediction &p : report.result.ranked) {
    nlohmann::ordered_json entry = toJson(p);
    // Positive: faster than the best uniform plan by that much.
    entry["gain_s"] = best.stepSeconds - p.stepSeconds;
    entry["gain"] = 1 - p.stepSeconds / best.stepSeconds;
    all.push_back(entry);
  }
  return all;
}

void printNonuniform(const NonuniformReport &report, const Prediction &best,
                     llvm::raw_ostream &os) {
  const NonuniformResult &r = report.result;
  os << "nonuniform: " << r.evaluated << " per-layer plans on "
     << report.bases << " uniform bases (mesh tp";
  for (int64_t t : report.meshTps)
    os << " " << t;
  if (report.meshTps.empty())
    os << ": none";
  os << "), " << r.refused << " refused by the plan.json reader, "
     << r.unfit << " do not fit\n";
  if (!r.firstRefusal.empty())
    os << "  the reader's first refusal: " << r.firstRefusal << "\n";
  if (r.ranked.empty()) {
    if (report.bases == 0)
      os << "no nonuniform plan: no uniform plan with tp > 1 that takes "
            "per-layer degrees fits to start from\n";
    else if (!r.firstRefusal.empty() && r.evaluated == 0)
      os << "no nonuniform plan: partition-compile refuses every one ("
         << r.firstRefusal << ")\n";
    else
      os << "no nonuniform plan fits\n";
    return;
  }
  os << llvm::format("%4s  %-56s %12s %17s %10s  %s\n", "rank", "plan",
                     "step", "vs best uniform", "memory", "source");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Prediction &p = r.ranked[i];
    os << llvm::format("%4d  %-56s %12s %+16.1f%% %10s  %s%s\n", int(i + 1),
                       p.plan.label().c_str(),
                       seconds(p.stepSeconds).c_str(),
                       100 * (p.stepSeconds / best.stepSeconds - 1),
                       gib(p.memoryPerRank).c_str(), p.memorySource.c_str(),
                       p.notCompilable.empty() ? ""
                                               : " (does not compile yet)");
  }
  const Prediction &winner = r.ranked.front();
  if (report.beats(best)) {
    os << "nonuniform wins: " << winner.plan.label() << " beats the best "
       << "uniform plan " << best.plan.label() << " by "
       << llvm::format("%.1f%%", 100 * (1 - winner.stepSeconds /
                                                 best.stepSeconds))
       << " (" << seconds(best.stepSeconds - winner.stepSeconds)
       << " per step)\n";
    os << "  plan.json: " << winner.plan.planJson() << "\n";
    if (!winner.notCompilable.empty())
      os << "note: partition-compile refuses this plan today: "
         << winner.notCompilable << "\n";
  } else {
    os << "no nonuniform plan beats the best uniform plan "
       << best.plan.label() << " (" << seconds(best.stepSeconds)
       << "): the fastest, " << winner.plan.label() << ", is "
       << llvm::format("%.1f%%",
                       100 * (winner.stepSeconds / best.stepSeconds - 1))
       << " slower\n";
  }
}

/// --goodput: checks the failure flags, then prints the table.
int runGoodput() {
  if (clusterArg.empty())
    tools::usageError(kTool, "give --cluster PROFILE or --cluster FILE.json");
  if (gpus <= 0)
    tools::usageError(kTool, "give --gpus N (a positive integer)");
  GoodputOptions options;
  FailureModel &fm = options.failures;
  fm.gpus = gpus;
  fm.pp = goodputPp;
  fm.failuresPerGpuHour = failureRate;
  fm.repairHours = repairHours;
  fm.checkpointHours = checkpointMinutes / 60;
  fm.checkpointCostHours = checkpointCostSeconds / 3600;
  fm.restartHours = restartSeconds / 3600;
  fm.boost = boost;
  fm.standbyGpus = standbyGpus;
  // A bad value is bad input (exit 1, one line naming the flag); a
  // missing flag is a bad command line (exit 2, above).
  std::string problem;
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", value);
    return std::string(text);
  };
  auto check = [&](bool ok, const llvm::Twine &message) {
    if (!ok && problem.empty())
      problem = message.str();
  };
  auto nonNegative = [&](double value, const char *flag) {
    check(value >= 0 && !std::isinf(value),
          llvm::Twine("--") + flag + " must be a finite number >= 0, got " +
              number(value));
  };
  nonNegative(failureRate, "failure-rate");
  nonNegative(repairHours, "repair-hours");
  nonNegative(checkpointMinutes, "checkpoint-min");
  nonNegative(checkpointCostSeconds, "checkpoint-cost-s");
  nonNegative(restartSeconds, "restart-s");
  check(boost >= 1 && !std::isinf(boost),
        "--boost must be at least 1 (a speed factor), got " +
            number(boost));
  check(standbyGpus >= 0, "--standby-gpus must be >= 0, got " +
                             llvm::Twine(int64_t(standbyGpus)));
  check(goodputPp >= 1, "--pp must be at least 1, got " +
                            llvm::Twine(int64_t(goodputPp)));
  if (!tpDomains.empty())
    options.tpDomains.assign(tpDomains.begin(), tpDomains.end());
  for (int64_t t : options.tpDomains) {
    check(t >= 1, "--tp-domains must be positive, got " + llvm::Twine(t));
    check(t < 1 || goodputPp < 1 || t * goodputPp <= gpus,
          "--gpus " + llvm::Twine(int64_t(gpus)) +
              " is smaller than one data-parallel replica (tp domain " +
              llvm::Twine(t) + " x pp " + llvm::Twine(int64_t(goodputPp)) +
              "); give at least " + llvm::Twine(t * goodputPp) + " GPUs");
  }
  if (!failedFractions.empty())
    options.failedFractions.assign(failedFractions.begin(),
                                   failedFractions.end());
  for (double f : options.failedFractions)
    check(f >= 0 && f < 1,
          "--failed-fractions must lie in [0, 1), got " + number(f));
  if (!problem.empty())
    return fail(problem);
  options.json = jsonOutput;

  Expected<Cluster> cluster = loadCluster(clusterArg);
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

int main(int argc, char **argv) {
  llvm::InitLLVM init(argc, argv);
  cl::HideUnrelatedOptions(category);
  tools::parseCommandLine(
      argc, argv,
      "partition-plan: chooses a plan (dp, tp, pp, micro-batches, schedule, "
      "SP, ZeRO, recompute) for a model on a cluster, or predicts a given "
      "plan\n");

  if (calibrateWorker)
    return runCollectivesWorker();
  if (calibrate)
    return runCalibration(argv[0], calibrateRanks, output);

  if (goodputMode)
    return runGoodput();
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
  if (memorySource != "auto" && memorySource != "compiled" &&
      memorySource != "closed-form")
    tools::usageError(kTool, "--memory must be auto, compiled or "
                             "closed-form, got '" + memorySource + "'");
  if (!precision.empty() && precision != "fp32" && precision != "bf16")
    tools::usageError(kTool, "--precision must be fp32 or bf16, got '" +
                                 precision + "'");

  Expected<Cluster> cluster = loadCluster(clusterArg);
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
    llvm::FailureOr<Fixed> read = readFixedPlan(planFile, error);
    if (failed(read))
      return fail(error);
    fixed = *read;
  }
  if (!precision.empty())
    fixed.precision = precision.getValue();
  fixed.maxMicroBatch = maxMicroBatch;
  int64_t devices = gpus;
  if (devices <= 0)
    devices = *fixed.dp * *fixed.tp * *fixed.pp;

  SearchOptions options;
  options.devices = devices;
  options.globalBatch = globalBatch;
  options.top = std::max<int64_t>(top, 2);
  options.includeUncompilable = includeUnimplemented || !planFile.empty();

  CompiledMemory compiled(*config);
  MemoryOracle oracle = nullptr;
  if (memorySource != "closed-form")
    oracle = [&](const Candidate &c) { return compiled.bytes(c); };

  auto start = std::chrono::steady_clock::now();
  SearchResult result = search(
      shape, *cluster, options, fixed,
      [&](const Candidate &c, bool &hard) {
        return validate(c, *config, hard);
      },
      oracle);
  double planningSeconds = std::chrono::duration<double>(
                               std::chrono::steady_clock::now() - start)
                               .count();

  if (result.ranked.empty()) {
    if (result.unfit > 0)
      return fail(llvm::Twine("no plan fits: the smallest of the ") +
                  llvm::Twine(result.unfit) + " plans that " +
                  (planFile.empty() ? "" : "follow the plan and ") +
                  "the model allows needs " +
                  gib(result.leastUnfitMemory) + " per rank, " +
                  cluster->name + " has " + gib(cluster->memoryBytes) +
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
  if (memorySource == "compiled")
    for (const Prediction &p : result.ranked)
      if (p.notCompilable.empty() && p.memorySource != "compiled")
        return fail("the compiler's memory plan failed for " +
                    p.plan.label() + ": " + compiled.lastError());

  std::vector<Prediction> shown = result.ranked;
  if (int64_t(shown.size()) > top)
    shown.resize(top);
  const Prediction &best = result.ranked.front();

  std::optional<NonuniformReport> nonuniformReport;
  if (nonuniform) {
    nonuniformReport = searchNonuniformPlans(shape, *cluster, options, fixed,
                                             *config, oracle);
    if (memorySource == "compiled")
      for (const Prediction &p : nonuniformReport->result.ranked)
        if (p.notCompilable.empty() && p.memorySource != "compiled")
          return fail("the compiler's memory plan failed for " +
                      p.plan.label() + ": " + compiled.lastError());
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
    nlohmann::ordered_json all = nlohmann::ordered_json::array();
    for (const Prediction &p : shown)
      all.push_back(toJson(p));
    if (nonuniformReport) {
      // --nonuniform --json: the uniform ranking and the nonuniform one,
      // each nonuniform plan with its gain over the best uniform plan.
      nlohmann::ordered_json out;
      out["uniform"] = all;
      out["nonuniform"] = nonuniformJson(*nonuniformReport, best);
      out["nonuniform_beats_uniform"] = nonuniformReport->beats(best);
      llvm::outs() << out.dump(2) << "\n";
      return 0;
    }
    llvm::outs() << all.dump(2) << "\n";
    return 0;
  }

  llvm::raw_ostream &os = llvm::outs();
  os << kTool << ": " << input << " (" << model::archName(config->arch)
     << ", " << llvm::format("%.3g", double(shape.parameters()))
     << " parameters) on " << devices << " x " << cluster->name
     << ", global batch " << globalBatch << ": " << result.evaluated
     << " plans predicted, " << result.refused << " refused, "
     << result.unfit << " do not fit ("
     << llvm::format("%.2f", planningSeconds) << " s)\n";
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
  if (!planFile.empty() && !explain) {
    os << "breakdown:\n";
    printBreakdown(best, os);
  }
  if (explain)
    printExplanation(result.ranked, os);
  if (nonuniformReport)
    printNonuniform(*nonuniformReport, best, os);
  if (!output.empty()) {
    os << "wrote " << output << " (" << written->plan.label();
    if (!written->notCompilable.empty())
      os << "; partition-compile refuses it today";
    int64_t batch = written->plan.microBatch * written->plan.dp;
    if (batch != best.plan.microBatch * best.plan.dp)
      os << "; generate the model with batch " << batch;
    os << ")\n";
  }
  return 0;
}
