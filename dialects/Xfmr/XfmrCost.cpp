//===- XfmrCost.cpp - matmul FLOP counts of the xfmr ops ------------------===//
//
// A product of an MxK by a KxN matrix costs 2*M*N*K; backward ops perform
// the two products (input and weight gradient) that make a backward pass
// cost twice the forward one.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"

using namespace mlir;
using namespace partition::xfmr;

static int64_t numElements(Value value) {
  return cast<RankedTensorType>(value.getType()).getNumElements();
}

static int64_t lastDim(Value value) {
  return cast<RankedTensorType>(value.getType()).getShape().back();
}

int64_t LinearOp::getMatmulFlops() {
  // M*K input elements, each multiplied into N outputs.
  return 2 * numElements(getInput()) * getWeight().getType().getDimSize(0);
}

int64_t LinearGradInputOp::getMatmulFlops() {
  return 2 * numElements(getGrad()) * getWeight().getType().getDimSize(1);
}

int64_t LinearGradWeightOp::getMatmulFlops() {
  return 2 * numElements(getGrad()) * lastDim(getInput());
}

/// Q K^T and P V: each B*H products of [T, D] by [D, T] sized matrices, at
/// full T x T whether or not the mask is causal.
static int64_t attentionForwardFlops(Value query) {
  auto type = cast<RankedTensorType>(query.getType());
  int64_t batch = type.getDimSize(0), seq = type.getDimSize(1);
  int64_t features = type.getDimSize(2); // heads * head_dim
  return 2 * (2 * batch * seq * seq * features);
}

int64_t AttentionOp::getMatmulFlops() {
  return attentionForwardFlops(getQuery());
}

int64_t AttentionGradOp::getMatmulFlops() {
  // dV = P^T dO, dP = dO V^T, dQ = dS K, dK = dS^T Q.
  return 2 * attentionForwardFlops(getQuery());
}
