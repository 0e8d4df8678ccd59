//===- ScheduleCheck.h - run a schedule's streams, prove they finish -*- C++ -*-===//
//
// The checker plays every stage's stream as the runtime will: before an F
// the stage receives its input activation from the stage holding the
// previous model chunk (none for chunk 0), after it sends its output to
// the next (none for the last chunk, which computes the loss); a B
// receives the output gradient from the next model chunk and sends the
// input gradient to the previous one; a W only computes. Receives block.
// Sends either return at once (Buffered: MPI_Isend, ncclSend in a group)
// or wait for the receiver (Rendezvous: a blocking MPI_Ssend).
//
// Messages between two stages travel in one queue per direction and kind
// (activations and gradients apart, as a tag keeps them): a receive that
// finds another micro-batch's message at the head of its queue is an
// error, as is a stream that can no longer move (deadlock) or a message
// that is never received. When every stream finishes, the result is each
// stage's timeline under the given per-action costs.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_SCHEDULECHECK_H
#define PARTITION_SCHEDULING_SCHEDULECHECK_H

#include "scheduling/Schedule.h"

#include <functional>
#include <optional>
#include <string>
#include <vector>

namespace partition::pipeline {

enum class SendMode { Buffered, Rendezvous };

/// The time an action takes on a stage (any unit; the simulator only adds).
using ActionCost = std::function<double(int stage, const Action &action)>;

/// The same cost for every F, every B and every W on every stage.
ActionCost uniformCosts(double forward, double backwardInput,
                        double backwardWeight);

struct SimulationOptions {
  SendMode sendMode = SendMode::Buffered;
  ActionCost cost = uniformCosts(1, 1, 1);
  /// From a send to the moment its message can be received.
  double p2pLatency = 0;
};

struct Span {
  Action action;
  double start;
  double end;
};

struct Timeline {
  /// spans[s]: stage s's actions as they ran, in stream order.
  std::vector<std::vector<Span>> spans;
  /// When the last stage finishes: the step time.
  double makespan = 0;

  /// Time stage s spends computing.
  double busy(int stage) const;
  /// Share of stage s's step time spent idle.
  double idleFraction(int stage) const;
  /// Share of the whole pipeline's time (stages x step time) spent idle:
  /// the bubble fraction.
  double bubbleFraction() const;
};

/// Whether every stage runs exactly each F, B and W of each of its
/// micro-batches and chunks once, F before its B before its W. The message
/// names the stage and the action.
std::optional<std::string> checkActions(const Schedule &schedule);

/// Checks the actions, then plays the streams: the timeline, or one line
/// saying why they do not finish (which stages wait for what).
OrError<Timeline> simulate(const Schedule &schedule,
                           const SimulationOptions &options = {});

/// For each stage, the most micro-batch chunks it holds activations for at
/// once: counted from its F until its W (the weight gradient is the last
/// to read them). 1F1B: p - s on stage s; GPipe: m.
std::vector<int> peakInFlight(const Schedule &schedule);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_SCHEDULECHECK_H
