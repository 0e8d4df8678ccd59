//===- Experts.cpp - mixtures of experts and expert parallelism -----------===//

#include "planner/Experts.h"

#include "planner/Collectives.h"
#include "planner/LayerCost.h"

#include <algorithm>

namespace partition::planner {

int64_t denseFfnParameters(const ModelShape &m) {
  int64_t h = m.hidden, f = m.ffn;
  return m.llama ? 3 * h * f : 2 * h * f + f + h;
}

double denseFfnMatmulParameters(const ModelShape &m) {
  double h = double(m.hidden), f = double(m.ffn);
  return (m.llama ? 3 : 2) * h * f;
}

int64_t moeFfnParameters(const ModelShape &m) {
  // SwiGLU experts without biases, GPT-2's included (docs/moe.md).
  int64_t h = m.hidden, f = m.expertFfn;
  return m.experts * h + m.experts * 3 * h * f + m.sharedExperts * 3 * h * f;
}

double expertWeights(const ModelShape &m) {
  return double(m.experts) * 3 * double(m.hidden) * double(m.expertFfn);
}

double activeFfnMatmulParameters(const ModelShape &m) {
  double h = double(m.hidden), f = double(m.expertFfn);
  return double(m.experts) * h +
         double(m.topK + m.sharedExperts) * 3 * h * f;
}

double ModelShape::meanLayerParameters() const {
  if (!isMoe())
    return double(layerParameters());
  double moe = double(moeLayers());
  return double(layerParameters()) +
         moe / double(layers) *
             double(moeFfnParameters(*this) - denseFfnParameters(*this));
}

double ModelShape::meanLayerExpertParameters() const {
  if (!isMoe())
    return 0;
  return double(moeLayers()) / double(layers) * expertWeights(*this);
}

double ModelShape::activeParameters() const {
  // Every expert but the token's k is skipped.
  return double(parameters()) - double(moeLayers()) *
                                    double(experts - topK) * 3 *
                                    double(hidden) * double(expertFfn);
}

std::vector<int64_t> expertParallelDegrees(const ModelShape &m, int64_t dp) {
  std::vector<int64_t> degrees{1};
  if (!m.isMoe())
    return degrees;
  for (int64_t ep = 2; ep <= dp; ++ep)
    if (dp % ep == 0 && m.experts % ep == 0)
      degrees.push_back(ep);
  return degrees;
}

double expertBufferRows(const ModelShape &m, const Candidate &p) {
  return double(p.microBatch) * double(m.experts) * double(m.capacity) /
         double(p.cp);
}

double expertAllToAllBytes(const ModelShape &m, const Candidate &p) {
  double e = p.precision == "bf16" ? 2 : 4;
  return expertBufferRows(m, p) * double(m.hidden) * e;
}

double expertExchangeBytes(const ModelShape &m, const Candidate &p) {
  double e = p.precision == "bf16" ? 2 : 4;
  double tokens =
      double(p.microBatch) * double(m.seqLen) / double(p.cp);
  double rows = std::min(tokens * double(m.topK), expertBufferRows(m, p));
  return rows * double(m.hidden) * e;
}

double moeSavedPerToken(const ModelShape &m, double t, bool selective) {
  double h = double(m.hidden), f = double(m.expertFfn);
  double expertRows =
      double(m.experts) * double(m.capacity) /
      double(std::max<int64_t>(1, m.seqLen)) * (2 * h + (selective ? 2 : 3) * f / t);
  double shared = double(m.sharedExperts) * (selective ? 2 : 3) * f / t;
  return expertRows + double(m.experts) + shared;
}

namespace {
/// The share of the layers that are MoE layers.
double moeShare(const ModelShape &m) {
  return m.isMoe() ? double(m.moeLayers()) / double(m.layers) : 0;
}
/// Buffer rows per token: E C / S.
double rowsPerToken(const ModelShape &m) {
  return double(m.experts) * double(m.capacity) /
         double(std::max<int64_t>(1, m.seqLen));
}
} // namespace

double moeSavedDelta(const ModelShape &m, double t, bool selective) {
  if (!m.isMoe())
    return 0;
  double dense = (m.llama ? 3 : 2) - (selective ? 1 : 0);
  return moeShare(m) * (moeSavedPerToken(m, t, selective) -
                        dense * double(m.ffn) / t);
}

double moeWorkingDelta(const ModelShape &m, double t) {
  if (!m.isMoe())
    return 0;
  double dense = (m.llama ? 2 : 1) * double(m.ffn) / t;
  return moeShare(m) * (rowsPerToken(m) * double(m.hidden) - dense);
}

ExpertLayerCost expertLayerCost(const ModelShape &m, const Candidate &p,
                                const Cluster &c) {
  ExpertLayerCost cost;
  if (!m.isMoe())
    return cost;
  const std::string &prec = p.precision;
  double e = prec == "bf16" ? 2 : 4;
  double t = double(p.tp), h = double(m.hidden), f = double(m.expertFfn);
  double E = double(m.experts), k = double(m.topK);
  double n = double(p.microBatch) * double(m.seqLen) / double(p.cp);
  double buffer = expertBufferRows(m, p);
  // The filled rows (balanced routing; at most the capacity), spread over
  // the rank's E / EP experts: one grouped GEMM per weight.
  double routed = std::min(n * k, buffer);
  double local = E / double(p.ep);
  double rows = routed / local;

  // Router [E, h], its logits gathered over tp (split over the experts).
  double fwd = gemmTime(n, E / t, h, 1, e, c, prec);
  double dgrad = gemmTime(n, h, E / t, 1, e, c, prec);
  double wgrad = gemmTime(E / t, h, n, 1, e, c, prec);
  // w1, w3 (h -> f/t) and w2 (f/t -> h) over the filled rows.
  fwd += 2 * gemmTime(rows, f / t, h, local, e, c, prec) +
         gemmTime(rows, h, f / t, local, e, c, prec);
  dgrad += 2 * gemmTime(rows, h, f / t, local, e, c, prec) +
           gemmTime(rows, f / t, h, local, e, c, prec);
  wgrad += 2 * gemmTime(f / t, h, rows, local, e, c, prec) +
           gemmTime(h, f / t, rows, local, e, c, prec);
  // Shared experts: one dense SwiGLU of sharedExperts x f.
  double shared = double(m.sharedExperts) * f / t;
  if (shared > 0) {
    fwd += gemmTime(n, 2 * shared, h, 1, e, c, prec) +
           gemmTime(n, h, shared, 1, e, c, prec);
    dgrad += gemmTime(n, h, 2 * shared, 1, e, c, prec) +
             gemmTime(n, shared, h, 1, e, c, prec);
    wgrad += gemmTime(2 * shared, h, n, 1, e, c, prec) +
             gemmTime(h, shared, n, 1, e, c, prec);
  }
  // Memory-bound: routing (softmax and top-k over n x E logits, fp32),
  // the dispatch writing the whole buffer (zeros past the counts) from the
  // tokens, the combine reading the k rows of each token, SwiGLU on the
  // filled rows (two in, one out) and the shared experts'.
  double routing = 3 * n * E * 4;
  double moves = (buffer + routed + 2 * n) * h * e;
  double swiglu = 3 * (routed * f / t + n * shared) * e;
  cost.recomputeStream = streamTime(swiglu, 1, c);
  cost.forwardCompute = fwd + streamTime(routing + moves + swiglu, 4, c);
  // Their backward: the combine's gradient written into a buffer, the
  // dispatch's gathered back, SwiGLU's at 1.5 times its forward.
  cost.backwardInputCompute =
      dgrad + streamTime(routing + moves + 1.5 * swiglu, 4, c);
  cost.backwardWeight = wgrad;

  // The buffer's partial sums over tp (w2 is row-parallel), and in the
  // backward the gradient of the experts' input (w1 / w3 column-parallel).
  double bufferBytes = expertAllToAllBytes(m, p);
  Link tpLink = groupLink(c, p.tp, 1);
  cost.forwardTensor = allReduceTime(bufferBytes, p.tp, tpLink);
  cost.backwardTensor = cost.forwardTensor;
  if (p.ep > 1) {
    // The EP ranks are the data-parallel ones: tp x cp x pp apart (mesh
    // order dp, pp, cp, tp).
    Link epLink = groupLink(c, p.ep, p.tp * p.cp * p.pp);
    double a2a = allToAllTime(expertExchangeBytes(m, p), p.ep, epLink);
    // What the compiler emits per micro-batch (passes/partition, test:
    // mixtral-tiny at ep 2, `partition-compile --memory-report`): forward
    // the dispatched buffer out and the experts' output back; backward the
    // output's gradient out and the input's gradient back (the backward
    // reads the forward's exchanged copies).
    cost.forwardAllToAll = kForwardAllToAlls * a2a;
    cost.backwardAllToAll = kBackwardAllToAlls * a2a;
  }
  return cost;
}

} // namespace partition::planner
