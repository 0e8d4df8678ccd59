//===- CompileFlow.cpp - the pass sequence partition-compile runs ---------===//

#include "passes/CompileFlow.h"

#include "lowering/Passes.h"
#include "passes/Passes.h"
#include "passes/plan/Plan.h"
#include "passes/partition/ShardPasses.h"

#include "mlir/Pass/PassRegistry.h"
#include "llvm/Support/MemoryBuffer.h"

#include <optional>

using namespace mlir;

namespace partition {
namespace {

/// The plan as far as it decides which passes run, or nullopt without a
/// readable, valid plan (--dist-apply-plan then reports the problem).
std::optional<Plan> readPlan(const std::string &path) {
  if (path.empty())
    return std::nullopt;
  auto file = llvm::MemoryBuffer::getFile(path, /*IsText=*/true);
  if (!file)
    return std::nullopt;
  FailureOr<Plan> plan =
      parsePlan((*file)->getBuffer(), path, [](const llvm::Twine &) {});
  if (failed(plan))
    return std::nullopt;
  return *plan;
}

/// The plan's optimizer-state offload, if it asks for one.
void addOffloadPass(OpPassManager &pm, const Plan &plan) {
  if (!plan.offload.enabled() && plan.offload.parameters == "none")
    return;
  OffloadOptimizerPassOptions offload;
  offload.tier = plan.offload.optimizer;
  offload.parameters = plan.offload.parameters;
  offload.bufferBytes = plan.offload.bufferBytes;
  offload.path = plan.offload.path;
  pm.addPass(createOffloadOptimizerPass(offload));
}

/// --lower-to-rt for the plan: ZeRO-3's parameter shards gathered tensor
/// by tensor, unless they are offloaded (--rt-offload-optimizer stages
/// their reads through the bucket's pack).
std::unique_ptr<Pass> createLowerToRt(const std::optional<Plan> &plan) {
  LowerToRtPassOptions lower;
  lower.gatherShardsPerTensor =
      !plan || plan->offload.parameters == "none";
  return createLowerToRtPass(lower);
}

} // namespace

bool walksSchedule(const std::optional<Plan> &plan,
                   const CompileFlowOptions &options) {
  return plan && plan->mesh.pp > 1 && options.actionWalk &&
         !options.unrollMicrobatches;
}

void buildPartitionFlow(OpPassManager &pm, const CompileFlowOptions &options) {
  std::optional<Plan> plan = readPlan(options.plan);
  if (!options.plan.empty()) {
    ApplyPlanPassOptions apply;
    apply.planPath = options.plan;
    apply.replica = options.replica;
    pm.addPass(createApplyPlanPass(apply));
  }
  // NTP: replica N's step is the uniform step of its degree on its rows of
  // the batch (docs/nonuniform-tp.md); the passes below see that plan.
  if (plan && !plan->replicas.empty() && options.replica >= 0 &&
      options.replica < static_cast<int64_t>(plan->replicas.size())) {
    ReplicaBatchPassOptions rows;
    rows.planPath = options.plan;
    rows.replica = options.replica;
    pm.addPass(createReplicaBatchPass(rows));
    plan = plan->replicaPlan(static_cast<size_t>(options.replica));
  }
  // Before autodiff, so that every later pass sees the padded shapes.
  if (plan && plan->mesh.tp > 1)
    pm.addPass(createPadVocabPass());
  if (plan && plan->precision == "bf16")
    pm.addPass(createMixedPrecisionPass());

  TrainStepPassOptions step;
  step.microbatches = options.microbatches.hasValue() ? options.microbatches
                      : plan ? plan->pipeline.microbatches
                             : 1;
  step.optimizer = options.optimizer;
  step.beta1 = options.beta1;
  step.beta2 = options.beta2;
  step.epsilon = options.epsilon;
  step.weightDecay = options.weightDecay;
  step.withEval = options.optimizer == "adamw";
  step.withLogits = options.logits;
  // The micro-batch as a loop: one copy of the steady state's code
  // (--rt-microbatch-loop, after the lowering), which follows the
  // pipeline's schedule when there is one (GPipe does not loop).
  step.loop = !options.unrollMicrobatches;
  // ZeRO-3 gathers the parameters in the first micro-batches, which then
  // differ from the loop's body; a walk's actions each gather their own.
  if (plan && plan->zero.stage == 3 && !walksSchedule(plan, options))
    step.loopSettle = 1;
  if (plan && plan->mesh.pp > 1) {
    step.loopStages = plan->mesh.pp;
    step.loopChunks = plan->pipeline.virtualStages;
    step.loopSchedule = plan->pipeline.scheduleOrDefault().str();
    step.loopWalk = walksSchedule(plan, options);
  }
  pm.addPass(createTrainStepPass(step));
  // After autodiff, so that the backward ops get the positions too. Context
  // parallelism's attention needs them: a rank's queries and keys are not
  // the sequence's first ones (and, with zigzag, not contiguous).
  int64_t positionChunks = options.explicitPositions;
  if (positionChunks == 0 && plan && plan->mesh.cp > 1)
    positionChunks = plan->contextParallel.chunks(plan->mesh.cp);
  if (positionChunks > 0) {
    ExplicitPositionsPassOptions positions;
    positions.chunks = positionChunks;
    pm.addPass(createExplicitPositionsPass(positions));
  }

  // The partitioner.
  bool sharded = plan && (plan->mesh.dp > 1 || plan->mesh.tp > 1 ||
                          plan->mesh.cp > 1);
  bool pipelined = plan && plan->mesh.pp > 1;
  int64_t bucketBytes = static_cast<int64_t>(options.bucketMb * 1024 * 1024);
  if (sharded) {
    ShardPassesOptions shard;
    shard.bucketBytes = bucketBytes;
    shard.bucketGradients = !pipelined;
    buildShardPasses(pm, shard);
  }
  // After bucketing: ZeRO turns the data-parallel gradient buckets into
  // reduce-scatters of flat buckets and shards AdamW's state. With a
  // pipeline, the buckets are formed per stage after the cut (below).
  // Over the data-parallel ranks and the context-parallel ones.
  bool zero = plan && plan->zero.stage > 0 &&
              (plan->mesh.dp > 1 || plan->mesh.cp > 1);
  if (zero && !pipelined)
    pm.addPass(createZeroPass());
  // Pipeline stages on local types (a stage's tp collectives stay inside
  // it), then each stage buckets its own data-parallel gradients.
  auto addStagePasses = [&](OpPassManager &stagePm, bool markActions) {
    DistPipelinePassOptions pipeline;
    pipeline.virtualStages = plan->pipeline.virtualStages;
    pipeline.stageLayers = llvm::to_vector(plan->pipeline.stages);
    pipeline.markActions = markActions;
    stagePm.addPass(createDistPipelinePass(pipeline));
    if (sharded) {
      BucketGradientsPassOptions buckets;
      buckets.bucketBytes = bucketBytes;
      stagePm.addPass(createBucketGradientsPass(buckets));
    }
    if (zero)
      stagePm.addPass(createZeroPass());
  };
  // After partitioning, so that recomputed work includes its collectives;
  // before the pipeline cut, which sees recomputed ops as backward work
  // (and so runs them in B / W, where the recomputation belongs).
  if (plan && plan->recompute.policy != "none") {
    RecomputePassOptions recompute;
    recompute.policy = plan->recompute.policy;
    recompute.report = options.memoryReport;
    // The budget measures its choices as they will be compiled: with a
    // pipeline, cut into stages (each stage's arena within the budget).
    if (pipelined) {
      // The pass parses it back: the passes it names must be registered
      // (again, for partition-opt: registering a pass twice is harmless).
      registerPartitionPasses();
      registerLoweringPasses();
      OpPassManager after(ModuleOp::getOperationName());
      addStagePasses(after, /*markActions=*/false);
      after.addPass(createLowerToRt(plan));
      addOffloadPass(after, *plan);
      after.addPass(createMemoryPlanPass());
      llvm::raw_string_ostream text(recompute.measurePipeline);
      after.printAsTextualPipeline(text);
    }
    pm.addPass(createRecomputePass(recompute));
  }
  if (pipelined)
    addStagePasses(pm, walksSchedule(plan, options));
}

void buildLoweringFlow(OpPassManager &pm, const CompileFlowOptions &options) {
  std::optional<Plan> plan = readPlan(options.plan);
  pm.addPass(createLowerToRt(plan));
  // One copy of the middle micro-batches' code, matched while every
  // collective is still blocking; the passes after it move ops within the
  // loop or outside it, never across its edges.
  // A pipeline whose actions are marked walks them instead
  // (--action-walk: docs/action-walk.md).
  if (walksSchedule(plan, options))
    pm.addPass(createActionWalkPass());
  else
    pm.addPass(createMicrobatchLoopPass());
  // ZeRO-1/2's AdamW reads each rank's chunk in its parameter instead of a
  // sliced copy (before the overlap, which then schedules the kernels that
  // run); not where the offload stages the updates (it rewrites the adamw
  // kernels itself) or replicas split the step at its first adamw.
  if (plan && (plan->zero.stage == 1 || plan->zero.stage == 2) &&
      !plan->offload.enabled() && plan->offload.parameters == "none" &&
      plan->replicas.empty())
    pm.addPass(createFoldSlicedUpdatesPass());
  // Data-parallel buckets reduced while the backward pass goes on (and,
  // when the plan asks, tensor-parallel collectives while independent
  // kernels run); before the memory plan, which then keeps their buffers
  // until the waits. (Pipelines keep their synchronous collectives.)
  if (plan && plan->mesh.pp == 1 && plan->replicas.empty()) {
    OverlapCollectivesPassOptions overlap;
    overlap.dataParallel =
        (plan->mesh.dp > 1 || plan->mesh.cp > 1) && plan->overlap.dataParallel;
    overlap.tensorParallel =
        plan->mesh.tp > 1 && plan->overlap.tensorParallel;
    // ZeRO's started collectives keep what they read live until their
    // wait (the gradients, a packed bucket, a gathered one): unbounded,
    // every bucket of a gpt2-124m dp2 ZeRO-1 step was live at once (arena
    // 2.06 GB against 1.48 GB blocking). Two buckets in flight keep the
    // communication thread busy (it runs one collective at a time); a
    // bucket moved tensor by tensor (lowering/FlatBuckets.h) counts as one,
    // so its collectives all start as their gradients complete. (A bound
    // in bytes instead, 3 x bucket-mb, let a small model's gradients all
    // live until AdamW: ZeRO-2 then saved no gradient memory.)
    if (plan->zero.stage > 0 && (plan->mesh.dp > 1 || plan->mesh.cp > 1))
      overlap.maxInFlight = 2;
    if (overlap.dataParallel || overlap.tensorParallel)
      pm.addPass(createOverlapCollectivesPass(overlap));
  }
  // After the overlap (whose collectives the staged updates then keep
  // around them), before the memory plan, which lays the tier out.
  if (plan)
    addOffloadPass(pm, *plan);
  MemoryPlanPassOptions memory;
  memory.report = options.memoryReport;
  pm.addPass(createMemoryPlanPass(memory));
}

void buildCompileFlow(OpPassManager &pm, const CompileFlowOptions &options) {
  buildPartitionFlow(pm, options);
  buildLoweringFlow(pm, options);
}

void registerCompileFlow() {
  PassPipelineRegistration<CompileFlowOptions>(
      "partition-compile-flow",
      "What partition-compile runs: apply the plan, build the training "
      "step, partition it, lower it to rt and plan its memory",
      buildCompileFlow);
  // The flag's earlier name, kept so that existing command lines work.
  PassPipelineRegistration<CompileFlowOptions>(
      "partition-compile-pipeline",
      "The earlier name of --partition-compile-flow (the same passes)",
      buildCompileFlow);
}

} // namespace partition
