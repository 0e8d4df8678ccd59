//===- XfmrMoeSharding.cpp - sharding rules of the mixture-of-experts ops -===//
//
// Factor names: b the batch (the token groups), s the sequence, e the
// experts, k the top-k choices, c the capacity rows, h / f / n features.
//
// The sequence is opaque in routing, dispatch and combine: an expert's
// capacity counts the group's tokens in sequence order, so a token's slot
// depends on the tokens before it. The experts are opaque there too: the
// top-k compares every expert's score. Splitting the batch (data
// parallelism) and the experts' features (tensor parallelism of the expert
// FFN, Megatron-LM's expert tensor parallelism) needs nothing more.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"
#include "dialects/Xfmr/XfmrShardingSupport.h"

using namespace mlir;
using namespace partition::xfmr;
using namespace partition::xfmr::sharding;

namespace {

/// The routing factors of logits [b, s, e] and choices [b, s, k].
struct RoutingFactors {
  int b, s, e, k;
};

RoutingFactors routingFactors(ShardingRule &rule, Value logits,
                              int64_t topK) {
  return {rule.addFactor(dimOf(logits, 0)),
          rule.addFactor(dimOf(logits, 1), /*opaque=*/true),
          rule.addFactor(dimOf(logits, 2), /*opaque=*/true),
          rule.addFactor(topK, /*opaque=*/true)};
}

/// The factors of tokens [b, s, h], their choices [b, s, k] and an expert
/// buffer [b, e, c, h].
struct DispatchFactors {
  int b, s, h, k, e, c;
};

DispatchFactors dispatchFactors(ShardingRule &rule, Value tokens,
                                Value experts, Value buffer) {
  DispatchFactors f;
  f.b = rule.addFactor(dimOf(tokens, 0));
  f.s = rule.addFactor(dimOf(tokens, 1), /*opaque=*/true);
  f.h = rule.addFactor(dimOf(tokens, 2));
  f.k = rule.addFactor(dimOf(experts, 2), /*opaque=*/true);
  f.e = rule.addFactor(dimOf(buffer, 1), /*opaque=*/true);
  f.c = rule.addFactor(dimOf(buffer, 2), /*opaque=*/true);
  return f;
}

} // namespace

// (logits [b, s, e], bias [e]) -> (gates, experts, slots [b, s, k],
// counts [b, e]).
ShardingRule MoeRouteOp::getShardingRule() {
  ShardingRule rule;
  RoutingFactors f = routingFactors(rule, getLogits(), getTopK());
  rule.addOperand({f.b, f.s, f.e});
  if (getBias())
    rule.addOperand({f.e});
  for (int i = 0; i < 3; ++i)
    rule.addResult({f.b, f.s, f.k});
  rule.addResult({f.b, f.e});
  return rule;
}

// (dgates [b, s, k], logits [b, s, e], experts [b, s, k]) -> [b, s, e],
// linear in dgates.
ShardingRule MoeRouteGradOp::getShardingRule() {
  ShardingRule rule;
  RoutingFactors f = routingFactors(rule, getLogits(), getTopK());
  rule.addOperand({f.b, f.s, f.k});
  rule.addOperand({f.b, f.s, f.e});
  rule.addOperand({f.b, f.s, f.k});
  rule.addResult({f.b, f.s, f.e});
  rule.setLinearIn(0);
  return rule;
}

// (x [b, s, h], experts, slots [b, s, k]) -> [b, e, c, h].
ShardingRule MoeDispatchOp::getShardingRule() {
  ShardingRule rule;
  DispatchFactors f =
      dispatchFactors(rule, getInput(), getExperts(), getResult());
  rule.addOperand({f.b, f.s, f.h});
  rule.addOperand({f.b, f.s, f.k});
  rule.addOperand({f.b, f.s, f.k});
  rule.addResult({f.b, f.e, f.c, f.h});
  rule.setLinearIn(0);
  return rule;
}

// (dxe [b, e, c, h], experts, slots [b, s, k]) -> [b, s, h], linear in dxe.
ShardingRule MoeDispatchGradOp::getShardingRule() {
  ShardingRule rule;
  DispatchFactors f =
      dispatchFactors(rule, getResult(), getExperts(), getGrad());
  rule.addOperand({f.b, f.e, f.c, f.h});
  rule.addOperand({f.b, f.s, f.k});
  rule.addOperand({f.b, f.s, f.k});
  rule.addResult({f.b, f.s, f.h});
  rule.setLinearIn(0);
  return rule;
}

// (ye [b, e, c, h], gates, experts, slots [b, s, k]) -> [b, s, h], linear
// in ye (a row-parallel expert FFN's partial output combines partially).
ShardingRule MoeCombineOp::getShardingRule() {
  ShardingRule rule;
  DispatchFactors f =
      dispatchFactors(rule, getResult(), getExperts(), getExpertOutput());
  rule.addOperand({f.b, f.e, f.c, f.h});
  for (int i = 0; i < 3; ++i)
    rule.addOperand({f.b, f.s, f.k});
  rule.addResult({f.b, f.s, f.h});
  rule.setLinearIn(0);
  return rule;
}

