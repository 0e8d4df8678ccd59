//===- PipelineInfo.h - the split and schedule --dist-pipeline chose -*- C++ -*-===//
//
// --dist-pipeline records on the module (`dist.pipeline`, a dictionary)
// what it decided and measured: the schedule, the numbers, each model
// chunk's layers and the cost of one micro-batch's F, B and W on it, and
// the activation bytes one micro-batch keeps there for its backward. The
// memory report (bubble, per-stage figures) and the schedule picture of
// partition-compile read it back, after lowering, without the steps.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PIPELINE_PIPELINEINFO_H
#define PARTITION_PASSES_PIPELINE_PIPELINEINFO_H

#include "scheduling/Schedule.h"

#include "mlir/IR/BuiltinOps.h"

#include <optional>
#include <string>
#include <vector>

namespace partition::pipeline {

/// The discardable attribute (i64) naming a step function's stage.
inline constexpr llvm::StringLiteral kPipelineStageAttrName =
    "dist.pipeline_stage";
/// The module's dictionary of PipelineInfo.
inline constexpr llvm::StringLiteral kPipelineInfoAttrName = "dist.pipeline";

struct PipelineInfo {
  std::string schedule;
  int stages = 1, microbatches = 1, virtualStages = 1;
  /// Per model chunk (stages x virtual stages, chunk c on stage c % stages).
  std::vector<int> chunkLayers;
  std::vector<double> forward, backwardInput, backwardWeight;
  std::vector<int64_t> activationBytes;
  /// Parameters held by several stages.
  std::vector<std::string> tied;

  int chunks() const { return stages * virtualStages; }
  /// The schedule these numbers ask for.
  OrError<Schedule> generate() const;
  /// Each action's cost on its stage, from the chunks' costs.
  double cost(int stage, const Action &action) const;
};

void writePipelineInfo(mlir::ModuleOp module, const PipelineInfo &info);
/// Nullopt when the module was not pipelined (or the record is damaged).
std::optional<PipelineInfo> readPipelineInfo(mlir::ModuleOp module);

} // namespace partition::pipeline

#endif // PARTITION_PASSES_PIPELINE_PIPELINEINFO_H
