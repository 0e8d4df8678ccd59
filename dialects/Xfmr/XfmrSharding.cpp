//===- XfmrSharding.cpp - the sharding rule of every xfmr op --------------===//
//
// Factor names in the comments: b batch, t query positions, s key positions,
// c / k / n / f features, v vocabulary, p position-table rows, hq / hkv the
// packed query / key-value heads. What is opaque today is what no pass
// shards yet: attention heads and positions, normalised features, the
// vocabulary of the loss (tensor and sequence parallelism make them
// shardable with their own collectives).
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"
#include "dialects/Xfmr/XfmrShardingSupport.h"

#include "mlir/Dialect/Tensor/IR/Tensor.h"
#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace partition::xfmr;

SmallVector<int> ShardingRule::addFactorsFor(Value value, bool opaque) {
  SmallVector<int> dims;
  for (int64_t size : cast<RankedTensorType>(value.getType()).getShape())
    dims.push_back(addFactor(size, opaque));
  return dims;
}

bool ShardingRule::isSummedOver(int factor, unsigned resultIndex) const {
  if (llvm::is_contained(results[resultIndex], factor))
    return false;
  for (int tied : tiedGroup(factor))
    if (llvm::is_contained(results[resultIndex], tied))
      return false;
  for (auto [index, dims] : llvm::enumerate(operands)) {
    bool read = resultIndex >= resultReads.size() ||
                resultReads[resultIndex].empty() ||
                llvm::is_contained(resultReads[resultIndex], index);
    if (read && llvm::is_contained(dims, factor))
      return true;
  }
  return false;
}

using namespace partition::xfmr::sharding;

namespace {

/// One factor per dimension of `like`; every value listed has those
/// factors (elementwise ops).
ShardingRule elementwise(Value like, ValueRange operands, unsigned numResults,
                         bool linear = false) {
  ShardingRule rule;
  SmallVector<int> dims = rule.addFactorsFor(like);
  for (Value operand : operands)
    rule.addOperand(rankOf(operand) == 0 ? ArrayRef<int>{} : ArrayRef(dims));
  for (unsigned i = 0; i < numResults; ++i)
    rule.addResult(dims);
  rule.linear = linear;
  return rule;
}

/// Factors for all but the last dimension of `value` (the token positions
/// of an activation [..., C]), then `last`.
SmallVector<int> leadingThen(ArrayRef<int> leading, int last) {
  SmallVector<int> dims(leading);
  dims.push_back(last);
  return dims;
}

SmallVector<int> leadingFactors(ShardingRule &rule, Value value) {
  SmallVector<int> dims;
  for (int64_t d = 0, e = rankOf(value) - 1; d < e; ++d)
    dims.push_back(rule.addFactor(dimOf(value, d)));
  return dims;
}

/// A normalisation over the last dimension: (input [..., c], gains [c]...)
/// -> [..., c]; c is opaque (the statistics mix it).
ShardingRule normalisation(Value input, unsigned numGains) {
  ShardingRule rule;
  SmallVector<int> leading = leadingFactors(rule, input);
  int c = rule.addFactor(dimOf(input, rankOf(input) - 1), /*opaque=*/true);
  rule.addOperand(leadingThen(leading, c));
  for (unsigned i = 0; i < numGains; ++i)
    rule.addOperand({c});
  rule.addResult(leadingThen(leading, c));
  return rule;
}

/// (grad [..., c], input [..., c], gamma [c]) -> (input_grad [..., c],
/// then `numGainGrads` gain gradients [c], summed over the positions).
ShardingRule normalisationGrad(Value input, unsigned numGainGrads) {
  ShardingRule rule;
  SmallVector<int> leading = leadingFactors(rule, input);
  int c = rule.addFactor(dimOf(input, rankOf(input) - 1), /*opaque=*/true);
  rule.addOperand(leadingThen(leading, c));
  rule.addOperand(leadingThen(leading, c));
  rule.addOperand({c});
  rule.addResult(leadingThen(leading, c));
  for (unsigned i = 0; i < numGainGrads; ++i)
    rule.addResult({c});
  return rule;
}

} // namespace

