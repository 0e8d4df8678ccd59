//===- GoodputReport.cpp - partition-plan --goodput -----------------------===//

#include "tools/partition-plan/GoodputReport.h"

#include "llvm/ADT/Twine.h"
#include "llvm/Support/Format.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <map>
#include <memory>

namespace partition::planner {

std::string goodputOptionsOf(const GoodputFlags &flags,
                             GoodputOptions &options) {
  FailureModel &fm = options.failures;
  fm.gpus = flags.gpus;
  fm.pp = flags.pp;
  fm.failuresPerGpuHour = flags.failureRate;
  fm.repairHours = flags.repairHours;
  fm.checkpointHours = flags.checkpointMinutes / 60;
  fm.checkpointCostHours = flags.checkpointCostSeconds / 3600;
  fm.restartHours = flags.restartSeconds / 3600;
  fm.boost = flags.boost;
  fm.standbyGpus = flags.standbyGpus;
  std::string problem;
  auto number = [](double value) {
    char text[32];
    std::snprintf(text, sizeof(text), "%g", value);
    return std::string(text);
  };
  auto check = [&](bool ok, const llvm::Twine &message) {
    if (!ok && problem.empty())
      problem = message.str();
  };
  auto nonNegative = [&](double value, const char *flag) {
    check(value >= 0 && !std::isinf(value),
          llvm::Twine("--") + flag + " must be a finite number >= 0, got " +
              number(value));
  };
  nonNegative(flags.failureRate, "failure-rate");
  nonNegative(flags.repairHours, "repair-hours");
  nonNegative(flags.checkpointMinutes, "checkpoint-min");
  nonNegative(flags.checkpointCostSeconds, "checkpoint-cost-s");
  nonNegative(flags.restartSeconds, "restart-s");
  check(flags.boost >= 1 && !std::isinf(flags.boost),
        "--boost must be at least 1 (a speed factor), got " +
            number(flags.boost));
  check(flags.standbyGpus >= 0, "--standby-gpus must be >= 0, got " +
                                    llvm::Twine(flags.standbyGpus));
  check(flags.pp >= 1, "--pp must be at least 1, got " +
                           llvm::Twine(flags.pp));
  if (!flags.tpDomains.empty())
    options.tpDomains = flags.tpDomains;
  for (int64_t t : options.tpDomains) {
    check(t >= 1, "--tp-domains must be positive, got " + llvm::Twine(t));
    check(t < 1 || flags.pp < 1 || t * flags.pp <= flags.gpus,
          "--gpus " + llvm::Twine(flags.gpus) +
              " is smaller than one data-parallel replica (tp domain " +
              llvm::Twine(t) + " x pp " + llvm::Twine(flags.pp) +
              "); give at least " + llvm::Twine(t * flags.pp) + " GPUs");
  }
  if (!flags.failedFractions.empty())
    options.failedFractions = flags.failedFractions;
  for (double f : options.failedFractions)
    check(f >= 0 && f < 1,
          "--failed-fractions must lie in [0, 1), got " + number(f));
  return problem;
}

namespace {

Prediction predictReplica(const ModelShape &model, const Cluster &cluster,
                          int64_t domain, int64_t tp) {
  Cluster c = cluster;
  c.devicesPerNode = int(domain);
  Candidate plan;
  plan.tp = tp;
  plan.microBatch = 1;
  plan.precision = c.peakFlopsBf16 > c.peakFlopsFp32 ? "bf16" : "fp32";
  return predict(model, plan, c);
}

} // namespace

std::string checkHealthyReplicaFits(const ModelShape &model,
                                    const Cluster &cluster, int64_t domain) {
  Prediction p = predictReplica(model, cluster, domain, domain);
  if (p.fits)
    return "";
  char text[256];
  std::snprintf(text, sizeof(text),
                "a replica at tp %lld needs %.1f GiB per rank, %s has %.1f "
                "GiB: no healthy speed to compare with; give a larger "
                "--tp-domains or a smaller model",
                (long long)domain, p.memoryPerRank / (1 << 30),
                cluster.name.c_str(), cluster.memoryBytes / (1 << 30));
  return text;
}

DegradedSpeed costModelSpeed(const ModelShape &model, const Cluster &cluster,
                             int64_t domain) {
  auto cache = std::make_shared<std::map<int64_t, double>>();
  auto step = [model, cluster, domain, cache](int64_t tp) {
    auto it = cache->find(tp);
    if (it != cache->end())
      return it->second;
    Prediction p = predictReplica(model, cluster, domain, tp);
    double seconds = p.fits ? p.stepSeconds : INFINITY;
    (*cache)[tp] = seconds;
    return seconds;
  };
  return [step, domain](int64_t healthy) {
    double reduced = step(healthy);
    return std::isinf(reduced) ? 0.0 : step(domain) / reduced;
  };
}

namespace {

std::string percent(double x) {
  char text[32];
  std::snprintf(text, sizeof(text), x < 0.001 ? "%.4f%%" : "%.3f%%",
                100 * x);
  return text;
}

} // namespace

void printGoodput(const Cluster &cluster,
                  const std::optional<ModelShape> &model,
                  const std::string &modelName, const GoodputOptions &options,
                  llvm::raw_ostream &os) {
  const FailureModel &fm = options.failures;
  double steady =
      steadyStateFailedFraction(fm.failuresPerGpuHour, fm.repairHours);
  std::vector<double> fractions = options.failedFractions;
  fractions.push_back(steady);
  std::sort(fractions.begin(), fractions.end());
  fractions.erase(std::unique(fractions.begin(), fractions.end()),
                  fractions.end());

  std::vector<DegradedSpeed> speeds;
  for (int64_t t : options.tpDomains)
    speeds.push_back(model ? costModelSpeed(*model, cluster, t)
                           : proportionalSpeed(t));
  std::vector<std::vector<GoodputPoint>> points(options.tpDomains.size());
  for (size_t d = 0; d < options.tpDomains.size(); ++d)
    for (double f : fractions)
      points[d].push_back(goodput(fm, options.tpDomains[d], f, speeds[d]));

  std::string speedSource =
      model ? "cost model of " + modelName + " on " + cluster.name
            : std::string("proportional to working GPUs (the paper's)");

  if (options.json) {
    nlohmann::ordered_json out;
    out["cluster"] = cluster.name;
    out["gpus"] = fm.gpus;
    out["pp"] = fm.pp;
    out["degraded_speed"] = model ? "cost-model" : "proportional";
    out["failures_per_gpu_hour"] = fm.failuresPerGpuHour;
    out["repair_hours"] = fm.repairHours;
    out["steady_state_failed_fraction"] = steady;
    out["checkpoint_cost_s"] = fm.checkpointCostHours * 3600;
    out["restart_s"] = fm.restartHours * 3600;
    out["boost"] = fm.boost;
    out["standby_gpus"] = fm.standbyGpus;
    nlohmann::ordered_json domains = nlohmann::ordered_json::array();
    for (size_t d = 0; d < options.tpDomains.size(); ++d) {
      const GoodputPoint &first = points[d].front();
      nlohmann::ordered_json domain;
      domain["tp"] = options.tpDomains[d];
      domain["replicas"] = first.replicas;
      domain["spare_gpus"] = first.spareGpus;
      domain["job_failures_per_hour"] = first.jobFailuresPerHour;
      domain["checkpoint_interval_s"] =
          std::isinf(first.checkpointHours)
              ? nlohmann::ordered_json(nullptr)
              : nlohmann::ordered_json(first.checkpointHours * 3600);
      if (model) {
        nlohmann::ordered_json s = nlohmann::ordered_json::array();
        for (int64_t h = 1; h <= options.tpDomains[d]; ++h)
          s.push_back(speeds[d](h));
        domain["degraded_speed_by_healthy_gpus"] = s;
      }
      nlohmann::ordered_json rows = nlohmann::ordered_json::array();
      for (const GoodputPoint &p : points[d]) {
        nlohmann::ordered_json row;
        row["failed_fraction"] = p.failedFraction;
        for (int i = 0; i < kFailurePolicies; ++i)
          row[policyName(FailurePolicy(i))] = {{"loss", p.loss[i]},
                                               {"capacity", p.capacity[i]},
                                               {"overhead", p.overhead[i]}};
        rows.push_back(row);
      }
      domain["rows"] = rows;
      domains.push_back(domain);
    }
    out["tp_domains"] = domains;
    os << out.dump(2) << "\n";
    return;
  }

  os << "partition-plan: goodput of " << fm.gpus << " x " << cluster.name
     << " GPUs (pp " << fm.pp << "), degraded replica speed: " << speedSource
     << "\n";
  os << llvm::format("failures %.3g per GPU-hour, repair %.3g h (steady "
                     "state: %s failed), checkpoint cost %.3g s, restart "
                     "%.3g s, boost %.3g\n",
                     fm.failuresPerGpuHour, fm.repairHours,
                     percent(steady).c_str(), fm.checkpointCostHours * 3600,
                     fm.restartHours * 3600, fm.boost);
  for (size_t d = 0; d < options.tpDomains.size(); ++d) {
    const GoodputPoint &p = points[d].front();
    os << "tp " << options.tpDomains[d] << ": " << p.replicas
       << " replicas, " << p.spareGpus << " spare GPUs, "
       << llvm::format("%.3g", p.jobFailuresPerHour)
       << " failures/h, "
       << (std::isinf(p.checkpointHours) ? std::string("no checkpoints")
           : p.checkpointHours == 0
               ? std::string("free checkpoints")
               : "checkpoint every " +
                     std::to_string(int(std::lround(p.checkpointHours * 60))) +
                     " min")
       << "; checkpoints and restarts take "
       << percent(p.overhead[size_t(FailurePolicy::WaitRestart)])
       << " (wait-restart), "
       << percent(p.overhead[size_t(FailurePolicy::Ntp)])
       << " (the others)\n";
  }
  os << "throughput loss against a failure-free run (* the steady state):\n";
  os << llvm::format("%-11s", "failed");
  for (int64_t t : options.tpDomains)
    for (int i = 0; i < kFailurePolicies; ++i)
      os << llvm::format(" %13s",
                         ("tp" + std::to_string(t) + " " +
                          policyName(FailurePolicy(i)))
                             .c_str());
  os << "\n";
  for (size_t r = 0; r < fractions.size(); ++r) {
    os << llvm::format("%-11s", (percent(fractions[r]) +
                                 (fractions[r] == steady ? "*" : ""))
                                    .c_str());
    for (size_t d = 0; d < options.tpDomains.size(); ++d)
      for (int i = 0; i < kFailurePolicies; ++i)
        os << llvm::format(" %13s", percent(points[d][r].loss[i]).c_str());
    os << "\n";
  }
}

} // namespace partition::planner
