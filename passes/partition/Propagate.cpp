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
//===----------------------------------------------------------------------===//

#include "passes/Passes.h"
#include "passes/partition/Layout.h"
#include "passes/partition/WeightPolicy.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "mlir/IR/Builders.h"
#include "llvm/ADT/SmallSet.h"
#include "llvm/ADT/StringMap.h"

namespace partition {
#define GEN_PASS_DEF_PROPAGATEPASS
#include "passes/Passes.h.inc"
} // namespace partition

using namespace mlir;
using namespace partition::xfmr;

namespace partition {
namespace {

class StepPropagation : public WeightPlacement {
public:
  StepPropagation(func::FuncOp step, const PartitionMesh &mesh,
                  bool tensorParallel,
                  llvm::StringMap<SmallVector<Axes>> &stateLayouts)
      : step(step), mesh(mesh), tensorParallel(tensorParallel),
        stateLayouts(stateLayouts) {}

  LogicalResult run();

  // WeightPlacement.
  Layout layoutOf(Value value) const override {
    auto found = layouts.find(value);
    return found != layouts.end() ? found->second
                                  : Layout::replicated(value.getType());
  }
  std::optional<StringRef> undecidedState(Value value) const override;
  bool isPlacedState(Value value) const override {
    return isStateArgument(value) && !undecidedState(value);
  }
  LogicalResult decideState(StringRef name, ArrayRef<Axes> dims) override;
  std::optional<int64_t> layerOf(Value value) const override {
    return stateLayer(step, value);
  }

private:
  /// Checks that `layout` splits `value`'s dimensions evenly and records it.
  LogicalResult setLayout(Value value, const Layout &layout, Operation *where,
                          const Twine &what);
  bool isStateArgument(Value value) const {
    auto arg = dyn_cast<BlockArgument>(value);
    return arg && arg.getOwner()->getParentOp() == step &&
           !stateOf(step, arg.getArgNumber()).first.empty();
  }
  LogicalResult applySeeds();
  /// The layout `use` consumes a partial value in when it needs the whole
  /// sum: a sum over the data axis alone waits for a gradient bucket (the
  /// dimensions stay), a sum over the tensor axis may be scattered along
  /// the sequence, anything else is all-reduced.
  Layout completedSum(OpOperand &use) const;
  /// The layout a gradient must have: that of the state whose update it
  /// feeds, through linear ops (sums, scalings, casts), if any.
  std::optional<SmallVector<Axes>> requiredDims(Value value) const;
  LogicalResult propagateSlice(tensor::ExtractSliceOp slice);
  LogicalResult propagateOp(Operation *op);
  /// A proposal to split `factor` over `axes`; lower priorities go first.
  struct Proposal {
    int factor;
    Axes axes;
    int priority;
  };
  /// Records `op`, which has no sharding rule, as run replicated.
  LogicalResult propagateUnruled(Operation *op);
  /// Decides whether `op` passes its partial operands through (setting
  /// `passedPartial`, the axes its results stay partial over); otherwise
  /// replaces them in `operandLayouts` by their completed sums.
  void passPartials(Operation *op, const ShardingRule &rule,
                    SmallVector<Layout> &operandLayouts, Axes &passedPartial,
                    bool &partialInLinear) const;
  /// The factor splits `op`'s results and operands propose, by priority.
  LogicalResult proposeSplits(Operation *op, const ShardingRule &rule,
                              ArrayRef<Layout> operandLayouts,
                              SmallVector<Proposal> &proposals) const;
  /// The axes of each factor, taking `proposals` in order.
  SmallVector<Axes> decideFactors(const ShardingRule &rule,
                                  ArrayRef<Proposal> proposals) const;
  /// The layouts `op` consumes its operands in; places state seen for the
  /// first time.
  LogicalResult consumeOperands(Operation *op, const ShardingRule &rule,
                                ArrayRef<Axes> factorAxes,
                                ArrayRef<Layout> operandLayouts,
                                SmallVector<Layout> &consumed);
  /// Sets the layouts of `op`'s results from the factors' axes.
  LogicalResult layoutResults(Operation *op, const ShardingRule &rule,
                              ArrayRef<Axes> factorAxes,
                              const Axes &passedPartial,
                              bool partialInLinear);
  LogicalResult propagateReturn(Operation *terminator);
  void record(Operation *op, ArrayRef<Layout> operands);

