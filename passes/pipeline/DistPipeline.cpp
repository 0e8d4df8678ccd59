//===- DistPipeline.cpp - --dist-pipeline: one step function per stage ----===//
//
// Cuts the training step (and the evaluation steps, @eval_step and
// @logits_step) into one function per pipeline stage whose ops run in the
// order of the stage's schedule (scheduling/Schedule.h), with dist.send /
// dist.recv where a value crosses stages. What each op is comes from
// StageAnalysis.h; where it runs from the stage split (Balance.h or the
// plan's `stages`).
//
// Every stage's stream is built first as a list of the step's ops; sends
// follow the op that makes the value, and a stage receives from a peer in
// the order that peer sends (a message the stage needs later than another
// one sent after it is received early), so that every send has its
// receive in the same order per pair. With sends that never wait (the
// runtime's contract), each stage only waits for messages its peers send
// before they wait themselves, which ScheduleCheck proves for every
// schedule: the program cannot deadlock.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "passes/frontend/StepEntries.h"
#include "passes/partition/Layout.h"
#include "scheduling/MicrobatchLoop.h"
#include "scheduling/Balance.h"
#include "passes/pipeline/PipelineInfo.h"
#include "scheduling/Schedule.h"
#include "passes/pipeline/StageAnalysis.h"
#include "passes/pipeline/StageFunctions.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/IR/Matchers.h"
#include "llvm/ADT/MapVector.h"
#include "llvm/ADT/SetVector.h"

#include <map>
#include <set>
#include <tuple>

