//===- DataParallel.cpp - --dist-data-parallel: split the batch over dp ---===//
//
// SPMD partitioning of the training and evaluation steps over the mesh's dp
// axis, driven by the ops' sharding rules (dialects/Xfmr/ShardingRule.h):
//
//  1. The token inputs are split on their batch dimension: dp rank r holds
//     rows [r B/dp, (r+1) B/dp) of the global batch.
//  2. Layouts propagate forward in program order. A factor is sharded when an
//     operand dimension it maps to is; result dimensions of sharded factors
//     shrink to their local size, and a result that sums over a sharded
//     factor (a weight gradient sums over the batch) becomes partial: each
//     rank holds one term of a sum over the dp group.
//  3. A mean over sharded factors (the loss) is made a partial sum by scaling
//     by local / global size, so every partial value is a plain sum.
//  4. Partial values flow through linear ops (the micro-batch accumulation of
//     gradients, the tied-embedding sum); any other use (AdamW) or a return
//     needs the full sum: those values are all-reduced in buckets of at most
//     `bucket-bytes`, each issued right after its last member is computed,
//     in backward order, so that communication can overlap the rest of the
//     backward pass (PyTorch DDP's buckets).
//
// Micro-batches: the step slices its tokens into micro-batches; on a rank
// each slice takes the same share of its local rows. The step's loss and
// gradients are means over all rows with equal weights, so which global rows
// share a micro-batch does not change them (DDP with gradient accumulation
// does the same).
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "mlir/IR/SymbolTable.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/MapVector.h"

namespace partition {
#define GEN_PASS_DEF_DATAPARALLELPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

constexpr StringLiteral kMeshName = "mesh";
constexpr StringLiteral kAxis = "dp";

/// How a value is laid out over the dp group.
struct Layout {
  /// Per dimension: split over dp.
  SmallVector<bool> sharded;
  /// Each rank holds one term of a sum over dp.
  bool partial = false;

  bool isSharded() const { return llvm::is_contained(sharded, true); }
  bool isReplicated() const { return !isSharded() && !partial; }
};

int64_t byteSize(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         static_cast<int64_t>(
             std::max<unsigned>(tensor.getElementTypeBitWidth() / 8, 1));
}

class StepPartitioner {
public:
  StepPartitioner(func::FuncOp step, int64_t shards, int64_t bucketBytes)
      : step(step), shards(shards), bucketBytes(bucketBytes) {}

  LogicalResult run();

private:
  Layout layoutOf(Value value) const {
    auto found = layouts.find(value);
    if (found != layouts.end())
      return found->second;
    Layout replicated;
    if (auto tensor = dyn_cast<RankedTensorType>(value.getType()))
      replicated.sharded.assign(tensor.getRank(), false);
    return replicated;
  }
  /// Gives `value` its local type for `layout`; fails if a sharded dimension
  /// does not divide.
  LogicalResult localize(Value value, const Layout &layout, Operation *where,
                         StringRef what);
  LogicalResult partitionArguments();
  LogicalResult partitionSlice(tensor::ExtractSliceOp slice);
  LogicalResult partitionOp(Operation *op);
  /// Records that `use` needs the complete sum of its (partial) value.
  void needReduced(OpOperand &use) { pending[use.get()].push_back(&use); }
  LogicalResult insertAllReduces();

  func::FuncOp step;
  int64_t shards;
  int64_t bucketBytes;
  DenseMap<Value, Layout> layouts;
  /// Partial values -> the uses that need their complete sum, in order of
  /// first need.
  llvm::MapVector<Value, SmallVector<OpOperand *>> pending;
  DenseMap<Operation *, unsigned> positions;
};

LogicalResult StepPartitioner::localize(Value value, const Layout &layout,
                                        Operation *where, StringRef what) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, sharded] : llvm::enumerate(layout.sharded)) {
    if (!sharded)
      continue;
    if (shape[dim] % shards != 0)
      return where->emitError()
             << what << " has " << shape[dim] << " elements in dimension "
             << dim << ", which do not split evenly over " << kAxis << " = "
             << shards;
    shape[dim] /= shards;
  }
  value.setType(type.clone(shape));
  layouts[value] = layout;
  return success();
}

