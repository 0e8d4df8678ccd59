//===- LayerCost.cpp - seconds of one layer's work on one rank ------------===//

#include "planner/LayerCost.h"

#include "planner/Collectives.h"
#include "planner/ContextParallel.h"
#include "planner/Experts.h"

#include <algorithm>
#include <cmath>

namespace partition::planner {

/// Time of one (batched) GEMM C[M,N] += A[M,K] B[K,N]. Each compute unit
/// makes one output tile at a time: its K loop at the cluster's GEMM
/// efficiency, then the tile's store at the unit's share of memory
/// bandwidth (not overlapped with the next tile's loop: short K loses);
/// tiles come in waves over the units (the last wave and the last row and
/// column of tiles are partly empty). The best of three tile sizes, as
/// cuBLAS's heuristics pick; or the bytes moved at memory bandwidth when
/// that is slower (thin GEMMs: attention's head dimension, small batches).
/// On a CPU profile with a packing rate (gemm_pack_bandwidth), the BLAS
/// library's copy of both operands into its panels comes first.
double gemmTime(double M, double N, double K, double batch, double elemBytes,
                const Cluster &c, const std::string &precision) {
  if (M <= 0 || N <= 0 || K <= 0 || batch <= 0)
    return 0;
  double units = double(c.computeUnits);
  double unitFlops = c.peakFlops(precision) * c.gemmEfficiency / units;
  double unitBandwidth = c.memoryBandwidth * c.memoryEfficiency / units;
  double best = INFINITY;
  for (int shrink = 0; shrink < 3; ++shrink) {
    double tm = std::max(1.0, double(c.gemmTileM) / (shrink >= 1 ? 2 : 1));
    double tn = std::max(1.0, double(c.gemmTileN) / (shrink >= 2 ? 2 : 1));
    double tiles = std::ceil(M / tm) * std::ceil(N / tn) * batch;
    double waves = std::ceil(tiles / units);
    double tile = 2 * tm * tn * K / unitFlops + tm * tn * elemBytes / unitBandwidth;
    best = std::min(best, waves * tile);
  }
  double bytes = elemBytes * batch * (M * K + K * N + M * N);
  double memory = bytes / (c.memoryBandwidth * c.memoryEfficiency);
  double pack = 0;
  if (c.gemmPackBandwidth > 0)
    for (double operand : {elemBytes * M * K, elemBytes * K * N})
      if (operand > c.gemmPackCachedBytes)
        pack += batch * operand / c.gemmPackBandwidth;
  return std::max(best + pack, memory) + c.kernelLatency;
}

/// Memory-bound kernels: `bytes` moved by `kernels` launches.
double streamTime(double bytes, double kernels, const Cluster &c) {
  return bytes / (c.memoryBandwidth * c.memoryEfficiency) +
         kernels * c.kernelLatency;
}


LayerCost layerCost(const ModelShape &m, const Candidate &p,
                    const Cluster &c) {
  const std::string &prec = p.precision;
  double e = prec == "bf16" ? 2 : 4;
  double t = double(p.tp), b = double(p.microBatch), s = double(m.seqLen);
  double h = double(m.hidden), f = double(m.ffn), d = double(m.headDim());
  // This rank's tokens: context parallelism splits each sequence over cp
  // ranks, and with it every GEMM row, elementwise kernel and activation.
  double queries = s / double(p.cp);
  double n = b * queries;
  double qkv = double(m.heads + 2 * m.kvHeads) * d;
  double sp = p.sequenceParallel ? t : 1; // replicated work split by SP

  // The layer's linears (M, N, K) on this rank.
  struct Gemm {
    double M, N, K;
  };
  std::vector<Gemm> linears = {{n, qkv / t, h}, {n, h, h / t}};
  std::vector<Gemm> ffn;
  if (m.llama) {
    ffn.push_back({n, 2 * f / t, h});
    ffn.push_back({n, h, f / t});
  } else {
    ffn.push_back({n, f / t, h});
    ffn.push_back({n, h, f / t});
  }
  // A MoE model's layer is the mean of its layers: moeShare of them have
  // a MoE block (Experts.h) instead of the dense feed-forward one.
  double moeShare = m.isMoe() ? double(m.moeLayers()) / double(m.layers) : 0;
  if (!m.isMoe())
    linears.insert(linears.end(), ffn.begin(), ffn.end());
  LayerCost cost;
  double forwardGemm = 0, dgrad = 0, wgrad = 0;
  for (const Gemm &g : linears) {
    forwardGemm += gemmTime(g.M, g.N, g.K, 1, e, c, prec);
    dgrad += gemmTime(g.M, g.K, g.N, 1, e, c, prec);
    wgrad += gemmTime(g.N, g.K, g.M, 1, e, c, prec);
  }
  ExpertLayerCost moe;
  if (m.isMoe()) {
    for (const Gemm &g : ffn) {
      forwardGemm += (1 - moeShare) * gemmTime(g.M, g.N, g.K, 1, e, c, prec);
      dgrad += (1 - moeShare) * gemmTime(g.M, g.K, g.N, 1, e, c, prec);
      wgrad += (1 - moeShare) * gemmTime(g.N, g.K, g.M, 1, e, c, prec);
    }
    moe = expertLayerCost(m, p, c);
  }

  // Attention: b x heads/t products of the rank's queries [s/cp, d] with
  // the keys they are charged for, [d, k], and [s/cp, k] x [k, d]: k is the
  // whole sequence (the window w < s where there is one) at cp 1; with
  // context parallelism the slowest rank's share of the causal work
  // (ContextParallel.h: s with zigzag, more without).
  double heads = b * double(m.heads) / t;
  bool materialized = c.attentionKernel == "materialized";
  // Materialized attention computes every score and masks it: no rank
  // skips any, so the split is even whatever the load balance.
  double keys = materialized ? m.attendedKeys() : attendedKeysPerQuery(m, p, c);
  double scores = gemmTime(queries, keys, d, heads, e, c, prec);
  double context = gemmTime(queries, d, keys, heads, e, c, prec);
  double attentionForward, attentionBackward;
  if (materialized) {
    // Scale-mask-softmax reads the scores and writes the probabilities;
    // its backward reads probabilities and their gradient and writes the
    // scores' gradient. Four GEMMs in the backward (dP, dV, dQ, dK).
    // Dropout on the probabilities (Megatron-LM's attention dropout)
    // reads them and writes the dropped ones and a byte mask; its backward
    // reads the mask and the gradient and writes the gradient.
    double elements = heads * queries * keys;
    double softmax = 2 * elements * e, softmaxGrad = 3 * elements * e;
    double dropout = elements * (2 * e + 1);
    attentionForward = scores + context + streamTime(softmax + dropout, 2, c);
    attentionBackward = 2 * scores + 2 * context +
                        streamTime(softmaxGrad + dropout, 2, c);
  } else {
    // Flash-style: the scores never leave the chip; the backward computes
    // them again (five products).
    double io = 4 * n * h / t * e;
    attentionForward = std::max(scores + context, streamTime(io, 0, c));
    attentionBackward =
        std::max(3 * scores + 2 * context, streamTime(2 * io, 0, c));
  }

  // Memory-bound kernels, elements moved per token: two norms (read and
  // write h), two residual sums (two reads, one write), the activation
  // (GELU: one in, one out; SwiGLU: two in, one out), RoPE on q and k.
  double replicated = (4 * h + 6 * h) / sp;
  double sharded = m.llama ? 3 * f / t + 2 * (qkv - d * m.kvHeads) / t
                           : 2 * f / t;
  if (m.isMoe()) // the MoE blocks' SwiGLU is in the expert cost
    sharded -= moeShare * (m.llama ? 3 : 2) * f / t;
  double elementwise = n * (replicated + sharded) * e;
  // bf16: each use of a parameter reads an fp32 master and writes a bf16
  // copy, once per micro-batch.
  // (A rank's share: its E / EP experts' weights.)
  double experts = m.meanLayerExpertParameters();
  double held = m.meanLayerParameters() - experts + experts / double(p.ep);
  double casts = prec == "bf16" ? 6.0 * held / t : 0;
  double forwardStream = streamTime(elementwise + casts, 7, c);
  // Their backward reads the input and the output gradient and writes the
  // input gradient: about 1.5 times the forward's traffic.
  double backwardStream = streamTime(1.5 * elementwise, 7, c);

  // Tensor parallelism: two all-reduces of the layer's activation per
  // direction, or with SP two all-gathers and two reduce-scatters.
  double activation = n * h * e;
  Link tpLink = groupLink(c, p.tp, 1);
  double tpForward =
      p.sequenceParallel
          ? 2 * (allGatherTime(activation, p.tp, tpLink) +
                 reduceScatterTime(activation, p.tp, tpLink))
          : 2 * allReduceTime(activation, p.tp, tpLink);

  ContextComm cpComm =
      contextComm(m, p, c, attentionForward, attentionBackward);
  cost.forwardContext = cpComm.forward;
  cost.backwardContext = cpComm.backward;
  cost.recomputeContext = cpComm.recompute;
  cost.attentionForward = attentionForward;
  cost.attentionBackward = attentionBackward;
  cost.forwardCompute =
      forwardGemm + attentionForward + forwardStream + moeShare * moe.forwardCompute;
  cost.forwardComm = tpForward + moeShare * moe.forwardTensor;
  cost.backwardInputCompute = dgrad + attentionBackward + backwardStream +
                              moeShare * moe.backwardInputCompute;
  cost.backwardComm = tpForward + moeShare * moe.backwardTensor;
  cost.backwardWeight = wgrad + moeShare * moe.backwardWeight;
  cost.forwardExpert = moeShare * moe.forwardAllToAll;
  cost.backwardExpert = moeShare * moe.backwardAllToAll;
  if (p.recompute == "full") {
    // The layer's forward again, its all-to-alls included.
    cost.recompute = cost.forwardCompute;
    cost.recomputeComm = cost.forwardComm;
    cost.recomputeExpert = cost.forwardExpert;
  } else if (p.recompute == "selective") {
    // Norms, activations, residual sums and casts again; SP's gathers.
    cost.recompute = forwardStream + moeShare * moe.recomputeStream;
    cost.recomputeComm =
        p.sequenceParallel ? 2 * allGatherTime(activation, p.tp, tpLink) : 0;
  }
  return cost;
}


EndCost headCost(const ModelShape &m, const Candidate &p, const Cluster &c) {
  const std::string &prec = p.precision;
  double e = prec == "bf16" ? 2 : 4;
  double t = double(p.tp);
  double n = double(p.microBatch) * double(m.seqLen) / double(p.cp);
  double h = double(m.hidden), v = double(m.vocab) / t;
  EndCost cost;
  cost.forward = gemmTime(n, v, h, 1, e, c, prec) +
                 // final norm; logits read for max and sum of exponentials
                 streamTime(4 * n * h * e + 3 * n * v * e, 4, c);
  cost.backward = gemmTime(n, h, v, 1, e, c, prec) +
                  streamTime(2 * n * v * e + 6 * n * h * e, 3, c);
  cost.weight = gemmTime(v, h, n, 1, e, c, prec);
  // Vocabulary-parallel loss: three small all-reduces per token row.
  Link tpLink = groupLink(c, p.tp, 1);
  cost.comm = 3 * allReduceTime(n * 4, p.tp, tpLink);
  return cost;
}

EndCost embeddingCost(const ModelShape &m, const Candidate &p,
                      const Cluster &c) {
  double e = p.precision == "bf16" ? 2 : 4;
  double n = double(p.microBatch) * double(m.seqLen) / double(p.cp);
  double h = double(m.hidden);
  EndCost cost;
  cost.forward = streamTime(3 * n * h * e, 2, c);
  cost.weight = streamTime(3 * n * h * 4, 2, c);
  Link tpLink = groupLink(c, p.tp, 1);
  if (p.tp > 1)
    cost.comm = allReduceTime(n * h * e, p.tp, tpLink);
  return cost;
}

} // namespace partition::planner
