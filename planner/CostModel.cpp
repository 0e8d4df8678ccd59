//===- CostModel.cpp - predicted step time and memory of a plan -----------===//

#include "planner/CostModel.h"

#include "passes/plan/PlanAxisNames.h"
#include "planner/Collectives.h"
#include "planner/ContextParallel.h"
#include "planner/Experts.h"
#include "planner/Offload.h"
#include "planner/LayerCost.h"
#include "planner/PipelineSimulation.h"
#include "planner/StageMemory.h"
#include "planner/StageSplit.h"
#include "scheduling/Balance.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <tuple>

namespace partition::planner {

int64_t ModelShape::layerParameters() const {
  int64_t h = hidden, d = headDim();
  int64_t qkv = (heads + 2 * kvHeads) * d;
  if (llama) // q, k, v, o; gate, up, down; two RMSNorm gains
    return h * qkv + h * h + 3 * h * ffn + 2 * h + (qkvBias ? qkv : 0);
  // qkv and proj with biases, fc1 and fc2 with biases, two LayerNorms.
  return h * qkv + qkv + h * h + h + 2 * h * ffn + ffn + h + 4 * h;
}

int64_t ModelShape::parameters() const {
  int64_t embedding = vocab * hidden;
  // A MoE layer's feed-forward block in place of a dense one's.
  int64_t stack = layers * layerParameters() +
                  moeLayers() * (moeFfnParameters(*this) - denseFfnParameters(*this));
  if (llama) // embedding, the head unless tied, final RMSNorm
    return stack + (tiedHead ? 1 : 2) * embedding + hidden;
  return stack + embedding + positions * hidden + 2 * hidden;
}

double modelFlopsPerStep(const ModelShape &m, int64_t sequences) {
  double h = double(m.hidden), s = double(m.seqLen);
  double matmulParams = double(m.layerParameters()) -
                        (m.llama ? 2 * h : 0); // norms are not matmuls
  if (!m.llama) // biases and LayerNorms are not matmul weights
    matmulParams = h * double((m.heads + 2 * m.kvHeads) * m.headDim()) +
                   h * h + 2 * h * double(m.ffn);
  // MoE layers: the router's and the token's k experts' (and the shared
  // experts') matmuls instead of the dense block's (Experts.h).
  matmulParams += double(m.moeLayers()) / double(std::max<int64_t>(1, m.layers)) *
                  (activeFfnMatmulParameters(m) - denseFfnMatmulParameters(m));
  double keys = m.attendedKeys();
  double perTokenForward = double(m.layers) * (2 * matmulParams + 4 * keys * h) +
                           2 * h * double(m.vocab);
  return 3 * perTokenForward * s * double(sequences);
}


Reshard boundaryReshard(const ModelShape &m, const Candidate &p,
                        int64_t from, int64_t to, const Cluster &c) {
  Reshard r;
  if (!p.sequenceParallel || from == to)
    return r;
  double e = p.precision == "bf16" ? 2 : 4;
  // The rank's cp-th of each sequence.
  double activation = double(p.microBatch) * double(m.seqLen) /
                      double(p.cp) * double(m.hidden) * e;
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
  c.gemmPackBandwidth /= share;
  c.memoryBytes /= share;
  // A rank's copies to the host tier are its own memcpys.
  c.hostLinkBandwidth /= share;
  c.computeUnits = std::max(1, int(std::lround(c.computeUnits / share)));
  return c;
}

namespace {

/// The cost of each layer of a plan: one uniform layer, or in a nonuniform
/// plan each layer at its part's degree (one cost per degree) and the
/// resharding where the degree changes. Filled in place: `at` points into
/// `uniform` and `byDegree`.
struct PlanLayers {
  LayerCost uniform;
  std::map<int64_t, LayerCost> byDegree;
  std::vector<const LayerCost *> at;
  std::vector<Reshard> reshardBefore;
  bool nonuniform = false;

