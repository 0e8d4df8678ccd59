//===- ShardingRule.h - how an op splits over its iteration space -*- C++ -*-//
//
// The sharding rule of an op, after Shardy's OpShardingRule: the op's
// iteration space is a list of factors (batch, sequence, features, ...), and
// every dimension of every operand and result is one factor, or none. The
// partitioner shards factors, not dimensions: sharding a factor over mesh
// axes shards every dimension it maps to, so the rule is all a pass needs to
// know about an op to run it on local shards.
//
//  - A factor that some operand has but a result does not is summed over for
//    that result: sharding it leaves the result partial, each device holding
//    a part of a sum that an all_reduce completes (the weight gradient of a
//    linear sharded on batch, the output of a row-parallel linear).
//  - An opaque factor must stay whole: the op mixes values along it in a way
//    that is not a sum (a softmax's normaliser, a causal mask's positions).
//  - A mean divides by the global size of its factors: when those are
//    sharded, the local op divides by the local size, and scaling one operand
//    or result (the op is linear in it) by local / global size makes the
//    local value that share of the global one.
//
// Example, xfmr.linear (%x: [B, T, K], %w: [N, K]) -> [B, T, N]:
//   factors b = B, t = T, k = K, n = N
//   operands ([b, t, k], [n, k]), result ([b, t, n])
//   k is summed over: sharding it on tp makes the result partial over tp.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_XFMR_SHARDINGRULE_H
#define PARTITION_DIALECTS_XFMR_SHARDINGRULE_H

#include "mlir/IR/Builders.h"
#include "mlir/IR/Value.h"
#include "mlir/IR/ValueRange.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/SmallVector.h"

#include <cstdint>
#include <optional>

namespace partition::xfmr {

class ShardingRule {
public:
  /// A dimension that belongs to no factor (its size is fixed).
  static constexpr int kNoFactor = -1;

  struct Factor {
    int64_t size = 0;
    bool opaque = false;
    /// The op's partitionLocally() computes the op with this (opaque)
    /// factor sharded, with collectives of its own (a vocabulary-parallel
    /// cross-entropy); the results are then complete along it.
    bool partitionedByOp = false;
    /// The factor is made of this many indivisible blocks (attention
    /// heads): it splits only into a number of shards that divides them
    /// (0: any number that divides its size).
    int64_t blocks = 0;
  };
  /// Where a mean's correction applies: an operand or a result.
  struct ScaledValue {
    bool isResult = false;
    unsigned index = 0;
  };

  /// A new factor of `size`.
  int addFactor(int64_t size, bool opaque = false) {
    factors.push_back({size, opaque, false});
    return static_cast<int>(factors.size()) - 1;
  }
  /// An opaque factor that the op's partitionLocally() knows how to shard.
  int addOpFactor(int64_t size) {
    factors.push_back({size, true, true});
    return static_cast<int>(factors.size()) - 1;
  }
  /// Factors for the dimensions of the next operand / result, in order.
  void addOperand(llvm::ArrayRef<int> dims) { operands.emplace_back(dims); }
  void addResult(llvm::ArrayRef<int> dims) { results.emplace_back(dims); }
  /// One new factor per dimension of `value`'s shape.
  llvm::SmallVector<int> addFactorsFor(mlir::Value value, bool opaque = false);
  /// Result `result` is computed from the listed operands only (a linear's
  /// bias gradient does not read its input): it sums over no factor that
  /// only the other operands have. By default a result reads every operand.
  void setResultReads(unsigned result, llvm::ArrayRef<unsigned> operands) {
    if (resultReads.size() <= result)
      resultReads.resize(result + 1);
    resultReads[result].assign(operands.begin(), operands.end());
  }
  /// Factors `a` and `b` index the same thing at different granularity
  /// (query heads and the key-value heads of their GQA groups): they are
  /// split alike, and a result that has one is not a sum over the other.
  /// When the coarser one has fewer blocks than the finer one's shards (2
  /// key-value heads, query heads over tp = 4), it is split over a major
  /// part of the finer one's axes only and replicated over the rest; a
  /// result that has it is then a sum over the rest (Megatron-LM's
  /// replicated key-value heads).
  void tie(int a, int b) { ties.push_back({a, b}); }
  void setBlocks(int factor, int64_t blocks) {
    factors[factor].blocks = blocks;
  }
  /// The factor tied to `factor`, or kNoFactor (the first tie that names
  /// it; tiedGroup for all).
  int tiedWith(int factor) const {
    for (auto [a, b] : ties)
      if (a == factor || b == factor)
        return a == factor ? b : a;
    return kNoFactor;
  }
  /// Every factor tied to `factor`, directly or through others (the query
  /// heads, their key-value heads and the heads of a log-sum-exp
  /// [b, h, t]); `factor` itself excluded.
  llvm::SmallVector<int, 2> tiedGroup(int factor) const {
    llvm::SmallVector<int, 2> group = {factor};
    for (size_t next = 0; next < group.size(); ++next)
      for (auto [a, b] : ties)
        for (auto [from, to] : {std::pair(a, b), std::pair(b, a)})
          if (from == group[next] && !llvm::is_contained(group, to))
            group.push_back(to);
    group.erase(group.begin());
    return group;
  }
  /// The op divides by the product of the sizes of `factors`; it is linear
  /// in `value`.
  void setMean(llvm::ArrayRef<int> factors, ScaledValue value) {
    meanFactors.assign(factors.begin(), factors.end());
    meanScaled = value;
  }

