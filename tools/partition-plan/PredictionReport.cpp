//===- PredictionReport.cpp - partition-plan's output ---------------------===//

#include "tools/partition-plan/PredictionReport.h"

#include "planner/Experts.h"

#include "tools/partition-plan/PlanInputs.h"

#include "planner/Collectives.h"
#include "planner/ContextParallel.h"
#include "planner/LayerCost.h"

#include "llvm/Support/Format.h"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace partition::planner {
namespace {


/// The breakdown's terms, named, in a stable order.
std::vector<std::pair<const char *, double>> terms(const Breakdown &b) {
  return {{"compute", b.compute},
          {"recompute", b.recompute},
          {"tensor-parallel communication", b.tensorComm},
          {"context-parallel communication", b.contextComm},
          {"expert-parallel communication", b.expertComm},
          {"pipeline communication", b.pipelineComm},
          {"pipeline bubble", b.bubble},
          {"data-parallel communication", b.dataComm},
          {"optimizer", b.optimizer},
          {"offload", b.offload}};
}

} // namespace

std::string gib(double bytes) {
  char text[32];
  if (bytes >= (1 << 30))
    std::snprintf(text, sizeof(text), "%.1f GiB", bytes / (1 << 30));
  else
    std::snprintf(text, sizeof(text), "%.1f MiB", bytes / (1 << 20));
  return text;
}

std::string seconds(double s) {
  char text[32];
  if (s >= 1)
    std::snprintf(text, sizeof(text), "%.3f s", s);
  else
    std::snprintf(text, sizeof(text), "%.3f ms", s * 1e3);
  return text;
}

nlohmann::ordered_json toJson(const Prediction &p) {
  nlohmann::ordered_json out;
  out["plan"] = nlohmann::ordered_json::parse(p.plan.planJson());
  out["label"] = p.plan.label();
  out["micro_batch_size"] = p.plan.microBatch;
  out["model_batch"] = p.plan.microBatch * p.plan.dp;
  out["step_s"] = p.stepSeconds;
  out["tflops_per_gpu"] = p.tflopsPerGpu;
  out["mfu"] = p.mfu;
  out["memory_per_rank_bytes"] = p.memoryPerRank;
  out["memory_source"] = p.memorySource;
  out["fits"] = p.fits;
  out["compiles"] = p.notCompilable.empty();
  if (!p.notCompilable.empty())
    out["not_compilable"] = p.notCompilable;
  out["precision"] = p.plan.precision;
  if (p.plan.pp > 1)
    out["chunk_layers"] = p.chunkLayers;
  const Breakdown &b = p.breakdown;
  out["breakdown"] = {{"compute_s", b.compute},
                      {"recompute_s", b.recompute},
                      {"tensor_parallel_comm_s", b.tensorComm},
                      {"context_parallel_comm_s", b.contextComm},
                      {"pipeline_comm_s", b.pipelineComm},
                      {"bubble_s", b.bubble},
                      {"data_parallel_comm_s", b.dataComm},
                      {"optimizer_s", b.optimizer}};
  if (p.plan.ep > 1)
    out["breakdown"]["expert_parallel_comm_s"] = b.expertComm;
  if (p.plan.offload != "none" || p.plan.offloadParameters != "none") {
    out["breakdown"]["offload_s"] = b.offload;
    // Of offload_s: the shards' reads for the all-gathers left exposed,
    // and what the compute loses beside the disk.
    out["breakdown"]["offload_gather_s"] = p.offloadGatherSeconds;
    out["breakdown"]["offload_slowdown_s"] = p.offloadSlowdownSeconds;
    out["offloaded_bytes_per_rank"] = p.offloadedBytes;
    out["offloaded_parameter_bytes_per_rank"] = p.offloadedParameterBytes;
    out["offload_read_bytes_per_step"] = p.offloadReadBytes;
    out["offload_write_bytes_per_step"] = p.offloadWriteBytes;
  }
  return out;
}
void printExperts(const ModelShape &m, const Prediction &p,
                  llvm::raw_ostream &os) {
  const Candidate &c = p.plan;
  os << "experts: " << m.experts << " per MoE layer (" << m.moeLayers()
     << " of " << m.layers << " layers), top-" << m.topK << ", capacity "
     << m.capacity << " rows per sequence"
     << (m.capacity >= m.seqLen ? " (dropless)" : "") << ", "
     << llvm::format("%.3g", modelFlopsPerStep(m, 1) / 3 / double(m.seqLen))
     << " forward FLOPs per token; experts per rank: " << m.experts / c.ep
     << " of " << m.experts << " (ep " << c.ep << ")";
  if (c.ep > 1)
    os << ", each all-to-all " << gib(expertExchangeBytes(m, c))
       << " per rank per micro-batch (the filled rows; "
       << gib(expertAllToAllBytes(m, c)) << " at capacity), "
       << int(kForwardAllToAlls + kBackwardAllToAlls) << " per MoE layer ("
       << int(kForwardAllToAlls) << " forward, " << int(kBackwardAllToAlls)
       << " backward)";
  os << "\n";
}

