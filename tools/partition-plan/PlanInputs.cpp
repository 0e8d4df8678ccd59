//===- PlanInputs.cpp - what partition-plan reads -------------------------===//

#include "tools/partition-plan/PlanInputs.h"

#include "passes/plan/Plan.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/MLIRContext.h"
#include "mlir/Parser/Parser.h"
#include "mlir/Support/FileUtilities.h"
#include "llvm/Support/MemoryBuffer.h"
#include "llvm/Support/SourceMgr.h"

#include <nlohmann/json.hpp>

namespace partition::planner {
namespace {

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
    // Present only when set (ModelBuilder's optional features).
    if (auto tied = dict.getAs<mlir::BoolAttr>("tied_embedding"))
      c.tieEmbedding = c.arch == model::Arch::Llama && tied.getValue();
    if (auto bias = dict.getAs<mlir::BoolAttr>("qkv_bias"))
      c.qkvBias = bias.getValue();
    if (auto window = dict.getAs<mlir::IntegerAttr>("sliding_window"))
      c.slidingWindow = window.getInt();
    if (auto from = dict.getAs<mlir::IntegerAttr>("window_from_layer"))
      c.windowFromLayer = from.getInt();
    if (auto bias = dict.getAs<mlir::BoolAttr>("output_bias"))
      c.outputBias = bias.getValue();
    // A mixture of experts (ModelBuilder writes these only then).
    if (dict.get("experts")) {
      field("experts", c.experts);
      field("top_k", c.topK);
      field("moe_every", c.moeEvery);
      field("shared_experts", c.sharedExperts);
      field("expert_ffn", c.expertFfn);
      if (auto factor = dict.getAs<mlir::FloatAttr>("capacity_factor"))
        c.capacityFactor = factor.getValueAsDouble();
    }
    if (!error.empty())
      return std::nullopt;
    return c;
  }
  error = "no function carries an xfmr.model configuration (give "
          "partition-gen output)";
  return std::nullopt;
}

} // namespace

ModelShape shapeOf(const model::ModelConfig &c) {
  ModelShape m;
  m.llama = c.arch == model::Arch::Llama;
  m.tiedHead = m.llama && c.tieEmbedding;
  m.qkvBias = m.llama && c.qkvBias;
  m.layers = c.layers;
  m.hidden = c.hidden;
  m.heads = c.heads;
  m.kvHeads = c.kvHeads;
  m.ffn = c.ffn;
  m.vocab = c.vocab;
  m.seqLen = c.seqLen;
  m.positions = m.llama ? 0 : c.positions;
  m.slidingWindow = c.slidingWindow;
  m.windowFromLayer = c.windowFromLayer;
  if (c.isMoe()) {
    m.experts = c.experts;
    m.topK = c.topK;
    m.moeEvery = c.moeEvery;
    m.sharedExperts = c.sharedExperts;
    m.expertFfn = c.expertWidth();
    m.capacity = c.expertCapacity();
  }
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
  pm.experts = model.experts;
  pm.expertCapacity = model.isMoe() && model.capacityFactor > 0;
  pm.routingBias = model.isMoe() && model.loadBalance == "aux-free";
  // A field the mesh ignores (a fixed zero.stage at dp 1) would be refused
  // by the compiler: hard, as a model the plan cannot follow.
  if (failed(checkPlanAgainstModel(*plan, pm, "plan", record)) ||
      failed(checkPlanTakesEffect(*plan, "plan", record))) {
    hard = true;
    return first;
  }
  hard = false;
  if (failed(checkPlanImplemented(*plan, "plan", record)))
    return first;
  return "";
}

