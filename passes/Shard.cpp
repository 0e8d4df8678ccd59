//===- Shard.cpp - --dist-shard: data and tensor parallelism --------------===//
//
// The SPMD partitioner (passes/Spmd.h) over the plan's whole mesh: the batch
// split over dp, the weights over tp in the Megatron-LM layout.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/Spmd.h"

#include "dialects/Dist/DistDialect.h"

#include "mlir/IR/BuiltinAttributes.h"

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
    if (auto plan = getOperation()->getAttrOfType<mlir::DictionaryAttr>(
            "dist.plan"))
      if (auto tensorParallel =
              plan.getAs<mlir::DictionaryAttr>("tensor_parallel"))
        if (auto sequence =
                tensorParallel.getAs<mlir::BoolAttr>("sequence_parallel"))
          options.sequenceParallel = sequence.getValue();
    if (mlir::failed(partitionSteps(getOperation(), options)))
      signalPassFailure();
  }
};

} // namespace
} // namespace partition
