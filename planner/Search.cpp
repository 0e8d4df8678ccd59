//===- Search.cpp - every plan of a model on N devices, ranked ------------===//

#include "planner/Search.h"

#include "planner/ContextParallel.h"
#include "planner/Experts.h"

#include <algorithm>
#include <cmath>

namespace partition::planner {
namespace {

std::vector<int64_t> divisors(int64_t n) {
  std::vector<int64_t> out;
  for (int64_t d = 1; d * d <= n; ++d)
    if (n % d == 0) {
      out.push_back(d);
      if (d != n / d)
        out.push_back(n / d);
    }
  std::sort(out.begin(), out.end());
  return out;
}

template <typename T>
std::vector<T> either(const std::optional<T> &fixed, std::vector<T> all) {
  if (fixed)
    return {*fixed};
  return all;
}

/// Orders predictions by step time, then by memory per rank.
bool faster(const Prediction &a, const Prediction &b) {
  if (a.stepSeconds != b.stepSeconds)
    return a.stepSeconds < b.stepSeconds;
  return a.memoryPerRank < b.memoryPerRank;
}

/// Counts an unfit plan needing `bytes` per rank in `result`.
void noteUnfit(SearchResult &result, double bytes) {
  if (result.unfit == 0 || bytes < result.leastUnfitMemory)
    result.leastUnfitMemory = bytes;
  ++result.unfit;
}

/// Counts a refused candidate in `result`, keeping the first reason.
void noteRefusal(SearchResult &result, const std::string &refusal) {
  if (result.firstRefusal.empty())
    result.firstRefusal = refusal;
  ++result.refused;
}

/// Enumerates every candidate the fixed choices allow and screens each
/// with the fast (bounding) prediction; the validator is asked later, only
/// of the plans the ranking reaches (see rankExactly).
struct Sweep {
  const ModelShape &model;
  const Cluster &cluster;
  const SearchOptions &options;
  const Fixed &fixed;
  const Validate &validate;
  SearchResult &result;
  /// Whether cp > 1 is tried when plan.json leaves mesh.cp open.
  bool searchContext = false;
  std::vector<Prediction> fitting, unfit;
  std::string defaultPrecision =
      cluster.peakFlopsBf16 > cluster.peakFlopsFp32 ? "bf16" : "fp32";

  /// The context-parallel degrees tried on `rest` devices: the fixed one,
  /// else 1 and, where searched, the powers of two dividing them whose
  /// zigzag cuts the sequence into 2 cp equal chunks.
  std::vector<int64_t> contextDegrees(int64_t rest) const {
    if (fixed.cp)
      return {*fixed.cp};
    std::vector<int64_t> out = {1};
    if (!searchContext)
      return out;
    for (int64_t cp = 2; cp <= rest; cp *= 2)
      if (rest % cp == 0 && model.seqLen % (2 * cp) == 0)
        out.push_back(cp);
    return out;
  }

  /// Every mesh shape dp x cp x tp x pp of the devices.
  void meshes() {
    for (int64_t tp : either(fixed.tp, divisors(options.devices))) {
      if (options.devices % tp != 0)
        continue;
      for (int64_t cp : contextDegrees(options.devices / tp))
        if ((options.devices / tp) % cp == 0)
          pipelines(tp, cp);
    }
  }

  /// Every pipeline depth on the devices tp x cp leave.
  void pipelines(int64_t tp, int64_t cp) {
    int64_t rest = options.devices / tp / cp;
    for (int64_t pp : either(fixed.pp, divisors(rest))) {
      if (rest % pp != 0)
        continue;
      if (pp > model.layers) {
        noteRefusal(result, "pp = " + std::to_string(pp) +
                                " is more than the model's " +
                                std::to_string(model.layers) + " layers");
        continue;
      }
      int64_t dp = rest / pp;
      if (fixed.dp && *fixed.dp != dp)
        continue;
      if (options.globalBatch % dp != 0) {
        noteRefusal(result, "the global batch of " +
                                std::to_string(options.globalBatch) +
                                " sequences is not divisible by dp = " +
                                std::to_string(dp));
        continue;
      }
      microbatching(dp, tp, pp, cp);
    }
  }

  /// Every micro-batch size of one mesh's replica batch.
  void microbatching(int64_t dp, int64_t tp, int64_t pp, int64_t cp) {
    int64_t perReplica = options.globalBatch / dp;
    std::vector<int64_t> sizes;
    for (int64_t b : divisors(perReplica))
      if (b <= fixed.maxMicroBatch)
        sizes.push_back(b);
    for (int64_t microBatch : either(fixed.microBatch, sizes)) {
      if (perReplica % microBatch != 0)
        continue;
      int64_t microbatches = perReplica / microBatch;
      if (fixed.microbatches && *fixed.microbatches != microbatches)
        continue;
      Candidate base;
      base.dp = dp;
      base.tp = tp;
      base.pp = pp;
      base.cp = cp;
      base.microBatch = microBatch;
      base.microbatches = microbatches;
      // Expert parallelism: the degrees the compiler takes (1 or dp).
      for (int64_t ep : either(fixed.ep, expertParallelDegrees(model, dp))) {
        base.ep = ep;
        schedules(base);
      }
    }
  }

