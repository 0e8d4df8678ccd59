//===- PlanChecks.cpp - a parsed plan against the model and the passes ----===//
//
// What parsePlan cannot know alone: whether the model can follow the plan
// (checkPlanAgainstModel: heads, layers, batch and vocabulary against the
// mesh and the per-layer degrees), whether every field takes effect under
// the mesh (checkPlanTakesEffect), and whether a pass implements every
// combination (checkPlanImplemented).
//
//===----------------------------------------------------------------------===//

#include "passes/plan/Plan.h"

#include "scheduling/Schedule.h"

#include "llvm/ADT/STLExtras.h"
#include "llvm/ADT/StringExtras.h"
#include "llvm/Support/MathExtras.h"

#include <limits>
#include <numeric>
#include <set>
#include <vector>

using namespace partition;
using llvm::ArrayRef;
using llvm::FailureOr;
using llvm::LogicalResult;
using llvm::StringRef;
using llvm::Twine;

namespace {

/// tensor_parallel.per_layer against the model: every layer covered, none
/// beyond the model, and each part's degree splitting its heads and
/// key-value heads by the rules mesh.tp follows.
void checkPartDegrees(const Plan &plan, const PlanModel &model,
                      llvm::function_ref<void(const Twine &)> error) {
  const auto &perLayer = plan.tensorParallel.perLayer;
  if (auto layers = model.layers; layers && !perLayer.empty()) {
    for (auto [index, range] : llvm::enumerate(perLayer))
      if (range.last >= *layers)
        error("tensor_parallel.per_layer[" + Twine(index) + "] (" +
              range.describe() + ") names layers beyond the model's " +
              Twine(*layers) + " (0-" + Twine(*layers - 1) + ")");
    for (int64_t layer = 0; layer < *layers; ++layer)
      if (llvm::none_of(perLayer, [&](const auto &range) {
            return range.first <= layer && layer <= range.last;
          })) {
        error("tensor_parallel.per_layer gives layer " + Twine(layer) +
              " no degree; the entries must cover every layer of the "
              "model (0-" + Twine(*layers - 1) + ") exactly once");
        break;
      }
  }
  for (auto [index, range] : llvm::enumerate(perLayer)) {
    if (range.tp == plan.mesh.tp)
      continue;
    std::string degree = "tensor_parallel.per_layer[" +
                         std::to_string(index) + "].tp = " +
                         std::to_string(range.tp) + " (" +
                         range.describe() + ")";
    if (auto heads = model.heads; heads && *heads % range.tp != 0)
      error("heads " + Twine(*heads) + " is not divisible by " + degree);
    if (auto kvHeads = model.kvHeads; kvHeads && *kvHeads % range.tp != 0 &&
                                      range.tp % *kvHeads != 0)
      error("kv_heads " + Twine(*kvHeads) + " is not divisible by " +
            degree + ", nor it by kv_heads; choose a degree that divides "
            "kv_heads or is a multiple of it");
  }
  // With fewer key-value heads than mesh.tp, --dist-apply-plan cuts tp at
  // the key-value heads too: the embedding's degree must chain with them
  // (the layers' degrees do by the rule above).
  if (auto kvHeads = model.kvHeads;
      kvHeads && *kvHeads < plan.mesh.tp && plan.mesh.tp % *kvHeads == 0) {
    int64_t embedding = plan.embeddingTp();
    if (*kvHeads % embedding != 0 && embedding % *kvHeads != 0)
      error("kv_heads " + Twine(*kvHeads) +
            " and tensor_parallel.embedding.tp = " + Twine(embedding) +
            " do not divide one another; with fewer key-value heads than "
            "mesh.tp, every degree must divide kv_heads or be a multiple "
            "of it");
  }
}

/// Expert parallelism (plan.json's moe) against the model's experts.
void checkExperts(const Plan &plan, const PlanModel &model,
                  llvm::function_ref<void(const Twine &)> error) {
  const Plan::Moe &moe = plan.moe;
  int64_t experts = model.experts.value_or(0);
  bool moeGiven = moe.expertParallel > 1 || moe.expertTensorParallel > 0;
  // A known model (its layers given) without experts is dense.
  if (moeGiven && experts == 0 && model.layers)
    error("moe: the model has no experts (a dense model); leave out moe, "
          "or generate a mixture of experts (partition-gen --experts E)");
  if (moe.expertParallel > 1) {
    if (plan.mesh.dp % moe.expertParallel != 0)
      error("moe.expert_parallel = " + Twine(moe.expertParallel) +
            " does not divide mesh.dp = " + Twine(plan.mesh.dp) +
            ": the experts are split over data-parallel ranks");
    if (experts > 0 && experts % moe.expertParallel != 0)
      error("moe.expert_parallel = " + Twine(moe.expertParallel) +
            " does not divide the model's " + Twine(experts) +
            " experts; choose a degree that divides them");
  }
  // Capacity fills in sequence order; the context layout reorders the
  // sequence (zigzag), so the same tokens would not drop.
  if (model.expertCapacity && plan.mesh.cp > 1)
    error("mesh.cp = " + Twine(plan.mesh.cp) +
          " with experts that drop tokens (a capacity factor) is not "
          "implemented yet: the capacity fills in sequence order, which "
          "context parallelism's layout changes; use a dropless model "
          "(--capacity-factor 0) or mesh.cp = 1");
  if (moe.expertTensorParallel > 0 && moe.expertTensorParallel != plan.mesh.tp)
    error("moe.expert_tensor_parallel = " + Twine(moe.expertTensorParallel) +
          " differs from mesh.tp = " + Twine(plan.mesh.tp) +
          ": the experts split over the model's tensor axis (Megatron-LM's "
          "default); another degree is not implemented yet: leave it out");
}

} // namespace

