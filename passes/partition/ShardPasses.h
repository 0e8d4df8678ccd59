//===- ShardPasses.h - the partitioner's phases as one step -----*- C++ -*-===//
//
// --dist-shard (data and tensor parallelism: the passes partition-compile
// runs) and --dist-data-parallel (the batch only) run the four phases of the
// partitioner in order; each phase is also a pass of its own.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PARTITION_SHARDPASSES_H
#define PARTITION_PASSES_PARTITION_SHARDPASSES_H

#include "mlir/Pass/PassManager.h"

#include <cstdint>

namespace partition {

struct ShardPassesOptions {
  /// Place weights over the tensor axis (Megatron-LM's layout).
  bool tensorParallel = true;
  /// The largest data-parallel gradient bucket, in bytes.
  int64_t bucketBytes = 25 * 1024 * 1024;
  /// Run --dist-bucket-gradients last (off: the caller runs it later, after
  /// --dist-pipeline, so that each stage buckets its own gradients).
  bool bucketGradients = true;
};

/// Adds seed -> propagate -> partition -> bucket to `pm` (a module pass
/// manager).
void buildShardPasses(mlir::OpPassManager &pm,
                      const ShardPassesOptions &options);

/// Registers --dist-shard and --dist-data-parallel.
void registerShardPasses();

} // namespace partition

#endif // PARTITION_PASSES_PARTITION_SHARDPASSES_H
