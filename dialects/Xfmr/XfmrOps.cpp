//===- XfmrOps.cpp - verifiers of the xfmr ops ----------------------------===//
//
// Every verifier derives the type an operand or result must have from the
// others and, on a mismatch, prints both types and where the expected sizes
// came from, so a user sees exactly which sizes disagree.
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"
#include "dialects/Xfmr/XfmrVerify.h"

#include "mlir/IR/Diagnostics.h"
#include "mlir/IR/OpImplementation.h"

#include <cmath>

using namespace mlir;
using namespace partition::xfmr;
using namespace partition::xfmr::verify;

namespace partition::xfmr::verify {

RankedTensorType tensorType(Value value) {
  return cast<RankedTensorType>(value.getType());
}

/// Every xfmr tensor has a static shape: the memory planner and the sharding
/// pass both reason about exact sizes.
LogicalResult verifyStaticShapes(Operation *op) {
  for (auto [index, type] : llvm::enumerate(op->getOperandTypes()))
    if (auto tensor = dyn_cast<RankedTensorType>(type);
        tensor && !tensor.hasStaticShape())
      return op->emitOpError() << "operand #" << index
                               << " must have a static shape, but is "
                               << type;
  for (auto [index, type] : llvm::enumerate(op->getResultTypes()))
    if (auto tensor = dyn_cast<RankedTensorType>(type);
        tensor && !tensor.hasStaticShape())
      return op->emitOpError() << "result #" << index
                               << " must have a static shape, but is "
                               << type;
  return success();
}

/// `what` must have type tensor<shape x elementType>; `origin` says where the
/// expected sizes come from.
LogicalResult expectType(Operation *op, StringRef what, Type actual,
                         ArrayRef<int64_t> shape, Type elementType,
                         StringRef origin) {
  auto expected = RankedTensorType::get(shape, elementType);
  if (actual == expected)
    return success();
  return op->emitOpError() << what << " must be " << expected << " ("
                           << origin << "), but is " << actual;
}

LogicalResult expectSameType(Operation *op, StringRef what, Value value,
                             StringRef reference, Value referenceValue) {
  if (value.getType() == referenceValue.getType())
    return success();
  return op->emitOpError() << what << " must have the type of " << reference
                           << ", " << referenceValue.getType() << ", but is "
                           << value.getType();
}

LogicalResult expectRank(Operation *op, StringRef what, Value value,
                         int64_t rank, StringRef layout) {
  int64_t actual = tensorType(value).getRank();
  if (actual == rank)
    return success();
  return op->emitOpError() << what << " must have rank " << rank << " ("
                           << layout << "), but has rank " << actual;
}

LogicalResult expectAtLeastRank1(Operation *op, StringRef what, Value value) {
  if (tensorType(value).getRank() >= 1)
    return success();
  return op->emitOpError() << what
                           << " must have at least one dimension, but is "
                           << value.getType();
}

LogicalResult expectPositive(Operation *op, StringRef what, APFloat value) {
  double v = value.convertToDouble();
  if (v > 0.0 && std::isfinite(v))
    return success();
  return op->emitOpError() << what << " must be positive and finite, but is "
                           << v;
}

} // namespace partition::xfmr::verify

namespace {

/// A gain or bias vector [C] matching the last dimension of `input`.
LogicalResult expectFeatureVector(Operation *op, StringRef what, Type actual,
                                  Value input) {
  RankedTensorType inputType = tensorType(input);
  return expectType(op, what, actual, {inputType.getShape().back()},
                    inputType.getElementType(),
                    "[C], C the input's last dimension");
}

/// `shape` with its last dimension replaced by `last`.
SmallVector<int64_t> withLastDim(ArrayRef<int64_t> shape, int64_t last) {
  SmallVector<int64_t> result(shape);
  result.back() = last;
  return result;
}

} // namespace

//===----------------------------------------------------------------------===//
// Embeddings
//===----------------------------------------------------------------------===//

