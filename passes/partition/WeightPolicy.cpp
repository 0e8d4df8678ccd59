//===- WeightPolicy.cpp - Megatron-LM's placement of weights --------------===//

#include "passes/partition/WeightPolicy.h"

#include "dialects/Xfmr/XfmrOps.h"

using namespace mlir;
using namespace partition::xfmr;

namespace partition {

namespace {

/// Places weights as `base` does, with the expert dimension of each MoE
/// weight split over the expert axis besides (major to its tensor split).
class ExpertAxisPlacement : public WeightPlacement {
public:
  ExpertAxisPlacement(WeightPlacement &base,
                      const llvm::StringMap<unsigned> &expertDims,
                      StringRef expertAxis)
      : base(base), expertDims(expertDims), expertAxis(expertAxis) {}

  Layout layoutOf(Value value) const override { return base.layoutOf(value); }
  std::optional<StringRef> undecidedState(Value value) const override {
    return base.undecidedState(value);
  }
  bool isPlacedState(Value value) const override {
    return base.isPlacedState(value);
  }
  std::optional<int64_t> layerOf(Value value) const override {
    return base.layerOf(value);
  }
  LogicalResult decideState(StringRef name, ArrayRef<Axes> dims) override {
    SmallVector<Axes> withExperts(dims.begin(), dims.end());
    auto found = expertDims.find(name);
    if (found != expertDims.end())
      withExperts[found->second].insert(withExperts[found->second].begin(),
                                        expertAxis);
    return base.decideState(name, withExperts);
  }

private:
  WeightPlacement &base;
  const llvm::StringMap<unsigned> &expertDims;
  StringRef expertAxis;
};

LogicalResult placeTensorParallel(Operation *op, const PartitionMesh &mesh,
                                  WeightPlacement &placement);

} // namespace

// Expert parallelism: a MoE op's stacked expert weights split their expert
// dimension over the expert axis, whatever the tensor policy does with
// their features (Megatron-LM's expert tensor parallelism = tp).
LogicalResult placeWeightsFor(Operation *op, const PartitionMesh &mesh,
                              WeightPlacement &placement) {
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  // A parameter read through a layout-preserving op (the cast of mixed
  // precision) comes right before the op that uses it, after every other
  // operand of that op: decide for that op now, so that the cast already
  // produces the chosen blocks (with or without tensor axes: a bf16 expert
  // weight must stay split over the expert axis).
  if (ruled && isLayoutPreserving(op)) {
    if (!placement.undecidedState(op->getResult(0)))
      return success();
    for (Operation *user = op->getNextNode(); user; user = user->getNextNode())
      if (llvm::is_contained(user->getOperands(), op->getResult(0)))
        return placeWeightsFor(user, mesh, placement);
    return success();
  }
  // The tensor policy runs only with tensor axes of more than one rank
  // (a plan may have a tp axis of size 1).
  auto tensorPolicy = [&](WeightPlacement &target) {
    return mesh.hasTensor() ? placeTensorParallel(op, mesh, target)
                            : success();
  };
  if (!ruled || mesh.expertAxis.empty())
    return tensorPolicy(placement);
  ShardingRule rule = ruled.getShardingRule();
  int expert = rule.getExpertFactor();
  if (expert == ShardingRule::kNoFactor)
    return tensorPolicy(placement);
  llvm::StringMap<unsigned> expertDims;
  SmallVector<std::pair<unsigned, StringRef>> weights;
  int64_t shards = mesh.sizeOf(mesh.expertAxis);
  for (OpOperand &use : op->getOpOperands()) {
    std::optional<StringRef> name = placement.undecidedState(use.get());
    ArrayRef<int> factors = rule.getOperand(use.getOperandNumber());
    const int *at = llvm::find(factors, expert);
    if (!name || at == factors.end())
      continue;
    int64_t experts = rule.getFactors()[expert].size;
    if (experts % shards != 0)
      return op->emitOpError()
             << "cannot split the " << experts << " experts of '" << *name
             << "' over " << mesh.expertAxis << " = " << shards
             << " for expert parallelism; choose moe.expert_parallel that "
                "divides "
             << experts;
    expertDims[*name] = at - factors.begin();
    weights.push_back({use.getOperandNumber(), *name});
  }
  ExpertAxisPlacement withExperts(placement, expertDims, mesh.expertAxis);
  if (failed(tensorPolicy(withExperts)))
    return failure();
  // What the tensor policy left unplaced (no tensor axes): the experts'
  // split alone.
  for (auto [index, name] : weights) {
    if (!placement.undecidedState(op->getOperand(index)))
      continue;
    SmallVector<Axes> dims(rule.getOperand(index).size());
    dims[expertDims[name]] = {mesh.expertAxis};
    if (failed(placement.decideState(name, dims)))
      return failure();
  }
  return success();
}

namespace {

LogicalResult placeTensorParallel(Operation *op, const PartitionMesh &mesh,
                                  WeightPlacement &placement) {
  auto ruled = dyn_cast<ShardingRuleOpInterface>(op);
  // (Layout-preserving ops are looked through by placeWeightsFor.)
  if (!ruled || isLayoutPreserving(op))
    return success();

  // Only ops that name a weight factor (matrix products and lookups) have
  // a policy; the parameters of the others (norm gains, position tables)
  // are placed by the op's factors at its turn.
  ShardingRule rule = ruled.getShardingRule();
  int split = rule.getWeightSplitFactor();
  if (split == ShardingRule::kNoFactor)
    return success();
  SmallVector<std::pair<unsigned, StringRef>> weights;
  llvm::SmallSetVector<int, 4> weightFactors;
  for (OpOperand &use : op->getOpOperands())
    if (std::optional<StringRef> name = placement.undecidedState(use.get())) {
      weights.push_back({use.getOperandNumber(), *name});
      for (int factor : rule.getOperand(use.getOperandNumber()))
        if (factor != ShardingRule::kNoFactor)
          weightFactors.insert(factor);
    }
  if (weights.empty())
    return success();

  // Row-parallel: an activation already splits a factor of the op's
  // parameters over the tensor axis; the unplaced ones take that split,
  // whole elsewhere. Decided now, not at the op's turn, so that a cast of
  // a weight before the op already produces its blocks.
  const Axes &tensorAxes = mesh.tensorAxes;
  auto isTensorAxis = [&](StringRef axis) {
    return llvm::is_contained(tensorAxes, axis);
  };
  llvm::SmallDenseSet<int> parameterFactors;
  for (OpOperand &use : op->getOpOperands())
    if (placement.undecidedState(use.get()) ||
        placement.isPlacedState(use.get()))
      for (int factor : rule.getOperand(use.getOperandNumber()))
        parameterFactors.insert(factor);
  llvm::SmallDenseMap<int, Axes> followed;
  bool besidePlacedState = false;
  for (OpOperand &use : op->getOpOperands()) {
    if (placement.undecidedState(use.get()))
      continue;
    bool state = placement.isPlacedState(use.get());
    Layout layout = placement.layoutOf(use.get());
    for (auto [dim, factor] :
         llvm::enumerate(rule.getOperand(use.getOperandNumber()))) {
      if (factor == ShardingRule::kNoFactor)
        continue;
      besidePlacedState |= state && weightFactors.contains(factor);
      if (!state && parameterFactors.contains(factor) &&
          llvm::any_of(layout.dims[dim], isTensorAxis))
        followed.try_emplace(factor, layout.dims[dim]);
    }
  }
  if (!followed.empty()) {
    for (auto [index, name] : weights) {
      SmallVector<Axes> dims;
      for (int factor : rule.getOperand(index))
        dims.push_back(followed.lookup(factor));
      if (failed(placement.decideState(name, dims)))
        return failure();
    }
    return success();
  }
  // Beside a placed weight (a bias whose weight is tied or annotated), the
  // op's factors place the rest at its turn.
  if (besidePlacedState)
    return success();

  // Column-parallel (vocab-parallel): the op's preferred weight factor,
  // over the tensor axes whose shards divide the blocks its readers keep
  // whole (key-value heads fewer than tp: replicated on the ranks whose
  // query heads use them).
  Axes axes = mesh.tensorAxesOf(placement.layerOf(
      op->getOperand(weights.front().first)));
  if (axes.empty())
    return success();
  for (OpResult result : op->getResults())
    for (auto [dim, factor] :
         llvm::enumerate(rule.getResult(result.getResultNumber()))) {
      if (factor != split)
        continue;
      for (OpOperand &use : result.getUses()) {
        auto reader = dyn_cast<ShardingRuleOpInterface>(use.getOwner());
        if (!reader)
          continue;
        ShardingRule readerRule = reader.getShardingRule();
        int read = readerRule.getOperand(use.getOperandNumber())[dim];
        int64_t blocks = read == ShardingRule::kNoFactor
                             ? 0
                             : readerRule.getFactors()[read].blocks;
        while (blocks > 0 && axes.size() > 1 &&
               blocks % mesh.shardsOf(axes) != 0)
          axes.pop_back();
      }
    }
  int64_t shards = mesh.shardsOf(axes);
  for (auto [index, name] : weights) {
    ArrayRef<int> factors = rule.getOperand(index);
    if (!llvm::is_contained(factors, split))
      continue;
    SmallVector<Axes> dims(factors.size());
    for (auto [dim, factor] : llvm::enumerate(factors)) {
      if (factor != split)
        continue;
      int64_t size = rule.getFactors()[factor].size;
      if (size % shards != 0)
        return op->emitOpError()
               << "cannot split dimension " << dim << " (" << size
               << ") of '" << name << "' over "
               << (axes.size() == 1 ? axes.front().str() : describe(axes))
               << " = " << shards
               << " for tensor parallelism; choose a tensor-parallel degree "
                  "that divides "
               << size;
      dims[dim] = axes;
    }
    if (failed(placement.decideState(name, dims)))
      return failure();
  }
  return success();
}

} // namespace

} // namespace partition
