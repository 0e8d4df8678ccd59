//===- XfmrAttentionSharding.cpp - attention's sharding rules --------------===//
//
// The sharding rules and local partitioning of attention, its gradient and
// the ring attention block ops (XfmrSharding.cpp has every other op's):
// heads split over the tensor axes (a GQA group's key-value heads
// replicated where the query heads outnumber them), query positions split
// by context parallelism, and under its ring method both sequences split,
// unrolled by ContextRing.cpp. Factor names as in XfmrSharding.cpp.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/ContextRing.h"
#include "dialects/Xfmr/XfmrOps.h"
#include "dialects/Xfmr/XfmrShardingSupport.h"

#include "llvm/ADT/StringExtras.h"

using namespace mlir;
using namespace partition::xfmr;
using namespace partition::xfmr::sharding;

namespace {

/// Attention operands: query-like values are [b, t, hq], key-like values
/// [b, s, hkv], the heads packed head-major in the last dimension, so a
/// block of hq holds whole heads when the heads divide (partitionLocally
/// checks and divides the head counts). Without explicit positions the
/// sequences are opaque: the causal mask and RoPE need global indices. With
/// them, the query sequence t is not (each query carries its position, so a
/// block of queries with its block of positions is that block of rows: Llama
/// 3's context parallelism), while the key sequence s stays opaque (a
/// softmax normalises along it); dK and dV are then sums over t.
struct AttentionFactors {
  int b, t, s, hq, hkv;
};
AttentionFactors attentionFactors(ShardingRule &rule, Value query, Value key,
                                  bool positions, bool ring) {
  // Under context parallelism's ring both sequences are the op's own: it
  // computes with its queries and keys split (ContextRing.h) and its
  // results are complete (no key-value gradient left partial).
  // Factor indices 0..4 in this order (partitionLocally names them).
  int b = rule.addFactor(dimOf(query, 0));
  int t = ring ? rule.addOpFactor(dimOf(query, 1))
               : rule.addFactor(dimOf(query, 1), !positions);
  // The ring splits the queries and the keys alike, over the same axis:
  // one factor for both sequences (an axis splits one factor only). The
  // key factor then stays unused, so that the heads keep their indices.
  int s = rule.addFactor(dimOf(key, 1), /*opaque=*/true);
  if (ring)
    s = t;
  int hq = rule.addFactor(dimOf(query, 2));
  int hkv = rule.addFactor(dimOf(key, 2));
  AttentionFactors factors{b, t, s, hq, hkv};
  rule.tie(factors.hq, factors.hkv);
  return factors;
}

/// The factors of an attention-like op, with its heads as blocks.
template <typename AttentionLike>
AttentionFactors attentionFactors(ShardingRule &rule, AttentionLike op) {
  AttentionFactors factors = attentionFactors(
      rule, op.getQuery(), op.getKey(), bool(op.getQueryPositions()),
      op->hasAttr(XfmrDialect::kContextRingAttrName));
  rule.setBlocks(factors.hq, op.getNumHeads());
  rule.setBlocks(factors.hkv, op.getNumKvHeads());
  return factors;
}

/// Heads split into blocks: each device runs num_heads / shards query heads
/// with the key-value heads of their GQA groups. With fewer key-value heads
/// than query shards, the key-value heads are split over a major part of
/// the query heads' axes only (tie() in ShardingRule.h): each key-value head
/// is replicated on the devices whose query heads use it, as in Megatron-LM.
template <typename AttentionLike>
LogicalResult localizeHeads(AttentionLike op, LocalPartition &partition) {
  constexpr int kQueryHeads = 3, kKeyValueHeads = 4;
  int64_t queryShards = partition.shards(kQueryHeads);
  int64_t keyValueShards = partition.shards(kKeyValueHeads);
  if (queryShards == 1 && keyValueShards == 1)
    return success();
  int64_t heads = op.getNumHeads(), kvHeads = op.getNumKvHeads();
  ArrayRef<StringRef> queryAxes = partition.axes(kQueryHeads);
  ArrayRef<StringRef> keyValueAxes = partition.axes(kKeyValueHeads);
  auto describe = [](ArrayRef<StringRef> axes) {
    return axes.size() == 1 ? axes.front().str()
                            : "[" + llvm::join(axes, ", ") + "]";
  };
  // The key-value heads of a device are those its query heads use when
  // their blocks are the query heads' blocks, coarsened: split over a major
  // prefix of the query heads' axes.
  if (!llvm::equal(keyValueAxes, queryAxes.take_front(keyValueAxes.size())))
    return op.emitOpError()
           << "splits the query heads over " << describe(queryAxes)
           << " but the key-value heads over " << describe(keyValueAxes)
           << "; the key-value heads must be split over a major part of the "
              "query heads' axes";
  std::string split = describe(queryAxes);
  if (heads % queryShards)
    return op.emitOpError()
           << "has " << heads << " query heads, which " << split << " = "
           << queryShards << " does not divide; choose a " << split
           << " that divides the heads";
  if (keyValueShards == queryShards && kvHeads % keyValueShards)
    return op.emitOpError()
           << "has " << kvHeads << " key-value heads, which " << split
           << " = " << queryShards << " does not divide; choose a " << split
           << " that divides the key-value heads or is a multiple of them";
  // Replicated key-value heads: the devices of one key-value block split
  // its GQA group's query heads, so the block must be one head.
  if (keyValueShards != queryShards && kvHeads != keyValueShards)
    return op.emitOpError()
           << "has " << kvHeads << " key-value heads in "
           << keyValueShards << " blocks for " << queryShards
           << " blocks of query heads; replicated key-value heads need one "
              "head per block: choose a "
           << split << " that divides the key-value heads or is a multiple "
           << "of them";
  OpBuilder builder(op);
  op.setNumHeadsAttr(builder.getI64IntegerAttr(heads / queryShards));
  op.setNumKvHeadsAttr(builder.getI64IntegerAttr(kvHeads / keyValueShards));
  return success();
}


} // namespace

