//===- Goodput.h - training throughput under GPU failures -------*- C++ -*-===//
//
// What GPU failures cost a long data-parallel x tensor-parallel run, under
// four policies (NTP: Arfeen et al., "Nonuniform-Tensor-Parallelism:
// Mitigating GPU failure impact for Scaled-up LLM Training", arXiv
// 2504.06095):
//
//  - WaitRestart: the job needs all its GPUs; a failure is replaced from
//    the idle GPUs left over (N mod replica size), else the job waits for
//    the repair, then restarts from the last checkpoint;
//  - DropReplica: a data-parallel replica with a failed GPU sits out until
//    it is repaired (dp shrinks);
//  - Ntp: a replica whose tp domain lost k of its T GPUs runs at tp = T - k
//    with its batch share lowered to its speed;
//  - NtpBoost: the same with that replica's power raised (its speed times
//    a factor, never above a healthy replica's).
//
// An exact expected-value model, not a Monte Carlo simulation: in steady
// state each GPU is failed with probability f, independently, so the
// number of failed GPUs in a tp domain is binomial and the expected
// throughput of every policy is a finite sum. That is deterministic,
// instant at 100K GPUs, and its closed forms are testable exactly; a
// seeded simulation would add sampling noise of the size of the small
// losses it is meant to resolve. On top, every failure interrupts the
// synchronous job, which restarts from its last checkpoint (Young 1974,
// first order): the wall-clock fraction lost is C/tau + L (tau/2 + S),
// L failures per hour, tau the checkpoint interval, C its cost, S the
// restart cost (twice for the policies that also reconfigure when the
// repaired GPU returns).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_GOODPUT_H
#define PARTITION_PLANNER_GOODPUT_H

#include <array>
#include <cstdint>
#include <functional>

namespace partition::planner {

enum class FailurePolicy { WaitRestart, DropReplica, Ntp, NtpBoost };
constexpr int kFailurePolicies = 4;
const char *policyName(FailurePolicy policy);

struct FailureModel {
  /// Devices of the job; a data-parallel replica is tpDomain x pp of them.
  int64_t gpus = 0;
  int64_t pp = 1;
  /// Failures per GPU-hour. Default: Llama 3 (Dubey et al. 2024, sec.
  /// 3.3.4): 419 unexpected interruptions in 54 days on 16,384 H100s,
  /// 419 / (54 * 24 * 16384) = 1.97e-5 per GPU-hour.
  double failuresPerGpuHour = 1.97e-5;
  /// Hours from a failure to its GPU back in service. Default 48 h, an
  /// assumption (diagnose, swap a tray, burn-in): with the rate above it
  /// puts f = 0.09% of GPUs in a failed state, the paper's headline 0.1%.
  double repairHours = 48;
  /// Hours of training between checkpoints; 0 picks Young's optimum
  /// sqrt(2 C / L) for the job's failure rate L (none without failures).
  double checkpointHours = 0;
  /// Hours a checkpoint stalls training. Default 1 minute: first
  /// principles, a 405B model's bf16 weights and fp32 AdamW state (about
  /// 6 TB) at about 100 GB/s to a parallel file system.
  double checkpointCostHours = 1.0 / 60;
  /// Hours to restart the job (relaunch, communicator set-up, checkpoint
  /// load). Default 5 minutes: Llama 3 kept more than 90% effective
  /// training time at 0.32 interruptions per hour (16K GPUs), so one
  /// interruption cost at most about 19 minutes in all; 5 minutes of
  /// restart plus half of Young's 19-minute interval fits that.
  double restartHours = 5.0 / 60;
  /// Idle GPUs on standby for WaitRestart, beyond the job's leftover
  /// (gpus mod replica size). Default 0.
  int64_t standbyGpus = 0;
  /// NtpBoost: the degraded replica's speed factor (>= 1). Default 1.15:
  /// an assumption, enough for tp 8 with one failure (8/7 = 1.143) and
  /// for tp 72 with up to 9 (72/63); the paper's rack design raises the
  /// power of the degraded domain, a figure we could not read from it.
  double boost = 1.15;
};

/// Relative throughput of a replica whose tp domain has `healthy` of its
/// T GPUs (1 at healthy == T; 0 where it cannot run). The paper's:
/// healthy / T ("throughput equal to the percentage of still-functional
/// GPUs").
using DegradedSpeed = std::function<double(int64_t healthy)>;
DegradedSpeed proportionalSpeed(int64_t tpDomain);

/// Steady-state fraction of GPUs in a failed state: rate * repair /
/// (1 + rate * repair) (alternating renewal of up and repair times).
double steadyStateFailedFraction(double failuresPerGpuHour,
                                 double repairHours);

struct GoodputPoint {
  double failedFraction = 0;
  int64_t tpDomain = 0, replicas = 0, spareGpus = 0;
  /// Failures per hour of the job and the checkpoint interval used.
  double jobFailuresPerHour = 0, checkpointHours = 0;
  /// Per policy: the expected fraction of the failure-free run's
  /// throughput the GPUs deliver (replicas running, at their speed), the
  /// wall-clock fraction checkpoints and restarts take, and the loss:
  /// 1 - capacity * (1 - overhead).
  std::array<double, kFailurePolicies> capacity{}, overhead{}, loss{};
};

/// The expected throughput loss of each policy against the same job
/// without failures (and so without checkpoints), at a failed fraction
/// `failedFraction` of the GPUs, with tp domains of `tpDomain` GPUs.
/// `speed` gives a degraded replica's relative speed (proportionalSpeed
/// when none). Requires gpus >= tpDomain * pp, 0 <= failedFraction < 1.
GoodputPoint goodput(const FailureModel &model, int64_t tpDomain,
                     double failedFraction, const DegradedSpeed &speed = {});

/// P(X <= k) for X ~ Binomial(n, p), exact in log space (n up to 1e9).
double binomialCdf(int64_t k, int64_t n, double p);

} // namespace partition::planner

#endif // PARTITION_PLANNER_GOODPUT_H
