//===- PipelineReport.h - bubble, per-stage figures, the picture -*- C++ -*-===//
//
// What partition-compile tells about a pipelined compile (--memory-report)
// and draws (--schedule-svg), from the record --dist-pipeline leaves on the
// module (PipelineInfo.h) and the stage functions:
//
//   pipeline: 1f1b, 2 stages, 4 micro-batches: bubble 20.0% of the step
//     (simulated with the stages' costs; 20.0% with equal costs)
//   stage 0: layers 0-1, 12582912 FLOPs per step, parameters 412160 bytes,
//     activations 2228224 bytes at peak (2 micro-batches in flight)
//
// The bubble is the schedule simulator's (ScheduleCheck.h) with each
// action's cost taken from the ops --dist-pipeline put in it; the peak
// activations are one micro-batch's kept activations on the stage times the
// micro-batches the schedule keeps in flight there (1F1B: pp - s; GPipe:
// all). The arena peak the memory plan reports below it is the measured
// figure.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PIPELINE_PIPELINEREPORT_H
#define PARTITION_PASSES_PIPELINE_PIPELINEREPORT_H

#include "mlir/IR/BuiltinOps.h"
#include "llvm/Support/raw_ostream.h"

#include <string>

namespace partition::pipeline {

/// Prints the report; fails (with a diagnostic on the module) when the
/// module was not pipelined.
mlir::LogicalResult printPipelineReport(mlir::ModuleOp module,
                                        llvm::raw_ostream &os);

/// The schedule's picture with the stages' real costs (ScheduleSvg.h).
mlir::FailureOr<std::string> pipelineScheduleSvg(mlir::ModuleOp module);

} // namespace partition::pipeline

#endif // PARTITION_PASSES_PIPELINE_PIPELINEREPORT_H