std::string stageLayersText(const Prediction &p) {
  const Candidate &c = p.plan;
  if (c.pp <= 1 || int64_t(p.chunkLayers.size()) != c.pp * c.virtualStages)
    return "";
  // Per stage: the sum of its chunks (v x pp + stage), run-length written
  // ("7, 8 x14, 7").
  std::vector<int64_t> stages(size_t(c.pp), 0);
  for (size_t chunk = 0; chunk < p.chunkLayers.size(); ++chunk)
    stages[chunk % size_t(c.pp)] += p.chunkLayers[chunk];
  std::string out;
  for (size_t i = 0; i < stages.size();) {
    size_t j = i;
    while (j < stages.size() && stages[j] == stages[i])
      ++j;
    out += (i ? ", " : "") + std::to_string(stages[i]);
    if (j - i > 1)
      out += " x" + std::to_string(j - i);
    i = j;
  }
  out += c.stages.empty() ? " (balanced by cost, as --dist-pipeline splits)"
                          : " (the plan's pipeline.stages)";
  return out;
}

void printBreakdown(const Prediction &p, llvm::raw_ostream &os) {
  for (auto [name, value] : terms(p.breakdown))
    if (value > 0)
      os << llvm::format("  %-31s %12s  %5.1f%%\n", name,
                         seconds(value).c_str(),
                         100 * value / p.stepSeconds);
  const Memory &m = p.memory;
  os << "  memory per rank " << gib(p.memoryPerRank) << " ("
     << p.memorySource;
  if (p.memorySource == "closed-form")
    os << ": parameters " << gib(m.parameters) << ", gradients "
       << gib(m.gradients) << ", optimizer " << gib(m.optimizer)
       << ", activations " << gib(m.activations) << ", other "
       << gib(m.other);
  else
    os << ": the compiler's memory plan";
  os << ")\n";
  const Candidate &c = p.plan;
  if (c.offload != "none" || c.offloadParameters != "none") {
    os << "  offload: ";
    if (c.offload != "none")
      os << gib(p.offloadedBytes) << " of moments per rank in the "
         << c.offload << " tier";
    if (c.offloadParameters != "none")
      os << (c.offload != "none" ? ", " : "")
         << gib(p.offloadedParameterBytes)
         << " of fp32 parameter shards per rank in the "
         << c.offloadParameters << " tier";
    os << ", staged through " << gib(double(c.offloadBufferBytes))
       << " of buffers; per step " << gib(p.offloadReadBytes) << " read, "
       << gib(p.offloadWriteBytes) << " written\n";
    if (c.offloadParameters != "none" || p.offloadSlowdownSeconds > 0) {
      os << "  of the offload line:";
      if (c.offloadParameters != "none")
        os << " the shards' reads for the all-gathers "
           << seconds(p.offloadGatherSeconds) << ",";
      os << " the updates' transfers "
         << seconds(std::max(0.0, p.breakdown.offload -
                                      p.offloadGatherSeconds -
                                      p.offloadSlowdownSeconds))
         << ", the compute slowed beside the disk "
         << seconds(p.offloadSlowdownSeconds) << "\n";
    }
  }
}

