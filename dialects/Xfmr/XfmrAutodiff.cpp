//===- XfmrAutodiff.cpp - the backward rule of every forward op -----------===//
//
// Each forward op builds its own vector-Jacobian product here, so reverse-mode
// autodiff (passes/frontend/TrainStep.cpp) stays generic: adding an op means
// adding a rule in this file, never touching the pass.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"

using namespace mlir;
using namespace partition::xfmr;

using Grads = FailureOr<SmallVector<Value>>;

/// Gradients of an op whose result gradient is absent: all zero, i.e. none.
static SmallVector<Value> noGrads(Operation *op) {
  return SmallVector<Value>(op->getNumOperands(), Value());
}

Grads EmbeddingOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                 ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (!resultGrads[0] || !needOperandGrad[1])
    return grads;
  grads[1] = EmbeddingGradOp::create(builder, getLoc(), getTable().getType(),
                                     resultGrads[0], getTokens());
  return grads;
}

Grads PositionEmbeddingOp::buildBackward(OpBuilder &builder,
                                         ValueRange resultGrads,
                                         ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  Value grad = resultGrads[0];
  if (!grad)
    return grads;
  if (needOperandGrad[0])
    grads[0] = grad;
  if (needOperandGrad[1])
    grads[1] = PositionEmbeddingGradOp::create(
        builder, getLoc(), getTable().getType(), grad, getPositions());
  return grads;
}

Grads LayerNormOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                 ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (!resultGrads[0] || llvm::none_of(needOperandGrad, [](bool b) { return b; }))
    return grads;
  auto backward = LayerNormGradOp::create(
      builder, getLoc(), getInput().getType(), getGamma().getType(),
      getBeta().getType(), resultGrads[0], getInput(), getGamma(),
      getEpsilonAttr());
  for (auto [index, grad] : llvm::enumerate(backward.getResults()))
    if (needOperandGrad[index])
      grads[index] = grad;
  return grads;
}

Grads RMSNormOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                               ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (!resultGrads[0] || llvm::none_of(needOperandGrad, [](bool b) { return b; }))
    return grads;
  auto backward = RMSNormGradOp::create(
      builder, getLoc(), getInput().getType(), getGamma().getType(),
      resultGrads[0], getInput(), getGamma(), getEpsilonAttr());
  for (auto [index, grad] : llvm::enumerate(backward.getResults()))
    if (needOperandGrad[index])
      grads[index] = grad;
  return grads;
}

Grads LinearOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                              ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  Value grad = resultGrads[0];
  if (!grad)
    return grads;
  if (needOperandGrad[0])
    grads[0] = LinearGradInputOp::create(builder, getLoc(),
                                         getInput().getType(), grad,
                                         getWeight());
  bool hasBias = getBias() != nullptr;
  bool needWeight = needOperandGrad[1];
  bool needBias = hasBias && needOperandGrad[2];
  if (!needWeight && !needBias)
    return grads;
  // The bias gradient is a by-product of the weight-gradient pass over dY,
  // so one op computes both (as cuBLASLt's bias-gradient epilogue does).
  SmallVector<Type> resultTypes{getWeight().getType()};
  if (hasBias)
    resultTypes.push_back(getBias().getType());
  auto backward = LinearGradWeightOp::create(builder, getLoc(), resultTypes,
                                             grad, getInput());
  if (needWeight)
    grads[1] = backward.getWeightGrad();
  if (needBias)
    grads[2] = backward.getBiasGrad();
  return grads;
}

Grads GeluOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = GeluGradOp::create(builder, getLoc(), getType(), resultGrads[0],
                                  getInput());
  return grads;
}

Grads SwigluOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                              ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (!resultGrads[0] || (!needOperandGrad[0] && !needOperandGrad[1]))
    return grads;
  auto backward = SwigluGradOp::create(builder, getLoc(), getType(), getType(),
                                       resultGrads[0], getGate(), getUp());
  if (needOperandGrad[0])
    grads[0] = backward.getGateGrad();
  if (needOperandGrad[1])
    grads[1] = backward.getUpGrad();
  return grads;
}

