//===- CostModel.h - predicted step time and memory of a plan ---*- C++ -*-===//
//
// Predicts one training step of a transformer under a plan on a cluster:
//
//  - compute: every GEMM of the step (forward, input and weight gradient,
//    attention) by a roofline (FLOPs at the cluster's GEMM efficiency times
//    a tile- and wave-quantization factor of the shape, or bytes at memory
//    bandwidth, whichever is slower), every elementwise kernel (norms,
//    activations, residual sums, softmax, loss, AdamW) by its bytes at
//    memory bandwidth, plus a launch latency per kernel;
//  - communication: tensor-parallel all-reduces (or SP all-gathers and
//    reduce-scatters), the data-parallel gradient all-reduce (or ZeRO's
//    reduce-scatter and all-gathers), pipeline sends, each by the alpha-beta
//    model on the links its group crosses (Collectives.h);
//  - the pipeline: each stage's F, B and W costs played through the
//    schedule simulator (scheduling/ScheduleCheck.h), so the bubble is
//    the schedule's own, not a closed form;
//  - recomputation: the forward work the policy repeats in the backward.
//
// Memory per rank here is the closed form (parameters, gradients, AdamW
// state, activations of the micro-batches a stage holds at once, per the
// schedule); the planner replaces it with the compiler's memory plan where
// the plan compiles (partition-plan, CompiledMemory).
//
// FLOPs are counted as the Megatron-LM paper does (Narayanan et al. 2021,
// eq. 3): 2 per multiply-add, attention at full T x T (T x W with a
// sliding window W < T), the backward twice
// the forward, recomputed work included in the hardware FLOPs.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_COSTMODEL_H
#define PARTITION_PLANNER_COSTMODEL_H

#include "passes/plan/PlanAxisNames.h"
#include "planner/Cluster.h"

#include <cstdint>
#include <string>
#include <vector>

namespace partition::planner {

/// A model's shape (its `xfmr.model` configuration).
struct ModelShape {
  bool llama = false; // else GPT-2 (biases, LayerNorm, GELU, tied head)
  /// Llama only: the head is the embedding (Llama 3.2), and q/k/v biases
  /// (Qwen2).
  bool tiedHead = false, qkvBias = false;
  int64_t layers = 0, hidden = 0, heads = 0, kvHeads = 0, ffn = 0;
  int64_t vocab = 0, seqLen = 0;
  /// Learned position rows (GPT-2), for the parameter count.
  int64_t positions = 0;
  /// Sliding-window attention: on the layers from windowFromLayer on
  /// (Qwen2's max_window_layers; 0 for Mistral), each query meets this
  /// many keys when below seqLen; 0 means none.
  int64_t slidingWindow = 0, windowFromLayer = 0;
  /// Mixture of experts (planner/Experts.h): every moeEvery-th layer's
  /// feed-forward block is a router over `experts` SwiGLU experts of width
  /// expertFfn, topK of them per token, plus sharedExperts experts every
  /// token takes; `capacity` rows per sequence and expert (seqLen when
  /// dropless). 0 experts: a dense model.
  int64_t experts = 0, topK = 0, moeEvery = 1, sharedExperts = 0;
  int64_t expertFfn = 0, capacity = 0;