/// What the winner would cost with one choice changed: each line's
/// prediction is the cost model's own (closed-form memory), beside the
/// winner's.
void printWhatMatters(const Prediction &best, const ModelShape &model,
                      const Cluster &cluster, llvm::raw_ostream &os) {
  const Candidate &plan = best.plan;
  struct Change {
    std::string what;
    Candidate plan;
  };
  std::vector<Change> changes;
  auto add = [&](std::string what, auto edit) {
    Change change{std::move(what), plan};
    edit(change.plan);
    changes.push_back(std::move(change));
  };
  if (plan.pp > 1 && plan.virtualStages > 1)
    add("without interleaving (1f1b)", [](Candidate &c) {
      c.schedule = "1f1b";
      c.virtualStages = 1;
      c.stages.clear();
    });
  else if (plan.pp > 1 && plan.schedule != "interleaved-1f1b" &&
           model.layers >= 2 * plan.pp && plan.microbatches % plan.pp == 0)
    add("with interleaving (v2)", [](Candidate &c) {
      c.schedule = "interleaved-1f1b";
      c.virtualStages = 2;
      c.stages.clear();
    });
  if (plan.cp > 1) {
    add(plan.cpMethod == "ring" ? "with all_gather" : "with ring",
        [](Candidate &c) {
          c.cpMethod = c.cpMethod == "ring" ? "all_gather" : "ring";
        });
    add(plan.cpLoadBalance == "zigzag" ? "without zigzag" : "with zigzag",
        [](Candidate &c) {
          c.cpLoadBalance = c.cpLoadBalance == "zigzag" ? "none" : "zigzag";
        });
    // Half the context group, twice the replicas: the same devices and
    // batch, each replica half the micro-batches.
    if (plan.microbatches % 2 == 0 && plan.microbatches / 2 >= plan.pp &&
        (plan.schedule != "interleaved-1f1b" ||
         (plan.microbatches / 2) % plan.pp == 0))
      add("with cp " + std::to_string(plan.cp / 2) + ", dp " +
              std::to_string(plan.dp * 2),
          [](Candidate &c) {
            c.cp /= 2;
            c.dp *= 2;
            c.microbatches /= 2;
          });
  }
  if (plan.tp > 1 && plan.perLayer.empty())
    add(plan.sequenceParallel ? "without sequence parallelism"
                              : "with sequence parallelism",
        [](Candidate &c) { c.sequenceParallel = !c.sequenceParallel; });
  // The neighbouring recompute policies: less recomputed (faster, more
  // memory) and more (slower, less memory).
  static const char *kPolicies[] = {"none", "selective", "full"};
  int at = -1;
  for (int i = 0; i < 3; ++i)
    if (plan.recompute == kPolicies[i])
      at = i;
  for (int next : {at - 1, at + 1})
    if (at >= 0 && next >= 0 && next < 3)
      add(std::string("with recompute ") + kPolicies[next],
          [&](Candidate &c) { c.recompute = kPolicies[next]; });
  if (plan.dp > 1)
    for (int stage : {plan.zeroStage - 1, plan.zeroStage + 1})
      if (stage >= 0 && stage <= 3)
        add(stage == 0 ? std::string("without ZeRO")
                       : "with ZeRO-" + std::to_string(stage),
            [&](Candidate &c) { c.zeroStage = stage; });
  // Expert parallelism: 1 or dp, the degrees the compiler takes.
  if (model.isMoe() && plan.dp > 1 &&
      expertParallelDegrees(model, plan.dp).size() > 1)
    add(plan.ep > 1 ? std::string("without expert parallelism")
                    : "with expert parallelism " + std::to_string(plan.dp),
        [&](Candidate &c) { c.ep = c.ep > 1 ? 1 : c.dp; });
  if (changes.empty())
    return;
  Prediction closed = predict(model, plan, cluster);
  double capacity = deviceShare(cluster, plan.devices()).memoryBytes;
  os << "  what the choices are worth (the same plan with one change; "
        "memory by the closed form, "
     << gib(closed.memoryPerRank) << " for this plan):\n";
  for (const Change &change : changes) {
    Prediction p = predict(model, change.plan, cluster);
    if (!std::isfinite(p.stepSeconds))
      continue;
    os << llvm::format("    %-34s %12s  %+6.1f%%  %10s", change.what.c_str(),
                       seconds(p.stepSeconds).c_str(),
                       100 * (p.stepSeconds / best.stepSeconds - 1),
                       gib(p.memoryPerRank).c_str());
    if (p.memoryPerRank > capacity)
      os << "  does not fit";
    os << "\n";
  }
}

