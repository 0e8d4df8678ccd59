//===- CostModel.cpp - predicted step time and memory of a plan -----------===//

#include "planner/CostModel.h"

#include "planner/Collectives.h"
#include "scheduling/Schedule.h"
#include "scheduling/ScheduleCheck.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <mutex>
#include <sstream>
#include <tuple>

namespace partition::planner {

int64_t ModelShape::layerParameters() const {
  int64_t h = hidden, d = headDim();
  int64_t qkv = (heads + 2 * kvHeads) * d;
  if (llama) // q, k, v, o; gate, up, down; two RMSNorm gains
    return h * qkv + h * h + 3 * h * ffn + 2 * h;
  // qkv and proj with biases, fc1 and fc2 with biases, two LayerNorms.
  return h * qkv + qkv + h * h + h + 2 * h * ffn + ffn + h + 4 * h;
}

int64_t ModelShape::parameters() const {
  int64_t embedding = vocab * hidden;
  if (llama) // embedding, untied head, final RMSNorm
    return layers * layerParameters() + 2 * embedding + hidden;
  return layers * layerParameters() + embedding + positions * hidden +
         2 * hidden;
}

std::string Candidate::planJson() const {
  std::ostringstream os;
  os << "{\"mesh\": {\"dp\": " << dp << ", \"tp\": " << tp
     << ", \"pp\": " << pp << "}";
  if (!perLayer.empty()) {
    // The compiler's nonuniform format (docs/planner.md, "Nonuniform
    // degrees").
    os << ", \"tensor_parallel\": {\"per_layer\": [";
    for (size_t i = 0; i < perLayer.size(); ++i) {
      const TpPart &part = perLayer[i];
      os << (i ? ", " : "") << "{\"layers\": \"" << part.first;
      if (part.last != part.first)
        os << "-" << part.last;
      os << "\", \"tp\": " << part.tp << "}";
    }
    os << "], \"sequence_parallel\": "
       << (sequenceParallel ? "true" : "false") << "}";
  } else if (sequenceParallel) {
    os << ", \"tensor_parallel\": {\"sequence_parallel\": true}";
  }
  os << ", \"pipeline\": {";
  if (pp > 1)
    os << "\"schedule\": \"" << schedule << "\", ";
  if (virtualStages > 1)
    os << "\"virtual_stages\": " << virtualStages << ", ";
  os << "\"microbatches\": " << microbatches << "}";
  if (zeroStage > 0)
    os << ", \"zero\": {\"stage\": " << zeroStage << "}";
  if (recompute != "none")
    os << ", \"recompute\": {\"policy\": \"" << recompute << "\"}";
  os << ", \"precision\": \"" << precision << "\"}";
  return os.str();
}

std::string Candidate::label() const {
  std::ostringstream os;
  os << "dp" << dp << " tp" << tp;
  if (!perLayer.empty()) {
    // tp4[0-5:4,6-11:2]: the layers' degrees on the tp4 mesh.
    os << "[";
    for (size_t i = 0; i < perLayer.size(); ++i) {
      const TpPart &part = perLayer[i];
      os << (i ? "," : "") << part.first;
      if (part.last != part.first)
        os << "-" << part.last;
      os << ":" << part.tp;
    }
    os << "]";
  }
  os << (sequenceParallel ? "+sp" : "") << " pp" << pp;
  if (pp > 1) {
    os << " " << schedule;
    if (virtualStages > 1)
      os << " v" << virtualStages;
  }
  os << " mb" << microBatch << "x" << microbatches;
  if (zeroStage > 0)
    os << " zero" << zeroStage;
  if (recompute != "none")
    os << " rc-" << recompute;
  os << " " << precision;
  return os.str();
}

int64_t Candidate::layerTp(int64_t layer) const {
  for (const TpPart &part : perLayer)
    if (layer >= part.first && layer <= part.last)
      return part.tp;
  return tp;
}

double modelFlopsPerStep(const ModelShape &m, int64_t sequences) {
  double h = double(m.hidden), s = double(m.seqLen);
  double matmulParams = double(m.layerParameters()) -
                        (m.llama ? 2 * h : 0); // norms are not matmuls
  if (!m.llama) // biases and LayerNorms are not matmul weights
    matmulParams = h * double((m.heads + 2 * m.kvHeads) * m.headDim()) +
                   h * h + 2 * h * double(m.ffn);
  double perTokenForward = double(m.layers) * (2 * matmulParams + 4 * s * h) +
                           2 * h * double(m.vocab);
  return 3 * perTokenForward * s * double(sequences);
}

namespace {

/// Time of one (batched) GEMM C[M,N] += A[M,K] B[K,N]. Each compute unit
/// makes one output tile at a time: its K loop at the cluster's GEMM
/// efficiency, then the tile's store at the unit's share of memory
/// bandwidth (not overlapped with the next tile's loop: short K loses);
/// tiles come in waves over the units (the last wave and the last row and
/// column of tiles are partly empty). The best of three tile sizes, as
/// cuBLAS's heuristics pick; or the bytes moved at memory bandwidth when
/// that is slower (thin GEMMs: attention's head dimension, small batches).
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
  return std::max(best, memory) + c.kernelLatency;
}

/// Memory-bound kernels: `bytes` moved by `kernels` launches.
double streamTime(double bytes, double kernels, const Cluster &c) {
  return bytes / (c.memoryBandwidth * c.memoryEfficiency) +
         kernels * c.kernelLatency;
}

/// The parts of one transformer layer's work for one micro-batch on one
/// rank (seconds).
struct LayerCost {
  double forwardCompute = 0, forwardComm = 0;
  double backwardInputCompute = 0, backwardComm = 0;
  double backwardWeight = 0;
  double recompute = 0, recomputeComm = 0;
};

LayerCost layerCost(const ModelShape &m, const Candidate &p,
                    const Cluster &c) {
  const std::string &prec = p.precision;
  double e = prec == "bf16" ? 2 : 4;
  double t = double(p.tp), b = double(p.microBatch), s = double(m.seqLen);
  double h = double(m.hidden), f = double(m.ffn), d = double(m.headDim());
  double n = b * s;
  double qkv = double(m.heads + 2 * m.kvHeads) * d;
  double sp = p.sequenceParallel ? t : 1; // replicated work split by SP

  // The layer's linears (M, N, K) on this rank.
  struct Gemm {
    double M, N, K;
  };
  std::vector<Gemm> linears = {{n, qkv / t, h}, {n, h, h / t}};
  if (m.llama) {
    linears.push_back({n, 2 * f / t, h});
    linears.push_back({n, h, f / t});
  } else {
    linears.push_back({n, f / t, h});
    linears.push_back({n, h, f / t});
  }
  LayerCost cost;
  double forwardGemm = 0, dgrad = 0, wgrad = 0;
  for (const Gemm &g : linears) {
    forwardGemm += gemmTime(g.M, g.N, g.K, 1, e, c, prec);
    dgrad += gemmTime(g.M, g.K, g.N, 1, e, c, prec);
    wgrad += gemmTime(g.N, g.K, g.M, 1, e, c, prec);
  }

  // Attention: b x heads/t products of [s, d] x [d, s] and [s, s] x [s, d].
  double heads = b * double(m.heads) / t;
  double scores = gemmTime(s, s, d, heads, e, c, prec);
  double context = gemmTime(s, d, s, heads, e, c, prec);
  double attentionForward, attentionBackward;
  if (c.attentionKernel == "materialized") {
    // Scale-mask-softmax reads the scores and writes the probabilities;
    // its backward reads probabilities and their gradient and writes the
    // scores' gradient. Four GEMMs in the backward (dP, dV, dQ, dK).
    // Dropout on the probabilities (Megatron-LM's attention dropout)
    // reads them and writes the dropped ones and a byte mask; its backward
    // reads the mask and the gradient and writes the gradient.
    double elements = heads * s * s;
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
  double elementwise = n * (replicated + sharded) * e;
  // bf16: each use of a parameter reads an fp32 master and writes a bf16
  // copy, once per micro-batch.
  double casts = prec == "bf16" ? 6.0 * double(m.layerParameters()) / t : 0;
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

  cost.forwardCompute = forwardGemm + attentionForward + forwardStream;
  cost.forwardComm = tpForward;
  cost.backwardInputCompute = dgrad + attentionBackward + backwardStream;
  cost.backwardComm = tpForward;
  cost.backwardWeight = wgrad;
  if (p.recompute == "full") {
    cost.recompute = cost.forwardCompute;
    cost.recomputeComm = tpForward;
  } else if (p.recompute == "selective") {
    // Norms, activations, residual sums and casts again; SP's gathers.
    cost.recompute = forwardStream;
    cost.recomputeComm =
        p.sequenceParallel ? 2 * allGatherTime(activation, p.tp, tpLink) : 0;
  }
  return cost;
}

/// The embedding (first stage) and the LM head with its loss (last stage)
/// per micro-batch: forward, backward-input and weight-gradient seconds.
struct EndCost {
  double forward = 0, backward = 0, weight = 0, comm = 0;
};

EndCost headCost(const ModelShape &m, const Candidate &p, const Cluster &c) {
  const std::string &prec = p.precision;
  double e = prec == "bf16" ? 2 : 4;
  double t = double(p.tp), n = double(p.microBatch) * double(m.seqLen);
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
  double n = double(p.microBatch) * double(m.seqLen), h = double(m.hidden);
  EndCost cost;
  cost.forward = streamTime(3 * n * h * e, 2, c);
  cost.weight = streamTime(3 * n * h * 4, 2, c);
  Link tpLink = groupLink(c, p.tp, 1);
  if (p.tp > 1)
    cost.comm = allReduceTime(n * h * e, p.tp, tpLink);
  return cost;
}

/// Layers of model chunk `chunk` (of pp x v) when the layers do not divide
/// evenly: the first chunks get one more.
double chunkLayers(const ModelShape &m, int64_t chunks, int64_t chunk) {
  int64_t base = m.layers / chunks, extra = m.layers % chunks;
  return double(base + (chunk < extra ? 1 : 0));
}

/// The first layer of model chunk `chunk`.
int64_t chunkFirstLayer(const ModelShape &m, int64_t chunks, int64_t chunk) {
  int64_t base = m.layers / chunks, extra = m.layers % chunks;
  return chunk * base + std::min(chunk, extra);
}

/// The layers pipeline stage `stage` holds (its chunks v x pp + stage).
std::vector<int64_t> stageLayerIndices(const ModelShape &m,
                                       const Candidate &p, int64_t stage) {
  int64_t chunks = p.pp * p.virtualStages;
  std::vector<int64_t> out;
  for (int64_t v = 0; v < p.virtualStages; ++v) {
    int64_t chunk = v * p.pp + stage;
    int64_t first = chunkFirstLayer(m, chunks, chunk);
    for (int64_t i = 0; i < int64_t(chunkLayers(m, chunks, chunk)); ++i)
      out.push_back(first + i);
  }
  return out;
}

/// Parameters held by pipeline stage `stage` on one tp rank.
double stageParameters(const ModelShape &m, const Candidate &p, int stage,
                       double layersOnStage) {
  double t = double(p.tp);
  double params = layersOnStage * double(m.layerParameters()) / t;
  if (!p.perLayer.empty()) {
    // Each layer of the stage at its own degree.
    params = 0;
    for (int64_t layer : stageLayerIndices(m, p, stage))
      params += double(m.layerParameters()) / double(p.layerTp(layer));
  }
  double embedding = double(m.vocab) * double(m.hidden) / t;
  if (stage == 0)
    params += embedding + double(m.positions) * double(m.hidden);
  if (stage == p.pp - 1 && (m.llama || p.pp > 1))
    params += embedding; // untied head, or the tied copy of a pipeline
  return params;
}


/// The simulator's timeline, memoized: the search asks the same schedules
/// with the same costs many times.
struct PipelineTime {
  double makespan = 0, makespanNoLatency = 0, busiest = 0;
  bool ok = false;
  std::string error;
};

PipelineTime simulatePipeline(const Candidate &p,
                              const std::vector<double> &forward,
                              const std::vector<double> &backward,
                              const std::vector<double> &weight,
                              double latency) {
  using namespace partition::pipeline;
  PipelineTime result;
  ScheduleConfig config;
  auto kind = parseScheduleKind(p.schedule);
  if (!kind) {
    result.error = "unknown schedule " + p.schedule;
    return result;
  }
  config.kind = *kind;
  config.stages = int(p.pp);
  config.chunks = int(p.virtualStages);
  // Long pipelines: simulate two shorter multiples of p and extend the
  // steady state linearly (each further micro-batch adds one F, B and W
  // per chunk on the bottleneck stage); exact for these schedules.
  int64_t m = p.microbatches;
  auto run = [&](int64_t microbatches, double lat) -> OrError<Timeline> {
    ScheduleConfig cfg = config;
    cfg.microbatches = int(microbatches);
    OrError<Schedule> schedule = generateSchedule(cfg);
    if (!schedule)
      return OrError<Timeline>::failure(schedule.error());
    SimulationOptions options;
    options.cost = [&](int stage, const Action &a) {
      int modelChunk = a.chunk * int(p.pp) + stage;
      switch (a.kind) {
      case ActionKind::Forward:
        return forward[modelChunk];
      case ActionKind::BackwardInput:
        return backward[modelChunk];
      case ActionKind::BackwardWeight:
        return weight[modelChunk];
      }
      return 0.0;
    };
    options.p2pLatency = lat;
    return simulate(*schedule, options);
  };
  int64_t step = p.pp;
  int64_t m1 = 2 * step, m2 = 4 * step;
  auto makespanAt = [&](double lat, double &out) -> bool {
    if (m <= m2) {
      OrError<Timeline> t = run(m, lat);
      if (!t) {
        result.error = t.error();
        return false;
      }
      out = t->makespan;
      return true;
    }
    OrError<Timeline> a = run(m1, lat), b = run(m2, lat);
    if (!a || !b) {
      result.error = !a ? a.error() : b.error();
      return false;
    }
    out = b->makespan +
          double(m - m2) * (b->makespan - a->makespan) / double(m2 - m1);
    return true;
  };
  if (!makespanAt(latency, result.makespan) ||
      !makespanAt(0, result.makespanNoLatency))
    return result;
  result.ok = true;
  return result;
}

} // namespace

int64_t peakInFlightFirstStage(const std::string &schedule, int64_t p,
                               int64_t m, int64_t v) {
  if (p == 1)
    return 1;
  if (schedule == "gpipe")
    return m;
  if (schedule == "interleaved-1f1b" && v > 1)
    // Megatron's warm-up on stage 0: (v - 1) p + 2 (p - 1) forwards, then
    // one more before its first backward.
    return std::min(m * v, (v - 1) * p + 2 * (p - 1) + 1);
  // 1F1B and ZB-H1: p micro-batches on stage 0.
  return std::min(m, p);
}

Reshard boundaryReshard(const ModelShape &m, const Candidate &p,
                        int64_t from, int64_t to, const Cluster &c) {
  Reshard r;
  if (!p.sequenceParallel || from == to)
    return r;
  double e = p.precision == "bf16" ? 2 : 4;
  double activation =
      double(p.microBatch) * double(m.seqLen) * double(m.hidden) * e;
  int64_t low = std::min(from, to), high = std::max(from, to);
  // The gather joins the high / low ranks that hold pieces of one slice of
  // the low degree: ranks `low` apart in the tp group (sub-groups of
  // consecutive ranks).
  double gather = allGatherTime(activation / double(low), high / low,
                                groupLink(c, high / low, low));
  if (to < from)
    r.forward = gather;
  else
    r.backward = gather;
  return r;
}

Cluster deviceShare(const Cluster &node, int64_t devices) {
  if (!node.sharedNode)
    return node;
  Cluster c = node;
  double share = double(std::max<int64_t>(
      1, std::min<int64_t>(devices, node.devicesPerNode)));
  c.peakFlopsBf16 /= share;
  c.peakFlopsFp32 /= share;
  c.memoryBandwidth /= share;
  c.memoryBytes /= share;
  c.computeUnits = std::max(1, int(std::lround(c.computeUnits / share)));
  return c;
}

Prediction predict(const ModelShape &m, const Candidate &p,
                   const Cluster &node, bool exactPipeline) {
  Cluster c = deviceShare(node, p.devices());
  Prediction out;
  out.plan = p;
  LayerCost layer = layerCost(m, p, c);
  // Nonuniform plans: each layer at its part's degree (one cost per
  // degree), and the resharding where the degree changes.
  std::map<int64_t, LayerCost> byDegree;
  std::vector<const LayerCost *> layerAt(size_t(m.layers), &layer);
  std::vector<Reshard> reshardBefore(size_t(m.layers));
  if (!p.perLayer.empty()) {
    for (int64_t i = 0; i < m.layers; ++i) {
      int64_t d = p.layerTp(i);
      auto it = byDegree.find(d);
      if (it == byDegree.end()) {
        Candidate q = p;
        q.tp = d;
        q.perLayer.clear();
        it = byDegree.emplace(d, layerCost(m, q, c)).first;
      }
      layerAt[size_t(i)] = &it->second;
      if (i > 0)
        reshardBefore[size_t(i)] =
            boundaryReshard(m, p, p.layerTp(i - 1), d, c);
    }
  }
  // The F, B, W sums of `count` layers from `first` (without the W split).
  auto layerSums = [&](int64_t first, double count, double &f, double &b,
                       double &w) {
    if (p.perLayer.empty()) {
      f = count * (layer.forwardCompute + layer.forwardComm);
      b = count * (layer.backwardInputCompute + layer.backwardComm +
                   layer.recompute + layer.recomputeComm);
      w = count * layer.backwardWeight;
      return;
    }
    f = b = w = 0;
    for (int64_t i = first; i < first + int64_t(count); ++i) {
      const LayerCost &l = *layerAt[size_t(i)];
      f += l.forwardCompute + l.forwardComm + reshardBefore[size_t(i)].forward;
      b += l.backwardInputCompute + l.backwardComm + l.recompute +
           l.recomputeComm + reshardBefore[size_t(i)].backward;
      w += l.backwardWeight;
    }
  };
  EndCost head = headCost(m, p, c);
  EndCost embed = embeddingCost(m, p, c);
  int64_t chunks = p.pp * p.virtualStages;
  double e = p.precision == "bf16" ? 2 : 4;
  double n = double(p.microBatch) * double(m.seqLen);
  double h = double(m.hidden), t = double(p.tp);
  bool zeroBubble = p.schedule == "zero-bubble";

  // Per model chunk, per micro-batch: F, B (input gradient, plus the
  // recomputed forward it needs first) and W.
  std::vector<double> forward(chunks), backward(chunks), weight(chunks);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    double layers = chunkLayers(m, chunks, chunk);
    double f, b, w;
    layerSums(chunkFirstLayer(m, chunks, chunk), layers, f, b, w);
    if (chunk == 0) {
      f += embed.forward + embed.comm;
      w += embed.weight + embed.comm;
    }
    if (chunk == chunks - 1) {
      f += head.forward + head.comm;
      b += head.backward + head.comm;
      w += head.weight;
    }
    // Only zero-bubble schedules delay W; the others run it with its B.
    if (!zeroBubble) {
      b += w;
      w = 0;
    }
    forward[chunk] = f;
    backward[chunk] = b;
    weight[chunk] = w;
  }

