//===- KernelArgsAttention.cpp - checks of the attention rows ------------===//
//
// The attention family of KernelArgs.cpp's checks: attention and
// attention_scaled, the positioned rows of context parallelism and the
// ring attention blocks.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/KernelArgsChecker.h"

#include <cmath>

namespace partition::runtime::kernelargs {

/// The heads, batch, head dimension and RoPE / window parameters of an
/// attention-like instruction from its ints and floats (the attention rows,
/// or with `scaled` the attention_scaled and ring attention rows) and its
/// query [B, T, H*D].
void Checker::attentionParameters(const BufferInfo &query, bool scaled) {
  args.heads = instruction.ints[0];
  args.kvHeads = instruction.ints[1];
  args.causal = instruction.ints[2] != 0;
  args.ropeTheta = instruction.floats[0];
  require(args.heads > 0 && args.kvHeads > 0 &&
              args.heads % args.kvHeads == 0,
          "heads " + std::to_string(args.heads) + " and kv heads " +
              std::to_string(args.kvHeads) + " are inconsistent");
  args.batch = query.shape[0];
  args.seq = query.shape[1];
  require(query.shape[2] % args.heads == 0,
          "query features are not divisible by the heads");
  args.headDim = query.shape[2] / args.heads;
  require(args.headDim > 0, "head dimension is zero");
  require(args.ropeTheta >= 0 && (args.ropeTheta == 0 || args.headDim % 2 == 0),
          "rotary embedding needs an even head dimension");
  if (scaled) {
    args.window = instruction.ints[3];
    require(args.window >= 0 && (args.window == 0 || args.causal),
            "sliding window " + std::to_string(args.window) +
                " must be 0 (none) or positive with causal attention");
    const std::vector<float> &f = instruction.floats;
    RopeScaling &s = args.ropeScaling;
    if (f[1] == float(RopeScalingKind::Linear))
      s.kind = RopeScalingKind::Linear;
    else if (f[1] == float(RopeScalingKind::Llama3))
      s.kind = RopeScalingKind::Llama3;
    else if (f[1] == float(RopeScalingKind::Yarn))
      s.kind = RopeScalingKind::Yarn;
    else
      require(f[1] == float(RopeScalingKind::None),
              "RoPE scaling kind " + std::to_string(f[1]) +
                  " is not 0 (none), 1 (linear), 2 (llama3) or 3 (yarn)");
    // Without scaling the factors are not read: the defaults stay, so
    // every unscaled table compares equal.
    if (s.kind == RopeScalingKind::Yarn) {
      s = RopeScaling::yarn(f[2], f[3], f[4], f[5]);
    } else if (s.kind != RopeScalingKind::None) {
      s.factor = f[2];
      s.lowFreqFactor = f[3];
      s.highFreqFactor = f[4];
      s.originalContext = f[5];
    }
    require(s.kind == RopeScalingKind::None || args.ropeTheta > 0,
            "RoPE scaling needs a positive theta");
    require(s.factor > 0 && std::isfinite(s.factor),
            "RoPE scaling factor must be positive");
    require(s.kind != RopeScalingKind::Llama3 ||
                (s.lowFreqFactor > 0 && s.highFreqFactor > s.lowFreqFactor &&
                 std::isfinite(s.highFreqFactor) && s.originalContext > 0 &&
                 std::isfinite(s.originalContext)),
            "llama3 RoPE scaling needs 0 < low < high frequency factors and "
            "a positive original context");
    // yarn divides by ln(theta) and takes ln(context / beta).
    require(s.kind != RopeScalingKind::Yarn ||
                (args.ropeTheta > 1 && s.betaSlow > 0 &&
                 s.betaFast > s.betaSlow && std::isfinite(s.betaFast) &&
                 s.originalContext > 0 && std::isfinite(s.originalContext)),
            "yarn RoPE scaling needs theta > 1, 0 < beta_slow < beta_fast "
            "and a positive original context");
  }
}

void Checker::attention() {
  bool isGrad = instruction.kernel == KernelId::AttentionGrad ||
                instruction.kernel == KernelId::AttentionScaledGrad ||
                instruction.kernel == KernelId::AttentionPositionsGrad;
  bool positioned = info.shape == KernelShape::AttentionPositions;
  bool scaled = instruction.kernel == KernelId::AttentionScaled ||
                instruction.kernel == KernelId::AttentionScaledGrad ||
                positioned;
  int q = isGrad ? 1 : 0;
  allFloat({0, 1, 2});
  if (isGrad)
    dtype(in(3), args.floatType, "value");
  const BufferInfo &query = in(q), &key = in(q + 1), &value = in(q + 2);
  rank(query, 3, "query");
  rank(key, 3, "key");
  attentionParameters(query, scaled);
  // With positions the keys may be longer than the queries (local queries
  // against all-gathered keys); without, they are the query's sequence.
  args.keySeq = positioned ? key.shape[1] : args.seq;
  if (positioned) {
    const BufferInfo &queryPositions = in(q + 3), &keyPositions = in(q + 4);
    dtype(queryPositions, DType::I32, "query positions");
    dtype(keyPositions, DType::I32, "key positions");
    vector(queryPositions, args.seq, "query positions");
    vector(keyPositions, args.keySeq, "key positions");
  }
  require(key.shape == std::vector<int64_t>{args.batch, args.keySeq,
                                            args.kvHeads * args.headDim} &&
              value.shape == key.shape,
          "key " + shapeString(key) + " / value " + shapeString(value) +
              " do not match query " + shapeString(query));
  if (isGrad) {
    require(in(0).shape == query.shape, "grad must be shaped like the query");
    require(out(0).shape == query.shape && out(1).shape == key.shape &&
                out(2).shape == key.shape,
            "gradients must be shaped like query, key and value");
  } else {
    require(out(0).shape == query.shape, "result must be shaped like the query");
  }
}

/// The ring attention kernels: attention_block (q, k, v, qpos, kpos -> out,
/// lse), attention_block_grad (dout, q, k, v, qpos, kpos, out, lse -> dq,
/// dk, dv) and attention_merge (out_a, lse_a, out_b, lse_b -> out, lse).
/// The keys are a block of their own length; positions are i32 and every
/// lse f32 [B, H, Tq] whatever the storage type.
void Checker::checkAttentionBlock() {
  const DType storage = args.floatType;
  if (instruction.kernel == KernelId::AttentionMerge) {
    const BufferInfo &outA = in(0), &lseA = in(1);
    rank(outA, 3, "out_a");
    rank(lseA, 3, "lse_a");
    for (int i : {0, 2})
      dtype(in(i), storage, "out_a and out_b");
    dtype(out(0), storage, "out");
    for (const BufferInfo *lse : {&in(1), &in(3), &out(1)})
      dtype(*lse, DType::F32, "every lse");
    args.batch = outA.shape[0];
    args.seq = outA.shape[1];
    args.heads = lseA.shape[1];
    require(args.heads > 0 && outA.shape[2] % args.heads == 0,
            "lse_a " + shapeString(lseA) + " has heads that do not divide " +
                "the features of out_a " + shapeString(outA));
    args.headDim = outA.shape[2] / args.heads;
    require(lseA.shape == std::vector<int64_t>{args.batch, args.heads,
                                               args.seq},
            "lse_a " + shapeString(lseA) + " must be [B, H, T] of out_a " +
                shapeString(outA));
    require(in(2).shape == outA.shape && out(0).shape == outA.shape,
            "out_b and out must be shaped like out_a " + shapeString(outA));
    require(in(3).shape == lseA.shape && out(1).shape == lseA.shape,
            "lse_b and lse must be shaped like lse_a " + shapeString(lseA));
    return;
  }
  const bool isGrad = instruction.kernel == KernelId::AttentionBlockGrad;
  const int q = isGrad ? 1 : 0;
  const BufferInfo &query = in(q), &key = in(q + 1), &value = in(q + 2),
                   &queryPositions = in(q + 3), &keyPositions = in(q + 4);
  for (int i = 0; i < 3 + q; ++i)
    dtype(in(i), storage, "query, key, value (and grad)");
  dtype(queryPositions, DType::I32, "query_positions");
  dtype(keyPositions, DType::I32, "key_positions");
  rank(query, 3, "query");
  rank(key, 3, "key");
  attentionParameters(query, /*scaled=*/true);
  args.keySeq = key.shape[1];
  require(key.shape == std::vector<int64_t>{args.batch, args.keySeq,
                                            args.kvHeads * args.headDim} &&
              value.shape == key.shape,
          "key " + shapeString(key) + " / value " + shapeString(value) +
              " do not match query " + shapeString(query) + " with " +
              std::to_string(args.kvHeads) + " kv heads");
  vector(queryPositions, args.seq, "query_positions");
  vector(keyPositions, args.keySeq, "key_positions");
  const std::vector<int64_t> lseShape = {args.batch, args.heads, args.seq};
  if (isGrad) {
    require(in(0).shape == query.shape && in(6).shape == query.shape,
            "grad and out must be shaped like the query " +
                shapeString(query));
    dtype(in(6), storage, "out");
    dtype(in(7), DType::F32, "lse");
    require(in(7).shape == lseShape,
            "lse " + shapeString(in(7)) + " must be [B, H, Tq] of the query " +
                shapeString(query));
    for (int o = 0; o < 3; ++o)
      dtype(out(o), storage, "every gradient");
    require(out(0).shape == query.shape && out(1).shape == key.shape &&
                out(2).shape == key.shape,
            "gradients must be shaped like query, key and value");
  } else {
    dtype(out(0), storage, "out");
    dtype(out(1), DType::F32, "lse");
    require(out(0).shape == query.shape,
            "out must be shaped like the query " + shapeString(query));
    require(out(1).shape == lseShape,
            "lse " + shapeString(out(1)) + " must be [B, H, Tq] of the query " +
                shapeString(query));
  }
}

} // namespace partition::runtime::kernelargs