// --- Embeddings --------------------------------------------------------------

// (tokens [b, t], table [v, c]) -> [b, t, c]: a lookup is a sum over v of
// one-hot rows, so a vocabulary-sharded table gives a partial result.
ShardingRule EmbeddingOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTokens(), 0));
  int t = rule.addFactor(dimOf(getTokens(), 1));
  int v = rule.addFactor(dimOf(getTable(), 0));
  int c = rule.addFactor(dimOf(getTable(), 1));
  rule.addOperand({b, t});
  rule.addOperand({v, c});
  rule.addResult({b, t, c});
  rule.setWeightSplitFactor(v);
  return rule;
}

// (grad [b, t, c], tokens [b, t]) -> [v, c], summed over b and t.
ShardingRule EmbeddingGradOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTokens(), 0));
  int t = rule.addFactor(dimOf(getTokens(), 1));
  int v = rule.addFactor(dimOf(getResult(), 0));
  int c = rule.addFactor(dimOf(getResult(), 1));
  rule.addOperand({b, t, c});
  rule.addOperand({b, t});
  rule.addResult({v, c});
  return rule;
}

// (input [b, t, c], table [p, c]) -> [b, t, c]; row t of the table is added
// at position t, so p is opaque, and a split t needs the rows of its block
// (partitionLocally). With explicit positions (positions [t]) each element
// names its row: t splits like any row dimension and the table stays whole.
ShardingRule PositionEmbeddingOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getInput(), 0));
  int t = getPositions() ? rule.addFactor(dimOf(getInput(), 1))
                         : rule.addOpFactor(dimOf(getInput(), 1));
  int c = rule.addFactor(dimOf(getInput(), 2));
  int p = rule.addFactor(dimOf(getTable(), 0), /*opaque=*/true);
  rule.addOperand({b, t, c});
  rule.addOperand({p, c});
  if (getPositions())
    rule.addOperand({t});
  rule.addResult({b, t, c});
  return rule;
}

// (grad [b, t, c]) -> [p, c], summed over b. With explicit positions
// (positions [t]) also summed over t: a split t gives a partial table.
ShardingRule PositionEmbeddingGradOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getGrad(), 0));
  int t = rule.addFactor(dimOf(getGrad(), 1), /*opaque=*/!getPositions());
  int c = rule.addFactor(dimOf(getGrad(), 2));
  int p = rule.addFactor(dimOf(getResult(), 0), /*opaque=*/true);
  rule.addOperand({b, t, c});
  if (getPositions())
    rule.addOperand({t});
  rule.addResult({p, c});
  return rule;
}

// () -> positions [t]: computed whole on every device; a split t keeps this
// device's block (partitionLocally).
ShardingRule SequencePositionsOp::getShardingRule() {
  ShardingRule rule;
  int t = rule.addFactor(dimOf(getResult(), 0));
  rule.addResult({t});
  return rule;
}

// --- Normalisation -----------------------------------------------------------

ShardingRule LayerNormOp::getShardingRule() {
  return normalisation(getInput(), 2);
}
ShardingRule LayerNormGradOp::getShardingRule() {
  return normalisationGrad(getInput(), 2);
}
ShardingRule RMSNormOp::getShardingRule() {
  return normalisation(getInput(), 1);
}
ShardingRule RMSNormGradOp::getShardingRule() {
  return normalisationGrad(getInput(), 1);
}

// --- Linear layers -----------------------------------------------------------

// (x [..., k], w [n, k], bias [n]) -> [..., n], summed over k.
ShardingRule LinearOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> leading = leadingFactors(rule, getInput());
  int k = rule.addFactor(dimOf(getWeight(), 1));
  int n = rule.addFactor(dimOf(getWeight(), 0));
  rule.addOperand(leadingThen(leading, k));
  rule.addOperand({n, k});
  if (getBias())
    rule.addOperand({n});
  rule.addResult(leadingThen(leading, n));
  rule.setWeightSplitFactor(n);
  return rule;
}

