//===- PropagateFactors.cpp - --dist-propagate: one op's factors ----------===//
//
// The decisions --dist-propagate (Propagate.cpp) takes for one op: whether
// its partial operands pass through it, which factors its operands and
// results propose to split and over which axes, which proposals win, and
// so the layouts it consumes its operands in and gives its results.
//
//===----------------------------------------------------------------------===//

#include "passes/partition/StepPropagation.h"

#include "mlir/IR/Matchers.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "llvm/ADT/SmallSet.h"

using namespace mlir;
using namespace partition::xfmr;

namespace partition {

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
  Value state = requiredState(value);
  if (!state)
    return std::nullopt;
  return layoutOf(state).dims;
}

Value StepPropagation::requiredState(Value value) const {
  if (auto known = requiredStates.find(value); known != requiredStates.end())
    return known->second;
  Value state;
  for (OpOperand &use : value.getUses()) {
    auto ruled = dyn_cast<ShardingRuleOpInterface>(use.getOwner());
    if (!ruled)
      continue;
    const ShardingRule &rule = ruleOf(ruled);
    if (rule.linear) {
      for (Value result : use.getOwner()->getResults())
        if ((state = requiredState(result)))
          break;
      if (state)
        break;
      continue;
    }
    // An update of state: the gradient has the state's factors.
    ArrayRef<int> factors = rule.getOperand(use.getOperandNumber());
    for (OpOperand &other : use.getOwner()->getOpOperands())
      if (&other != &use && isStateArgument(other.get()) &&
          rule.getOperand(other.getOperandNumber()) == factors) {
        state = other.get();
        break;
      }
    if (state)
      break;
  }
  requiredStates[value] = state;
  return state;
}

void StepPropagation::passPartials(Operation *op, const ShardingRule &rule,
                                   SmallVector<Layout> &operandLayouts,
                                   Axes &passedPartial,
                                   bool &partialInLinear) const {
  // A zero constant is a sum of zeros over any axes: beside a partial
  // operand of a linear op it is partial too (a looped step's gradient
  // sums start at zero, passes/frontend/TrainStep.cpp).
  if (rule.linear)
    for (const Layout &partial : operandLayouts)
      if (!partial.partial.empty()) {
        for (auto [index, layout] : llvm::enumerate(operandLayouts))
          if (layout.partial.empty() && !layout.isSharded() &&
              matchPattern(op->getOperand(index), m_AnyZeroFloat()))
            layout.partial = partial.partial;
        break;
      }
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
      proposals.push_back({factor, axes,
                           state                  ? 0
                           : keptByResults(factor) ? 1
                                                   : 2,
                           static_cast<int>(index)});
    }
  }
  llvm::stable_sort(proposals, [](const Proposal &a, const Proposal &b) {
    return a.priority < b.priority;
  });
  return success();
}

/// Whether operand `index` of `op`'s rule has a dimension other than that
/// of `factor` split over exactly `axes` (`wantWhole`: whole, its factor
/// split over `axes`), so that splitting `factor` one way or the other
/// moves `axes` between two of its dimensions: an all_to_all.
static bool movesBetweenDims(const ShardingRule &rule, const Layout &layout,
                             unsigned index, int factor, ArrayRef<Axes> factors,
                             const Axes &axes, bool wantWhole) {
  for (auto [dim, other] : llvm::enumerate(rule.getOperand(index)))
    if (other != ShardingRule::kNoFactor && other != factor &&
        (wantWhole ? layout.dims[dim].empty() && factors[other] == axes
                   : layout.dims[dim] == axes))
      return true;
  return false;
}

SmallVector<Axes>
StepPropagation::decideFactors(const ShardingRule &rule,
                               ArrayRef<Proposal> proposals,
                               ArrayRef<Layout> operandLayouts) const {
  SmallVector<Axes> factorAxes(rule.getFactors().size());
  SmallVector<bool> decided(rule.getFactors().size(), false);
  // The proposal that decided each factor.
  SmallVector<const Proposal *> decidedBy(rule.getFactors().size(), nullptr);
  llvm::SmallSet<StringRef, 4> usedAxes;
  auto unused = [&](ArrayRef<StringRef> axes) {
    return llvm::none_of(axes,
                         [&](StringRef axis) { return usedAxes.count(axis); });
  };
  auto take = [&](int factor, const Axes &axes) {
    if (decided[factor] || !unused(axes))
      return false;
    factorAxes[factor] = axes;
    decided[factor] = true;
    usedAxes.insert(axes.begin(), axes.end());
    return true;
  };
  // An operand split over [P..., S...] along one dimension and over S along
  // another is one all_to_all away from the other layout (expert
  // parallelism below dp: tokens split over [dp, ep] by batch, or over dp
  // by batch and ep by expert). When the first proposal of a factor is the
  // major part P of an equally urgent later one, and its operand splits
  // another dimension over the rest S, the finer split wins: the operand
  // moves S by an all_to_all rather than being gathered whole.
  auto extends = [&](const Proposal &proposal) {
    const Proposal *first = decidedBy[proposal.factor];
    const Axes &have = factorAxes[proposal.factor];
    if (!first || first->operand < 0 ||
        first->priority != proposal.priority ||
        !rule.tiedGroup(proposal.factor).empty() ||
        proposal.axes.size() <= have.size() ||
        !llvm::equal(have, ArrayRef<StringRef>(proposal.axes)
                               .take_front(have.size())))
      return false;
    Axes rest(proposal.axes.begin() + have.size(), proposal.axes.end());
    if (!unused(rest) ||
        !movesBetweenDims(rule, operandLayouts[first->operand],
                          first->operand, proposal.factor, factorAxes, rest,
                          /*wantWhole=*/false))
      return false;
    factorAxes[proposal.factor] = proposal.axes;
    usedAxes.insert(rest.begin(), rest.end());
    return true;
  };
  for (const Proposal &proposal : proposals) {
    if (extends(proposal))
      continue;
    if (take(proposal.factor, proposal.axes)) {
      decidedBy[proposal.factor] = &proposal;
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
  }
  // The converse: a factor left whole because another factor of the same
  // operand took the minor axes S of its proposal [P..., S...] is split
  // over P (the experts take ep from tokens split over [dp, ep]: they stay
  // split over dp by batch, and ep moves to the experts by an all_to_all
  // instead of every rank gathering the dp replicas' tokens).
  for (const Proposal &proposal : proposals) {
    if (decided[proposal.factor] || proposal.operand < 0 ||
        proposal.axes.size() < 2 || !rule.tiedGroup(proposal.factor).empty())
      continue;
    for (size_t major = proposal.axes.size() - 1; major > 0; --major) {
      ArrayRef<StringRef> all(proposal.axes);
      Axes prefix(all.take_front(major)), rest(all.drop_front(major));
      if (!movesBetweenDims(rule, operandLayouts[proposal.operand],
                            proposal.operand, proposal.factor, factorAxes,
                            rest, /*wantWhole=*/true))
        continue;
      if (take(proposal.factor, prefix))
        decidedBy[proposal.factor] = &proposal;
      break;
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

} // namespace partition
