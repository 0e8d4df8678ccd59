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
  return llvm::any_of(operands, [&](const SmallVector<int, 4> &dims) {
    return llvm::is_contained(dims, factor);
  });
}

namespace {

int64_t rankOf(Value value) {
  return cast<RankedTensorType>(value.getType()).getRank();
}

int64_t dimOf(Value value, int64_t dim) {
  return cast<RankedTensorType>(value.getType()).getDimSize(dim);
}

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

/// Attention operands: query-like values are [b, t, hq], key-like values
/// [b, s, hkv]. Only the batch is shardable today.
struct AttentionFactors {
  int b, t, s, hq, hkv;
};
AttentionFactors attentionFactors(ShardingRule &rule, Value query, Value key) {
  return {rule.addFactor(dimOf(query, 0)),
          rule.addFactor(dimOf(query, 1), /*opaque=*/true),
          rule.addFactor(dimOf(key, 1), /*opaque=*/true),
          rule.addFactor(dimOf(query, 2), /*opaque=*/true),
          rule.addFactor(dimOf(key, 2), /*opaque=*/true)};
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
// at position t, so p is opaque.
ShardingRule PositionEmbeddingOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getInput(), 0));
  int t = rule.addFactor(dimOf(getInput(), 1), /*opaque=*/true);
  int c = rule.addFactor(dimOf(getInput(), 2));
  int p = rule.addFactor(dimOf(getTable(), 0), /*opaque=*/true);
  rule.addOperand({b, t, c});
  rule.addOperand({p, c});
  rule.addResult({b, t, c});
  return rule;
}

// (grad [b, t, c]) -> [p, c], summed over b.
ShardingRule PositionEmbeddingGradOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getGrad(), 0));
  int t = rule.addFactor(dimOf(getGrad(), 1), /*opaque=*/true);
  int c = rule.addFactor(dimOf(getGrad(), 2));
  int p = rule.addFactor(dimOf(getResult(), 0), /*opaque=*/true);
  rule.addOperand({b, t, c});
  rule.addResult({p, c});
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
  if (getBiasGrad())
    rule.addResult({n});
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

// --- Attention ---------------------------------------------------------------

// (q [b, t, hq], k [b, s, hkv], v [b, s, hkv]) -> [b, t, hq].
ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule;
  AttentionFactors f = attentionFactors(rule, getQuery(), getKey());
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addResult({f.b, f.t, f.hq});
  return rule;
}

// (dy [b, t, hq], q, k, v) -> (dq [b, t, hq], dk, dv [b, s, hkv]).
ShardingRule AttentionGradOp::getShardingRule() {
  ShardingRule rule;
  AttentionFactors f = attentionFactors(rule, getQuery(), getKey());
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addResult({f.b, f.t, f.hq});
  rule.addResult({f.b, f.s, f.hkv});
  rule.addResult({f.b, f.s, f.hkv});
  return rule;
}

// --- Loss --------------------------------------------------------------------

// (logits [b, t, v], targets [b, t]) -> loss []: the mean over b and t.
ShardingRule SoftmaxCrossEntropyOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getTargets(), 0));
  int t = rule.addFactor(dimOf(getTargets(), 1));
  int v = rule.addFactor(dimOf(getLogits(), 2), /*opaque=*/true);
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
  int v = rule.addFactor(dimOf(getLogits(), 2), /*opaque=*/true);
  rule.addOperand({});
  rule.addOperand({b, t, v});
  rule.addOperand({b, t});
  rule.addResult({b, t, v});
  rule.setMean({b, t}, {/*isResult=*/false, 0});
  return rule;
}
