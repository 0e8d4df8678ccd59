//===- ModelStats.h - parameter, token and FLOP counts ----------*- C++ -*-===//

#ifndef PARTITION_PASSES_ANALYSIS_MODELSTATS_H
#define PARTITION_PASSES_ANALYSIS_MODELSTATS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"

#include <cstdint>

namespace partition {

struct ModelStats {
  /// Elements of all `xfmr.param` arguments.
  int64_t parameters = 0;
  /// Elements of the `xfmr.input = "tokens"` argument.
  int64_t tokensPerStep = 0;
  /// Matmul FLOPs of one training step (see StatsPass).
  int64_t flopsPerStep = 0;
};

/// Counts `function`; fails with a diagnostic when it has no tokens input.
mlir::FailureOr<ModelStats> computeModelStats(mlir::func::FuncOp function);

/// True for functions with at least one `xfmr.param` argument.
bool isModelFunction(mlir::func::FuncOp function);

} // namespace partition

#endif // PARTITION_PASSES_ANALYSIS_MODELSTATS_H
