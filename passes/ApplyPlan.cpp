//===- ApplyPlan.cpp - --dist-apply-plan: read and record plan.json -------===//
//
// Reads plan.json, checks it against the model's configuration and records
// it in the IR: `dist.mesh @mesh axes = [dp, pp, tp]` and the module's
// `dist.plan` dictionary. See Passes.td for the contract.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Plan.h"

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

constexpr StringLiteral kPlanAttrName = "dist.plan";
constexpr StringLiteral kMeshName = "mesh";

struct ApplyPlanPass : impl::ApplyPlanPassBase<ApplyPlanPass> {
  using ApplyPlanPassBase::ApplyPlanPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto emitError = [&](const Twine &message) {
      module.emitError() << message;
    };

    std::string text;
    if (!planPath.empty()) {
      llvm::ErrorOr<std::unique_ptr<llvm::MemoryBuffer>> file =
          llvm::MemoryBuffer::getFile(planPath, /*IsText=*/true);
      if (!file) {
        emitError("plan.json: cannot read the plan '" + planPath +
                  "': " + file.getError().message());
        return signalPassFailure();
      }
      text = (*file)->getBuffer().str();
    }
    FailureOr<Plan> plan = parsePlan(text, emitError);
    if (failed(plan))
      return signalPassFailure();

    // The model function: the forward function or the training step.
    DictionaryAttr model;
    for (auto function : module.getOps<func::FuncOp>())
      if (auto config = function->getAttrOfType<DictionaryAttr>(
              xfmr::XfmrDialect::kModelAttrName)) {
        model = config;
        break;
      }
    if (model && failed(checkPlanAgainstModel(*plan, model, emitError)))
      return signalPassFailure();

    // A model annotated with shardings declares the mesh they name: it must
    // be the plan's.
    bool haveMesh = false;
    if (auto mesh = dyn_cast_or_null<dist::MeshOp>(
            SymbolTable::lookupSymbolIn(module, kMeshName))) {
      SmallVector<int64_t> want{plan->mesh.dp, plan->mesh.pp, plan->mesh.tp};
      SmallVector<StringRef> names;
      for (Attribute name : mesh.getAxisNames())
        names.push_back(cast<StringAttr>(name).getValue());
      if (names != SmallVector<StringRef>{"dp", "pp", "tp"} ||
          SmallVector<int64_t>(mesh.getAxisSizes()) != want) {
        mesh.emitError() << "plan.json: the model's mesh @" << kMeshName
                         << " is not the plan's [dp = " << plan->mesh.dp
                         << ", pp = " << plan->mesh.pp
                         << ", tp = " << plan->mesh.tp << "]";
        return signalPassFailure();
      }
      haveMesh = true;
    }
    if (module->hasAttr(kPlanAttrName) ||
        (!haveMesh && SymbolTable::lookupSymbolIn(module, kMeshName))) {
      module.emitError() << "plan.json: the module already has a plan ('"
                         << kPlanAttrName << "' or a symbol @" << kMeshName
                         << "); apply a plan once";
      return signalPassFailure();
    }

    OpBuilder builder = OpBuilder::atBlockBegin(module.getBody());
    if (!haveMesh)
      dist::MeshOp::create(
          builder, module.getLoc(), kMeshName,
          builder.getStrArrayAttr({"dp", "pp", "tp"}),
          builder.getDenseI64ArrayAttr(
              {plan->mesh.dp, plan->mesh.pp, plan->mesh.tp}));
    module->setAttr(kPlanAttrName, plan->toAttr(&getContext()));
  }
};

} // namespace
} // namespace partition