  llvm::ArrayRef<Factor> getFactors() const { return factors; }
  llvm::ArrayRef<int> getOperand(unsigned i) const { return operands[i]; }
  llvm::ArrayRef<int> getResult(unsigned i) const { return results[i]; }
  unsigned getNumOperands() const { return operands.size(); }
  unsigned getNumResults() const { return results.size(); }
  llvm::ArrayRef<int> getMeanFactors() const { return meanFactors; }
  std::optional<ScaledValue> getMeanScaled() const { return meanScaled; }

  /// Whether result `resultIndex` sums over `factor` (an operand has it, the
  /// result does not).
  bool isSummedOver(int factor, unsigned resultIndex) const;

  /// Megatron-LM's choice for the op's weights: the factor a tensor-parallel
  /// policy splits when this op is the first to read a parameter that no
  /// other operand splits already (a linear's output features: column-
  /// parallel; an embedding's vocabulary: vocab-parallel).
  void setWeightSplitFactor(int factor) { weightSplitFactor = factor; }
  int getWeightSplitFactor() const { return weightSplitFactor; }

  /// The factor that indexes the experts of a MoE layer (their stacked
  /// weights' first dimension): expert parallelism splits it over its axis
  /// when the op places the weights.
  void setExpertFactor(int factor) { expertFactor = factor; }
  int getExpertFactor() const { return expertFactor; }

  /// Results are sums of (scaled) operands: partial operands, all over the
  /// same axes, give a result partial over them. (add, scale.)
  bool linear = false;

  /// Every result is linear in operand `operand` (a matrix product in its
  /// output gradient): a partial sum there, the only partial operand, gives
  /// partial results when no factor is split over its axes.
  void setLinearIn(unsigned operand) { linearIn.push_back(operand); }
  bool isLinearIn(unsigned operand) const {
    return llvm::is_contained(linearIn, operand);
  }

private:
  llvm::SmallVector<Factor> factors;
  llvm::SmallVector<llvm::SmallVector<int, 4>> operands, results;
  llvm::SmallVector<int> meanFactors;
  std::optional<ScaledValue> meanScaled;
  llvm::SmallVector<std::pair<int, int>> ties;
  int weightSplitFactor = kNoFactor;
  int expertFactor = kNoFactor;
  llvm::SmallVector<unsigned, 1> linearIn;
  /// Per result: the operands it reads (empty: all).
  llvm::SmallVector<llvm::SmallVector<unsigned, 2>> resultReads;
};

/// What an op's partitionLocally() gets from the partitioning pass: the op,
/// whose operands are already local values (and whose results already have
/// their local types), how its factors are sharded, and the means to emit
/// rank-dependent values and collectives. An op that rewrites itself
/// replaces its results with replaceOp().
class LocalPartition {
public:
  /// Mesh axes, major first.
  using Axes = llvm::SmallVector<llvm::StringRef, 2>;

  virtual ~LocalPartition() = default;

  /// The axes factor `factor` is split over (empty: whole).
  virtual llvm::ArrayRef<llvm::StringRef> axes(int factor) const = 0;
  /// Into how many blocks factor `factor` is split.
  virtual int64_t shards(int factor) const = 0;
  /// A tensor<i32>: this device's block index along `factor`.
  virtual mlir::Value shardIndex(mlir::OpBuilder &builder, int factor) = 0;
  /// The reduction (sum or max) of `value` over the devices that hold the
  /// blocks of `factor`; emitted at once.
  virtual mlir::Value allReduce(mlir::OpBuilder &builder, mlir::Value value,
                                int factor, bool max) = 0;
  /// This device's block of `value` along dimension `dim`, split like
  /// `factor` (an all_slice: no communication).
  virtual mlir::Value sliceBlock(mlir::OpBuilder &builder, mlir::Value value,
                                 int64_t dim, int factor) = 0;
  /// The previous device's `value` on the ring of the devices that hold
  /// the blocks of `factor` (a dist.ring_shift: this device's goes to the
  /// next one); `label` names it in traces.
  virtual mlir::Value ringShift(mlir::OpBuilder &builder, mlir::Value value,
                                int factor, llvm::StringRef label) = 0;
  /// Replaces the op's results by `values` (same types) and erases it.
  virtual void replaceOp(mlir::ValueRange values) = 0;
};

} // namespace partition::xfmr

#endif // PARTITION_DIALECTS_XFMR_SHARDINGRULE_H