namespace partition {
#define GEN_PASS_DEF_DISTPIPELINEPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;
using namespace partition::pipeline;

namespace partition {
namespace {

/// Each layer's cost (all its ops, forward and backward, all micro-batches)
/// and those before and after the layers.
void layerCosts(const StepAnalysis &analysis, std::vector<double> &layers,
                double &pre, double &post) {
  layers.assign(analysis.layers, 0);
  pre = post = 0;
  for (auto &[op, role] : analysis.roles) {
    if (role.phase == Phase::OnDemand || role.phase == Phase::Optimizer)
      continue;
    double cost = opCost(op);
    if (role.position < 0)
      pre += cost;
    else if (role.position >= analysis.layers)
      post += cost;
    else
      layers[role.position] += cost;
  }
}

/// The stages of each parameter: those of the ops that read it.
llvm::DenseMap<unsigned, std::set<int>>
parameterStages(func::FuncOp step, const StepAnalysis &analysis,
                const StageSplit &split) {
  llvm::DenseMap<unsigned, std::set<int>> stages;
  for (auto &[op, role] : analysis.roles) {
    if (role.phase == Phase::OnDemand || role.phase == Phase::Optimizer)
      continue;
    for (Value operand : op->getOperands())
      if (BlockArgument param = parameterArgument(operand, step))
        stages[param.getArgNumber()].insert(split.stageOf(role.position));
  }
  return stages;
}

/// A zero: a constant, or a device's block of one (the tensor-parallel
/// slice of the zero a looped step starts a vocab-parallel sum at).
static bool isZero(Value value) {
  if (auto slice = value.getDefiningOp<dist::AllSliceOp>())
    return isZero(slice->getOperand(0));
  return matchPattern(value, m_AnyZeroFloat());
}

/// A parameter held by several stages (a tied embedding): its gradient is
/// a sum of contributions made on each. Regroups the sum into one partial
/// per stage (summed where the contributions are made), then the partials
/// added in stage order right before the update, which runs on every such
/// stage, so that all copies see the same gradient bit for bit.
void splitTiedGradient(AdamWOp adamw, func::FuncOp step,
                       const StepAnalysis &analysis, const StageSplit &split,
                       const std::set<int> &stages, Placement &placement) {
  OpBuilder builder(adamw);
  // The single-operand ops between the sum and the update (a data-parallel
  // all-reduce) run on every stage that holds the parameter.
  llvm::SmallVector<Operation *> chain;
  Value root = adamw.getGrad();
  while (Operation *def = root.getDefiningOp()) {
    if (isa<AddOp>(def) || def->getNumOperands() != 1 || !root.hasOneUse() ||
        def->getNumResults() != 1)
      break;
    chain.push_back(def);
    root = def->getOperand(0);
  }
  llvm::SmallVector<Value> leaves;
  llvm::SmallVector<Operation *> sums;
  std::function<void(Value)> collect = [&](Value value) {
    auto add = value.getDefiningOp<AddOp>();
    // The zero a looped step starts the sum at: each stage's partial
    // starts at its own below.
    if (add && (value == root || value.hasOneUse()))
      for (unsigned zero : {0u, 1u})
        if (isZero(add.getOperand(zero))) {
          sums.push_back(add);
          collect(add.getOperand(1 - zero));
          return;
        }
    if (add && (value == root || value.hasOneUse()) &&
        analysis.roles.lookup(add).phase == Phase::BackwardWeight) {
      sums.push_back(add);
      collect(add.getOperand(0));
      collect(add.getOperand(1));
      return;
    }
    leaves.push_back(value);
  };
  collect(root);
  std::map<int, llvm::SmallVector<Value>> byStage;
  for (Value leaf : leaves) {
    Operation *def = leaf.getDefiningOp();
    int stage = *stages.begin();
    if (def && analysis.roles.contains(def) &&
        analysis.roles.lookup(def).phase != Phase::OnDemand)
      stage = split.stageOf(analysis.roles.lookup(def).position);
    byStage[stage].push_back(leaf);
  }
  if (byStage.size() < 2)
    return;
  // Under the micro-batch loop the step starts its sums at zero, so that
  // every micro-batch adds alike: so does each stage's partial.
  std::optional<pipeline::LoopLayout> loop = recordedLoop(step);
  const bool fromZero = loop && loop->settle == 0;
  llvm::SmallVector<Value> partials;
  for (auto &[stage, values] : byStage) {
    Value partial = values.front();
    // After the latest contribution of this stage.
    Operation *latest = nullptr;
    for (Value value : values)
      if (Operation *def = value.getDefiningOp())
        if (!latest || latest->isBeforeInBlock(def))
          latest = def;
    if (latest)
      builder.setInsertionPointAfter(latest);
    else
      builder.setInsertionPointToStart(adamw->getBlock());
    auto rest = llvm::drop_begin(values);
    if (fromZero && !isZero(partial)) {
      // At the top, as the step's own zeros: above every micro-batch.
      OpBuilder top = OpBuilder::atBlockBegin(adamw->getBlock());
      partial = arith::ConstantOp::create(
          top, adamw.getLoc(),
          cast<TypedAttr>(top.getZeroAttr(partial.getType())));
      rest = llvm::drop_begin(values, 0);
    }
    for (Value value : rest)
      partial = AddOp::create(builder, adamw.getLoc(), partial.getType(),
                              partial, value);
    partials.push_back(partial);
  }
  builder.setInsertionPoint(chain.empty() ? adamw.getOperation()
                                          : chain.back());
  llvm::SmallVector<int, 2> holders(stages.begin(), stages.end());
  Value total = partials.front();
  for (Value partial : llvm::drop_begin(partials)) {
    auto add = AddOp::create(builder, adamw.getLoc(), total.getType(), total,
                             partial);
    placement.replicated[add] = holders;
    total = add;
  }
  if (chain.empty())
    adamw.getGradMutable().assign(total);
  else
    chain.back()->setOperand(0, total);
  for (Operation *op : chain)
    placement.replicated[op] = holders;
  placement.replicated[adamw] = holders;
  for (Operation *sum : sums)
    if (sum->use_empty())
      sum->erase();
}

/// The layers of each model chunk: the plan's `stages`, checked against
/// the model, or a split balanced by cost.
FailureOr<std::vector<int>>
chunkLayerCounts(ModuleOp module, ArrayRef<int64_t> stageLayers,
                 const std::vector<double> &costs, double pre, double post,
                 int chunks, int layers) {
  auto fail = [&](const llvm::Twine &message) {
    module.emitError() << "dist-pipeline: " << message;
    return failure();
  };
  std::vector<int> counts;
  if (!stageLayers.empty()) {
    int64_t sum = 0;
    for (int64_t count : stageLayers) {
      if (count < 1)
        return fail("pipeline.stages gives a chunk " +
                                llvm::Twine(count) +
                                " layers; every chunk needs at least one");
      sum += count;
      counts.push_back(static_cast<int>(count));
    }
    if (static_cast<int>(counts.size()) != chunks)
      return fail("pipeline.stages has " +
                              llvm::Twine(counts.size()) +
                              " entries but the pipeline has mesh.pp x "
                              "pipeline.virtual_stages = " +
                              llvm::Twine(chunks) + " chunks");
    if (sum != layers)
      return fail("pipeline.stages sums to " + llvm::Twine(sum) +
                              " layers but the model has " +
                              llvm::Twine(layers));
  } else {
    counts = balanceLayers(costs, pre, post, chunks);
  }
  return counts;
}

/// Places the training step's optimizer: a tied parameter's update (and
/// the sum of its gradient partials) on every stage that holds it, every
/// other update on its parameter's stage, and what follows an update where
/// the update runs; then analyses the rewritten step again. Returns the
/// tied parameters' names.
std::vector<std::string> placeTrainStep(func::FuncOp train, int layers,
                                        const StageSplit &split,
                                        Placement &trainPlacement) {
  auto trainStages = parameterStages(train, trainPlacement.analysis, split);
  std::vector<std::string> tied;
  for (AdamWOp adamw :
       llvm::to_vector(train.getBody().front().getOps<AdamWOp>())) {
    BlockArgument param = parameterArgument(adamw.getParam(), train);
    if (!param)
      continue;
    const std::set<int> &holders = trainStages[param.getArgNumber()];
    if (holders.size() > 1) {
      splitTiedGradient(adamw, train, trainPlacement.analysis, split, holders,
                        trainPlacement);
      if (auto name = train.getArgAttrOfType<StringAttr>(
              param.getArgNumber(), XfmrDialect::kParamAttrName))
        tied.push_back(name.str());
    }
  }
  llvm::DenseSet<Operation *> replicatedOps;
  for (auto &entry : trainPlacement.replicated)
    replicatedOps.insert(entry.first);
  trainPlacement.analysis = analyzeStep(train, layers, replicatedOps);
  // Each update (AdamW, or a routing bias's) on its parameter's stage.
  for (Operation &update : train.getBody().front()) {
    Value updated;
    if (auto adamw = dyn_cast<AdamWOp>(update))
      updated = adamw.getParam();
    else if (auto bias = dyn_cast<MoeBiasUpdateOp>(update))
      updated = bias.getBias();
    if (!updated || trainPlacement.replicated.contains(&update))
      continue;
    BlockArgument param = parameterArgument(updated, train);
    int stage = 0;
    if (param && !trainStages[param.getArgNumber()].empty())
      stage = *trainStages[param.getArgNumber()].begin();
    trainPlacement.optimizerStage[&update] = stage;
  }
  // What follows an update (rare) runs where the update does.
  for (Operation &op : train.getBody().front()) {
    auto role = trainPlacement.analysis.roles.find(&op);
    if (role == trainPlacement.analysis.roles.end() ||
        role->second.phase != Phase::Optimizer ||
        isa<AdamWOp, MoeBiasUpdateOp>(op) ||
        trainPlacement.replicated.contains(&op))
      continue;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (auto it = trainPlacement.optimizerStage.find(def);
            it != trainPlacement.optimizerStage.end())
          trainPlacement.optimizerStage[&op] = it->second;
  }
  return tied;
}

/// What the report and the schedule picture need: per chunk the cost of one
/// micro-batch's F, B and W, and the activation bytes one micro-batch keeps
/// for the backward (the caller adds the schedule, the layers and the tied
/// parameters).
PipelineInfo describePipeline(const Placement &trainPlacement,
                              const StageSplit &split, int microbatches) {
  const int chunks = split.chunks();
  std::vector<double> forward(chunks, 0), backwardInput(chunks, 0),
      backwardWeight(chunks, 0);
  std::vector<int64_t> activations(chunks, 0);
  const auto &roles = trainPlacement.analysis.roles;
  for (auto &[op, role] : roles) {
    if (role.phase == Phase::OnDemand || role.phase == Phase::Optimizer ||
        trainPlacement.replicated.contains(op))
      continue;
    int c = split.chunkOf(role.position);
    double cost = opCost(op) / microbatches;
    if (role.phase == Phase::Forward) {
      forward[c] += cost;
      for (Value result : op->getResults())
        if (llvm::any_of(result.getUsers(), [&](Operation *user) {
              Phase phase = roles.lookup(user).phase;
              return roles.contains(user) &&
                     (phase == Phase::BackwardInput ||
                      phase == Phase::BackwardWeight);
            }))
          activations[c] += valueBytes(result);
    } else if (role.phase == Phase::BackwardInput) {
      backwardInput[c] += cost;
    } else {
      backwardWeight[c] += cost;
    }
  }
  for (int64_t &bytes : activations)
    bytes /= microbatches;
  PipelineInfo info;
  info.stages = split.stages;
  info.microbatches = microbatches;
  info.forward = forward;
  info.backwardInput = backwardInput;
  info.backwardWeight = backwardWeight;
  info.activationBytes = activations;
  return info;
}

/// The stage split of the layers into chunks of `counts` layers each.
StageSplit splitOf(const std::vector<int> &counts, int stages,
                   int chunksPerStage, int layers) {
  StageSplit split;
  split.stages = stages;
  split.chunksPerStage = chunksPerStage;
  split.layers = layers;
  for (int c = 0; c < static_cast<int>(counts.size()); ++c)
    for (int i = 0; i < counts[c]; ++i)
      split.chunkOfLayer.push_back(c);
  return split;
}

/// Each stage's stream of the training step: its schedule's actions as the
/// slots of the ops they run.
std::vector<std::vector<SlotKey>> slotsOf(const Schedule &schedule) {
  std::vector<std::vector<SlotKey>> slots(schedule.stages());
  for (int s = 0; s < schedule.stages(); ++s)
    for (const Action &action : schedule.actions[s]) {
      Phase phase = action.kind == ActionKind::Forward ? Phase::Forward
                    : action.kind == ActionKind::BackwardInput
                        ? Phase::BackwardInput
                        : Phase::BackwardWeight;
      slots[s].push_back(
          {phase, schedule.modelChunk(s, action.chunk), action.microbatch});
    }
  return slots;
}

/// The micro-batch loop `step` records (`recorded`, compiled at
/// `compiled` micro-batches), checked against this pipeline's layout for
/// it: the step must have been built for it. nullopt when it records none.
FailureOr<std::optional<LoopLayout>>
checkedLoop(func::FuncOp step, const std::optional<LoopLayout> &recorded,
            int compiled, const LoopShape &shape, bool forwardOnly) {
  if (!recorded)
    return std::optional<LoopLayout>();
  LoopShape settled = shape;
  settled.minSettle = recorded->settle;
  std::optional<LoopLayout> layout =
      stepLoopLayout(recorded->microbatches, settled, forwardOnly);
  if (!layout || layout->compiled != compiled ||
      layout->settle != recorded->settle ||
      layout->stride != recorded->stride || layout->split != recorded->split ||
      layout->runs != recorded->runs) {
    step.emitError() << "dist-pipeline: @" << step.getSymName()
                     << " was built for another pipeline's micro-batch "
                        "loop; build it with --xfmr-train-step="
                        "\"microbatch-loop=true loop-stages="
                     << shape.stages << " loop-chunks=" << shape.chunks
                     << " loop-schedule=" << shape.schedule
                     << (shape.walk ? " loop-walk=true" : "")
                     << "\" (partition-compile does)";
    return failure();
  }
  return layout;
}

/// Names, on each stage function of `step`, where its loop's body, copy and
/// tail start: the forward actions at the layout's bounds, found in the rt
/// IR (--rt-microbatch-loop) by the rows they read (the first model chunk)
/// or the activations they receive.
void markLoopAnchors(ModuleOp module, func::FuncOp step,
                     const LoopLayout &loop, const Schedule &schedule) {
  const int stages = schedule.stages();
  for (int s = 0; s < stages; ++s) {
    auto function = module.lookupSymbol<func::FuncOp>(
        (step.getSymName() + "_stage" + llvm::Twine(s)).str());
    if (!function)
      continue;
    SmallVector<Attribute> anchors;
    for (int index : loop.bounds[s]) {
      const Action &action = loop.actions[s][index];
      int model = schedule.modelChunk(s, action.chunk);
      std::string anchor =
          model == 0 ? "rows " + std::to_string(action.microbatch)
                     : forwardMessagePrefix(action.microbatch,
                                            (model - 1) / stages,
                                            schedule.chunks());
      anchors.push_back(StringAttr::get(module.getContext(), anchor));
    }
    function->setAttr(kMicrobatchLoopAnchorsAttrName,
                      ArrayAttr::get(module.getContext(), anchors));
  }
}

struct DistPipelinePass
    : public impl::DistPipelinePassBase<DistPipelinePass> {
  using DistPipelinePassBase::DistPipelinePassBase;

  void runOnOperation() override;
};

void DistPipelinePass::runOnOperation() {
  ModuleOp module = getOperation();
  auto fail = [&](Operation *at, const llvm::Twine &message) {
    at->emitError() << "dist-pipeline: " << message;
    signalPassFailure();
  };
  dist::PlanAttr plan = dist::getPlan(module);
  if (!plan)
    return fail(module, "the module has no plan; run --dist-apply-plan "
                        "with a plan whose mesh has pp > 1 first");
  std::optional<StringRef> axis = plan.getAxis(dist::AxisRole::Pipeline);
  FailureOr<dist::MeshShape> shape =
      dist::lookupMeshShape(module, plan.getMesh());
  if (!axis || failed(shape) || shape->find(*axis) < 0)
    return fail(module, "the plan's mesh has no pipeline axis");
  const int stages = static_cast<int>(shape->sizes[shape->find(*axis)]);
  if (stages == 1)
    return; // nothing to cut

  // The training step and the evaluation entry points (@eval_step and
  // @logits_step: forward passes only, the logits step's results on the
  // last stage, which makes them).
  func::FuncOp train;
  SmallVector<func::FuncOp> evals;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function->hasAttr(kPipelineStageAttrName))
      return fail(function, "the module is already cut into pipeline "
                            "stages; run the pass once");
    if (function->hasAttr(XfmrDialect::kTrainStepAttrName))
      train = function;
    else if (function->hasAttr(XfmrDialect::kEvalStepAttrName))
      evals.push_back(function);
  }
  if (!train)
    return fail(module, "no training step (a function with xfmr.train_step) "
                        "to cut; run --xfmr-train-step first");