  /// Every pipeline schedule and virtual-stage count that suits `base`.
  void schedules(Candidate base) {
    const int64_t pp = base.pp, microbatches = base.microbatches;
    std::vector<std::string> schedules = {"1f1b"};
    if (pp > 1)
      schedules = {"gpipe", "1f1b", "interleaved-1f1b", "zero-bubble"};
    for (const std::string &schedule : either(fixed.schedule, schedules)) {
      // Any chunk count --dist-pipeline accepts (at least one layer per
      // chunk; the split need not be even, it is balanced by cost); the
      // search tries these, a plan may fix any.
      std::vector<int64_t> chunkCounts = {1};
      if (schedule == "interleaved-1f1b")
        chunkCounts = {1, 2, 3, 4, 6, 8};
      for (int64_t v : either(fixed.virtualStages, chunkCounts)) {
        if (v > 1 && (schedule != "interleaved-1f1b" || pp * v > model.layers))
          continue;
        if (fixed.stages && int64_t(fixed.stages->size()) != pp * v)
          continue;
        if (schedule == "interleaved-1f1b" && microbatches % pp != 0)
          continue;
        if (pp > 1 && microbatches < pp)
          continue;
        base.schedule = schedule;
        base.virtualStages = v;
        if (fixed.stages)
          base.stages = *fixed.stages;
        choices(base);
      }
    }
  }

  /// Every sequence-parallel, ZeRO stage and recompute choice for `base`.
  void choices(const Candidate &base) {
    std::vector<bool> sps = {false};
    if (base.tp > 1)
      sps = {false, true};
    for (bool sp : either(fixed.sequenceParallel, sps)) {
      std::vector<int> zeros = {0};
      if (base.dp > 1)
        zeros = {0, 1, 2, 3};
      for (int zero : either(fixed.zeroStage, zeros)) {
        for (const std::string &recompute :
             either(fixed.recompute,
                    {std::string("none"), std::string("selective"),
                     std::string("full")})) {
          Candidate c = base;
          c.sequenceParallel = sp;
          c.zeroStage = zero;
          c.recompute = recompute;
          c.precision = fixed.precision.value_or(defaultPrecision);
          if (fixed.perLayer)
            c.perLayer = *fixed.perLayer;
          contextMethods(c);
        }
      }
    }
  }

  /// Every context-parallel method of `c` (cp > 1): all_gather and ring
  /// (which the plan.json reader refuses until it is compiled, so it is
  /// ranked only under --include-unimplemented), zigzag unless plan.json
  /// asks for none (never faster: the same traffic, the last rank's work).
  void contextMethods(Candidate c) {
    if (c.cp == 1) {
      screen(c);
      return;
    }
    for (const std::string &method :
         either(fixed.cpMethod, {std::string("all_gather"),
                                 std::string("ring")}))
      for (const std::string &balance :
           either(fixed.cpLoadBalance, {std::string("zigzag")})) {
        c.cpMethod = method;
        c.cpLoadBalance = balance;
        screen(c);
      }
  }

  /// The offload tiers a plan that does not fit may try (Fixed::offload).
  std::vector<std::string> offloadTiers() const {
    std::vector<std::string> tiers;
    if (cluster.hostLinkBandwidth > 0 && cluster.hostMemoryBytes > 0 &&
        !cluster.sharedNode)
      tiers.push_back("host");
    if (cluster.hasDisk())
      tiers.push_back("nvme");
    return tiers;
  }

