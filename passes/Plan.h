//===- Plan.h - plan.json: how a model is distributed -----------*- C++ -*-===//
//
// The parallelization plan of a training run (plan.json, see DESIGN.md,
// "Contracts"): the device mesh, tensor/pipeline/ZeRO options, recompute and
// precision. Every field is optional; parsing rejects unknown fields, wrong
// types and out-of-range values with a message that names the field path and
// the value, and checkPlanAgainstModel rejects plans a model cannot follow.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PLAN_H
#define PARTITION_PASSES_PLAN_H

#include "mlir/IR/BuiltinAttributes.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/StringRef.h"
#include "llvm/ADT/Twine.h"
#include "llvm/Support/LogicalResult.h"

#include <cstdint>
#include <string>

namespace partition {

struct Plan {
  struct Mesh {
    int64_t dp = 1, tp = 1, pp = 1;
    int64_t devices() const { return dp * tp * pp; }
  } mesh;
  struct TensorParallel {
    bool sequenceParallel = false;
  } tensorParallel;
  struct Pipeline {
    /// gpipe, 1f1b, interleaved-1f1b or zero-bubble.
    std::string schedule = "1f1b";
    int64_t microbatches = 1;
  } pipeline;
  struct Zero {
    int64_t stage = 0;
  } zero;
  struct Recompute {
    /// none, full, selective or budget.
    std::string policy = "none";
    /// Only with policy budget (required there).
    int64_t budgetBytes = 0;
  } recompute;
  /// fp32 or bf16.
  std::string precision = "fp32";

  /// The plan as a dictionary with every field, defaults included:
  /// {mesh = {dp, tp, pp}, tensor_parallel = {sequence_parallel},
  ///  pipeline = {schedule, microbatches}, zero = {stage},
  ///  recompute = {policy (, budget_bytes)}, precision}.
  mlir::DictionaryAttr toAttr(mlir::MLIRContext *context) const;
};

/// Reports one error; the message starts with "plan.json: ".
using PlanErrorFn = llvm::function_ref<void(const llvm::Twine &)>;

/// Parses plan.json text. An empty or whitespace-only text is the default
/// plan.
llvm::FailureOr<Plan> parsePlan(llvm::StringRef json, PlanErrorFn emitError);

/// Checks that the model (the `xfmr.model` dictionary: batch, heads,
/// kv_heads, layers, vocab, seq_len) can follow the plan; every problem is
/// reported (not only the first).
llvm::LogicalResult checkPlanAgainstModel(const Plan &plan,
                                          mlir::DictionaryAttr model,
                                          PlanErrorFn emitError);

} // namespace partition

#endif // PARTITION_PASSES_PLAN_H
