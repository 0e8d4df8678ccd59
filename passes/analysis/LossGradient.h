//===- LossGradient.h - Where a micro-batch's backward starts ---*- C++ -*-===//
//
// The passes that work on the training step after autodiff (recompute,
// pipeline) tell forward from backward work, and one micro-batch from the
// next, by the op that differentiates the loss: autodiff emits exactly one
// per micro-batch, seeded with 1/m, and every other backward op depends on
// it. One place names those ops, so that a new loss op is added here once.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_ANALYSIS_LOSSGRADIENT_H
#define PARTITION_PASSES_ANALYSIS_LOSSGRADIENT_H

#include "dialects/Xfmr/XfmrOps.h"

namespace partition {

/// True for the gradient op of a loss (a micro-batch's backward seed).
inline bool isLossGradient(mlir::Operation *op) {
  return mlir::isa<xfmr::SoftmaxCrossEntropyGradOp,
                   xfmr::VocabParallelCrossEntropyGradOp>(op);
}

} // namespace partition

#endif // PARTITION_PASSES_ANALYSIS_LOSSGRADIENT_H
