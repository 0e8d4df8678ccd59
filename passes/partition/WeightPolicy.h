//===- WeightPolicy.h - Megatron-LM's placement of weights ------*- C++ -*-===//
//
// The tensor-parallel policy of --dist-propagate: where a parameter is read
// for the first time and nothing has placed it yet, decide how it is split
// over the tensor axis, as Megatron-LM does, from the op's sharding rule
// alone (no op classes). Only ops whose rule names a weight factor
// (ShardingRule::getWeightSplitFactor: matrix products, lookups) have a
// policy; the parameters of others (norm gains) follow the op's factors.
//
//  - if a factor of the parameter is already split over tensor axes by
//    another operand (a linear whose input features come split), or shared
//    with state already placed (a bias beside a placed weight), the
//    parameter follows the op's factors: row-parallel;
//  - otherwise the op's preferred weight factor (ShardingRule::
//    getWeightSplitFactor: a linear's output features, an embedding's
//    vocabulary) is split over the tensor axes: column-parallel,
//    vocab-parallel; over their major part only when a reader of the
//    result keeps fewer blocks whole (2 key-value heads at tp = 4: the
//    key / value projections split over tp, replicated over tp_kv_rep).
//
// The tensor axes are those of the part of the model the weights belong to
// (PartitionMesh::tensorAxesOf, from their xfmr.layer): with a degree per
// part, a tp-2 layer on a tp-4 mesh splits over the major axis only.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PARTITION_WEIGHTPOLICY_H
#define PARTITION_PASSES_PARTITION_WEIGHTPOLICY_H

#include "passes/partition/Layout.h"

namespace partition {

/// What the policy needs from the propagation that runs it.
class WeightPlacement {
public:
  virtual ~WeightPlacement() = default;
  virtual Layout layoutOf(mlir::Value value) const = 0;
  /// The state name of `value` (or of the state a layout-preserving op
  /// reads) when it is not placed yet.
  virtual std::optional<llvm::StringRef>
  undecidedState(mlir::Value value) const = 0;
  virtual bool isPlacedState(mlir::Value value) const = 0;
  /// Places state `name` (and its moments).
  virtual mlir::LogicalResult decideState(llvm::StringRef name,
                                          llvm::ArrayRef<Axes> dims) = 0;
  /// The layer of the state `value` is (xfmr.layer), for its part's
  /// tensor axes (PartitionMesh::tensorAxesOf); nullopt outside the layers.
  virtual std::optional<int64_t> layerOf(mlir::Value value) const = 0;
};

/// Places the unplaced parameters `op` reads (see above).
mlir::LogicalResult placeWeightsFor(mlir::Operation *op,
                                    const PartitionMesh &mesh,
                                    WeightPlacement &placement);

} // namespace partition

#endif // PARTITION_PASSES_PARTITION_WEIGHTPOLICY_H
