//===- XfmrKernels.cpp - the runtime kernel of each xfmr op ---------------===//
//
// RuntimeKernelOpInterface: one method per op naming its row of
// runtime/program/Kernels.def and the parameters it passes. An op with
// optional operands or attributes picks the row that matches its form (a
// linear with a bias, a masked vocabulary statistic).
//
//===----------------------------------------------------------------------===//

#include "dialects/Xfmr/XfmrOps.h"
#include "runtime/program/Rope.h"

#include <limits>

using namespace mlir;

namespace partition::xfmr {
namespace {

using runtime::KernelId;

float f32(const APFloat &value) { return value.convertToFloat(); }

/// The float parameters of the attention_scaled rows: rope_theta (0: none),
/// the scaling kind (runtime::RopeScalingKind) and its factors.
template <typename AttentionLike>
SmallVector<float, 4> scaledFloats(AttentionLike op) {
  float theta = op.getRopeTheta() ? f32(*op.getRopeTheta()) : 0.0f;
  std::optional<StringRef> scaling = op.getRopeScaling();
  if (!scaling)
    return {theta, float(runtime::RopeScalingKind::None), 1.0f, 0.0f, 0.0f,
            0.0f};
  ArrayRef<double> f = *op.getRopeScalingFactors();
  // linear: [factor]; llama3 and yarn: four factors, in the op's order.
  runtime::RopeScalingKind kind = *scaling == "llama3"
                                      ? runtime::RopeScalingKind::Llama3
                                  : *scaling == "yarn"
                                      ? runtime::RopeScalingKind::Yarn
                                      : runtime::RopeScalingKind::Linear;
  bool four = f.size() == 4;
  return {theta, float(kind), float(f[0]), four ? float(f[1]) : 0.0f,
          four ? float(f[2]) : 0.0f, four ? float(f[3]) : 0.0f};
}

/// Plain (causal, RoPE) attention takes the original rows; RoPE scaling or
/// a sliding window the attention_scaled rows with their parameters
/// (runtime::RopeScalingKind, the window), so that a model without either
/// keeps its program bytes. A window of at least the sequence masks
/// nothing beyond causality and lowers as none.
template <typename AttentionLike>
KernelCall attentionCall(KernelId kernel, KernelId scaledKernel,
                         AttentionLike op) {
  SmallVector<int64_t, 3> ints = {static_cast<int64_t>(op.getNumHeads()),
                                  static_cast<int64_t>(op.getNumKvHeads()),
                                  op.getCausal() ? 1 : 0};
  float theta = op.getRopeTheta() ? f32(*op.getRopeTheta()) : 0.0f;
  int64_t seq = cast<ShapedType>(op.getQuery().getType()).getDimSize(1);
  int64_t window = 0;
  // With explicit positions a window is kept whatever its size: the
  // positions, not the local length, bound what it masks.
  bool positions = bool(op.getQueryPositions());
  if (positions)
    seq = std::numeric_limits<int64_t>::max();
  if (std::optional<uint64_t> w = op.getSlidingWindow(); w && int64_t(*w) < seq)
    window = int64_t(*w);
  if (positions)
    kernel = scaledKernel = kernel == KernelId::Attention
                                ? KernelId::AttentionPositions
                                : KernelId::AttentionPositionsGrad;
  if (!op.getRopeScaling() && window == 0 && !positions)
    return {kernel, ints, {theta}};
  ints.push_back(window);
  return {scaledKernel, ints, scaledFloats(op)};
}

/// The ring attention block rows take attention_scaled's parameters
/// always; the window is kept whatever the block's length (positions, not
/// the block, bound it).
template <typename BlockLike> KernelCall blockCall(KernelId kernel, BlockLike op) {
  std::optional<uint64_t> window = op.getSlidingWindow();
  return {kernel,
          {static_cast<int64_t>(op.getNumHeads()),
           static_cast<int64_t>(op.getNumKvHeads()), op.getCausal() ? 1 : 0,
           window ? int64_t(*window) : 0},
          scaledFloats(op)};
}

/// The whole-vocabulary loss kernels have no mask: a padded vocabulary runs
/// vocabulary-parallel (its logits split over the tensor axis) only.
template <typename LossLike>
FailureOr<KernelCall> wholeVocabularyLoss(LossLike op, KernelId kernel) {
  std::optional<int64_t> vocab = op.getVocab();
  if (vocab && *vocab < cast<ShapedType>(op.getLogits().getType()).getDimSize(2))
    return op->emitOpError()
           << "has a padded vocabulary (vocab " << *vocab
           << ") but its logits are whole; only the vocabulary-parallel loss "
              "masks the padding: split the logits over the tensor axis";
  return KernelCall{kernel};
}

/// A vocabulary-parallel statistic: the masked row when the vocabulary is
/// padded (its logical size is then the kernel's one integer).
KernelCall maskedOrNot(std::optional<int64_t> vocab, KernelId plain,
                       KernelId masked) {
  if (!vocab)
    return {plain};
  return {masked, {*vocab}};
}

} // namespace

// Embeddings.
FailureOr<KernelCall> EmbeddingOp::getKernelCall() {
  return KernelCall{KernelId::Embedding};
}
FailureOr<KernelCall> EmbeddingGradOp::getKernelCall() {
  return KernelCall{KernelId::EmbeddingGrad};
}
FailureOr<KernelCall> PositionEmbeddingOp::getKernelCall() {
  return KernelCall{getPositions() ? KernelId::PositionEmbeddingAt
                                   : KernelId::PositionEmbedding};
}
FailureOr<KernelCall> PositionEmbeddingGradOp::getKernelCall() {
  return KernelCall{getPositions() ? KernelId::PositionEmbeddingAtGrad
                                   : KernelId::PositionEmbeddingGrad};
}
FailureOr<KernelCall> SequencePositionsOp::getKernelCall() {
  return KernelCall{KernelId::SequencePositions,
                    {static_cast<int64_t>(getChunks())}};
}

// Normalisation: the epsilon is the one float.
FailureOr<KernelCall> LayerNormOp::getKernelCall() {
  return KernelCall{KernelId::LayerNorm, {}, {f32(getEpsilon())}};
}
FailureOr<KernelCall> LayerNormGradOp::getKernelCall() {
  return KernelCall{KernelId::LayerNormGrad, {}, {f32(getEpsilon())}};
}
FailureOr<KernelCall> RMSNormOp::getKernelCall() {
  return KernelCall{KernelId::RMSNorm, {}, {f32(getEpsilon())}};
}
FailureOr<KernelCall> RMSNormGradOp::getKernelCall() {
  return KernelCall{KernelId::RMSNormGrad, {}, {f32(getEpsilon())}};
}

// Linear layers: the bias, when present, is fused into the same call.
FailureOr<KernelCall> LinearOp::getKernelCall() {
  return KernelCall{getBias() ? KernelId::LinearBias : KernelId::Linear};
}
FailureOr<KernelCall> LinearGradInputOp::getKernelCall() {
  return KernelCall{KernelId::LinearGradInput};
}
FailureOr<KernelCall> LinearGradWeightOp::getKernelCall() {
  return KernelCall{getBiasGrad() ? KernelId::LinearGradWeightBias
                                  : KernelId::LinearGradWeight};
}

// Element-wise.
FailureOr<KernelCall> GeluOp::getKernelCall() {
  return KernelCall{KernelId::Gelu};
}
FailureOr<KernelCall> GeluGradOp::getKernelCall() {
  return KernelCall{KernelId::GeluGrad};
}
FailureOr<KernelCall> SwigluOp::getKernelCall() {
  return KernelCall{KernelId::Swiglu};
}
FailureOr<KernelCall> SwigluGradOp::getKernelCall() {
  return KernelCall{KernelId::SwigluGrad};
}
FailureOr<KernelCall> CastOp::getKernelCall() {
  return KernelCall{KernelId::Cast};
}
FailureOr<KernelCall> AddOp::getKernelCall() {
  return KernelCall{KernelId::Add};
}
FailureOr<KernelCall> ScaleOp::getKernelCall() {
  return KernelCall{KernelId::Scale, {}, {f32(getFactor())}};
}

// Attention: heads, kv heads and causality as integers, RoPE's theta (0 for
// none) as the float; attention_scaled adds the window and the scaling.
FailureOr<KernelCall> AttentionOp::getKernelCall() {
  return attentionCall(KernelId::Attention, KernelId::AttentionScaled, *this);
}
FailureOr<KernelCall> AttentionGradOp::getKernelCall() {
  return attentionCall(KernelId::AttentionGrad, KernelId::AttentionScaledGrad,
                       *this);
}

// The loss over a whole vocabulary.
FailureOr<KernelCall> SoftmaxCrossEntropyOp::getKernelCall() {
  return wholeVocabularyLoss(*this, KernelId::SoftmaxCrossEntropy);
}
FailureOr<KernelCall> SoftmaxCrossEntropyGradOp::getKernelCall() {
  return wholeVocabularyLoss(*this, KernelId::SoftmaxCrossEntropyGrad);
}

// The optimizer.
FailureOr<KernelCall> AdamWOp::getKernelCall() {
  return KernelCall{KernelId::AdamW,
                    {},
                    {f32(getBeta1()), f32(getBeta2()), f32(getEpsilon()),
                     f32(getWeightDecay())}};
}

// Vocabulary parallelism.
FailureOr<KernelCall> VocabParallelEmbeddingOp::getKernelCall() {
  return KernelCall{KernelId::VocabParallelEmbedding};
}
FailureOr<KernelCall> VocabParallelEmbeddingGradOp::getKernelCall() {
  return KernelCall{KernelId::VocabParallelEmbeddingGrad};
}
FailureOr<KernelCall> VocabParallelMaxOp::getKernelCall() {
  return maskedOrNot(getVocab(), KernelId::VocabParallelMax,
                     KernelId::VocabParallelMaskedMax);
}
FailureOr<KernelCall> VocabParallelTargetLogitOp::getKernelCall() {
  return KernelCall{KernelId::VocabParallelTargetLogit};
}
FailureOr<KernelCall> VocabParallelSumExpOp::getKernelCall() {
  return maskedOrNot(getVocab(), KernelId::VocabParallelSumExp,
                     KernelId::VocabParallelMaskedSumExp);
}
FailureOr<KernelCall> VocabParallelLossOp::getKernelCall() {
  return KernelCall{KernelId::VocabParallelLoss};
}
FailureOr<KernelCall> VocabParallelCrossEntropyGradOp::getKernelCall() {
  return maskedOrNot(getVocab(), KernelId::VocabParallelCrossEntropyGrad,
                     KernelId::VocabParallelMaskedCrossEntropyGrad);
}

// Ring attention (context parallelism).
FailureOr<KernelCall> AttentionBlockOp::getKernelCall() {
  return blockCall(KernelId::AttentionBlock, *this);
}
FailureOr<KernelCall> AttentionBlockGradOp::getKernelCall() {
  return blockCall(KernelId::AttentionBlockGrad, *this);
}
FailureOr<KernelCall> AttentionMergeOp::getKernelCall() {
  return KernelCall{KernelId::AttentionMerge};
}

// Mixture of experts. Scoring as an integer: 0 softmax, 1 softmax_topk,
// 2 sigmoid (runtime::MoeScoring).
namespace {
int64_t scoringCode(StringRef scoring) {
  return scoring == "sigmoid" ? 2 : scoring == "softmax_topk" ? 1 : 0;
}
} // namespace

FailureOr<KernelCall> MoeRouteOp::getKernelCall() {
  return KernelCall{getBias() ? KernelId::MoeRouteBiased : KernelId::MoeRoute,
                    {static_cast<int64_t>(getTopK()),
                     static_cast<int64_t>(getCapacity()),
                     scoringCode(getScoring())}};
}
FailureOr<KernelCall> MoeRouteGradOp::getKernelCall() {
  return KernelCall{KernelId::MoeRouteGrad,
                    {static_cast<int64_t>(getTopK()),
                     scoringCode(getScoring())}};
}
FailureOr<KernelCall> MoeDispatchOp::getKernelCall() {
  return KernelCall{KernelId::MoeDispatch};
}
FailureOr<KernelCall> MoeDispatchGradOp::getKernelCall() {
  return KernelCall{KernelId::MoeDispatchGrad};
}
FailureOr<KernelCall> MoeCombineOp::getKernelCall() {
  return KernelCall{KernelId::MoeCombine};
}
FailureOr<KernelCall> MoeCombineGradOp::getKernelCall() {
  return KernelCall{KernelId::MoeCombineGrad};
}
FailureOr<KernelCall> ExpertLinearOp::getKernelCall() {
  return KernelCall{KernelId::ExpertLinear};
}
FailureOr<KernelCall> ExpertLinearGradInputOp::getKernelCall() {
  return KernelCall{KernelId::ExpertLinearGradInput};
}
FailureOr<KernelCall> ExpertLinearGradWeightOp::getKernelCall() {
  return KernelCall{KernelId::ExpertLinearGradWeight};
}
FailureOr<KernelCall> MoeAuxLossOp::getKernelCall() {
  return KernelCall{KernelId::MoeAuxLoss,
                    {scoringCode(getScoring())},
                    {f32(getAuxCoef()), f32(getZCoef())}};
}
FailureOr<KernelCall> MoeAuxLossGradOp::getKernelCall() {
  return KernelCall{KernelId::MoeAuxLossGrad,
                    {scoringCode(getScoring())},
                    {f32(getAuxCoef()), f32(getZCoef())}};
}
FailureOr<KernelCall> MoeExpertLoadOp::getKernelCall() {
  return KernelCall{KernelId::MoeExpertLoad};
}
FailureOr<KernelCall> MoeBiasUpdateOp::getKernelCall() {
  return KernelCall{KernelId::MoeBiasUpdate, {}, {f32(getRate())}};
}

} // namespace partition::xfmr
