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

#include "scheduling/MicrobatchLoop.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallVector.h"

#include <optional>
#include <string>

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

/// The micro-batch loop (docs/compiler.md, scheduling/MicrobatchLoop.h):
/// the shape of the pipeline whose schedule the step follows (one stage
/// without a pipeline).
struct LoopShape {
  int64_t stages = 1, chunks = 1;
  std::string schedule = "1f1b";
  /// The earliest period after the warm-up the body may be (LoopLayout's
  /// settle): 1 where a step's first micro-batches differ from the rest.
  int64_t minSettle = 0;
  /// A pipeline whose stages walk their schedule (--rt-action-walk): the
  /// step builds micro-batches 0, 1 and the last (1 the regions' template,
  /// 0 and the last the proof and the sums' finish), sums from zero.
  bool walk = false;
};

/// How a step of `microbatches` loops under `shape` (the training step's
/// schedule, or with `forwardOnly` the evaluation step's forwards), or
/// nullopt when it does not.
std::optional<pipeline::LoopLayout>
stepLoopLayout(int64_t microbatches, const LoopShape &shape, bool forwardOnly);

/// The real micro-batches a step builds, in order: all of them, or under
/// the loop those of the prefix, the body, its copy and the tail.
llvm::SmallVector<int64_t>
compiledMicroBatches(int64_t microbatches,
                     const std::optional<pipeline::LoopLayout> &layout);

/// The keys of xfmr.train_step and xfmr.eval_step that record the loop:
/// how many times the runtime runs its body (R), how many micro-batches a
/// run advances, the first compiled micro-batch of the tail's numbering
/// and how many the step holds (scheduling/MicrobatchLoop.h).
constexpr llvm::StringLiteral kMicrobatchLoopKey = "microbatch_loop";
constexpr llvm::StringLiteral kMicrobatchLoopStrideKey =
    "microbatch_loop_stride";
constexpr llvm::StringLiteral kMicrobatchLoopSplitKey = "microbatch_loop_split";
constexpr llvm::StringLiteral kMicrobatchLoopCompiledKey =
    "microbatch_loop_compiled";
constexpr llvm::StringLiteral kMicrobatchLoopSettleKey =
    "microbatch_loop_settle";

/// The entries recording `layout` in a step's dictionary.
llvm::SmallVector<mlir::NamedAttribute>
loopEntries(mlir::Builder &builder, const pipeline::LoopLayout &layout);

/// The loop a step function's xfmr.train_step or xfmr.eval_step records
/// (its numbers: stride, split, compiled, microbatches, runs; no per-stage
/// bounds), or nullopt.
std::optional<pipeline::LoopLayout> recordedLoop(mlir::Operation *function);

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
                                  int64_t microbatches,
                                  const std::optional<pipeline::LoopLayout> &layout);

/// @logits_step(params, tokens) -> the logits of each of the step's
/// `microbatches` micro-batches, in order (partition-compile --logits).
mlir::LogicalResult buildLogitsStep(mlir::ModuleOp module,
                                    mlir::func::FuncOp forward,
                                    const ForwardSignature &signature,
                                    int64_t microbatches);

} // namespace partition

#endif // PARTITION_PASSES_FRONTEND_STEPENTRIES_H