LogicalResult EmbeddingOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "table", getTable(), 2, "[vocab, hidden]")))
    return failure();
  auto tokens = getTokens().getType().getShape();
  RankedTensorType table = tensorType(getTable());
  return expectType(*this, "result", getType(),
                    {tokens[0], tokens[1], table.getDimSize(1)},
                    table.getElementType(),
                    "[B, T] of the tokens, C of the table");
}

LogicalResult EmbeddingGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "grad", getGrad(), 3, "[batch, seq, hidden]")))
    return failure();
  RankedTensorType grad = tensorType(getGrad());
  if (failed(expectType(*this, "tokens", getTokens().getType(),
                        grad.getShape().take_front(2),
                        getTokens().getType().getElementType(),
                        "[B, T] of the gradient")) ||
      failed(expectRank(*this, "result", getResult(), 2, "[vocab, hidden]")))
    return failure();
  int64_t vocab = getType().getDimSize(0);
  return expectType(*this, "result", getType(), {vocab, grad.getDimSize(2)},
                    grad.getElementType(), "C of the gradient");
}

/// Shared by position_embedding and its gradient: `table` is [P, C] with
/// P >= T for an activation [B, T, C].
static LogicalResult verifyPositionTable(Operation *op, StringRef what,
                                         RankedTensorType activation,
                                         Type tableType) {
  auto table = dyn_cast<RankedTensorType>(tableType);
  if (table.getRank() != 2)
    return op->emitOpError() << what
                             << " must have rank 2 ([positions, hidden]), "
                                "but has rank "
                             << table.getRank();
  if (failed(expectType(op, what, table,
                        {table.getDimSize(0), activation.getDimSize(2)},
                        activation.getElementType(),
                        "C and element type of the activation")))
    return failure();
  if (table.getDimSize(0) < activation.getDimSize(1))
    return op->emitOpError()
           << what << " has " << table.getDimSize(0)
           << " positions but the sequence has " << activation.getDimSize(1)
           << " tokens";
  return success();
}

/// Explicit positions of a [B, T, C] activation: one per element of T.
static LogicalResult verifyPositions(Operation *op, Value positions,
                                     RankedTensorType activation) {
  if (!positions)
    return success();
  int64_t length = tensorType(positions).getDimSize(0);
  if (length != activation.getDimSize(1))
    return op->emitOpError() << "positions has " << length
                             << " elements but the sequence has "
                             << activation.getDimSize(1);
  return success();
}

LogicalResult PositionEmbeddingOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "input", getInput(), 3,
                        "[batch, seq, hidden]")) ||
      failed(expectSameType(*this, "result", getResult(), "the input",
                            getInput())))
    return failure();
  if (failed(verifyPositionTable(*this, "table", tensorType(getInput()),
                                 getTable().getType())))
    return failure();
  return verifyPositions(*this, getPositions(), tensorType(getInput()));
}

LogicalResult PositionEmbeddingGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "grad", getGrad(), 3, "[batch, seq, hidden]")))
    return failure();
  if (failed(verifyPositionTable(*this, "result", tensorType(getGrad()),
                                 getType())))
    return failure();
  return verifyPositions(*this, getPositions(), tensorType(getGrad()));
}

LogicalResult SequencePositionsOp::verify() {
  int64_t length = getLength(), chunks = getChunks();
  if (length <= 0)
    return emitOpError() << "length must be positive, got " << length;
  if (chunks < 1)
    return emitOpError() << "chunks must be at least 1, got " << chunks;
  if (chunks != 1 && chunks % 2 != 0)
    return emitOpError() << "chunks must be 1 or even (two per "
                            "context-parallel rank), got "
                         << chunks;
  if (length % chunks != 0)
    return emitOpError() << "chunks " << chunks
                         << " does not divide the length " << length;
  if (getType().getDimSize(0) != length)
    return emitOpError() << "result has " << getType().getDimSize(0)
                         << " elements but length is " << length;
  return success();
}

