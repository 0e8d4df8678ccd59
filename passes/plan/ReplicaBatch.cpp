//===- ReplicaBatch.cpp - --dist-replica-batch: one replica's rows --------===//
//
// Nonuniform tensor parallelism (NTP, docs/nonuniform-tp.md): replica N of
// a plan's `replicas` trains on its batch_share of each global batch. Its
// step is the uniform step of its degree on B_N rows, so the forward
// function is rewritten for B_N rows before autodiff. See Passes.td for the
// contract.
//
//===----------------------------------------------------------------------===//

#include "passes/analysis/ForwardFunction.h"
#include "passes/Passes.h"
#include "passes/plan/Plan.h"

#include "dialects/Xfmr/XfmrDialect.h"

#include "mlir/IR/Verifier.h"
#include "llvm/ADT/DenseSet.h"
#include "llvm/Support/MemoryBuffer.h"

namespace partition {
#define GEN_PASS_DEF_REPLICABATCHPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

/// `type` with its first dimension `rows`.
RankedTensorType withRows(RankedTensorType type, int64_t rows) {
  SmallVector<int64_t> shape(type.getShape());
  shape.front() = rows;
  return type.clone(shape);
}

/// Rewrites `forward` from `batch` rows to `rows`: the inputs, then every
/// value computed from a rewritten value whose first dimension is the batch
/// (activations are [B, ...]; parameters never depend on the inputs).
LogicalResult rebatch(func::FuncOp forward, int64_t batch, int64_t rows) {
  llvm::DenseSet<Value> rewritten;
  for (BlockArgument argument : forward.getArguments()) {
    if (!forward.getArgAttr(argument.getArgNumber(),
                            xfmr::XfmrDialect::kInputAttrName))
      continue;
    auto type = dyn_cast<RankedTensorType>(argument.getType());
    if (!type || type.getRank() == 0 || type.getDimSize(0) != batch)
      return forward.emitError()
             << "--dist-replica-batch: input #" << argument.getArgNumber()
             << " is not [" << batch << ", ...] (the model's batch)";
    argument.setType(withRows(type, rows));
    rewritten.insert(argument);
  }
  WalkResult walk = forward.walk([&](Operation *op) {
    if (llvm::none_of(op->getOperands(),
                      [&](Value operand) { return rewritten.contains(operand); }))
      return WalkResult::advance();
    for (OpResult result : op->getResults()) {
      auto type = dyn_cast<RankedTensorType>(result.getType());
      if (!type || type.getRank() == 0 || type.getDimSize(0) != batch)
        continue;
      result.setType(withRows(type, rows));
      rewritten.insert(result);
    }
    return WalkResult::advance();
  });
  (void)walk;
  forward.setFunctionType(FunctionType::get(
      forward.getContext(), forward.getBody().getArgumentTypes(),
      forward.getBody().front().getTerminator()->getOperandTypes()));
  // Each op checks its shapes again: an op whose rows are not its first
  // dimension is caught here rather than miscompiled.
  return mlir::verify(forward);
}

struct ReplicaBatchPass : impl::ReplicaBatchPassBase<ReplicaBatchPass> {
  using ReplicaBatchPassBase::ReplicaBatchPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto emitError = [&](const Twine &message) {
      module.emitError() << message;
    };
    StringRef fileName = planPath.empty() ? StringRef("plan.json")
                                          : StringRef(planPath);
    llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
        llvm::MemoryBuffer::getFile(planPath, /*IsText=*/true);
    if (planPath.empty() || !file) {
      emitError(fileName + ": --dist-replica-batch needs plan=<plan.json> "
                "with replicas" +
                (file ? Twine() : Twine(": ") + file.getError().message()));
      return signalPassFailure();
    }
    FailureOr<Plan> plan = parsePlan((*file)->getBuffer(), fileName, emitError);
    if (failed(plan))
      return signalPassFailure();
    int64_t count = static_cast<int64_t>(plan->replicas.size());
    if (count == 0) {
      emitError(fileName + ": --dist-replica-batch needs a plan with "
                "replicas; this one has none");
      return signalPassFailure();
    }
    if (replica < 0 || replica >= count) {
      emitError(fileName + ": replica=" + Twine(replica) +
                " but the plan has " + Twine(count) + " replicas (0.." +
                Twine(count - 1) + ")");
      return signalPassFailure();
    }
    FailureOr<func::FuncOp> forward = findForwardFunction(
        module, "--dist-replica-batch", "the forward model, before "
                                        "--xfmr-train-step");
    if (failed(forward))
      return signalPassFailure();
    auto config = (*forward)->getAttrOfType<DictionaryAttr>(
        xfmr::XfmrDialect::kModelAttrName);
    auto batch = config ? config.getAs<IntegerAttr>("batch") : IntegerAttr();
    if (!batch) {
      forward->emitError("--dist-replica-batch: the forward function has no "
                         "xfmr.model batch");
      return signalPassFailure();
    }
    auto rows = plan->replicaRows(batch.getInt(), static_cast<size_t>(replica));
    if (!rows) {
      int64_t granule = plan->batchGranule();
      emitError(fileName + ": replicas: the batch_share values do not split "
                "the batch of " + Twine(batch.getInt()) +
                " sequences into whole sequences; use a batch that is a "
                "multiple of " + Twine(granule));
      return signalPassFailure();
    }
    if (rows->second == batch.getInt())
      return;
    if (failed(rebatch(*forward, batch.getInt(), rows->second)))
      return signalPassFailure();
  }
};

} // namespace
} // namespace partition
