//===- GoodputReport.h - partition-plan --goodput ---------------*- C++ -*-===//
//
// The goodput table: throughput loss under GPU failures per policy
// (planner/Goodput.h) against the fraction of failed GPUs, for tp domains
// of 8 (DGX) and 72 (NVL72). A degraded replica's speed is the paper's
// (proportional to its working GPUs) without a model, else the cost
// model's step time at the reduced tp.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_TOOLS_PARTITION_PLAN_GOODPUTREPORT_H
#define PARTITION_TOOLS_PARTITION_PLAN_GOODPUTREPORT_H

#include "planner/Cluster.h"
#include "planner/CostModel.h"
#include "planner/Goodput.h"

#include "llvm/Support/raw_ostream.h"

#include <optional>
#include <string>
#include <vector>

namespace partition::planner {

struct GoodputOptions {
  FailureModel failures;
  std::vector<int64_t> tpDomains{8, 72};
  std::vector<double> failedFractions{0.0001, 0.0005, 0.001, 0.002,
                                      0.005,  0.01,   0.02};
  bool json = false;
};

/// The relative speed of a replica at tp = healthy against tp = domain:
/// the cost model's step time of one micro-batch (1 sequence) on
/// `cluster` with its NVLink domain set to `domain` GPUs; 0 where the
/// reduced replica does not fit in memory.
/// The --goodput flags as given (minutes and seconds where the flags say
/// so); empty lists keep GoodputOptions' defaults.
struct GoodputFlags {
  int64_t gpus = 0, pp = 1, standbyGpus = 0;
  double failureRate = 0, repairHours = 0, checkpointMinutes = 0,
         checkpointCostSeconds = 0, restartSeconds = 0, boost = 1;
  std::vector<int64_t> tpDomains;
  std::vector<double> failedFractions;
};

/// Fills `options` from `flags`; returns the first bad value's one line,
/// naming its flag, or "".
std::string goodputOptionsOf(const GoodputFlags &flags,
                             GoodputOptions &options);

DegradedSpeed costModelSpeed(const ModelShape &model, const Cluster &cluster,
                             int64_t domain);

/// "" when a healthy replica (tp = domain, one sequence per micro-batch)
/// fits in memory, else the one-line reason: the reference speed.
std::string checkHealthyReplicaFits(const ModelShape &model,
                                    const Cluster &cluster, int64_t domain);

/// Prints the table (or JSON) to `os`. `modelName` is empty without a
/// model (the paper's proportional speed).
void printGoodput(const Cluster &cluster, const std::optional<ModelShape> &model,
                  const std::string &modelName, const GoodputOptions &options,
                  llvm::raw_ostream &os);

} // namespace partition::planner

#endif // PARTITION_TOOLS_PARTITION_PLAN_GOODPUTREPORT_H