LogicalResult partition::checkPlanAgainstModel(const Plan &plan,
                                               const PlanModel &model,
                                               StringRef fileName,
                                               PlanErrorFn emitError) {
  bool failed = false;
  auto error = [&](const Twine &message) {
    emitError(fileName + ": " + message);
    failed = true;
  };
  const Plan::Mesh &mesh = plan.mesh;

  // Replicas: each replica's step is checked as the uniform plan it is
  // compiled with (its degree against the heads, ...), and the shares
  // against the batch.
  if (!plan.replicas.empty()) {
    if (auto batch = model.batch; batch && *batch % plan.batchGranule() != 0) {
      int64_t granule = plan.batchGranule();
      std::string shares;
      for (const Plan::Replica &replica : plan.replicas)
        shares += (shares.empty() ? "" : ":") +
                  std::to_string(replica.batchShare);
      error("replicas: batch_share " + shares + " does not split the batch "
            "of " + Twine(*batch) + " sequences into whole sequences; use a "
            "batch that is a multiple of " + Twine(granule) + " (" +
            Twine(granule) + ", " + Twine(2 * granule) + ", " +
            Twine(3 * granule) + "...) or other shares");
    }
    // Replicas sum their gradients, not their expert loads: each would
    // move the bias by its own rows.
    if (model.routingBias)
      error("replicas with an aux-free routing bias (load_balance aux-free) "
            "are not implemented yet: each replica would update the bias "
            "from its own rows; leave out the replicas or use another "
            "--load-balance");
    PlanModel perReplica = model;
    perReplica.batch.reset();
    std::set<int64_t> checked;
    for (size_t index = 0; index < plan.replicas.size(); ++index)
      if (checked.insert(plan.replicas[index].tp).second &&
          llvm::failed(checkPlanAgainstModel(plan.replicaPlan(index), perReplica,
                                       fileName, emitError)))
        failed = true;
    return llvm::failure(failed);
  }

  checkExperts(plan, model, error);
  if (auto batch = model.batch; batch && *batch % mesh.dp != 0)
    error("the batch of " + Twine(*batch) +
          " sequences is not divisible by mesh.dp = " + Twine(mesh.dp));
  if (auto heads = model.heads; heads && *heads % mesh.tp != 0)
    error("heads " + Twine(*heads) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp));
  // Fewer key-value heads than tp ranks works when tp is a multiple of
  // them: each key-value head is replicated on the ranks whose query heads
  // use it (Megatron-LM; --dist-apply-plan lays tp out as two axes).
  if (auto kvHeads = model.kvHeads;
      kvHeads && *kvHeads % mesh.tp != 0 && mesh.tp % *kvHeads != 0)
    error("kv_heads " + Twine(*kvHeads) + " is not divisible by mesh.tp = " +
          Twine(mesh.tp) + ", nor mesh.tp by kv_heads; choose a mesh.tp "
          "that divides kv_heads or is a multiple of it");
  // Vocabulary-parallel embedding and loss split the vocabulary evenly:
  // --dist-pad-vocab pads it (as Megatron-LM does) to a multiple of
  // tp x vocab_multiple, which must leave its ids i32 tokens.
  if (auto vocab = model.vocab; vocab && mesh.tp > 1) {
    int64_t granule = mesh.tp * plan.tensorParallel.vocabMultiple;
    if (paddedVocab(*vocab, granule) > int64_t(INT32_MAX) + 1)
      error("vocab " + Twine(*vocab) + " padded to a multiple of mesh.tp x "
            "tensor_parallel.vocab_multiple = " + Twine(granule) +
            " exceeds the 2^31 ids of i32 tokens");
  }
  checkPartDegrees(plan, model, error);
  if (auto layers = model.layers; layers && *layers < mesh.pp)
    error("layers " + Twine(*layers) + " is fewer than mesh.pp = " +
          Twine(mesh.pp) + " pipeline stages");
  // The schedule's own rules (scheduling/Schedule.cpp names the fields).
  if (auto kind = pipeline::parseScheduleKind(
          plan.pipeline.scheduleOrDefault().str());
      kind && (mesh.pp > 1 || plan.pipeline.virtualStages > 1)) {
    pipeline::ScheduleConfig config;
    config.kind = *kind;
    config.stages = static_cast<int>(std::min<int64_t>(mesh.pp, INT32_MAX));
    config.microbatches =
        static_cast<int>(std::min<int64_t>(plan.pipeline.microbatches, INT32_MAX));
    config.chunks = static_cast<int>(plan.pipeline.virtualStages);
    config.layers = model.layers && *model.layers >= mesh.pp
                        ? static_cast<int>(*model.layers)
                        : 0;
    if (std::optional<std::string> problem = pipeline::validateConfig(config))
      error(*problem);
  }
  if (!plan.pipeline.stages.empty()) {
    int64_t chunks = mesh.pp * plan.pipeline.virtualStages, sum = 0;
    for (int64_t count : plan.pipeline.stages)
      sum += count;
    if (static_cast<int64_t>(plan.pipeline.stages.size()) != chunks)
      error("pipeline.stages has " + Twine(plan.pipeline.stages.size()) +
            " entries but mesh.pp x pipeline.virtual_stages = " +
            Twine(mesh.pp) + " x " + Twine(plan.pipeline.virtualStages) +
            " = " + Twine(chunks) + " chunks need one layer count each");
    else if (auto layers = model.layers; layers && sum != *layers)
      error("pipeline.stages sums to " + Twine(sum) +
            " layers but the model has " + Twine(*layers) +
            "; give each chunk's layer count so that they sum to " +
            Twine(*layers));
  }
  if (plan.tensorParallel.sequenceParallel) {
    if (mesh.tp == 1)
      error("tensor_parallel.sequence_parallel needs mesh.tp > 1, got "
            "mesh.tp = 1");
    else if (auto seqLen = model.seqLen; seqLen && *seqLen % mesh.tp != 0)
      error("tensor_parallel.sequence_parallel: seq_len " + Twine(*seqLen) +
            " is not divisible by mesh.tp = " + Twine(mesh.tp));
  }
  // Context parallelism cuts each sequence into chunks (2 x cp with the
  // zigzag load balance), each rank's share of them further split over tp
  // with sequence parallelism.
  if (auto seqLen = model.seqLen; seqLen && mesh.cp > 1) {
    bool zigzag = plan.contextParallel.loadBalance == "zigzag";
    int64_t chunks = zigzag ? 2 * mesh.cp : mesh.cp;
    if (*seqLen % chunks != 0)
      error("mesh.cp = " + Twine(mesh.cp) + ": seq_len " + Twine(*seqLen) +
            " does not split into " + Twine(chunks) + " equal chunks" +
            (zigzag ? " (2 x cp, the zigzag load balance)" : "") +
            "; use a seq_len that is a multiple of " + Twine(chunks) +
            (zigzag ? " or context_parallel.load_balance \"none\"" : ""));
    else if (plan.tensorParallel.sequenceParallel &&
             *seqLen % (mesh.cp * mesh.tp) != 0)
      error("mesh.cp = " + Twine(mesh.cp) + " with sequence parallelism: "
            "seq_len " + Twine(*seqLen) + " is not divisible by mesh.cp x "
            "mesh.tp = " + Twine(mesh.cp * mesh.tp));
  }
  if (mesh.pp > 1 && plan.pipeline.microbatches < mesh.pp)
    error("pipeline.microbatches = " + Twine(plan.pipeline.microbatches) +
          " is fewer than mesh.pp = " + Twine(mesh.pp) +
          " (a pipeline needs at least one micro-batch per stage)");
  return llvm::failure(failed);
}

