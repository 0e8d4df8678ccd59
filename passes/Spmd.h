//===- Spmd.h - SPMD partitioning of training steps -------------*- C++ -*-===//
//
// The partitioner behind --dist-data-parallel and --dist-shard: it turns the
// single-device @train_step and @eval_step into the program every device of
// the plan's mesh runs on its local blocks, driven by the ops' sharding rules
// (dialects/Xfmr/ShardingRule.h). See Spmd.cpp for the algorithm.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_SPMD_H
#define PARTITION_PASSES_SPMD_H

#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <cstdint>

namespace partition {

struct SpmdOptions {
  /// Split the batch over the mesh's dp axis.
  bool dataParallel = true;
  /// Split the weights over the mesh's tp axis in the Megatron-LM layout:
  /// column-parallel linears (and the vocabulary of embeddings and of the
  /// LM head) where the input is whole, row-parallel where it is split.
  bool tensorParallel = false;
  /// Megatron-LM's sequence parallelism (with tensorParallel): partial sums
  /// over tp that feed the residual stream's norms and adds are
  /// reduce-scattered along the sequence instead of all-reduced, so those
  /// regions run on sequence blocks; a column-parallel linear all-gathers
  /// its input first.
  bool sequenceParallel = false;
  /// The largest data-parallel gradient bucket, in bytes.
  int64_t bucketBytes = 25 * 1024 * 1024;
};

/// Partitions every training and evaluation step of `module` over the
/// module's `dist.mesh @mesh`; emits diagnostics and fails on a step that
/// cannot be partitioned.
mlir::LogicalResult partitionSteps(mlir::ModuleOp module,
                                   const SpmdOptions &options);

} // namespace partition

#endif // PARTITION_PASSES_SPMD_H