// (dy [..., n], w [n, k]) -> [..., k], summed over n.
ShardingRule LinearGradInputOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> leading = leadingFactors(rule, getGrad());
  int n = rule.addFactor(dimOf(getWeight(), 0));
  int k = rule.addFactor(dimOf(getWeight(), 1));
  rule.addOperand(leadingThen(leading, n));
  rule.addOperand({n, k});
  rule.addResult(leadingThen(leading, k));
  rule.setLinearIn(0);
  return rule;
}

// (dy [..., n], x [..., k]) -> (dw [n, k], dbias [n]), summed over the
// leading (token) factors.
ShardingRule LinearGradWeightOp::getShardingRule() {
  ShardingRule rule;
  SmallVector<int> leading = leadingFactors(rule, getGrad());
  int n = rule.addFactor(dimOf(getGrad(), rankOf(getGrad()) - 1));
  int k = rule.addFactor(dimOf(getInput(), rankOf(getInput()) - 1));
  rule.addOperand(leadingThen(leading, n));
  rule.addOperand(leadingThen(leading, k));
  rule.addResult({n, k});
  if (getBiasGrad()) {
    rule.addResult({n});
    rule.setResultReads(1, {0}); // The bias gradient sums dy alone.
  }
  rule.setLinearIn(0);
  return rule;
}

// --- Elementwise -------------------------------------------------------------

ShardingRule GeluOp::getShardingRule() {
  return elementwise(getInput(), getOperation()->getOperands(), 1);
}
ShardingRule GeluGradOp::getShardingRule() {
  return elementwise(getInput(), getOperation()->getOperands(), 1);
}
ShardingRule SwigluOp::getShardingRule() {
  return elementwise(getGate(), getOperation()->getOperands(), 1);
}
ShardingRule SwigluGradOp::getShardingRule() {
  return elementwise(getGate(), getOperation()->getOperands(), 2);
}
// Linear: a partial sum may pass through (so a gradient's all-reduce can
// run after the cast back to fp32, in fp32).
ShardingRule CastOp::getShardingRule() {
  return elementwise(getInput(), getOperation()->getOperands(), 1,
                     /*linear=*/true);
}
ShardingRule AddOp::getShardingRule() {
  return elementwise(getLhs(), getOperation()->getOperands(), 1,
                     /*linear=*/true);
}
ShardingRule ScaleOp::getShardingRule() {
  return elementwise(getInput(), getOperation()->getOperands(), 1,
                     /*linear=*/true);
}

// (param, grad, m, v: one shape; step, lr: scalars) -> (param, m, v).
ShardingRule AdamWOp::getShardingRule() {
  return elementwise(getParam(), getOperation()->getOperands(), 3);
}

// --- Loss --------------------------------------------------------------------

// (logits [b, t, v], targets [b, t]) -> loss []: the mean over b and t. The
// vocabulary is opaque (a softmax normalises along it) but the op shards it
// itself: see partitionLocally.
ShardingRule SoftmaxCrossEntropyOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTargets(), 0));
  int t = rule.addFactor(dimOf(getTargets(), 1));
  int v = rule.addOpFactor(dimOf(getLogits(), 2));
  rule.addOperand({b, t, v});
  rule.addOperand({b, t});
  rule.addResult({});
  rule.setMean({b, t}, {/*isResult=*/true, 0});
  return rule;
}

// (dloss [], logits [b, t, v], targets [b, t]) -> [b, t, v], divided by the
// number of tokens (b x t) and linear in dloss.
ShardingRule SoftmaxCrossEntropyGradOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTargets(), 0));
  int t = rule.addFactor(dimOf(getTargets(), 1));
  int v = rule.addOpFactor(dimOf(getLogits(), 2));
  rule.addOperand({});
  rule.addOperand({b, t, v});
  rule.addOperand({b, t});
  rule.addResult({b, t, v});
  rule.setMean({b, t}, {/*isResult=*/false, 0});
  return rule;
}

