//===- Partition.cpp - --dist-partition: local shapes and collectives -----===//
//
// Makes the layouts --dist-propagate recorded real: every value takes its
// local type, and where an op consumes an operand in a layout other than the
// one it was produced in, the collectives that convert it are inserted:
//
//  - a partial sum consumed whole is all-reduced right after it is made
//    (Megatron's g operator), or, with sequence parallelism, reduce-
//    scattered along the sequence; a sum over the data axis alone (a
//    gradient) gets an all_reduce of its own labelled for
//    --dist-bucket-gradients, which groups them;
//  - a dimension split otherwise is all-gathered and sliced: every gather
//    before any slice, so that an axis can move between dimensions;
//  - ops whose local computation differs adapt themselves
//    (ShardingRuleOpInterface::partitionLocally: attention heads, row-
//    parallel bias, vocab-parallel embedding and cross-entropy);
//  - a mean over split factors (the loss) becomes each device's share of a
//    plain sum (scaled by local / global size).
//
// State keeps its local type; arguments and results of state (and the token
// inputs) get `dist.local_sharding`, which the runtime uses to initialise,
// feed, save and restore logical tensors. The layouts recorded by
// propagation are dropped.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/common/FunctionAttrEdits.h"
#include "passes/partition/Layout.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"

namespace partition {
#define GEN_PASS_DEF_PARTITIONPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

/// This device's block of `value` along `dim`, split over `axes` into
/// `shards` blocks (propagation checked that they divide it).
Value allSlice(OpBuilder &builder, FlatSymbolRefAttr mesh, Value value,
               ArrayRef<StringRef> axes, int64_t dim, int64_t shards) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= shards;
  SmallVector<StringRef> names(axes);
  return dist::AllSliceOp::create(builder, value.getLoc(), type.clone(shape),
                                  value, mesh, builder.getStrArrayAttr(names),
                                  builder.getI64IntegerAttr(dim));
}

class StepPartition {
public:
  StepPartition(func::FuncOp step, const PartitionMesh &mesh)
      : step(step), mesh(mesh) {}

  LogicalResult run();

  Layout layoutOf(Value value) const;
  void setLayout(Value value, const Layout &layout) { layouts[value] = layout; }
  Value shardIndex(ArrayRef<StringRef> axes);
  FlatSymbolRefAttr meshRef() const { return mesh.symbol; }
  const PartitionMesh &getMesh() const { return mesh; }

private:
  /// Gives `value` its local type for `layout`.
  void localize(Value value, const Layout &layout);
  /// The whole sum of partial `use`, as `use` consumes it.
  void completeSum(OpOperand &use);
  Value reduceNow(Value value);
  Value scatterSequenceNow(Value value);
  Value reduceForBucket(Value value);
  /// `value` resharded to `dims` before `user` (all_gather / all_slice).
  Value reshard(Value value, ArrayRef<Axes> dims, Operation *user);
  void partitionSlice(tensor::ExtractSliceOp slice);
  LogicalResult partitionOp(Operation *op);
  void annotateState();

  func::FuncOp step;
  const PartitionMesh &mesh;
  /// Layouts of the values this pass made; the others' are recorded.
  DenseMap<Value, Layout> layouts;
  /// Partial values already completed -> their sums (or sequence blocks).
  DenseMap<Value, Value> reduced, sequenceScattered, bucketed;
  /// The last bucket reduction after each op, so that the reductions of one
  /// op's results stay in the order they were needed.
  DenseMap<Operation *, Operation *> lastBucketReduction;
  /// Values resharded -> (layout, resharded value, for a backward op).
  DenseMap<Value, SmallVector<std::tuple<SmallVector<Axes>, Value, bool>>>
      reshardCache;
  llvm::StringMap<Value> shardIndices;
  unsigned tensorReductions = 0;
};

Layout StepPartition::layoutOf(Value value) const {
  auto found = layouts.find(value);
  if (found != layouts.end())
    return found->second;
  if (auto arg = dyn_cast<BlockArgument>(value))
    return recordedArgumentLayout(step, arg.getArgNumber());
  return recordedResultLayout(cast<OpResult>(value));
}

