//===- GoodputTest.cpp - the failure model's closed forms -----------------===//

#include "planner/Goodput.h"

#include <gtest/gtest.h>

#include <cmath>

using namespace partition::planner;

namespace {

constexpr size_t kWait = size_t(FailurePolicy::WaitRestart),
                 kDrop = size_t(FailurePolicy::DropReplica),
                 kNtp = size_t(FailurePolicy::Ntp),
                 kBoost = size_t(FailurePolicy::NtpBoost);

FailureModel paperJob() {
  FailureModel m;
  m.gpus = 32768;
  return m;
}

TEST(Goodput, NoFailuresLoseNothing) {
  FailureModel m = paperJob();
  m.failuresPerGpuHour = 0;
  for (int64_t tp : {8, 72}) {
    GoodputPoint p = goodput(m, tp, 0);
    for (int i = 0; i < kFailurePolicies; ++i)
      EXPECT_EQ(p.loss[i], 0) << policyName(FailurePolicy(i));
    EXPECT_TRUE(std::isinf(p.checkpointHours)); // Young: no checkpoints
  }
}

TEST(Goodput, InstantRepairIsTheCheckpointRestartFormula) {
  // Repair time 0: no GPU is ever down, and waiting for a spare costs
  // only the restart: C / tau + L (tau / 2 + S).
  FailureModel m = paperJob();
  m.repairHours = 0;
  m.checkpointHours = 0.5;
  double f = steadyStateFailedFraction(m.failuresPerGpuHour, m.repairHours);
  ASSERT_EQ(f, 0);
  GoodputPoint p = goodput(m, 8, f);
  double rate = m.failuresPerGpuHour * 32768;
  double expected = m.checkpointCostHours / 0.5 +
                    rate * (0.5 / 2 + m.restartHours);
  EXPECT_NEAR(p.loss[kWait], expected, 1e-12);
  EXPECT_DOUBLE_EQ(p.jobFailuresPerHour, rate);
  for (int i = 1; i < kFailurePolicies; ++i) // they also reconfigure on return
    EXPECT_NEAR(p.loss[i], expected + rate * m.restartHours, 1e-12);
  // Young's optimum is the interval that minimises that waste.
  m.checkpointHours = 0;
  GoodputPoint young = goodput(m, 8, 0);
  EXPECT_NEAR(young.checkpointHours,
              std::sqrt(2 * m.checkpointCostHours / rate), 1e-12);
  for (double tau : {0.5 * young.checkpointHours, 2 * young.checkpointHours}) {
    m.checkpointHours = tau;
    EXPECT_GT(goodput(m, 8, 0).loss[kWait], young.loss[kWait]);
  }
}

TEST(Goodput, ClosedFormCapacities) {
  FailureModel m = paperJob();
  m.failuresPerGpuHour = 0; // capacity alone
  double f = 0.001;
  GoodputPoint p = goodput(m, 72, f);
  // 455 replicas of 72 use 32760 GPUs: 8 stand by for policy (a).
  EXPECT_EQ(p.replicas, 455);
  EXPECT_EQ(p.spareGpus, 8);
  EXPECT_NEAR(p.loss[kDrop], 1 - std::pow(1 - f, 72), 1e-12);
  // The paper's NTP: a replica delivers its share of working GPUs, so
  // the job delivers exactly the working fraction.
  EXPECT_NEAR(p.loss[kNtp], f, 1e-12);
  // Waiting: the job runs only while at most 8 of 32768 GPUs are down;
  // with 32.8 down on average that is almost never.
  EXPECT_NEAR(p.capacity[kWait], binomialCdf(8, 32768, f), 1e-15);
  EXPECT_LT(p.capacity[kWait], 1e-6);
  // 40 GPUs on standby cover the mean of 32.8 down most of the time.
  m.standbyGpus = 40;
  GoodputPoint standby = goodput(m, 72, f);
  EXPECT_EQ(standby.spareGpus, 48);
  EXPECT_NEAR(standby.capacity[kWait], binomialCdf(48, 32768 + 40, f), 1e-15);
  EXPECT_GT(standby.capacity[kWait], 0.99);
  m.standbyGpus = 0;
  // A boost of T / (T - 1) makes a replica with one failure keep up;
  // those with more run at boost x their share.
  m.boost = 72.0 / 71;
  GoodputPoint boosted = goodput(m, 72, f);
  double expected = 0;
  for (int k = 0; k <= 72; ++k) {
    double pmf = binomialCdf(k, 72, f) - binomialCdf(k - 1, 72, f);
    expected += pmf * std::min(1.0, k == 0 ? 1 : m.boost * (72 - k) / 72);
  }
  EXPECT_NEAR(boosted.capacity[kBoost], expected, 1e-12);
  EXPECT_GT(boosted.capacity[kBoost], p.capacity[kNtp]);
}

TEST(Goodput, PipelineReplicaRunsAtItsSlowestDomain) {
  FailureModel m = paperJob();
  m.failuresPerGpuHour = 0;
  m.pp = 2;
  double f = 0.01;
  GoodputPoint p = goodput(m, 8, f);
  EXPECT_NEAR(p.capacity[kDrop], std::pow(1 - f, 16), 1e-12);
  // E[(8 - max(k1, k2)) / 8] by enumerating both domains.
  double expected = 0;
  auto pmf = [&](int k) {
    return std::tgamma(9) / std::tgamma(k + 1) / std::tgamma(9 - k) *
           std::pow(f, k) * std::pow(1 - f, 8 - k);
  };
  for (int a = 0; a <= 8; ++a)
    for (int b = 0; b <= 8; ++b)
      expected += pmf(a) * pmf(b) * (8 - std::max(a, b)) / 8.0;
  EXPECT_NEAR(p.capacity[kNtp], expected, 1e-12);
}

TEST(Goodput, NtpNeverWorseThanDroppingAndBoostNeverWorseThanNtp) {
  FailureModel m = paperJob();
  // Any speed in [0, 1], even one far slower than proportional.
  DegradedSpeed slow = [](int64_t healthy) {
    return healthy == 7 ? 0.5 : 0.0;
  };
  for (double f : {0.0001, 0.001, 0.01, 0.1})
    for (const DegradedSpeed &s : {DegradedSpeed{}, slow}) {
      GoodputPoint p = goodput(m, 8, f, s);
      EXPECT_LE(p.loss[kNtp], p.loss[kDrop]) << f;
      EXPECT_LE(p.loss[kBoost], p.loss[kNtp]) << f;
    }
}

TEST(Goodput, LossGrowsWithFailureRateAndFailedFraction) {
  FailureModel m = paperJob();
  m.gpus = 1152; // 16 NVL72 racks: no policy saturates at these rates
  for (int64_t tp : {8, 72}) {
    GoodputPoint previous = goodput(m, tp, 0.001);
    for (double rate : {3e-5, 1e-4, 3e-4}) {
      m.failuresPerGpuHour = rate;
      GoodputPoint p = goodput(m, tp, 0.001);
      for (int i = 0; i < kFailurePolicies; ++i)
        EXPECT_GT(p.loss[i], previous.loss[i]) << rate;
      previous = p;
    }
    m = paperJob();
    m.gpus = 1152;
    previous = goodput(m, tp, 0);
    for (double f : {0.0005, 0.002, 0.01, 0.05}) {
      GoodputPoint p = goodput(m, tp, f);
      for (int i = 0; i < kFailurePolicies; ++i)
        EXPECT_GE(p.loss[i], previous.loss[i]) << f;
      previous = p;
    }
  }
}

TEST(Goodput, BinomialCdfInLogSpace) {
  EXPECT_NEAR(binomialCdf(0, 10, 0.1), std::pow(0.9, 10), 1e-14);
  EXPECT_NEAR(binomialCdf(1, 10, 0.1),
              std::pow(0.9, 10) + 10 * 0.1 * std::pow(0.9, 9), 1e-14);
  EXPECT_EQ(binomialCdf(10, 10, 0.3), 1);
  // n p = 1000: (1 - p)^n underflows, the sum near the mean does not.
  EXPECT_NEAR(binomialCdf(1000, 100000, 0.01), 0.5, 0.01);
}

} // namespace