// --- Vocabulary-parallel embedding and loss ----------------------------------
//
// vl, the local vocabulary, is opaque in every rule: `shard` places the
// local rows at shard * Vl of the global vocabulary, so splitting vl again
// would need another offset that the operands cannot express, and the loss
// statistics combine values along it (max, sum of exponentials, the
// target's column). b and t are shardable (data parallelism); c as in
// the embedding ops.

// (tokens [b, t], table [vl, c], shard []) -> [b, t, c].
ShardingRule VocabParallelEmbeddingOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTokens(), 0));
  int t = rule.addFactor(dimOf(getTokens(), 1));
  int vl = rule.addFactor(dimOf(getTable(), 0), /*opaque=*/true);
  int c = rule.addFactor(dimOf(getTable(), 1));
  rule.addOperand({b, t});
  rule.addOperand({vl, c});
  rule.addOperand({});
  rule.addResult({b, t, c});
  return rule;
}

// (grad [b, t, c], tokens [b, t], shard []) -> [vl, c], summed over b and t.
ShardingRule VocabParallelEmbeddingGradOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTokens(), 0));
  int t = rule.addFactor(dimOf(getTokens(), 1));
  int vl = rule.addFactor(dimOf(getResult(), 0), /*opaque=*/true);
  int c = rule.addFactor(dimOf(getResult(), 1));
  rule.addOperand({b, t, c});
  rule.addOperand({b, t});
  rule.addOperand({});
  rule.addResult({vl, c});
  return rule;
}

namespace {
/// The factors of local logits [b, t, vl].
struct LocalLogitsFactors {
  int b, t, vl;
};
LocalLogitsFactors localLogitsFactors(ShardingRule &rule, Value logits) {
  return {rule.addFactor(dimOf(logits, 0)), rule.addFactor(dimOf(logits, 1)),
          rule.addFactor(dimOf(logits, 2), /*opaque=*/true)};
}
} // namespace

// (logits [b, t, vl], shard [] when masked) -> [b, t].
ShardingRule VocabParallelMaxOp::getShardingRule() {
  ShardingRule rule;
  LocalLogitsFactors f = localLogitsFactors(rule, getLogits());
  rule.addOperand({f.b, f.t, f.vl});
  if (getShard())
    rule.addOperand({});
  rule.addResult({f.b, f.t});
  return rule;
}

// (logits [b, t, vl], targets [b, t], shard []) -> [b, t].
ShardingRule VocabParallelTargetLogitOp::getShardingRule() {
  ShardingRule rule;
  LocalLogitsFactors f = localLogitsFactors(rule, getLogits());
  rule.addOperand({f.b, f.t, f.vl});
  rule.addOperand({f.b, f.t});
  rule.addOperand({});
  rule.addResult({f.b, f.t});
  return rule;
}

// (logits [b, t, vl], max [b, t], shard [] when masked) -> [b, t].
ShardingRule VocabParallelSumExpOp::getShardingRule() {
  ShardingRule rule;
  LocalLogitsFactors f = localLogitsFactors(rule, getLogits());
  rule.addOperand({f.b, f.t, f.vl});
  rule.addOperand({f.b, f.t});
  if (getShard())
    rule.addOperand({});
  rule.addResult({f.b, f.t});
  return rule;
}

// (max, sum_exp, target_logit [b, t]) -> loss []: the mean over b and t.
ShardingRule VocabParallelLossOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getMax(), 0));
  int t = rule.addFactor(dimOf(getMax(), 1));
  rule.addOperand({b, t});
  rule.addOperand({b, t});
  rule.addOperand({b, t});
  rule.addResult({});
  rule.setMean({b, t}, {/*isResult=*/true, 0});
  return rule;
}

