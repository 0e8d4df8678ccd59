//===- Shard.cpp - --dist-shard: data and tensor parallelism --------------===//
//
// The SPMD partitioner (passes/Spmd.h) over the plan's whole mesh: the batch
// split over dp, the weights over tp in the Megatron-LM layout.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Spmd.h"

#include "dialects/Dist/DistDialect.h"


namespace partition {
#define GEN_PASS_DEF_SHARDPASS
#include "passes/Passes.h.inc"
} // namespace partition

namespace partition {
namespace {

struct ShardPass : impl::ShardPassBase<ShardPass> {
  using ShardPassBase::ShardPassBase;

  void runOnOperation() override {
    SpmdOptions options;
    options.dataParallel = true;
    options.tensorParallel = true;
    options.bucketBytes = bucketBytes;
    // The plan's tensor_parallel.sequence_parallel (--dist-apply-plan).
    if (dist::PlanAttr plan = dist::getPlan(getOperation()))
      options.sequenceParallel = plan.getSequenceParallel();
    if (mlir::failed(partitionSteps(getOperation(), options)))
      signalPassFailure();
  }
};

} // namespace
} // namespace partition
