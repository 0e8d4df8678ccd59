//===- Goodput.cpp - training throughput under GPU failures ---------------===//

#include "planner/Goodput.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <vector>

namespace partition::planner {

const char *policyName(FailurePolicy policy) {
  switch (policy) {
  case FailurePolicy::WaitRestart:
    return "wait-restart";
  case FailurePolicy::DropReplica:
    return "drop-replica";
  case FailurePolicy::Ntp:
    return "ntp";
  case FailurePolicy::NtpBoost:
    return "ntp-boost";
  }
  return "?";
}

DegradedSpeed proportionalSpeed(int64_t tpDomain) {
  return [tpDomain](int64_t healthy) {
    return double(healthy) / double(tpDomain);
  };
}

double steadyStateFailedFraction(double failuresPerGpuHour,
                                 double repairHours) {
  double x = failuresPerGpuHour * repairHours;
  return x / (1 + x);
}

double binomialCdf(int64_t k, int64_t n, double p) {
  if (k < 0)
    return 0;
  if (k >= n || p <= 0)
    return 1;
  if (p >= 1)
    return 0;
  // Summed in log space: (1 - p)^n underflows at n p of a few hundred,
  // where the sum is still well defined.
  double logP = std::log(p), logQ = std::log1p(-p), sum = 0;
  for (int64_t i = 0; i <= k; ++i)
    sum += std::exp(std::lgamma(double(n) + 1) - std::lgamma(double(i) + 1) -
                    std::lgamma(double(n - i) + 1) + double(i) * logP +
                    double(n - i) * logQ);
  return std::min(1.0, sum);
}

namespace {

/// E[ speed of the replica's slowest domain ] over `pp` domains of T GPUs
/// each with Binomial(T, f) failed: the slowest is the one with the most
/// failures m, P(max <= m) = F(m)^pp.
double expectedReplicaSpeed(int64_t tpDomain, int64_t pp, double f,
                            const std::function<double(int64_t)> &speed) {
  double expected = 0, below = 0;
  for (int64_t m = 0; m <= tpDomain; ++m) {
    double atMost = std::pow(binomialCdf(m, tpDomain, f), double(pp));
    // A healthy replica is the reference (1); one with no GPU left is out.
    double s = m == 0          ? 1.0
               : m == tpDomain ? 0.0
                               : std::clamp(speed(tpDomain - m), 0.0, 1.0);
    expected += s * (atMost - below);
    below = atMost;
  }
  return expected;
}

} // namespace

GoodputPoint goodput(const FailureModel &model, int64_t tpDomain,
                     double failedFraction, const DegradedSpeed &speed) {
  assert(tpDomain >= 1 && model.pp >= 1 &&
         model.gpus >= tpDomain * model.pp && failedFraction >= 0 &&
         failedFraction < 1 && model.boost >= 1);
  DegradedSpeed degraded = speed ? speed : proportionalSpeed(tpDomain);
  double f = failedFraction;
  GoodputPoint point;
  point.failedFraction = f;
  point.tpDomain = tpDomain;
  int64_t replicaGpus = tpDomain * model.pp;
  point.replicas = model.gpus / replicaGpus;
  int64_t used = point.replicas * replicaGpus;
  point.spareGpus = model.gpus - used + model.standbyGpus;

  auto index = [](FailurePolicy p) { return size_t(p); };
  // Wait and restart: the job runs while its failed GPUs do not outnumber
  // the idle ones that can stand in for them.
  point.capacity[index(FailurePolicy::WaitRestart)] =
      binomialCdf(point.spareGpus, model.gpus + model.standbyGpus, f);
  // Drop: a replica runs only with all its GPUs.
  point.capacity[index(FailurePolicy::DropReplica)] =
      std::pow(1 - f, double(replicaGpus));
  // NTP: a degraded replica runs at its slowest domain's speed, its batch
  // share lowered to match, so the step time stays the healthy one's.
  point.capacity[index(FailurePolicy::Ntp)] =
      expectedReplicaSpeed(tpDomain, model.pp, f, degraded);
  point.capacity[index(FailurePolicy::NtpBoost)] = expectedReplicaSpeed(
      tpDomain, model.pp, f, [&](int64_t healthy) {
        return healthy == tpDomain ? 1.0
                                   : std::min(1.0, model.boost *
                                                       degraded(healthy));
      });

  // Every failure of a GPU in use stops the synchronous step: restart
  // from the last checkpoint (Young's first-order waste). The rate is per
  // GPU slot the job uses (a repaired or spare GPU fills the slot again),
  // so it does not depend on f: f moves capacity, the rate moves restarts.
  double rate = model.failuresPerGpuHour * double(used);
  point.jobFailuresPerHour = rate;
  double tau = model.checkpointHours;
  if (tau <= 0)
    tau = rate > 0 ? std::sqrt(2 * model.checkpointCostHours / rate)
                   : INFINITY;
  point.checkpointHours = tau;
  // A free checkpoint (C = 0) makes Young's interval 0: nothing is lost.
  double checkpointing =
      std::isinf(tau) || tau == 0 ? 0 : model.checkpointCostHours / tau;
  double lostWork = rate > 0 && !std::isinf(tau) ? rate * tau / 2 : 0;
  for (int p = 0; p < kFailurePolicies; ++p) {
    // Dropping or shrinking a replica reconfigures the job twice per
    // failure: when the GPU fails and when it returns (at a checkpoint,
    // so without lost work).
    double restarts = FailurePolicy(p) == FailurePolicy::WaitRestart ? 1 : 2;
    point.overhead[p] = std::min(
        1.0, checkpointing + lostWork + rate * restarts * model.restartHours);
    point.loss[p] = 1 - point.capacity[p] * (1 - point.overhead[p]);
  }
  return point;
}

} // namespace partition::planner
