//===- ApplyPlan.cpp - --dist-apply-plan: read and record plan.json -------===//
//
// Reads plan.json, checks it against the model's configuration and records
// it in the IR: `dist.mesh @mesh axes = [dp, pp, tp]` and the module's
// typed `dist.plan` (#dist.plan, each axis with its role). See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/plan/Plan.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/Support/MemoryBuffer.h"

namespace partition {
#define GEN_PASS_DEF_APPLYPLANPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;

namespace partition {
namespace {

constexpr StringLiteral kMeshName = "mesh";

/// The model configuration checkPlanAgainstModel needs, from `xfmr.model`.
PlanModel planModel(DictionaryAttr config) {
  auto field = [&](StringRef name) -> std::optional<int64_t> {
    if (auto value = config.getAs<IntegerAttr>(name))
      return value.getInt();
    return std::nullopt;
  };
  PlanModel model{field("batch"), field("heads"),  field("kv_heads"),
                  field("layers"), field("vocab"),  field("seq_len"),
                  field("experts")};
  if (auto factor = config.getAs<FloatAttr>("capacity_factor"))
    model.expertCapacity = factor.getValueAsDouble() > 0;
  if (auto balance = config.getAs<StringAttr>("load_balance"))
    model.routingBias = balance.getValue() == "aux-free";
  return model;
}

/// With replicas (NTP), `plan` becomes replica `index`'s uniform plan; a
/// plan with replicas needs an index in range, and one without none.
LogicalResult selectReplica(Plan &plan, int64_t index, StringRef fileName,
                            llvm::function_ref<void(const Twine &)> emitError) {
  int64_t count = static_cast<int64_t>(plan.replicas.size());
  if (index < 0 && count == 0)
    return success();
  if (index < 0) {
    emitError(fileName + ": the plan has " + Twine(count) +
              " replicas, each compiled on its own: use partition-compile, "
              "or --dist-apply-plan=\"plan=" + fileName +
              " replica=N\" for replica N's step");
    return failure();
  }
  if (index >= count) {
    emitError(fileName + ": replica=" + Twine(index) + " but the plan has " +
              Twine(count) + " replicas (0.." + Twine(count - 1) + ")");
    return failure();
  }
  plan = plan.replicaPlan(static_cast<size_t>(index));
  return success();
}

/// The axis over which a key-value head is replicated when the model has
/// fewer of them than tp: `tensorAxis`_kv_rep (tp_kv_rep). The context
/// owns the name's storage.
StringRef keyValueReplicaAxisName(StringRef tensorAxis, MLIRContext *context) {
  return StringAttr::get(context, tensorAxis + "_kv_rep").getValue();
}

/// The tensor axes after the plan's tp when parts have their own degree:
/// `tensorAxis`_sub, `tensorAxis`_sub2, ... (tp_sub, tp_sub2, ...) for
/// index 1, 2, ...; index 0 is the plan's axis itself. The context owns the
/// name's storage.
StringRef partAxisName(StringRef tensorAxis, size_t index,
                       MLIRContext *context) {
  if (index == 0)
    return tensorAxis;
  std::string name = (tensorAxis + "_sub").str();
  if (index > 1)
    name += std::to_string(index);
  return StringAttr::get(context, name).getValue();
}

/// dist::AxisRole, the attribute's, of the plan's MLIR-free role.
dist::AxisRole toAxisRole(Plan::AxisRole role) {
  switch (role) {
  case Plan::AxisRole::Data:
    return dist::AxisRole::Data;
  case Plan::AxisRole::Tensor:
    return dist::AxisRole::Tensor;
  case Plan::AxisRole::Pipeline:
    return dist::AxisRole::Pipeline;
  case Plan::AxisRole::Context:
    return dist::AxisRole::Context;
  case Plan::AxisRole::Expert:
    return dist::AxisRole::Expert;
  }
  llvm_unreachable("unknown Plan::AxisRole");
}

/// The mesh's axes. With fewer key-value heads than tp (the plan check
/// ensures tp is then a multiple of them), tp is laid out as two axes, both
/// tensor-parallel: tp, as many as the key-value heads, major, and
/// tp_kv_rep, the ranks that share one key-value head. A rank's coordinate
/// on the plan's tp is tp * size(tp_kv_rep) + tp_kv_rep, so ranks are
/// numbered as without the split; the key-value projections are split over
/// tp alone and the ranks of a tp_kv_rep group hold the same head, as in
/// Megatron-LM.
///
/// With a degree per part of the model (tensor_parallel.per_layer,
/// .embedding), tp is cut likewise at every degree (and at the key-value
/// heads), major first: tp, tp_sub, tp_sub2, ..., so that a part of degree
/// d splits its weights over the major axes whose sizes multiply to d and
/// is replicated over the others (degrees 4 and 2: tp = 2 x tp_sub = 2, a
/// tp-2 layer split over tp). The plan check makes the cuts a chain (each
/// divides the next); ranks keep their numbering here too.
SmallVector<Plan::Axis, 4> meshAxes(const Plan &plan,
                                    std::optional<int64_t> kvHeads,
                                    MLIRContext *context) {
  SmallVector<Plan::Axis, 4> axes;
  for (const Plan::Axis &axis : plan.axes()) {
    bool tensor = axis.role == Plan::AxisRole::Tensor;
    bool kvCut = tensor && kvHeads && *kvHeads < axis.size &&
                 axis.size % *kvHeads == 0;
    if (tensor && plan.hasPartDegrees()) {
      SmallVector<int64_t> cuts;
      for (int64_t degree : plan.tensorDegrees())
        if (degree > 1)
          cuts.push_back(degree);
      // A size-1 axis for one key-value head keeps it on the major axes
      // (WeightPolicy keeps at least one axis).
      if (kvCut)
        cuts.push_back(*kvHeads);
      llvm::sort(cuts);
      cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
      int64_t below = 1;
      for (auto [index, cut] : llvm::enumerate(cuts)) {
        axes.push_back({partAxisName(axis.name, index, context), axis.role,
                        cut / below});
        below = cut;
      }
      if (cuts.empty())
        axes.push_back(axis);
      continue;
    }
    if (kvCut) {
      axes.push_back({axis.name, axis.role, *kvHeads});
      axes.push_back({keyValueReplicaAxisName(axis.name, context), axis.role,
                      axis.size / *kvHeads});
      continue;
    }
    axes.push_back(axis);
  }
  return axes;
}

/// The degree of each layer, for #dist.plan's layer_tp: `layers` entries
/// (the model's, or as many as per_layer names without a model).
SmallVector<int64_t> layerDegrees(const Plan &plan,
                                  std::optional<int64_t> layers) {
  int64_t count = layers.value_or(0);
  if (!layers)
    for (const auto &range : plan.tensorParallel.perLayer)
      count = std::max(count, range.last + 1);
  SmallVector<int64_t> degrees;
  for (int64_t layer = 0; layer < count; ++layer)
    degrees.push_back(plan.layerTp(layer));
  return degrees;
}

/// The typed plan, every field filled in.
dist::PlanAttr toAttr(const Plan &plan, ArrayRef<Plan::Axis> meshAxes,
                      std::optional<int64_t> layers, MLIRContext *context) {
  DenseI64ArrayAttr layerTp;
  int64_t embeddingTp = 0;
  if (plan.hasPartDegrees()) {
    layerTp = DenseI64ArrayAttr::get(context, layerDegrees(plan, layers));
    embeddingTp = plan.embeddingTp();
  }
  SmallVector<dist::PlanAxisAttr> axes;
  for (const Plan::Axis &axis : meshAxes)
    axes.push_back(dist::PlanAxisAttr::get(
        context, axis.name, toAxisRole(axis.role)));
  return dist::PlanAttr::get(
      context, FlatSymbolRefAttr::get(context, kMeshName), axes,
      plan.tensorParallel.sequenceParallel,
      plan.pipeline.scheduleOrDefault(), plan.pipeline.microbatches,
      plan.zero.stage,
      *dist::symbolizeRecomputePolicy(plan.recompute.policy),
      plan.recompute.budgetBytes, plan.precision,
      plan.tensorParallel.vocabMultiple, layerTp, embeddingTp,
      plan.mesh.cp > 1 ? plan.contextParallel.chunks(plan.mesh.cp) : 0,
      plan.contextParallel.method, plan.moe.expertParallel);
}

struct ApplyPlanPass : impl::ApplyPlanPassBase<ApplyPlanPass> {
  using ApplyPlanPassBase::ApplyPlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto emitError = [&](const Twine &message) {
      module.emitError() << message;
    };