//===----------------------------------------------------------------------===//
// Normalisation
//===----------------------------------------------------------------------===//

namespace {
/// An operand or result of a norm op: shaped like the input, or a [C]
/// vector of the input's features (gamma, beta and their gradients).
struct NormValue {
  StringRef name;
  Value value;
  bool isFeatureVector;
};
} // namespace

/// The checks shared by the norm ops and their gradients, in order.
static LogicalResult verifyNorm(Operation *op, Value input, APFloat epsilon,
                                ArrayRef<NormValue> values) {
  if (failed(verifyStaticShapes(op)) ||
      failed(expectAtLeastRank1(op, "input", input)))
    return failure();
  for (const NormValue &v : values)
    if (failed(v.isFeatureVector
                   ? expectFeatureVector(op, v.name, v.value.getType(), input)
                   : expectSameType(op, v.name, v.value, "the input", input)))
      return failure();
  return expectPositive(op, "epsilon", epsilon);
}

LogicalResult LayerNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon(),
                    {{"gamma", getGamma(), true},
                     {"beta", getBeta(), true},
                     {"result", getResult(), false}});
}

LogicalResult LayerNormGradOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon(),
                    {{"grad", getGrad(), false},
                     {"gamma", getGamma(), true},
                     {"input_grad", getInputGrad(), false},
                     {"gamma_grad", getGammaGrad(), true},
                     {"beta_grad", getBetaGrad(), true}});
}

LogicalResult RMSNormOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon(),
                    {{"gamma", getGamma(), true},
                     {"result", getResult(), false}});
}

LogicalResult RMSNormGradOp::verify() {
  return verifyNorm(*this, getInput(), getEpsilon(),
                    {{"grad", getGrad(), false},
                     {"gamma", getGamma(), true},
                     {"input_grad", getInputGrad(), false},
                     {"gamma_grad", getGammaGrad(), true}});
}

//===----------------------------------------------------------------------===//
// Linear layers
//===----------------------------------------------------------------------===//

LogicalResult LinearOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectAtLeastRank1(*this, "input", getInput())) ||
      failed(expectRank(*this, "weight", getWeight(), 2,
                        "[out_features, in_features]")))
    return failure();
  RankedTensorType input = tensorType(getInput());
  RankedTensorType weight = tensorType(getWeight());
  int64_t inFeatures = input.getShape().back();
  int64_t outFeatures = weight.getDimSize(0);
  if (weight.getDimSize(1) != inFeatures)
    return emitOpError() << "weight has in_features " << weight.getDimSize(1)
                         << " but the input's last dimension is "
                         << inFeatures;
  if (weight.getElementType() != input.getElementType())
    return emitOpError() << "weight element type " << weight.getElementType()
                         << " differs from the input's "
                         << input.getElementType();
  if (Value bias = getBias())
    if (failed(expectType(*this, "bias", bias.getType(), {outFeatures},
                          input.getElementType(),
                          "[N], N the weight's out_features")))
      return failure();
  return expectType(*this, "result", getType(),
                    withLastDim(input.getShape(), outFeatures),
                    input.getElementType(),
                    "the input's leading dimensions, N the weight's "
                    "out_features");
}

LogicalResult LinearGradInputOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectAtLeastRank1(*this, "grad", getGrad())) ||
      failed(expectRank(*this, "weight", getWeight(), 2,
                        "[out_features, in_features]")))
    return failure();
  RankedTensorType grad = tensorType(getGrad());
  RankedTensorType weight = tensorType(getWeight());
  if (weight.getDimSize(0) != grad.getShape().back())
    return emitOpError() << "weight has out_features " << weight.getDimSize(0)
                         << " but the gradient's last dimension is "
                         << grad.getShape().back();
  if (weight.getElementType() != grad.getElementType())
    return emitOpError() << "weight element type " << weight.getElementType()
                         << " differs from the gradient's "
                         << grad.getElementType();
  return expectType(*this, "result", getType(),
                    withLastDim(grad.getShape(), weight.getDimSize(1)),
                    grad.getElementType(),
                    "the gradient's leading dimensions, K the weight's "
                    "in_features");
}

