//===- ScheduleCheck.cpp - run a schedule's streams, prove they finish ----===//

#include "scheduling/ScheduleCheck.h"

#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <sstream>
#include <tuple>

namespace partition::pipeline {

namespace {

enum class Payload { Activation, Gradient };

/// What travels between stages: the activation leaving, or the gradient
/// leaving, model chunk `from` for micro-batch `microbatch`.
struct Message {
  Payload payload;
  int microbatch;
  int from;
  bool operator==(const Message &o) const {
    return payload == o.payload && microbatch == o.microbatch && from == o.from;
  }
  bool operator!=(const Message &o) const { return !(*this == o); }
};

struct Op {
  enum Kind { Receive, Compute, Send } kind;
  int peer;      // the other stage of a Receive or Send
  Message message;
  std::size_t action; // index into the stage's action list
};

std::string describe(const Message &m) {
  std::ostringstream os;
  os << (m.payload == Payload::Activation ? "the activation" : "the gradient")
     << " of micro-batch " << m.microbatch << " from model chunk " << m.from;
  return os.str();
}

/// One stage's actions as receives, computes and sends.
std::vector<Op> expand(const Schedule &schedule, int stage) {
  const int p = schedule.stages();
  const int lastChunk = p * schedule.chunks() - 1;
  std::vector<Op> ops;
  const auto &actions = schedule.actions[stage];
  for (std::size_t i = 0; i < actions.size(); ++i) {
    const Action &a = actions[i];
    int g = schedule.modelChunk(stage, a.chunk);
    Op compute{Op::Compute, stage, {}, i};
    if (a.kind == ActionKind::Forward) {
      if (g > 0)
        ops.push_back({Op::Receive, (g - 1) % p,
                       {Payload::Activation, a.microbatch, g - 1}, i});
      ops.push_back(compute);
      if (g < lastChunk)
        ops.push_back(
            {Op::Send, (g + 1) % p, {Payload::Activation, a.microbatch, g}, i});
    } else if (a.kind == ActionKind::BackwardInput) {
      if (g < lastChunk)
        ops.push_back({Op::Receive, (g + 1) % p,
                       {Payload::Gradient, a.microbatch, g + 1}, i});
      ops.push_back(compute);
      if (g > 0)
        ops.push_back(
            {Op::Send, (g - 1) % p, {Payload::Gradient, a.microbatch, g}, i});
    } else {
      ops.push_back(compute);
    }
  }
  return ops;
}

struct InFlight {
  Message message;
  double arrival;
};

class Simulator {
public:
  Simulator(const Schedule &schedule, const SimulationOptions &options)
      : schedule(schedule), options(options), p(schedule.stages()) {
    for (int s = 0; s < p; ++s)
      streams.push_back(expand(schedule, s));
    next.assign(p, 0);
    announced.assign(p, SIZE_MAX);
    queued.assign(p, false);
    now.assign(p, 0.0);
    timeline.spans.resize(p);
  }

  OrError<Timeline> run() {
    // Each stage runs until it has to wait; a stage that another one may
    // have unblocked (by sending to it, or by reaching the receive its
    // rendezvous send waits for) is queued again. Linear in the ops.
    for (int s = 0; s < p; ++s)
      wake(s);
    while (!ready.empty() && error.empty()) {
      int s = ready.front();
      ready.pop_front();
      queued[s] = false;
      while (next[s] < streams[s].size() && error.empty() && step(s)) {
      }
    }
    if (!error.empty())
      return OrError<Timeline>::failure(error);
    if (auto stuck = deadlock())
      return OrError<Timeline>::failure(*stuck);
    // checkActions made every stage run each of its actions once, so each
    // send has its receive: streams that finish leave no message behind.
    for (int s = 0; s < p; ++s)
      timeline.makespan = std::max(timeline.makespan, now[s]);
    return timeline;
  }

private:
  using Channel = std::tuple<int, int, Payload>; // from, to, payload

