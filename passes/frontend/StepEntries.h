//===- StepEntries.h - entry points derived from the forward pass -*- C++ -*-===//
//
// --xfmr-train-step turns the forward function into the program's entry
// points. @train_step (forward, backward, AdamW) is built in TrainStep.cpp;
// this file holds what every entry point shares (what the forward
// function's arguments are, the micro-batch slices) and the two that only
// run the forward pass: @eval_step (the mean loss of the step's
// micro-batches) and @logits_step (the logits of each micro-batch).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_FRONTEND_STEPENTRIES_H
#define PARTITION_PASSES_FRONTEND_STEPENTRIES_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

namespace partition {

/// A weight's sharding annotation (the dist dialect's dist.sharding).
inline constexpr llvm::StringLiteral kShardingAttrName = "dist.sharding";

/// What each argument of the forward function is.
struct ForwardSignature {
  llvm::SmallVector<unsigned> paramArgs;
  unsigned tokensArg = 0;
  unsigned targetsArg = 0;
};

/// Finds the parameters (xfmr.param), the tokens and the targets
/// (xfmr.input) of the forward function; an error names what is missing,
/// doubled or of the wrong type.
mlir::FailureOr<ForwardSignature> analyzeForward(mlir::func::FuncOp forward);

/// The step's tokens: the forward function's [b, T] micro-batch, stacked
/// `microbatches` times ([k*b, T]).
struct StepTokens {
  int64_t microBatch;
  mlir::RankedTensorType type;
};
StepTokens stepTokensOf(mlir::func::FuncOp forward,
                        const ForwardSignature &signature,
                        int64_t microbatches);

/// The micro-batches a step with `microbatches` of them builds: all, or
/// under the micro-batch loop (more than kLoopCompiledMicroBatches of
/// them) micro-batches 0, 1, 2 and k-1, micro-batch 1's code standing for
/// 1..k-2 (--rt-microbatch-loop), 2 being there to show that it can.
constexpr int64_t kLoopCompiledMicroBatches = 4;
llvm::SmallVector<int64_t> compiledMicroBatches(int64_t microbatches,
                                                bool loop);
/// The key of xfmr.train_step and xfmr.eval_step that records the loop:
/// how many micro-batches micro-batch 1's code runs for (k-2).
constexpr llvm::StringLiteral kMicrobatchLoopKey = "microbatch_loop";

/// The micro-batch `index` of a [k*b, T] token tensor (the tensor itself
/// when k = 1).
mlir::Value sliceBatch(mlir::OpBuilder &builder, mlir::Location loc,
                       mlir::Value tokens, int64_t index, int64_t microBatch);

/// @eval_step(params, tokens, targets) -> loss: the forward passes of the
/// training step's `microbatches` micro-batches and their mean loss,
/// without gradients.
mlir::LogicalResult buildEvalStep(mlir::ModuleOp module,
                                  mlir::func::FuncOp forward,
                                  const ForwardSignature &signature,
                                  int64_t microbatches, bool loop);

/// @logits_step(params, tokens) -> the logits of each of the step's
/// `microbatches` micro-batches, in order (partition-compile --logits).
mlir::LogicalResult buildLogitsStep(mlir::ModuleOp module,
                                    mlir::func::FuncOp forward,
                                    const ForwardSignature &signature,
                                    int64_t microbatches);

} // namespace partition

#endif // PARTITION_PASSES_FRONTEND_STEPENTRIES_H