namespace {

/// A plan field that no pass implements yet.
struct NotImplemented {
  /// The plan.json field, as messages name it.
  const char *field;
  /// The field's value when the plan asks for the missing pass, else
  /// nullopt.
  std::optional<std::string> (*asks)(const Plan &);
  /// The pass that would implement it.
  const char *pass;
  /// What the user can write instead.
  const char *instead;
};

/// The plan fields refused until their pass exists: replicas (NTP, each
/// replica's step a uniform tp step) with a pipeline, ZeRO or per-part
/// degrees. (Per-part tensor-parallel degrees compose with pipelines and
/// ZeRO: docs/nonuniform-tp.md.) A field added before its pass adds its
/// line here (and the pass that implements it removes the line and adds
/// itself to passes/CompileFlow.cpp), so that no field is ever silently
/// ignored.
const std::vector<NotImplemented> kNotImplemented = {
    {"mesh.cp with replicas",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || plan.mesh.cp == 1)
         return std::nullopt;
       return std::to_string(plan.mesh.cp);
     },
     "context parallelism inside nonuniform replicas",
     "leave out mesh.cp or the replicas"},
    {"replicas with mesh.pp",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || plan.mesh.pp == 1)
         return std::nullopt;
       return std::to_string(plan.mesh.pp);
     },
     "pipeline stages inside nonuniform replicas",
     "leave out mesh.pp or the replicas"},
    {"replicas with zero.stage",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || plan.zero.stage == 0)
         return std::nullopt;
       return std::to_string(plan.zero.stage);
     },
     "ZeRO across replicas of different degrees",
     "use zero.stage 0 or leave out the replicas"},
    {"replicas with tensor_parallel.per_layer (or .embedding)",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || !plan.hasPartDegrees())
         return std::nullopt;
       return std::string("given");
     },
     "per-part degrees inside nonuniform replicas",
     "leave out tensor_parallel.per_layer / .embedding or the replicas"},
    {"offload.optimizer with replicas",
     [](const Plan &plan) -> std::optional<std::string> {
       if (plan.replicas.empty() || !plan.offload.enabled())
         return std::nullopt;
       return "\"" + plan.offload.optimizer + "\"";
     },
     "optimizer-state offload inside nonuniform replicas",
     "leave out offload or the replicas"},
};

} // namespace