  int64_t headDim() const { return hidden / heads; }
  /// The keys one query's attention multiplies, averaged over the layers:
  /// seqLen, or the window on the windowed layers. Exact in the FLOP count
  /// (linear in it); the per-layer time and a materialized kernel's memory
  /// take the mean layer when only some layers have the window.
  double attendedKeys() const {
    if (slidingWindow <= 0 || slidingWindow >= seqLen || layers <= 0)
      return double(seqLen);
    double windowed = double(layers - windowFromLayer);
    return (windowed * double(slidingWindow) +
            double(windowFromLayer) * double(seqLen)) /
           double(layers);
  }
  bool isMoe() const { return experts > 0; }
  /// Layers whose feed-forward block is a MoE block (the model builder's
  /// (l + 1) % moeEvery == 0).
  int64_t moeLayers() const {
    return isMoe() && moeEvery > 0 ? layers / moeEvery : 0;
  }
  /// Parameters of one dense transformer layer, and of the whole model
  /// (every expert counted).
  int64_t layerParameters() const;
  int64_t parameters() const;
  /// The parameters of the mean layer (MoE layers hold more), and of it
  /// the stacked expert weights, which expert parallelism splits (0 for a
  /// dense model): Experts.cpp.
  double meanLayerParameters() const;
  double meanLayerExpertParameters() const;
  /// The parameters one token's forward multiplies (only its top-k
  /// experts, the router and the shared experts of a MoE layer): the
  /// "active" parameters a MoE model is quoted by. parameters() when dense.
  double activeParameters() const;
};

/// A tensor-parallel degree for layers first..last (inclusive): a part of
/// a nonuniform plan (plan.json's "tensor_parallel": {"per_layer": ...}).
struct TpPart {
  int64_t first = 0, last = 0, tp = 1;
};

/// One point of the search space: a plan.json plus what the planner
/// chooses beyond it (the micro-batch size: the model's `batch`).
struct Candidate {
  int64_t dp = 1, tp = 1, pp = 1;
  /// Context parallelism: each sequence split over cp ranks
  /// (planner/ContextParallel.h); the method ("all_gather" or "ring") and
  /// load balance ("zigzag" or "none") of plan.json's context_parallel.
  int64_t cp = 1;
  std::string cpMethod = "all_gather";
  std::string cpLoadBalance = "zigzag";
  /// Virtual stages per pipeline stage (interleaved 1F1B's chunks).
  int64_t virtualStages = 1;
  /// The layers of each model chunk (pp x virtualStages entries, in model
  /// order), as plan.json's pipeline.stages gives them (Llama 3 gave its
  /// first and last stage one layer fewer); empty: balanced by cost, as
  /// --dist-pipeline splits them (chunkLayerCounts).
  std::vector<int64_t> stages;
  /// Sequences per micro-batch (the model's batch), and micro-batches per
  /// step per data-parallel replica.
  int64_t microBatch = 1;
  int64_t microbatches = 1;
  std::string schedule = "1f1b";
  bool sequenceParallel = false;
  int zeroStage = 0;
  std::string recompute = "none"; // none, selective, full
  std::string precision = "fp32"; // fp32, bf16
  /// Nonuniform tensor parallelism: the degree of each layer range (empty:
  /// every layer at `tp`). `tp` stays the mesh's, the largest degree; a
  /// part at a smaller degree d runs on sub-groups of d ranks, the tp/d
  /// copies computing it redundantly (planner/Nonuniform.h).
  std::vector<TpPart> perLayer;
  /// Expert parallelism (plan.json's moe.expert_parallel): each MoE
  /// layer's experts split over this many ranks of the data axis; the
  /// compiler takes 1 or mesh.dp (planner/Experts.h).
  int64_t ep = 1;
  /// Optimizer offload (plan.json's offload, docs/offload.md): the tier of
  /// AdamW's moments ("none", "host" or "nvme"), the staging budget in the
  /// arena, and the nvme tier's directory (written to plan.json).
  std::string offload = "none";
  /// ZeRO-3's fp32 parameter shards in a tier too (plan.json's
  /// offload.parameters, ZeRO-Infinity's parameter offload): "none",
  /// "host" or "nvme"; only with zeroStage 3 over dp > 1.
  std::string offloadParameters = "none";
  int64_t offloadBufferBytes = planfile::kOffloadDefaultBufferBytes;
  std::string offloadPath = ".";

