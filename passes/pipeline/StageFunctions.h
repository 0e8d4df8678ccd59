//===- StageFunctions.h - one function per pipeline stage -------*- C++ -*-===//
//
// Internal to --dist-pipeline (DistPipeline.cpp decides where each op runs;
// this builds the result): the stage split, where one step's ops run, and
// the builder that cuts the step into `<step>_stage<k>` functions whose ops
// run in their schedule's order, with dist.send / dist.recv where a value
// crosses stages.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PIPELINE_STAGEFUNCTIONS_H
#define PARTITION_PASSES_PIPELINE_STAGEFUNCTIONS_H

#include "passes/pipeline/StageAnalysis.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SmallVector.h"

#include <string>
#include <tuple>
#include <vector>

namespace partition::pipeline {

/// Where the layers went: chunk c holds layers [first[c], first[c+1]).
struct StageSplit {
  int stages = 1, chunksPerStage = 1, layers = 0;
  std::vector<int> chunkOfLayer;
  int chunks() const { return stages * chunksPerStage; }
  int chunkOf(int position) const {
    if (position < 0)
      return 0;
    if (position >= layers)
      return chunks() - 1;
    return chunkOfLayer[position];
  }
  int stageOf(int position) const { return chunkOf(position) % stages; }
};

/// A place in a stage's stream: the ops of one phase of one micro-batch of
/// one model chunk.
using SlotKey = std::tuple<Phase, int, int>; // phase, model chunk, mb

/// Where one function's ops run.
struct Placement {
  StepAnalysis analysis;
  /// Ops that run on several stages (a tied parameter's update and the sum
  /// of its gradient partials), with those stages.
  llvm::DenseMap<mlir::Operation *, llvm::SmallVector<int, 2>> replicated;
  /// Optimizer ops that run on one stage.
  llvm::DenseMap<mlir::Operation *, int> optimizerStage;
};

/// A phase's short name in messages and labels: F, B, W, optimizer.
std::string phaseName(Phase phase);

/// How the label of the message carrying micro-batch `mb`'s activations
/// out of local chunk `senderChunk` of its stage begins ("F mb3
/// activations", "F mb3 chunk1 activations" with several chunks per
/// stage); the route follows.
std::string forwardMessagePrefix(int mb, int senderChunk, int chunksPerStage);

/// The function attribute (three strings) naming where a stage function's
/// micro-batch loop body, its copy and its tail start
/// (--rt-microbatch-loop): "rows N" for the first op viewing compiled
/// micro-batch N's rows of the batch, else the prefix of the label of the
/// activations received for that forward.
inline constexpr llvm::StringLiteral kMicrobatchLoopAnchorsAttrName =
    "dist.microbatch_loop_anchors";

class StageBuilder {
public:
  StageBuilder(mlir::ModuleOp module, mlir::FlatSymbolRefAttr mesh, llvm::StringRef axis,
                  const StageSplit &split, bool markActions = false)
      : module(module), mesh(mesh), axis(axis), split(split),
        markActions(markActions) {}

  /// The stages a placed op runs on.
  llvm::SmallVector<int, 2> stagesOf(const Placement &placement,
                                     mlir::Operation *op) const {
    if (auto it = placement.replicated.find(op);
        it != placement.replicated.end())
      return it->second;
    if (auto it = placement.optimizerStage.find(op);
        it != placement.optimizerStage.end())
      return {it->second};
    const OpRole &role = placement.analysis.roles.lookup(op);
    return {split.stageOf(role.position)};
  }

  /// Builds `<name>_stage<k>` for every stage from `step`, each running
  /// `slots[k]` then its optimizer ops. Fails (with a diagnostic) when an op
  /// has no slot or a value would be read before it is made.
  mlir::LogicalResult build(mlir::func::FuncOp step,
                            const Placement &placement,
                            llvm::ArrayRef<std::vector<SlotKey>> slots);

private:
  /// Each stage's ops in the order it runs them, and the sends between
  /// stages (see StageFunctions.cpp).
  struct Streams;
  mlir::FailureOr<Streams> orderStreams(
      mlir::func::FuncOp step, const Placement &placement,
      llvm::ArrayRef<std::vector<SlotKey>> slots) const;
  void findSends(const Placement &placement, Streams &streams) const;
  mlir::LogicalResult buildStage(int stage, mlir::func::FuncOp step,
                                 const Placement &placement,
                                 const Streams &streams,
                                 mlir::OpBuilder &builder) const;
  std::string label(const Placement &placement, mlir::Operation *producer,
                    int from, int to, mlir::func::FuncOp step) const;

  int stages() const { return split.stages; }

  mlir::ModuleOp module;
  mlir::FlatSymbolRefAttr mesh;
  llvm::StringRef axis;
  const StageSplit &split;
  /// Puts an rt.action_mark before each action's ops and the optimizer's.
  bool markActions;
};

} // namespace partition::pipeline

#endif // PARTITION_PASSES_PIPELINE_STAGEFUNCTIONS_H