LogicalResult partition::checkPlanImplemented(const Plan &plan,
                                              StringRef fileName,
                                              PlanErrorFn emitError) {
  bool failed = false;
  for (const NotImplemented &missing : kNotImplemented)
    if (std::optional<std::string> value = missing.asks(plan)) {
      emitError(fileName + ": " + missing.field + " = " + *value +
                " needs " + missing.pass +
                ", which is not implemented yet; " + missing.instead);
      failed = true;
    }
  return llvm::failure(failed);
}

LogicalResult partition::checkPlanTakesEffect(const Plan &plan,
                                              StringRef fileName,
                                              PlanErrorFn emitError) {
  bool failed = false;
  auto refuse = [&](const Twine &message) {
    emitError(fileName + ": " + message);
    failed = true;
  };
  if (plan.zero.stage > 0 && plan.mesh.dp == 1 && plan.mesh.cp == 1)
    refuse("zero.stage = " + Twine(plan.zero.stage) +
           " does nothing without data parallelism (mesh.dp = 1: ZeRO "
           "shards the optimizer state over data-parallel replicas); give "
           "mesh.dp > 1 or leave out zero");
  if (plan.pipeline.schedule && plan.mesh.pp == 1 &&
      plan.pipeline.virtualStages == 1)
    refuse("pipeline.schedule \"" + Twine(*plan.pipeline.schedule) +
           "\" does nothing without pipeline parallelism (mesh.pp = 1); "
           "give mesh.pp > 1 or leave out pipeline.schedule");
  if (plan.contextParallel.given && plan.mesh.cp == 1)
    refuse("context_parallel does nothing without context parallelism "
           "(mesh.cp = 1); give mesh.cp > 1 or leave out context_parallel");
  if (plan.tensorParallel.vocabMultipleGiven && plan.mesh.tp == 1)
    refuse("tensor_parallel.vocab_multiple = " +
           Twine(plan.tensorParallel.vocabMultiple) +
           " does nothing without tensor parallelism (mesh.tp = 1: the "
           "vocabulary is padded only to split it over tp ranks); give "
           "mesh.tp > 1 or leave out vocab_multiple");
  if (plan.overlap.dataParallelGiven &&
      ((plan.mesh.dp == 1 && plan.mesh.cp == 1) || plan.mesh.pp > 1 ||
       !plan.replicas.empty()))
    refuse("overlap.data_parallel does nothing here: only plans with "
           "mesh.dp > 1, without a pipeline (mesh.pp = 1) and without "
           "replicas start their data-parallel buckets early "
           "(--rt-overlap-collectives); leave out overlap");
  // offload: its path and buffer only mean something for the tiers that
  // use them.
  if (!plan.offload.enabled() && plan.offload.parameters == "none" &&
      (plan.offload.pathGiven || plan.offload.bufferBytesGiven))
    refuse(Twine("offload.") +
           (plan.offload.pathGiven ? "path" : "buffer_bytes") +
           " does nothing with offload.optimizer \"none\" (nothing is "
           "offloaded); give offload.optimizer \"host\" or \"nvme\", or "
           "leave out offload");
  else if (plan.offload.optimizer != "nvme" &&
           plan.offload.parameters != "nvme" && plan.offload.pathGiven)
    refuse("offload.path does nothing without the nvme tier (only it "
           "keeps files; offload.optimizer is \"" +
           plan.offload.optimizer + "\", offload.parameters \"" +
           plan.offload.parameters +
           "\"); leave out offload.path or give \"nvme\"");
  // Parameter offload moves ZeRO-3's parameter shards: without them there
  // is nothing to move (over context parallelism alone the parameters stay
  // whole).
  if (plan.offload.parameters != "none" &&
      (plan.zero.stage != 3 || plan.mesh.dp == 1))
    refuse("offload.parameters = \"" + plan.offload.parameters +
           "\" offloads ZeRO-3's parameter shards, but the plan has " +
           (plan.zero.stage != 3
                ? "zero.stage " + std::to_string(plan.zero.stage)
                : std::string("no data-parallel axis (mesh.dp = 1)")) +
           "; give zero.stage 3 with mesh.dp > 1, or leave out "
           "offload.parameters");
  if (plan.overlap.tensorParallelGiven &&
      (plan.mesh.tp == 1 || plan.mesh.pp > 1 || !plan.replicas.empty()))
    refuse("overlap.tensor_parallel does nothing here: only plans with "
           "mesh.tp > 1, without a pipeline (mesh.pp = 1) and without "
           "replicas start their tensor-parallel collectives early "
           "(--rt-overlap-collectives); leave out overlap.tensor_parallel");
  return llvm::failure(failed);
}