LogicalResult StepPartitioner::partitionArguments() {
  for (BlockArgument arg : step.getArguments()) {
    auto input = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   XfmrDialect::kInputAttrName);
    if (!input || (input.getValue() != "tokens" &&
                   input.getValue() != "targets"))
      continue;
    Layout rows;
    rows.sharded.assign(cast<RankedTensorType>(arg.getType()).getRank(),
                        false);
    rows.sharded[0] = true;
    if (failed(localize(arg, rows, step,
                        "the " + input.getValue().str() + " batch")))
      return failure();
  }
  return success();
}

LogicalResult StepPartitioner::partitionSlice(tensor::ExtractSliceOp slice) {
  Layout source = layoutOf(slice.getSource());
  if (source.partial)
    needReduced(slice->getOpOperand(0));
  if (!source.isSharded())
    return success();
  if (!slice.hasUnitStride() || !slice.getOffsets().empty() ||
      !slice.getSizes().empty())
    return slice.emitOpError()
           << "slices a batch-sharded tensor with dynamic offsets or sizes or "
              "non-unit strides; only static unit-stride slices are supported";
  SmallVector<int64_t> offsets(slice.getStaticOffsets());
  SmallVector<int64_t> sizes(slice.getStaticSizes());
  llvm::SmallBitVector dropped = slice.getDroppedDims();
  Layout result;
  for (auto [dim, sharded] : llvm::enumerate(source.sharded)) {
    if (sharded) {
      if (dropped.test(dim) || offsets[dim] % shards || sizes[dim] % shards)
        return slice.emitOpError()
               << "takes rows [" << offsets[dim] << ", "
               << offsets[dim] + sizes[dim] << ") of a batch split over "
               << kAxis << " = " << shards << "; each micro-batch must hold a "
               << "multiple of " << shards << " rows";
      offsets[dim] /= shards;
      sizes[dim] /= shards;
    }
    if (!dropped.test(dim))
      result.sharded.push_back(sharded);
  }
  slice.setStaticOffsets(offsets);
  slice.setStaticSizes(sizes);
  return localize(slice.getResult(), result, slice, "the slice");
}

LogicalResult StepPartitioner::partitionOp(Operation *op) {
  SmallVector<Layout> operandLayouts;
  bool anySharded = false, anyPartial = false;
  for (Value operand : op->getOperands()) {
    operandLayouts.push_back(layoutOf(operand));
    anySharded |= operandLayouts.back().isSharded();
    anyPartial |= operandLayouts.back().partial;
  }
  if (!anySharded && !anyPartial)
    return success(); // Replicated: the same on every rank.

  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruled) {
    // Ops without a rule (arith on scalars, ...) run replicated: complete
    // their partial operands; a sharded operand cannot be handled.
    if (anySharded)
      return op->emitOpError()
             << "has an operand split over " << kAxis
             << " but no sharding rule (ShardingRuleOpInterface)";
    for (OpOperand &use : op->getOpOperands())
      if (operandLayouts[use.getOperandNumber()].partial)
        needReduced(use);
    return success();
  }
  ShardingRule rule = ruled.getShardingRule();

  // Partial operands pass through linear ops when all are partial;
  // anything else needs their complete sums.
  bool partialThrough = anyPartial && rule.linear &&
                        llvm::all_of(operandLayouts, [](const Layout &layout) {
                          return layout.partial;
                        });
  if (anyPartial && !partialThrough)
    for (OpOperand &use : op->getOpOperands())
      if (operandLayouts[use.getOperandNumber()].partial) {
        needReduced(use);
        operandLayouts[use.getOperandNumber()].partial = false;
      }

  // Which factors are sharded; every dimension of a sharded factor must be.
  SmallVector<bool> shardedFactor(rule.getFactors().size(), false);
  for (auto [index, layout] : llvm::enumerate(operandLayouts))
    for (auto [dim, sharded] : llvm::enumerate(layout.sharded)) {
      if (!sharded)
        continue;
      int factor = rule.getOperand(index)[dim];
      if (factor == ShardingRule::kNoFactor ||
          rule.getFactors()[factor].opaque)
        return op->emitOpError()
               << "cannot split dimension " << dim << " of operand #" << index
               << " over " << kAxis
               << ": the op combines values along it (an opaque factor of "
                  "its sharding rule)";
      shardedFactor[factor] = true;
    }
  for (auto [index, layout] : llvm::enumerate(operandLayouts))
    for (auto [dim, factor] : llvm::enumerate(rule.getOperand(index)))
      if (factor != ShardingRule::kNoFactor && shardedFactor[factor] &&
          !layout.sharded[dim])
        return op->emitOpError()
               << "has operand #" << index << " whole in dimension " << dim
               << " while another operand is split over " << kAxis
               << " along the same factor";

  // A mean over sharded factors: scale the value the op is linear in by
  // local / global size, making the local result a term of a plain sum.
  bool meanSharded = llvm::any_of(rule.getMeanFactors(), [&](int factor) {
    return shardedFactor[factor];
  });
  if (meanSharded) {
    ShardingRule::ScaledValue scaled = *rule.getMeanScaled();
    OpBuilder builder(op);
    FloatAttr factor = builder.getF32FloatAttr(1.0 / double(shards));
    if (scaled.isResult) {
      builder.setInsertionPointAfter(op);
      Value result = op->getResult(scaled.index);
      auto scale = ScaleOp::create(builder, op->getLoc(), result.getType(),
                                   result, factor);
      result.replaceAllUsesExcept(scale.getResult(), scale);
      positions[scale] = positions[op];
      layouts[scale.getResult()] = Layout{{}, true};
    } else {
      Value operand = op->getOperand(scaled.index);
      auto scale = ScaleOp::create(builder, op->getLoc(), operand.getType(),
                                   operand, factor);
      op->setOperand(scaled.index, scale.getResult());
      positions[scale] = positions[op];
      layouts[scale.getResult()] = operandLayouts[scaled.index];
    }
  }

  for (OpResult result : op->getResults()) {
    Layout layout;
    layout.partial = partialThrough;
    for (int factor : rule.getResult(result.getResultNumber())) {
      layout.sharded.push_back(factor != ShardingRule::kNoFactor &&
                               shardedFactor[factor]);
    }
    for (auto [factor, sharded] : llvm::enumerate(shardedFactor))
      if (sharded && rule.isSummedOver(factor, result.getResultNumber()))
        layout.partial = true;
    if (meanSharded && rule.getMeanScaled()->isResult)
      layout.partial = false; // The scale after the op is the partial sum.
    if (failed(localize(result, layout, op,
                        "result #" + std::to_string(result.getResultNumber()))))
      return failure();
  }
  return success();
}

