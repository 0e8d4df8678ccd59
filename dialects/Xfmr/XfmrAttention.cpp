//===- XfmrAttention.cpp - verifiers of the attention ops -----------------===//
//
// xfmr.attention and xfmr.attention_grad share one set of checks: heads,
// the packed [B, T, H*D] / [B, T, Hkv*D] shapes, RoPE and its scaling, and
// the sliding window. The ring attention ops (attention_block and its
// gradient, whose keys are a block of any length, and attention_merge)
// add their positions and log-sum-exp.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"
#include "dialects/Xfmr/XfmrVerify.h"

#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace partition::xfmr;
using namespace partition::xfmr::verify;

/// The checks shared by attention and its gradient, and by the ring
/// attention block ops, whose keys are a block of their own length
/// (`blockKeys`): their key sequence need not be the query's.
template <typename AttentionLike>
static LogicalResult verifyAttention(AttentionLike attention,
                                     bool blockKeys = false) {
  Operation *op = attention.getOperation();
  Value query = attention.getQuery(), key = attention.getKey(),
        value = attention.getValue();
  int64_t heads = attention.getNumHeads(), kvHeads = attention.getNumKvHeads();
  std::optional<APFloat> ropeTheta = attention.getRopeTheta();
  std::optional<StringRef> scaling = attention.getRopeScaling();
  std::optional<ArrayRef<double>> factors = attention.getRopeScalingFactors();
  // The window only narrows the causal mask: without causality the keys
  // after a query would be visible and the window's meaning one-sided.
  if (std::optional<uint64_t> window = attention.getSlidingWindow()) {
    if (int64_t(*window) <= 0)
      return op->emitOpError() << "sliding_window must be positive, got "
                               << int64_t(*window);
    if (!attention.getCausal())
      return op->emitOpError()
             << "sliding_window needs causal attention (causal = true)";
  }
  if (failed(verifyStaticShapes(op)))
    return failure();
  if (heads <= 0 || kvHeads <= 0)
    return op->emitOpError() << "num_heads (" << heads << ") and num_kv_heads ("
                             << kvHeads << ") must be positive";
  if (heads % kvHeads != 0)
    return op->emitOpError() << "num_kv_heads " << kvHeads
                             << " must divide num_heads " << heads;
  if (failed(expectRank(op, "query", query, 3, "[batch, seq, heads*head_dim]")))
    return failure();
  RankedTensorType q = tensorType(query);
  int64_t features = q.getDimSize(2);
  if (features % heads != 0)
    return op->emitOpError() << "query features " << features
                             << " are not divisible by num_heads " << heads;
  int64_t headDim = features / heads;
  // Explicit positions (both or neither) free the key sequence's length:
  // local queries against all-gathered keys. The ring's block ops always
  // have positions (their own verifiers check them) and keys of their own.
  Value queryPositions, keyPositions;
  if (!blockKeys) {
    queryPositions = attention.getQueryPositions();
    keyPositions = attention.getKeyPositions();
    if (bool(queryPositions) != bool(keyPositions))
      return op->emitOpError()
             << "query_positions and key_positions must be given together";
  }
  bool ownKeys = blockKeys || queryPositions;
  int64_t keySeq = q.getDimSize(1);
  if (ownKeys) {
    if (failed(expectRank(op, "key", key, 3, "[batch, seq, kv_heads*head_dim]")))
      return failure();
    keySeq = tensorType(key).getDimSize(1);
  }
  if (queryPositions) {
    int64_t queryLength = tensorType(queryPositions).getDimSize(0);
    int64_t keyLength = tensorType(keyPositions).getDimSize(0);
    if (queryLength != q.getDimSize(1))
      return op->emitOpError()
             << "query_positions has " << queryLength
             << " positions but the query sequence has " << q.getDimSize(1);
    if (keyLength != keySeq)
      return op->emitOpError() << "key_positions has " << keyLength
                               << " positions but the key sequence has "
                               << keySeq;
  }
  if (failed(expectType(op, "key", key.getType(),
                        {q.getDimSize(0), keySeq, kvHeads * headDim},
                        q.getElementType(),
                        (ownKeys ? "[B] of the query, num_kv_heads * "
                                   "head_dim "
                                 : "[B, T] of the query, num_kv_heads * "
                                   "head_dim ") +
                            std::to_string(headDim))) ||
      failed(expectSameType(op, "value", value, "the key", key)))
    return failure();
  if (ropeTheta) {
    if (failed(expectPositive(op, "rope_theta", *ropeTheta)))
      return failure();
    if (headDim % 2 != 0)
      return op->emitOpError()
             << "rotary embedding needs an even head_dim, but head_dim is "
             << headDim;
  }
  if (bool(scaling) != bool(factors))
    return op->emitOpError()
           << "rope_scaling and rope_scaling_factors must be given together";
  if (!scaling)
    return success();
  if (!ropeTheta)
    return op->emitOpError() << "rope_scaling needs rope_theta";
  bool yarn = *scaling == "yarn";
  size_t expected = *scaling == "linear"               ? 1
                    : *scaling == "llama3" || yarn ? 4
                                                   : 0;
  if (expected == 0)
    return op->emitOpError() << "rope_scaling \"" << *scaling
                             << "\" is not one of linear, llama3, yarn";
  if (factors->size() != expected)
    return op->emitOpError()
           << "rope_scaling \"" << *scaling << "\" takes " << expected
           << " rope_scaling_factors, got " << factors->size();
  ArrayRef<double> f = *factors;
  if (!(f[0] > 0.0) || !std::isfinite(f[0]))
    return op->emitOpError() << "rope scaling factor must be positive, got "
                             << f[0];
  // yarn divides by ln(rope_theta) and takes ln(original_context / beta).
  if (yarn && (!(f[0] >= 1.0) || !(f[2] > 0.0) || !(f[1] > f[2]) ||
               !std::isfinite(f[1]) || !(f[3] >= 1.0) ||
               f[3] != std::floor(f[3]) || !std::isfinite(f[3]) ||
               !(ropeTheta->convertToDouble() > 1.0)))
    return op->emitOpError()
           << "yarn rope scaling needs factor >= 1, 0 < beta_slow < "
              "beta_fast, a positive integer original_context and "
              "rope_theta > 1, got ["
           << f[0] << ", " << f[1] << ", " << f[2] << ", " << f[3] << "]";
  if (!yarn && expected == 4 &&
      (!(f[1] > 0.0) || !(f[2] > f[1]) || !std::isfinite(f[2]) ||
       !(f[3] >= 1.0) || f[3] != std::floor(f[3]) || !std::isfinite(f[3])))
    return op->emitOpError()
           << "llama3 rope scaling needs 0 < low_freq_factor < "
              "high_freq_factor and a positive integer original_context, got ["
           << f[0] << ", " << f[1] << ", " << f[2] << ", " << f[3] << "]";
  return success();
}

