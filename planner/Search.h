//===- Search.h - every plan of a model on N devices, ranked ----*- C++ -*-===//
//
// Enumerates dp x tp x pp meshes of exactly N devices (x cp where it can
// pay: ContextParallel.h; expert parallelism 1 or dp for a mixture of
// experts: Experts.h), micro-batch sizes
// and counts that make the global batch, pipeline schedules and virtual
// stages, sequence parallelism, ZeRO stages and recompute policies;
// predicts each (CostModel.h), and ranks the plans that fit by step time.
//
// Which plans may be emitted is not decided here: the caller passes a
// `Validate` that asks the plan.json reader (parsePlan, the model check
// and checkPlanImplemented in passes/plan/Plan.cpp), so the search space grows
// by itself as passes land. Plans it refuses are dropped, or with
// `includeUncompilable` kept and marked (the cost model covers pipeline,
// ZeRO and interleaving before the compiler does). It is asked of the
// plans the branch and bound reaches, in order, and of those that do not
// fit until one is accepted (for the least memory a plan needs), not of
// every candidate: reading each as plan.json text was most of a search's
// time.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_SEARCH_H
#define PARTITION_PLANNER_SEARCH_H

#include "planner/CostModel.h"

#include <functional>
#include <optional>
#include <vector>

namespace partition::planner {

/// "" when the plan is accepted, else the reason (one line). `hard` is set
/// when the plan is impossible for the model (not only not implemented).
using Validate =
    std::function<std::string(const Candidate &, bool &hard)>;

/// What the user fixed (a plan.json given with --plan, or flags); unset
/// fields are searched.
struct Fixed {
  std::optional<int64_t> dp, tp, pp, virtualStages, microBatch, microbatches;
  /// mesh.cp (1 forbids context parallelism), and context_parallel's
  /// method and load balance. Unset cp is searched where it can pay
  /// (searchContextParallel) or when no plan fits without it.
  std::optional<int64_t> cp;
  std::optional<std::string> cpMethod, cpLoadBalance;
  std::optional<std::string> schedule, recompute, precision;
  std::optional<bool> sequenceParallel;
  std::optional<int> zeroStage;
  /// pipeline.stages: the layers of each chunk (Candidate::stages).
  std::optional<std::vector<int64_t>> stages;
  /// tensor_parallel.per_layer: each layer range's degree
  /// (Candidate::perLayer).
  std::optional<std::vector<TpPart>> perLayer;
  /// moe.expert_parallel (Candidate::ep): unset, a MoE model's search
  /// tries 1 and mesh.dp (expertParallelDegrees).
  std::optional<int64_t> ep;
  /// plan.json's offload.optimizer ("none", "host", "nvme"); unset (auto):
  /// a plan that does not fit is tried with the tiers the cluster has
  /// (host where the node has host memory of its own and a host link, nvme
  /// where it has a disk), and kept with the fastest that fits.
  std::optional<std::string> offload;
  /// plan.json's offload.parameters ("none", "host", "nvme": ZeRO-3's
  /// parameter shards in that tier too); unset (auto): a ZeRO-3 plan over
  /// dp x cp > 1 that does not fit with its moments offloaded is tried with
  /// its shards in the same tier.
  std::optional<std::string> offloadParameters;
  /// offload.buffer_bytes and offload.path of the plans that offload.
  int64_t offloadBufferBytes = planfile::kOffloadDefaultBufferBytes;
  std::string offloadPath = ".";
  /// The largest micro-batch size tried (sequences per replica).
  int64_t maxMicroBatch = 32;
};

struct SearchOptions {
  int64_t devices = 1;
  int64_t globalBatch = 1;
  bool includeUncompilable = false;
  /// Keep plans that do not fit (ranked after those that do).
  bool keepUnfit = false;
  /// How many of the fastest fitting plans to predict exactly (simulating
  /// their pipelines); the others are ranked by a lower bound and dropped
  /// once that bound exceeds the K-th best exact step time.
  int64_t top = 10;
  /// Called with the plans the exact phase will ask `memory` about next
  /// (those its bound does not yet rule out), so that an oracle can start
  /// them early, in parallel; optional, and the ranking is the same
  /// without it.
  std::function<void(const Candidate &)> prefetchMemory;
};

struct SearchResult {
  /// Fitting plans first, each group by step time.
  std::vector<Prediction> ranked;
  /// Candidates predicted (their bound; the validator is asked later).
  int64_t evaluated = 0;
  /// Why nothing came out, when `ranked` holds no fitting plan: the first
  /// refusal, for the error message.
  std::string firstRefusal;
  /// Plans the validator refused (of those it was asked about), and
  /// plans that do not fit.
  int64_t refused = 0, unfit = 0;
  /// The least memory per rank among plans that do not fit (bytes).
  double leastUnfitMemory = 0;
};

/// The compiler's memory plan of a plan that compiles: bytes per rank, or
/// nullopt when it cannot say (then the closed form stands).
using MemoryOracle = std::function<std::optional<double>(const Candidate &)>;

/// With `memory`, the plans that reach the exact phase and compile get
/// their memory from it (Prediction::memorySource "compiled") and are
/// dropped when that does not fit.
SearchResult search(const ModelShape &model, const Cluster &cluster,
                    const SearchOptions &options, const Fixed &fixed,
                    const Validate &validate,
                    const MemoryOracle &memory = nullptr);

} // namespace partition::planner

#endif // PARTITION_PLANNER_SEARCH_H