/// The context-parallel terms of one layer and micro-batch: what each
/// rank gathers, over which links, and the slowest rank's attention share.
void printContextTerms(const Candidate &plan, const ModelShape &model,
                       const Cluster &node, llvm::raw_ostream &os) {
  Cluster c = deviceShare(node, plan.devices());
  Link link = groupLink(c, plan.cp, plan.tp);
  bool intra = link.bandwidth == c.intraNodeBandwidth &&
               plan.cp * plan.tp <= c.devicesPerNode;
  double share = causalShare(plan.cp, plan.cpLoadBalance);
  LayerCost layer = layerCost(model, plan, c);
  os << "  context parallelism: cp " << plan.cp << ", " << plan.cpMethod
     << ", load balance " << plan.cpLoadBalance << "; per layer and "
     << "micro-batch: K/V gathered " << gib(kvGatherBytes(model, plan))
     << " per rank over " << (intra ? "NVLink (cp x tp fits a node)"
                                    : "the inter-node network")
     << "; exposed " << seconds(layer.forwardContext) << " forward, "
     << seconds(layer.backwardContext + layer.recomputeContext)
     << " backward; attention " << seconds(layer.attentionForward)
     << " + " << seconds(layer.attentionBackward)
     << "; the slowest rank does "
     << llvm::format("%.4f", share) << " of the causal work (1/cp = "
     << llvm::format("%.4f", 1.0 / double(plan.cp)) << ")\n";
}

void printExplanation(const std::vector<Prediction> &ranked,
                      const ModelShape &model, const Cluster &cluster,
                      llvm::raw_ostream &os) {
  const Prediction &best = ranked.front();
  os << "why " << best.plan.label() << ":\n";
  printBreakdown(best, os);
  auto all = terms(best.breakdown);
  auto dominant = std::max_element(
      all.begin(), all.end(),
      [](const auto &a, const auto &b) { return a.second < b.second; });
  os << "  dominant term: " << dominant->first << " ("
     << llvm::format("%.0f%%", 100 * dominant->second / best.stepSeconds)
     << " of the step)\n";
  if (best.plan.cp > 1)
    printContextTerms(best.plan, model, cluster, os);
  printWhatMatters(best, model, cluster, os);
  if (ranked.size() < 2) {
    os << "  no runner-up\n";
    return;
  }
  const Prediction &second = ranked[1];
  auto other = terms(second.breakdown);
  size_t worst = 0;
  for (size_t i = 0; i < all.size(); ++i)
    if (other[i].second - all[i].second >
        other[worst].second - all[worst].second)
      worst = i;
  os << "  runner-up " << second.plan.label() << " is "
     << llvm::format("%.1f%%",
                     100 * (second.stepSeconds / best.stepSeconds - 1))
     << " slower: +" << seconds(other[worst].second - all[worst].second)
     << " of " << all[worst].first << "\n";
}

/// The bases are the fastest uniform plans (three per mesh tp) with tp > 1
/// that fit and that the plan.json reader accepts with per-layer degrees
/// too (under what --plan fixes; a probe assignment, layer 0 at tp 1 and
/// the rest at the mesh's, asks it: whether per_layer goes with the base's
/// pp or ZeRO is the reader's rule, not the planner's); every per-layer
/// assignment is tried on each and put to the reader, and those that
/// compile get the compiler's memory plan from `oracle`.
NonuniformReport searchNonuniformPlans(const ModelShape &shape,
                                       const Cluster &cluster,
                                       const SearchOptions &options,
                                       const Fixed &fixed,
                                       const model::ModelConfig &config,
                                       const MemoryOracle &oracle,
                                       int64_t top) {
  NonuniformReport report;
  std::vector<Candidate> bases;
  for (int64_t t = 2; t <= options.devices; ++t) {
    if (options.devices % t != 0 || (fixed.tp && *fixed.tp != t))
      continue;
    Fixed f = fixed;
    f.tp = t;
    SearchOptions o = options;
    o.top = 3;
    o.keepUnfit = false;
    SearchResult r = search(
        shape, cluster, o, f,
        [&](const Candidate &c, bool &hard) {
          std::string why = validate(c, config, hard);
          if (!why.empty() || shape.layers < 2)
            return why;
          Candidate probe = c;
          probe.perLayer = {{0, 0, 1}, {1, shape.layers - 1, c.tp}};
          return validate(probe, config, hard);
        });
    bool any = false;
    for (const Prediction &p : r.ranked)
      if (p.fits) {
        bases.push_back(p.plan);
        any = true;
      }
    if (any)
      report.meshTps.push_back(t);
  }
  report.bases = int64_t(bases.size());
  report.result = searchNonuniform(shape, cluster, bases,
                                   std::max<int64_t>(top, 1),
                                   [&](const Candidate &c, bool &hard) {
                                     return validate(c, config, hard);
                                   },
                                   oracle,
                                   options.includeUncompilable);
  return report;
}