// (dy [b, s, h], ye [b, e, c, h], gates, experts, slots [b, s, k])
//   -> (dye [b, e, c, h], dgates [b, s, k]); dgates sums over h.
ShardingRule MoeCombineGradOp::getShardingRule() {
  ShardingRule rule;
  DispatchFactors f =
      dispatchFactors(rule, getGrad(), getExperts(), getExpertOutput());
  rule.addOperand({f.b, f.s, f.h});
  rule.addOperand({f.b, f.e, f.c, f.h});
  for (int i = 0; i < 3; ++i)
    rule.addOperand({f.b, f.s, f.k});
  rule.addResult({f.b, f.e, f.c, f.h});
  rule.addResult({f.b, f.s, f.k});
  rule.setLinearIn(0);
  return rule;
}

// (x [b, e, c, k], w [e, n, k], counts [b, e]) -> [b, e, c, n], summed
// over k; a tensor-parallel policy splits n (column-parallel experts).
ShardingRule ExpertLinearOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getInput(), 0));
  int e = rule.addFactor(dimOf(getInput(), 1));
  int c = rule.addFactor(dimOf(getInput(), 2));
  int k = rule.addFactor(dimOf(getWeight(), 2));
  int n = rule.addFactor(dimOf(getWeight(), 1));
  rule.addOperand({b, e, c, k});
  rule.addOperand({e, n, k});
  rule.addOperand({b, e});
  rule.addResult({b, e, c, n});
  rule.setWeightSplitFactor(n);
  rule.setExpertFactor(e);
  return rule;
}

// (dy [b, e, c, n], w [e, n, k], counts [b, e]) -> [b, e, c, k], summed
// over n.
ShardingRule ExpertLinearGradInputOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getGrad(), 0));
  int e = rule.addFactor(dimOf(getGrad(), 1));
  int c = rule.addFactor(dimOf(getGrad(), 2));
  int n = rule.addFactor(dimOf(getWeight(), 1));
  int k = rule.addFactor(dimOf(getWeight(), 2));
  rule.addOperand({b, e, c, n});
  rule.addOperand({e, n, k});
  rule.addOperand({b, e});
  rule.addResult({b, e, c, k});
  rule.setLinearIn(0);
  rule.setExpertFactor(e);
  return rule;
}

// (dy [b, e, c, n], x [b, e, c, k], counts [b, e]) -> [e, n, k], summed
// over b and c.
ShardingRule ExpertLinearGradWeightOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getGrad(), 0));
  int e = rule.addFactor(dimOf(getGrad(), 1));
  int c = rule.addFactor(dimOf(getGrad(), 2));
  int n = rule.addFactor(dimOf(getGrad(), 3));
  int k = rule.addFactor(dimOf(getInput(), 3));
  rule.addOperand({b, e, c, n});
  rule.addOperand({b, e, c, k});
  rule.addOperand({b, e});
  rule.addResult({e, n, k});
  rule.setLinearIn(0);
  rule.setExpertFactor(e);
  return rule;
}

// (logits [b, s, e], experts [b, s, k]) -> []: the mean over b of each
// group's balance term (and of the z-loss over b and s).
ShardingRule MoeAuxLossOp::getShardingRule() {
  ShardingRule rule;
  RoutingFactors f =
      routingFactors(rule, getLogits(), dimOf(getExperts(), 2));
  rule.addOperand({f.b, f.s, f.e});
  rule.addOperand({f.b, f.s, f.k});
  rule.addResult({});
  rule.setMean({f.b}, {/*isResult=*/true, 0});
  return rule;
}

// (dloss [], logits [b, s, e], experts [b, s, k]) -> [b, s, e], divided by
// the batch and linear in dloss.
ShardingRule MoeAuxLossGradOp::getShardingRule() {
  ShardingRule rule;
  RoutingFactors f =
      routingFactors(rule, getLogits(), dimOf(getExperts(), 2));
  rule.addOperand({});
  rule.addOperand({f.b, f.s, f.e});
  rule.addOperand({f.b, f.s, f.k});
  rule.addResult({f.b, f.s, f.e});
  rule.setMean({f.b}, {/*isResult=*/false, 0});
  return rule;
}

// counts [b, e] -> load [e], summed over b: a batch split over the data and
// expert ranks leaves each rank a part of the load, which the partitioner
// completes by an all_reduce before the load is used (the global load that
// DeepSeek-V3's bias update needs, the same on every plan).
ShardingRule MoeExpertLoadOp::getShardingRule() {
  ShardingRule rule;
  int b = rule.addFactor(dimOf(getCounts(), 0));
  int e = rule.addFactor(dimOf(getCounts(), 1), /*opaque=*/true);
  rule.addOperand({b, e});
  rule.addResult({e});
  return rule;
}

// (bias [e], load [e]) -> [e]; the load's mean couples the experts, so e
// stays whole.
ShardingRule MoeBiasUpdateOp::getShardingRule() {
  ShardingRule rule;
  int e = rule.addFactor(dimOf(getBias(), 0), /*opaque=*/true);
  rule.addOperand({e});
  rule.addOperand({e});
  rule.addResult({e});
  return rule;
}
