//===- Recompute.cpp - --dist-recompute: activation recomputation ---------===//
//
// Works on the training step after autodiff and partitioning. The forward
// values that backward ops read are what the step keeps alive from its
// forward pass; a policy chooses a set of forward values to recompute
// instead, and each backward use of one reads a clone of the forward ops
// that computed it, rebuilt from the nearest kept values right before its
// first backward use (so the clone lives from there to its last use only).
//
// Recomputation is bit-identical: the clones are the same ops on the same
// inputs, and the kernels are deterministic. Collectives inside recomputed
// work (a tensor-parallel all_reduce, a sequence-parallel all_gather) are
// cloned too; every rank runs the same program, so every rank issues the
// clones in the same order, and nothing is reordered.
//
// The layer of a forward op is that of the parameters it reads (through a
// cast, with mixed precision), else the deepest layer among its operands'
// ops; outside the layers (embeddings, final norm, LM head) it is -1, the
// convention of passes/ActivationMemory.cpp. A layer's inputs are the
// forward values that ops of another layer read: the residual stream
// between layers.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "llvm/ADT/DenseSet.h"

namespace partition {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

/// The step's ops split into forward and backward, and each forward op's
/// layer.
struct StepStructure {
  llvm::DenseSet<Operation *> backward;
  llvm::DenseMap<Operation *, int64_t> layer;
  /// Forward values read by an op of another layer (or of no layer).
  llvm::DenseSet<Value> layerInputs;
};

/// The layer of the parameter `value` is, or a cast (mixed precision) or
/// gather of one is; nullopt for anything else.
std::optional<int64_t> parameterLayer(Value value, func::FuncOp step) {
  while (Operation *def = value.getDefiningOp()) {
    if (!isa<CastOp, dist::AllGatherOp>(def))
      return std::nullopt;
    value = def->getOperand(0);
  }
  auto arg = cast<BlockArgument>(value);
  if (arg.getOwner()->getParentOp() != step)
    return std::nullopt;
  // The layer partition-gen records on the parameter (-1: outside the
  // layers).
  if (!step.getArgAttr(arg.getArgNumber(), XfmrDialect::kParamAttrName))
    return std::nullopt;
  auto layer = step.getArgAttrOfType<IntegerAttr>(arg.getArgNumber(),
                                                  XfmrDialect::kLayerAttrName);
  return layer ? layer.getInt() : -1;
}

StepStructure analyzeStep(func::FuncOp step) {
  StepStructure structure;
  Block &body = step.getBody().front();
  // Gradient computations: everything downstream of a loss gradient (one
  // per micro-batch), and what an earlier run of this pass rebuilt there.
  for (Operation &op : body) {
    bool seed =
        isa<SoftmaxCrossEntropyGradOp, VocabParallelCrossEntropyGradOp>(op) ||
        op.hasAttr(dist::DistDialect::kRecomputedAttrName);
    bool fed = llvm::any_of(op.getOperands(), [&](Value operand) {
      Operation *def = operand.getDefiningOp();
      return def && structure.backward.contains(def);
    });
    if (seed || fed)
      structure.backward.insert(&op);
  }
  for (Operation &op : body) {
    if (structure.backward.contains(&op))
      continue;
    std::optional<int64_t> layer;
    for (Value operand : op.getOperands())
      if ((layer = parameterLayer(operand, step)))
        break;
    if (!layer) {
      layer = -1;
      for (Value operand : op.getOperands())
        if (Operation *def = operand.getDefiningOp())
          layer = std::max(*layer, structure.layer.lookup_or(def, -1));
    }
    structure.layer[&op] = *layer;
    for (Value operand : op.getOperands()) {
      Operation *def = operand.getDefiningOp();
      if (def && structure.layer.contains(def) &&
          structure.layer.lookup(def) != *layer)
        structure.layerInputs.insert(operand);
    }
  }
  return structure;
}

/// Ops that may be cloned: side-effect free, no regions, tensor results.
bool isClonable(Operation *op) {
  return op->getNumRegions() == 0 && op->getNumResults() > 0 &&
         isPure(op) && !isa<arith::ConstantOp>(op) &&
         llvm::all_of(op->getResultTypes(), [](Type type) {
           return isa<RankedTensorType>(type);
         });
}

/// Selective recomputation rebuilds the cheap work between the matmuls:
/// forward ops without matmul FLOPs (norms, activations, residual sums,
/// casts) and the gathers and slices that move their results. Matmuls,
/// attention and the reductions that complete them stay kept.
bool isCheap(Operation *op) {
  if (isa<dist::AllGatherOp, dist::AllSliceOp>(op))
    return true;
  return isa<AutodiffOpInterface>(op) && !isa<MatmulFlopsOpInterface>(op);
}

/// The forward values `policy` recomputes.
llvm::DenseSet<Value> chooseRecomputed(const StepStructure &structure,
                                       func::FuncOp step,
                                       dist::RecomputePolicy policy) {
  llvm::DenseSet<Value> recomputed;
  for (Operation &op : step.getBody().front()) {
    auto layer = structure.layer.find(&op);
    if (layer == structure.layer.end() || !isClonable(&op))
      continue;
    bool chosen = false;
    if (policy == dist::RecomputePolicy::Full)
      chosen = layer->second >= 0;
    else if (policy == dist::RecomputePolicy::Selective)
      chosen = isCheap(&op);
    if (!chosen)
      continue;
    for (Value result : op.getResults())
      if (!structure.layerInputs.contains(result))
        recomputed.insert(result);
  }
  return recomputed;
}

/// Rewrites every backward use of a recomputed value to a clone built right
/// before the first backward op that needs it.
class Rebuilder {
public:
  Rebuilder(const llvm::DenseSet<Value> &recomputed) : recomputed(recomputed) {}

