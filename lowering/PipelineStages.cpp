//===- PipelineStages.cpp - the step functions of each pipeline stage -----===//

#include "lowering/PipelineStages.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"

using namespace mlir;

namespace partition {

FailureOr<SmallVector<SmallVector<func::FuncOp>>>
groupByPipelineStage(ModuleOp module, ArrayRef<func::FuncOp> functions) {
  SmallVector<SmallVector<func::FuncOp>> groups;
  func::FuncOp marked, unmarked;
  for (func::FuncOp function : functions) {
    Attribute attr = function->getAttr(kPipelineStageAttrName);
    if (!attr) {
      unmarked = function;
      continue;
    }
    marked = function;
    auto stage = dyn_cast<IntegerAttr>(attr);
    if (!stage || !stage.getType().isInteger(64) || stage.getInt() < 0)
      return function.emitError()
             << kPipelineStageAttrName << " must be a non-negative i64, but is "
             << attr;
    // Bounded by the number of functions: a stage further than that leaves
    // a gap, reported below.
    if (stage.getInt() >= static_cast<int64_t>(functions.size()))
      return function.emitError()
             << "is pipeline stage " << stage.getInt() << ", but the module "
             << "has only " << functions.size() << " step functions: the "
             << "stages must be 0.." << functions.size() - 1 << " at most";
    if (groups.size() <= static_cast<size_t>(stage.getInt()))
      groups.resize(stage.getInt() + 1);
    groups[stage.getInt()].push_back(function);
  }
  if (!marked)
    return SmallVector<SmallVector<func::FuncOp>>{
        SmallVector<func::FuncOp>(functions.begin(), functions.end())};
  if (unmarked)
    return unmarked.emitError()
           << "has no " << kPipelineStageAttrName << ", but @"
           << marked.getSymName()
           << " has: every step function of a pipelined module belongs to a "
              "stage";
  for (auto [stage, group] : llvm::enumerate(groups))
    if (group.empty())
      return module.emitError()
             << "pipeline stage " << stage << " has no step function, but a "
             << "later stage has: stages must be 0.." << groups.size() - 1;
  // With a plan, the pipeline axis says how many stages there are.
  dist::PlanAttr plan = dist::getPlan(module);
  if (!plan)
    return groups;
  for (dist::PlanAxisAttr axis : plan.getAxes()) {
    if (axis.getRole() != dist::AxisRole::Pipeline)
      continue;
    for (auto mesh : module.getOps<dist::MeshOp>())
      for (auto [name, size] :
           llvm::zip(mesh.getAxisNames(), mesh.getAxisSizes()))
        if (cast<StringAttr>(name).getValue() == axis.getName() &&
            size != static_cast<int64_t>(groups.size()))
          return module.emitError()
                 << "the module has " << groups.size()
                 << (groups.size() == 1 ? " pipeline stage" : " pipeline stages")
                 << ", but its mesh @" << mesh.getSymName()
                 << " has " << axis.getName() << " = " << size
                 << ": one stage per coordinate of the pipeline axis";
  }
  return groups;
}

} // namespace partition
