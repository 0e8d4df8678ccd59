//===- ActivationMemory.cpp - per-layer activation and TP traffic ---------===//

#include "passes/analysis/ActivationMemory.h"
#include "passes/frontend/StepEntries.h"

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "passes/analysis/LossGradient.h"

#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <functional>

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

/// The layer of the parameters an op reads directly (their `xfmr.layer`,
/// from partition-gen): -1 for parameters outside the layers (embeddings,
/// final norm, LM head), nullopt when it reads none.
std::optional<int64_t> layerOfParams(Operation *op, func::FuncOp step) {
  for (Value operand : op->getOperands()) {
    auto arg = dyn_cast<BlockArgument>(operand);
    if (!arg || arg.getOwner()->getParentOp() != step)
      continue;
    unsigned index = arg.getArgNumber();
    if (!step.getArgAttr(index, XfmrDialect::kParamAttrName) &&
        !step.getArgAttr(index, XfmrDialect::kMoment1AttrName) &&
        !step.getArgAttr(index, XfmrDialect::kMoment2AttrName))
      continue;
    auto layer =
        step.getArgAttrOfType<IntegerAttr>(index, XfmrDialect::kLayerAttrName);
    return layer ? layer.getInt() : -1;
  }
  return std::nullopt;
}

} // namespace