// (dloss [], logits [b, t, vl], targets [b, t], shard [], max [b, t],
// sum_exp [b, t]) -> [b, t, vl], divided by the number of tokens (b x t)
// and linear in dloss.
ShardingRule VocabParallelCrossEntropyGradOp::getShardingRule() {
  ShardingRule rule;
  LocalLogitsFactors f = localLogitsFactors(rule, getLogits());
  rule.addOperand({});
  rule.addOperand({f.b, f.t, f.vl});
  rule.addOperand({f.b, f.t});
  rule.addOperand({});
  rule.addOperand({f.b, f.t});
  rule.addOperand({f.b, f.t});
  rule.addResult({f.b, f.t, f.vl});
  rule.setMean({f.b, f.t}, {/*isResult=*/false, 0});
  return rule;
}

// --- Local partitioning -------------------------------------------------------
//
// The ops whose local computation differs from the whole one. Factor
// numbers are the order in which each rule above adds them.

// A vocabulary-sharded table (Megatron's vocab-parallel embedding): each
// device looks up the tokens of its rows and contributes zeros for the
// others, so the result is a partial sum (v is summed over in the rule).
LogicalResult EmbeddingOp::partitionLocally(LocalPartition &partition) {
  constexpr int kVocab = 2;
  if (partition.shards(kVocab) == 1)
    return success();
  OpBuilder builder(*this);
  Value shard = partition.shardIndex(builder, kVocab);
  auto local = VocabParallelEmbeddingOp::create(
      builder, getLoc(), getResult().getType(), getTokens(), getTable(), shard);
  partition.replaceOp(local->getResults());
  return success();
}

// The gradient of a vocabulary-sharded table: each device scatters the
// rows of its own tokens only.
LogicalResult EmbeddingGradOp::partitionLocally(LocalPartition &partition) {
  constexpr int kVocab = 2;
  if (partition.shards(kVocab) == 1)
    return success();
  OpBuilder builder(*this);
  Value shard = partition.shardIndex(builder, kVocab);
  auto local = VocabParallelEmbeddingGradOp::create(
      builder, getLoc(), getResult().getType(), getGrad(), getTokens(), shard);
  partition.replaceOp(local->getResults());
  return success();
}

// A row-parallel linear (input features split, the result a partial sum):
// every device would add the whole bias to its part, so each adds
// bias / shards, and the sum holds it once.
LogicalResult LinearOp::partitionLocally(LocalPartition &partition) {
  int inFeatures = cast<RankedTensorType>(getInput().getType()).getRank() - 1;
  int64_t shards = partition.shards(inFeatures);
  if (!getBias() || shards == 1)
    return success();
  OpBuilder builder(*this);
  Value bias = getBias();
  auto share = ScaleOp::create(builder, getLoc(), bias.getType(), bias,
                               builder.getF32FloatAttr(1.0 / double(shards)));
  getBiasMutable().assign(share.getResult());
  return success();
}

namespace {

/// The global statistics of a vocabulary-sharded softmax over logits
/// [b, t, v/shards]: the max over the whole vocabulary and the sum of
/// exp(logit - max), each a [b, t] all-reduce over the vocabulary's axes.
struct VocabStatistics {
  Value max, sumExp;
};
/// With a padded vocabulary (`vocab`), the padding columns are left out,
/// which needs the shard's index (`shard`).
VocabStatistics vocabStatistics(OpBuilder &builder, Location loc,
                                Value logits, int vocabFactor,
                                LocalPartition &partition, Value shard,
                                IntegerAttr vocab) {
  // The statistics stay fp32 whatever the logits' type (a bf16 sum of
  // exponentials would lose the loss's precision).
  auto type = cast<RankedTensorType>(logits.getType());
  auto rows = RankedTensorType::get(type.getShape().drop_back(),
                                    builder.getF32Type());
  Value mask = vocab ? shard : Value();
  Value localMax =
      VocabParallelMaxOp::create(builder, loc, rows, logits, mask, vocab);
  Value max = partition.allReduce(builder, localMax, vocabFactor, true);
  Value localSum = VocabParallelSumExpOp::create(builder, loc, rows, logits,
                                                 max, mask, vocab);
  Value sumExp = partition.allReduce(builder, localSum, vocabFactor, false);
  return {max, sumExp};
}

} // namespace