    // Without a file, the default plan; with one, the file must hold a plan
    // (an empty file is an error, not the default).
    Plan plan;
    StringRef fileName = planPath.empty() ? StringRef("plan.json")
                                          : StringRef(planPath);
    if (!planPath.empty()) {
      llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
          llvm::MemoryBuffer::getFile(planPath, /*IsText=*/true);
      if (!file) {
        emitError(fileName + ": cannot read the plan: " +
                  file.getError().message());
        return signalPassFailure();
      }
      FailureOr<Plan> parsed =
          parsePlan((*file)->getBuffer(), fileName, emitError);
      if (failed(parsed))
        return signalPassFailure();
      plan = *parsed;
    }

    // The model function: the forward function or the training step.
    DictionaryAttr model;
    for (auto function : module.getOps<func::FuncOp>())
      if (auto config = function->getAttrOfType<DictionaryAttr>(
              xfmr::XfmrDialect::kModelAttrName)) {
        model = config;
        break;
      }
    if (model && failed(checkPlanAgainstModel(plan, planModel(model),
                                              fileName, emitError)))
      return signalPassFailure();
    if (failed(checkPlanImplemented(plan, fileName, emitError)) ||
        failed(checkPlanTakesEffect(plan, fileName, emitError)))
      return signalPassFailure();
    // NTP: each replica's step is compiled on its own, as the uniform plan
    // of its degree (docs/nonuniform-tp.md).
    if (failed(selectReplica(plan, replica, fileName, emitError)))
      return signalPassFailure();