std::map<int64_t, LayerMemory> analyzeLayerMemory(func::FuncOp step) {
  Block &body = step.getBody().front();

  // Gradient computations: everything downstream of the loss gradient, or
  // in a pipeline stage without the loss, of the gradients it receives
  // from the next stage (StageBuilder::label names those transfers "B mb<i>
  // gradients ...").
  llvm::DenseSet<Operation *> backward;
  auto receivesGradient = [](Operation &op) {
    auto label = op.getAttrOfType<StringAttr>("label");
    return isa<dist::RecvOp>(op) && label &&
           label.getValue().starts_with("B ");
  };
  for (Operation &op : body) {
    // A forward op --dist-recompute cloned into the backward runs there:
    // what it reads is what is kept.
    bool seed = isLossGradient(&op) || receivesGradient(op) ||
                op.hasAttr(dist::DistDialect::kRecomputedAttrName);
    bool fed = llvm::any_of(op.getOperands(), [&](Value operand) {
      Operation *def = operand.getDefiningOp();
      return def && backward.contains(def);
    });
    if (seed || fed)
      backward.insert(&op);
  }

  // Each op's layer is that of the parameters it reads; an op that reads
  // none takes it from its neighbours, in the direction that matters:
  //  - for what it reads (activations): from the ops it feeds, since a
  //    backward op serves the layer whose gradients it computes (a weight
  //    gradient reads the residual stream's gradient from the layer above);
  //  - for what it completes (a collective): from the ops that computed its
  //    operands, the deepest one (a residual add belongs to the layer whose
  //    output it adds).
  llvm::DenseMap<Operation *, int64_t> readerLayers, writerLayers;
  // The layer a use serves: a bucketed all-reduce carries many layers'
  // gradients, so look through it to the users of the matching result.
  std::function<int64_t(OpOperand &)> layerOfUse = [&](OpOperand &use) {
    auto bucket = dyn_cast<dist::AllReduceOp>(use.getOwner());
    if (!bucket || bucket.getInputs().size() < 2)
      return readerLayers.lookup_or(use.getOwner(), -1);
    for (OpOperand &next :
         bucket.getResult(use.getOperandNumber()).getUses())
      if (int64_t layer = layerOfUse(next); layer >= 0)
        return layer;
    return int64_t(-1);
  };
  for (Operation &op : llvm::reverse(body)) {
    std::optional<int64_t> direct = layerOfParams(&op, step);
    int64_t layer = direct.value_or(-1);
    for (Value result : op.getResults())
      for (OpOperand &use : result.getUses())
        if (!direct && layer < 0)
          layer = layerOfUse(use);
    readerLayers[&op] = layer;
  }
  for (Operation &op : body) {
    std::optional<int64_t> direct = layerOfParams(&op, step);
    int64_t layer = direct.value_or(-1);
    if (!direct)
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          layer = std::max(layer, writerLayers.lookup_or(def, -1));
    writerLayers[&op] = layer;
  }

  std::map<int64_t, LayerMemory> report;
  // Saved activations, each counted once, in the layer that reads it.
  llvm::DenseSet<Value> saved;
  for (Operation &op : body) {
    if (!backward.contains(&op))
      continue;
    int64_t layer = readerLayers.lookup(&op);
    for (Value value : op.getOperands()) {
      // A gather or slice only the backward reads recomputes its source.
      while (Operation *def = value.getDefiningOp()) {
        bool recompute =
            isa<dist::AllGatherOp, dist::AllSliceOp>(def) &&
            llvm::all_of(def->getUsers(), [&](Operation *user) {
              return backward.contains(user);
            });
        if (!recompute)
          break;
        value = def->getOperand(0);
      }
      Operation *def = value.getDefiningOp();
      if (!def || backward.contains(def) || isa<arith::ConstantOp>(def) ||
          !isa<RankedTensorType>(value.getType()) ||
          !saved.insert(value).second || layer < 0)
        continue;
      report[layer].activationBytes =
          saturatingAdd(report[layer].activationBytes, saturatedByteSize(value.getType(), 2));
    }
  }

  // Tensor-parallel traffic: collectives over axes the plan gives the
  // tensor role (none without a plan or without such an axis; with fewer
  // key-value heads than tp, two axes and their sub-groups).
  auto module = step->getParentOfType<ModuleOp>();
  dist::PlanAttr plan = module ? dist::getPlan(module) : nullptr;
  llvm::SmallVector<StringRef, 2> tensorAxes;
  if (plan)
    for (dist::PlanAxisAttr axis : plan.getAxes())
      if (axis.getRole() == dist::AxisRole::Tensor)
        tensorAxes.push_back(axis.getName());
  for (Operation &op : body) {
    if (tensorAxes.empty())
      break;
    auto axes = op.getAttrOfType<ArrayAttr>("axes");
    auto meshRef = op.getAttrOfType<FlatSymbolRefAttr>("mesh");
    if (!axes || !meshRef || axes.empty() ||
        llvm::any_of(axes, [&](Attribute axis) {
          return !llvm::is_contained(tensorAxes,
                                     cast<StringAttr>(axis).getValue());
        }))
      continue;
    if (!isa<dist::AllReduceOp, dist::AllGatherOp, dist::ReduceScatterOp>(op))
      continue;
    FailureOr<dist::MeshShape> shape = dist::lookupMeshShape(&op, meshRef);
    if (failed(shape))
      continue;
    int64_t n = 1;
    for (Attribute axis : axes) {
      int64_t index = shape->find(cast<StringAttr>(axis).getValue());
      n *= index < 0 ? 1 : shape->sizes[index];
    }
    // A reduction completes the op that produced its operand; a gather
    // prepares the input of the op that reads it.
    int64_t layer = isa<dist::AllGatherOp>(op) ? readerLayers.lookup(&op)
                                               : writerLayers.lookup(&op);
    if (layer < 0)
      continue;
    int64_t sent = 0;
    if (auto reduce = dyn_cast<dist::AllReduceOp>(op)) {
      for (Value input : reduce.getInputs())
        sent += 2 * (n - 1) * saturatedByteSize(input.getType()) / n;
    } else if (auto gather = dyn_cast<dist::AllGatherOp>(op)) {
      sent = (n - 1) * saturatedByteSize(gather.getResult().getType()) / n;
    } else if (auto scatter = dyn_cast<dist::ReduceScatterOp>(op)) {
      sent = (n - 1) * saturatedByteSize(scatter.getInput().getType()) / n;
    }
    report[layer].tensorParallelBytes += sent;
  }
  // Under the micro-batch loop the step holds M0 of its M micro-batches,
  // alike: the step's figures are M / M0 times theirs.
  if (step->hasAttr(xfmr::XfmrDialect::kTrainStepAttrName))
    if (std::optional<pipeline::LoopLayout> loop = recordedLoop(step))
      for (auto &[layer, memory] : report) {
        memory.activationBytes =
            memory.activationBytes / loop->compiled * loop->microbatches;
        memory.tensorParallelBytes =
            memory.tensorParallelBytes / loop->compiled * loop->microbatches;
      }
  return report;
}

} // namespace partition
