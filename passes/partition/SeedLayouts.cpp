//===- SeedLayouts.cpp - --dist-seed-layouts: where propagation starts ----===//
//
// The first phase of the partitioner. The plan's data axis splits the batch:
// every input of the training and evaluation steps that has a batch
// dimension (the tokens and targets) is annotated `dist.sharding` split on
// dimension 0 over it, so that data-parallel rank r holds rows
// [r B/dp, (r+1) B/dp). The plan's context axis, if any, splits their
// sequence (dimension 1): context-parallel rank r holds the r-th block of
// each sequence in layout order (the runtime feeds the zigzag chunks; the
// attention ops' explicit positions say where each token was). Arguments
// the user annotated keep their annotation
// (annotations win); annotations are checked here: on the plan's mesh, and
// whole or split, never partial.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/partition/Layout.h"

#include "dialects/Xfmr/XfmrDialect.h"
#include "dialects/Xfmr/XfmrOps.h"

namespace partition {
#define GEN_PASS_DEF_SEEDLAYOUTSPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

LogicalResult seedStep(func::FuncOp step, const PartitionMesh &mesh) {
  StringRef meshName = mesh.symbol.getValue();
  for (BlockArgument arg : step.getArguments()) {
    unsigned index = arg.getArgNumber();
    if (auto sharding = step.getArgAttrOfType<dist::ShardingAttr>(
            index, dist::DistDialect::kShardingAttrName)) {
      if (sharding.getMesh() != mesh.symbol)
        return step.emitError()
               << "argument #" << index << " is annotated on @"
               << sharding.getMesh().getValue() << "; the plan's mesh is @"
               << meshName;
      if (!sharding.getPartialAxes().empty())
        return step.emitError() << "argument #" << index
                                << " is annotated as a partial sum; an input "
                                   "must be whole or split";
      continue;
    }
    auto type = dyn_cast<RankedTensorType>(arg.getType());
    if ((!mesh.hasData() && !mesh.hasContext()) || !type ||
        type.getRank() == 0 ||
        !step.getArgAttr(index, xfmr::XfmrDialect::kInputAttrName))
      continue;
    Layout rows = Layout::replicated(type);
    auto split = [&](int64_t dim, const Axes &axes) -> LogicalResult {
      rows.dims[dim] = axes;
      if (type.getDimSize(dim) % mesh.shardsOf(axes) == 0)
        return success();
      return step.emitError()
             << "the "
             << step.getArgAttrOfType<StringAttr>(
                        index, xfmr::XfmrDialect::kInputAttrName)
                    .getValue()
             << " batch has " << type.getDimSize(dim) << " elements in dimension "
             << dim << ", which do not split evenly over " << describe(axes)
             << " (" << mesh.shardsOf(axes) << " blocks)";
    };
    if (mesh.hasData() && failed(split(0, mesh.batchAxes())))
      return failure();
    if (mesh.hasContext() && type.getRank() >= 2 &&
        failed(split(1, {mesh.contextAxis})))
      return failure();
    step.setArgAttr(index, dist::DistDialect::kShardingAttrName,
                    rows.toAttr(step.getContext(), meshName));
  }
  // The ring: attention's sequences become its own factors (the sharding
  // rule reads the mark), so propagation leaves the keys split.
  if (mesh.hasContext() && mesh.contextRing) {
    WalkResult marked = step.walk([&](Operation *op) {
      if (!isa<xfmr::AttentionOp, xfmr::AttentionGradOp>(op))
        return WalkResult::advance();
      bool positions =
          isa<xfmr::AttentionOp>(op)
              ? bool(cast<xfmr::AttentionOp>(op).getQueryPositions())
              : bool(cast<xfmr::AttentionGradOp>(op).getQueryPositions());
      if (!positions) {
        op->emitOpError() << "has no explicit positions, which context "
                             "parallelism's ring needs (run "
                             "--xfmr-explicit-positions first)";
        return WalkResult::interrupt();
      }
      op->setAttr(xfmr::XfmrDialect::kContextRingAttrName,
                  UnitAttr::get(op->getContext()));
      return WalkResult::advance();
    });
    if (marked.wasInterrupted())
      return failure();
  }
  return success();
}

struct SeedLayoutsPass : impl::SeedLayoutsPassBase<SeedLayoutsPass> {
  using SeedLayoutsPassBase::SeedLayoutsPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PartitionMesh> mesh = lookupPartitionMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    if (!dataParallel) {
      mesh->dataAxis = "";
      mesh->expertAxis = "";
      mesh->contextAxis = "";
    }
    SmallVector<func::FuncOp> steps = stepsToPartition(module);
    if (steps.empty()) {
      module.emitError(
          "no training step to partition (run --xfmr-train-step first)");
      return signalPassFailure();
    }
    for (func::FuncOp step : steps)
      if (failed(seedStep(step, *mesh)))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