  int layers = 0;
  for (unsigned i = 0; i < train.getNumArguments(); ++i)
    if (auto layer = train.getArgAttrOfType<IntegerAttr>(
            i, XfmrDialect::kLayerAttrName))
      layers = std::max<int>(layers, layer.getInt() + 1);
  if (layers == 0)
    return fail(train, "no parameter carries xfmr.layer; the pipeline cuts "
                       "the model at layer boundaries");

  StringRef scheduleName =
      schedule.empty() ? plan.getSchedule() : StringRef(schedule);
  std::optional<ScheduleKind> kind = parseScheduleKind(scheduleName.str());
  if (!kind)
    return fail(module, "pipeline.schedule \"" + scheduleName +
                            "\" is not one of " + scheduleNames());
  Placement trainPlacement;
  trainPlacement.analysis = analyzeStep(train, layers);
  // The micro-batches the step holds: all, or under the micro-batch loop
  // those the loop needs (scheduling/MicrobatchLoop.h), which the schedule
  // below orders; the loop's body then runs for the others.
  const int microbatches = trainPlacement.analysis.microbatches;
  std::optional<LoopLayout> recordedTrainLoop = recordedLoop(train);
  const int stepMicrobatches =
      recordedTrainLoop ? recordedTrainLoop->microbatches : microbatches;
  if (stepMicrobatches != plan.getMicrobatches())
    return fail(train, "pipeline.microbatches = " +
                           llvm::Twine(plan.getMicrobatches()) +
                           " but the training step has " +
                           llvm::Twine(stepMicrobatches) +
                           " micro-batches; give partition-compile "
                           "--microbatches " +
                           llvm::Twine(plan.getMicrobatches()) +
                           " or leave the option out (the plan's count is "
                           "its default), or build the step with "
                           "partition-opt --xfmr-train-step=microbatches=" +
                           llvm::Twine(plan.getMicrobatches()));
  ScheduleConfig config;
  config.kind = *kind;
  config.stages = stages;
  config.microbatches = microbatches;
  config.chunks = static_cast<int>(virtualStages);
  config.layers = layers;
  OrError<Schedule> generated = generateSchedule(config);
  if (!generated)
    return fail(module, generated.error());
  const int chunks = stages * config.chunks;
  LoopShape loopShape;
  loopShape.stages = stages;
  loopShape.chunks = config.chunks;
  loopShape.schedule = scheduleName.str();
  loopShape.walk = markActions;
  FailureOr<std::optional<LoopLayout>> trainLoop = checkedLoop(
      train, recordedTrainLoop, microbatches, loopShape, /*forwardOnly=*/false);
  if (failed(trainLoop))
    return signalPassFailure();

