//===- Spmd.cpp - SPMD partitioning of training steps ---------------------===//
//
// Turns @train_step and @eval_step into the program each device of the mesh
// runs, from the ops' sharding rules alone (dialects/Xfmr/ShardingRule.h):
//
//  1. Seeds. With data parallelism, tokens and targets are split on their
//     batch dimension over dp: dp rank r holds rows [r B/dp, (r+1) B/dp).
//     With tensor parallelism, each weight's layout is decided at its first
//     use, Megatron-LM style: a linear whose input is whole is column-
//     parallel (its output features split over tp, bias too), one whose
//     input features are split is row-parallel (input features split); an
//     embedding table is split by vocabulary. A parameter's AdamW moments
//     follow it, and the evaluation step reuses the training step's choice.
//  2. Propagation, in program order. A factor is split like the operand
//     dimensions that map to it; operands that disagree are resharded
//     (all_gather / all_slice); result dimensions of split factors shrink
//     to their blocks, and a result that sums over a split factor is
//     partial: each device holds one term of a sum over those axes.
//  3. Ops whose local computation differs adapt themselves
//     (ShardingRuleOpInterface::partitionLocally): attention divides its
//     head counts, a row-parallel linear adds bias / shards, a vocabulary-
//     split embedding and cross-entropy become their vocab-parallel forms.
//  4. A mean over split factors (the loss) becomes each device's share of a
//     sum (scaled by local / global size), so every partial is a plain sum.
//  5. Partial sums flow through linear ops (add, scale: the micro-batch
//     accumulation of gradients, the tied-embedding sum); any other use
//     needs the whole sum. Sums over tensor-parallel axes are all-reduced
//     at once (Megatron's g operator); sums over dp alone, the gradients,
//     are all-reduced in buckets of at most `bucketBytes`, in backward
//     order, each right after its last gradient is computed so that
//     communication can overlap the rest of the backward pass (PyTorch
//     DDP's buckets); the loss gets its own.
//  6. State (parameters and moments) keeps its local type; arguments and
//     results get `dist.local_sharding`, which the runtime uses to
//     initialise, save and restore logical tensors.
//
// Micro-batches: the step slices its tokens into micro-batches; on a rank
// each slice takes the same share of its local rows. Loss and gradients are
// means over all rows with equal weights, so which global rows share a
// micro-batch does not change them (DDP with gradient accumulation does the
// same).
//
//===----------------------------------------------------------------------===//

#include "passes/Spmd.h"

#include "dialects/Dist/DistDialect.h"
#include "dialects/Dist/DistOps.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/DenseMap.h"
#include "llvm/ADT/SetVector.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringMap.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

constexpr StringLiteral kMeshName = "mesh";
constexpr StringLiteral kDataAxis = "dp";
constexpr StringLiteral kTensorAxis = "tp";

using Axes = LocalPartition::Axes;

/// How a value is laid out over the mesh.
struct Layout {
  /// Per dimension: the axes it is split over, major first.
  SmallVector<Axes> dims;
  /// The axes over which each device holds one term of a sum.
  Axes partial;

  static Layout replicated(Type type) {
    Layout layout;
    if (auto tensor = dyn_cast<RankedTensorType>(type))
      layout.dims.resize(tensor.getRank());
    return layout;
  }
  bool isSharded() const {
    return llvm::any_of(dims, [](const Axes &axes) { return !axes.empty(); });
  }
};

std::string describe(ArrayRef<StringRef> axes) {
  return "[" + llvm::join(axes, ", ") + "]";
}

int64_t byteSize(Type type) {
  auto tensor = cast<RankedTensorType>(type);
  return tensor.getNumElements() *
         static_cast<int64_t>(
             std::max<unsigned>(tensor.getElementTypeBitWidth() / 8, 1));
}

/// The role and name of a state argument ("param", "moment1", "moment2"),
/// or {"", ""}.
std::pair<StringRef, StringRef> stateOf(func::FuncOp step, unsigned index) {
  for (auto [attr, role] :
       {std::pair<StringRef, StringRef>{XfmrDialect::kParamAttrName, "param"},
        {XfmrDialect::kMoment1AttrName, "moment1"},
        {XfmrDialect::kMoment2AttrName, "moment2"}})
    if (auto name = step.getArgAttrOfType<StringAttr>(index, attr))
      return {role, name.getValue()};
  return {"", ""};
}

class StepPartitioner {
public:
  StepPartitioner(func::FuncOp step, const dist::MeshShape &mesh,
                  const SpmdOptions &options,
                  llvm::StringMap<SmallVector<Axes>> &stateLayouts)
      : step(step), mesh(mesh), options(options), stateLayouts(stateLayouts) {}

  LogicalResult run();

private:
  friend class OpPartition;

  int64_t shardsOf(ArrayRef<StringRef> axes) const {
    int64_t shards = 1;
    for (StringRef axis : axes)
      shards *= mesh.sizes[mesh.find(axis)];
    return shards;
  }
  int64_t axisSize(StringRef axis) const {
    int64_t index = mesh.find(axis);
    return index < 0 ? 1 : mesh.sizes[index];
  }
  Layout layoutOf(Value value) const {
    auto found = layouts.find(value);
    return found != layouts.end() ? found->second
                                  : Layout::replicated(value.getType());
  }
  /// Gives `value` its local type for `layout`.
  LogicalResult localize(Value value, const Layout &layout, Operation *where,
                         const Twine &what);