/// What --plan fixes: every field the plan writes, exactly as written; the
/// fields it leaves out are searched (the mesh axes only when --gpus is
/// given; without it the plan's mesh, defaults included, is the device
/// count).
llvm::FailureOr<Fixed> readFixedPlan(const std::string &path, bool gpusGiven,
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
  auto has = [&](const char *object, llvm::StringRef key) {
    return root.contains(object) && root[object].is_object() &&
           root[object].contains(key.str());
  };
  Fixed f;
  if (has("mesh", Plan::kDataAxis) || !gpusGiven)
    f.dp = plan->mesh.dp;
  if (has("mesh", Plan::kTensorAxis) || !gpusGiven)
    f.tp = plan->mesh.tp;
  if (has("mesh", Plan::kPipelineAxis) || !gpusGiven)
    f.pp = plan->mesh.pp;
  // mesh.cp: 1 forbids context parallelism, N > 1 forces it; left out
  // with --gpus it is searched where it can pay (ContextParallel.h).
  if (has("mesh", Plan::kContextAxis) || !gpusGiven)
    f.cp = plan->mesh.cp;
  if (has("context_parallel", "method"))
    f.cpMethod = plan->contextParallel.method;
  if (has("context_parallel", "load_balance"))
    f.cpLoadBalance = plan->contextParallel.loadBalance;
  if (has("tensor_parallel", "sequence_parallel"))
    f.sequenceParallel = plan->tensorParallel.sequenceParallel;
  if (has("zero", "stage"))
    f.zeroStage = int(plan->zero.stage);
  if (has("recompute", "policy"))
    f.recompute = plan->recompute.policy;
  if (root.contains("precision"))
    f.precision = plan->precision;
  if (plan->pipeline.schedule)
    f.schedule = *plan->pipeline.schedule;
  if (has("pipeline", "virtual_stages"))
    f.virtualStages = plan->pipeline.virtualStages;
  if (!plan->pipeline.stages.empty())
    f.stages = std::vector<int64_t>(plan->pipeline.stages.begin(),
                                    plan->pipeline.stages.end());
  if (has("pipeline", "microbatches"))
    f.microbatches = plan->pipeline.microbatches;
  // moe.expert_tensor_parallel may only restate mesh.tp: nothing to fix.
  if (has("moe", "expert_parallel") || !gpusGiven)
    f.ep = plan->moe.expertParallel;
  if (!plan->tensorParallel.perLayer.empty()) {
    std::vector<TpPart> parts;
    for (const Plan::TensorParallel::LayerRange &range :
         plan->tensorParallel.perLayer)
      parts.push_back({range.first, range.last, range.tp});
    f.perLayer = std::move(parts);
  }
  // offload.optimizer as written ("none" forbids it); the staging budget
  // and the nvme path are written back to the plan the planner emits.
  // offload.parameters likewise (the plan.json reader has checked that it
  // comes with zero.stage 3 over dp > 1).
  if (has("offload", "parameters"))
    f.offloadParameters = plan->offload.parameters;
  // Only ZeRO-3 over dp > 1 has shards to offload: a plan that fixes
  // another stage or one replica is refused here, as the compiler would
  // (the search then tries ZeRO-3 plans only).
  if (plan->offload.parameters != "none") {
    bool otherStage = has("zero", "stage") && plan->zero.stage != 3;
    if (otherStage || (f.dp && *f.dp == 1)) {
      error = path + ": offload.parameters = \"" + plan->offload.parameters +
              "\" offloads ZeRO-3's parameter shards, but the plan has " +
              (otherStage ? "zero.stage " + std::to_string(plan->zero.stage)
                          : std::string("mesh.dp = 1")) +
              "; give zero.stage 3 with mesh.dp > 1, or leave out "
              "offload.parameters";
      return llvm::failure();
    }
  }
  if (has("offload", "optimizer"))
    f.offload = plan->offload.optimizer;
  f.offloadBufferBytes = plan->offload.bufferBytes;
  if (plan->offload.pathGiven)
    f.offloadPath = plan->offload.path;
  // A field the cost model cannot follow is refused rather than predicted
  // as something else.
  if (plan->tensorParallel.embeddingTp) {
    error = path + ": tensor_parallel.embedding.tp is not predicted by the "
                   "cost model (the embedding and LM head run at mesh.tp "
                   "there); leave it out to predict the plan without it";
    return llvm::failure();
  }
  return f;
}

std::vector<std::string> searchedFields(const Fixed &f, bool cpSearched,
                                        bool moe, bool offloaded,
                                        bool offloadedParameters) {
  std::vector<std::string> out;
  auto open = [&](bool fixed, const char *name) {
    if (!fixed)
      out.push_back(name);
  };
  // A field a fixed axis of 1 makes moot is not named.
  auto above1 = [](const std::optional<int64_t> &axis) {
    return !axis || *axis > 1;
  };
  open(bool(f.dp), "mesh.dp");
  open(bool(f.tp), "mesh.tp");
  open(bool(f.pp), "mesh.pp");
  if (cpSearched)
    open(bool(f.cp), "mesh.cp");
  if (f.cp && *f.cp > 1)
    open(bool(f.cpMethod), "context_parallel.method");
  if (above1(f.tp))
    open(bool(f.sequenceParallel), "tensor_parallel.sequence_parallel");
  if (above1(f.pp)) {
    open(bool(f.schedule), "pipeline.schedule");
    if (!f.schedule || *f.schedule == "interleaved-1f1b")
      open(bool(f.virtualStages), "pipeline.virtual_stages");
  }
  open(bool(f.microbatches), "pipeline.microbatches");
  if (above1(f.dp))
    open(bool(f.zeroStage), "zero.stage");
  if (moe && above1(f.dp))
    open(bool(f.ep), "moe.expert_parallel");
  open(bool(f.recompute), "recompute.policy");
  if (offloaded)
    open(bool(f.offload), "offload.optimizer");
  if (offloadedParameters)
    open(bool(f.offloadParameters), "offload.parameters");
  open(bool(f.precision), "precision");
  return out;
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


} // namespace partition::planner
