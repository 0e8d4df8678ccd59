//===- KernelArgsMoe.cpp - shape checks of the mixture-of-experts rows ----===//
//
// The routing tensors are [B, S, k] (gates of the logits' float type, expert ids and slots i32),
// the logits [B, S, E], the expert buffers [B, E, C, H] with counts [B, E]
// (i32). Each check fills batch, seq, channels, experts, topK and capacity
// from the buffers that carry them and checks the rest against those.
//
//===----------------------------------------------------------------------===//

#include "runtime/program/KernelArgsChecker.h"

#include <cmath>

namespace partition::runtime::kernelargs {

/// `buffer` is [B, S, k] of `type`, B, S and k already known.
void Checker::moeChoices(const BufferInfo &buffer, const char *what,
                         DType type) {
  dtype(buffer, type, what);
  require(buffer.shape ==
              std::vector<int64_t>{args.batch, args.seq, args.topK},
          std::string(what) + " " + shapeString(buffer) + " must be [" +
              std::to_string(args.batch) + "," + std::to_string(args.seq) +
              "," + std::to_string(args.topK) + "]");
}

void Checker::moeScoring(int64_t code) {
  require(code >= 0 && code <= 2,
          "scoring " + std::to_string(code) +
              " must be 0 (softmax), 1 (softmax_topk) or 2 (sigmoid)");
  args.scoring = static_cast<MoeScoring>(code);
}

// moe_route(_biased): logits [B, S, E] -> gates, experts, slots, counts;
// moe_route_grad: gates_grad, logits, experts -> logits_grad.
void Checker::checkMoeRoute() {
  bool grad = instruction.kernel == KernelId::MoeRouteGrad;
  const BufferInfo &logits = in(grad ? 1 : 0);
  require(isFloat(logits.dtype), "logits must hold floats");
  rank(logits, 3, "logits");
  args.batch = logits.shape[0];
  args.seq = logits.shape[1];
  args.experts = logits.shape[2];
  args.topK = instruction.ints[0];
  require(args.topK >= 1 && args.topK <= args.experts,
          "top_k " + std::to_string(args.topK) + " must be in [1, " +
              std::to_string(args.experts) + "]");
  if (grad) {
    moeScoring(instruction.ints[1]);
    moeChoices(in(0), "gates gradient", logits.dtype);
    moeChoices(in(2), "experts", DType::I32);
    dtype(out(0), logits.dtype, "logits gradient");
    sameElements(logits, out(0), "logits gradient");
    return;
  }
  args.capacity = instruction.ints[1];
  require(args.capacity >= 1 && args.capacity <= args.seq,
          "capacity " + std::to_string(args.capacity) + " must be in [1, " +
              std::to_string(args.seq) + "]");
  moeScoring(instruction.ints[2]);
  if (instruction.kernel == KernelId::MoeRouteBiased) {
    dtype(in(1), DType::F32, "bias");
    vector(in(1), args.experts, "bias");
  }
  moeChoices(out(0), "gates", logits.dtype);
  moeChoices(out(1), "experts", DType::I32);
  moeChoices(out(2), "slots", DType::I32);
  dtype(out(3), DType::I32, "counts");
  require(out(3).shape == std::vector<int64_t>{args.batch, args.experts},
          "counts " + shapeString(out(3)) + " must be [batch, experts]");
}

// moe_dispatch(_grad), moe_combine(_grad): tokens [B, S, H], an expert
// buffer [B, E, C, H], the choices [B, S, k].
void Checker::checkMoeDispatch() {
  KernelId kernel = instruction.kernel;
  bool dispatch = kernel == KernelId::MoeDispatch;
  bool combineGrad = kernel == KernelId::MoeCombineGrad;
  const BufferInfo &tokens = dispatch || combineGrad ? in(0) : out(0);
  const BufferInfo &buffer = dispatch ? out(0) : combineGrad ? in(1) : in(0);
  rank(tokens, 3, "tokens");
  rank(buffer, 4, "expert buffer");
  dtype(tokens, args.floatType, "tokens");
  dtype(buffer, args.floatType, "expert buffer");
  args.batch = tokens.shape[0];
  args.seq = tokens.shape[1];
  args.channels = tokens.shape[2];
  args.experts = buffer.shape[1];
  args.capacity = buffer.shape[2];
  require(buffer.shape[0] == args.batch && buffer.shape[3] == args.channels &&
              args.capacity <= args.seq,
          "expert buffer " + shapeString(buffer) + " does not fit tokens " +
              shapeString(tokens));
  // The choices follow the float operands: experts and slots are the last
  // two inputs, gates (combine) the one before them.
  int experts = info.inputs - 2;
  require(in(experts).shape.size() == 3, "experts " + shapeString(in(experts)) +
                                             " must be [batch, seq, top_k]");
  args.topK = in(experts).shape[2];
  moeChoices(in(experts), "experts", DType::I32);
  moeChoices(in(experts + 1), "slots", DType::I32);
  bool gates = kernel == KernelId::MoeCombine || combineGrad;
  if (gates)
    moeChoices(in(experts - 1), "gates", args.floatType);
  if (combineGrad) {
    sameElements(out(0), buffer, "expert buffer gradient");
    dtype(out(0), args.floatType, "expert buffer gradient");
    moeChoices(out(1), "gates gradient", args.floatType);
  }
}

// expert_linear: x [B, E, C, K], w [E, N, K] -> [B, E, C, N];
// _grad_input: dy [B, E, C, N], w -> [B, E, C, K];
// _grad_weight: dy, x [B, E, C, K] -> [E, N, K]; counts [B, E] last input.
void Checker::checkExpertLinear() {
  KernelId kernel = instruction.kernel;
  allFloat({0, 1});
  const BufferInfo &rows = in(0);
  rank(rows, 4, "expert rows");
  args.batch = rows.shape[0];
  args.experts = rows.shape[1];
  args.capacity = rows.shape[2];
  args.rows = args.batch * args.experts * args.capacity;
  const BufferInfo &weight = kernel == KernelId::ExpertLinearGradWeight
                                 ? out(0)
                                 : in(1);
  rank(weight, 3, "expert weight");
  require(weight.shape[0] == args.experts,
          "expert weight " + shapeString(weight) + " does not have the " +
              std::to_string(args.experts) + " experts of " +
              shapeString(rows));
  args.outFeatures = weight.shape[1];
  args.inFeatures = weight.shape[2];
  int64_t rowFeatures =
      kernel == KernelId::ExpertLinear ? args.inFeatures : args.outFeatures;
  require(rows.shape[3] == rowFeatures,
          "expert rows " + shapeString(rows) + " do not match weight " +
              shapeString(weight));
  std::vector<int64_t> other = {args.batch, args.experts, args.capacity,
                                kernel == KernelId::ExpertLinearGradInput
                                    ? args.inFeatures
                                    : args.outFeatures};
  if (kernel == KernelId::ExpertLinearGradWeight) {
    other.back() = args.inFeatures;
    require(in(1).shape == other, "input " + shapeString(in(1)) +
                                      " does not match grad " +
                                      shapeString(rows));
  } else {
    require(out(0).shape == other,
            "result " + shapeString(out(0)) + " has the wrong shape");
  }
  dtype(in(2), DType::I32, "counts");
  require(in(2).shape == std::vector<int64_t>{args.batch, args.experts},
          "counts " + shapeString(in(2)) + " must be [batch, experts]");
}

// moe_aux_loss: logits [B, S, E], experts [B, S, k] -> loss [];
// _grad: loss_grad [], logits, experts -> logits_grad.
void Checker::checkMoeAuxLoss() {
  bool grad = instruction.kernel == KernelId::MoeAuxLossGrad;
  const BufferInfo &logits = in(grad ? 1 : 0);
  const BufferInfo &experts = in(grad ? 2 : 1);
  require(isFloat(logits.dtype), "logits must hold floats");
  rank(logits, 3, "logits");
  rank(experts, 3, "experts");
  args.batch = logits.shape[0];
  args.seq = logits.shape[1];
  args.experts = logits.shape[2];
  args.topK = experts.shape[2];
  require(args.topK >= 1 && args.topK <= args.experts,
          "experts " + shapeString(experts) + " has more choices than the " +
              std::to_string(args.experts) + " experts");
  moeChoices(experts, "experts", DType::I32);
  moeScoring(instruction.ints[0]);
  for (float coef : instruction.floats)
    require(coef >= 0 && coef < INFINITY,
            "the loss coefficients must be finite and not negative");
  if (grad) {
    dtype(in(0), DType::F32, "loss gradient");
    require(in(0).elements == 1, "loss gradient must be a scalar");
    dtype(out(0), logits.dtype, "logits gradient");
    sameElements(logits, out(0), "logits gradient");
  } else {
    dtype(out(0), DType::F32, "loss");
    require(out(0).elements == 1, "loss must be a scalar");
  }
}

// moe_expert_load: counts [B, E] (i32) -> load [E] (f32);
// moe_bias_update: bias [E], load [E] -> bias' [E] (f32), floats: rate.
void Checker::checkMoeBias() {
  if (instruction.kernel == KernelId::MoeExpertLoad) {
    dtype(in(0), DType::I32, "counts");
    rank(in(0), 2, "counts");
    args.batch = in(0).shape[0];
    args.experts = in(0).shape[1];
    dtype(out(0), DType::F32, "load");
    vector(out(0), args.experts, "load");
    return;
  }
  rank(in(0), 1, "bias");
  args.experts = in(0).shape[0];
  for (int i = 0; i < 2; ++i)
    dtype(in(i), DType::F32, i == 0 ? "bias" : "load");
  vector(in(1), args.experts, "load");
  dtype(out(0), DType::F32, "new bias");
  vector(out(0), args.experts, "new bias");
  float rate = instruction.floats[0];
  require(rate >= 0 && rate < INFINITY,
          "the bias update rate must be finite and not negative");
}

} // namespace partition::runtime::kernelargs
