//===- PipelineSimulation.cpp - a plan's pipeline timeline ----------------===//

#include "planner/PipelineSimulation.h"

#include "scheduling/Schedule.h"
#include "scheduling/ScheduleCheck.h"

#include <map>
#include <tuple>

namespace partition::planner {

PipelineTime simulatePipeline(const Candidate &p,
                              const std::vector<double> &forward,
                              const std::vector<double> &backward,
                              const std::vector<double> &weight,
                              double latency) {
  using namespace partition::pipeline;
  PipelineTime result;
  ScheduleConfig config;
  auto kind = parseScheduleKind(p.schedule);
  if (!kind) {
    result.error = "unknown schedule " + p.schedule;
    return result;
  }
  config.kind = *kind;
  config.stages = int(p.pp);
  config.chunks = int(p.virtualStages);
  // Long pipelines: simulate two shorter multiples of p and extend the
  // steady state linearly (each further micro-batch adds one F, B and W
  // per chunk on the bottleneck stage); exact for these schedules.
  int64_t m = p.microbatches;
  auto run = [&](int64_t microbatches, double lat) -> OrError<Timeline> {
    ScheduleConfig cfg = config;
    cfg.microbatches = int(microbatches);
    // The same few schedules serve every candidate of a search (each is
    // simulated twice, with and without latency): generated once per
    // thread.
    using Key = std::tuple<int, int, int, int>;
    thread_local std::map<Key, OrError<Schedule>> schedules;
    Key key{int(cfg.kind), cfg.stages, cfg.chunks, cfg.microbatches};
    auto it = schedules.find(key);
    if (it == schedules.end()) {
      if (schedules.size() > 256)
        schedules.clear();
      it = schedules.emplace(key, generateSchedule(cfg)).first;
    }
    const OrError<Schedule> &schedule = it->second;
    if (!schedule)
      return OrError<Timeline>::failure(schedule.error());
    SimulationOptions options;
    options.cost = [&](int stage, const Action &a) {
      int modelChunk = a.chunk * int(p.pp) + stage;
      switch (a.kind) {
      case ActionKind::Forward:
        return forward[modelChunk];
      case ActionKind::BackwardInput:
        return backward[modelChunk];
      case ActionKind::BackwardWeight:
        return weight[modelChunk];
      }
      return 0.0;
    };
    options.p2pLatency = lat;
    return simulate(*schedule, options);
  };
  int64_t step = p.pp;
  int64_t m1 = 2 * step, m2 = 4 * step;
  auto makespanAt = [&](double lat, double &out) -> bool {
    if (m <= m2) {
      OrError<Timeline> t = run(m, lat);
      if (!t) {
        result.error = t.error();
        return false;
      }
      out = t->makespan;
      return true;
    }
    OrError<Timeline> a = run(m1, lat), b = run(m2, lat);
    if (!a || !b) {
      result.error = !a ? a.error() : b.error();
      return false;
    }
    out = b->makespan +
          double(m - m2) * (b->makespan - a->makespan) / double(m2 - m1);
    return true;
  };
  if (!makespanAt(latency, result.makespan) ||
      !makespanAt(0, result.makespanNoLatency))
    return result;
  result.ok = true;
  return result;
}

int64_t stagePeakInFlight(const std::string &schedule, int64_t p,
                          int64_t m, int64_t v, int64_t stage) {
  if (p == 1)
    return 1;
  if (schedule == "gpipe")
    return m;
  if (schedule == "interleaved-1f1b" && v > 1)
    // Megatron's warm-up on stage s: (v - 1) p + 2 (p - 1 - s) forwards,
    // then one more before its first backward.
    return std::min(m * v, (v - 1) * p + 2 * (p - 1 - stage) + 1);
  // ZB-H1 delays the weight gradients that free a micro-batch: p on every
  // stage.
  if (schedule == "zero-bubble")
    return std::min(m, p);
  // 1F1B: p - s micro-batches on stage s.
  return std::min(m, p - stage);
}

} // namespace partition::planner