  /// Predicts the bound of `base` and files it as fitting or unfit; with
  /// offload searched, a plan that does not fit is tried with each tier
  /// and the fastest that fits is kept instead (offload only adds time,
  /// so a plan that fits keeps its moments).
  void screen(Candidate base) {
    base.offload = fixed.offload.value_or("none");
    base.offloadParameters = fixed.offloadParameters.value_or("none");
    base.offloadBufferBytes = fixed.offloadBufferBytes;
    base.offloadPath = fixed.offloadPath;
    // Parameter offload needs ZeRO-3's shards (over dp x cp > 1).
    bool sharded = base.zeroStage == 3 && base.dp * base.cp > 1;
    if (base.offloadParameters != "none" && !sharded)
      return;
    Prediction p = predict(model, base, cluster, /*exactPipeline=*/false);
    ++result.evaluated;
    auto keepFaster = [&](const Candidate &c) {
      Prediction q = predict(model, c, cluster, /*exactPipeline=*/false);
      ++result.evaluated;
      if (q.fits && std::isfinite(q.stepSeconds) &&
          (!p.fits || q.stepSeconds < p.stepSeconds))
        p = std::move(q);
    };
    if (!p.fits && std::isfinite(p.stepSeconds) && !fixed.offload) {
      for (const std::string &tier : offloadTiers()) {
        Candidate c = base;
        c.offload = tier;
        keepFaster(c);
      }
    }
    // Still too large under ZeRO-3: the shards in the moments' tier too
    // (ZeRO-Infinity), unless plan.json or --offload none fixed them.
    if (!p.fits && std::isfinite(p.stepSeconds) && sharded &&
        !fixed.offloadParameters) {
      for (const std::string &tier :
           fixed.offload && *fixed.offload != "none"
               ? std::vector<std::string>{*fixed.offload}
           : fixed.offload ? std::vector<std::string>{}
                           : offloadTiers()) {
        Candidate c = base;
        c.offload = tier;
        c.offloadParameters = tier;
        keepFaster(c);
      }
    }
    if (!std::isfinite(p.stepSeconds))
      return;
    if (p.fits)
      fitting.push_back(std::move(p));
    else
      unfit.push_back(std::move(p));
  }
};

/// Asks the validator about `p`: false when it is refused (counted), else
/// true with a soft refusal kept as `notCompilable` (includeUncompilable).
bool accepted(Prediction &p, const SearchOptions &options,
              const Validate &validate, SearchResult &result) {
  bool hard = false;
  std::string refusal = validate(p.plan, hard);
  if (!refusal.empty() && (hard || !options.includeUncompilable)) {
    noteRefusal(result, refusal);
    return false;
  }
  p.notCompilable = refusal;
  return true;
}

/// The plans that do not fit: counted; the least memory among those the
/// validator accepts is found by asking it in order of memory (the "no
/// plan fits" message names a plan the model allows); all are asked when
/// they are kept.
void fileUnfit(const SearchOptions &options, const Validate &validate,
               std::vector<Prediction> &unfit, SearchResult &result) {
  std::stable_sort(unfit.begin(), unfit.end(),
                   [](const Prediction &a, const Prediction &b) {
                     return a.memoryPerRank < b.memoryPerRank;
                   });
  std::vector<Prediction> kept;
  bool found = false;
  for (Prediction &p : unfit) {
    if (found && !options.keepUnfit) {
      noteUnfit(result, p.memoryPerRank);
      continue;
    }
    if (!accepted(p, options, validate, result))
      continue;
    found = true;
    noteUnfit(result, p.memoryPerRank);
    if (options.keepUnfit)
      kept.push_back(std::move(p));
  }
  unfit = std::move(kept);
}

/// Branch and bound over `fitting` (sorted by lower bound): simulates
/// pipelines, asks `memory`, and returns the best `options.top` exactly.
/// `offloadTiers`: the tiers a plan whose compiled memory does not fit may
/// try (empty when plan.json or --offload fixed the field); with
/// `offloadShards` a ZeRO-3 plan tries its shards there too.
std::vector<Prediction>
rankExactly(const ModelShape &model, const Cluster &cluster,
            const SearchOptions &options, const Validate &validate,
            const MemoryOracle &memory,
            const std::vector<std::string> &offloadTiers, bool offloadShards,
            std::vector<Prediction> &fitting, std::vector<Prediction> &unfit,
            SearchResult &result) {
  // Simulate pipelines until the bound exceeds the K-th best exact time
  // (exact >= bound, so nothing later can enter the top K).
  std::vector<Prediction> exact;
  std::vector<double> bestTimes; // sorted exact times, at most `top`
  size_t keep = size_t(std::max<int64_t>(1, options.top));
  // Prefetching: the next few plans that may be compiled, announced as
  // each one is asked for (the oracle starts what it has threads for).
  size_t announced = 0;
  auto announceAfter = [&](size_t index) {
    if (!options.prefetchMemory)
      return;
    constexpr size_t kLookahead = 8;
    announced = std::max(announced, index + 1);
    for (size_t n = 0; announced < fitting.size() && n < kLookahead;
         ++announced) {
      const Prediction &next = fitting[announced];
      if (bestTimes.size() >= keep && next.stepSeconds > bestTimes.back())
        break;
      if (!next.notCompilable.empty())
        continue;
      options.prefetchMemory(next.plan);
      ++n;
    }
  };
  for (size_t index = 0; index < fitting.size(); ++index) {
    Prediction &bound = fitting[index];
    if (bestTimes.size() >= keep && bound.stepSeconds > bestTimes.back())
      break;
    // The plan.json reader is asked here, of the plans the ranking
    // reaches, rather than of every candidate: most never could rank, and
    // asking it is most of a search's time.
    if (!accepted(bound, options, validate, result))
      continue;
    std::string refusal = bound.notCompilable;
    Prediction p = bound.plan.pp > 1 ? predict(model, bound.plan, cluster)
                                     : bound;
    if (!std::isfinite(p.stepSeconds))
      continue;
    // Slower than the K-th best exact time: it cannot enter the top K, so
    // its memory plan is not compiled (each compile costs seconds).
    if (bestTimes.size() >= keep && p.stepSeconds > bestTimes.back())
      continue;
    p.notCompilable = refusal;
    if (memory && refusal.empty()) {
      announceAfter(index);
      if (std::optional<double> bytes = memory(p.plan)) {
        p.memoryPerRank = *bytes;
        p.memorySource = "compiled";
        double room = deviceShare(cluster, p.plan.devices()).memoryBytes;
        p.fits = *bytes <= room && p.tierFits;
        // The closed form fitted, the compiler's plan does not: with the
        // moments in a tier it may (the first tier that fits, in the
        // order offloadTiers gives: host before nvme), and a ZeRO-3 plan
        // with its shards in that tier too.
        bool hard = false;
        std::vector<Candidate> alternatives;
        if (p.plan.offload == "none" && p.plan.offloadParameters == "none") {
          for (const std::string &tier : offloadTiers) {
            alternatives.push_back(p.plan);
            alternatives.back().offload = tier;
          }
          if (offloadShards && p.plan.zeroStage == 3 &&
              p.plan.dp * p.plan.cp > 1)
            for (const std::string &tier : offloadTiers) {
              alternatives.push_back(p.plan);
              alternatives.back().offload = tier;
              alternatives.back().offloadParameters = tier;
            }
        }
        for (size_t t = 0; !p.fits && t < alternatives.size(); ++t) {
          const Candidate &offloaded = alternatives[t];
          Prediction q = predict(model, offloaded, cluster);
          std::optional<double> tierBytes;
          if (std::isfinite(q.stepSeconds) && q.tierFits &&
              validate(offloaded, hard).empty())
            tierBytes = memory(offloaded);
          if (tierBytes && *tierBytes <= room) {
            q.memoryPerRank = *tierBytes;
            q.memorySource = "compiled";
            q.fits = true;
            p = std::move(q);
          }
        }
        if (!p.fits) {
          noteUnfit(result, *bytes);
          if (options.keepUnfit)
            unfit.push_back(p);
          continue;
        }
      }
    }
    bestTimes.insert(std::upper_bound(bestTimes.begin(), bestTimes.end(),
                                      p.stepSeconds),
                     p.stepSeconds);
    if (bestTimes.size() > keep)
      bestTimes.pop_back();
    exact.push_back(std::move(p));
  }
  std::stable_sort(exact.begin(), exact.end(), faster);
  if (exact.size() > keep)
    exact.resize(keep);
  return exact;
}

} // namespace

namespace {

SearchResult searchOnce(const ModelShape &model, const Cluster &cluster,
                        const SearchOptions &options, const Fixed &fixed,
                        const Validate &validate, const MemoryOracle &memory,
                        bool searchContext) {
  SearchResult result;
  Sweep sweep{model, cluster, options, fixed, validate, result};
  sweep.searchContext = searchContext;
  sweep.meshes();
  // Branch and bound by lower bound; see rankExactly.
  std::stable_sort(sweep.fitting.begin(), sweep.fitting.end(), faster);
  fileUnfit(options, validate, sweep.unfit, result);
  std::vector<Prediction> exact = rankExactly(
      model, cluster, options, validate, memory,
      fixed.offload ? std::vector<std::string>() : sweep.offloadTiers(),
      !fixed.offloadParameters, sweep.fitting, sweep.unfit, result);
  std::stable_sort(sweep.unfit.begin(), sweep.unfit.end(), faster);
  result.ranked = std::move(exact);
  for (Prediction &p : sweep.unfit)
    result.ranked.push_back(std::move(p));
  return result;
}

} // namespace

SearchResult search(const ModelShape &model, const Cluster &cluster,
                    const SearchOptions &options, const Fixed &fixed,
                    const Validate &validate, const MemoryOracle &memory) {
  // Context parallelism is tried where it can pay (long sequences), and
  // elsewhere only when nothing fits without it: short-sequence searches
  // keep their space, and their answers.
  bool wide = !fixed.cp && searchContextParallel(model);
  SearchResult result =
      searchOnce(model, cluster, options, fixed, validate, memory, wide);
  bool anyFits = !result.ranked.empty() && result.ranked.front().fits;
  if (anyFits || wide || fixed.cp)
    return result;
  SearchResult withContext =
      searchOnce(model, cluster, options, fixed, validate, memory, true);
  bool contextFits =
      !withContext.ranked.empty() && withContext.ranked.front().fits;
  return contextFits ? withContext : result;
}

} // namespace partition::planner