  PlanLayers(const ModelShape &m, const Candidate &p, const Cluster &c)
      : uniform(layerCost(m, p, c)), at(size_t(m.layers), &uniform),
        reshardBefore(size_t(m.layers)), nonuniform(!p.perLayer.empty()) {
    if (!nonuniform)
      return;
    for (int64_t i = 0; i < m.layers; ++i) {
      int64_t d = p.layerTp(i);
      auto it = byDegree.find(d);
      if (it == byDegree.end()) {
        Candidate q = p;
        q.tp = d;
        q.perLayer.clear();
        it = byDegree.emplace(d, layerCost(m, q, c)).first;
      }
      at[size_t(i)] = &it->second;
      if (i > 0)
        reshardBefore[size_t(i)] =
            boundaryReshard(m, p, p.layerTp(i - 1), d, c);
    }
  }
  PlanLayers(const PlanLayers &) = delete;

  /// The F, B, W sums of `count` layers from `first` (without the W split).
  void sums(int64_t first, double count, double &f, double &b,
            double &w) const {
    if (!nonuniform) {
      const LayerCost &layer = uniform;
      f = count * (layer.forwardCompute + layer.forwardComm +
                   layer.forwardContext + layer.forwardExpert);
      b = count * (layer.backwardInputCompute + layer.backwardComm +
                   layer.backwardContext + layer.recompute +
                   layer.recomputeComm + layer.recomputeContext +
                   layer.backwardExpert + layer.recomputeExpert);
      w = count * layer.backwardWeight;
      return;
    }
    f = b = w = 0;
    for (int64_t i = first; i < first + int64_t(count); ++i) {
      const LayerCost &l = *at[size_t(i)];
      f += l.forwardCompute + l.forwardComm + l.forwardContext +
           l.forwardExpert + reshardBefore[size_t(i)].forward;
      b += l.backwardInputCompute + l.backwardComm + l.backwardContext +
           l.recompute + l.recomputeComm + l.recomputeContext +
           l.backwardExpert + l.recomputeExpert +
           reshardBefore[size_t(i)].backward;
      w += l.backwardWeight;
    }
  }
};

/// Per model chunk, per micro-batch: F, B (input gradient, plus the
/// recomputed forward it needs first) and W.
struct ChunkCosts {
  std::vector<double> forward, backward, weight;
};

ChunkCosts chunkCosts(const Candidate &p, const PlanLayers &layers,
                      const EndCost &embed, const EndCost &head,
                      const ChunkSplit &split) {
  int64_t chunks = p.pp * p.virtualStages;
  bool zeroBubble = p.schedule == "zero-bubble";
  ChunkCosts costs;
  costs.forward.resize(chunks);
  costs.backward.resize(chunks);
  costs.weight.resize(chunks);
  for (int64_t chunk = 0; chunk < chunks; ++chunk) {
    double f, b, w;
    layers.sums(split.first[size_t(chunk)], double(split.counts[size_t(chunk)]),
                f, b, w);
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
    costs.forward[chunk] = f;
    costs.backward[chunk] = b;
    costs.weight[chunk] = w;
  }
  return costs;
}

/// The parameters of the stage the data-parallel reduction and the
/// optimizer wait for, the one with the most (the embedding's, or the one
/// with most layers when the split is uneven); `experts`: its expert
/// weights (split over ep).
double busiestStageParameters(const ModelShape &m, const Candidate &p,
                              const ChunkSplit &split, double &experts) {
  double params = 0;
  experts = 0;
  for (int64_t stage = 0; stage < p.pp; ++stage) {
    double held = stageParameters(m, p, split, stage);
    if (held > params) {
      params = held;
      experts = stageParameters(m, p, split, stage, /*expertsOnly=*/true);
    }
  }
  return params;
}

/// The pipeline's seconds for all micro-batches, with its bubble and its
/// point-to-point communication; false (and `out` marked not compilable)
/// when the simulated schedule cannot run.
bool pipelineSeconds(const ModelShape &m, const Candidate &p,
                     const Cluster &c, const ChunkCosts &costs,
                     bool exactPipeline, double &seconds, double &bubble,
                     double &comm, Prediction &out) {
  seconds = bubble = comm = 0;
  // Busy time of the busiest stage: per micro-batch the sum of its chunks.
  double busiest = 0;
  for (int64_t stage = 0; stage < p.pp; ++stage) {
    double busy = 0;
    for (int64_t v = 0; v < p.virtualStages; ++v) {
      int64_t chunk = v * p.pp + stage;
      busy += costs.forward[chunk] + costs.backward[chunk] +
              costs.weight[chunk];
    }
    busiest = std::max(busiest, busy);
  }
  busiest = busiest * double(p.microbatches);
  if (p.pp == 1 || !exactPipeline) {
    // Without simulating: the busiest stage's work, a lower bound of the
    // pipeline's step (the search ranks by it before simulating).
    seconds = busiest;
    return true;
  }
  double e = p.precision == "bf16" ? 2 : 4;
  double n = double(p.microBatch) * double(m.seqLen) / double(p.cp);
  double activationBytes = n * double(m.hidden) * e /
                           (p.sequenceParallel ? double(p.tp) : 1.0);
  // Stages are cp x tp ranks apart (mesh order dp, pp, cp, tp).
  Link ppLink = groupLink(c, p.pp, p.tp * p.cp);
  PipelineTime pipe =
      simulatePipeline(p, costs.forward, costs.backward, costs.weight,
                       sendTime(activationBytes, ppLink));
  if (!pipe.ok) {
    out.notCompilable = pipe.error;
    out.stepSeconds = INFINITY;
    return false;
  }
  seconds = pipe.makespan;
  comm = pipe.makespan - pipe.makespanNoLatency;
  bubble = std::max(0.0, pipe.makespanNoLatency - busiest);
  return true;
}

/// The data-parallel gradient reduction (and ZeRO's gathers) of one step,
/// less what the backward hides where the cluster overlaps communication.
double dataParallelSeconds(const Candidate &p, const Cluster &c,
                           const ChunkCosts &costs, double stageParams,
                           int64_t strideFactor = 1) {
  // stageParams: the parameters the data-parallel group reduces (under
  // expert parallelism not the experts': their gradients are complete on
  // the rank that holds them).
  // fp32 gradients (this project reduces them in fp32 under bf16 too),
  // over dp x cp ranks: parameters are replicated over the context group
  // too, whose ranks saw other tokens of the same sequences. dp ranks are
  // tp x cp x pp apart, cp ranks tp apart; the group runs at its slowest
  // link.
  double gradBytes = 4 * stageParams;
  int64_t group = p.dp * p.cp;
  // (`strideFactor`: the experts' group, ep x further apart.)
  Link dpLink = groupLink(c, p.dp, strideFactor * p.tp * p.cp * p.pp);
  if (p.cp > 1) {
    Link cpLink = groupLink(c, p.cp, p.tp);
    if (p.dp == 1 || cpLink.bandwidth < dpLink.bandwidth)
      dpLink = cpLink;
  }
  double dataComm = 0;
  if (p.zeroStage == 0) {
    dataComm = allReduceTime(gradBytes, group, dpLink);
  } else if (p.zeroStage <= 2) {
    // Reduce-scatter the gradients, all-gather the updated parameters.
    dataComm = reduceScatterTime(gradBytes, group, dpLink) +
               allGatherTime(gradBytes, group, dpLink);
  } else {
    // ZeRO-3: parameters gathered before each forward and backward of
    // every micro-batch, gradients reduce-scattered after each backward.
    dataComm = double(p.microbatches) *
               (2 * allGatherTime(gradBytes, group, dpLink) +
                reduceScatterTime(gradBytes, group, dpLink));
  }
  if (c.overlapsCommunication) {
    // Buckets reduce while earlier layers' backward still runs: what is
    // left is what the last micro-batch's backward cannot hide.
    double hide = 0;
    for (int64_t v = 0; v < p.virtualStages; ++v)
      hide += costs.backward[v * p.pp] + costs.weight[v * p.pp];
    if (p.zeroStage == 3)
      hide *= double(p.microbatches) * 1.5;
    dataComm = std::max(0.0, dataComm - hide);
  }
  return dataComm;
}

/// Recomputation and tensor-parallel communication along the busiest
/// stage (the rest of the breakdown is filled by the caller).
void layerBreakdown(const ModelShape &m, const Candidate &p,
                    const PlanLayers &layers, const ChunkSplit &split,
                    Breakdown &bd) {
  double stageLayers = 0;
  for (int64_t stage = 0; stage < p.pp; ++stage)
    stageLayers = std::max(stageLayers, double(split.stageLayers(p, stage)));
  double mbs = double(p.microbatches);
  const LayerCost &layer = layers.uniform;
  bd.recompute = mbs * stageLayers * layer.recompute;
  bd.tensorComm = mbs * stageLayers *
                  (layer.forwardComm + layer.backwardComm +
                   layer.recomputeComm);
  bd.contextComm = mbs * stageLayers *
                   (layer.forwardContext + layer.backwardContext +
                    layer.recomputeContext);
  bd.expertComm = mbs * stageLayers *
                  (layer.forwardExpert + layer.backwardExpert +
                   layer.recomputeExpert);
  if (!layers.nonuniform)
    return;
  // The mean layer, and the resharding, per stage.
  double recompute = 0, comm = 0, context = 0, expert = 0;
  for (int64_t i = 0; i < m.layers; ++i) {
    const LayerCost &l = *layers.at[size_t(i)];
    recompute += l.recompute;
    context += l.forwardContext + l.backwardContext + l.recomputeContext;
    expert += l.forwardExpert + l.backwardExpert + l.recomputeExpert;
    comm += l.forwardComm + l.backwardComm + l.recomputeComm +
            layers.reshardBefore[size_t(i)].forward +
            layers.reshardBefore[size_t(i)].backward;
  }
  bd.recompute = mbs * recompute / double(p.pp);
  bd.tensorComm = mbs * comm / double(p.pp);
  bd.contextComm = mbs * context / double(p.pp);
  bd.expertComm = mbs * expert / double(p.pp);
}

/// Model and hardware FLOPs per step, TFLOP/s per device and MFU.
void fillFlops(const ModelShape &m, const Candidate &p, const Cluster &c,
               Prediction &out) {
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
}

/// `layers` in `chunks` chunks as balanceLayers splits equal costs.
std::vector<int64_t> splitEvenly(int64_t layers, int64_t chunks) {
  std::vector<int> counts =
      pipeline::balanceUniformLayers(int(layers), 1.0, 0, 0, int(chunks));
  return std::vector<int64_t>(counts.begin(), counts.end());
}

/// The plan's chunk split (see chunkLayerCounts): what a layer, the
/// embedding and the LM head cost per micro-batch, F + B + W, balanced as
/// --dist-pipeline balances them.
std::vector<int64_t> splitLayers(const ModelShape &m, const Candidate &p,
                                 const PlanLayers &layers,
                                 const EndCost &embed, const EndCost &head) {
  if (!p.stages.empty())
    return p.stages;
  int64_t chunks = p.pp * p.virtualStages;
  if (chunks <= 1 || chunks > m.layers)
    return {m.layers};
  double pre = embed.forward + embed.weight + 2 * embed.comm;
  double post = head.forward + head.backward + head.weight + 2 * head.comm;
  std::vector<int> counts;
  if (!layers.nonuniform) {
    double f, b, w;
    layers.sums(0, 1, f, b, w);
    double u = f + b + w;
    if (!(u > 0)) // no cost to balance by (a key of inf or NaN)
      return splitEvenly(m.layers, chunks);
    // Memoized per thread by what the split depends on: plans that differ
    // in ZeRO stage or micro-batch count share it.
    using Key = std::tuple<int64_t, int64_t, double, double>;
    thread_local std::map<Key, std::vector<int64_t>> memo;
    Key key{m.layers, chunks, pre / u, post / u};
    if (auto it = memo.find(key); it != memo.end())
      return it->second;
    counts = pipeline::balanceUniformLayers(int(m.layers), u, pre, post,
                                            int(chunks));
    if (memo.size() > 4096)
      memo.clear();
    return memo[key] = std::vector<int64_t>(counts.begin(), counts.end());
  } else {
    std::vector<double> costs;
    for (int64_t i = 0; i < m.layers; ++i) {
      double f, b, w;
      layers.sums(i, 1, f, b, w);
      costs.push_back(f + b + w);
    }
    counts = pipeline::balanceLayers(costs, pre, post, int(chunks));
  }
  return std::vector<int64_t>(counts.begin(), counts.end());
}

} // namespace

std::vector<int64_t> chunkLayerCounts(const ModelShape &m, const Candidate &p,
                                      const Cluster &node) {
  Cluster c = deviceShare(node, p.devices());
  PlanLayers layers(m, p, c);
  return splitLayers(m, p, layers, embeddingCost(m, p, c),
                     headCost(m, p, c));
}

Prediction predict(const ModelShape &m, const Candidate &p,
                   const Cluster &node, bool exactPipeline) {
  Cluster c = deviceShare(node, p.devices());
  Prediction out;
  out.plan = p;
  PlanLayers layers(m, p, c);
  EndCost embed = embeddingCost(m, p, c), head = headCost(m, p, c);
  ChunkSplit split(splitLayers(m, p, layers, embed, head));
  if (int64_t(split.counts.size()) != p.pp * p.virtualStages) {
    // pipeline.stages of another length: the plan.json reader refuses it.
    out.notCompilable = "pipeline.stages needs one layer count per chunk";
    out.stepSeconds = INFINITY;
    return out;
  }
  out.chunkLayers = split.counts;
  ChunkCosts costs = chunkCosts(p, layers, embed, head, split);

  // Gradient accumulation across micro-batches: read the sum and the new
  // gradient, write the sum (fp32), per parameter per micro-batch.
  double stageExperts = 0;
  double stageParams = busiestStageParameters(m, p, split, stageExperts);
  // Expert weights under expert parallelism are reduced (and ZeRO-split)
  // over their own group, the dp / ep ranks that hold the same experts;
  // the other weights over the whole data group.
  double epExperts = p.ep > 1 ? stageExperts : 0;
  double reducedParams = stageParams - epExperts;
  double accumulate =
      p.microbatches > 1 ? streamTime(12 * stageParams, 1, c) : 0;
  double pipeline, bubble, pipelineComm;
  if (!pipelineSeconds(m, p, c, costs, exactPipeline, pipeline, bubble,
                       pipelineComm, out))
    return out;
  // Every micro-batch after the first adds into the sum.
  pipeline += double(p.microbatches - 1) * accumulate;
  double dataComm = dataParallelSeconds(p, c, costs, reducedParams);
  double expertGroup = double(p.dp * p.cp) / double(p.ep);
  if (epExperts > 0 && expertGroup > 1) {
    // The experts' own reduction: ep ranks hold each expert group's
    // replicas dp / ep apart in the data group; the same collectives over
    // that group, alongside (not hidden more than the others).
    Candidate experts = p;
    experts.dp = p.dp / p.ep;
    dataComm += dataParallelSeconds(experts, c, costs, epExperts, p.ep);
  }
  // AdamW: read parameter, gradient and both moments, write three of
  // them (fp32): 28 bytes per parameter of this rank's shard.
  double optimizerParams =
      reducedParams / (p.zeroStage >= 1 ? double(p.dp * p.cp) : 1.0) +
      epExperts / (p.zeroStage >= 1 ? expertGroup : 1.0);
  double optimizer = streamTime(28 * optimizerParams, 1, c);
  // Offload (Offload.h): this rank's shard of both moments (and under
  // ZeRO-3 of the fp32 parameters), updated under the last micro-batch's
  // backward on the first stage (the embedding's update, whose gradient
  // completes last, is the share that stays at the end; on a busiest
  // stage without it, none), and the shards read for every all-gather.
  double offload = 0;
  if (p.offload != "none" || p.offloadParameters != "none") {
    OffloadStep step;
    step.shardParams = optimizerParams;
    step.update = optimizer;
    for (int64_t v = 0; v < p.virtualStages; ++v)
      step.window += costs.backward[v * p.pp] + costs.weight[v * p.pp];
    // The first update comes below the stage's last layer's backward, and
    // on a one-stage plan after the head's: neither hides a transfer.
    std::vector<int64_t> first = stageLayerIndices(split, p, 0);
    if (!first.empty()) {
      double f, b, w;
      layers.sums(first.back(), 1, f, b, w);
      step.window -= b + w;
    }
    if (p.pp == 1)
      step.window -= head.backward + head.weight + head.comm;
    step.window = std::max(0.0, step.window);
    double embedding = (double(m.vocab) / double(p.tp) + double(m.positions)) *
                       double(m.hidden);
    double firstStage = stageParameters(m, p, split, 0);
    step.lastShare = firstStage >= stageParams && stageParams > 0
                         ? embedding / stageParams
                         : 0.0;
    step.compute = pipeline + optimizer;
    if (p.offloadParameters != "none") {
      // The first stage's shards (ZeRO-3 over dp x cp), its mean layer.
      ParameterGathers &g = step.gathers;
      double group = double(p.dp * p.cp);
      g.layers = int64_t(first.size());
      g.microbatches = p.microbatches;
      g.embeddingBytes = 4 * embedding / group;
      g.layerBytes = g.layers > 0 ? 4 * std::max(0.0, firstStage - embedding) /
                                        double(g.layers) / group
                                  : 0.0;
      if (p.pp == 1)
        g.headBytes = 4 * double(m.vocab) / double(p.tp) * double(m.hidden) /
                      group;
      for (int64_t layer : first) {
        double f, b, w;
        layers.sums(layer, 1, f, b, w);
        g.layerForward += f / double(g.layers);
        g.layerBackward += (b + w) / double(g.layers);
      }
      // ZeRO-3's all-gathers (fp32 rows of the whole layer) and the
      // backward's reduce-scatters, as dataParallelSeconds prices them.
      Link link = groupLink(c, p.dp, p.tp * p.cp * p.pp);
      int64_t ranks = p.dp * p.cp;
      double layerFull = g.layerBytes * group;
      g.layerGather = allGatherTime(layerFull, ranks, link);
      g.layerBackwardComm =
          g.layerGather + reduceScatterTime(layerFull, ranks, link);
      g.embeddingGather = allGatherTime(g.embeddingBytes * group, ranks, link);
      g.overlapsCommunication = c.overlapsCommunication;
      g.embeddingForward = embed.forward + embed.comm;
      if (p.pp == 1) {
        g.headForward = head.forward + head.comm;
        g.headBackward = head.backward + head.weight + head.comm;
      }
    }
    offload = offloadStepSeconds(p, step, node, c, out);
  }
  out.stepSeconds = pipeline + dataComm + optimizer + offload;

  // The breakdown along the busiest stage.
  Breakdown &bd = out.breakdown;
  layerBreakdown(m, p, layers, split, bd);
  bd.pipelineComm = pipelineComm;
  bd.bubble = bubble;
  bd.dataComm = dataComm;
  bd.optimizer = optimizer;
  bd.offload = offload;
  bd.compute = out.stepSeconds - bd.recompute - bd.tensorComm - bd.contextComm -
               bd.expertComm - bd.pipelineComm - bd.bubble - bd.dataComm -
               bd.optimizer - bd.offload;

  fillFlops(m, p, c, out);
  out.memory = stageMemory(m, p, c, split);
  offloadMemory(p, node, c, out);
  out.memoryPerRank = out.memory.total();
  out.fits = out.memoryPerRank <= c.memoryBytes && out.tierFits;
  return out;
}

} // namespace partition::planner
