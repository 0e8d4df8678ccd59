//===- Schedule.cpp - pipeline schedules as per-stage action lists --------===//

#include "scheduling/Schedule.h"

#include <algorithm>
#include <deque>
#include <sstream>

namespace partition::pipeline {

namespace {

constexpr std::pair<ScheduleKind, std::string_view> kNames[] = {
    {ScheduleKind::GPipe, "gpipe"},
    {ScheduleKind::OneFOneB, "1f1b"},
    {ScheduleKind::Interleaved1F1B, "interleaved-1f1b"},
    {ScheduleKind::ZeroBubbleH1, "zero-bubble"},
};

// Beyond any real pipeline (128 stages x 8 chunks x 1024 micro-batches);
// keeps the action lists (3 p v m entries) and the checker's streams within
// a few hundred MB whatever numbers a plan holds.
constexpr long long kMaxActionsPerKind = 1ll << 20;

Action forward(int mb, int chunk) { return {ActionKind::Forward, mb, chunk}; }
Action backward(int mb, int chunk) {
  return {ActionKind::BackwardInput, mb, chunk};
}
Action weight(int mb, int chunk) {
  return {ActionKind::BackwardWeight, mb, chunk};
}

// GPipe: every forward, then every backward, micro-batches in order.
std::vector<Action> gpipeStage(int m) {
  std::vector<Action> out;
  for (int mb = 0; mb < m; ++mb)
    out.push_back(forward(mb, 0));
  for (int mb = 0; mb < m; ++mb) {
    out.push_back(backward(mb, 0));
    out.push_back(weight(mb, 0));
  }
  return out;
}

// PipeDream-flush: p - s - 1 forwards of warm-up, then one forward and one
// backward in turn, then the remaining backwards. Stage s never holds more
// than p - s micro-batches.
std::vector<Action> oneFOneBStage(int p, int m, int s) {
  int warmup = std::min(p - s - 1, m);
  std::vector<Action> out;
  for (int mb = 0; mb < warmup; ++mb)
    out.push_back(forward(mb, 0));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(forward(warmup + i, 0));
    out.push_back(backward(i, 0));
    out.push_back(weight(i, 0));
  }
  for (int mb = m - warmup; mb < m; ++mb) {
    out.push_back(backward(mb, 0));
    out.push_back(weight(mb, 0));
  }
  return out;
}

// Megatron's interleaved 1F1B: the k-th forward of a stage takes the
// micro-batches in groups of p, each group through chunk 0, then chunk 1,
// ...; backwards the same with the chunks reversed. Warm-up is
// 2 (p - s - 1) + (v - 1) p forwards (Megatron-LM, schedules.py).
std::vector<Action> interleavedStage(int p, int m, int v, int s) {
  int total = m * v;
  int warmup = std::min(2 * (p - s - 1) + (v - 1) * p, total);
  auto microbatchOf = [&](int k) { return (k / (p * v)) * p + k % p; };
  auto forwardChunk = [&](int k) { return (k % (p * v)) / p; };
  auto backwardChunk = [&](int k) { return v - 1 - (k % (p * v)) / p; };
  std::vector<Action> out;
  for (int k = 0; k < warmup; ++k)
    out.push_back(forward(microbatchOf(k), forwardChunk(k)));
  for (int i = 0; i < total - warmup; ++i) {
    int k = warmup + i;
    out.push_back(forward(microbatchOf(k), forwardChunk(k)));
    out.push_back(backward(microbatchOf(i), backwardChunk(i)));
    out.push_back(weight(microbatchOf(i), backwardChunk(i)));
  }
  for (int k = std::max(total - warmup, 0); k < total; ++k) {
    out.push_back(backward(microbatchOf(k), backwardChunk(k)));
    out.push_back(weight(microbatchOf(k), backwardChunk(k)));
  }
  return out;
}

// ZB-H1 (Qi et al. 2023, section 3.1): 1F1B's order of F and B, with W
// taken out of the critical path. Stage s runs its first s weight
// gradients late (after its s-th following B), which fills the waits of
// the cool-down, and the deferred ones at the end. Stage s then holds at
// most p micro-batches (F done, W not yet): 1F1B's peak, that of stage 0.
std::vector<Action> zeroBubbleH1Stage(int p, int m, int s) {
  int warmup = std::min(p - s - 1, m);
  std::vector<Action> out;
  std::deque<int> pendingWeights;
  auto backwardThenMaybeWeight = [&](int backwardIndex) {
    out.push_back(backward(backwardIndex, 0));
    pendingWeights.push_back(backwardIndex);
    if (backwardIndex >= s) {
      out.push_back(weight(pendingWeights.front(), 0));
      pendingWeights.pop_front();
    }
  };
  for (int mb = 0; mb < warmup; ++mb)
    out.push_back(forward(mb, 0));
  for (int i = 0; i < m - warmup; ++i) {
    out.push_back(forward(warmup + i, 0));
    backwardThenMaybeWeight(i);
  }
  for (int mb = m - warmup; mb < m; ++mb)
    backwardThenMaybeWeight(mb);
  for (int mb : pendingWeights)
    out.push_back(weight(mb, 0));
  return out;
}

} // namespace

