//===- ShardPipeline.cpp - the partitioner's phases as one step -----------===//

#include "passes/partition/ShardPipeline.h"

#include "passes/Passes.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace partition {

void buildShardPipeline(OpPassManager &pm,
                        const ShardPipelineOptions &options) {
  pm.addPass(createSeedLayoutsPass());
  PropagatePassOptions propagate;
  propagate.tensorParallel = options.tensorParallel;
  pm.addPass(createPropagatePass(propagate));
  pm.addPass(createPartitionPass());
  if (!options.bucketGradients)
    return;
  BucketGradientsPassOptions buckets;
  buckets.bucketBytes = options.bucketBytes;
  pm.addPass(createBucketGradientsPass(buckets));
}

namespace {

struct ShardPipelineCommandLine
    : public PassPipelineOptions<ShardPipelineCommandLine> {
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Largest data-parallel gradient bucket, in bytes"),
      llvm::cl::init(25 * 1024 * 1024)};
};

void addPhases(OpPassManager &pm, const ShardPipelineCommandLine &commandLine,
               bool tensorParallel) {
  ShardPipelineOptions options;
  options.tensorParallel = tensorParallel;
  options.bucketBytes = commandLine.bucketBytes;
  buildShardPipeline(pm, options);
}

} // namespace

void registerShardPipelines() {
  PassPipelineRegistration<ShardPipelineCommandLine>(
      "dist-shard",
      "SPMD partitioning over the plan's mesh, data and tensor parallelism: "
      "--dist-seed-layouts, --dist-propagate, --dist-partition, "
      "--dist-bucket-gradients",
      [](OpPassManager &pm, const ShardPipelineCommandLine &options) {
        addPhases(pm, options, /*tensorParallel=*/true);
      });
  PassPipelineRegistration<ShardPipelineCommandLine>(
      "dist-data-parallel",
      "The batch split over the plan's data axis, weights whole: "
      "--dist-shard without tensor parallelism",
      [](OpPassManager &pm, const ShardPipelineCommandLine &options) {
        addPhases(pm, options, /*tensorParallel=*/false);
      });
}

} // namespace partition