LogicalResult LinearGradWeightOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectAtLeastRank1(*this, "grad", getGrad())) ||
      failed(expectAtLeastRank1(*this, "input", getInput())))
    return failure();
  RankedTensorType grad = tensorType(getGrad());
  RankedTensorType input = tensorType(getInput());
  if (grad.getShape().drop_back() != input.getShape().drop_back())
    return emitOpError() << "grad " << grad << " and input " << input
                         << " must have the same leading dimensions";
  if (grad.getElementType() != input.getElementType())
    return emitOpError() << "grad element type " << grad.getElementType()
                         << " differs from the input's "
                         << input.getElementType();
  int64_t outFeatures = grad.getShape().back();
  if (failed(expectType(*this, "weight_grad", getWeightGrad().getType(),
                        {outFeatures, input.getShape().back()},
                        grad.getElementType(),
                        "[N, K]: N of the gradient, K of the input")))
    return failure();
  if (Value biasGrad = getBiasGrad())
    return expectType(*this, "bias_grad", biasGrad.getType(), {outFeatures},
                      grad.getElementType(), "[N], N of the gradient");
  return success();
}

//===----------------------------------------------------------------------===//
// Activations and elementwise ops
//===----------------------------------------------------------------------===//

LogicalResult GeluOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  return expectSameType(*this, "result", getResult(), "the input",
                        getInput());
}

LogicalResult GeluGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectSameType(*this, "grad", getGrad(), "the input",
                            getInput())))
    return failure();
  return expectSameType(*this, "result", getResult(), "the input",
                        getInput());
}

LogicalResult SwigluOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectSameType(*this, "up", getUp(), "the gate", getGate())))
    return failure();
  return expectSameType(*this, "result", getResult(), "the gate", getGate());
}

LogicalResult SwigluGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectSameType(*this, "grad", getGrad(), "the gate",
                            getGate())) ||
      failed(expectSameType(*this, "up", getUp(), "the gate", getGate())) ||
      failed(expectSameType(*this, "gate_grad", getGateGrad(), "the gate",
                            getGate())))
    return failure();
  return expectSameType(*this, "up_grad", getUpGrad(), "the gate", getGate());
}

LogicalResult CastOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  RankedTensorType input = tensorType(getInput());
  if (failed(expectType(*this, "result", getType(), input.getShape(),
                        getType().getElementType(), "the input's shape")))
    return failure();
  if (getType().getElementType() == input.getElementType())
    return emitOpError() << "casts " << input.getElementType()
                         << " to itself; remove it";
  return success();
}

LogicalResult AddOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectSameType(*this, "rhs", getRhs(), "lhs", getLhs())))
    return failure();
  return expectSameType(*this, "result", getResult(), "lhs", getLhs());
}

LogicalResult ScaleOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  if (!std::isfinite(getFactor().convertToDouble()))
    return emitOpError() << "factor must be finite, but is "
                         << getFactor().convertToDouble();
  return expectSameType(*this, "result", getResult(), "the input",
                        getInput());
}

//===----------------------------------------------------------------------===//
// Loss
//===----------------------------------------------------------------------===//

static LogicalResult verifyLogitsAndTargets(Operation *op, Value logits,
                                            TypedValue<RankedTensorType>
                                                targets) {
  if (failed(verifyStaticShapes(op)) ||
      failed(expectRank(op, "logits", logits, 3, "[batch, seq, vocab]")))
    return failure();
  return expectType(op, "targets", targets.getType(),
                    tensorType(logits).getShape().take_front(2),
                    targets.getType().getElementType(),
                    "[B, T] of the logits");
}

