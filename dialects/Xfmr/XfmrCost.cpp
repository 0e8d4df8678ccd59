//===- XfmrCost.cpp - matmul FLOP counts of the xfmr ops ------------------===//
//
// A product of an MxK by a KxN matrix costs 2*M*N*K; backward ops perform
// the two products (input and weight gradient) that make a backward pass
// cost twice the forward one.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"

#include "dialects/CheckedSize.h"

#include <algorithm>

using namespace mlir;
using namespace partition::xfmr;

// Counted in checked arithmetic: a model large enough to overflow gives
// nullopt, never a wrapped-around count.

static std::optional<int64_t> numElements(Value value) {
  return partition::checkedElementCount(
      cast<RankedTensorType>(value.getType()).getShape());
}

static int64_t lastDim(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape().back();
}

/// 2 * elements * k, or nullopt on overflow.
static std::optional<int64_t> twice(std::optional<int64_t> elements,
                                    int64_t k) {
  if (!elements)
    return std::nullopt;
  std::optional<int64_t> product = llvm::checkedMul(*elements, k);
  return product ? llvm::checkedMul(*product, int64_t(2)) : std::nullopt;
}

std::optional<int64_t> LinearOp::getMatmulFlops() {
  // M*K input elements, each multiplied into N outputs.
  return twice(numElements(getInput()), getWeight().getType().getDimSize(0));
}

std::optional<int64_t> LinearGradInputOp::getMatmulFlops() {
  return twice(numElements(getGrad()), getWeight().getType().getDimSize(1));
}

std::optional<int64_t> LinearGradWeightOp::getMatmulFlops() {
  return twice(numElements(getGrad()), lastDim(getInput()));
}

/// Q K^T and P V: each B*H products of [T, D] by [D, S] sized matrices (S
/// keys: T, or a ring attention block's), at full T x S whether or not the
/// mask is causal (the Megatron-LM convention); with a sliding window
/// W < S, of [T, D] by [D, W]: each query meets W keys.
template <typename AttentionLike>
static std::optional<int64_t> attentionForwardFlops(AttentionLike op) {
  auto type = cast<RankedTensorType>(op.getQuery().getType());
  int64_t batch = type.getDimSize(0), seq = type.getDimSize(1);
  int64_t features = type.getDimSize(2); // heads * head_dim
  int64_t keys = cast<RankedTensorType>(op.getKey().getType()).getDimSize(1);
  if (std::optional<uint64_t> window = op.getSlidingWindow())
    keys = std::min<int64_t>(keys, int64_t(*window));
  // 2 * (2 * batch * seq * keys * features)
  return partition::checkedElementCount({4, batch, seq, keys, features});
}

std::optional<int64_t> AttentionOp::getMatmulFlops() {
  return attentionForwardFlops(*this);
}

std::optional<int64_t> AttentionGradOp::getMatmulFlops() {
  // dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q.
  std::optional<int64_t> forward = attentionForwardFlops(*this);
  return forward ? llvm::checkedMul(*forward, int64_t(2)) : std::nullopt;
}

std::optional<int64_t> AttentionBlockOp::getMatmulFlops() {
  return attentionForwardFlops(*this);
}

std::optional<int64_t> AttentionBlockGradOp::getMatmulFlops() {
  // As attention_grad's: dV, dP, dQ and dK (the recomputed scores are not
  // counted).
  std::optional<int64_t> forward = attentionForwardFlops(*this);
  return forward ? llvm::checkedMul(*forward, int64_t(2)) : std::nullopt;
}

/// An expert linear layer multiplies B x min(E x C, routed_rows) rows (the
/// filled ones; every row without routed_rows) of `features` into `outputs`.
template <typename ExpertLinearLike>
static std::optional<int64_t> expertFlops(ExpertLinearLike op, Value rows,
                                          int64_t outputs) {
  ArrayRef<int64_t> shape = cast<RankedTensorType>(rows.getType()).getShape();
  std::optional<int64_t> perGroup =
      llvm::checkedMul(shape[1], shape[2]); // E x C
  if (!perGroup)
    return std::nullopt;
  if (std::optional<uint64_t> routed = op.getRoutedRows())
    perGroup = std::min<int64_t>(*perGroup, int64_t(*routed));
  return partition::checkedElementCount(
      {2, shape[0], *perGroup, shape[3], outputs});
}

std::optional<int64_t> ExpertLinearOp::getMatmulFlops() {
  return expertFlops(*this, getInput(), getWeight().getType().getDimSize(1));
}

std::optional<int64_t> ExpertLinearGradInputOp::getMatmulFlops() {
  return expertFlops(*this, getGrad(), getWeight().getType().getDimSize(2));
}

std::optional<int64_t> ExpertLinearGradWeightOp::getMatmulFlops() {
  return expertFlops(*this, getGrad(), lastDim(getInput()));
}
