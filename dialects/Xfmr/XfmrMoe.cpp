//===- XfmrMoe.cpp - verifiers of the mixture-of-experts ops --------------===//
//
// The routing tensors ([B, S, k] gates, expert ids and slots, [B, S, E]
// logits) and the expert buffers ([B, E, C, H]) are checked by the shared
// helpers below, so that every op names the same sizes the same way.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"
#include "dialects/Xfmr/XfmrVerify.h"

#include "mlir/IR/Diagnostics.h"

#include <cmath>

using namespace mlir;
using namespace partition::xfmr;
using namespace partition::xfmr::verify;

namespace {

bool isScoring(StringRef scoring) {
  return scoring == "softmax" || scoring == "softmax_topk" ||
         scoring == "sigmoid";
}

LogicalResult verifyScoring(Operation *op, StringRef scoring) {
  if (isScoring(scoring))
    return success();
  return op->emitOpError() << "scoring must be \"softmax\", \"softmax_topk\" "
                              "or \"sigmoid\", got \""
                           << scoring << "\"";
}

/// `logits` is [B, S, E] of a float type; returns its shape.
FailureOr<ArrayRef<int64_t>> verifyLogits(Operation *op, Value logits) {
  if (failed(expectRank(op, "logits", logits, 3, "[batch, seq, experts]")))
    return failure();
  return tensorType(logits).getShape();
}

/// `value` is [B, S, k] of `elementType`, B and S those of `tokens` ([B, S,
/// ...]).
LogicalResult expectChoices(Operation *op, StringRef what, Value value,
                            Value tokens, int64_t topK, Type elementType) {
  ArrayRef<int64_t> shape = tensorType(tokens).getShape();
  return expectType(op, what, value.getType(), {shape[0], shape[1], topK},
                    elementType, "[B, S, k], B and S the tokens', k top_k");
}

/// The expert ids and slots [B, S, k] (i32) of the tokens [B, S, ...]; k
/// is read from `experts`.
LogicalResult verifyChoiceIndices(Operation *op, Value tokens, Value experts,
                                  Value slots) {
  if (failed(expectRank(op, "experts", experts, 3, "[batch, seq, top_k]")))
    return failure();
  Type i32 = IntegerType::get(op->getContext(), 32);
  int64_t topK = tensorType(experts).getDimSize(2);
  if (failed(expectChoices(op, "experts", experts, tokens, topK, i32)))
    return failure();
  return slots ? expectChoices(op, "slots", slots, tokens, topK, i32)
               : success();
}

/// `buffer` is an expert buffer [B, E, C, H] for the tokens [B, S, H]:
/// same batch, same features and element type, C <= S.
LogicalResult verifyExpertBuffer(Operation *op, StringRef what, Value buffer,
                                 Value tokens) {
  if (failed(expectRank(op, what, buffer, 4,
                        "[batch, experts, capacity, features]")) ||
      failed(expectRank(op, "tokens", tokens, 3, "[batch, seq, features]")))
    return failure();
  RankedTensorType b = tensorType(buffer), t = tensorType(tokens);
  if (b.getElementType() != t.getElementType())
    return op->emitOpError() << what << " element type " << b.getElementType()
                             << " differs from the tokens' "
                             << t.getElementType();
  if (b.getDimSize(0) != t.getDimSize(0) || b.getDimSize(3) != t.getDimSize(2))
    return op->emitOpError()
           << what << " is [" << b.getDimSize(0) << ", E, C, "
           << b.getDimSize(3) << "] but the tokens are [" << t.getDimSize(0)
           << ", S, " << t.getDimSize(2)
           << "]: batch and features must agree";
  if (b.getDimSize(2) > t.getDimSize(1))
    return op->emitOpError() << what << " capacity " << b.getDimSize(2)
                             << " exceeds the sequence length "
                             << t.getDimSize(1);
  return success();
}

/// The expert-linear operands: `rows` [B, E, C, X], `weight` [E, N, K]
/// whose dimension `weightDim` (1: N, 2: K) is X, `counts` [B, E] of i32.
LogicalResult verifyExpertLinear(Operation *op, Value rows, Value weight,
                                 Value counts, unsigned weightDim) {
  if (failed(verifyStaticShapes(op)) ||
      failed(expectRank(op, "input", rows, 4,
                        "[batch, experts, capacity, features]")) ||
      failed(expectRank(op, "weight", weight, 3,
                        "[experts, out_features, in_features]")))
    return failure();
  RankedTensorType r = tensorType(rows), w = tensorType(weight);
  if (w.getElementType() != r.getElementType())
    return op->emitOpError() << "weight element type " << w.getElementType()
                             << " differs from the input's "
                             << r.getElementType();
  if (w.getDimSize(0) != r.getDimSize(1))
    return op->emitOpError() << "weight has " << w.getDimSize(0)
                             << " experts but the input has "
                             << r.getDimSize(1);
  if (w.getDimSize(weightDim) != r.getDimSize(3))
    return op->emitOpError()
           << "weight dimension " << weightDim << " is "
           << w.getDimSize(weightDim) << " but the input's features are "
           << r.getDimSize(3);
  return expectType(op, "counts", counts.getType(),
                    {r.getDimSize(0), r.getDimSize(1)},
                    IntegerType::get(op->getContext(), 32),
                    "[B, E], the input's batch and experts");
}

/// The scalar coefficients of the auxiliary loss.
LogicalResult verifyCoefficients(Operation *op, APFloat aux, APFloat z) {
  for (auto [name, value] : {std::pair<StringRef, APFloat>{"aux_coef", aux},
                             {"z_coef", z}}) {
    double v = value.convertToDouble();
    if (!std::isfinite(v) || v < 0)
      return op->emitOpError()
             << name << " must be finite and not negative, got " << v;
  }
  return success();
}

} // namespace

