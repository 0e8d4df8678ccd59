//===- MemoryReport.cpp - what the arena holds, by category ---------------===//

#include "lowering/MemoryReport.h"

#include "lowering/ActionWalkMemory.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Rt/RtViews.h"
#include "dialects/Xfmr/XfmrDialect.h"
#include "lowering/ZeroMemory.h"
#include "passes/analysis/ContextBalance.h"
#include "runtime/program/KernelTable.h"

#include "llvm/Support/FormatVariadic.h"

using namespace mlir;
using partition::rt::AllGatherOp;
using partition::rt::KernelOp;
using partition::rt::ReduceScatterOp;

namespace partition {
namespace {

/// Whether `output` of `kernel` is a parameter gradient (weight-side
/// backward), by the kernel's Role column (runtime/program/Kernels.def).
bool writesGradient(KernelOp kernel, Value output) {
  using runtime::KernelRole;
  switch (kernel.getInfo().role) {
  case KernelRole::ParameterGradients:
    return true;
  case KernelRole::ParameterGradientsAfterFirst:
    return output != kernel.getOutputs().front();
  // Mixed precision: a cast to f32 is the backward of a parameter's cast,
  // a parameter gradient (the forward casts go the other way).
  case KernelRole::Cast:
    return cast<MemRefType>(output.getType()).getElementType().isF32();
  case KernelRole::Forward:
  case KernelRole::ForwardIfActivationInput:
  case KernelRole::Other:
    return false;
  }
  return false;
}

/// Whether a kernel's outputs are forward values (activations): the
/// forward kernels, and the element-wise ones (add, scale, copy, slice, cast
/// to a narrower type) when they read an activation (a residual sum, not a
/// sum of gradients). ZeRO's bucket copies are counted on their own line
/// (gather/scatter buffers) or as the gradients they carry.
bool writesActivation(KernelOp kernel, llvm::function_ref<bool(Value)> isActivation) {
  using runtime::KernelRole;
  switch (kernel.getInfo().role) {
  case KernelRole::Forward:
    return true;
  case KernelRole::ForwardIfActivationInput:
  case KernelRole::Cast:
    return llvm::any_of(kernel.getInputs(), isActivation);
  case KernelRole::ParameterGradients:
  case KernelRole::ParameterGradientsAfterFirst:
  case KernelRole::Other:
    return false;
  }
  return false;
}

/// With context parallelism: the causal attention work of each rank (the
/// (query, key) pairs its local queries score, times 4 x hidden FLOPs for
/// the forward's two matmuls), per layer and sequence, and how far the
/// busiest rank is above the least busy one: even with the zigzag layout,
/// 2 cp - 1 times the first rank's on the last one without.
void printContextBalance(ModuleOp module, llvm::raw_ostream &os,
                         const std::string &memory) {
  dist::PlanAttr plan = dist::getPlan(module);
  std::optional<StringRef> axis =
      plan ? plan.getAxis(dist::AxisRole::Context) : std::nullopt;
  FailureOr<dist::MeshShape> mesh =
      plan ? dist::lookupMeshShape(module, plan.getMesh())
           : FailureOr<dist::MeshShape>(failure());
  if (!axis || failed(mesh) || mesh->find(*axis) < 0)
    return;
  DictionaryAttr model;
  for (auto function : module.getOps<func::FuncOp>())
    if ((model = function->getAttrOfType<DictionaryAttr>(
             xfmr::XfmrDialect::kModelAttrName)))
      break;
  auto field = [&](StringRef name) -> int64_t {
    auto value = model ? model.getAs<IntegerAttr>(name) : IntegerAttr();
    return value ? value.getInt() : 0;
  };
  int64_t seqLen = field("seq_len"), hidden = field("hidden");
  int64_t cp = mesh->sizes[mesh->find(*axis)];
  if (seqLen <= 0 || seqLen % cp != 0)
    return;
  std::vector<int64_t> pairs =
      contextAttentionPairs(seqLen, plan.getContextChunks(), cp,
                            /*causal=*/true, field("sliding_window"));
  os << memory << "context: causal attention FLOPs per rank, layer and "
     << "sequence (forward, 4 x hidden per (query, key) pair):";
  for (int64_t count : pairs)
    os << " " << llvm::formatv("{0:e2}", double(count) * 4.0 * double(hidden));
  os << llvm::formatv(" (busiest / least busy {0:f3}, ", imbalance(pairs))
     << (plan.getContextChunks() > 1
             ? "zigzag over " + std::to_string(plan.getContextChunks()) +
                   " chunks"
             : std::string("contiguous blocks"))
     << " over " << *axis << "=" << cp << ")\n";
}

/// The experts of a mixture-of-experts model per rank, in closed form from
/// the model (xfmr.model) and the plan: each MoE layer's E experts of three
/// H x F matrices, E / EP of them on a rank (expert parallelism), their
/// features / tp (split with the model's tensor axes), in fp32 with 8 bytes
/// of AdamW state per element. ZeRO shards the experts' state (stage 1-2)
/// and the experts themselves (stage 3) over their expert-data-parallel
/// group: the data and context ranks (dp / EP replicas of each expert).
void printExperts(ModuleOp module, llvm::raw_ostream &os,
                  const std::string &memory) {
  DictionaryAttr model;
  for (auto function : module.getOps<func::FuncOp>())
    if ((model = function->getAttrOfType<DictionaryAttr>(
             xfmr::XfmrDialect::kModelAttrName)))
      break;
  auto field = [&](StringRef name) -> int64_t {
    auto value = model ? model.getAs<IntegerAttr>(name) : IntegerAttr();
    return value ? value.getInt() : 0;
  };
  int64_t experts = field("experts"), every = field("moe_every");
  if (experts <= 0 || every <= 0)
    return;
  int64_t layers = field("layers") / every;
  int64_t perExpert = 3 * field("hidden") * field("expert_ffn");
  int64_t ep = 1, tp = 1, replicas = 1, stage = 0;
  if (dist::PlanAttr plan = dist::getPlan(module)) {
    ep = plan.getExpertParallel();
    stage = plan.getZeroStage();
    if (FailureOr<dist::MeshShape> mesh =
            dist::lookupMeshShape(module, plan.getMesh());
        succeeded(mesh))
      for (dist::PlanAxisAttr axis : plan.getAxes()) {
        if (mesh->find(axis.getName()) < 0)
          continue;
        int64_t size = mesh->sizes[mesh->find(axis.getName())];
        if (axis.getRole() == dist::AxisRole::Tensor)
          tp *= size;
        if (axis.getRole() == dist::AxisRole::Data ||
            axis.getRole() == dist::AxisRole::Context)
          replicas *= size;
      }
  }
  int64_t local = experts / std::max<int64_t>(ep, 1);
  int64_t elements = layers * local * perExpert / std::max<int64_t>(tp, 1);
  auto sharded = [&](int64_t bytes, bool byZero) {
    return byZero ? (bytes + replicas - 1) / replicas : bytes;
  };
  std::string zero =
      stage > 0 && replicas > 1
          ? llvm::formatv(", ZeRO-{0} over the {1} expert-data-parallel "
                          "ranks",
                          stage, replicas)
                .str()
          : std::string();
  os << memory
     << llvm::formatv("experts {0} of {1} per MoE layer on each rank "
                      "(expert_parallel {2}, tp {3}{7}), {4} layers: "
                      "parameters {5} + optimizer_state {6} bytes per rank "
                      "(closed form, fp32)\n",
                      local, experts, ep, tp, layers,
                      sharded(4 * elements, stage >= 3),
                      sharded(8 * elements, stage >= 1), zero);
}

/// The model-state lines after the communication lines: the gradient
/// bytes live at most at once (ZeRO shards them), ZeRO's flat buckets, and,
/// for a data-parallel plan, the model state per rank as ZeRO's closed
/// forms give it for the plan's stage (lowering/ZeroMemory.h), next to the
/// measured lines above.
void printModelState(ModuleOp module, const MemoryReport &totals,
                     llvm::raw_ostream &os, const std::string &memory) {
  os << memory << "gradients_peak " << totals.gradientsPeak << "\n";
  if (totals.hasBuckets)
    os << memory << "gather_scatter_buffers " << totals.bucketsAtPeak
       << " at the arena peak, " << totals.bucketsPeak << " at most\n";
  dist::PlanAttr plan = dist::getPlan(module);
  if (!plan)
    return;
  FailureOr<dist::MeshShape> mesh =
      dist::lookupMeshShape(module, plan.getMesh());
  if (failed(mesh))
    return;
  // ZeRO's group: the data-parallel ranks and the context-parallel ones
  // (parameters are replicated over both).
  int64_t ranks = 1;
  std::string group;
  for (dist::AxisRole role : {dist::AxisRole::Data, dist::AxisRole::Expert,
                              dist::AxisRole::Context})
    if (std::optional<StringRef> axis = plan.getAxis(role);
        axis && mesh->find(*axis) >= 0 && mesh->sizes[mesh->find(*axis)] > 1) {
      ranks *= mesh->sizes[mesh->find(*axis)];
      group += (group.empty() ? "" : " x ") + axis->str();
    }
  if (ranks < 2)
    return;
  // Whole tensors per replica, whatever ZeRO shards. The experts (split
  // over the expert axis) are sharded over the rest of the group, their
  // expert-data-parallel ranks.
  double psi = static_cast<double>(totals.parameterElements);
  double experts = static_cast<double>(totals.expertElements);
  int64_t expertRanks = ranks;
  if (std::optional<StringRef> axis = plan.getAxis(dist::AxisRole::Expert);
      axis && mesh->find(*axis) >= 0)
    expertRanks /= mesh->sizes[mesh->find(*axis)];
  ZeroStateBytes model =
      zeroStateBytes(plan.getZeroStage(), psi - experts, ranks);
  ZeroStateBytes expert =
      zeroStateBytes(plan.getZeroStage(), experts, expertRanks);
  model.parameters += expert.parameters;
  model.gradients += expert.gradients;
  model.optimizerState += expert.optimizerState;
  std::string expertsText =
      experts > 0 ? llvm::formatv(", {0} of them experts over their {1} "
                                  "expert-data-parallel ranks",
                                  static_cast<int64_t>(experts), expertRanks)
                        .str()
                  : std::string();
  os << memory << llvm::formatv("zero stage {0} over {1}={2}: parameters {3} + "
                      "gradients {4} + optimizer_state {5} = {6} bytes per "
                      "rank (closed form, 16 bytes of fp32 AdamW state for "
                      "each of {7} parameters{8})\n",
                      plan.getZeroStage(), group, ranks,
                      static_cast<int64_t>(model.parameters),
                      static_cast<int64_t>(model.gradients),
                      static_cast<int64_t>(model.optimizerState),
                      static_cast<int64_t>(model.total()),
                      static_cast<int64_t>(psi), expertsText);
}

/// A parameter argument of the step (under ZeRO-3, this rank's shard).
bool isParameterShard(Value buffer) {
  return rt::argumentRole(buffer) == "param";
}

} // namespace

void classifyTemporaries(Block &body, TemporaryPlan &plan) {
  SmallVector<Interval> &intervals = plan.intervals;
  const DenseMap<Value, unsigned> &intervalOf = plan.intervalOf;
  for (Operation &op : body) {
    // A gradient gathered or reduce-scattered (ZeRO) is still a gradient,
    // an activation gathered (sequence parallelism) still an activation;
    // ZeRO moves a tensor by tensor seen flat (a view of its buffer).
    if (isa<AllGatherOp, ReduceScatterOp, rt::RingShiftOp, rt::AllToAllOp>(
            op)) {
      auto from = intervalOf.find(rt::viewedBuffer(op.getOperand(0)));
      auto to = intervalOf.find(rt::viewedBuffer(op.getOperand(1)));
      if (from != intervalOf.end() && to != intervalOf.end()) {
        intervals[to->second].isGradient |= intervals[from->second].isGradient;
        intervals[to->second].isActivation |=
            intervals[from->second].isActivation;
        intervals[to->second].isBucket |= intervals[from->second].isBucket;
      }
      // ZeRO-3's parameters gathered straight from their shards (the
      // step's arguments) are its gather buffers, as their buckets were.
      if (isa<AllGatherOp>(op) && to != intervalOf.end() &&
          isParameterShard(rt::viewedBuffer(op.getOperand(0))))
        intervals[to->second].isBucket = true;
    }
    if (auto kernel = dyn_cast<KernelOp>(op)) {
      auto isActivation = [&](Value input) {
        Value base = rt::viewedBuffer(input);
        auto it = intervalOf.find(base);
        return it != intervalOf.end() && intervals[it->second].isActivation;
      };
      if (writesActivation(kernel, isActivation))
        for (Value output : kernel.getOutputs())
          if (auto it = intervalOf.find(output);
              it != intervalOf.end() && !writesGradient(kernel, output))
            intervals[it->second].isActivation = true;
      for (Value output : kernel.getOutputs())
        if (auto it = intervalOf.find(output);
            it != intervalOf.end() && writesGradient(kernel, output))
          intervals[it->second].isGradient = true;
      // A bucket of gradients, and the chunks unpacked from it, are still
      // gradients.
      runtime::KernelId id = kernel.getInfo().id;
      if (id == runtime::KernelId::FlatPack ||
          id == runtime::KernelId::FlatUnpack) {
        auto from = intervalOf.find(kernel.getInputs().front());
        auto to = intervalOf.find(kernel.getOutputs().front());
        if (to != intervalOf.end()) {
          intervals[to->second].isBucket |= id == runtime::KernelId::FlatPack;
          if (from != intervalOf.end())
            intervals[to->second].isGradient |=
                intervals[from->second].isGradient;
        }
      }
      // A sum of parameter gradients (the micro-batches' accumulated, from
      // a zero start) is one too.
      if (kernel.getInfo().id == runtime::KernelId::Add &&
          llvm::any_of(kernel.getInputs(), [&](Value input) {
            auto it = intervalOf.find(rt::viewedBuffer(input));
            return it != intervalOf.end() && intervals[it->second].isGradient;
          }))
        for (Value output : kernel.getOutputs())
          if (auto it = intervalOf.find(rt::viewedBuffer(output));
              it != intervalOf.end())
            intervals[it->second].isGradient = true;
      // A gradient copied into a buffer of its own (so that an all-reduce
      // can overwrite it) is still a gradient.
      if (kernel.getInfo().id == runtime::KernelId::Copy) {
        auto from = intervalOf.find(kernel.getInputs().front());
        auto to = intervalOf.find(kernel.getOutputs().front());
        if (from != intervalOf.end() && to != intervalOf.end() &&
            intervals[from->second].isGradient)
          intervals[to->second].isGradient = true;
      }
    }
  }
  // An action walk's slot copies hold what their templates hold (the
  // runtime writes them in the templates' place).
  for (auto begin : body.getOps<rt::ActionWalkBeginOp>())
    for (auto [slotTemplate, copy] :
         llvm::zip(begin.getTemplates(), begin.getCopies())) {
      auto from = intervalOf.find(rt::viewedBuffer(slotTemplate));
      auto to = intervalOf.find(rt::viewedBuffer(copy));
      if (from == intervalOf.end() || to == intervalOf.end())
        continue;
      intervals[to->second].isActivation |= intervals[from->second].isActivation;
      intervals[to->second].isGradient |= intervals[from->second].isGradient;
    }
}

namespace {

/// A temporary's category in the report's split of the peak.
enum Category : unsigned { Staging, Bucket, Gradient, Activation, Other };
constexpr unsigned kCategories = 5;

unsigned categoryOf(const Interval &interval) {
  return interval.isStaging    ? Staging
         : interval.isBucket   ? Bucket
         : interval.isGradient ? Gradient
         : interval.isActivation ? Activation
                                 : Other;
}

} // namespace

void recordPeak(Block &body, const TemporaryPlan &plan, MemoryReport &report) {
  ArrayRef<Interval> intervals = plan.intervals;
  SmallVector<int64_t> delta(body.getOperations().size() + 1, 0);
  SmallVector<int64_t> gradientDelta(delta.size(), 0), bucketDelta(delta.size(), 0),
      stagingDelta(delta.size(), 0);
  // An action walk's slot buffers count where they hold data (heldProfile:
  // in its regions, the most over the actions running each); in the
  // gradient and bucket peaks, those held at the walk's fullest action.
  for (const Interval &interval : intervals) {
    if (interval.heldClass >= 0) {
      unsigned category = categoryOf(interval);
      SmallVector<int64_t> *peakDelta = category == Bucket     ? &bucketDelta
                                        : category == Gradient ? &gradientDelta
                                                               : nullptr;
      if (interval.heldAtPeak && peakDelta) {
        (*peakDelta)[interval.first] += interval.bytes;
        (*peakDelta)[interval.last + 1] -= interval.bytes;
      }
      continue;
    }
    delta[interval.first] += interval.bytes;
    delta[interval.last + 1] -= interval.bytes;
    if (interval.deadFrom < interval.deadTo) {
      delta[interval.deadFrom] -= interval.bytes;
      delta[interval.deadTo] += interval.bytes;
    }
    if (interval.isStaging) {
      stagingDelta[interval.first] += interval.bytes;
      stagingDelta[interval.last + 1] -= interval.bytes;
    } else if (interval.isBucket) {
      bucketDelta[interval.first] += interval.bytes;
      bucketDelta[interval.last + 1] -= interval.bytes;
    } else if (interval.isGradient) {
      gradientDelta[interval.first] += interval.bytes;
      gradientDelta[interval.last + 1] -= interval.bytes;
    }
  }
  std::vector<int64_t> heldAt(delta.size(), 0);
  std::vector<SmallVector<int64_t, 5>> heldParts;
  if (plan.walkLife)
    heldProfile(plan, delta.size(), kCategories, categoryOf, heldAt,
                heldParts);
  // The most gradient bytes and bucket bytes live at once, wherever.
  int64_t gradientsPeak = 0, bucketsPeak = 0, stagingPeak = 0;
  for (int64_t g = 0, b = 0, t = 0, at = 0;
       at + 1 < static_cast<int64_t>(delta.size()); ++at) {
    g += gradientDelta[at];
    b += bucketDelta[at];
    t += stagingDelta[at];
    gradientsPeak = std::max(gradientsPeak, g);
    bucketsPeak = std::max(bucketsPeak, b);
    stagingPeak = std::max(stagingPeak, t);
  }
  unsigned peakAt = 0;
  for (int64_t live = 0, most = -1, at = 0;
       at + 1 < static_cast<int64_t>(delta.size()); ++at) {
    live += delta[at];
    if (live + heldAt[at] > most)
      most = live + heldAt[at], peakAt = at;
  }
  // At the peak: the slot buffers as the profile splits them.
  SmallVector<int64_t, 5> split(kCategories, 0);
  if (!heldParts.empty())
    split = heldParts[peakAt];
  for (const Interval &interval : intervals)
    if (interval.isLiveAt(peakAt) && interval.heldClass < 0)
      split[categoryOf(interval)] += interval.bytes;
  int64_t gradients = split[Gradient], activations = split[Activation],
          others = split[Other], buckets = split[Bucket],
          staging = split[Staging];
  report.gradientsPeak = std::max(report.gradientsPeak, gradientsPeak);
  report.bucketsPeak = std::max(report.bucketsPeak, bucketsPeak);
  report.stagingPeak = std::max(report.stagingPeak, stagingPeak);
  report.hasBuckets |= llvm::any_of(
      intervals, [](const Interval &interval) { return interval.isBucket; });
  report.hasStaging |= llvm::any_of(
      intervals, [](const Interval &interval) { return interval.isStaging; });
  // Functions never run at the same time: report the one whose
  // temporaries need the most room.
  if (plan.peak >= report.temporariesPeak) {
    report.temporaryGradients = gradients;
    report.activations = activations;
    report.otherTemporaries = others;
    report.bucketsAtPeak = buckets;
    report.stagingAtPeak = staging;
    report.temporariesPeak = plan.peak;
  }
}

void printMemoryReport(ModuleOp module, const MemoryReport &totals,
                       ArrayRef<Communication> communication,
                       const std::string &prefix, llvm::raw_ostream &os) {
  std::string memory = "memory: " + prefix;
  os << memory << "parameters " << totals.parameters << "\n"
     << memory << "optimizer_state " << totals.optimizerState << "\n"
     << memory << "inputs " << totals.inputs << "\n"
     << memory << "gradients "
     << totals.gradients + totals.temporaryGradients << "\n"
     << memory << "activations " << totals.activations << "\n"
     << memory << "temporaries_peak " << totals.temporariesPeak << "\n"
     << memory << "arena_peak " << totals.arena << "\n";
  // The arena at its peak, in parts that sum to it exactly; the rest is
  // alignment and the room the placement leaves between live buffers.
  int64_t gradients = totals.gradients + totals.temporaryGradients;
  int64_t unused = totals.arena - totals.parameters -
                   totals.optimizerState - totals.inputs - gradients -
                   totals.activations - totals.otherTemporaries -
                   totals.bucketsAtPeak - totals.stagingAtPeak;
  os << memory << "arena_peak = parameters " << totals.parameters
     << " + optimizer_state " << totals.optimizerState << " + inputs "
     << totals.inputs << " + gradients " << gradients << " + activations "
     << totals.activations << " + other_temporaries "
     << totals.otherTemporaries;
  if (totals.hasBuckets)
    os << " + gather_scatter_buffers " << totals.bucketsAtPeak;
  if (totals.hasStaging)
    os << " + offload_staging " << totals.stagingAtPeak;
  os << " + alignment_and_fragmentation " << unused << "\n";
  // The offload: the state outside the arena, and what each rank holds in
  // each tier.
  for (auto [tier, state, params, bytes] :
       {std::tuple<StringRef, int64_t, int64_t, int64_t>{
            "host", totals.hostState, totals.hostParameters, totals.hostBytes},
        {"nvme", totals.nvmeState, totals.nvmeParameters, totals.nvmeBytes}})
    if (bytes > 0) {
      os << memory << "offloaded_";
      if (state > 0)
        os << "optimizer_state " << state << (params > 0 ? " + " : "");
      if (params > 0)
        os << "parameters " << params;
      os << " in the " << tier << " tier (" << bytes
         << " bytes at whole 4096-byte blocks), staged through at most "
         << totals.stagingPeak << " bytes of the arena\n";
    }
  if (totals.hostBytes > 0 || totals.nvmeBytes > 0)
    os << memory << "tiers per rank: arena " << totals.arena << ", host "
       << totals.hostBytes << ", nvme " << totals.nvmeBytes << " bytes\n";
  for (const Communication &comm : communication)
    printCommunication(comm, os);
  printModelState(module, totals, os, memory);
  printExperts(module, os, memory);
  printContextBalance(module, os, memory);
}

} // namespace partition
