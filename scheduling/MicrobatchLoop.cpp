//===- MicrobatchLoop.cpp - which micro-batches a looped step compiles ----===//

#include "scheduling/MicrobatchLoop.h"

#include <algorithm>
#include <climits>
#include <map>
#include <utility>

namespace partition::pipeline {

namespace {

using Stages = std::vector<std::vector<Action>>;

Action shifted(Action action, int by) {
  action.microbatch += by;
  return action;
}

/// Every stage's actions for `microbatches`, or nullopt when the schedule
/// does not allow that count.
std::optional<Stages> actionsFor(const ScheduleConfig &config, int microbatches,
                                 bool forwardOnly) {
  if (forwardOnly)
    return Stages(config.stages, forwardOrder(config.stages, config.chunks,
                                              microbatches));
  ScheduleConfig at = config;
  at.microbatches = microbatches;
  at.layers = 0;
  OrError<Schedule> schedule = generateSchedule(at);
  if (!schedule)
    return std::nullopt;
  return schedule->actions;
}

/// The layout compiling `compiled` micro-batches with a period of `stride`
/// micro-batches (`perPeriod` forwards on each stage) whose body is the
/// `settle`-th period after the warm-up, or nullopt when the compiled
/// schedule is not periodic there or a check fails.
std::optional<LoopLayout> tryLayout(const ScheduleConfig &config,
                                    bool forwardOnly, int compiled, int stride,
                                    int perPeriod, int settle) {
  std::optional<Stages> actions = actionsFor(config, compiled, forwardOnly);
  if (!actions)
    return std::nullopt;
  LoopLayout layout;
  layout.stride = stride;
  layout.compiled = compiled;
  layout.microbatches = config.microbatches;
  layout.runs = 2 + (config.microbatches - compiled) / stride;
  layout.settle = settle;
  int prefixMax = -1, tailMin = INT_MAX, bodyMin = INT_MAX;
  for (const std::vector<Action> &stage : *actions) {
    std::vector<int> forwards;
    for (int i = 0; i < static_cast<int>(stage.size()); ++i)
      if (stage[i].kind == ActionKind::Forward)
        forwards.push_back(i);
    // The warm-up: the forwards before the steady state's first one (the
    // first forward that a backward follows).
    int warmup = 0;
    if (!forwardOnly) {
      while (warmup < static_cast<int>(forwards.size()) &&
             forwards[warmup] == warmup)
        ++warmup;
      --warmup;
    }
    // The body is the `settle`-th period after the warm-up (0 where the
    // first is already steady: the step starts its sums at zero, so the
    // first period adds as the later ones do).
    const int first = warmup + settle * perPeriod;
    if (warmup < 0 || first + 2 * perPeriod >= static_cast<int>(forwards.size()))
      return std::nullopt;
    std::array<int, 3> bounds = {forwards[first], forwards[first + perPeriod],
                                 forwards[first + 2 * perPeriod]};
    int length = bounds[1] - bounds[0];
    if (bounds[2] - bounds[1] != length)
      return std::nullopt;
    for (int i = 0; i < length; ++i)
      if (stage[bounds[1] + i] != shifted(stage[bounds[0] + i], stride))
        return std::nullopt;
    // The micro-batches whose rows of the batch a compiled action reads:
    // the first model chunk's (the tokens: the embedding and its weight
    // gradient) and the last one's forward and input gradient (the
    // targets: the loss and its gradient). Actions elsewhere take their
    // micro-batch from messages, which the expansion below checks.
    const int stageIndex = static_cast<int>(layout.bounds.size());
    auto readsRows = [&](const Action &action) {
      return (stageIndex == 0 && action.chunk == 0) ||
             (stageIndex == config.stages - 1 &&
              action.chunk == config.chunks - 1 &&
              action.kind != ActionKind::BackwardWeight);
    };
    for (int i = 0; i < static_cast<int>(stage.size()); ++i) {
      if (!readsRows(stage[i]))
        continue;
      int mb = stage[i].microbatch;
      if (i < bounds[1])
        prefixMax = std::max(prefixMax, mb);
      if (i >= bounds[0] && i < bounds[1])
        bodyMin = std::min(bodyMin, mb);
      if (i >= bounds[2])
        tailMin = std::min(tailMin, mb);
    }
    // In place: a body micro-batch's last action on a chunk comes before
    // the same chunk's micro-batch `stride` later starts, so that one
    // slot's activations serve both.
    std::map<std::pair<int, int>, std::pair<int, int>> span; // first, last
    for (int i = 0; i < static_cast<int>(stage.size()); ++i) {
      auto key = std::make_pair(stage[i].microbatch, stage[i].chunk);
      auto [it, inserted] = span.insert({key, {i, i}});
      if (!inserted)
        it->second.second = i;
    }
    for (int i = bounds[0]; i < bounds[1]; ++i) {
      auto key = std::make_pair(stage[i].microbatch, stage[i].chunk);
      auto next = span.find({key.first + stride, key.second});
      if (next == span.end() || span[key].second >= next->second.first)
        return std::nullopt;
    }
    layout.bounds.push_back(bounds);
  }
  if (tailMin == INT_MAX || prefixMax >= tailMin)
    return std::nullopt;
  layout.split = tailMin;
  // From the loop's second run on, the rows it reads lie past every slice
  // it refills (the runtime copies them within the batch).
  if (bodyMin + 2 * stride < layout.split)
    return std::nullopt;
  // The whole schedule: the prefix and body as compiled, the body again
  // for each further run, then the tail's micro-batches moved to the end.
  std::optional<Stages> full =
      actionsFor(config, config.microbatches, forwardOnly);
  if (!full)
    return std::nullopt;
  for (size_t s = 0; s < actions->size(); ++s) {
    const std::vector<Action> &stage = (*actions)[s];
    const std::array<int, 3> &bounds = layout.bounds[s];
    std::vector<Action> expanded(stage.begin(), stage.begin() + bounds[1]);
    for (int run = 1; run < layout.runs; ++run)
      for (int i = bounds[0]; i < bounds[1]; ++i)
        expanded.push_back(shifted(stage[i], run * stride));
    for (int i = bounds[2]; i < static_cast<int>(stage.size()); ++i)
      expanded.push_back(
          shifted(stage[i], config.microbatches - compiled));
    if (expanded != (*full)[s])
      return std::nullopt;
  }
  layout.actions = std::move(*actions);
  return layout;
}

} // namespace

std::vector<int> LoopLayout::compiledMicrobatches() const {
  std::vector<int> out;
  for (int c = 0; c < compiled; ++c)
    out.push_back(realOf(c));
  return out;
}

std::vector<Action> forwardOrder(int stages, int chunks, int microbatches) {
  std::vector<Action> out;
  if (chunks == 1 || microbatches % stages != 0) {
    for (int chunk = 0; chunk < chunks; ++chunk)
      for (int mb = 0; mb < microbatches; ++mb)
        out.push_back({ActionKind::Forward, mb, chunk});
    return out;
  }
  const int group = stages * chunks;
  for (int k = 0; k < microbatches * chunks; ++k)
    out.push_back({ActionKind::Forward, (k / group) * stages + k % stages,
                   (k % group) / stages});
  return out;
}

std::optional<LoopLayout> microbatchLoopLayout(const ScheduleConfig &config,
                                               bool forwardOnly,
                                               int minSettle) {
  if (config.stages < 1 || config.chunks < 1 || config.microbatches < 1 ||
      (!forwardOnly && config.kind == ScheduleKind::GPipe && config.stages > 1))
    return std::nullopt;
  const int chunks = config.chunks;
  // A pipeline's steady state repeats every pp micro-batches; one stage's
  // forward passes every micro-batch.
  const int unit = forwardOnly && chunks == 1 ? 1 : config.stages;
  // Longer periods when a micro-batch's activations outlive one period.
  for (int periods = 1; periods <= 4; ++periods) {
    const int stride = periods * unit;
    const int perPeriod = stride * chunks;
    // The warm-up, the body, its copy and a tail: more than two periods;
    // a warm-up adds at most two (Megatron's interleaved one, (v + 1) pp
    // forwards), and a schedule whose first period is not yet steady (ZB-H1
    // defers weight gradients into the second) one more. At least one run
    // beyond the two compiled ones.
    int compiled = 2 * stride + 1;
    compiled += ((config.microbatches - compiled) % stride + stride) % stride;
    for (; compiled <= 6 * stride && compiled + stride <= config.microbatches;
         compiled += stride)
      for (int settle = minSettle; settle <= 1; ++settle)
        if (auto layout = tryLayout(config, forwardOnly, compiled, stride,
                                    perPeriod, settle))
          return layout;
  }
  return std::nullopt;
}

} // namespace partition::pipeline