LogicalResult MoeRouteOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifyScoring(*this, getScoring())))
    return failure();
  FailureOr<ArrayRef<int64_t>> shape = verifyLogits(*this, getLogits());
  if (failed(shape))
    return failure();
  int64_t batch = (*shape)[0], seq = (*shape)[1], experts = (*shape)[2];
  int64_t topK = getTopK(), capacity = getCapacity();
  if (topK < 1 || topK > experts)
    return emitOpError() << "top_k must be in [1, " << experts
                         << "] (the experts), got " << topK;
  if (capacity < 1 || capacity > seq)
    return emitOpError() << "capacity must be in [1, " << seq
                         << "] (the sequence length), got " << capacity;
  Type f32 = Float32Type::get(getContext());
  Type i32 = IntegerType::get(getContext(), 32);
  if (Value bias = getBias())
    if (failed(expectType(*this, "bias", bias.getType(), {experts}, f32,
                          "[E], the logits' experts")))
      return failure();
  if (failed(expectChoices(*this, "gates", getGates(), getLogits(), topK,
                           tensorType(getLogits()).getElementType())) ||
      failed(expectChoices(*this, "experts", getExperts(), getLogits(), topK,
                           i32)) ||
      failed(expectChoices(*this, "slots", getSlots(), getLogits(), topK,
                           i32)))
    return failure();
  return expectType(*this, "counts", getCounts().getType(), {batch, experts},
                    i32, "[B, E], the logits' batch and experts");
}

LogicalResult MoeRouteGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifyScoring(*this, getScoring())) ||
      failed(verifyLogits(*this, getLogits())))
    return failure();
  int64_t experts = tensorType(getLogits()).getDimSize(2);
  int64_t topK = getTopK();
  if (topK < 1 || topK > experts)
    return emitOpError() << "top_k must be in [1, " << experts
                         << "] (the experts), got " << topK;
  Type i32 = IntegerType::get(getContext(), 32);
  if (failed(expectChoices(*this, "gates_grad", getGatesGrad(), getLogits(),
                           topK, tensorType(getLogits()).getElementType())) ||
      failed(expectChoices(*this, "experts", getExperts(), getLogits(), topK,
                           i32)))
    return failure();
  return expectSameType(*this, "result", getResult(), "the logits",
                        getLogits());
}

LogicalResult MoeDispatchOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "input", getInput(), 3,
                        "[batch, seq, features]")) ||
      failed(verifyChoiceIndices(*this, getInput(), getExperts(),
                                 getSlots())))
    return failure();
  return verifyExpertBuffer(*this, "result", getResult(), getInput());
}

LogicalResult MoeDispatchGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "result", getResult(), 3,
                        "[batch, seq, features]")) ||
      failed(verifyChoiceIndices(*this, getResult(), getExperts(),
                                 getSlots())))
    return failure();
  return verifyExpertBuffer(*this, "grad", getGrad(), getResult());
}

LogicalResult MoeCombineOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "result", getResult(), 3,
                        "[batch, seq, features]")) ||
      failed(verifyChoiceIndices(*this, getResult(), getExperts(),
                                 getSlots())) ||
      failed(verifyExpertBuffer(*this, "expert_output", getExpertOutput(),
                                getResult())))
    return failure();
  return expectChoices(*this, "gates", getGates(), getResult(),
                       tensorType(getExperts()).getDimSize(2),
                       tensorType(getExpertOutput()).getElementType());
}