LogicalResult StepPartitioner::insertAllReduces() {
  Operation *terminator = step.getBody().front().getTerminator();
  // The loss is reduced on its own: it is needed for reporting only.
  SmallVector<Value> lossValues;
  for (OpOperand &operand : terminator->getOpOperands())
    if (auto output = step.getResultAttrOfType<StringAttr>(
            operand.getOperandNumber(), XfmrDialect::kOutputAttrName);
        output && output.getValue() == "loss")
      lossValues.push_back(operand.get());

  struct Bucket {
    SmallVector<Value> values;
    int64_t bytes = 0;
    unsigned lastDef = 0;
    unsigned firstUse = ~0u;
    bool isLoss = false;
  };
  auto definedAt = [&](Value value) -> unsigned {
    if (auto arg = dyn_cast<BlockArgument>(value))
      return 0;
    return positions.lookup(value.getDefiningOp());
  };
  auto firstUseOf = [&](Value value) {
    unsigned first = ~0u;
    for (OpOperand *use : pending[value])
      first = std::min(first, positions.lookup(use->getOwner()));
    return first;
  };
  SmallVector<Value> order;
  for (auto &entry : pending)
    order.push_back(entry.first);
  llvm::stable_sort(order, [&](Value a, Value b) {
    return definedAt(a) < definedAt(b);
  });

  SmallVector<Bucket> buckets;
  for (Value value : order) {
    bool isLoss = llvm::is_contained(lossValues, value);
    unsigned def = definedAt(value), use = firstUseOf(value);
    int64_t bytes = byteSize(value.getType());
    Bucket *open = buckets.empty() ? nullptr : &buckets.back();
    // A bucket closes when full, and before a member it cannot wait for:
    // one defined after another member is first needed.
    if (isLoss || !open || open->isLoss || open->bytes >= bucketBytes ||
        open->bytes + bytes > bucketBytes || def > open->firstUse) {
      buckets.emplace_back();
      open = &buckets.back();
      open->isLoss = isLoss;
    }
    open->values.push_back(value);
    open->bytes += bytes;
    open->lastDef = std::max(open->lastDef, def);
    open->firstUse = std::min(open->firstUse, use);
  }

  Block &body = step.getBody().front();
  auto mesh = FlatSymbolRefAttr::get(step.getContext(), kMeshName);
  unsigned gradientBuckets = 0;
  for (Bucket &bucket : buckets) {
    OpBuilder builder(step.getContext());
    Value last = *llvm::max_element(bucket.values, [&](Value a, Value b) {
      return definedAt(a) < definedAt(b);
    });
    if (auto arg = dyn_cast<BlockArgument>(last))
      builder.setInsertionPointToStart(&body);
    else
      builder.setInsertionPointAfter(last.getDefiningOp());
    SmallVector<Type> types;
    for (Value value : bucket.values)
      types.push_back(value.getType());
    auto reduce = dist::AllReduceOp::create(
        builder, last.getLoc(), types, bucket.values, mesh,
        builder.getStrArrayAttr({kAxis}),
        dist::ReduceKindAttr::get(step.getContext(), dist::ReduceKind::Sum));
    std::string label = bucket.isLoss
                            ? std::string("loss")
                            : "gradient bucket " +
                                  std::to_string(gradientBuckets++);
    reduce->setAttr(dist::DistDialect::kLabelAttrName,
                    builder.getStringAttr(label));
    for (auto [value, reduced] :
         llvm::zip(bucket.values, reduce.getResults()))
      for (OpOperand *use : pending[value])
        use->set(reduced);
  }
  return success();
}