nlohmann::ordered_json nonuniformJson(const NonuniformReport &report,
                                      const Prediction &best) {
  nlohmann::ordered_json all = nlohmann::ordered_json::array();
  for (const Prediction &p : report.result.ranked) {
    nlohmann::ordered_json entry = toJson(p);
    // Positive: faster than the best uniform plan by that much.
    entry["gain_s"] = best.stepSeconds - p.stepSeconds;
    entry["gain"] = 1 - p.stepSeconds / best.stepSeconds;
    all.push_back(entry);
  }
  return all;
}

void printNonuniform(const NonuniformReport &report, const Prediction &best,
                     llvm::raw_ostream &os) {
  const NonuniformResult &r = report.result;
  os << "nonuniform: " << r.evaluated << " per-layer plans on "
     << report.bases << " uniform bases (mesh tp";
  for (int64_t t : report.meshTps)
    os << " " << t;
  if (report.meshTps.empty())
    os << ": none";
  os << "), " << r.refused << " refused by the plan.json reader, "
     << r.unfit << " do not fit\n";
  if (!r.firstRefusal.empty())
    os << "  the reader's first refusal: " << r.firstRefusal << "\n";
  if (r.ranked.empty()) {
    if (report.bases == 0)
      os << "no nonuniform plan: no uniform plan with tp > 1 that takes "
            "per-layer degrees fits to start from\n";
    else if (!r.firstRefusal.empty() && r.evaluated == 0)
      os << "no nonuniform plan: partition-compile refuses every one ("
         << r.firstRefusal << ")\n";
    else
      os << "no nonuniform plan fits\n";
    return;
  }
  os << llvm::format("%4s  %-56s %12s %17s %10s  %s\n", "rank", "plan",
                     "step", "vs best uniform", "memory", "source");
  for (size_t i = 0; i < r.ranked.size(); ++i) {
    const Prediction &p = r.ranked[i];
    os << llvm::format("%4d  %-56s %12s %+16.1f%% %10s  %s%s\n", int(i + 1),
                       p.plan.label().c_str(),
                       seconds(p.stepSeconds).c_str(),
                       100 * (p.stepSeconds / best.stepSeconds - 1),
                       gib(p.memoryPerRank).c_str(), p.memorySource.c_str(),
                       p.notCompilable.empty() ? ""
                                               : " (does not compile yet)");
  }
  const Prediction &winner = r.ranked.front();
  if (report.beats(best)) {
    os << "nonuniform wins: " << winner.plan.label() << " beats the best "
       << "uniform plan " << best.plan.label() << " by "
       << llvm::format("%.1f%%", 100 * (1 - winner.stepSeconds /
                                                 best.stepSeconds))
       << " (" << seconds(best.stepSeconds - winner.stepSeconds)
       << " per step)\n";
    os << "  plan.json: " << winner.plan.planJson() << "\n";
    if (!winner.notCompilable.empty())
      os << "note: partition-compile refuses this plan today: "
         << winner.notCompilable << "\n";
  } else {
    os << "no nonuniform plan beats the best uniform plan "
       << best.plan.label() << " (" << seconds(best.stepSeconds)
       << "): the fastest, " << winner.plan.label() << ", is "
       << llvm::format("%.1f%%",
                       100 * (winner.stepSeconds / best.stepSeconds - 1))
       << " slower\n";
  }
}

/// --goodput: checks the failure flags, then prints the table.

} // namespace partition::planner
