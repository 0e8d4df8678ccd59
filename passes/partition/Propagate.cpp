//===- Propagate.cpp - --dist-propagate: every value's layout -------------===//
//
// Decides how every value of the training and evaluation steps is laid out
// over the mesh, from the seeds (--dist-seed-layouts) and the ops' sharding
// rules alone, and records it; the IR keeps its global types (the partition
// phase makes them local). In program order:
//
//  - Parameters are placed at their first use. Annotated ones keep their
//    annotation; otherwise the tensor-parallel policy (WeightPolicy.h) may
//    place them; otherwise they take the layout the op's factors give them.
//    A parameter's AdamW moments follow it, and the evaluation step reuses
//    the training step's placements.
//  - A factor is split like the operand dimensions that map to it. An axis
//    splits one factor only, so proposals are taken in priority order:
//    placed state (and the state a result is the gradient of), then factors
//    the results keep, then factors summed over; operands that disagree are
//    consumed resharded.
//  - A result that sums over a split factor is partial: each device holds
//    one term of a sum over those axes. Partial sums flow through linear
//    ops (add, scale, cast); any other use consumes the whole sum, or, with
//    sequence parallelism, sequence blocks of it.
//
// Recorded: `dist.sharding` on every argument and result that is not whole
// on every device, and `dist.operand_shardings` on every op that consumes an
// operand in a layout other than replicated. An op absent of both runs
// replicated.
//
// This file walks the steps; PropagateFactors.cpp decides each op's factors.
//
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/common/FunctionAttrEdits.h"
#include "passes/partition/StepPropagation.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/IR/Builders.h"