/// A padded vocabulary's logical size: between 1 and the logits' columns
/// (`limit`; 0: no upper bound, the logits being one shard).
static LogicalResult verifyLogicalVocab(Operation *op,
                                        std::optional<int64_t> vocab,
                                        int64_t limit) {
  if (!vocab)
    return success();
  if (limit == 0 && *vocab < 1)
    return op->emitOpError() << "vocab " << *vocab
                             << " must be at least 1 (the logical vocabulary)";
  if (limit > 0 && (*vocab < 1 || *vocab > limit))
    return op->emitOpError()
           << "vocab " << *vocab << " must be in [1, " << limit
           << "] (the logical vocabulary within the padded logits)";
  return success();
}

LogicalResult SoftmaxCrossEntropyOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())))
    return failure();
  return verifyLogicalVocab(*this, getVocab(),
                            tensorType(getLogits()).getDimSize(2));
}

LogicalResult SoftmaxCrossEntropyGradOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())) ||
      failed(verifyLogicalVocab(*this, getVocab(),
                                tensorType(getLogits()).getDimSize(2))))
    return failure();
  return expectSameType(*this, "result", getResult(), "the logits",
                        getLogits());
}

//===----------------------------------------------------------------------===//
// Optimizer
//===----------------------------------------------------------------------===//

LogicalResult AdamWOp::verify() {
  if (failed(verifyStaticShapes(*this)))
    return failure();
  ArrayRef<int64_t> shape = tensorType(getParam()).getShape();
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"grad", getGrad()},
        {"moment1", getMoment1()},
        {"moment2", getMoment2()},
        {"new_param", getNewParam()},
        {"new_moment1", getNewMoment1()},
        {"new_moment2", getNewMoment2()}}) {
    ArrayRef<int64_t> actual = tensorType(value).getShape();
    if (actual != shape) {
      InFlightDiagnostic diag = emitOpError() << name << " has shape [";
      llvm::interleaveComma(actual, diag);
      diag << "] but the parameter has shape [";
      llvm::interleaveComma(shape, diag);
      return diag << "]";
    }
  }
  if (
      failed(expectSameType(*this, "grad", getGrad(), "the parameter",
                            getParam())) ||
      failed(expectSameType(*this, "new_param", getNewParam(),
                            "the parameter", getParam())))
    return failure();
  for (auto [name, value] :
       {std::pair<StringRef, Value>{"moment1", getMoment1()},
        {"moment2", getMoment2()},
        {"new_moment1", getNewMoment1()},
        {"new_moment2", getNewMoment2()}}) {
    Type element = tensorType(value).getElementType();
    if (!element.isF32())
      return emitOpError() << name
                           << " must hold f32 (optimizer state is fp32), but "
                              "holds "
                           << element;
  }
  for (auto [name, beta] : {std::pair<StringRef, APFloat>{"beta1", getBeta1()},
                            {"beta2", getBeta2()}}) {
    double b = beta.convertToDouble();
    if (!(b >= 0.0 && b < 1.0))
      return emitOpError() << name << " must be in [0, 1), but is " << b;
  }
  if (failed(expectPositive(*this, "epsilon", getEpsilon())))
    return failure();
  double decay = getWeightDecay().convertToDouble();
  if (!(decay >= 0.0 && std::isfinite(decay)))
    return emitOpError() << "weight_decay must be non-negative, but is "
                         << decay;
  return success();
}

//===----------------------------------------------------------------------===//
// Vocabulary-parallel embedding and loss
//===----------------------------------------------------------------------===//

// The local table / logits have Vl rows / columns: every check is the one
// of the unsharded op with V replaced by Vl, plus the shard's per-position
// statistics ([B, T] f32, whatever the logits' element type).

LogicalResult VocabParallelEmbeddingOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "table", getTable(), 2,
                        "[local vocab, hidden]")))
    return failure();
  auto tokens = getTokens().getType().getShape();
  RankedTensorType table = tensorType(getTable());
  return expectType(*this, "result", getType(),
                    {tokens[0], tokens[1], table.getDimSize(1)},
                    table.getElementType(),
                    "[B, T] of the tokens, C of the table");
}

LogicalResult VocabParallelEmbeddingGradOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "grad", getGrad(), 3, "[batch, seq, hidden]")))
    return failure();
  RankedTensorType grad = tensorType(getGrad());
  if (failed(expectType(*this, "tokens", getTokens().getType(),
                        grad.getShape().take_front(2),
                        getTokens().getType().getElementType(),
                        "[B, T] of the gradient")) ||
      failed(expectRank(*this, "result", getResult(), 2,
                        "[local vocab, hidden]")))
    return failure();
  int64_t localVocab = getType().getDimSize(0);
  return expectType(*this, "result", getType(),
                    {localVocab, grad.getDimSize(2)}, grad.getElementType(),
                    "C of the gradient");
}

/// `what` is a per-position statistic of `logits` [B, T, Vl]: [B, T] f32.
static LogicalResult expectPerPosition(Operation *op, StringRef what,
                                       Value value, Value logits) {
  RankedTensorType logitsType = tensorType(logits);
  return expectType(op, what, value.getType(),
                    logitsType.getShape().take_front(2),
                    Float32Type::get(op->getContext()),
                    "[B, T] of the logits, f32");
}

/// The logical vocabulary of a vocabulary-parallel op: global ids are i32.
static LogicalResult verifyShardVocab(Operation *op,
                                      std::optional<int64_t> vocab) {
  if (vocab && *vocab > int64_t(INT32_MAX) + 1)
    return op->emitOpError() << "vocab " << *vocab
                             << " must be in [1, 2^31] (i32 token ids)";
  return verifyLogicalVocab(op, vocab, 0);
}

/// `shard` and `vocab` of a masked max / sum_exp: both or neither.
static LogicalResult verifyMask(Operation *op, Value shard,
                                std::optional<int64_t> vocab) {
  if (bool(shard) != vocab.has_value())
    return op->emitOpError()
           << "takes a shard and a vocab together (a padded vocabulary) or "
              "neither, but has only the "
           << (shard ? "shard" : "vocab");
  return verifyShardVocab(op, vocab);
}

LogicalResult VocabParallelMaxOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "logits", getLogits(), 3,
                        "[batch, seq, local vocab]")) ||
      failed(verifyMask(*this, getShard(), getVocab())))
    return failure();
  return expectPerPosition(*this, "result", getResult(), getLogits());
}

LogicalResult VocabParallelTargetLogitOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())))
    return failure();
  return expectPerPosition(*this, "result", getResult(), getLogits());
}

LogicalResult VocabParallelSumExpOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "logits", getLogits(), 3,
                        "[batch, seq, local vocab]")) ||
      failed(expectPerPosition(*this, "max", getMax(), getLogits())) ||
      failed(verifyMask(*this, getShard(), getVocab())))
    return failure();
  return expectPerPosition(*this, "result", getResult(), getLogits());
}

LogicalResult VocabParallelLossOp::verify() {
  if (failed(verifyStaticShapes(*this)) ||
      failed(expectRank(*this, "max", getMax(), 2, "[batch, seq]")) ||
      failed(expectSameType(*this, "sum_exp", getSumExp(), "max", getMax())))
    return failure();
  return expectSameType(*this, "target_logit", getTargetLogit(), "max",
                        getMax());
}

LogicalResult VocabParallelCrossEntropyGradOp::verify() {
  if (failed(verifyLogitsAndTargets(*this, getLogits(), getTargets())) ||
      failed(expectPerPosition(*this, "max", getMax(), getLogits())) ||
      failed(expectPerPosition(*this, "sum_exp", getSumExp(), getLogits())) ||
      failed(verifyShardVocab(*this, getVocab())))
    return failure();
  return expectSameType(*this, "result", getResult(), "the logits",
                        getLogits());
}

#define GET_OP_CLASSES
#include "dialects/Xfmr/XfmrOps.cpp.inc"