  const Op &head(int s) const { return streams[s][next[s]]; }
  void wake(int s) {
    if (!queued[s]) {
      queued[s] = true;
      ready.push_back(s);
    }
  }
  const Action &actionOf(int s, const Op &op) const {
    return schedule.actions[s][op.action];
  }
  std::string at(int s, const Op &op) const {
    return "stage " + std::to_string(s) + " at " +
           formatAction(actionOf(s, op), schedule.chunks());
  }

  void mismatch(int receiver, const Op &receive, int sender,
                const Message &sent) {
    error = at(receiver, receive) + " expects " + describe(receive.message) +
            " but stage " + std::to_string(sender) + " sends " +
            describe(sent) +
            " first: messages between two stages must be received in the "
            "order they are sent";
  }

  /// Runs stage s's next op if it can; false when it has to wait.
  bool step(int s) {
    const Op &op = head(s);
    switch (op.kind) {
    case Op::Compute: {
      const Action &a = actionOf(s, op);
      double start = now[s];
      now[s] += options.cost(s, a);
      timeline.spans[s].push_back({a, start, now[s]});
      ++next[s];
      return true;
    }
    case Op::Send: {
      // A stage passing to itself (one stage, several chunks) keeps the
      // tensor; only other stages can make it wait.
      if (options.sendMode == SendMode::Buffered || op.peer == s) {
        channels[{s, op.peer, op.message.payload}].push_back(
            {op.message, now[s] + options.p2pLatency});
        ++next[s];
        if (op.peer != s)
          wake(op.peer);
        return true;
      }
      int r = op.peer;
      if (next[r] >= streams[r].size())
        return false;
      const Op &receive = head(r);
      if (receive.kind != Op::Receive || receive.peer != s ||
          receive.message.payload != op.message.payload)
        return false;
      if (receive.message != op.message) {
        mismatch(r, receive, s, op.message);
        return false;
      }
      double met = std::max(now[s], now[r]);
      now[s] = met;
      now[r] = met + options.p2pLatency;
      ++next[s];
      ++next[r];
      wake(r);
      return true;
    }
    case Op::Receive: {
      if (options.sendMode == SendMode::Rendezvous && op.peer != s) {
        // The sender's step completes both. Wake it once per receive, so
        // that two stages receiving from each other do not wake each
        // other for ever.
        if (announced[s] != next[s]) {
          announced[s] = next[s];
          wake(op.peer);
        }
        return false;
      }
      auto &queue = channels[{op.peer, s, op.message.payload}];
      if (queue.empty())
        return false;
      if (queue.front().message != op.message) {
        mismatch(s, op, op.peer, queue.front().message);
        return false;
      }
      now[s] = std::max(now[s], queue.front().arrival);
      queue.pop_front();
      ++next[s];
      return true;
    }
    }
    return false;
  }

  std::optional<std::string> deadlock() const {
    std::string waits;
    for (int s = 0; s < p; ++s) {
      if (next[s] >= streams[s].size())
        continue;
      const Op &op = head(s);
      if (!waits.empty())
        waits += "; ";
      waits += at(s, op) +
               (op.kind == Op::Send ? " waits to send " : " waits to receive ") +
               describe(op.message) +
               (op.kind == Op::Send ? " to stage " : " from stage ") +
               std::to_string(op.peer);
    }
    if (waits.empty())
      return std::nullopt;
    return "the schedule deadlocks: " + waits;
  }