void StepPartition::localize(Value value, const Layout &layout) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, axes] : llvm::enumerate(layout.dims))
    shape[dim] /= mesh.shardsOf(axes);
  value.setType(type.clone(shape));
  layouts[value] = layout;
}

Value StepPartition::shardIndex(ArrayRef<StringRef> axes) {
  std::string key = llvm::join(axes, ",");
  Value &index = shardIndices[key];
  if (index)
    return index;
  OpBuilder builder = OpBuilder::atBlockBegin(&step.getBody().front());
  SmallVector<StringRef> names(axes);
  index = dist::AxisIndexOp::create(
      builder, step.getLoc(), RankedTensorType::get({}, builder.getI32Type()),
      mesh.symbol, builder.getStrArrayAttr(names));
  return index;
}

Value StepPartition::reduceNow(Value value) {
  Value &sum = reduced[value];
  if (sum)
    return sum;
  Layout layout = layoutOf(value);
  OpBuilder builder(step.getContext());
  builder.setInsertionPointAfterValue(value);
  Axes axes = mesh.inMeshOrder(layout.partial);
  SmallVector<StringRef> names(axes.begin(), axes.end());
  auto reduce = dist::AllReduceOp::create(
      builder, value.getLoc(), TypeRange{value.getType()}, ValueRange{value},
      mesh.symbol, builder.getStrArrayAttr(names),
      dist::ReduceKindAttr::get(step.getContext(), dist::ReduceKind::Sum));
  reduce->setAttr(dist::DistDialect::kLabelAttrName,
                  builder.getStringAttr("partial sum " +
                                        std::to_string(tensorReductions++) +
                                        " over " + describe(axes)));
  sum = reduce.getResult(0);
  Layout whole = layout;
  whole.partial.clear();
  layouts[sum] = whole;
  return sum;
}

Value StepPartition::scatterSequenceNow(Value value) {
  Value &scattered = sequenceScattered[value];
  if (scattered)
    return scattered;
  OpBuilder builder(step.getContext());
  builder.setInsertionPointAfterValue(value);
  auto type = cast<RankedTensorType>(value.getType());
  // Over the axes the sum is partial over: those of the part of the model
  // that made it (scattersSequence).
  Axes axes = layoutOf(value).partial;
  SmallVector<int64_t> shape(type.getShape());
  shape[kSequenceDim] /= mesh.shardsOf(axes);
  auto scatter = dist::ReduceScatterOp::create(
      builder, value.getLoc(), type.clone(shape), value, mesh.symbol,
      builder.getStrArrayAttr(ArrayRef<StringRef>(axes)),
      builder.getI64IntegerAttr(kSequenceDim),
      dist::ReduceKindAttr::get(step.getContext(), dist::ReduceKind::Sum));
  scatter->setAttr(dist::DistDialect::kLabelAttrName,
                   builder.getStringAttr("sequence scatter " +
                                         std::to_string(tensorReductions++)));
  scattered = scatter.getResult();
  Layout layout = layoutOf(value);
  layout.partial.clear();
  layout.dims[kSequenceDim] = axes;
  layouts[scattered] = layout;
  return scattered;
}

Value StepPartition::reduceForBucket(Value value) {
  Value &sum = bucketed[value];
  if (sum)
    return sum;
  OpBuilder builder(step.getContext());
  Operation *def = value.getDefiningOp();
  if (Operation *last = lastBucketReduction.lookup(def))
    builder.setInsertionPointAfter(last);
  else
    builder.setInsertionPointAfterValue(value);
  auto reduce = dist::AllReduceOp::create(
      builder, value.getLoc(), TypeRange{value.getType()}, ValueRange{value},
      mesh.symbol,
      builder.getStrArrayAttr(
          ArrayRef<StringRef>(mesh.inMeshOrder(layoutOf(value).partial))),
      dist::ReduceKindAttr::get(step.getContext(), dist::ReduceKind::Sum));
  reduce->setAttr(dist::DistDialect::kLabelAttrName,
                  builder.getStringAttr(kUnbucketedLabel));
  if (def)
    lastBucketReduction[def] = reduce;
  sum = reduce.getResult(0);
  Layout whole = layoutOf(value);
  whole.partial.clear();
  layouts[sum] = whole;
  return sum;
}

