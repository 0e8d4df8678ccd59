//===- Layout.h - what the partitioning phases share ------------*- C++ -*-===//
//
// The partitioner runs in four passes (Passes.td): --dist-seed-layouts,
// --dist-propagate, --dist-partition and --dist-bucket-gradients. They talk
// through the IR only: a value's layout is a `#dist.sharding` (on function
// arguments, and per result on ops), and the layout an op consumes each
// operand in is `dist.operand_shardings`. This header holds the vocabulary
// they share: the Layout of a value, the mesh with the roles of its axes,
// and the few decisions that two phases must take identically.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PARTITION_LAYOUT_H
#define PARTITION_PASSES_PARTITION_LAYOUT_H

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/ShardingRule.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/IR/BuiltinOps.h"
#include "mlir/Support/LLVM.h"

#include <optional>
#include <string>

namespace partition {

using Axes = xfmr::LocalPartition::Axes;

/// How a value is laid out over the mesh: the axes each dimension is split
/// over (major first), and the axes over which each device holds one term of
/// a pending sum.
struct Layout {
  llvm::SmallVector<Axes> dims;
  Axes partial;

  /// Whole on every device.
  static Layout replicated(mlir::Type type);
  static Layout fromAttr(dist::ShardingAttr sharding, mlir::Type type);
  dist::ShardingAttr toAttr(mlir::MLIRContext *context,
                            llvm::StringRef mesh) const;

  bool isSharded() const;
  bool isReplicated() const { return !isSharded() && partial.empty(); }
  bool operator==(const Layout &other) const {
    return dims == other.dims && partial == other.partial;
  }
  bool operator!=(const Layout &other) const { return !(*this == other); }
};

/// The mesh the plan partitions over and the role of each of its axes, read
/// from the module's plan; no pass names an axis.
struct PartitionMesh {
  mlir::FlatSymbolRefAttr symbol;
  dist::MeshShape shape;
  /// The axis the batch is split over (empty: none).
  llvm::StringRef dataAxis;
  /// The axis the sequence is split over (context parallelism; empty:
  /// none). Parameters are replicated over it, like over the data axis.
  llvm::StringRef contextAxis;
  /// context_parallel.method "ring": attention crosses the context axis by
  /// passing key-value blocks around (dialects/Xfmr/ContextRing.h) rather
  /// than by all-gathering them.
  bool contextRing = false;
  /// The axis the experts of MoE layers are split over (expert
  /// parallelism, role Expert; empty: none): the minor part of the
  /// data-parallel ranks, of the plan's moe.expert_parallel ranks. The
  /// batch is split over it as over the data axis.
  llvm::StringRef expertAxis;
  /// The axes Megatron-style tensor parallelism splits weights over, major
  /// first: the plan's tp, or, with fewer key-value heads than tp, the axis
  /// of the key-value heads and the one their replicas span (ApplyPlan.cpp).
  Axes tensorAxes;
  /// Megatron-LM's sequence parallelism over the tensor axis.
  bool sequenceParallel = false;
  /// With a tensor-parallel degree per part of the model (#dist.plan's
  /// layer_tp, embedding_tp): the degree of each layer, and of the ops
  /// outside the layers (embedding, final norm, LM head); empty / 0: every
  /// part spans tensorAxes.
  llvm::SmallVector<int64_t> layerDegrees;
  int64_t embeddingDegree = 0;

  /// The tensor axes of the part of the model layer `layer` is (none: the
  /// embedding and LM head): the longest major prefix of tensorAxes whose
  /// sizes multiply to the part's degree (lookupPartitionMesh checked that
  /// there is one). A smaller part is replicated over the other axes.
  Axes tensorAxesOf(std::optional<int64_t> layer) const;
  /// Whether `axes` are exactly some part's tensor axes (a partial sum over
  /// them may be scattered along the sequence).
  bool isPartAxes(llvm::ArrayRef<llvm::StringRef> axes) const;