  const Schedule &schedule;
  const SimulationOptions &options;
  const int p;
  std::vector<std::vector<Op>> streams;
  std::vector<std::size_t> next;
  std::vector<std::size_t> announced; // the receive whose sender was woken
  std::deque<int> ready;
  std::vector<bool> queued;
  std::vector<double> now;
  std::map<Channel, std::deque<InFlight>> channels;
  Timeline timeline;
  std::string error;
};

} // namespace

ActionCost uniformCosts(double forward, double backwardInput,
                        double backwardWeight) {
  return [=](int, const Action &a) {
    switch (a.kind) {
    case ActionKind::Forward:
      return forward;
    case ActionKind::BackwardInput:
      return backwardInput;
    case ActionKind::BackwardWeight:
      return backwardWeight;
    }
    return 0.0;
  };
}

double Timeline::busy(int stage) const {
  double total = 0;
  for (const Span &span : spans[stage])
    total += span.end - span.start;
  return total;
}

double Timeline::idleFraction(int stage) const {
  return makespan > 0 ? 1.0 - busy(stage) / makespan : 0.0;
}

double Timeline::bubbleFraction() const {
  if (makespan <= 0 || spans.empty())
    return 0;
  double busyTotal = 0;
  for (std::size_t s = 0; s < spans.size(); ++s)
    busyTotal += busy(s);
  return 1.0 - busyTotal / (makespan * spans.size());
}

std::optional<std::string> checkActions(const Schedule &schedule) {
  const int p = schedule.stages(), m = schedule.microbatches(),
            v = schedule.chunks();
  if (auto error = validateConfig(schedule.config))
    return error;
  if ((int)schedule.actions.size() != p)
    return "the schedule has " + std::to_string(schedule.actions.size()) +
           " action lists for " + std::to_string(p) + " stages";
  for (int s = 0; s < p; ++s) {
    // Position of each (kind, micro-batch, chunk) in the stream; -1: absent.
    std::vector<long> position(3 * (std::size_t)m * v, -1);
    auto slot = [&](ActionKind kind, int mb, int chunk) -> long & {
      return position[((std::size_t)kind * m + mb) * v + chunk];
    };
    const auto &actions = schedule.actions[s];
    std::string stage = "stage " + std::to_string(s);
    for (std::size_t i = 0; i < actions.size(); ++i) {
      const Action &a = actions[i];
      std::string name = formatAction(a, v);
      if (a.microbatch < 0 || a.microbatch >= m || a.chunk < 0 ||
          a.chunk >= v)
        return stage + " runs " + name + ", outside the " + std::to_string(m) +
               " micro-batches and " + std::to_string(v) + " chunks";
      long &at = slot(a.kind, a.microbatch, a.chunk);
      if (at >= 0)
        return stage + " runs " + name + " twice";
      at = (long)i;
      if (a.kind != ActionKind::Forward) {
        ActionKind before = a.kind == ActionKind::BackwardInput
                                ? ActionKind::Forward
                                : ActionKind::BackwardInput;
        if (slot(before, a.microbatch, a.chunk) < 0)
          return stage + " runs " + name + " before " +
                 formatAction({before, a.microbatch, a.chunk}, v);
      }
    }
    for (ActionKind kind : {ActionKind::Forward, ActionKind::BackwardInput,
                            ActionKind::BackwardWeight})
      for (int mb = 0; mb < m; ++mb)
        for (int c = 0; c < v; ++c)
          if (slot(kind, mb, c) < 0)
            return stage + " never runs " + formatAction({kind, mb, c}, v);
  }
  return std::nullopt;
}

OrError<Timeline> simulate(const Schedule &schedule,
                           const SimulationOptions &options) {
  if (auto error = checkActions(schedule))
    return OrError<Timeline>::failure(*error);
  return Simulator(schedule, options).run();
}

std::vector<int> peakInFlight(const Schedule &schedule) {
  std::vector<int> peaks;
  for (const auto &actions : schedule.actions) {
    int held = 0, peak = 0;
    for (const Action &a : actions) {
      if (a.kind == ActionKind::Forward)
        peak = std::max(peak, ++held);
      else if (a.kind == ActionKind::BackwardWeight)
        --held;
    }
    peaks.push_back(peak);
  }
  return peaks;
}

} // namespace partition::pipeline