// --- Attention ---------------------------------------------------------------

// (q [b, t, hq], k [b, s, hkv], v [b, s, hkv]) -> [b, t, hq].
ShardingRule AttentionOp::getShardingRule() {
  ShardingRule rule;
  AttentionFactors f = attentionFactors(rule, *this);
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.b, f.s, f.hkv});
  if (getQueryPositions()) {
    rule.addOperand({f.t});
    rule.addOperand({f.s});
  }
  rule.addResult({f.b, f.t, f.hq});
  return rule;
}

// (dy [b, t, hq], q, k, v) -> (dq [b, t, hq], dk, dv [b, s, hkv]).
ShardingRule AttentionGradOp::getShardingRule() {
  ShardingRule rule;
  AttentionFactors f = attentionFactors(rule, *this);
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.b, f.s, f.hkv});
  if (getQueryPositions()) {
    rule.addOperand({f.t});
    rule.addOperand({f.s});
  }
  rule.addResult({f.b, f.t, f.hq});
  rule.addResult({f.b, f.s, f.hkv});
  rule.addResult({f.b, f.s, f.hkv});
  return rule;
}

// --- Ring attention ----------------------------------------------------------

namespace {
/// The factors of a ring attention block op: those of attention (in its
/// order, which localizeHeads reads), except that the query positions t
/// split (each query carries its position), plus the heads h of the
/// log-sum-exp [b, h, t], tied to the packed query heads.
struct BlockFactors {
  AttentionFactors a;
  int h;
};
template <typename BlockLike>
BlockFactors blockFactors(ShardingRule &rule, BlockLike op) {
  Value query = op.getQuery(), key = op.getKey();
  AttentionFactors a{rule.addFactor(dimOf(query, 0)),
                     rule.addFactor(dimOf(query, 1)),
                     rule.addFactor(dimOf(key, 1), /*opaque=*/true),
                     rule.addFactor(dimOf(query, 2)),
                     rule.addFactor(dimOf(key, 2))};
  int h = rule.addFactor(op.getNumHeads());
  rule.setBlocks(a.hq, op.getNumHeads());
  rule.setBlocks(a.hkv, op.getNumKvHeads());
  rule.setBlocks(h, op.getNumHeads());
  rule.tie(a.hq, a.hkv);
  rule.tie(a.hq, h);
  return {a, h};
}
} // namespace