  // Seeds.
  LogicalResult partitionInputs();
  LogicalResult applyKnownStateLayouts();
  /// Seeds the layouts of arguments annotated with dist.sharding (global
  /// types) and drops the annotations (the types become local).
  LogicalResult applyAnnotations();
  /// Sets the layout of state `name` (and of its moments) everywhere.
  LogicalResult decideState(StringRef name, ArrayRef<Axes> dims);
  /// Whether `value` is a parameter or moment argument of the step.
  bool isStateArgument(Value value) const {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && arg.getOwner()->getParentOp() == step &&
           !stateOf(step, arg.getArgNumber()).first.empty();
  }
  /// The state name of `value` when it is an undecided state argument.
  std::optional<StringRef> undecidedState(Value value) const;
  LogicalResult decideTensorParallel(Operation *op);

  // Propagation.
  LogicalResult partitionSlice(tensor::ExtractSliceOp slice);
  LogicalResult partitionOp(Operation *op);
  /// `value` resharded to `dims` before `user` (all_gather / all_slice).
  FailureOr<Value> reshard(Value value, ArrayRef<Axes> dims, Operation *user);
  /// The whole sum of partial `value`, for `use`: now for tensor-parallel
  /// axes, in a bucket later for dp alone.
  void needReduced(OpOperand &use);
  Value reduceNow(Value value);
  /// With sequence parallelism: whether `use` may take its value (partial
  /// over tp) as sequence blocks, and the reduce-scatter that makes them.
  bool canScatterSequence(OpOperand &use) const;
  Value scatterSequenceNow(Value value);
  /// The layout a gradient must have: that of the parameter whose AdamW
  /// update it feeds (through sums and scalings), if any.
  std::optional<SmallVector<Axes>> requiredDims(Value value) const;
  Value shardIndex(ArrayRef<StringRef> axes);
  LogicalResult insertGradientBuckets();
  LogicalResult annotateState();

  func::FuncOp step;
  const dist::MeshShape &mesh;
  const SpmdOptions &options;
  llvm::StringMap<SmallVector<Axes>> &stateLayouts;
  DenseMap<Value, Layout> layouts;
  /// Partial values already reduced at once -> their sums.
  DenseMap<Value, Value> reduced;
  /// Values resharded -> (layout, resharded value, for a backward op).
  DenseMap<Value, SmallVector<std::tuple<SmallVector<Axes>, Value, bool>>>
      reshardCache;
  /// Partial values reduce-scattered along the sequence -> their blocks.
  DenseMap<Value, Value> sequenceScattered;
  /// Values partial over dp alone, to reduce in buckets, in order of need.
  llvm::SetVector<Value> deferred;
  /// The users that take a value as a partial sum (linear ops).
  DenseMap<Value, llvm::SmallPtrSet<Operation *, 2>> partialUsers;
  llvm::StringMap<Value> shardIndices;
  unsigned tensorReductions = 0;
};

FlatSymbolRefAttr meshRef(MLIRContext *context) {
  return FlatSymbolRefAttr::get(context, kMeshName);
}

/// This device's block of `value` along `dim`, split over `axes` into
/// `shards` blocks (the caller checked that they divide it).
Value allSlice(OpBuilder &builder, Value value, ArrayRef<StringRef> axes,
               int64_t dim, int64_t shards) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[dim] /= shards;
  SmallVector<StringRef> names(axes);
  return dist::AllSliceOp::create(builder, value.getLoc(), type.clone(shape),
                                  value, meshRef(builder.getContext()),
                                  builder.getStrArrayAttr(names),
                                  builder.getI64IntegerAttr(dim));
}

LogicalResult StepPartitioner::localize(Value value, const Layout &layout,
                                        Operation *where, const Twine &what) {
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  for (auto [dim, axes] : llvm::enumerate(layout.dims)) {
    int64_t shards = shardsOf(axes);
    if (shards == 1)
      continue;
    if (shape[dim] % shards != 0)
      return where->emitError()
             << what << " has " << shape[dim] << " elements in dimension "
             << dim << ", which do not split evenly over " << describe(axes)
             << " (" << shards << " blocks)";
    shape[dim] /= shards;
  }
  value.setType(type.clone(shape));
  layouts[value] = layout;
  return success();
}

LogicalResult StepPartitioner::partitionInputs() {
  if (!options.dataParallel || axisSize(kDataAxis) == 1)
    return success();
  for (BlockArgument arg : step.getArguments()) {
    auto input = step.getArgAttrOfType<StringAttr>(arg.getArgNumber(),
                                                   XfmrDialect::kInputAttrName);
    if (!input ||
        (input.getValue() != "tokens" && input.getValue() != "targets"))
      continue;
    // An annotated input is laid out as annotated (applyAnnotations).
    if (step.getArgAttr(arg.getArgNumber(),
                        dist::DistDialect::kShardingAttrName))
      continue;
    Layout rows = Layout::replicated(arg.getType());
    rows.dims[0] = {kDataAxis};
    if (failed(localize(arg, rows, step,
                        "the " + input.getValue().str() + " batch")))
      return failure();
  }
  return success();
}