  int64_t sizeOf(llvm::StringRef axis) const;
  int64_t shardsOf(llvm::ArrayRef<llvm::StringRef> axes) const;
  /// Axes in mesh order (a collective's group is a set).
  Axes inMeshOrder(llvm::ArrayRef<llvm::StringRef> axes) const;
  /// The axes the batch is split over, in mesh order: the data axis and
  /// the expert axis, those of more than one rank.
  Axes batchAxes() const {
    Axes axes;
    for (llvm::StringRef axis : {dataAxis, expertAxis})
      if (!axis.empty() && sizeOf(axis) > 1)
        axes.push_back(axis);
    return axes;
  }
  bool hasData() const { return !batchAxes().empty(); }
  bool hasContext() const {
    return !contextAxis.empty() && sizeOf(contextAxis) > 1;
  }
  /// Whether a partial sum over `axes` is a gradient summed over the ranks
  /// that hold the same parameters: the data axis, the context axis or
  /// both. Such sums wait for a gradient bucket (--dist-bucket-gradients).
  bool isDataSum(llvm::ArrayRef<llvm::StringRef> axes) const;
  bool hasTensor() const {
    return shardsOf(tensorAxes) > 1;
  }
};

/// The plan's mesh and axis roles; an error (on the module) when the plan or
/// its mesh is missing.
mlir::FailureOr<PartitionMesh> lookupPartitionMesh(mlir::ModuleOp module);

/// Whether `op` is a one-operand op whose result is laid out as its
/// operand (its rule maps both to the same factors): a cast.
bool isLayoutPreserving(mlir::Operation *op);

/// `[dp, tp]`, for messages and labels.
std::string describe(llvm::ArrayRef<llvm::StringRef> axes);

/// The role and name of a state argument ("param", "moment1", "moment2"),
/// or {"", ""}.
std::pair<llvm::StringRef, llvm::StringRef> stateOf(mlir::func::FuncOp step,
                                                    unsigned index);

/// The functions the partitioner works on: the training step first (the
/// evaluation step reuses its state layouts), then the evaluation step.
llvm::SmallVector<mlir::func::FuncOp> stepsToPartition(mlir::ModuleOp module);

/// The layout an op records for each of its results (`dist.sharding`), and
/// for each of its operands (`dist.operand_shardings`); replicated where
/// nothing is recorded.
Layout recordedResultLayout(mlir::OpResult result);
Layout recordedOperandLayout(mlir::OpOperand &operand);
Layout recordedArgumentLayout(mlir::func::FuncOp step, unsigned index);

/// The attribute holding the layouts an op consumes its operands in.
inline constexpr llvm::StringLiteral kOperandShardingsAttrName =
    dist::DistDialect::kOperandShardingsAttrName;

/// With sequence parallelism: whether `use` takes its value, a partial sum
/// over the tensor axes of a part of the model laid out as `layout`, as
/// sequence blocks over those axes (a reduce_scatter along the sequence)
/// rather than whole (an all_reduce). Propagation and partitioning must
/// agree on it, so both ask here.
bool scattersSequence(const PartitionMesh &mesh, const Layout &layout,
                      mlir::OpOperand &use);

/// With context parallelism: whether `use` takes its value, a partial sum
/// over the context axis alone (the key and value gradients of attention,
/// whose local queries saw every key), as sequence blocks over it (a
/// reduce_scatter along the sequence, Llama 3's dK / dV) rather than whole.
bool scattersContext(const PartitionMesh &mesh, const Layout &layout,
                     mlir::OpOperand &use);

/// The parameter argument `value` is, read through layout-preserving ops (a
/// cast, with mixed precision) and all-gathers (ZeRO-3's, or a gather the
/// partitioner made for a weight gradient: the same tensor, reassembled);
/// null for any other value.
mlir::BlockArgument parameterArgument(mlir::Value value,
                                      mlir::func::FuncOp step);

/// The layer of the parameter `value` is (as parameterArgument): its
/// `xfmr.layer`, -1 for a parameter outside the layers, nullopt for a
/// value that is no parameter.
std::optional<int64_t> parameterLayer(mlir::Value value,
                                      mlir::func::FuncOp step);

/// The layer of state argument `value` (its `xfmr.layer`), read through
/// a layout-preserving cast; nullopt for state outside the layers and for
/// other values.
std::optional<int64_t> stateLayer(mlir::func::FuncOp step, mlir::Value value);

/// The label of the all_reduce --dist-partition gives each sum over the data
/// axis alone (a gradient, the loss); --dist-bucket-gradients groups them.
inline constexpr llvm::StringLiteral kUnbucketedLabel =
    "data-parallel sum (to bucket)";

/// The dimension sequence parallelism splits: [batch, sequence, features].
inline constexpr unsigned kSequenceDim = 1;

} // namespace partition

#endif // PARTITION_PASSES_PARTITION_LAYOUT_H