Grads CastOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                            ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = CastOp::create(builder, getLoc(), getInput().getType(),
                              resultGrads[0]);
  return grads;
}

Grads AddOp::buildBackward(OpBuilder &, ValueRange resultGrads,
                           ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  for (unsigned index : {0u, 1u})
    if (needOperandGrad[index])
      grads[index] = resultGrads[0];
  return grads;
}

Grads ScaleOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                             ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = ScaleOp::create(builder, getLoc(), getType(), resultGrads[0],
                               getFactorAttr());
  return grads;
}

Grads AttentionOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                 ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (!resultGrads[0] || llvm::none_of(needOperandGrad, [](bool b) { return b; }))
    return grads;
  auto backward = AttentionGradOp::create(
      builder, getLoc(), getQuery().getType(), getKey().getType(),
      getValue().getType(), resultGrads[0], getQuery(), getKey(), getValue(),
      getQueryPositions(), getKeyPositions(), getNumHeadsAttr(), getNumKvHeadsAttr(), getCausalAttr(),
      getRopeThetaAttr(), getRopeScalingAttr(), getRopeScalingFactorsAttr(),
      getSlidingWindowAttr());
  for (auto [index, grad] : llvm::enumerate(backward.getResults()))
    if (needOperandGrad[index])
      grads[index] = grad;
  return grads;
}

Grads SoftmaxCrossEntropyOp::buildBackward(OpBuilder &builder,
                                           ValueRange resultGrads,
                                           ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = SoftmaxCrossEntropyGradOp::create(
        builder, getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
        getTargets(), getVocabAttr());
  return grads;
}

// Mixture of experts: the selection (expert ids, slots, counts) is not
// differentiated; gradients reach the router's logits through the gates and
// the auxiliary loss.

Grads MoeRouteOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = MoeRouteGradOp::create(builder, getLoc(), getLogits().getType(),
                                      resultGrads[0], getLogits(),
                                      getExperts(), getTopKAttr(),
                                      getScoringAttr());
  return grads;
}

Grads MoeDispatchOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                   ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = MoeDispatchGradOp::create(builder, getLoc(),
                                         getInput().getType(), resultGrads[0],
                                         getExperts(), getSlots());
  return grads;
}

Grads MoeCombineOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                  ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (!resultGrads[0] || (!needOperandGrad[0] && !needOperandGrad[1]))
    return grads;
  auto backward = MoeCombineGradOp::create(
      builder, getLoc(), getExpertOutput().getType(), getGates().getType(),
      resultGrads[0], getExpertOutput(), getGates(), getExperts(), getSlots());
  if (needOperandGrad[0])
    grads[0] = backward.getExpertOutputGrad();
  if (needOperandGrad[1])
    grads[1] = backward.getGatesGrad();
  return grads;
}

Grads ExpertLinearOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                    ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  Value grad = resultGrads[0];
  if (!grad)
    return grads;
  if (needOperandGrad[0])
    grads[0] = ExpertLinearGradInputOp::create(
        builder, getLoc(), getInput().getType(), grad, getWeight(),
        getCounts(), getRoutedRowsAttr());
  if (needOperandGrad[1])
    grads[1] = ExpertLinearGradWeightOp::create(
        builder, getLoc(), getWeight().getType(), grad, getInput(),
        getCounts(), getRoutedRowsAttr());
  return grads;
}

Grads MoeAuxLossOp::buildBackward(OpBuilder &builder, ValueRange resultGrads,
                                  ArrayRef<bool> needOperandGrad) {
  SmallVector<Value> grads = noGrads(*this);
  if (resultGrads[0] && needOperandGrad[0])
    grads[0] = MoeAuxLossGradOp::create(
        builder, getLoc(), getLogits().getType(), resultGrads[0], getLogits(),
        getExperts(), getAuxCoefAttr(), getZCoefAttr(), getScoringAttr());
  return grads;
}