void StepPartition::completeSum(OpOperand &use) {
  Layout layout = layoutOf(use.get());
  if (scattersContext(mesh, layout, use))
    use.set(scatterSequenceNow(use.get()));
  else if (mesh.isDataSum(layout.partial))
    use.set(reduceForBucket(use.get()));
  else if (scattersSequence(mesh, layout, use))
    use.set(scatterSequenceNow(use.get()));
  else
    use.set(reduceNow(use.get()));
}

Value StepPartition::reshard(Value value, ArrayRef<Axes> dims,
                             Operation *user) {
  // The same value resharded the same way once (a gradient gathered for
  // both the input and the weight gradient).
  // Not from the forward pass into the backward: keeping a gathered
  // tensor alive until its gradient would undo what splitting it saves
  // (sequence parallelism keeps the split input and gathers it again).
  // An all_to_all is: it holds as many bytes as its input, which the
  // backward would otherwise keep alive to exchange it again (expert
  // parallelism's dispatched tokens and expert outputs, read by the
  // weight gradients and the combine's gradient).
  bool forBackward = isa<XfmrDialect>(user->getDialect()) &&
                     !isa<AutodiffOpInterface>(user);
  auto &cached = reshardCache[value];
  for (auto &[dimsDone, resharded, backward] : cached)
    if (dimsDone == dims &&
        (backward == forBackward ||
         isa_and_nonnull<dist::AllToAllOp>(resharded.getDefiningOp())) &&
        (!isa<OpResult>(resharded) ||
         resharded.getDefiningOp()->isBeforeInBlock(user)))
      return resharded;
  Value original = value;
  // Gathering and slicing commute with sums: a partial value stays partial.
  Layout from = layoutOf(value);
  OpBuilder builder(user);
  // Every gather before any slice: an axis may move from one dimension to
  // another, and a block must be whole along the axis before it is cut
  // along it elsewhere. Per dimension the common major axes stay.
  SmallVector<unsigned> common;
  for (unsigned dim = 0; dim < dims.size(); ++dim) {
    const Axes &have = from.dims[dim];
    const Axes &want = dims[dim];
    unsigned prefix = 0;
    while (prefix < have.size() && prefix < want.size() &&
           have[prefix] == want[prefix])
      ++prefix;
    common.push_back(prefix);
  }
  // One dimension losing exactly the axes another gains: an all_to_all
  // moves the split (a gather there and a slice here, at 1 / N of the
  // traffic): expert parallelism's dispatch and combine.
  SmallVector<unsigned> losing, gaining;
  for (unsigned dim = 0; dim < dims.size(); ++dim) {
    if (common[dim] < from.dims[dim].size())
      losing.push_back(dim);
    if (common[dim] < dims[dim].size())
      gaining.push_back(dim);
  }
  if (losing.size() == 1 && gaining.size() == 1 && losing[0] != gaining[0] &&
      ArrayRef<StringRef>(from.dims[losing[0]])
              .drop_front(common[losing[0]]) ==
          ArrayRef<StringRef>(dims[gaining[0]]).drop_front(common[gaining[0]])) {
    unsigned concat = losing[0], split = gaining[0];
    SmallVector<StringRef> moved(from.dims[concat].begin() + common[concat],
                                 from.dims[concat].end());
    int64_t shards = mesh.shardsOf(moved);
    auto type = cast<RankedTensorType>(value.getType());
    if (type.getDimSize(split) % shards == 0) {
      SmallVector<int64_t> shape(type.getShape());
      shape[split] /= shards;
      shape[concat] *= shards;
      auto move = dist::AllToAllOp::create(
          builder, user->getLoc(), type.clone(shape), value, mesh.symbol,
          builder.getStrArrayAttr(moved), builder.getI64IntegerAttr(split),
          builder.getI64IntegerAttr(concat));
      // Named by its reader in traces ("to xfmr.expert_linear over [dp]").
      move->setAttr(dist::DistDialect::kLabelAttrName,
                    builder.getStringAttr("to " +
                                          user->getName().getStringRef() +
                                          " over " + describe(moved)));
      value = move;
      for (unsigned dim = 0; dim < dims.size(); ++dim)
        from.dims[dim] = dims[dim];
      layouts[value] = from;
      reshardCache[original].push_back(
          {SmallVector<Axes>(dims), value, forBackward});
      return value;
    }
  }
  for (unsigned dim = 0; dim < dims.size(); ++dim) {
    const Axes &have = from.dims[dim];
    if (common[dim] == have.size())
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<StringRef> gathered(have.begin() + common[dim], have.end());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] *= mesh.shardsOf(gathered);
    value = dist::AllGatherOp::create(
        builder, user->getLoc(), type.clone(shape), value, mesh.symbol,
        builder.getStrArrayAttr(gathered), builder.getI64IntegerAttr(dim));
  }
  for (unsigned dim = 0; dim < dims.size(); ++dim) {
    const Axes &want = dims[dim];
    if (common[dim] == want.size())
      continue;
    SmallVector<StringRef> sliced(want.begin() + common[dim], want.end());
    value = allSlice(builder, mesh.symbol, value, sliced, dim,
                     mesh.shardsOf(sliced));
  }
  for (unsigned dim = 0; dim < dims.size(); ++dim)
    from.dims[dim] = dims[dim];
  layouts[value] = from;
  reshardCache[original].push_back(
      {SmallVector<Axes>(dims), value, forBackward});
  return value;
}

