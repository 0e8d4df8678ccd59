//===- PipelineSimulation.h - a plan's pipeline timeline ----------*- C++ -*-===//
//
// The cost model's view of a pipeline: the makespan of the plan's schedule
// simulated with per-chunk costs (scheduling/'s simulator, memoized), and
// the closed forms of how many micro-batches a stage holds at once.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PLANNER_PIPELINESIMULATION_H
#define PARTITION_PLANNER_PIPELINESIMULATION_H

#include "planner/CostModel.h"

#include <string>
#include <vector>

namespace partition::planner {

/// The simulated step of a pipeline: with and without the point-to-point
/// latency, or the schedule's error.
struct PipelineTime {
  double makespan = 0, makespanNoLatency = 0, busiest = 0;
  bool ok = false;
  std::string error;
};

/// Simulates `plan`'s schedule with each model chunk's forward, input
/// gradient and weight gradient seconds per micro-batch (indexed by model
/// chunk, v x pp + stage). Long pipelines are extrapolated exactly from two
/// shorter ones; the schedules are generated once per thread.
PipelineTime simulatePipeline(const Candidate &plan,
                              const std::vector<double> &forward,
                              const std::vector<double> &backward,
                              const std::vector<double> &weight,
                              double latency);

/// The most micro-batch chunks pipeline stage `stage` holds activations
/// for at once under `schedule` (p stages, m micro-batches, v chunks per
/// stage): the closed forms of scheduling/'s peakInFlight.
int64_t stagePeakInFlight(const std::string &schedule, int64_t p,
                          int64_t m, int64_t v, int64_t stage);

} // namespace partition::planner

#endif // PARTITION_PLANNER_PIPELINESIMULATION_H
