//===- PlanInputs.h - what partition-plan reads ----------------*- C++ -*-===//
//
// The model (its `xfmr.model` configuration, as the cost model's shape),
// the fields a --plan file fixes, and the check every candidate goes
// through: the plan.json reader and its model checks (passes/plan/Plan.h), so
// that partition-plan only emits plans partition-compile accepts.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_PARTITION_PLAN_PLANINPUTS_H
#define PARTITION_TOOLS_PARTITION_PLAN_PLANINPUTS_H

#include "model/ModelConfig.h"
#include "planner/CostModel.h"
#include "planner/Search.h"

#include "mlir/Support/LogicalResult.h"

#include <optional>
#include <string>
#include <vector>

namespace partition::planner {

/// The configuration of the model in `path`, or the message why not.
std::optional<model::ModelConfig> loadModel(const std::string &path,
                                            std::string &error);

/// The cost model's view of a model configuration.
ModelShape shapeOf(const model::ModelConfig &c);

/// Asks the plan.json reader: "" when partition-compile accepts the plan
/// for this model, else its first message; `hard` says whether no pass
/// could lift the refusal.
std::string validate(const Candidate &c, const model::ModelConfig &model,
                     bool &hard);

/// What --plan fixes: every field the plan writes, as written; those it
/// leaves out are searched. `gpusGiven`: --gpus leaves the mesh axes the
/// plan omits open (without it they are plan.json's defaults).
llvm::FailureOr<Fixed> readFixedPlan(const std::string &path, bool gpusGiven,
                                     std::string &error);

/// The plan.json fields `f` leaves to the search, by their plan.json
/// names (the micro-batch size is always searched: it is the model's
/// batch, not a plan field; pipeline.stages left out is balanced by cost,
/// as the compiler balances it). mesh.cp is named when `cpSearched`: the
/// search tries it for this model (long sequences); moe.expert_parallel
/// when `moe` (a mixture of experts) and dp may exceed 1.
/// (offload.optimizer is named when `offloaded`: the search tries it only
/// for plans that do not fit otherwise.)
std::vector<std::string> searchedFields(const Fixed &f, bool cpSearched,
                                        bool moe = false,
                                        bool offloaded = false,
                                        bool offloadedParameters = false);

} // namespace partition::planner

#endif // PARTITION_TOOLS_PARTITION_PLAN_PLANINPUTS_H
