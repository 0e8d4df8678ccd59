//===- LayerCost.h - seconds of one layer's work on one rank ----*- C++ -*-===//
//
// The cost model's kernels: a GEMM's time from the cluster's tiles and
// bandwidth, a memory-bound kernel's, and from them one transformer layer's
// forward, backward and recomputation (and the embedding's and the LM
// head's) for one micro-batch on one rank of a plan. CostModel.cpp builds
// the step from these.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_LAYERCOST_H
#define PARTITION_PLANNER_LAYERCOST_H

#include "planner/CostModel.h"

#include <string>

namespace partition::planner {

/// Time of one (batched) GEMM C[M,N] += A[M,K] B[K,N] (LayerCost.cpp has
/// the model).
double gemmTime(double M, double N, double K, double batch, double elemBytes,
                const Cluster &c, const std::string &precision);

/// Memory-bound kernels: `bytes` moved by `kernels` launches.
double streamTime(double bytes, double kernels, const Cluster &c);

/// The parts of one transformer layer's work for one micro-batch on one
/// rank (seconds). With context parallelism the rank holds a cp-th of
/// each sequence's tokens and the slowest rank's share of causal
/// attention.
struct LayerCost {
  double forwardCompute = 0, forwardComm = 0;
  double backwardInputCompute = 0, backwardComm = 0;
  double backwardWeight = 0;
  double recompute = 0, recomputeComm = 0;
  /// Context parallelism's exposed K/V traffic (ContextParallel.h).
  double forwardContext = 0, backwardContext = 0, recomputeContext = 0;
  /// Expert parallelism's all-to-alls (Experts.h), for the mean layer.
  double forwardExpert = 0, backwardExpert = 0, recomputeExpert = 0;
  /// The rank's attention kernels alone (forward, backward), for reports.
  double attentionForward = 0, attentionBackward = 0;
};

LayerCost layerCost(const ModelShape &m, const Candidate &p, const Cluster &c);

/// The embedding (first stage) and the LM head with its loss (last stage)
/// per micro-batch: forward, backward-input and weight-gradient seconds.
struct EndCost {
  double forward = 0, backward = 0, weight = 0, comm = 0;
};

EndCost headCost(const ModelShape &m, const Candidate &p, const Cluster &c);
EndCost embeddingCost(const ModelShape &m, const Candidate &p,
                      const Cluster &c);

} // namespace partition::planner

#endif // PARTITION_PLANNER_LAYERCOST_H
