//===- ShardPasses.cpp - the partitioner's phases as one step -------------===//

#include "passes/partition/ShardPasses.h"

#include "passes/Passes.h"

#include "mlir/Pass/PassOptions.h"
#include "mlir/Pass/PassRegistry.h"

using namespace mlir;

namespace partition {

void buildShardPasses(OpPassManager &pm, const ShardPassesOptions &options) {
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

struct ShardPassesCommandLine
    : public PassPipelineOptions<ShardPassesCommandLine> {
  Option<int64_t> bucketBytes{
      *this, "bucket-bytes",
      llvm::cl::desc("Largest data-parallel gradient bucket, in bytes"),
      llvm::cl::init(25 * 1024 * 1024)};
};

void addPhases(OpPassManager &pm, const ShardPassesCommandLine &commandLine,
               bool tensorParallel) {
  ShardPassesOptions options;
  options.tensorParallel = tensorParallel;
  options.bucketBytes = commandLine.bucketBytes;
  buildShardPasses(pm, options);
}

} // namespace

void registerShardPasses() {
  PassPipelineRegistration<ShardPassesCommandLine>(
      "dist-shard",
      "SPMD partitioning over the plan's mesh, data and tensor parallelism: "
      "--dist-seed-layouts, --dist-propagate, --dist-partition, "
      "--dist-bucket-gradients",
      [](OpPassManager &pm, const ShardPassesCommandLine &options) {
        addPhases(pm, options, /*tensorParallel=*/true);
      });
  PassPipelineRegistration<ShardPassesCommandLine>(
      "dist-data-parallel",
      "The batch split over the plan's data axis, weights whole: "
      "--dist-shard without tensor parallelism",
      [](OpPassManager &pm, const ShardPassesCommandLine &options) {
        addPhases(pm, options, /*tensorParallel=*/false);
      });
}

} // namespace partition
