//===- StepPropagation.h - one step's layout propagation --------*- C++ -*-===//
//
// The state of --dist-propagate over one step (Propagate.cpp describes the
// pass): the walk over the step's ops lives in Propagate.cpp, the decisions
// for one op (which factors are split over which axes, how its operands are
// consumed and its results laid out) in PropagateFactors.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_PARTITION_STEPPROPAGATION_H
#define PARTITION_PASSES_PARTITION_STEPPROPAGATION_H

#include "passes/partition/Layout.h"
#include "passes/partition/WeightPolicy.h"

#include "dialects/Xfmr/ShardingRule.h"
#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/Dialect/Func/IR/FuncOps.h"
#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringMap.h"

#include <memory>

namespace partition {

using mlir::ArrayRef;
using mlir::BlockArgument;
using mlir::dyn_cast;
using mlir::DenseMap;
using mlir::LogicalResult;
using mlir::Operation;
using mlir::OpOperand;
using mlir::SmallVector;
using mlir::StringRef;
using mlir::Twine;
using mlir::Value;
using xfmr::ShardingRule;

class StepPropagation : public WeightPlacement {
public:
  StepPropagation(mlir::func::FuncOp step, const PartitionMesh &mesh,
                  bool tensorParallel,
                  llvm::StringMap<SmallVector<Axes>> &stateLayouts)
      : step(step), mesh(mesh), tensorParallel(tensorParallel),
        stateLayouts(stateLayouts) {
    for (unsigned index = 0, e = step.getNumArguments(); index < e; ++index) {
      auto [role, name] = stateOf(step, index);
      stateArguments.push_back(!role.empty());
      stateNames.push_back(name);
      if (!name.empty())
        argumentsOfState[name].push_back(index);
    }
  }

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
           stateArguments[arg.getArgNumber()];
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
  /// That state argument (null if none), found once per value: a gradient
  /// summed over M micro-batches reaches its update through the rest of
  /// the sum, so walking it again for each micro-batch's gradient was
  /// quadratic in M. Which state a value feeds depends on the IR alone,
  /// which propagation does not change; the state's layout is read when
  /// asked.
  Value requiredState(Value value) const;
  LogicalResult propagateSlice(mlir::tensor::ExtractSliceOp slice);
  LogicalResult propagateOp(Operation *op);
  /// A proposal to split `factor` over `axes`; lower priorities go first.
  struct Proposal {
    int factor;
    Axes axes;
    int priority;
    /// The operand whose dimension proposes it; -1 for a result's.
    int operand = -1;
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
                                  ArrayRef<Proposal> proposals,
                                  ArrayRef<Layout> operandLayouts) const;
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
  /// `layout` as the attribute record() writes, built once per distinct
  /// layout: building one uniques a string for every axis and an array for
  /// every dimension (a fifth of the pass, for a few dozen layouts).
  mlir::Attribute attributeOf(const Layout &layout);
  /// `op`'s sharding rule, built once: requiredDims asks for the rules of
  /// a value's users again for each value it walks back from (the rules
  /// were 9% of a compile's time, most of it rebuilt).
  const ShardingRule &ruleOf(xfmr::ShardingRuleOpInterface op) const;

  mlir::func::FuncOp step;
  const PartitionMesh &mesh;
  bool tensorParallel;
  llvm::StringMap<SmallVector<Axes>> &stateLayouts;
  DenseMap<Value, Layout> layouts;
  /// Per argument, whether it is state and which ("" if none), and per
  /// state its arguments (a parameter's and its moments'): stateOf reads
  /// three attributes, and deciding each state asked it of every argument
  /// (quadratic in the arguments).
  SmallVector<bool> stateArguments;
  SmallVector<StringRef> stateNames;
  llvm::StringMap<SmallVector<unsigned, 3>> argumentsOfState;
  /// ruleOf's rules (the walk creates and erases no op).
  mutable DenseMap<Operation *, std::unique_ptr<ShardingRule>> rules;
  /// requiredState's answers.
  mutable DenseMap<Value, Value> requiredStates;
  /// attributeOf's, by a spelling of the layout.
  llvm::StringMap<mlir::Attribute> layoutAttributes;
};

} // namespace partition

#endif // PARTITION_PASSES_PARTITION_STEPPROPAGATION_H