namespace partition {
#define GEN_PASS_DEF_PROPAGATEPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {

LogicalResult StepPropagation::setLayout(Value value, const Layout &layout,
                                         Operation *where, const Twine &what) {
  auto type = cast<RankedTensorType>(value.getType());
  for (auto [dim, axes] : llvm::enumerate(layout.dims)) {
    int64_t shards = mesh.shardsOf(axes);
    if (type.getDimSize(dim) % shards != 0)
      return where->emitError()
             << what << " has " << type.getDimSize(dim)
             << " elements in dimension " << dim
             << ", which do not split evenly over " << describe(axes) << " ("
             << shards << " blocks)";
  }
  layouts[value] = layout;
  return success();
}

std::optional<StringRef> StepPropagation::undecidedState(Value value) const {
  // A parameter read through a layout-preserving op (the bf16 cast of
  // mixed precision, once per use) is placed as the parameter.
  if (Operation *def = value.getDefiningOp())
    if (isLayoutPreserving(def))
      value = def->getOperand(0);
  auto arg = dyn_cast<BlockArgument>(value);
  if (!arg || arg.getOwner()->getParentOp() != step)
    return std::nullopt;
  StringRef name = stateNames[arg.getArgNumber()];
  if (name.empty() || stateLayouts.count(name))
    return std::nullopt;
  return name;
}

LogicalResult StepPropagation::decideState(StringRef name,
                                           ArrayRef<Axes> decided) {
  // A copy: `decided` may point into stateLayouts itself.
  SmallVector<Axes> dims(decided.begin(), decided.end());
  stateLayouts[name] = dims;
  auto arguments = argumentsOfState.find(name);
  if (arguments == argumentsOfState.end())
    return success();
  for (unsigned index : arguments->second) {
    BlockArgument arg = step.getArgument(index);
    if (layouts.count(arg))
      continue;
    Layout layout;
    layout.dims.assign(dims.begin(), dims.end());
    if (failed(setLayout(arg, layout, step, "state '" + name + "'")))
      return failure();
  }
  return success();
}

LogicalResult StepPropagation::applySeeds() {
  // State placed by the training step, for the evaluation step.
  for (BlockArgument arg : step.getArguments()) {
    StringRef name = stateNames[arg.getArgNumber()];
    auto known = stateLayouts.find(name);
    if (!name.empty() && known != stateLayouts.end() &&
        failed(decideState(name, known->second)))
      return failure();
  }
  // Seeds and annotations (--dist-seed-layouts checked them).
  for (BlockArgument arg : step.getArguments()) {
    unsigned index = arg.getArgNumber();
    auto sharding = step.getArgAttrOfType<dist::ShardingAttr>(
        index, dist::DistDialect::kShardingAttrName);
    if (!sharding)
      continue;
    Layout layout = Layout::fromAttr(sharding, arg.getType());
    StringRef name = stateNames[index];
    if (name.empty()) {
      if (failed(setLayout(arg, layout, step, "argument #" + Twine(index))))
        return failure();
      continue;
    }
    auto known = stateLayouts.find(name);
    if (known != stateLayouts.end()) {
      if (known->second != layout.dims)
        return step.emitError() << "argument #" << index << " ('" << name
                                << "') is annotated unlike in the training "
                                   "step";
      continue;
    }
    if (failed(decideState(name, layout.dims)))
      return failure();
  }
  return success();
}

Attribute StepPropagation::attributeOf(const Layout &layout) {
  // "a,b;;c|p": each dimension's axes, then the partial ones.
  SmallString<64> key;
  for (const Axes &axes : layout.dims) {
    llvm::interleave(axes, [&](StringRef axis) { key += axis; },
                     [&] { key += ','; });
    key += ';';
  }
  key += '|';
  llvm::interleave(layout.partial, [&](StringRef axis) { key += axis; },
                   [&] { key += ','; });
  Attribute &attribute = layoutAttributes[key];
  if (!attribute)
    attribute = layout.toAttr(step.getContext(), mesh.symbol.getValue());
  return attribute;
}

void StepPropagation::record(Operation *op, ArrayRef<Layout> operands) {
  MLIRContext *context = op->getContext();
  if (llvm::any_of(operands,
                   [](const Layout &layout) { return !layout.isReplicated(); })) {
    SmallVector<Attribute> attrs;
    for (const Layout &layout : operands)
      attrs.push_back(attributeOf(layout));
    op->setAttr(kOperandShardingsAttrName, ArrayAttr::get(context, attrs));
  }
  SmallVector<Attribute> results;
  bool any = false;
  for (Value result : op->getResults()) {
    Layout layout = layoutOf(result);
    any |= !layout.isReplicated();
    results.push_back(attributeOf(layout));
  }
  if (!any)
    return;
  op->setAttr(dist::DistDialect::kShardingAttrName,
              results.size() == 1 ? results.front()
                                  : ArrayAttr::get(context, results));
}

LogicalResult StepPropagation::propagateSlice(tensor::ExtractSliceOp slice) {
  OpOperand &sourceUse = slice->getOpOperand(0);
  Layout source = layoutOf(slice.getSource());
  if (!source.partial.empty())
    source = completedSum(sourceUse);
  if (source.isSharded()) {
    if (!slice.hasUnitStride() || !slice.getOffsets().empty() ||
        !slice.getSizes().empty())
      return slice.emitOpError()
             << "slices a split tensor with dynamic offsets or sizes or "
                "non-unit strides; only static unit-stride slices are "
                "supported";
    ArrayRef<int64_t> offsets = slice.getStaticOffsets();
    ArrayRef<int64_t> sizes = slice.getStaticSizes();
    llvm::SmallBitVector dropped = slice.getDroppedDims();
    for (auto [dim, axes] : llvm::enumerate(source.dims)) {
      // A dimension taken whole keeps its split (a micro-batch's rows of
      // sequences split over the context axis).
      if (axes.empty() ||
          (!dropped.test(dim) && offsets[dim] == 0 &&
           sizes[dim] == slice.getSourceType().getDimSize(dim)))
        continue;
      // Only rows split over the data axis may be sliced locally (the
      // micro-batches of gradient accumulation).
      int64_t shards = mesh.shardsOf(axes);
      Axes batch = mesh.batchAxes();
      std::string batchName = batch.size() > 1    ? describe(batch)
                              : batch.size() == 1 ? batch.front().str()
                                                  : mesh.dataAxis.str();
      if (batch.empty() || axes != batch)
        return slice.emitOpError()
               << "slices dimension " << dim << ", which is split over "
               << describe(axes)
               << "; only the batch rows (split over the data axis"
               << (batch.size() > 1 ? "es " : " ") << batchName
               << ") may be sliced";
      if (dropped.test(dim) || offsets[dim] % shards || sizes[dim] % shards)
        return slice.emitOpError()
               << "takes rows [" << offsets[dim] << ", "
               << offsets[dim] + sizes[dim] << ") of a batch split over "
               << batchName << " = " << shards
               << "; each micro-batch must hold a multiple of " << shards
               << " rows";
    }
  }
  Layout result;
  llvm::SmallBitVector dropped = slice.getDroppedDims();
  for (auto [dim, axes] : llvm::enumerate(source.dims))
    if (!dropped.test(dim))
      result.dims.push_back(axes);
  layouts[slice.getResult()] = result;
  SmallVector<Layout> operands(slice->getNumOperands(),
                               Layout::replicated(slice.getSource().getType()));
  operands[0] = source;
  for (unsigned i = 1; i < operands.size(); ++i)
    operands[i] = Layout::replicated(slice->getOperand(i).getType());
  record(slice, operands);
  return success();
}

LogicalResult StepPropagation::propagateOp(Operation *op) {
  if (tensorParallel && (mesh.hasTensor() || !mesh.expertAxis.empty()) &&
      failed(placeWeightsFor(op, mesh, *this)))
    return failure();
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  if (!ruled)
    return propagateUnruled(op);
  const ShardingRule &rule = ruleOf(ruled);

  SmallVector<Layout> operandLayouts;
  for (Value operand : op->getOperands())
    operandLayouts.push_back(layoutOf(operand));
  Axes passedPartial;
  bool partialInLinear = false;
  passPartials(op, rule, operandLayouts, passedPartial, partialInLinear);

  SmallVector<Proposal> proposals;
  if (failed(proposeSplits(op, rule, operandLayouts, proposals)))
    return failure();
  SmallVector<Axes> factorAxes = decideFactors(rule, proposals, operandLayouts);

  SmallVector<Layout> consumed;
  if (failed(consumeOperands(op, rule, factorAxes, operandLayouts, consumed)))
    return failure();
  if (failed(layoutResults(op, rule, factorAxes, passedPartial,
                           partialInLinear)))
    return failure();
  record(op, consumed);
  return success();
}

const ShardingRule &
StepPropagation::ruleOf(xfmr::ShardingRuleOpInterface op) const {
  std::unique_ptr<ShardingRule> &rule = rules[op.getOperation()];
  if (!rule)
    rule = std::make_unique<ShardingRule>(op.getShardingRule());
  return *rule;
}

LogicalResult StepPropagation::propagateUnruled(Operation *op) {
  // Ops without a rule (arith on scalars) run replicated: they consume
  // partial operands whole; a split operand cannot be handled.
  SmallVector<Layout> operands;
  for (OpOperand &use : op->getOpOperands()) {
    Layout layout = layoutOf(use.get());
    if (layout.isSharded())
      return op->emitOpError()
             << "has operand #" << use.getOperandNumber()
             << " split over the mesh but no sharding rule "
                "(ShardingRuleOpInterface)";
    operands.push_back(layout.partial.empty() ? layout : completedSum(use));
  }
  record(op, operands);
  return success();
}

LogicalResult StepPropagation::propagateReturn(Operation *terminator) {
  // Returned values are logical tensors: partial sums are completed. Split
  // results are returned as blocks only where the runtime knows how to
  // assemble them (state, gradients and the logits of @logits_step).
  SmallVector<Layout> consumed;
  for (OpOperand &operand : terminator->getOpOperands()) {
    Layout layout = layoutOf(operand.get());
    if (!layout.partial.empty())
      layout = completedSum(operand);
    unsigned index = operand.getOperandNumber();
    if (layout.isSharded()) {
      bool state = false;
      for (StringRef attr :
           {XfmrDialect::kParamAttrName, XfmrDialect::kMoment1AttrName,
            XfmrDialect::kMoment2AttrName, XfmrDialect::kGradientAttrName})
        state |= static_cast<bool>(step.getResultAttr(index, attr));
      auto output =
          step.getResultAttrOfType<StringAttr>(index, XfmrDialect::kOutputAttrName);
      state |= output && output.getValue() == "logits";
      if (!state)
        return step.emitError()
               << "result #" << index
               << " is split over the mesh; returning it whole needs an "
                  "all_gather, which the partitioner does not insert for "
                  "results other than parameters, moments, gradients and "
                  "logits";
    }
    consumed.push_back(layout);
  }
  record(terminator, consumed);
  return success();
}

LogicalResult StepPropagation::run() {
  if (failed(applySeeds()))
    return failure();
  Block &body = step.getBody().front();
  for (Operation &op : body.without_terminator()) {
    LogicalResult result =
        isa<tensor::ExtractSliceOp>(op)
            ? propagateSlice(cast<tensor::ExtractSliceOp>(op))
            : propagateOp(&op);
    if (failed(result))
      return failure();
  }
  // State nobody split stays whole (and so in the evaluation step).
  for (BlockArgument arg : step.getArguments())
    if (std::optional<StringRef> name = undecidedState(arg))
      stateLayouts[*name] = Layout::replicated(arg.getType()).dims;
  if (failed(propagateReturn(body.getTerminator())))
    return failure();

  // Every argument's layout, seeds included.
  FunctionAttrEdits argAttrs(step);
  for (BlockArgument arg : step.getArguments()) {
    Layout layout = layoutOf(arg);
    if (layout.isReplicated())
      argAttrs.remove(arg.getArgNumber(), dist::DistDialect::kShardingAttrName);
    else
      argAttrs.set(arg.getArgNumber(), dist::DistDialect::kShardingAttrName,
                   attributeOf(layout));
  }
  argAttrs.apply();
  return success();
}

namespace {

struct PropagatePass : impl::PropagatePassBase<PropagatePass> {
  using PropagatePassBase::PropagatePassBase;

  void runOnOperation() override {
    ModuleOp module = getOperation();
    FailureOr<PartitionMesh> mesh = lookupPartitionMesh(module);
    if (failed(mesh))
      return signalPassFailure();
    SmallVector<func::FuncOp> steps = stepsToPartition(module);
    if (steps.empty()) {
      module.emitError(
          "no training step to partition (run --xfmr-train-step first)");
      return signalPassFailure();
    }
    llvm::StringMap<SmallVector<Axes>> stateLayouts;
    for (func::FuncOp step : steps)
      if (failed(StepPropagation(step, *mesh, tensorParallel, stateLayouts)
                     .run()))
        return signalPassFailure();
  }
};

} // namespace
} // namespace partition
