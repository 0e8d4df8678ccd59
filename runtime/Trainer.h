//===- Trainer.h - the training loop of partition-run -----------*- C++ -*-===//

#ifndef PARTITION_RUNTIME_TRAINER_H
#define PARTITION_RUNTIME_TRAINER_H

#include <cstdint>
#include <string>

namespace partition::runtime {

struct TrainOptions {
  std::string program;
  /// Token file (llm.c shard or raw uint16); empty: --text or the built-in
  /// synthetic language.
  std::string data;
  std::string dataFormat = "auto";
  std::string text;
  int64_t steps = 20;
  uint64_t seed = 1337;
  /// Peak learning rate, reached after `warmup` steps, then cosine decay to
  /// `minLrRatio` times it at the last step.
  double lr = 1e-3;
  int64_t warmup = -1; // -1: 10% of the steps
  double minLrRatio = 0.1;
  std::string metricsOut;
  /// Held-out evaluation every `evalEvery` steps (0: never) over
  /// `evalBatches` batches, and after the last step.
  int64_t evalEvery = 10;
  int64_t evalBatches = 2;
  double evalFraction = 0.1;
  std::string save;
  int64_t saveEvery = 0; // 0: only at the end
  std::string resume;
  /// Stop (and save, with `save`) once this many steps are done, leaving
  /// the schedule of `steps` intact, as Megatron-LM's --exit-interval: the
  /// job resumes later with --resume. 0: run all `steps`.
  int64_t stopAfter = 0;
  bool quiet = false;
};

/// Runs the training; throws std::runtime_error subclasses with one-line
/// messages on bad input.
void train(const TrainOptions &options);

/// The learning rate of (0-based) step `step` of `steps`.
double scheduledLearningRate(const TrainOptions &options, int64_t step);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_TRAINER_H