LogicalResult StepPartitioner::decideState(StringRef name,
                                           ArrayRef<Axes> decided) {
  // A copy: `decided` may point into stateLayouts itself.
  SmallVector<Axes> dims(decided.begin(), decided.end());
  stateLayouts[name] = dims;
  for (BlockArgument arg : step.getArguments()) {
    if (stateOf(step, arg.getArgNumber()).second != name ||
        layouts.count(arg))
      continue;
    Layout layout;
    layout.dims.assign(dims.begin(), dims.end());
    if (failed(localize(arg, layout, step, "state '" + name + "'")))
      return failure();
  }
  return success();
}

LogicalResult StepPartitioner::applyKnownStateLayouts() {
  for (BlockArgument arg : step.getArguments()) {
    StringRef name = stateOf(step, arg.getArgNumber()).second;
    auto known = stateLayouts.find(name);
    if (!name.empty() && known != stateLayouts.end() &&
        failed(decideState(name, known->second)))
      return failure();
  }
  return success();
}

LogicalResult StepPartitioner::applyAnnotations() {
  for (BlockArgument arg : step.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto sharding = step.getArgAttrOfType<dist::ShardingAttr>(
        index, dist::DistDialect::kShardingAttrName);
    if (!sharding)
      continue;
    if (sharding.getMesh().getValue() != kMeshName)
      return step.emitError()
             << "argument #" << index << " is annotated on @"
             << sharding.getMesh().getValue() << "; the plan's mesh is @"
             << kMeshName;
    if (!sharding.getPartialAxes().empty())
      return step.emitError() << "argument #" << index
                              << " is annotated as a partial sum; an input "
                                 "must be whole or split";
    SmallVector<Axes> dims;
    for (unsigned dim = 0, e = cast<RankedTensorType>(arg.getType()).getRank();
         dim < e; ++dim) {
      SmallVector<StringRef> axes = sharding.getDimAxes(dim);
      dims.emplace_back(axes.begin(), axes.end());
    }
    step.removeArgAttr(index, dist::DistDialect::kShardingAttrName);
    StringRef name = stateOf(step, index).second;
    if (name.empty()) {
      Layout layout;
      layout.dims = dims;
      if (failed(localize(arg, layout, step, "argument #" + Twine(index))))
        return failure();
      continue;
    }
    auto known = stateLayouts.find(name);
    if (known != stateLayouts.end()) {
      if (known->second != dims)
        return step.emitError() << "argument #" << index << " ('" << name
                                << "') is annotated unlike in the training "
                                   "step";
      continue; // Applied with the training step's layouts.
    }
    if (failed(decideState(name, dims)))
      return failure();
  }
  return success();
}

std::optional<StringRef> StepPartitioner::undecidedState(Value value) const {
  // A mixed-precision step reads each parameter through a cast at every use
  // (--xfmr-mixed-precision): the layout decided is the parameter's.
  if (auto cast = value.getDefiningOp<CastOp>())
    value = cast.getInput();
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner()->getParentOp() != step)
    return std::nullopt;
  StringRef name = stateOf(step, arg.getArgNumber()).second;
  if (name.empty() || stateLayouts.count(name))
    return std::nullopt;
  return name;
}

/// Fails when splitting `linear`'s output features over `shards` would split
/// attention heads (the query, key or value projection of an attention
/// whose head count the tensor-parallel degree does not divide).
LogicalResult checkHeadsSplit(LinearOp linear, int64_t shards) {
  for (OpOperand &use : linear.getResult().getUses()) {
    auto attention = dyn_cast<AttentionOp>(use.getOwner());
    if (!attention)
      continue;
    bool query = use.getOperandNumber() == 0;
    int64_t heads =
        query ? attention.getNumHeads() : attention.getNumKvHeads();
    if (heads % shards != 0)
      return attention.emitOpError()
             << "has " << heads << (query ? " query" : " key-value")
             << " heads, which tp = " << shards
             << " does not divide; choose a tp that divides the heads";
  }
  return success();
}

LogicalResult StepPartitioner::decideTensorParallel(Operation *op) {
  int64_t tp = axisSize(kTensorAxis);
  if (!options.tensorParallel || tp == 1)
    return success();
  // A cast of an undecided parameter comes right before the op that reads
  // it, after every other operand of that op: decide for that op now, so
  // that the cast already produces the chosen blocks.
  if (auto cast = dyn_cast<CastOp>(op)) {
    if (!undecidedState(cast.getResult()))
      return success();
    for (Operation *user = cast->getNextNode(); user;
         user = user->getNextNode())
      if (llvm::is_contained(user->getOperands(), cast.getResult()))
        return decideTensorParallel(user);
    return success();
  }
  if (auto embedding = dyn_cast<EmbeddingOp>(op)) {
    std::optional<StringRef> table = undecidedState(embedding.getTable());
    if (!table)
      return success();
    int64_t vocab = embedding.getTable().getType().getDimSize(0);
    if (vocab % tp != 0)
      return embedding.emitOpError()
             << "cannot split the vocabulary of " << vocab << " rows of '"
             << *table << "' over tp = " << tp
             << " (vocabulary padding is not supported)";
    return decideState(*table, {{kTensorAxis}, {}});
  }
  auto linear = dyn_cast<LinearOp>(op);
  if (!linear)
    return success();
  std::optional<StringRef> weight = undecidedState(linear.getWeight());
  std::optional<StringRef> bias =
      linear.getBias() ? undecidedState(linear.getBias()) : std::nullopt;
  Layout input = layoutOf(linear.getInput());
  bool rowParallel = llvm::is_contained(input.dims.back(), kTensorAxis);
  if (rowParallel) {
    if (weight && failed(decideState(*weight, {{}, {kTensorAxis}})))
      return failure();
    if (bias && failed(decideState(*bias, {{}})))
      return failure();
    return success();
  }
  if (!weight)
    return success();
  int64_t outFeatures = linear.getWeight().getType().getDimSize(0);
  if (outFeatures % tp != 0)
    return linear.emitOpError()
           << "cannot split the " << outFeatures << " output features of '"
           << *weight << "' over tp = " << tp
           << " (padding is not supported); choose a tp that divides them";
  if (failed(checkHeadsSplit(linear, tp)))
    return failure();
  if (failed(decideState(*weight, {{kTensorAxis}, {}})))
    return failure();
  if (bias && failed(decideState(*bias, {{kTensorAxis}})))
    return failure();
  return success();
}