  Value rebuild(Value value, Operation *before) {
    if (!recomputed.contains(value))
      return value;
    if (Value done = rebuilt.lookup(value))
      return done;
    Operation *def = value.getDefiningOp();
    IRMapping mapping;
    for (Value operand : def->getOperands())
      mapping.map(operand, rebuild(operand, before));
    OpBuilder builder(before);
    Operation *clone = builder.clone(*def, mapping);
    clone->setAttr(dist::DistDialect::kRecomputedAttrName, builder.getUnitAttr());
    for (auto [original, copy] :
         llvm::zip(def->getResults(), clone->getResults()))
      rebuilt[original] = copy;
    return rebuilt.lookup(value);
  }

private:
  const llvm::DenseSet<Value> &recomputed;
  llvm::DenseMap<Value, Value> rebuilt;
};

void recomputeStep(func::FuncOp step, dist::RecomputePolicy policy) {
  StepStructure structure = analyzeStep(step);
  if (structure.backward.empty())
    return;
  llvm::DenseSet<Value> recomputed =
      chooseRecomputed(structure, step, policy);
  if (recomputed.empty())
    return;
  // Forward ops that only the backward read (a gather the partitioner made
  // for a weight gradient) die once their uses are rebuilt.
  SmallVector<Operation *> forward;
  for (Operation &op : step.getBody().front())
    if (structure.layer.contains(&op) && !op.use_empty())
      forward.push_back(&op);
  Rebuilder rebuilder(recomputed);
  SmallVector<Operation *> backward;
  for (Operation &op : step.getBody().front())
    if (structure.backward.contains(&op))
      backward.push_back(&op);
  for (Operation *op : backward)
    for (OpOperand &use : op->getOpOperands())
      if (recomputed.contains(use.get()))
        use.set(rebuilder.rebuild(use.get(), op));
  for (Operation *op : llvm::reverse(forward))
    if (op->use_empty() && isClonable(op))
      op->erase();
}

struct RecomputePass : impl::RecomputePassBase<RecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::RecomputePolicy chosen = dist::RecomputePolicy::None;
    if (!policy.empty()) {
      std::optional<dist::RecomputePolicy> parsed =
          dist::symbolizeRecomputePolicy(policy);
      if (!parsed) {
        module.emitError() << "unknown recompute policy '" << policy
                           << "': use none, selective or full";
        return signalPassFailure();
      }
      chosen = *parsed;
    } else if (dist::PlanAttr plan = dist::getPlan(module)) {
      chosen = plan.getRecompute();
    }
    if (chosen == dist::RecomputePolicy::Budget) {
      module.emitError("recompute policy 'budget' is not implemented yet: "
                       "use none, selective or full");
      return signalPassFailure();
    }
    if (chosen == dist::RecomputePolicy::None)
      return;
    for (auto step : module.getOps<func::FuncOp>())
      if (!step.isExternal() && step.getBody().hasOneBlock())
        recomputeStep(step, chosen);
  }
};

} // namespace
} // namespace partition
