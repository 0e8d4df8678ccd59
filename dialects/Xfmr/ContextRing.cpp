//===- ContextRing.cpp - context parallelism's ring, unrolled --------------===//
//
// With context parallelism's ring method (docs/context-parallel.md) the
// partitioner leaves an attention op's queries and its keys and values split
// along the sequence over the context axis (both sequence factors are the
// op's own: ShardingRule::addOpFactor), and the op becomes the ring here:
// each device scores its queries against its own key-value block, then
// against the block of the previous device, passed on by dist.ring_shift,
// and so on around the ring, merging each block's partial attention into
// the running output by its log-sum-exp (xfmr.attention_merge, flash
// attention's online softmax). Every shift of the next block is issued
// before the current block's attention so that the runtime can move it
// while that block computes.
//
// The backward pass runs the forward ring again for the output and its
// log-sum-exp (attention_grad recomputes, as it does on one device), then a
// second ring over the same blocks (they are not passed again) in which
// the accumulated gradient of each block's keys and values travels: every
// device adds its queries' contribution (xfmr.attention_block_grad) to the
// gradient it received and passes it on, and the last shift brings each
// block's gradient home.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/ContextRing.h"

#include "dialects/Xfmr/XfmrOps.h"

#include "mlir/IR/Builders.h"

#include <string>

using namespace mlir;

namespace partition::xfmr {
namespace {

/// The attributes an attention op shares with attention_block(_grad): the
/// (already localized) head counts, the mask and the rotary embedding.
SmallVector<NamedAttribute> blockAttributes(Operation *op) {
  SmallVector<NamedAttribute> attributes;
  for (StringRef name : {"num_heads", "num_kv_heads", "causal", "rope_theta",
                         "rope_scaling", "rope_scaling_factors",
                         "sliding_window"})
    if (Attribute value = op->getAttr(name))
      attributes.push_back(NamedAttribute(
          StringAttr::get(op->getContext(), name), value));
  return attributes;
}

/// The key-value block the ring carries: keys, values and their positions.
struct Block {
  Value key, value, positions;
};

Block shift(OpBuilder &builder, LocalPartition &partition, int keyFactor,
            const Block &block, const std::string &step) {
  return {partition.ringShift(builder, block.key, keyFactor, "ring k " + step),
          partition.ringShift(builder, block.value, keyFactor,
                              "ring v " + step),
          partition.ringShift(builder, block.positions, keyFactor,
                              "ring positions " + step)};
}

/// The forward ring: the attention of `query` over every device's block,
/// and its log-sum-exp; `blocks` (if given) receives the blocks in ring
/// order, this device's first, for a backward ring to reuse.
std::pair<Value, Value> forwardRing(OpBuilder &builder, Location loc,
                                    LocalPartition &partition, int keyFactor,
                                    Operation *op, Value query,
                                    Value queryPositions, Block block,
                                    SmallVectorImpl<Block> *blocks = nullptr) {
  int64_t devices = partition.shards(keyFactor);
  auto queryType = cast<RankedTensorType>(query.getType());
  int64_t heads = cast<IntegerAttr>(op->getAttr("num_heads")).getInt();
  auto lseType = RankedTensorType::get(
      {queryType.getDimSize(0), heads, queryType.getDimSize(1)},
      builder.getF32Type());
  SmallVector<NamedAttribute> attributes = blockAttributes(op);
  Value out, lse;
  for (int64_t step = 0; step < devices; ++step) {
    if (blocks)
      blocks->push_back(block);
    // The next block's transfer first: it moves while this one computes.
    Block next = step + 1 < devices
                     ? shift(builder, partition, keyFactor, block,
                             std::to_string(step + 1))
                     : Block{};
    auto partial = AttentionBlockOp::create(
        builder, loc, TypeRange{queryType, lseType},
        ValueRange{query, block.key, block.value, queryPositions,
                   block.positions},
        attributes);
    if (step == 0) {
      out = partial.getOut();
      lse = partial.getLse();
    } else {
      auto merged = AttentionMergeOp::create(
          builder, loc, TypeRange{queryType, lseType},
          ValueRange{out, lse, partial.getOut(), partial.getLse()});
      out = merged.getOut();
      lse = merged.getLse();
    }
    block = next;
  }
  return {out, lse};
}

} // namespace

LogicalResult ringAttention(AttentionOp op, LocalPartition &partition,
                            int keyFactor) {
  OpBuilder builder(op);
  auto [out, lse] = forwardRing(
      builder, op.getLoc(), partition, keyFactor, op, op.getQuery(),
      op.getQueryPositions(),
      {op.getKey(), op.getValue(), op.getKeyPositions()});
  (void)lse;
  partition.replaceOp(out);
  return success();
}

LogicalResult ringAttentionGrad(AttentionGradOp op, LocalPartition &partition,
                                int keyFactor) {
  OpBuilder builder(op);
  Location loc = op.getLoc();
  Block own{op.getKey(), op.getValue(), op.getKeyPositions()};
  // The forward ring's blocks serve the backward ring too: each is passed
  // once.
  SmallVector<Block> blocks;
  auto [out, lse] =
      forwardRing(builder, loc, partition, keyFactor, op, op.getQuery(),
                  op.getQueryPositions(), own, &blocks);
  int64_t devices = partition.shards(keyFactor);
  SmallVector<NamedAttribute> attributes = blockAttributes(op);
  Value queryGrad, keyGrad, valueGrad;
  for (int64_t step = 0; step < devices; ++step) {
    std::string label = std::to_string(step + 1);
    const Block &block = blocks[step];
    auto grads = AttentionBlockGradOp::create(
        builder, loc,
        TypeRange{op.getQuery().getType(), op.getKey().getType(),
                  op.getValue().getType()},
        ValueRange{op.getGrad(), op.getQuery(), block.key, block.value,
                   op.getQueryPositions(), block.positions, out, lse},
        attributes);
    auto add = [&](Value sum, Value term) -> Value {
      return sum ? AddOp::create(builder, loc, sum.getType(), sum, term)
                       .getResult()
                 : term;
    };
    queryGrad = add(queryGrad, grads.getQueryGrad());
    // The gradient of the block this device holds: the previous devices'
    // terms arrived with it.
    keyGrad = add(keyGrad, grads.getKeyGrad());
    valueGrad = add(valueGrad, grads.getValueGrad());
    // On to the device that holds the next block's sum next; after the
    // last step, home to the block's own device.
    keyGrad = partition.ringShift(builder, keyGrad, keyFactor,
                                  "ring dk " + label);
    valueGrad = partition.ringShift(builder, valueGrad, keyFactor,
                                    "ring dv " + label);
  }
  partition.replaceOp({queryGrad, keyGrad, valueGrad});
  return success();
}

} // namespace partition::xfmr