  // Gradient accumulation across micro-batches: read the sum and the new
  // gradient, write the sum (fp32), per parameter per micro-batch.
  double firstStageParams =
      stageParameters(m, p, 0, double(m.layers) / double(p.pp));
  // The data-parallel reduction and the optimizer wait for the stage with
  // the most parameters: the first in a uniform plan (embedding, the first
  // chunks' extra layers), any stage in a nonuniform one.
  if (!p.perLayer.empty())
    for (int64_t stage = 1; stage < p.pp; ++stage)
      firstStageParams = std::max(
          firstStageParams,
          stageParameters(m, p, int(stage), double(m.layers) / double(p.pp)));
  double accumulate =
      p.microbatches > 1 ? streamTime(12 * firstStageParams, 1, c) : 0;

  double pipelineSeconds = 0, bubble = 0, pipelineComm = 0;
  int64_t inFlight =
      peakInFlightFirstStage(p.schedule, p.pp, p.microbatches,
                             p.virtualStages);
  // Busy time of the busiest stage: per micro-batch the sum of its chunks.
  double busiest = 0;
  for (int64_t stage = 0; stage < p.pp; ++stage) {
    double busy = 0;
    for (int64_t v = 0; v < p.virtualStages; ++v) {
      int64_t chunk = v * p.pp + stage;
      busy += forward[chunk] + backward[chunk] + weight[chunk];
    }
    busiest = std::max(busiest, busy);
  }
  busiest = busiest * double(p.microbatches);
  if (p.pp == 1 || !exactPipeline) {
    // Without simulating: the busiest stage's work, a lower bound of the
    // pipeline's step (the search ranks by it before simulating).
    pipelineSeconds = busiest;
  } else {
    double activationBytes =
        n * h * e / (p.sequenceParallel ? t : 1.0);
    Link ppLink = groupLink(c, p.pp, p.tp);
    PipelineTime pipe = simulatePipeline(
        p, forward, backward, weight, sendTime(activationBytes, ppLink));
    if (!pipe.ok) {
      out.notCompilable = pipe.error;
      out.stepSeconds = INFINITY;
      return out;
    }
    pipelineSeconds = pipe.makespan;
    pipelineComm = pipe.makespan - pipe.makespanNoLatency;
    bubble = std::max(0.0, pipe.makespanNoLatency - busiest);
  }
  // Every micro-batch after the first adds into the sum.
  pipelineSeconds += double(p.microbatches - 1) * accumulate;

