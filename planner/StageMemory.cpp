//===- StageMemory.cpp - the closed-form memory of a plan -----------------===//

#include "planner/StageMemory.h"

#include "planner/ContextParallel.h"
#include "planner/Experts.h"
#include "planner/PipelineSimulation.h"

#include <algorithm>
#include <cmath>

namespace partition::planner {

Memory stageMemory(const ModelShape &m, const Candidate &p, const Cluster &c,
                   const ChunkSplit &split) {
  double e = p.precision == "bf16" ? 2 : 4;
  // Each rank's tokens: context parallelism divides every activation, the
  // logits and the token buffers by cp.
  double n = double(p.microBatch) * double(m.seqLen) / double(p.cp);
  double h = double(m.hidden), t = double(p.tp);
  double mbs = double(p.microbatches);
  // ZeRO shards over the gradient reduction's group, dp x cp.
  double dp = double(p.dp * p.cp);
  // Gradients: the accumulated sum (gradient accumulation without ZeRO-2
  // sharding it) held throughout, and this micro-batch's, which the
  // backward produces as it frees the activations (added at the end; see
  // the stage loop). With one micro-batch ZeRO-1 reduce-scatters each
  // bucket as it is produced, as ZeRO-2 does (the compiler's plan).
  double newGradientShare = 1;
  // `experts`: of `params`, the expert weights expert parallelism split
  // (0 without it): ZeRO shards them, and their state, over the ranks that
  // hold the same experts (the expert-data-parallel group, dp x cp / ep;
  // one rank when ep = dp: whole).
  double expertDp = dp / double(p.ep);
  auto stateMemory = [&](double params, double experts, Memory &mem) {
    mem = Memory();
    double dense = params - experts;
    auto zero = [&](int stage, double group) {
      return p.zeroStage >= stage ? group : 1.0;
    };
    mem.parameters = 4 * dense / zero(3, dp) + 4 * experts / zero(3, expertDp);
    bool sharded = p.zeroStage >= 2 || (p.zeroStage == 1 && p.microbatches == 1);
    newGradientShare = 4 * dense / (sharded ? dp : 1.0) +
                       4 * experts / (sharded ? expertDp : 1.0);
    mem.gradients = p.microbatches > 1 && p.zeroStage < 2 ? 4 * params
                    : p.microbatches > 1 ? 4 * experts / expertDp
                                         : 0;
    mem.optimizer = 8 * dense / zero(1, dp) + 8 * experts / zero(1, expertDp);
    // The bf16 copies of the weights the backward reads; selective
    // recomputation rebuilds them (a cast is cheap work between matmuls)
    // instead, full recomputation keeps them (it repeats the layers'
    // forward from their input, the casts come before).
    if (p.precision == "bf16" && p.recompute != "selective")
      mem.other += 2 * params;
  };
  double f = double(m.ffn), qkv = double(m.heads + 2 * m.kvHeads) *
                                  double(m.headDim());
  // Saved bytes of one layer at degree `t` (what the backward reads), and
  // the elements per token of a whole layer's backward working set.
  // (A MoE model's mean layer keeps its MoE blocks' buffers instead of
  // the dense block's f terms: moeSavedDelta, 0 for a dense model.)
  auto fullLayerAt = [&](double t) {
    double sp = p.sequenceParallel ? t : 1.0;
    return 4 * h / sp + (qkv + h + (m.llama ? 3 : 2) * f) / t +
           moeSavedDelta(m, t, /*selective=*/false);
  };
  auto savedAt = [&](double t) {
    double sp = p.sequenceParallel ? t : 1.0;
    double saved = fullLayerAt(t);
    // Selective recomputation rebuilds the cheap work between matmuls:
    // for GPT-2 a norm's output, the residual sum and GELU's output (2h +
    // f of 4h + 2f); for Llama the compiler keeps SwiGLU's gate and up
    // outputs and rebuilds one norm and the product (h + f of 4h + 3f),
    // as --dist-recompute's memory plan shows (bench/planner/memory_table).
    if (p.recompute == "selective")
      saved = (m.llama ? 3 * h / sp + (qkv + h + 2 * f) / t
                       : 2 * h / sp + (qkv + h + f) / t) +
              moeSavedDelta(m, t, /*selective=*/true);
    else if (p.recompute == "full")
      saved = h / sp;
    double bytes = n * saved * e;
    if (c.attentionKernel == "materialized" && p.recompute != "full")
      bytes += double(p.microBatch) * double(m.heads) / t *
               double(m.seqLen) / double(p.cp) * m.attendedKeys() * e;
    return bytes;
  };
  // A stage's mean saved bytes per layer (its layers' own degrees in a
  // nonuniform plan).
  auto stageSaved = [&](int64_t stage) {
    if (p.perLayer.empty())
      return savedAt(t);
    std::vector<int64_t> layers = stageLayerIndices(split, p, stage);
    double sum = 0;
    for (int64_t layer : layers)
      sum += savedAt(double(p.layerTp(layer)));
    return sum / double(std::max<size_t>(1, layers.size()));
  };
  double smallest = t; // the largest working set: the smallest degree
  for (const TpPart &part : p.perLayer)
    smallest = std::min(smallest, double(part.tp));
  // One layer's backward under full recomputation: its rebuilt
  // activations and the gradients of its MLP's intermediates (f, or gate
  // and up for SwiGLU).
  double working = n * (fullLayerAt(smallest) +
                        (m.llama ? 2 : 1) * f / smallest +
                        moeWorkingDelta(m, smallest)) * e;
  double logits = n * double(m.vocab) / t * (e + 4);
  double inputs = 8 * n * mbs;
  Memory most;
  for (int64_t stage = 0; stage < p.pp; ++stage) {
    Memory mem;
    stateMemory(stageParameters(m, p, split, stage),
                p.ep > 1 ? stageParameters(m, p, split, stage, true) : 0, mem);
    // The stage's chunks in flight at once, each of its mean layers.
    double layersPerChunk = double(split.stageLayers(p, stage)) /
                            double(p.virtualStages);
    int64_t inFlight = stagePeakInFlight(p.schedule, p.pp, p.microbatches,
                                         p.virtualStages, stage);
    // The gathered K/V (and dK/dV) of the one layer running are transient.
    mem.activations = double(inFlight) * layersPerChunk * stageSaved(stage) +
                      (p.recompute == "full" ? working : 0) +
                      contextTransientBytes(m, p);
    if (stage == p.pp - 1)
      mem.activations += logits;
    mem.other += inputs;
    // The backward frees a layer's activations as it writes the layer's
    // gradients: with one micro-batch in flight the stage holds the larger
    // of the two at its peak, not their sum (the arena's peak is at the
    // start of the backward, or near its end when little is saved); with
    // several, the others' activations stay while one's gradients grow.
    if (p.pp > 1 && inFlight > 1)
      mem.gradients += newGradientShare;
    else if (newGradientShare > mem.activations)
      mem.gradients += newGradientShare - mem.activations;
    if (stage == 0 || mem.total() > most.total())
      most = mem;
  }
  return most;
}

} // namespace partition::planner
