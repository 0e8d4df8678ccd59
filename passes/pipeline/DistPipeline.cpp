//===- DistPipeline.cpp - --dist-pipeline: one step function per stage ----===//
//
// Cuts the training step (and the eval step) into one function per
// pipeline stage whose ops run in the order of the stage's schedule
// (scheduling/Schedule.h), with dist.send / dist.recv where a value
// crosses stages. What each op is comes from StageAnalysis.h; where it
// runs from the stage split (Balance.h or the plan's `stages`).
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
#include "scheduling/Balance.h"
#include "passes/pipeline/PipelineInfo.h"
#include "scheduling/Schedule.h"
#include "passes/pipeline/StageAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
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

/// Where the layers went: chunk c holds layers [first[c], first[c+1]).
struct StageSplit {
  int stages = 1, chunksPerStage = 1, layers = 0;
  std::vector<int> chunkOfLayer;
  int chunks() const { return stages * chunksPerStage; }
  int chunkOf(int position) const {
    if (position < 0)
      return 0;
    if (position >= layers)
      return chunks() - 1;
    return chunkOfLayer[position];
  }
  int stageOf(int position) const { return chunkOf(position) % stages; }
};

/// A place in a stage's stream: the ops of one phase of one micro-batch of
/// one model chunk.
using SlotKey = std::tuple<Phase, int, int>; // phase, model chunk, mb

/// Where one function's ops run.
struct Placement {
  StepAnalysis analysis;
  /// Ops that run on several stages (a tied parameter's update and the sum
  /// of its gradient partials), with those stages.
  llvm::DenseMap<Operation *, llvm::SmallVector<int, 2>> replicated;
  /// Optimizer ops that run on one stage.
  llvm::DenseMap<Operation *, int> optimizerStage;
};

std::string phaseName(Phase phase) {
  switch (phase) {
  case Phase::Forward:
    return "F";
  case Phase::BackwardInput:
    return "B";
  case Phase::BackwardWeight:
    return "W";
  case Phase::Optimizer:
    return "optimizer";
  case Phase::OnDemand:
    return "on-demand";
  }
  return "?";
}

/// A dist.send (operand) or dist.recv (result type) with one peer on the
/// pipeline axis and a label, built generically so that it does not depend
/// on how the ops declare `label` (an inherent attribute of both).
Operation *createPeerOp(OpBuilder &builder, StringRef name, Location loc,
                        ValueRange operands, TypeRange results,
                        FlatSymbolRefAttr mesh, StringAttr axis, int peer,
                        const std::string &label) {
  OperationState state(loc, name);
  state.addOperands(operands);
  state.addTypes(results);
  state.addAttribute("mesh", mesh);
  state.addAttribute("peer_axes", builder.getArrayAttr({axis}));
  state.addAttribute("peer_coords", builder.getDenseI64ArrayAttr({peer}));
  Operation *op = builder.create(state);
  op->setAttr("label", builder.getStringAttr(label));
  return op;
}

class PipelineBuilder {
public:
  PipelineBuilder(ModuleOp module, FlatSymbolRefAttr mesh, StringRef axis,
                  const StageSplit &split)
      : module(module), mesh(mesh), axis(axis), split(split) {}

  /// The stages a placed op runs on.
  llvm::SmallVector<int, 2> stagesOf(const Placement &placement,
                                     Operation *op) const {
    if (auto it = placement.replicated.find(op);
        it != placement.replicated.end())
      return it->second;
    if (auto it = placement.optimizerStage.find(op);
        it != placement.optimizerStage.end())
      return {it->second};
    const OpRole &role = placement.analysis.roles.lookup(op);
    return {split.stageOf(role.position)};
  }

  /// Builds `<name>_stage<k>` for every stage from `step`, each running
  /// `slots[k]` then its optimizer ops. Fails (with a diagnostic) when an op
  /// has no slot or a value would be read before it is made.
  LogicalResult build(func::FuncOp step, const Placement &placement,
                      ArrayRef<std::vector<SlotKey>> slots);

private:
  std::string label(const Placement &placement, Operation *producer,
                    int from, int to, func::FuncOp step) const;