    SmallVector<Plan::Axis, 4> axes =
        meshAxes(plan, model ? planModel(model).kvHeads : std::nullopt,
                 &getContext());
    SmallVector<StringRef> axisNames;
    SmallVector<int64_t> axisSizes;
    for (const Plan::Axis &axis : axes) {
      axisNames.push_back(axis.name);
      axisSizes.push_back(axis.size);
    }
    // A model annotated with shardings declares the mesh they name: it must
    // be the plan's.
    bool haveMesh = false;
    if (auto mesh = dyn_cast_or_null<dist::MeshOp>(
            SymbolTable::lookupSymbolIn(module, kMeshName))) {
      SmallVector<StringRef> names;
      for (Attribute name : mesh.getAxisNames())
        names.push_back(cast<StringAttr>(name).getValue());
      if (names != axisNames ||
          SmallVector<int64_t>(mesh.getAxisSizes()) != axisSizes) {
        InFlightDiagnostic diag = mesh.emitError();
        diag << fileName << ": the model's mesh @" << kMeshName
             << " is not the plan's [";
        llvm::interleaveComma(axes, diag, [&](const Plan::Axis &axis) {
          diag << axis.name << " = " << axis.size;
        });
        diag << "]";
        return signalPassFailure();
      }
      haveMesh = true;
    }
    if (dist::getPlan(module) ||
        module->hasAttr(dist::DistDialect::kPlanAttrName) ||
        (!haveMesh && SymbolTable::lookupSymbolIn(module, kMeshName))) {
      module.emitError() << fileName << ": the module already has a plan ('"
                         << dist::DistDialect::kPlanAttrName
                         << "' or a symbol @" << kMeshName
                         << "); apply a plan once";
      return signalPassFailure();
    }

    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    if (!haveMesh)
      dist::MeshOp::create(builder, module.getLoc(), kMeshName,
                           builder.getStrArrayAttr(axisNames),
                           builder.getDenseI64ArrayAttr(axisSizes));
    module->setAttr(dist::DistDialect::kPlanAttrName,
                    toAttr(plan, axes,
                           model ? planModel(model).layers : std::nullopt,
                           &getContext()));
  }
};

} // namespace
} // namespace partition
