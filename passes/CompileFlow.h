//===- CompileFlow.h - the pass sequence partition-compile runs -*- C++ -*-===//
//
// One definition of the compile flow, used by partition-compile and
// registered in partition-opt as --partition-compile-flow (and by its
// earlier name, --partition-compile-pipeline), so that any compile can be
// replayed, and inspected pass by pass (--mlir-print-ir-after-all), in
// partition-opt:
//
//   partition-opt model.mlir \
//     --partition-compile-flow="plan=plan.json bucket-mb=25"
//
// runs the same passes as `partition-compile model.mlir --plan plan.json`
// and prints the rt IR it writes with --emit-mlir.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_COMPILEFLOW_H
#define PARTITION_PASSES_COMPILEFLOW_H

#include "passes/plan/Plan.h"

#include "mlir/Pass/PassManager.h"
#include "mlir/Pass/PassOptions.h"

#include <optional>
#include <string>

namespace partition {

/// partition-compile's options, by the same names.
struct CompileFlowOptions
    : mlir::PassPipelineOptions<CompileFlowOptions> {
  Option<std::string> plan{*this, "plan",
                           llvm::cl::desc("plan.json (none: no plan, one "
                                          "device)")};
  Option<int64_t> microbatches{
      *this, "microbatches",
      llvm::cl::desc("Micro-batches per step (gradient accumulation); "
                     "unset: the plan's pipeline.microbatches, else 1")};
  Option<std::string> optimizer{
      *this, "optimizer",
      llvm::cl::desc("adamw, or none to output gradients"),
      llvm::cl::init("adamw")};
  Option<double> beta1{*this, "beta1", llvm::cl::init(0.9)};
  Option<double> beta2{*this, "beta2", llvm::cl::init(0.95)};
  Option<double> epsilon{*this, "epsilon", llvm::cl::init(1e-8)};
  Option<double> weightDecay{*this, "weight-decay", llvm::cl::init(0.1)};
  Option<double> bucketMb{
      *this, "bucket-mb",
      llvm::cl::desc("Data parallelism: the largest gradient bucket "
                     "all-reduced at once, in MiB"),
      llvm::cl::init(25.0)};
  Option<int64_t> replica{
      *this, "replica",
      llvm::cl::desc("With a plan that lists replicas (NTP): compile replica "
                     "N's step (partition-compile compiles each and writes "
                     "one program); -1: none"),
      llvm::cl::init(-1)};
  Option<bool> logits{
      *this, "logits",
      llvm::cl::desc("Also build @logits_step (the forward pass's logits, "
                     "for partition-run --dump-logits; its output buffer "
                     "stays in the arena)"),
      llvm::cl::init(false)};
  Option<int64_t> explicitPositions{
      *this, "explicit-positions",
      llvm::cl::desc("Run --xfmr-explicit-positions with these chunks after "
                     "the training step (0: not run)"),
      llvm::cl::init(0)};
  Option<bool> unrollMicrobatches{
      *this, "unroll-microbatches",
      llvm::cl::desc("Compile every micro-batch's code, as without a "
                     "micro-batch loop (by default a step without a "
                     "pipeline keeps one copy of its middle micro-batches' "
                     "code: --rt-microbatch-loop)"),
      llvm::cl::init(false)};
  Option<bool> actionWalk{
      *this, "action-walk",
      llvm::cl::desc("Pipelines keep one copy of each kind "
                     "of a stage's actions and walk the schedule as data "
                     "(--rt-action-walk; docs/action-walk.md); false: loop "
                     "over the schedule's periods (--rt-microbatch-loop; "
                     "GPipe, which has none, unrolls)"),
      llvm::cl::init(true)};
  Option<bool> memoryReport{
      *this, "memory-report",
      llvm::cl::desc("Print bytes per buffer category and the arena peak"),
      llvm::cl::init(false)};
};

/// Whether the step's pipeline stages walk their schedule
/// (--rt-action-walk) rather than loop over its periods: a pipeline, not
/// unrolled, GPipe only when asked (ZeRO-3 then gathers parameters per
/// action).
bool walksSchedule(const std::optional<Plan> &plan,
                   const CompileFlowOptions &options);

/// Applies the plan, then builds and partitions the training step:
/// --dist-apply-plan (with a plan), --xfmr-mixed-precision (bf16 plans),
/// --xfmr-train-step, then the partitioner (meshes with dp or tp > 1).
/// Which passes run depends on the plan, so the plan file is read here;
/// --dist-apply-plan reads it again and reports what is wrong with it.
void buildPartitionFlow(mlir::OpPassManager &pm,
                        const CompileFlowOptions &options);

/// The partitioned step to the rt dialect, memory planned: --lower-to-rt,
/// --lower-memory-plan.
void buildLoweringFlow(mlir::OpPassManager &pm,
                       const CompileFlowOptions &options);

/// Both, in order: what partition-compile runs.
void buildCompileFlow(mlir::OpPassManager &pm,
                      const CompileFlowOptions &options);

/// Registers --partition-compile-flow and its earlier name,
/// --partition-compile-pipeline.
void registerCompileFlow();

} // namespace partition

#endif // PARTITION_PASSES_COMPILEFLOW_H