LogicalResult StepPartitioner::run() {
  Block &body = step.getBody().front();
  for (auto [index, op] : llvm::enumerate(body))
    positions[&op] = index;
  if (failed(partitionArguments()))
    return failure();
  SmallVector<Operation *> ops;
  for (Operation &op : body.without_terminator())
    ops.push_back(&op);
  for (Operation *op : ops) {
    LogicalResult result =
        isa<tensor::ExtractSliceOp>(op)
            ? partitionSlice(cast<tensor::ExtractSliceOp>(op))
            : partitionOp(op);
    if (failed(result))
      return failure();
  }

  // Returned values are logical tensors: complete partial sums, and refuse
  // to return a shard.
  Operation *terminator = body.getTerminator();
  for (OpOperand &operand : terminator->getOpOperands()) {
    Layout layout = layoutOf(operand.get());
    if (layout.isSharded())
      return step.emitError()
             << "result #" << operand.getOperandNumber() << " is split over "
             << kAxis << "; returning it whole needs an all_gather, which "
             << "the data-parallel pass does not insert";
    if (layout.partial)
      needReduced(operand);
  }
  positions[terminator] = body.getOperations().size();
  if (failed(insertAllReduces()))
    return failure();

  step.setType(FunctionType::get(step.getContext(),
                                 body.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  return success();
}

struct DataParallelPass : impl::DataParallelPassBase<DataParallelPass> {
  using DataParallelPassBase::DataParallelPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    auto mesh = FlatSymbolRefAttr::get(&getContext(), kMeshName);
    if (!SymbolTable::lookupSymbolIn(module, kMeshName)) {
      module.emitError() << "data parallelism needs the plan's mesh @"
                         << kMeshName << " (run --dist-apply-plan first)";
      return signalPassFailure();
    }
    FailureOr<dist::MeshShape> shape = dist::lookupMeshShape(
        module, mesh, nullptr, [&] { return module.emitError(); });
    if (failed(shape))
      return signalPassFailure();
    int64_t axis = shape->find(kAxis);
    if (axis < 0) {
      module.emitError() << "the mesh @" << kMeshName << " has no '" << kAxis
                         << "' axis";
      return signalPassFailure();
    }
    int64_t shards = shape->sizes[axis];
    if (bucketBytes <= 0) {
      module.emitError() << "bucket-bytes must be positive, got "
                         << static_cast<int64_t>(bucketBytes);
      return signalPassFailure();
    }
    if (shards == 1)
      return; // Nothing to split.

    SmallVector<func::FuncOp> steps;
    for (auto function : module.getOps<func::FuncOp>())
      if (function->hasAttr(XfmrDialect::kTrainStepAttrName) ||
          function->hasAttr(XfmrDialect::kEvalStepAttrName))
        steps.push_back(function);
    if (steps.empty()) {
      module.emitError("no training step to partition (run --xfmr-train-step "
                       "first)");
      return signalPassFailure();
    }
    for (func::FuncOp step : steps)
      if (failed(StepPartitioner(step, shards, bucketBytes).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