  // The split: the plan's, or balanced by cost.
  std::vector<double> costs;
  double pre, post;
  layerCosts(trainPlacement.analysis, costs, pre, post);
  FailureOr<std::vector<int>> counts = chunkLayerCounts(
      module, stageLayers, costs, pre, post, chunks, layers);
  if (failed(counts))
    return signalPassFailure();
  StageSplit split = splitOf(*counts, stages, config.chunks, layers);

  // Tied parameters, then the final analysis of the rewritten step.
  std::vector<std::string> tied =
      placeTrainStep(train, layers, split, trainPlacement);

  StageBuilder builder(module, plan.getMesh(), *axis, split, markActions);
  if (failed(builder.build(train, trainPlacement, slotsOf(*generated))))
    return signalPassFailure();
  // A walked step needs marks, not a loop's anchors.
  if (*trainLoop && !markActions)
    markLoopAnchors(module, train, **trainLoop, *generated);

  for (func::FuncOp eval : evals) {
    Placement evalPlacement;
    evalPlacement.analysis = analyzeStep(eval, layers);
    const int evalMicrobatches = evalPlacement.analysis.microbatches;
    FailureOr<std::optional<LoopLayout>> evalLoop =
        checkedLoop(eval, recordedLoop(eval), evalMicrobatches, loopShape,
                    /*forwardOnly=*/true);
    if (failed(evalLoop))
      return signalPassFailure();
    // Forwards only, in groups of pp micro-batches through each local
    // chunk in turn (one chunk: the micro-batches in order).
    std::vector<std::vector<SlotKey>> evalSlots(stages);
    for (int s = 0; s < stages; ++s)
      for (const Action &action :
           forwardOrder(stages, config.chunks, evalMicrobatches))
        evalSlots[s].push_back({Phase::Forward,
                                generated->modelChunk(s, action.chunk),
                                action.microbatch});
    if (failed(builder.build(eval, evalPlacement, evalSlots)))
      return signalPassFailure();
    if (*evalLoop && !markActions)
      markLoopAnchors(module, eval, **evalLoop, *generated);
  }

  PipelineInfo info = describePipeline(trainPlacement, split, microbatches);
  info.microbatches = stepMicrobatches;
  info.schedule = scheduleName.str();
  info.virtualStages = config.chunks;
  info.chunkLayers = *counts;
  info.tied = tied;
  writePipelineInfo(module, info);

  train.erase();
  for (func::FuncOp eval : evals)
    eval.erase();
}

} // namespace
} // namespace partition