/// LocalPartition for one op: its factors' axes, as recorded.
class OpPartition : public LocalPartition {
public:
  OpPartition(StepPartition &pass, Operation *op, ArrayRef<Axes> factorAxes)
      : pass(pass), op(op), factorAxes(factorAxes) {}

  ArrayRef<StringRef> axes(int factor) const override {
    return factorAxes[factor];
  }
  int64_t shards(int factor) const override {
    return pass.getMesh().shardsOf(factorAxes[factor]);
  }
  Value shardIndex(OpBuilder &, int factor) override {
    return pass.shardIndex(factorAxes[factor]);
  }
  Value allReduce(OpBuilder &builder, Value value, int factor,
                  bool max) override {
    SmallVector<StringRef> axes(factorAxes[factor].begin(),
                                factorAxes[factor].end());
    auto reduce = dist::AllReduceOp::create(
        builder, value.getLoc(), TypeRange{value.getType()},
        ValueRange{value}, pass.meshRef(), builder.getStrArrayAttr(axes),
        dist::ReduceKindAttr::get(op->getContext(),
                                  max ? dist::ReduceKind::Max
                                      : dist::ReduceKind::Sum));
    reduce->setAttr(dist::DistDialect::kLabelAttrName,
                    builder.getStringAttr(
                        (op->getName().getStringRef() + " " +
                         (max ? "max" : "sum") + " over " + describe(axes))
                            .str()));
    return reduce.getResult(0);
  }
  Value sliceBlock(OpBuilder &builder, Value value, int64_t dim,
                   int factor) override {
    return allSlice(builder, pass.meshRef(), value, factorAxes[factor], dim,
                    shards(factor));
  }
  Value ringShift(OpBuilder &builder, Value value, int factor,
                  StringRef label) override {
    SmallVector<StringRef> axes(factorAxes[factor].begin(),
                                factorAxes[factor].end());
    auto shift = dist::RingShiftOp::create(builder, value.getLoc(),
                                           value.getType(), value,
                                           pass.meshRef(),
                                           builder.getStrArrayAttr(axes));
    shift->setAttr(dist::DistDialect::kLabelAttrName,
                   builder.getStringAttr(label));
    return shift.getResult();
  }
  void replaceOp(ValueRange values) override {
    replacement.assign(values.begin(), values.end());
    for (auto [old, value] : llvm::zip(op->getResults(), values)) {
      pass.setLayout(value, pass.layoutOf(old));
      old.replaceAllUsesWith(value);
    }
    op->erase();
    op = nullptr;
  }