// Megatron's vocab-parallel cross-entropy: never gathers the logits; three
// [b, t] all-reduces (max, sum of exponentials, target logit).
LogicalResult SoftmaxCrossEntropyOp::partitionLocally(
    LocalPartition &partition) {
  constexpr int kVocab = 2;
  if (partition.shards(kVocab) == 1)
    return success();
  OpBuilder builder(*this);
  Location loc = getLoc();
  // Unpadded, the shard index comes after the statistics (as it always
  // has); padded, they need it.
  Value shard =
      getVocab() ? partition.shardIndex(builder, kVocab) : Value();
  VocabStatistics stats = vocabStatistics(builder, loc, getLogits(), kVocab,
                                          partition, shard, getVocabAttr());
  if (!shard)
    shard = partition.shardIndex(builder, kVocab);
  Value localTarget = VocabParallelTargetLogitOp::create(
      builder, loc, stats.max.getType(), getLogits(), getTargets(), shard);
  Value target = partition.allReduce(builder, localTarget, kVocab, false);
  auto loss = VocabParallelLossOp::create(builder, loc, getLoss().getType(),
                                          stats.max, stats.sumExp, target);
  partition.replaceOp(loss->getResults());
  return success();
}

// Its gradient: softmax from the global statistics (recomputed: two [b, t]
// all-reduces, instead of keeping them alive from the forward pass) minus
// the one-hot of the targets in this block.
LogicalResult SoftmaxCrossEntropyGradOp::partitionLocally(
    LocalPartition &partition) {
  constexpr int kVocab = 2;
  if (partition.shards(kVocab) == 1)
    return success();
  OpBuilder builder(*this);
  Location loc = getLoc();
  // Unpadded, the shard index comes after the statistics (as it always
  // has); padded, they need it.
  Value shard =
      getVocab() ? partition.shardIndex(builder, kVocab) : Value();
  VocabStatistics stats = vocabStatistics(builder, loc, getLogits(), kVocab,
                                          partition, shard, getVocabAttr());
  if (!shard)
    shard = partition.shardIndex(builder, kVocab);
  auto grad = VocabParallelCrossEntropyGradOp::create(
      builder, loc, getResult().getType(), getLossGrad(), getLogits(),
      getTargets(), shard, stats.max, stats.sumExp, getVocabAttr());
  partition.replaceOp(grad->getResults());
  return success();
}

// The whole positions, then this device's block of them.
LogicalResult SequencePositionsOp::partitionLocally(
    LocalPartition &partition) {
  if (partition.shards(0) == 1)
    return success();
  OpBuilder builder(*this);
  auto whole = SequencePositionsOp::create(
      builder, getLoc(),
      RankedTensorType::get({int64_t(getLength())}, builder.getI32Type()),
      getLengthAttr(), getChunksAttr());
  Value block = partition.sliceBlock(builder, whole, /*dim=*/0, /*factor=*/0);
  partition.replaceOp(block);
  return success();
}

// Positions split into blocks (sequence parallelism): each device adds the
// table rows of its own positions, the block of the first T rows. Explicit
// positions name their rows themselves: nothing to adapt.
LogicalResult PositionEmbeddingOp::partitionLocally(
    LocalPartition &partition) {
  constexpr int kPositions = 1;
  int64_t shards = partition.shards(kPositions);
  if (shards == 1 || getPositions())
    return success();
  OpBuilder builder(*this);
  Location loc = getLoc();
  RankedTensorType table = getTable().getType();
  int64_t positions = dimOf(getInput(), 1) * shards;
  Value rows = getTable();
  if (table.getDimSize(0) != positions)
    rows = tensor::ExtractSliceOp::create(
        builder, loc, getTable(), ArrayRef<OpFoldResult>{
            builder.getIndexAttr(0), builder.getIndexAttr(0)},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(positions),
                               builder.getIndexAttr(table.getDimSize(1))},
        ArrayRef<OpFoldResult>{builder.getIndexAttr(1),
                               builder.getIndexAttr(1)});
  Value block = partition.sliceBlock(builder, rows, /*dim=*/0, kPositions);
  getTableMutable().assign(block);
  return success();
}