  // Data parallelism: fp32 gradients (this project reduces them in fp32
  // under bf16 too), dp ranks tp x pp apart.
  double gradBytes = 4 * firstStageParams;
  Link dpLink = groupLink(c, p.dp, p.tp * p.pp);
  double dataComm = 0;
  if (p.zeroStage == 0) {
    dataComm = allReduceTime(gradBytes, p.dp, dpLink);
  } else if (p.zeroStage <= 2) {
    // Reduce-scatter the gradients, all-gather the updated parameters.
    dataComm = reduceScatterTime(gradBytes, p.dp, dpLink) +
               allGatherTime(gradBytes, p.dp, dpLink);
  } else {
    // ZeRO-3: parameters gathered before each forward and backward of
    // every micro-batch, gradients reduce-scattered after each backward.
    dataComm = double(p.microbatches) *
               (2 * allGatherTime(gradBytes, p.dp, dpLink) +
                reduceScatterTime(gradBytes, p.dp, dpLink));
  }
  if (c.overlapsCommunication) {
    // Buckets reduce while earlier layers' backward still runs: what is
    // left is what the last micro-batch's backward cannot hide.
    double hide = 0;
    for (int64_t v = 0; v < p.virtualStages; ++v)
      hide += backward[v * p.pp] + weight[v * p.pp];
    if (p.zeroStage == 3)
      hide *= double(p.microbatches) * 1.5;
    dataComm = std::max(0.0, dataComm - hide);
  }
  // AdamW: read parameter, gradient and both moments, write three of
  // them (fp32): 28 bytes per parameter of this rank's shard.
  double optimizerParams =
      firstStageParams / (p.zeroStage >= 1 ? double(p.dp) : 1.0);
  double optimizer = streamTime(28 * optimizerParams, 1, c);