// (q [b, t, hq], k [b, s, hkv], v [b, s, hkv], qpos [t], kpos [s])
//   -> (out [b, t, hq], lse [b, h, t]).
ShardingRule AttentionBlockOp::getShardingRule() {
  ShardingRule rule;
  auto [f, h] = blockFactors(rule, *this);
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.t});
  rule.addOperand({f.s});
  rule.addResult({f.b, f.t, f.hq});
  rule.addResult({f.b, h, f.t});
  return rule;
}

// (dy [b, t, hq], q, k [b, s, hkv], v, qpos [t], kpos [s], out [b, t, hq],
//   lse [b, h, t]) -> (dq [b, t, hq], dk, dv [b, s, hkv]): dk and dv sum
//   over the query positions.
ShardingRule AttentionBlockGradOp::getShardingRule() {
  ShardingRule rule;
  auto [f, h] = blockFactors(rule, *this);
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.b, f.s, f.hkv});
  rule.addOperand({f.t});
  rule.addOperand({f.s});
  rule.addOperand({f.b, f.t, f.hq});
  rule.addOperand({f.b, h, f.t});
  rule.addResult({f.b, f.t, f.hq});
  rule.addResult({f.b, f.s, f.hkv});
  rule.addResult({f.b, f.s, f.hkv});
  return rule;
}

// (out_a [b, t, c], lse_a [b, h, t], out_b, lse_b) -> (out, lse): c holds
// whole heads, tied to h.
ShardingRule AttentionMergeOp::getShardingRule() {
  ShardingRule rule;
  int64_t heads = dimOf(getLseA(), 1);
  int b = rule.addFactor(dimOf(getOutA(), 0));
  int t = rule.addFactor(dimOf(getOutA(), 1));
  int c = rule.addFactor(dimOf(getOutA(), 2));
  int h = rule.addFactor(heads);
  rule.setBlocks(c, heads);
  rule.setBlocks(h, heads);
  rule.tie(c, h);
  for (int i = 0; i < 2; ++i) {
    rule.addOperand({b, t, c});
    rule.addOperand({b, h, t});
  }
  rule.addResult({b, t, c});
  rule.addResult({b, h, t});
  return rule;
}

// --- Local partitioning -------------------------------------------------------

// The factor index of attentionFactors' query sequence, which the ring
// splits the keys by too.
constexpr int kSequenceFactor = 1;

LogicalResult AttentionOp::partitionLocally(LocalPartition &partition) {
  if (failed(localizeHeads(*this, partition)))
    return failure();
  if ((*this)->hasAttr(XfmrDialect::kContextRingAttrName) &&
      partition.shards(kSequenceFactor) > 1)
    return ringAttention(*this, partition, kSequenceFactor);
  return success();
}

LogicalResult AttentionGradOp::partitionLocally(LocalPartition &partition) {
  if (failed(localizeHeads(*this, partition)))
    return failure();
  if ((*this)->hasAttr(XfmrDialect::kContextRingAttrName) &&
      partition.shards(kSequenceFactor) > 1)
    return ringAttentionGrad(*this, partition, kSequenceFactor);
  return success();
}

LogicalResult AttentionBlockOp::partitionLocally(LocalPartition &partition) {
  return localizeHeads(*this, partition);
}

LogicalResult
AttentionBlockGradOp::partitionLocally(LocalPartition &partition) {
  return localizeHeads(*this, partition);
}