std::string_view scheduleName(ScheduleKind kind) {
  for (const auto &[k, name] : kNames)
    if (k == kind)
      return name;
  return "unknown";
}

std::optional<ScheduleKind> parseScheduleKind(std::string_view name) {
  for (const auto &[kind, n] : kNames)
    if (n == name)
      return kind;
  return std::nullopt;
}

std::string scheduleNames() {
  std::string out;
  for (const auto &[kind, name] : kNames) {
    if (!out.empty())
      out += ", ";
    out += name;
  }
  return out;
}

char actionLetter(ActionKind kind) {
  switch (kind) {
  case ActionKind::Forward:
    return 'F';
  case ActionKind::BackwardInput:
    return 'B';
  case ActionKind::BackwardWeight:
    return 'W';
  }
  return '?';
}

std::string formatAction(const Action &action, int chunks) {
  std::string out(1, actionLetter(action.kind));
  out += std::to_string(action.microbatch);
  if (chunks > 1)
    out += "." + std::to_string(action.chunk);
  return out;
}

std::optional<std::string> validateConfig(const ScheduleConfig &config) {
  std::ostringstream os;
  const int p = config.stages, m = config.microbatches, v = config.chunks;
  const std::string_view name = scheduleName(config.kind);
  if (p < 1) {
    os << "mesh.pp must be at least 1, got " << p;
  } else if (m < 1) {
    os << "pipeline.microbatches must be at least 1, got " << m;
  } else if (v < 1) {
    os << "pipeline.virtual_stages must be at least 1, got " << v;
  } else if (v > 1 && config.kind != ScheduleKind::Interleaved1F1B) {
    os << "pipeline.virtual_stages = " << v
       << " needs pipeline.schedule = \"interleaved-1f1b\", not \"" << name
       << "\"; drop virtual_stages or change the schedule";
  } else if (config.kind == ScheduleKind::Interleaved1F1B && m % p != 0) {
    int below = m / p * p, above = below + p;
    os << "pipeline.microbatches = " << m
       << " is not divisible by mesh.pp = " << p
       << ": interleaved-1f1b runs the micro-batches in groups of pp; use ";
    if (below > 0)
      os << below << " or ";
    os << above;
  } else if (config.layers > 0 && p > config.layers) {
    os << "mesh.pp = " << p << " is larger than the model's " << config.layers
       << " layers: every stage needs at least one layer";
  } else if (config.layers > 0 && (long long)p * v > config.layers) {
    os << "mesh.pp x pipeline.virtual_stages = " << p << " x " << v << " = "
       << (long long)p * v << " chunks, more than the model's "
       << config.layers << " layers: every chunk needs at least one layer";
  } else if ((long long)p * v * m > kMaxActionsPerKind) {
    os << "mesh.pp x pipeline.virtual_stages x pipeline.microbatches = " << p
       << " x " << v << " x " << m << " = " << (long long)p * v * m
       << " passes, more than the " << kMaxActionsPerKind
       << " a schedule may hold";
  } else {
    return std::nullopt;
  }
  return os.str();
}

OrError<Schedule> generateSchedule(const ScheduleConfig &config) {
  if (auto error = validateConfig(config))
    return OrError<Schedule>::failure(*error);
  Schedule schedule;
  schedule.config = config;
  const int p = config.stages, m = config.microbatches, v = config.chunks;
  for (int s = 0; s < p; ++s) {
    switch (config.kind) {
    case ScheduleKind::GPipe:
      schedule.actions.push_back(gpipeStage(m));
      break;
    case ScheduleKind::OneFOneB:
      schedule.actions.push_back(oneFOneBStage(p, m, s));
      break;
    case ScheduleKind::Interleaved1F1B:
      // One chunk per stage is plain 1F1B; Megatron's doubled warm-up is
      // only needed to keep chunks apart.
      schedule.actions.push_back(v == 1 ? oneFOneBStage(p, m, s)
                                        : interleavedStage(p, m, v, s));
      break;
    case ScheduleKind::ZeroBubbleH1:
      schedule.actions.push_back(zeroBubbleH1Stage(p, m, s));
      break;
    }
  }
  return schedule;
}

} // namespace partition::pipeline