  /// The op's results after partitioning (replacements, if any).
  SmallVector<Value> results(Operation *original) const {
    if (!replacement.empty())
      return replacement;
    return SmallVector<Value>(original->getResults());
  }

private:
  StepPartition &pass;
  Operation *op;
  ArrayRef<Axes> factorAxes;
  SmallVector<Value> replacement;
};

void StepPartition::partitionSlice(tensor::ExtractSliceOp slice) {
  OpOperand &source = slice->getOpOperand(0);
  if (!layoutOf(source.get()).partial.empty())
    completeSum(source);
  Layout layout = layoutOf(slice.getSource());
  if (!layout.isSharded())
    return;
  SmallVector<int64_t> offsets(slice.getStaticOffsets());
  SmallVector<int64_t> sizes(slice.getStaticSizes());
  llvm::SmallBitVector dropped = slice.getDroppedDims();
  for (auto [dim, axes] : llvm::enumerate(layout.dims)) {
    int64_t shards = mesh.shardsOf(axes);
    offsets[dim] /= shards;
    sizes[dim] /= shards;
  }
  slice.setStaticOffsets(offsets);
  slice.setStaticSizes(sizes);
  // The result type is recomputed from the new sizes.
  auto sourceType = cast<RankedTensorType>(slice.getSource().getType());
  SmallVector<int64_t> shape;
  for (auto [dim, size] : llvm::enumerate(sizes))
    if (!dropped.test(dim))
      shape.push_back(size);
  slice.getResult().setType(sourceType.clone(shape));
}

LogicalResult StepPartition::partitionOp(Operation *op) {
  SmallVector<Layout> consumed;
  for (OpOperand &use : op->getOpOperands())
    consumed.push_back(recordedOperandLayout(use));
  SmallVector<Layout> produced;
  for (OpResult result : op->getResults())
    produced.push_back(recordedResultLayout(result));
  op->removeAttr(kOperandShardingsAttrName);
  op->removeAttr(dist::DistDialect::kShardingAttrName);

  // Sums first, then the dimensions.
  for (OpOperand &use : op->getOpOperands())
    if (consumed[use.getOperandNumber()].partial.empty() &&
        !layoutOf(use.get()).partial.empty())
      completeSum(use);
  for (OpOperand &use : op->getOpOperands()) {
    const Layout &want = consumed[use.getOperandNumber()];
    if (layoutOf(use.get()).dims != want.dims)
      use.set(reshard(use.get(), want.dims, op));
  }
  for (auto [result, layout] : llvm::zip(op->getResults(), produced))
    localize(result, layout);

  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruled)
    return success();
  // Every factor's axes, from the dimensions that map to it.
  ShardingRule rule = ruled.getShardingRule();
  SmallVector<Axes> factorAxes(rule.getFactors().size());
  auto collect = [&](ArrayRef<int> factors, const Layout &layout) {
    for (auto [dim, factor] : llvm::enumerate(factors))
      if (factor != ShardingRule::kNoFactor && !layout.dims[dim].empty())
        factorAxes[factor] = layout.dims[dim];
  };
  for (auto [index, layout] : llvm::enumerate(consumed))
    collect(rule.getOperand(index), layout);
  for (auto [index, layout] : llvm::enumerate(produced))
    collect(rule.getResult(index), layout);

  // A mean over split factors: scale the value the op is linear in by
  // local / global size, making the local value a term of a plain sum.
  int64_t meanShards = 1;
  for (int factor : rule.getMeanFactors())
    meanShards *= mesh.shardsOf(factorAxes[factor]);
  std::optional<ShardingRule::ScaledValue> scaled = rule.getMeanScaled();
  FloatAttr meanFactor =
      OpBuilder(op).getF32FloatAttr(1.0 / double(meanShards));
  if (meanShards > 1 && !scaled->isResult) {
    OpBuilder builder(op);
    Value operand = op->getOperand(scaled->index);
    auto scale = ScaleOp::create(builder, op->getLoc(), operand.getType(),
                                 operand, meanFactor);
    layouts[scale.getResult()] = layoutOf(operand);
    op->setOperand(scaled->index, scale.getResult());
  }

  Operation *original = op;
  OpPartition partition(*this, op, factorAxes);
  if (failed(ruled.partitionLocally(partition)))
    return failure();
  SmallVector<Value> results = partition.results(original);

  if (meanShards > 1 && scaled->isResult) {
    Value result = results[scaled->index];
    OpBuilder builder(step.getContext());
    builder.setInsertionPointAfterValue(result);
    auto scale = ScaleOp::create(builder, result.getLoc(), result.getType(),
                                 result, meanFactor);
    result.replaceAllUsesExcept(scale.getResult(), scale);
    layouts[scale.getResult()] = layoutOf(result);
  }
  return success();
}