  int stages() const { return split.stages; }

  ModuleOp module;
  FlatSymbolRefAttr mesh;
  StringRef axis;
  const StageSplit &split;
};

std::string PipelineBuilder::label(const Placement &placement,
                                   Operation *producer, int from, int to,
                                   func::FuncOp step) const {
  const OpRole &role = placement.analysis.roles.lookup(producer);
  std::string route =
      "stage" + std::to_string(from) + "->" + std::to_string(to);
  // With several chunks per stage, the chunk (on the sending stage) tells
  // apart the messages of one micro-batch.
  std::string mb = "mb" + std::to_string(role.microbatch);
  if (split.chunksPerStage > 1)
    mb += " chunk" + std::to_string(split.chunkOf(role.position) / stages());
  switch (role.phase) {
  case Phase::Forward:
    return "F " + mb + " activations " + route;
  case Phase::BackwardInput:
  case Phase::BackwardWeight:
    if (placement.replicated.empty() ||
        !llvm::any_of(producer->getUsers(), [&](Operation *user) {
          return placement.replicated.contains(user);
        }))
      return "B " + mb + " gradients " + route;
    break;
  default:
    break;
  }
  // A tied parameter's gradient partial: name the parameter.
  for (Operation *user : producer->getUsers()) {
    auto it = placement.replicated.find(user);
    if (it == placement.replicated.end())
      continue;
    for (Operation *next = user; next;) {
      if (auto adamw = dyn_cast<AdamWOp>(next)) {
        if (BlockArgument param = parameterArgument(adamw.getParam(), step))
          if (auto name = step.getArgAttrOfType<StringAttr>(
                  param.getArgNumber(), XfmrDialect::kParamAttrName))
            return "tied gradient " + name.str() + " " + route;
        break;
      }
      next = next->getNumResults() && !next->getResult(0).use_empty()
                 ? *next->getResult(0).getUsers().begin()
                 : nullptr;
    }
  }
  return "gradient " + route;
}

