//===- StageAnalysis.h - what each op of a training step is, for a pipeline -*- C++ -*-===//
//
// --dist-pipeline needs, for every op of a (partitioned) training or eval
// step, where it runs and when: its place in the model (the embedding
// before the layers, layer l, or the final norm, LM head and loss after
// them), its micro-batch and its phase. All of it is read from the IR:
//
// - place: an op reading a parameter with `xfmr.layer = l` (through a cast
//   or gather) is in layer l; an op reading a parameter without a layer is
//   before the layers when its other operands are (the embeddings) and
//   after them otherwise (final norm, LM head); any other op is where its
//   latest operand is. A backward op is where the forward op it
//   differentiates is: that of its layered parameter, else of the latest
//   forward value it reads, else of its earliest backward operand (the
//   sums of residual gradients); a gradient that only flows into a
//   parameter's update goes where that parameter is read (the embeddings'
//   weight gradients with the embeddings), and a tensor-parallel gather of
//   a gradient goes to its readers when that moves fewer bytes.
// - micro-batch: the `tensor.extract_slice` of the tokens / targets inputs
//   an op depends on (the latest one; accumulation across micro-batches
//   belongs to the last).
// - phase: forward, or backward when downstream of the loss-gradient seed
//   (or cloned there by --dist-recompute); a backward op whose results only
//   feed weight gradients, their accumulation and the optimizer is W
//   (deferrable), the others B. AdamW and what follows it is the
//   optimizer. Constants, slices of the inputs, casts of parameters and the
//   step counter are "on demand": cheap, pure, cloned into every stage that
//   uses them.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PIPELINE_STAGEANALYSIS_H
#define PARTITION_PASSES_PIPELINE_STAGEANALYSIS_H

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/DenseSet.h"

#include <optional>

namespace partition::pipeline {

enum class Phase { OnDemand, Forward, BackwardInput, BackwardWeight, Optimizer };

struct OpRole {
  Phase phase = Phase::OnDemand;
  /// Place in the model: -1 before the layers, 0..layers-1 a layer,
  /// `layers` after them. Unused for on-demand and optimizer ops.
  int position = -1;
  int microbatch = 0;
};

struct StepAnalysis {
  int layers = 0;
  /// Micro-batches (slices of the tokens input); 1 without slices.
  int microbatches = 1;
  llvm::DenseMap<mlir::Operation *, OpRole> roles;
};

/// Classifies every op of `step` (see the file comment). `layers` is the
/// model's layer count; `optimizer` ops (a tied parameter's gradient sum,
/// which runs with its update) count as the optimizer's.
StepAnalysis
analyzeStep(mlir::func::FuncOp step, int layers,
            const llvm::DenseSet<mlir::Operation *> &optimizer = {});

/// The cost the balancer uses: matmul FLOPs plus the bytes of the results.
double opCost(mlir::Operation *op);

/// Bytes of a tensor value.
int64_t valueBytes(mlir::Value value);

} // namespace partition::pipeline

#endif // PARTITION_PASSES_PIPELINE_STAGEANALYSIS_H