  out.stepSeconds = pipelineSeconds + dataComm + optimizer;

  // The breakdown along the busiest stage.
  Breakdown &bd = out.breakdown;
  double stageLayers = double(m.layers) / double(p.pp);
  double mbs = double(p.microbatches);
  bd.recompute = mbs * stageLayers * layer.recompute;
  bd.tensorComm = mbs * stageLayers *
                  (layer.forwardComm + layer.backwardComm +
                   layer.recomputeComm);
  if (!p.perLayer.empty()) {
    // The mean layer, and the resharding, per stage.
    double recompute = 0, comm = 0;
    for (int64_t i = 0; i < m.layers; ++i) {
      const LayerCost &l = *layerAt[size_t(i)];
      recompute += l.recompute;
      comm += l.forwardComm + l.backwardComm + l.recomputeComm +
              reshardBefore[size_t(i)].forward +
              reshardBefore[size_t(i)].backward;
    }
    bd.recompute = mbs * recompute / double(p.pp);
    bd.tensorComm = mbs * comm / double(p.pp);
  }
  bd.pipelineComm = pipelineComm;
  bd.bubble = bubble;
  bd.dataComm = dataComm;
  bd.optimizer = optimizer;
  bd.compute = out.stepSeconds - bd.recompute - bd.tensorComm -
               bd.pipelineComm - bd.bubble - bd.dataComm - bd.optimizer;

