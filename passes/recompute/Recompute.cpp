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
// convention of passes/analysis/ActivationMemory.cpp. A layer's inputs are the
// forward values that ops of another layer read: the residual stream
// between layers.
//
// The budget policy (recompute.policy = "budget") is in RecomputeBudget.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/CheckedSize.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Rt/RtOps.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "passes/analysis/LossGradient.h"
#include "passes/partition/Layout.h"
#include "lowering/Passes.h"
#include "passes/Passes.h"
#include "passes/recompute/RecomputeStep.h"

#include "mlir/Dialect/Arith/IR/Arith.h"
#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/MemRef/IR/MemRef.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/IRMapping.h"
#include "mlir/Interfaces/SideEffectInterfaces.h"
#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassRegistry.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/ADT/ScopeExit.h"
#include "llvm/ADT/SmallBitVector.h"
#include "llvm/Support/raw_ostream.h"

#include <map>

namespace partition {
#define GEN_PASS_DEF_RECOMPUTEPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition::recompute {

StepStructure analyzeStep(func::FuncOp step) {
  StepStructure structure;
  Block &body = step.getBody().front();
  // Gradient computations: everything downstream of a loss gradient (one
  // per micro-batch), and what an earlier run of this pass rebuilt there.
  for (Operation &op : body) {
    bool seed =
        isLossGradient(&op) ||
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

namespace {

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

} // namespace

/// Rebuilds every backward use of the values in `recomputed`.
void rewriteStep(func::FuncOp step, const StepStructure &structure,
                 const llvm::DenseSet<Value> &recomputed) {
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
  for (Operation *op : backward) {
    // The step's results are not backward work: the mean loss (micro-
    // batches' running sum) is returned as computed, not rebuilt at the
    // end.
    if (op->hasTrait<OpTrait::IsTerminator>())
      continue;
    for (OpOperand &use : op->getOpOperands())
      if (recomputed.contains(use.get()))
        use.set(rebuilder.rebuild(use.get(), op));
  }
  for (Operation *op : llvm::reverse(forward))
    if (op->use_empty() && isClonable(op))
      op->erase();
}

} // namespace partition::recompute

namespace partition {
namespace {

using namespace recompute;

void recomputeStep(func::FuncOp step, dist::RecomputePolicy policy) {
  StepStructure structure = analyzeStep(step);
  if (structure.backward.empty())
    return;
  rewriteStep(step, structure, chooseRecomputed(structure, step, policy));
}

struct RecomputePass : impl::RecomputePassBase<RecomputePass> {
  using Base::Base;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    dist::RecomputePolicy chosen = dist::RecomputePolicy::None;
    dist::PlanAttr plan = dist::getPlan(module);
    if (!policy.empty()) {
      std::optional<dist::RecomputePolicy> parsed =
          dist::symbolizeRecomputePolicy(policy);
      if (!parsed) {
        module.emitError() << "unknown recompute policy '" << policy
                           << "': use none, selective, full or budget";
        return signalPassFailure();
      }
      chosen = *parsed;
    } else if (plan) {
      chosen = plan.getRecompute();
    }
    if (chosen == dist::RecomputePolicy::None)
      return;
    SmallVector<func::FuncOp> steps;
    for (auto step : module.getOps<func::FuncOp>())
      if (!step.isExternal() && step.getBody().hasOneBlock())
        steps.push_back(step);
    if (chosen != dist::RecomputePolicy::Budget) {
      for (func::FuncOp step : steps)
        recomputeStep(step, chosen);
      return;
    }

    int64_t budget = budgetBytes > 0 ? int64_t(budgetBytes)
                     : plan        ? plan.getBudgetBytes()
                                   : 0;
    if (budget <= 0) {
      module.emitError("recompute policy 'budget' needs a budget: give "
                       "budget-bytes, or recompute.budget_bytes in the plan");
      return signalPassFailure();
    }
    // The training step: the one function with a backward pass (an eval
    // step has none and keeps nothing).
    SmallVector<func::FuncOp> training;
    for (func::FuncOp step : steps)
      if (!analyzeStep(step).backward.empty())
        training.push_back(step);
    if (training.size() != 1) {
      module.emitError() << "recompute policy 'budget' needs exactly one "
                            "training step, found "
                         << training.size();
      return signalPassFailure();
    }
    // What partition-compile runs after this pass, up to the memory plan.
    OpPassManager after(ModuleOp::getOperationName());
    if (measurePipeline.empty()) {
      after.addPass(createLowerToRtPass());
      after.addPass(createMemoryPlanPass());
    } else {
      std::string text = measurePipeline;
      if (!StringRef(text).starts_with(ModuleOp::getOperationName()))
        text = (ModuleOp::getOperationName() + "(" + text + ")").str();
      std::string problem;
      llvm::raw_string_ostream errors(problem);
      FailureOr<OpPassManager> parsed = parsePassPipeline(text, errors);
      if (failed(parsed)) {
        module.emitError() << "recompute measure-pipeline '" << measurePipeline
                           << "' is not a pass pipeline: " << problem;
        return signalPassFailure();
      }
      after = std::move(*parsed);
    }
    auto run = [&](OpPassManager &pm, Operation *op) {
      return runPipeline(pm, op);
    };
    if (failed(recomputeWithinBudget(module, training.front(), budget, report,
                                     exhaustiveCheck, after, run)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace partition
