//===- PipelineStages.h - the step functions of each pipeline stage -*- C++ -*-//
//
// After --dist-pipeline, each stage k of the pipeline has its own step
// functions (@train_step_stage<k>, @eval_step_stage<k>), marked with
// `dist.pipeline_stage = k`. Each stage becomes one stream of the program
// with an arena of its own; functions of one stage share it, as train_step
// and eval_step do without a pipeline.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_PIPELINESTAGES_H
#define PARTITION_LOWERING_PIPELINESTAGES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"

namespace partition {

/// The discardable attribute (i64) naming a step function's stage.
inline constexpr llvm::StringLiteral kPipelineStageAttrName =
    "dist.pipeline_stage";

/// `functions` grouped by stage: group k holds the functions of stage k, in
/// the given order; one group when none carries the attribute. Fails with a
/// diagnostic when only some carry it, when it is not a non-negative i64,
/// when the stages are not 0..n-1, or when n differs from the size of the
/// mesh axis whose role (#dist.plan) is pipeline.
mlir::FailureOr<llvm::SmallVector<llvm::SmallVector<mlir::func::FuncOp>>>
groupByPipelineStage(mlir::ModuleOp module,
                     llvm::ArrayRef<mlir::func::FuncOp> functions);

} // namespace partition

#endif // PARTITION_LOWERING_PIPELINESTAGES_H
