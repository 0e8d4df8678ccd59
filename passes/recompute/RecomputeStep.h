//===- RecomputeStep.h - what both recompute policies share -----*- C++ -*-===//
//
// Internal to --dist-recompute: the training step split into forward and
// backward with each forward op's layer, and the rewrite that makes the
// backward read clones of the values a policy recomputes. The rule-based
// policies (selective, full) are in Recompute.cpp, the budget policy in
// RecomputeBudget.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_RECOMPUTE_RECOMPUTESTEP_H
#define PARTITION_PASSES_RECOMPUTE_RECOMPUTESTEP_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Pass/PassManager.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

namespace partition::recompute {

/// The step's ops split into forward and backward, and each forward op's
/// layer.
struct StepStructure {
  llvm::DenseSet<mlir::Operation *> backward;
  llvm::DenseMap<mlir::Operation *, int64_t> layer;
  /// Forward values read by an op of another layer (or of no layer).
  llvm::DenseSet<mlir::Value> layerInputs;
};

StepStructure analyzeStep(mlir::func::FuncOp step);

/// Ops that may be cloned: side-effect free, no regions, tensor results.
bool isClonable(mlir::Operation *op);

/// Rebuilds every backward use of the values in `recomputed`.
void rewriteStep(mlir::func::FuncOp step, const StepStructure &structure,
                 const llvm::DenseSet<mlir::Value> &recomputed);

/// The budget policy: chooses and applies the cheapest recomputation whose
/// arena peak fits `budget`, measured by running `after` (the passes up to
/// the memory plan) through `run` on copies of the module; prints what it
/// chose with `report`; with `exhaustiveCheck` measures the whole frontier
/// to check the choice.
mlir::LogicalResult recomputeWithinBudget(
    mlir::ModuleOp module, mlir::func::FuncOp step, int64_t budget,
    bool report, bool exhaustiveCheck, const mlir::OpPassManager &after,
    llvm::function_ref<mlir::LogicalResult(mlir::OpPassManager &,
                                           mlir::Operation *)>
        run);

} // namespace partition::recompute

#endif // PARTITION_PASSES_RECOMPUTE_RECOMPUTESTEP_H