  /// The degree layer `layer` runs at.
  int64_t layerTp(int64_t layer) const;
  int64_t devices() const { return dp * cp * tp * pp; }
  int64_t globalBatch() const { return dp * microBatch * microbatches; }
  /// plan.json for this candidate (only the fields that differ from the
  /// defaults; virtual_stages under "pipeline" when above 1; mesh.cp and
  /// context_parallel when cp > 1).
  std::string planJson() const;
  /// "dp4 tp2 pp1 sp mb2x4 1f1b z0 full bf16", for tables ("stages" after
  /// the schedule when the plan gives pipeline.stages).
  std::string label() const;
};

/// Where the time of a step goes, in seconds per step (per rank; the
/// parts of a pipeline's critical path).
struct Breakdown {
  double compute = 0;      // forward and backward kernels
  double recompute = 0;    // the forward work done again
  double tensorComm = 0;   // tp / SP collectives (exposed)
  double contextComm = 0;  // cp's K/V gathers and dK/dV reduce-scatters
  double expertComm = 0;   // expert parallelism's all-to-alls
  double pipelineComm = 0; // pipeline sends on the critical path
  double bubble = 0;       // pipeline idle time
  double dataComm = 0;     // exposed gradient reduction (and ZeRO gathers)
  double optimizer = 0;    // AdamW
  double offload = 0;      // exposed tier transfers (moments, ZeRO-3 shards)
};

struct Memory {
  double parameters = 0, gradients = 0, optimizer = 0, activations = 0,
         other = 0;
  double total() const {
    return parameters + gradients + optimizer + activations + other;
  }
};

struct Prediction {
  Candidate plan;
  /// The layers of each model chunk the prediction assumed: the plan's
  /// pipeline.stages, else the split balanced by cost.
  std::vector<int64_t> chunkLayers;
  double stepSeconds = 0;
  Breakdown breakdown;
  /// Model FLOPs of the step (no recomputation) and what the hardware
  /// executes (with it), over all devices.
  double modelFlops = 0, hardwareFlops = 0;
  /// Hardware FLOPs / step time / devices (the Megatron paper's figure),
  /// and model FLOPs / step time / devices / peak.
  double tflopsPerGpu = 0, mfu = 0;
  /// The most any rank needs (the pipeline's first stage holds most).
  Memory memory;
  double memoryPerRank = 0;
  /// "closed-form" or "compiled" (the compiler's memory plan).
  std::string memorySource = "closed-form";
  bool fits = false;
  /// Optimizer offload: this rank's moments in the tier (bytes), and
  /// whether the node's host memory holds its ranks' (the host tier; the
  /// disk's size is not modelled).
  double offloadedBytes = 0;
  bool tierFits = true;
  /// Parameter offload (Candidate::offloadParameters): this rank's fp32
  /// shards in the tier (bytes), the bytes each step reads from and
  /// writes to its tiers (moments and shards), and of `breakdown.offload`
  /// the part the parameter shards' reads for the all-gathers leave
  /// exposed and the part the compute loses beside the I/O
  /// (Cluster::diskComputeSlowdown).
  double offloadedParameterBytes = 0;
  double offloadReadBytes = 0, offloadWriteBytes = 0;
  double offloadGatherSeconds = 0, offloadSlowdownSeconds = 0;
  /// Empty when partition-compile accepts the plan, else why not.
  std::string notCompilable;
};

/// The whole prediction with closed-form memory. Without `exactPipeline`
/// the pipeline is not simulated and the step time is a lower bound (the
/// busiest stage's work, no bubble): the search's first, cheap pass.
Prediction predict(const ModelShape &model, const Candidate &plan,
                   const Cluster &cluster, bool exactPipeline = true);

/// The resharding of the activation between adjacent layers of degrees
/// `from` and `to` in a nonuniform plan, per micro-batch (seconds, on one
/// rank of `device`, a device's share as deviceShare gives it). Without SP
/// the activation between layers is whole on every rank of the tp group:
/// nothing moves. With SP it is split over the sequence by the degree:
/// going down (4 -> 2) each rank all-gathers the from/to pieces of its new
/// slice from the ranks that dropped out of its sub-group (the gather's
/// output is the activation / to); going up (2 -> 4) each rank keeps a
/// slice of what it holds (free). The backward mirrors it: the gradient
/// of a gather is a slice (the copies of a redundantly computed part hold
/// the same gradient, not parts of a sum), of a slice a gather.
struct Reshard {
  double forward = 0, backward = 0;
};
Reshard boundaryReshard(const ModelShape &model, const Candidate &plan,
                        int64_t from, int64_t to, const Cluster &device);

/// What one of `devices` devices gets of a node (Cluster::sharedNode).
Cluster deviceShare(const Cluster &node, int64_t devices);

/// The layers of each of the plan's pp x v model chunks: its
/// pipeline.stages when given, else the split --dist-pipeline makes, the
/// costliest chunk as cheap as possible with the embedding on the first
/// chunk and the LM head on the last (scheduling/Balance.h), by the cost
/// model's seconds per layer rather than the pass's FLOPs and bytes (for
/// uniform layers the same split).
std::vector<int64_t> chunkLayerCounts(const ModelShape &model,
                                      const Candidate &plan,
                                      const Cluster &cluster);

/// The model FLOPs of a step of `sequences` sequences (no recompute).
double modelFlopsPerStep(const ModelShape &model, int64_t sequences);

} // namespace partition::planner

#endif // PARTITION_PLANNER_COSTMODEL_H