void StepPartition::annotateState() {
  MLIRContext *context = step.getContext();
  StringRef meshName = mesh.symbol.getValue();
  // State, and the token inputs: the runtime feeds each rank its block.
  FunctionAttrEdits argAttrs(step);
  for (BlockArgument arg : step.getArguments()) {
    Layout layout = layoutOf(arg);
    bool input = static_cast<bool>(
        step.getArgAttr(arg.getArgNumber(), XfmrDialect::kInputAttrName));
    if (layout.isSharded() &&
        (input || !stateOf(step, arg.getArgNumber()).first.empty()))
      argAttrs.set(arg.getArgNumber(), dist::DistDialect::kLocalShardingAttrName,
                   layout.toAttr(context, meshName));
  }
  argAttrs.apply();
  FunctionAttrEdits resultAttrs(step, FunctionAttrEdits::Of::Results);
  Operation *terminator = step.getBody().front().getTerminator();
  for (OpOperand &operand : terminator->getOpOperands()) {
    Layout layout = layoutOf(operand.get());
    if (layout.isSharded())
      resultAttrs.set(operand.getOperandNumber(),
                      dist::DistDialect::kLocalShardingAttrName,
                      layout.toAttr(context, meshName));
  }
  resultAttrs.apply();
}

LogicalResult StepPartition::run() {
  Block &body = step.getBody().front();
  FunctionAttrEdits argAttrs(step);
  for (BlockArgument arg : body.getArguments()) {
    localize(arg, recordedArgumentLayout(step, arg.getArgNumber()));
    argAttrs.remove(arg.getArgNumber(), dist::DistDialect::kShardingAttrName);
  }
  argAttrs.apply();
  SmallVector<Operation *> ops;
  for (Operation &op : body)
    ops.push_back(&op);
  for (Operation *op : ops) {
    if (auto slice = dyn_cast<tensor::ExtractSliceOp>(op)) {
      layouts[slice.getResult()] = recordedResultLayout(slice->getResult(0));
      partitionSlice(slice);
      slice->removeAttr(kOperandShardingsAttrName);
      slice->removeAttr(dist::DistDialect::kShardingAttrName);
      continue;
    }
    // (partitionOp may erase the op.)
    if (failed(partitionOp(op)))
      return failure();
  }
  annotateState();
  step.setType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                 body.getTerminator()->getOperandTypes()));
  return success();
}

struct PartitionPass : impl::PartitionPassBase<PartitionPass> {
  using PartitionPassBase::PartitionPassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PartitionMesh> mesh = lookupPartitionMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    for (func::FuncOp step : stepsToPartition(module))
      if (failed(StepPartition(step, *mesh).run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