  func::FuncOp step;
  const PartitionMesh &mesh;
  bool tensorParallel;
  llvm::StringMap<SmallVector<Axes>> &stateLayouts;
  DenseMap<Value, Layout> layouts;
};

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
  StringRef name = stateOf(step, arg.getArgNumber()).second;
  if (name.empty() || stateLayouts.count(name))
    return std::nullopt;
  return name;
}

LogicalResult StepPropagation::decideState(StringRef name,
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
    if (failed(setLayout(arg, layout, step, "state '" + name + "'")))
      return failure();
  }
  return success();
}

LogicalResult StepPropagation::applySeeds() {
  // State placed by the training step, for the evaluation step.
  for (BlockArgument arg : step.getArguments()) {
    StringRef name = stateOf(step, arg.getArgNumber()).second;
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
    StringRef name = stateOf(step, index).second;
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

Layout StepPropagation::completedSum(OpOperand &use) const {
  Layout layout = layoutOf(use.get());
  if (scattersContext(mesh, layout, use) ||
      (!mesh.isDataSum(layout.partial) &&
       scattersSequence(mesh, layout, use)))
    layout.dims[kSequenceDim] = layout.partial;
  layout.partial.clear();
  return layout;
}

std::optional<SmallVector<Axes>>
StepPropagation::requiredDims(Value value) const {
  for (OpOperand &use : value.getUses()) {
    auto ruled = dyn_cast<ShardingRuleOpInterface>(use.getOwner());
    if (!ruled)
      continue;
    ShardingRule rule = ruled.getShardingRule();
    if (rule.linear) {
      for (Value result : use.getOwner()->getResults())
        if (auto dims = requiredDims(result))
          return dims;
      continue;
    }
    // An update of state: the gradient has the state's factors.
    ArrayRef<int> factors = rule.getOperand(use.getOperandNumber());
    for (OpOperand &other : use.getOwner()->getOpOperands())
      if (&other != &use && isStateArgument(other.get()) &&
          rule.getOperand(other.getOperandNumber()) == factors)
        return layoutOf(other.get()).dims;
  }
  return std::nullopt;
}

void StepPropagation::record(Operation *op, ArrayRef<Layout> operands) {
  MLIRContext *context = op->getContext();
  StringRef meshName = mesh.symbol.getValue();
  if (llvm::any_of(operands,
                   [](const Layout &layout) { return !layout.isReplicated(); })) {
    SmallVector<Attribute> attrs;
    for (const Layout &layout : operands)
      attrs.push_back(layout.toAttr(context, meshName));
    op->setAttr(kOperandShardingsAttrName, ArrayAttr::get(context, attrs));
  }
  SmallVector<Attribute> results;
  bool any = false;
  for (Value result : op->getResults()) {
    Layout layout = layoutOf(result);
    any |= !layout.isReplicated();
    results.push_back(layout.toAttr(context, meshName));
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
  ShardingRule rule = ruled.getShardingRule();

  SmallVector<Layout> operandLayouts;
  for (Value operand : op->getOperands())
    operandLayouts.push_back(layoutOf(operand));
  Axes passedPartial;
  bool partialInLinear = false;
  passPartials(op, rule, operandLayouts, passedPartial, partialInLinear);

  SmallVector<Proposal> proposals;
  if (failed(proposeSplits(op, rule, operandLayouts, proposals)))
    return failure();
  SmallVector<Axes> factorAxes = decideFactors(rule, proposals);

  SmallVector<Layout> consumed;
  if (failed(consumeOperands(op, rule, factorAxes, operandLayouts, consumed)))
    return failure();
  if (failed(layoutResults(op, rule, factorAxes, passedPartial,
                           partialInLinear)))
    return failure();
  record(op, consumed);
  return success();
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

void StepPropagation::passPartials(Operation *op, const ShardingRule &rule,
                                   SmallVector<Layout> &operandLayouts,
                                   Axes &passedPartial,
                                   bool &partialInLinear) const {
  // Partial operands pass through linear ops when all are partial over the
  // same axes; anything else consumes their whole sums.
  bool partialThrough =
      rule.linear && !operandLayouts.empty() &&
      !operandLayouts.front().partial.empty() &&
      llvm::all_of(operandLayouts, [&](const Layout &layout) {
        return layout.partial == operandLayouts.front().partial;
      });
  // An op linear in its only partial operand, none of whose axes split
  // another operand, makes a term of its result from each term of the sum:
  // the key / value gradients of replicated key-value heads, partial over
  // tp_kv_rep, reach the weight gradients (summed over the ranks that share
  // the head with the data-parallel sum) and the input gradient (summed
  // with the query's) without a sum of their own.
  if (!partialThrough) {
    SmallVector<unsigned> partials;
    for (auto [index, layout] : llvm::enumerate(operandLayouts))
      if (!layout.partial.empty())
        partials.push_back(index);
    auto splitsOver = [&](const Axes &axes) {
      return llvm::any_of(operandLayouts, [&](const Layout &layout) {
        return llvm::any_of(layout.dims, [&](const Axes &dim) {
          return llvm::any_of(dim, [&](StringRef axis) {
            return llvm::is_contained(axes, axis);
          });
        });
      });
    };
    // A sum over the context axis alone that this use can take as
    // sequence blocks is scattered instead (all_gather attention's key and
    // value gradients): once, for every use, at their own width rather
    // than at the width of each linear op's result.
    auto scattered = [&](unsigned index) {
      return scattersContext(mesh, operandLayouts[index],
                             op->getOpOperand(index));
    };
    if (partials.size() == 1 && rule.isLinearIn(partials.front()) &&
        !splitsOver(operandLayouts[partials.front()].partial) &&
        !scattered(partials.front())) {
      partialThrough = true;
      partialInLinear = true;
    }
  }
  if (partialThrough) {
    for (const Layout &layout : operandLayouts)
      if (!layout.partial.empty())
        passedPartial = layout.partial;
  } else {
    for (OpOperand &use : op->getOpOperands())
      if (!operandLayouts[use.getOperandNumber()].partial.empty())
        operandLayouts[use.getOperandNumber()] = completedSum(use);
  }
}

LogicalResult
StepPropagation::proposeSplits(Operation *op, const ShardingRule &rule,
                               ArrayRef<Layout> operandLayouts,
                               SmallVector<Proposal> &proposals) const {
  // Which factors are split, and over which axes: every split operand
  // dimension proposes its factor's axes. An axis can split one factor
  // only, so proposals are taken in priority order and those that reuse a
  // taken axis are dropped (their operands are resharded):
  //  0. the layouts of state (weights are placed once, activations follow)
  //     and of the state a result is the gradient of;
  //  1. factors the results keep (a sequence-split input meeting a
  //     column-parallel weight keeps the weight's split: the input is
  //     gathered, as Megatron's sequence parallelism does);
  //  2. factors summed over (a weight gradient gathers the sequence).
  // Opaque factors stay whole unless the op splits them itself.
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
    // State read through a layout-preserving op (the bf16 cast of a
    // weight) claims its factors as the weight itself would: a cast weight
    // must not lose to a sequence-split activation and be gathered.
    bool state = isStateArgument(operand) ||
                 (operand.getDefiningOp() &&
                  isLayoutPreserving(operand.getDefiningOp()) &&
                  isStateArgument(operand.getDefiningOp()->getOperand(0)));
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
  return success();
}

SmallVector<Axes>
StepPropagation::decideFactors(const ShardingRule &rule,
                               ArrayRef<Proposal> proposals) const {
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
      const Axes &taken = factorAxes[proposal.factor];
      // Tied factors are split alike, a coarser one (fewer blocks than
      // the shards) over the major axes whose shards divide its blocks:
      // replicated over the rest.
      for (int tied : rule.tiedGroup(proposal.factor)) {
        if (decided[tied])
          continue;
        factorAxes[tied] = taken;
        int64_t blocks = rule.getFactors()[tied].blocks;
        while (blocks > 0 && !factorAxes[tied].empty() &&
               blocks % mesh.shardsOf(factorAxes[tied]) != 0)
          factorAxes[tied].pop_back();
        decided[tied] = true;
      }
    }
  return factorAxes;
}

LogicalResult StepPropagation::consumeOperands(
    Operation *op, const ShardingRule &rule, ArrayRef<Axes> factorAxes,
    ArrayRef<Layout> operandLayouts, SmallVector<Layout> &consumed) {
  // Operands are consumed in the factors' layouts; state seen for the first
  // time is placed that way.
  for (OpOperand &use : op->getOpOperands()) {
    unsigned index = use.getOperandNumber();
    Layout want;
    for (int factor : rule.getOperand(index))
      want.dims.push_back(factor == ShardingRule::kNoFactor
                              ? Axes{}
                              : factorAxes[factor]);
    want.partial = operandLayouts[index].partial;
    if (want.dims != operandLayouts[index].dims) {
      if (std::optional<StringRef> name = undecidedState(use.get())) {
        if (failed(decideState(*name, want.dims)))
          return failure();
      } else {
        auto type = cast<RankedTensorType>(use.get().getType());
        for (auto [dim, axes] : llvm::enumerate(want.dims)) {
          int64_t shards = mesh.shardsOf(axes);
          if (type.getDimSize(dim) % shards != 0)
            return op->emitOpError()
                   << "needs operand dimension " << dim << " of size "
                   << type.getDimSize(dim) << " split over "
                   << describe(axes) << " (" << shards
                   << " blocks), which does not divide it";
        }
      }
    }
    consumed.push_back(want);
  }
  return success();
}

LogicalResult StepPropagation::layoutResults(Operation *op,
                                             const ShardingRule &rule,
                                             ArrayRef<Axes> factorAxes,
                                             const Axes &passedPartial,
                                             bool partialInLinear) {
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
    // A coarser tied factor replicated over some axes of the finer one
    // (key-value heads shared by query heads of several devices): each of
    // those devices holds one term of the coarse blocks' sum.
    ArrayRef<int> resultFactors = rule.getResult(result.getResultNumber());
    for (int factor : resultFactors) {
      if (factor == ShardingRule::kNoFactor)
        continue;
      for (int tied : rule.tiedGroup(factor)) {
        if (llvm::is_contained(resultFactors, tied))
          continue;
        for (StringRef axis : factorAxes[tied])
          if (!llvm::is_contained(factorAxes[factor], axis) &&
              !llvm::is_contained(layout.partial, axis))
            layout.partial.push_back(axis);
      }
    }
    // In mesh order, so that it meets the other terms of the same sum.
    if (partialInLinear)
      layout.partial = mesh.inMeshOrder(layout.partial);
    if (failed(setLayout(result, layout, op,
                         "result #" + Twine(result.getResultNumber()))))
      return failure();
  }
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
  for (BlockArgument arg : step.getArguments()) {
    Layout layout = layoutOf(arg);
    if (layout.isReplicated())
      step.removeArgAttr(arg.getArgNumber(),
                         dist::DistDialect::kShardingAttrName);
    else
      step.setArgAttr(arg.getArgNumber(), dist::DistDialect::kShardingAttrName,
                      layout.toAttr(step.getContext(),
                                    mesh.symbol.getValue()));
  }
  return success();
}

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