LogicalResult PipelineBuilder::build(func::FuncOp step,
                                     const Placement &placement,
                                     ArrayRef<std::vector<SlotKey>> slots) {
  const int stages = split.stages;
  const auto &roles = placement.analysis.roles;
  Block &body = step.getBody().front();
  auto returnOp = cast<func::ReturnOp>(body.getTerminator());

  // Each stage's stream: its slots' ops, then its optimizer ops, each in
  // program order.
  std::map<SlotKey, std::vector<Operation *>> bySlot;
  std::vector<std::vector<Operation *>> stream(stages), optimizer(stages);
  for (Operation &op : body) {
    auto it = roles.find(&op);
    if (it == roles.end() || it->second.phase == Phase::OnDemand)
      continue;
    const OpRole &role = it->second;
    if (role.phase == Phase::Optimizer || placement.replicated.contains(&op)) {
      for (int stage : stagesOf(placement, &op))
        optimizer[stage].push_back(&op);
      continue;
    }
    bySlot[{role.phase, split.chunkOf(role.position), role.microbatch}]
        .push_back(&op);
  }
  size_t placed = 0;
  for (int s = 0; s < stages; ++s) {
    for (const SlotKey &key : slots[s]) {
      auto it = bySlot.find(key);
      if (it == bySlot.end())
        continue;
      stream[s].insert(stream[s].end(), it->second.begin(), it->second.end());
      placed += it->second.size();
      bySlot.erase(it);
    }
    stream[s].insert(stream[s].end(), optimizer[s].begin(),
                     optimizer[s].end());
  }
  if (!bySlot.empty()) {
    auto &[key, ops] = *bySlot.begin();
    auto [phase, chunk, mb] = key;
    return ops.front()->emitError()
           << "dist-pipeline: this op (" << phaseName(phase) << " of "
           << "micro-batch " << mb << ", model chunk " << chunk
           << ") has no place in the schedule of stage "
           << chunk % stages << "; the step's micro-batches or chunks do "
           << "not match the plan";
  }
  (void)placed;

  // Which stages read each value made by a placed op, and every stage's
  // sends per peer in the order it makes them.
  llvm::DenseMap<Value, std::set<int>> readers;
  for (int s = 0; s < stages; ++s)
    for (Operation *op : stream[s])
      for (Value operand : op->getOperands())
        if (Operation *def = operand.getDefiningOp();
            def && roles.contains(def) &&
            roles.lookup(def).phase != Phase::OnDemand) {
          llvm::SmallVector<int, 2> home = stagesOf(placement, def);
          if (!llvm::is_contained(home, s))
            readers[operand].insert(s);
        }
  std::vector<std::vector<std::vector<Value>>> sends(
      stages, std::vector<std::vector<Value>>(stages));
  for (int s = 0; s < stages; ++s)
    for (Operation *op : stream[s])
      for (Value result : op->getResults())
        if (auto it = readers.find(result); it != readers.end())
          for (int reader : it->second) {
            llvm::SmallVector<int, 2> home = stagesOf(placement, op);
            // A value made on several stages is sent by the first of them.
            if (home.front() == s)
              sends[s][reader].push_back(result);
          }

  // The results each stage returns: the values it makes (the loss only on
  // the stage that computes it; each stage's own parameters and moments)
  // and the on-demand ones (the step counter).
  auto homeOf = [&](Value value) -> std::optional<llvm::SmallVector<int, 2>> {
    Operation *def = value.getDefiningOp();
    if (!def || roles.lookup(def).phase == Phase::OnDemand)
      return std::nullopt; // anywhere
    return stagesOf(placement, def);
  };

  OpBuilder builder(module.getContext());
  builder.setInsertionPoint(step);
  StringAttr axisAttr = builder.getStringAttr(axis);
  for (int s = 0; s < stages; ++s) {
    // The arguments this stage reads, directly or through on-demand ops.
    llvm::SetVector<unsigned> usedArgs;
    llvm::DenseSet<Operation *> visited;
    std::function<void(Value)> need = [&](Value value) {
      if (auto arg = dyn_cast<BlockArgument>(value)) {
        usedArgs.insert(arg.getArgNumber());
        return;
      }
      Operation *def = value.getDefiningOp();
      if (!def || roles.lookup(def).phase != Phase::OnDemand ||
          !visited.insert(def).second)
        return;
      for (Value operand : def->getOperands())
        need(operand);
    };
    for (Operation *op : stream[s])
      for (Value operand : op->getOperands())
        need(operand);
    llvm::SmallVector<unsigned> results;
    for (auto [index, value] : llvm::enumerate(returnOp.getOperands())) {
      auto home = homeOf(value);
      if (home && !llvm::is_contained(*home, s))
        continue;
      results.push_back(index);
      need(value);
    }
    llvm::SmallVector<unsigned> args(usedArgs.begin(), usedArgs.end());
    llvm::sort(args);

    llvm::SmallVector<Type> argTypes, resultTypes;
    for (unsigned index : args)
      argTypes.push_back(body.getArgument(index).getType());
    for (unsigned index : results)
      resultTypes.push_back(returnOp.getOperand(index).getType());
    std::string name =
        (step.getSymName() + "_stage" + llvm::Twine(s)).str();
    auto function = func::FuncOp::create(
        builder, step.getLoc(), name,
        builder.getFunctionType(argTypes, resultTypes));
    for (NamedAttribute attr : step->getDiscardableAttrs())
      function->setAttr(attr.getName(), attr.getValue());
    function->setAttr(pipeline::kPipelineStageAttrName, builder.getI64IntegerAttr(s));
    for (auto [position, index] : llvm::enumerate(args))
      function.setArgAttrs(position, step.getArgAttrDict(index));
    for (auto [position, index] : llvm::enumerate(results))
      function.setResultAttrs(position, step.getResultAttrDict(index));

    Block *entry = function.addEntryBlock();
    OpBuilder inner = OpBuilder::atBlockEnd(entry);
    IRMapping mapping;
    for (auto [position, index] : llvm::enumerate(args))
      mapping.map(body.getArgument(index), entry->getArgument(position));
    std::vector<size_t> received(stages, 0);
    llvm::DenseSet<Operation *> emitted;

    std::function<FailureOr<Value>(Value, Operation *)> resolve =
        [&](Value value, Operation *user) -> FailureOr<Value> {
      if (Value mapped = mapping.lookupOrNull(value))
        return mapped;
      Operation *def = value.getDefiningOp();
      if (!def)
        return user->emitError() << "dist-pipeline: stage " << s
                                 << " reads an argument it does not take";
      if (roles.lookup(def).phase == Phase::OnDemand) {
        for (Value operand : def->getOperands())
          if (failed(resolve(operand, user)))
            return failure();
        inner.clone(*def, mapping);
        return mapping.lookup(value);
      }
      llvm::SmallVector<int, 2> home = stagesOf(placement, def);
      if (llvm::is_contained(home, s))
        return user->emitError()
               << "dist-pipeline: on stage " << s << " this op reads a value "
               << "that its schedule computes later; the step's data flow "
               << "does not follow the layer order";
      // Receive from the peer, in its send order, up to this value.
      int peer = home.front();
      const std::vector<Value> &queue = sends[peer][s];
      while (received[peer] < queue.size()) {
        Value next = queue[received[peer]++];
        Operation *recv = createPeerOp(
            inner, dist::RecvOp::getOperationName(), next.getLoc(), {},
            next.getType(), mesh, axisAttr, peer,
            label(placement, next.getDefiningOp(), peer, s, step));
        mapping.map(next, recv->getResult(0));
        if (next == value)
          return recv->getResult(0);
      }
      return user->emitError() << "dist-pipeline: stage " << s
                               << " reads a value stage " << peer
                               << " never sends";
    };

    for (Operation *op : stream[s]) {
      for (Value operand : op->getOperands())
        if (failed(resolve(operand, op)))
          return failure();
      Operation *copy = inner.clone(*op, mapping);
      (void)copy;
      for (Value result : op->getResults())
        if (auto it = readers.find(result);
            it != readers.end() && stagesOf(placement, op).front() == s)
          for (int reader : it->second) {
            createPeerOp(inner, dist::SendOp::getOperationName(),
                         op->getLoc(), {mapping.lookup(result)}, {}, mesh,
                         axisAttr, reader,
                         label(placement, op, s, reader, step));
          }
    }
    llvm::SmallVector<Value> returned;
    for (unsigned index : results) {
      FailureOr<Value> value = resolve(returnOp.getOperand(index), returnOp);
      if (failed(value))
        return failure();
      returned.push_back(*value);
    }
    func::ReturnOp::create(inner, returnOp.getLoc(), returned);
  }
  return success();
}

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
    for (Value value : llvm::drop_begin(values))
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

  func::FuncOp train, eval;
  for (auto function : module.getOps<func::FuncOp>()) {
    if (function->hasAttr(kPipelineStageAttrName))
      return fail(function, "the module is already cut into pipeline "
                            "stages; run the pass once");
    if (function->hasAttr(XfmrDialect::kTrainStepAttrName))
      train = function;
    else if (function->hasAttr(XfmrDialect::kEvalStepAttrName))
      eval = function;
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
  const int microbatches = trainPlacement.analysis.microbatches;
  if (microbatches != plan.getMicrobatches())
    return fail(train, "pipeline.microbatches = " +
                           llvm::Twine(plan.getMicrobatches()) +
                           " but the training step has " +
                           llvm::Twine(microbatches) +
                           " micro-batches; build it with "
                           "--xfmr-train-step=microbatches=" +
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

  // The split: the plan's, or balanced by cost.
  std::vector<double> costs;
  double pre, post;
  layerCosts(trainPlacement.analysis, costs, pre, post);
  std::vector<int> counts;
  if (!stageLayers.empty()) {
    int64_t sum = 0;
    for (int64_t count : stageLayers) {
      if (count < 1)
        return fail(module, "pipeline.stages gives a chunk " +
                                llvm::Twine(count) +
                                " layers; every chunk needs at least one");
      sum += count;
      counts.push_back(static_cast<int>(count));
    }
    if (static_cast<int>(counts.size()) != chunks)
      return fail(module, "pipeline.stages has " +
                              llvm::Twine(counts.size()) +
                              " entries but the pipeline has mesh.pp x "
                              "pipeline.virtual_stages = " +
                              llvm::Twine(chunks) + " chunks");
    if (sum != layers)
      return fail(module, "pipeline.stages sums to " + llvm::Twine(sum) +
                              " layers but the model has " +
                              llvm::Twine(layers));
  } else {
    counts = balanceLayers(costs, pre, post, chunks);
  }
  StageSplit split;
  split.stages = stages;
  split.chunksPerStage = config.chunks;
  split.layers = layers;
  for (int c = 0; c < chunks; ++c)
    for (int i = 0; i < counts[c]; ++i)
      split.chunkOfLayer.push_back(c);

  // Tied parameters, then the final analysis of the rewritten step.
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
  for (AdamWOp adamw : train.getBody().front().getOps<AdamWOp>()) {
    if (trainPlacement.replicated.contains(adamw))
      continue;
    BlockArgument param = parameterArgument(adamw.getParam(), train);
    int stage = 0;
    if (param && !trainStages[param.getArgNumber()].empty())
      stage = *trainStages[param.getArgNumber()].begin();
    trainPlacement.optimizerStage[adamw] = stage;
  }
  // What follows an update (rare) runs where the update does.
  for (Operation &op : train.getBody().front()) {
    auto role = trainPlacement.analysis.roles.find(&op);
    if (role == trainPlacement.analysis.roles.end() ||
        role->second.phase != Phase::Optimizer || isa<AdamWOp>(op) ||
        trainPlacement.replicated.contains(&op))
      continue;
    for (Value operand : op.getOperands())
      if (Operation *def = operand.getDefiningOp())
        if (auto it = trainPlacement.optimizerStage.find(def);
            it != trainPlacement.optimizerStage.end())
          trainPlacement.optimizerStage[&op] = it->second;
  }

  PipelineBuilder builder(module, plan.getMesh(), *axis, split);
  std::vector<std::vector<SlotKey>> trainSlots(stages);
  for (int s = 0; s < stages; ++s)
    for (const Action &action : generated->actions[s]) {
      Phase phase = action.kind == ActionKind::Forward ? Phase::Forward
                    : action.kind == ActionKind::BackwardInput
                        ? Phase::BackwardInput
                        : Phase::BackwardWeight;
      trainSlots[s].push_back(
          {phase, generated->modelChunk(s, action.chunk), action.microbatch});
    }
  if (failed(builder.build(train, trainPlacement, trainSlots)))
    return signalPassFailure();

  if (eval) {
    Placement evalPlacement;
    evalPlacement.analysis = analyzeStep(eval, layers);
    // Forwards only: each local chunk's micro-batches in turn.
    std::vector<std::vector<SlotKey>> evalSlots(stages);
    for (int s = 0; s < stages; ++s)
      for (int c = 0; c < config.chunks; ++c)
        for (int mb = 0; mb < evalPlacement.analysis.microbatches; ++mb)
          evalSlots[s].push_back(
              {Phase::Forward, generated->modelChunk(s, c), mb});
    if (failed(builder.build(eval, evalPlacement, evalSlots)))
      return signalPassFailure();
  }

  // What the report and the schedule picture need: per chunk, the layers
  // and the cost of one micro-batch's F, B and W, and the activation bytes
  // one micro-batch keeps for the backward.
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
  info.schedule = scheduleName.str();
  info.stages = stages;
  info.microbatches = microbatches;
  info.virtualStages = config.chunks;
  info.chunkLayers = counts;
  info.forward = forward;
  info.backwardInput = backwardInput;
  info.backwardWeight = backwardWeight;
  info.activationBytes = activations;
  info.tied = tied;
  writePipelineInfo(module, info);

  train.erase();
  if (eval)
    eval.erase();
}

} // namespace
} // namespace partition