LogicalResult StepPartitioner::partitionSlice(tensor::ExtractSliceOp slice) {
  Layout source = layoutOf(slice.getSource());
  if (!source.partial.empty())
    needReduced(slice->getOpOperand(0));
  if (!source.isSharded())
    return success();
  if (!slice.hasUnitStride() || !slice.getOffsets().empty() ||
      !slice.getSizes().empty())
    return slice.emitOpError()
           << "slices a split tensor with dynamic offsets or sizes or "
              "non-unit strides; only static unit-stride slices are supported";
  SmallVector<int64_t> offsets(slice.getStaticOffsets());
  SmallVector<int64_t> sizes(slice.getStaticSizes());
  llvm::SmallBitVector dropped = slice.getDroppedDims();
  Layout result;
  for (auto [dim, axes] : llvm::enumerate(source.dims)) {
    if (!axes.empty()) {
      // Only rows split over dp may be sliced locally (micro-batches).
      int64_t shards = shardsOf(axes);
      if (axes != Axes{kDataAxis})
        return slice.emitOpError()
               << "slices dimension " << dim << ", which is split over "
               << describe(axes) << "; only the batch rows (split over "
               << kDataAxis << ") may be sliced";
      if (dropped.test(dim) || offsets[dim] % shards || sizes[dim] % shards)
        return slice.emitOpError()
               << "takes rows [" << offsets[dim] << ", "
               << offsets[dim] + sizes[dim] << ") of a batch split over "
               << kDataAxis << " = " << shards
               << "; each micro-batch must hold a multiple of " << shards
               << " rows";
      offsets[dim] /= shards;
      sizes[dim] /= shards;
    }
    if (!dropped.test(dim))
      result.dims.push_back(axes);
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
  layouts[slice.getResult()] = result;
  return success();
}

Value StepPartitioner::shardIndex(ArrayRef<StringRef> axes) {
  std::string key = llvm::join(axes, ",");
  Value &index = shardIndices[key];
  if (index)
    return index;
  OpBuilder builder = OpBuilder::atBlockBegin(&step.getBody().front());
  SmallVector<StringRef> names(axes);
  index = dist::AxisIndexOp::create(
      builder, step.getLoc(), RankedTensorType::get({}, builder.getI32Type()),
      meshRef(step.getContext()), builder.getStrArrayAttr(names));
  return index;
}

Value StepPartitioner::reduceNow(Value value) {
  Value &sum = reduced[value];
  if (sum)
    return sum;
  Layout layout = layoutOf(value);
  OpBuilder builder(step.getContext());
  if (auto arg = dyn_cast<BlockArgument>(value))
    builder.setInsertionPointToStart(&step.getBody().front());
  else
    builder.setInsertionPointAfter(value.getDefiningOp());
  // The group is a set; the runtime wants its axes in mesh order.
  SmallVector<StringRef> axes(layout.partial.begin(), layout.partial.end());
  llvm::sort(axes, [&](StringRef a, StringRef b) {
    return mesh.find(a) < mesh.find(b);
  });
  auto reduce = dist::AllReduceOp::create(
      builder, value.getLoc(), TypeRange{value.getType()}, ValueRange{value},
      meshRef(step.getContext()), builder.getStrArrayAttr(axes),
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

bool StepPartitioner::canScatterSequence(OpOperand &use) const {
  constexpr unsigned kSequence = 1;
  Layout layout = layoutOf(use.get());
  auto type = cast<RankedTensorType>(use.get().getType());
  auto ruled = dyn_cast<ShardingRuleOpInterface>(use.getOwner());
  if (!options.sequenceParallel || layout.partial != Axes{kTensorAxis} ||
      type.getRank() != 3 || !layout.dims[kSequence].empty() || !ruled ||
      type.getDimSize(kSequence) % axisSize(kTensorAxis) != 0)
    return false;
  ShardingRule rule = ruled.getShardingRule();
  int factor = rule.getOperand(use.getOperandNumber())[kSequence];
  return factor != ShardingRule::kNoFactor &&
         (!rule.getFactors()[factor].opaque ||
          rule.getFactors()[factor].partitionedByOp);
}

Value StepPartitioner::scatterSequenceNow(Value value) {
  constexpr unsigned kSequence = 1;
  Value &scattered = sequenceScattered[value];
  if (scattered)
    return scattered;
  OpBuilder builder(step.getContext());
  builder.setInsertionPointAfterValue(value);
  auto type = cast<RankedTensorType>(value.getType());
  SmallVector<int64_t> shape(type.getShape());
  shape[kSequence] /= axisSize(kTensorAxis);
  auto scatter = dist::ReduceScatterOp::create(
      builder, value.getLoc(), type.clone(shape), value,
      meshRef(step.getContext()), builder.getStrArrayAttr({kTensorAxis}),
      builder.getI64IntegerAttr(kSequence),
      dist::ReduceKindAttr::get(step.getContext(), dist::ReduceKind::Sum));
  scatter->setAttr(dist::DistDialect::kLabelAttrName,
                   builder.getStringAttr(
                       "sequence scatter " +
                       std::to_string(tensorReductions++)));
  scattered = scatter.getResult();
  Layout layout = layoutOf(value);
  layout.partial.clear();
  layout.dims[kSequence] = {kTensorAxis};
  layouts[scattered] = layout;
  return scattered;
}

void StepPartitioner::needReduced(OpOperand &use) {
  Layout layout = layoutOf(use.get());
  if (layout.partial == Axes{kDataAxis}) {
    deferred.insert(use.get());
    return;
  }
  if (canScatterSequence(use)) {
    use.set(scatterSequenceNow(use.get()));
    return;
  }
  use.set(reduceNow(use.get()));
}

std::optional<SmallVector<Axes>>
StepPartitioner::requiredDims(Value value) const {
  for (OpOperand &use : value.getUses()) {
    Operation *user = use.getOwner();
    if (auto adamw = dyn_cast<AdamWOp>(user);
        adamw && use.getOperandNumber() == 1)
      return layoutOf(adamw.getParam()).dims;
    if (isa<AddOp, ScaleOp, CastOp>(user))
      if (auto dims = requiredDims(user->getResult(0)))
        return dims;
  }
  return std::nullopt;
}

FailureOr<Value> StepPartitioner::reshard(Value value, ArrayRef<Axes> dims,
                                          Operation *user) {
  // The same value resharded the same way once (a gradient gathered for
  // both the input and the weight gradient).
  // Not from the forward pass into the backward: keeping a gathered
  // tensor alive until its gradient would undo what splitting it saves
  // (sequence parallelism keeps the split input and gathers it again).
  bool forBackward = isa<XfmrDialect>(user->getDialect()) &&
                     !isa<AutodiffOpInterface>(user);
  auto &cached = reshardCache[value];
  for (auto &[dimsDone, resharded, backward] : cached)
    if (dimsDone == dims && backward == forBackward &&
        (!isa<OpResult>(resharded) ||
         resharded.getDefiningOp()->isBeforeInBlock(user)))
      return resharded;
  Value original = value;
  // Gathering and slicing commute with sums: a partial value stays partial.
  Layout from = layoutOf(value);
  OpBuilder builder(user);
  MLIRContext *context = step.getContext();
  // Every gather before any slice: an axis may move from one dimension to
  // another, and a block must be whole along the axis before it is cut
  // along it elsewhere. Per dimension the common major axes stay.
  auto commonPrefix = [&](unsigned dim) {
    const Axes &have = from.dims[dim];
    const Axes &want = dims[dim];
    unsigned common = 0;
    while (common < have.size() && common < want.size() &&
           have[common] == want[common])
      ++common;
    return common;
  };
  SmallVector<unsigned> common;
  for (unsigned dim = 0; dim < dims.size(); ++dim)
    common.push_back(commonPrefix(dim));
  for (unsigned dim = 0; dim < dims.size(); ++dim) {
    const Axes &have = from.dims[dim];
    if (common[dim] == have.size())
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<StringRef> gathered(have.begin() + common[dim], have.end());
    SmallVector<int64_t> shape(type.getShape());
    shape[dim] *= shardsOf(gathered);
    value = dist::AllGatherOp::create(
        builder, user->getLoc(), type.clone(shape), value, meshRef(context),
        builder.getStrArrayAttr(gathered), builder.getI64IntegerAttr(dim));
  }
  for (unsigned dim = 0; dim < dims.size(); ++dim) {
    const Axes &want = dims[dim];
    if (common[dim] == want.size())
      continue;
    auto type = cast<RankedTensorType>(value.getType());
    SmallVector<StringRef> sliced(want.begin() + common[dim], want.end());
    int64_t shards = shardsOf(sliced);
    if (type.getDimSize(dim) % shards != 0)
      return user->emitOpError()
             << "needs operand dimension " << dim << " of size "
             << type.getDimSize(dim) << " split over " << describe(sliced)
             << " (" << shards << " blocks), which does not divide it";
    value = allSlice(builder, value, sliced, dim, shards);
  }
  for (unsigned dim = 0; dim < dims.size(); ++dim)
    from.dims[dim] = dims[dim];
  layouts[value] = from;
  reshardCache[original].push_back(
      {SmallVector<Axes>(dims), value, forBackward});
  return value;
}

/// LocalPartition for one op: factor axes decided by the pass.
class OpPartition : public LocalPartition {
public:
  OpPartition(StepPartitioner &pass, Operation *op,
              ArrayRef<Axes> factorAxes)
      : pass(pass), op(op), factorAxes(factorAxes) {}

  ArrayRef<StringRef> axes(int factor) const override {
    return factorAxes[factor];
  }
  int64_t shards(int factor) const override {
    return pass.shardsOf(factorAxes[factor]);
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
        ValueRange{value}, meshRef(op->getContext()),
        builder.getStrArrayAttr(axes),
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
    return allSlice(builder, value, factorAxes[factor], dim, shards(factor));
  }
  void replaceOp(ValueRange values) override {
    replacement.assign(values.begin(), values.end());
    for (auto [old, value] : llvm::zip(op->getResults(), values)) {
      pass.layouts[value] = pass.layoutOf(old);
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
  StepPartitioner &pass;
  Operation *op;
  ArrayRef<Axes> factorAxes;
  SmallVector<Value> replacement;
};

LogicalResult StepPartitioner::partitionOp(Operation *op) {
  if (failed(decideTensorParallel(op)))
    return failure();
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruled) {
    // Ops without a rule (arith on scalars) run replicated: complete their
    // partial operands; a split operand cannot be handled.
    for (OpOperand &use : op->getOpOperands()) {
      Layout layout = layoutOf(use.get());
      if (layout.isSharded())
        return op->emitOpError()
               << "has operand #" << use.getOperandNumber()
               << " split over the mesh but no sharding rule "
                  "(ShardingRuleOpInterface)";
      if (!layout.partial.empty())
        needReduced(use);
    }
    return success();
  }
  ShardingRule rule = ruled.getShardingRule();

  // Partial operands pass through linear ops when all are partial over the
  // same axes; anything else needs their whole sums.
  SmallVector<Layout> operandLayouts;
  for (Value operand : op->getOperands())
    operandLayouts.push_back(layoutOf(operand));
  Axes passedPartial;
  bool partialThrough =
      rule.linear && !operandLayouts.empty() &&
      !operandLayouts.front().partial.empty() &&
      llvm::all_of(operandLayouts, [&](const Layout &layout) {
        return layout.partial == operandLayouts.front().partial;
      });
  if (partialThrough) {
    passedPartial = operandLayouts.front().partial;
    for (Value operand : op->getOperands())
      partialUsers[operand].insert(op);
  } else {
    for (OpOperand &use : op->getOpOperands())
      if (!operandLayouts[use.getOperandNumber()].partial.empty()) {
        needReduced(use);
        operandLayouts[use.getOperandNumber()] = layoutOf(use.get());
        operandLayouts[use.getOperandNumber()].partial.clear();
      }
  }

  // Which factors are split, and over which axes: every split operand
  // dimension proposes its factor's axes. An axis can split one factor
  // only, so proposals are taken in priority order and those that reuse a
  // taken axis are dropped (their operands are gathered below):
  //  0. the layouts of state (weights are placed once, activations follow)
  //     and of the state a result is the gradient of;
  //  1. factors the results keep (a sequence-split input meeting a
  //     column-parallel weight keeps the weight's split: the input is
  //     gathered, as Megatron's sequence parallelism does);
  //  2. factors summed over (a weight gradient gathers the sequence).
  // Opaque factors stay whole unless the op splits them itself.
  struct Proposal {
    int factor;
    Axes axes;
    int priority;
  };
  SmallVector<Proposal> proposals;
  auto keptByResults = [&](int factor) {
    for (unsigned r = 0; r < rule.getNumResults(); ++r)
      if (llvm::is_contained(rule.getResult(r), factor))
        return true;
    return false;
  };
  for (OpResult result : op->getResults()) {
    std::optional<SmallVector<Axes>> required = requiredDims(result);
    if (!required)
      continue;
    for (auto [dim, factor] :
         llvm::enumerate(rule.getResult(result.getResultNumber())))
      if (factor != ShardingRule::kNoFactor && !(*required)[dim].empty() &&
          !rule.getFactors()[factor].opaque)
        proposals.push_back({factor, (*required)[dim], 0});
  }
  for (auto [index, layout] : llvm::enumerate(operandLayouts)) {
    Value operand = op->getOperand(index);
    bool state = isStateArgument(operand);
    // Undecided state takes the layout of its first use (below); placed
    // state claims its factors, whole ones too: a whole parameter's
    // update is computed whole even if its gradient came split.
    if (state && undecidedState(operand))
      continue;
    for (auto [dim, axes] : llvm::enumerate(layout.dims)) {
      int factor = rule.getOperand(index)[dim];
      if (factor == ShardingRule::kNoFactor) {
        if (!axes.empty())
          return op->emitOpError()
                 << "has dimension " << dim << " of operand #" << index
                 << " split over " << describe(axes)
                 << ", but its sharding rule maps that dimension to no "
                    "factor";
        continue;
      }
      const ShardingRule::Factor &info = rule.getFactors()[factor];
      if ((axes.empty() && !state) || (info.opaque && !info.partitionedByOp))
        continue;
      proposals.push_back(
          {factor, axes, state ? 0 : keptByResults(factor) ? 1 : 2});
    }
  }
  llvm::stable_sort(proposals, [](const Proposal &a, const Proposal &b) {
    return a.priority < b.priority;
  });
  SmallVector<Axes> factorAxes(rule.getFactors().size());
  SmallVector<bool> decided(rule.getFactors().size(), false);
  llvm::SmallSet<StringRef, 4> usedAxes;
  auto take = [&](int factor, const Axes &axes) {
    if (decided[factor] ||
        llvm::any_of(axes, [&](StringRef axis) { return usedAxes.count(axis); }))
      return false;
    factorAxes[factor] = axes;
    decided[factor] = true;
    usedAxes.insert(axes.begin(), axes.end());
    return true;
  };
  for (const Proposal &proposal : proposals)
    if (take(proposal.factor, proposal.axes)) {
      // Tied factors are split alike.
      int tied = rule.tiedWith(proposal.factor);
      if (tied != ShardingRule::kNoFactor && !decided[tied]) {
        factorAxes[tied] = proposal.axes;
        decided[tied] = true;
      }
    }
  // Operands that disagree are resharded to the factors' layouts; state
  // seen for the first time is placed that way.
  for (OpOperand &use : op->getOpOperands()) {
    unsigned index = use.getOperandNumber();
    SmallVector<Axes> want;
    for (int factor : rule.getOperand(index))
      want.push_back(factor == ShardingRule::kNoFactor ? Axes{}
                                                       : factorAxes[factor]);
    if (want == operandLayouts[index].dims)
      continue;
    if (std::optional<StringRef> name = undecidedState(use.get())) {
      if (failed(decideState(*name, want)))
        return failure();
      continue;
    }
    FailureOr<Value> resharded = reshard(use.get(), want, op);
    if (failed(resharded))
      return failure();
    use.set(*resharded);
  }

  // Results: split like their factors; partial over the split factors they
  // sum over (not those the op splits itself).
  for (OpResult result : op->getResults()) {
    Layout layout;
    for (int factor : rule.getResult(result.getResultNumber()))
      layout.dims.push_back(factor == ShardingRule::kNoFactor
                                ? Axes{}
                                : factorAxes[factor]);
    layout.partial = passedPartial;
    for (auto [factor, axes] : llvm::enumerate(factorAxes)) {
      if (axes.empty() || rule.getFactors()[factor].partitionedByOp ||
          !rule.isSummedOver(factor, result.getResultNumber()))
        continue;
      for (StringRef axis : axes)
        if (!llvm::is_contained(layout.partial, axis))
          layout.partial.push_back(axis);
    }
    if (failed(localize(result, layout, op,
                        "result #" + Twine(result.getResultNumber()))))
      return failure();
  }

  // A mean over split factors: scale the value the op is linear in by
  // local / global size, making the local value a term of a plain sum.
  int64_t meanShards = 1;
  for (int factor : rule.getMeanFactors())
    meanShards *= shardsOf(factorAxes[factor]);
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
  SmallVector<Value> oldResults(op->getResults());
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

LogicalResult StepPartitioner::insertGradientBuckets() {
  Block &body = step.getBody().front();
  DenseMap<Operation *, unsigned> positions;
  for (auto [index, op] : llvm::enumerate(body))
    positions[&op] = index;
  Operation *terminator = body.getTerminator();

  // The uses of a deferred value that need its whole sum: all but the
  // linear ops that took it as a partial.
  auto usesNeedingSum = [&](Value value) {
    SmallVector<OpOperand *> uses;
    for (OpOperand &use : value.getUses())
      if (!partialUsers.lookup(value).contains(use.getOwner()))
        uses.push_back(&use);
    return uses;
  };
  auto definedAt = [&](Value value) -> unsigned {
    if (isa<BlockArgument>(value))
      return 0;
    return positions.lookup(value.getDefiningOp());
  };
  auto firstUseOf = [&](Value value) {
    unsigned first = ~0u;
    for (OpOperand *use : usesNeedingSum(value))
      first = std::min(first, positions.lookup(use->getOwner()));
    return first;
  };

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
    unsigned firstUse = ~0u;
    bool isLoss = false;
  };
  SmallVector<Value> order(deferred.begin(), deferred.end());
  llvm::stable_sort(order, [&](Value a, Value b) {
    return definedAt(a) < definedAt(b);
  });
  SmallVector<Bucket> buckets;
  for (Value value : order) {
    bool isLoss = llvm::is_contained(lossValues, value);
    int64_t bytes = byteSize(value.getType());
    Bucket *open = buckets.empty() ? nullptr : &buckets.back();
    // A bucket closes when full, and before a member it cannot wait for:
    // one defined after another member is first needed.
    if (isLoss || !open || open->isLoss || open->bytes >= options.bucketBytes ||
        open->bytes + bytes > options.bucketBytes ||
        definedAt(value) > open->firstUse) {
      buckets.emplace_back();
      open = &buckets.back();
      open->isLoss = isLoss;
    }
    open->values.push_back(value);
    open->bytes += bytes;
    open->firstUse = std::min(open->firstUse, firstUseOf(value));
  }

  unsigned gradientBuckets = 0;
  for (Bucket &bucket : buckets) {
    OpBuilder builder(step.getContext());
    Value last = *llvm::max_element(bucket.values, [&](Value a, Value b) {
      return definedAt(a) < definedAt(b);
    });
    if (isa<BlockArgument>(last))
      builder.setInsertionPointToStart(&body);
    else
      builder.setInsertionPointAfter(last.getDefiningOp());
    SmallVector<Type> types;
    for (Value value : bucket.values)
      types.push_back(value.getType());
    auto reduce = dist::AllReduceOp::create(
        builder, last.getLoc(), types, bucket.values,
        meshRef(step.getContext()), builder.getStrArrayAttr({kDataAxis}),
        dist::ReduceKindAttr::get(step.getContext(), dist::ReduceKind::Sum));
    std::string label =
        bucket.isLoss ? std::string("loss")
                      : "gradient bucket " + std::to_string(gradientBuckets++);
    reduce->setAttr(dist::DistDialect::kLabelAttrName,
                    builder.getStringAttr(label));
    for (auto [value, sum] : llvm::zip(bucket.values, reduce.getResults())) {
      for (OpOperand *use : usesNeedingSum(value))
        if (use->getOwner() != reduce)
          use->set(sum);
      Layout whole = layoutOf(value);
      whole.partial.clear();
      layouts[sum] = whole;
    }
  }
  return success();
}

LogicalResult StepPartitioner::annotateState() {
  MLIRContext *context = step.getContext();
  auto attrFor = [&](const Layout &layout) {
    SmallVector<SmallVector<StringRef>> dims;
    for (const Axes &axes : layout.dims)
      dims.emplace_back(axes.begin(), axes.end());
    return dist::ShardingAttr::get(context, kMeshName, dims);
  };
  // State, and the token inputs: the runtime feeds each rank its block.
  for (BlockArgument arg : step.getArguments()) {
    Layout layout = layoutOf(arg);
    auto input = step.getArgAttrOfType<StringAttr>(
        arg.getArgNumber(), XfmrDialect::kInputAttrName);
    bool tokens = input && (input.getValue() == "tokens" ||
                            input.getValue() == "targets");
    if (layout.isSharded() &&
        (tokens || !stateOf(step, arg.getArgNumber()).first.empty()))
      step.setArgAttr(arg.getArgNumber(),
                      dist::DistDialect::kLocalShardingAttrName,
                      attrFor(layout));
  }
  Operation *terminator = step.getBody().front().getTerminator();
  for (OpOperand &operand : terminator->getOpOperands()) {
    Layout layout = layoutOf(operand.get());
    if (!layout.isSharded())
      continue;
    unsigned index = operand.getOperandNumber();
    bool state = false;
    for (StringRef attr :
         {XfmrDialect::kParamAttrName, XfmrDialect::kMoment1AttrName,
          XfmrDialect::kMoment2AttrName, XfmrDialect::kGradientAttrName})
      state |= static_cast<bool>(step.getResultAttr(index, attr));
    if (!state)
      return step.emitError()
             << "result #" << index << " is split over the mesh; returning it "
             << "whole needs an all_gather, which the partitioner does not "
                "insert for results other than parameters, moments and "
                "gradients";
    step.setResultAttr(index, dist::DistDialect::kLocalShardingAttrName,
                       attrFor(layout));
  }
  return success();
}

LogicalResult StepPartitioner::run() {
  Block &body = step.getBody().front();
  if (failed(partitionInputs()) || failed(applyKnownStateLayouts()) ||
      failed(applyAnnotations()))
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
  // State nobody split stays whole (and so in the evaluation step).
  for (BlockArgument arg : step.getArguments())
    if (std::optional<StringRef> name = undecidedState(arg))
      stateLayouts[*name] = Layout::replicated(arg.getType()).dims;

  // Returned values are logical tensors: complete partial sums.
  Operation *terminator = body.getTerminator();
  for (OpOperand &operand : terminator->getOpOperands())
    if (!layoutOf(operand.get()).partial.empty())
      needReduced(operand);
  if (failed(insertGradientBuckets()) || failed(annotateState()))
    return failure();
  step.setType(FunctionType::get(step.getContext(), body.getArgumentTypes(),
                                 terminator->getOperandTypes()));
  return success();
}

} // namespace

LogicalResult partitionSteps(ModuleOp module, const SpmdOptions &options) {
  if (!SymbolTable::lookupSymbolIn(module, kMeshName))
    return module.emitError()
           << "partitioning needs the plan's mesh @" << kMeshName
           << " (run --dist-apply-plan first)";
  FailureOr<dist::MeshShape> mesh = dist::lookupMeshShape(
      module, meshRef(module.getContext()), nullptr,
      [&] { return module.emitError(); });
  if (failed(mesh))
    return failure();
  if (options.dataParallel && mesh->find(kDataAxis) < 0)
    return module.emitError() << "the mesh @" << kMeshName << " has no '"
                              << kDataAxis << "' axis";
  if (options.tensorParallel && mesh->find(kTensorAxis) < 0)
    return module.emitError() << "the mesh @" << kMeshName << " has no '"
                              << kTensorAxis << "' axis";
  if (options.bucketBytes <= 0)
    return module.emitError() << "bucket-bytes must be positive, got "
                              << options.bucketBytes;
  bool anything =
      (options.dataParallel && mesh->sizes[mesh->find(kDataAxis)] > 1) ||
      (options.tensorParallel && mesh->sizes[mesh->find(kTensorAxis)] > 1);
  if (!anything)
    return success();

  // The training step first: the evaluation step reuses its state layouts.
  SmallVector<func::FuncOp> steps;
  for (auto function : module.getOps<func::FuncOp>())
    if (function->hasAttr(XfmrDialect::kTrainStepAttrName))
      steps.push_back(function);
  for (auto function : module.getOps<func::FuncOp>())
    if (function->hasAttr(XfmrDialect::kEvalStepAttrName))
      steps.push_back(function);
  if (steps.empty())
    return module.emitError(
        "no training step to partition (run --xfmr-train-step first)");
  llvm::StringMap<SmallVector<Axes>> stateLayouts;
  for (func::FuncOp step : steps)
    if (failed(StepPartitioner(step, *mesh, options, stateLayouts).run()))
      return failure();
  return success();
}

} // namespace partition