LogicalResult MoeCombineGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "grad", getGrad(), 3,
                        "[batch, seq, features]")) ||
      failed(verifyChoiceIndices(*this, getGrad(), getExperts(),
                                 getSlots())) ||
      failed(verifyExpertBuffer(*this, "expert_output", getExpertOutput(),
                                getGrad())) ||
      failed(expectChoices(*this, "gates", getGates(), getGrad(),
                           tensorType(getExperts()).getDimSize(2),
                           tensorType(getExpertOutput()).getElementType())) ||
      failed(expectSameType(*this, "expert_output_grad",
                            getExpertOutputGrad(), "the expert output",
                            getExpertOutput())))
    return failure();
  return expectSameType(*this, "gates_grad", getGatesGrad(), "the gates",
                        getGates());
}

LogicalResult ExpertLinearOp::verify() {
  if (failed(verifyExpertLinear(*this, getInput(), getWeight(), getCounts(),
                                /*weightDim=*/2)))
    return failure();
  RankedTensorType input = tensorType(getInput());
  ArrayRef<int64_t> shape = input.getShape();
  return expectType(*this, "result", getType(),
                    {shape[0], shape[1], shape[2],
                     tensorType(getWeight()).getDimSize(1)},
                    input.getElementType(),
                    "[B, E, C, N], N the weight's out_features");
}

LogicalResult ExpertLinearGradInputOp::verify() {
  if (failed(verifyExpertLinear(*this, getGrad(), getWeight(), getCounts(),
                                /*weightDim=*/1)))
    return failure();
  RankedTensorType grad = tensorType(getGrad());
  ArrayRef<int64_t> shape = grad.getShape();
  return expectType(*this, "result", getType(),
                    {shape[0], shape[1], shape[2],
                     tensorType(getWeight()).getDimSize(2)},
                    grad.getElementType(),
                    "[B, E, C, K], K the weight's in_features");
}

LogicalResult ExpertLinearGradWeightOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "input", getInput(), 4,
                        "[batch, experts, capacity, in_features]")) ||
      failed(expectRank(*this, "result", getResult(), 3,
                        "[experts, out_features, in_features]")) ||
      failed(verifyExpertLinear(*this, getGrad(), getResult(), getCounts(),
                                /*weightDim=*/1)))
    return failure();
  RankedTensorType grad = tensorType(getGrad());
  ArrayRef<int64_t> shape = grad.getShape();
  return expectType(*this, "input", getInput().getType(),
                    {shape[0], shape[1], shape[2],
                     tensorType(getResult()).getDimSize(2)},
                    grad.getElementType(),
                    "[B, E, C, K], K the result's in_features");
}

LogicalResult MoeAuxLossOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifyScoring(*this, getScoring())) ||
      failed(verifyCoefficients(*this, getAuxCoef(), getZCoef())) ||
      failed(verifyLogits(*this, getLogits())) ||
      failed(verifyChoiceIndices(*this, getLogits(), getExperts(), Value())))
    return failure();
  int64_t topK = tensorType(getExperts()).getDimSize(2);
  int64_t experts = tensorType(getLogits()).getDimSize(2);
  if (topK > experts)
    return emitOpError() << "experts has " << topK << " choices per token "
                         << "but there are " << experts << " experts";
  return success();
}

LogicalResult MoeAuxLossGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(verifyScoring(*this, getScoring())) ||
      failed(verifyCoefficients(*this, getAuxCoef(), getZCoef())) ||
      failed(verifyLogits(*this, getLogits())) ||
      failed(verifyChoiceIndices(*this, getLogits(), getExperts(), Value())))
    return failure();
  return expectSameType(*this, "result", getResult(), "the logits",
                        getLogits());
}

LogicalResult MoeExpertLoadOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "counts", getCounts(), 2, "[batch, experts]")))
    return failure();
  return expectType(*this, "result", getResult().getType(),
                    {tensorType(getCounts()).getDimSize(1)},
                    Float32Type::get(getContext()),
                    "[E], the counts' experts");
}

LogicalResult MoeBiasUpdateOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  float rate = getRate().convertToFloat();
  if (!(rate >= 0.0f) || !std::isfinite(rate))
    return emitOpError() << "rate must be finite and not negative, got "
                         << rate;
  if (failed(expectSameType(*this, "load", getLoad(), "the bias", getBias())))
    return failure();
  return expectSameType(*this, "result", getResult(), "the bias", getBias());
}