int64_t AttentionOp::getHeadDim() {
  return getQuery().getType().getShape().back() / getNumHeads();
}

LogicalResult AttentionOp::verify() {
  if (failed(verifyAttention(*this)))
    return failure();
  return expectSameType(*this, "result", getResult(), "the query",
                        getQuery());
}

LogicalResult AttentionGradOp::verify() {
  if (failed(verifyAttention(*this)) ||
      failed(expectSameType(*this, "grad", getGrad(), "the query",
                            getQuery())) ||
      failed(expectSameType(*this, "query_grad", getQueryGrad(), "the query",
                            getQuery())) ||
      failed(expectSameType(*this, "key_grad", getKeyGrad(), "the key",
                            getKey())))
    return failure();
  return expectSameType(*this, "value_grad", getValueGrad(), "the value",
                        getValue());
}

/// The checks of the ring attention ops beyond those of attention: the
/// positions (i32, one per query and key) and the log-sum-exp [B, H, Tq] of
/// f32.
template <typename BlockLike>
static LogicalResult verifyPositionsAndLse(BlockLike op, Value lse,
                                           StringRef lseName) {
  RankedTensorType q = tensorType(op.getQuery());
  Builder builder(op.getContext());
  Type i32 = builder.getI32Type();
  if (failed(expectType(op, "query_positions",
                        op.getQueryPositions().getType(), {q.getDimSize(1)},
                        i32, "[Tq] of the query")) ||
      failed(expectType(op, "key_positions", op.getKeyPositions().getType(),
                        {tensorType(op.getKey()).getDimSize(1)}, i32,
                        "[Tk] of the key")))
    return failure();
  return expectType(op, lseName, lse.getType(),
                    {q.getDimSize(0), op.getNumHeads(), q.getDimSize(1)},
                    builder.getF32Type(), "[B, num_heads, Tq] of the query");
}

LogicalResult AttentionBlockOp::verify() {
  if (failed(verifyAttention(*this, /*blockKeys=*/true)) ||
      failed(expectSameType(*this, "out", getOut(), "the query", getQuery())))
    return failure();
  return verifyPositionsAndLse(*this, getLse(), "lse");
}

LogicalResult AttentionBlockGradOp::verify() {
  if (failed(verifyAttention(*this, /*blockKeys=*/true)) ||
      failed(expectSameType(*this, "grad", getGrad(), "the query",
                            getQuery())) ||
      failed(expectSameType(*this, "out", getOut(), "the query",
                            getQuery())) ||
      failed(verifyPositionsAndLse(*this, getLse(), "lse")) ||
      failed(expectSameType(*this, "query_grad", getQueryGrad(), "the query",
                            getQuery())) ||
      failed(expectSameType(*this, "key_grad", getKeyGrad(), "the key",
                            getKey())))
    return failure();
  return expectSameType(*this, "value_grad", getValueGrad(), "the value",
                        getValue());
}

LogicalResult AttentionMergeOp::verify() {
  Operation *op = getOperation();
  if (failed(verifyStaticShapes(op)) ||
      failed(expectRank(op, "out_a", getOutA(), 3, "[batch, seq, features]")) ||
      failed(expectSameType(op, "out_b", getOutB(), "out_a", getOutA())) ||
      failed(expectSameType(op, "out", getOut(), "out_a", getOutA())) ||
      failed(expectRank(op, "lse_a", getLseA(), 3, "[batch, heads, seq]")))
    return failure();
  RankedTensorType o = tensorType(getOutA());
  int64_t heads = tensorType(getLseA()).getDimSize(1);
  if (heads <= 0 || o.getDimSize(2) % heads != 0)
    return emitOpError() << "lse_a has " << heads
                         << " heads, which do not divide the "
                         << o.getDimSize(2) << " features of out_a";
  Type f32 = Builder(getContext()).getF32Type();
  SmallVector<int64_t, 3> shape = {o.getDimSize(0), heads, o.getDimSize(1)};
  if (failed(expectType(op, "lse_a", getLseA().getType(), shape, f32,
                        "[B, heads, T] of out_a")) ||
      failed(expectSameType(op, "lse_b", getLseB(), "lse_a", getLseA())))
    return failure();
  return expectSameType(op, "lse", getLse(), "lse_a", getLseA());
}