  // FLOPs.
  int64_t sequences = p.globalBatch();
  out.modelFlops = modelFlopsPerStep(m, sequences);
  double recomputeFlops = 0;
  if (p.recompute == "full") {
    ModelShape layersOnly = m;
    double hd = double(m.hidden), s = double(m.seqLen);
    double matmul = double(modelFlopsPerStep(layersOnly, sequences)) / 3 -
                    2 * hd * double(m.vocab) * s * double(sequences);
    recomputeFlops = matmul;
  }
  out.hardwareFlops = out.modelFlops + recomputeFlops;
  double devices = double(p.devices());
  out.tflopsPerGpu = out.hardwareFlops / out.stepSeconds / devices / 1e12;
  out.mfu = out.modelFlops / out.stepSeconds / devices /
            c.peakFlops(p.precision);

  // Closed-form memory of the first stage (it holds the most micro-batches
  // in flight) or the last (logits), whichever is larger.
  double dp = double(p.dp);
  auto stateMemory = [&](double params, Memory &mem) {
    mem.parameters = 4 * params / (p.zeroStage >= 3 ? dp : 1.0);
    mem.gradients = 4 * params / (p.zeroStage >= 2 ? dp : 1.0);
    if (p.microbatches > 1 && p.zeroStage < 2)
      mem.gradients *= 2; // the accumulated sum and this micro-batch's
    mem.optimizer = 8 * params / (p.zeroStage >= 1 ? dp : 1.0);
    if (p.precision == "bf16")
      mem.other += 2 * params; // bf16 copies the backward reads
  };
  double f = double(m.ffn), qkv = double(m.heads + 2 * m.kvHeads) *
                                  double(m.headDim());
  // Saved bytes of one layer at degree `t` (what the backward reads), and
  // the elements per token of a whole layer's backward working set.
  auto fullLayerAt = [&](double t) {
    double sp = p.sequenceParallel ? t : 1.0;
    return 4 * h / sp + (qkv + h + (m.llama ? 3 : 2) * f) / t;
  };
  auto savedAt = [&](double t) {
    double sp = p.sequenceParallel ? t : 1.0;
    double saved = fullLayerAt(t);
    if (p.recompute == "selective")
      saved = 2 * h / sp + (qkv + h + f) / t;
    else if (p.recompute == "full")
      saved = h / sp;
    double bytes = n * saved * e;
    if (c.attentionKernel == "materialized" && p.recompute != "full")
      bytes += double(p.microBatch) * double(m.heads) / t *
               double(m.seqLen) * double(m.seqLen) * e;
    return bytes;
  };
  // A stage's mean saved bytes per layer (its layers' own degrees in a
  // nonuniform plan).
  auto stageSaved = [&](int64_t stage) {
    if (p.perLayer.empty())
      return savedAt(t);
    std::vector<int64_t> layers = stageLayerIndices(m, p, stage);
    double sum = 0;
    for (int64_t layer : layers)
      sum += savedAt(double(p.layerTp(layer)));
    return sum / double(std::max<size_t>(1, layers.size()));
  };
  double smallest = t; // the largest working set: the smallest degree
  for (const TpPart &part : p.perLayer)
    smallest = std::min(smallest, double(part.tp));
  double layersPerChunk = double(m.layers) / double(chunks);
  double working = n * fullLayerAt(smallest) * e; // one layer's backward
  Memory first;
  stateMemory(stageParameters(m, p, 0, stageLayers), first);
  first.activations = double(inFlight) * layersPerChunk * stageSaved(0) +
                      (p.recompute == "full" ? working : 0);
  double logits = n * double(m.vocab) / t * (e + 4);
  Memory last;
  stateMemory(stageParameters(m, p, int(p.pp - 1), stageLayers), last);
  last.activations = layersPerChunk * stageSaved(p.pp - 1) +
                     (p.recompute == "full" ? working : 0) + logits;
  if (p.pp == 1)
    first.activations += logits;
  double inputs = 8 * n * mbs;
  first.other += inputs;
  last.other += inputs;
  out.memory = first.total() >= last.total() ? first : last;
  out.memoryPerRank = out.memory.total();
  out.fits = out.memoryPerRank <= c.memoryBytes;
  return out;
}

} // namespace partition::planner
