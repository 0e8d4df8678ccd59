//===- MicrobatchLoop.h - which micro-batches a looped step compiles -*- C++ -*-===//
//
// The micro-batch loop (docs/compiler.md): a step of M micro-batches keeps
// one copy of its steady state's code, which the runtime runs R times. The
// compiler builds M0 < M micro-batches only: those of the warm-up (the
// prefix), the period the loop runs (the body: the first period after the
// warm-up, as the step's gradient sums start at zero; the second where the
// first differs), a second copy of it (matched against the body at the rt
// level, then deleted: the proof that the body may run after itself), and
// the rest (the tail: the last micro-batches, the cool-down and the
// update).
//
// Without a pipeline a period is one micro-batch (the body is micro-batch
// 0, the compiled micro-batches are 0, 1 and M-1). With one, a period
// is `stride` micro-batches (a multiple of pp: every stage's steady state
// repeats with that shift) on every stage at once; its length is chosen so
// that a micro-batch's activations are dead before the same slot's next
// micro-batch is made, which lets the loop write them in place.
//
// Plain C++: --xfmr-train-step (which micro-batches to build),
// --dist-pipeline (where each stage's body starts) and the planner share it.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_SCHEDULING_MICROBATCHLOOP_H
#define PARTITION_SCHEDULING_MICROBATCHLOOP_H

#include "scheduling/Schedule.h"

#include <array>
#include <optional>
#include <vector>

namespace partition::pipeline {

/// How a step of `microbatches` micro-batches loops.
struct LoopLayout {
  /// Micro-batches one run of the loop advances.
  int stride = 1;
  /// Compiled micro-batches below `split` are the real ones of that index;
  /// compiled micro-batch c >= split is real micro-batch
  /// c + (microbatches - compiled).
  int split = 0;
  /// How many micro-batches the compiled step holds (M0).
  int compiled = 0;
  /// The real count (M).
  int microbatches = 0;
  /// How many times the runtime runs the body (R = 2 + (M - M0) / stride).
  int runs = 0;
  /// Which period after the warm-up the body is: 0 (the step's sums start
  /// at zero, so the first period adds as the others do) or 1 (where the
  /// first period differs: ZeRO-3 gathers the parameters in it).
  int settle = 0;
  /// Per stage, indices into the compiled schedule's actions: where the
  /// body starts, where its copy starts and where the tail starts.
  std::vector<std::array<int, 3>> bounds;
  /// Per stage, the compiled schedule's actions (the train step's
  /// schedule, or the evaluation step's forward order).
  std::vector<std::vector<Action>> actions;

  int realOf(int compiledMicrobatch) const {
    return compiledMicrobatch < split
               ? compiledMicrobatch
               : compiledMicrobatch + (microbatches - compiled);
  }
  /// The compiled index of real micro-batch `real`, or -1 when the step
  /// does not build it (the loop runs it).
  int compiledOf(int real) const {
    if (real < split)
      return real;
    int c = real - (microbatches - compiled);
    return c >= split ? c : -1;
  }
  /// The real micro-batches the step builds, in order.
  std::vector<int> compiledMicrobatches() const;
};

/// The evaluation step's order on one stage: each micro-batch's forward
/// through the stage's chunks in Megatron's interleaved order (groups of
/// pp micro-batches through chunk 0, then chunk 1, ...); with one chunk,
/// the micro-batches in order.
std::vector<Action> forwardOrder(int stages, int chunks, int microbatches);

/// The loop of a step of `config.microbatches` micro-batches (the train
/// step's schedule, or with `forwardOnly` the evaluation step's forward
/// order), or nullopt when it does not loop: too few micro-batches for a
/// period to repeat beyond the prefix, or a schedule without a steady state
/// (GPipe keeps every micro-batch in flight). The layout is checked
/// against the full schedule: expanding the body R times reproduces every
/// stage's actions for `config.microbatches`.
/// The body is the first period after the warm-up that is steady, from
/// `minSettle` (0 or 1) on.
std::optional<LoopLayout> microbatchLoopLayout(const ScheduleConfig &config,
                                               bool forwardOnly,
                                               int minSettle = 0);

} // namespace partition::pipeline

#endif // PARTITION_SCHEDULING_MICROBATCHLOOP_H
