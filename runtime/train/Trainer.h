//===- Trainer.h - the training loop of partition-run -----------*- C++ -*-===//

#ifndef PARTITION_RUNTIME_TRAINER_H
#define PARTITION_RUNTIME_TRAINER_H

#include <cstdint>
#include <string>

namespace partition::runtime {

class Program;
namespace comm {
class Communicator;
} // namespace comm

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
  /// --trace: the Chrome / Perfetto trace rank 0 writes (runtime/backend/Trace.h);
  /// empty: none.
  std::string trace;
  /// --trace-steps FIRST:LAST: the training steps (1-based, inclusive;
  /// LAST 0: to the end) whose spans the trace keeps, each with the
  /// evaluation after it.
  int64_t traceFirst = 1, traceLast = 0;
  /// Held-out evaluation every `evalEvery` steps (0: never) over
  /// `evalBatches` batches, and after the last step.
  int64_t evalEvery = 10;
  int64_t evalBatches = 2;
  /// --eval-batches was given (--evaluate then evaluates that many batches,
  /// else every whole batch of its data once).
  bool evalBatchesGiven = false;
  /// --evaluate: no update; the mean loss and perplexity of eval_step over
  /// the whole of --data / --text (no held-out split; the built-in
  /// language's held-out stream without data), from --init-from,
  /// --resume or the seeded initialisation.
  bool evaluate = false;
  /// --dump-logits: write the first batch of the data (as --evaluate reads
  /// it), its targets and logical logits (fp32) to this .npz; empty: none.
  /// Needs a program compiled with partition-compile --logits.
  std::string dumpLogits;
  /// --evaluate or --dump-logits: a run that updates nothing.
  bool inspects() const { return evaluate || !dumpLogits.empty(); }
  double evalFraction = 0.1;
  std::string save;
  int64_t saveEvery = 0; // 0: only at the end
  std::string resume;
  /// Start from the parameters of this checkpoint (a partition-import
  /// result, or any checkpoint of the same model): weights only, with a
  /// fresh optimizer state, step 0 and the data from the start, as
  /// fine-tuning expects. Exclusive with `resume`.
  std::string initFrom;
  /// Stop (and save, with `save`) once this many steps are done, leaving
  /// the schedule of `steps` intact, as Megatron-LM's --exit-interval: the
  /// job resumes later with --resume. 0: run all `steps`.
  int64_t stopAfter = 0;
  /// Let `save` replace a checkpoint of another kind (a weights-only
  /// import, or a file that is not a checkpoint) or out of this run's line.
  bool force = false;
  bool quiet = false;
  /// Longest wait of any collective before the job is aborted (the world
  /// communicator's timeout; set by partition-run when it creates it).
  double commTimeoutSeconds = 300;
  /// auto, cpu or cuda (see chooseBackend).
  std::string backend = "auto";
  /// --offload-path: the directory of the offload's NVMe files instead of
  /// the program's (the plan's offload.path); empty: the program's.
  std::string offloadPath;
  /// This rank's index among the job's ranks on its node, and their number
  /// (set by partition-run from MPI): the CUDA backend gives each its own
  /// device, node rank r taking device r.
  int nodeRank = 0;
  int nodeRanks = 1;
};

/// How a run ended when it did not throw.
struct TrainResult {
  /// The SIGINT / SIGTERM (runtime/train/Interrupt.h) that stopped the run at a
  /// step boundary, on any rank; 0 when it ran to its end.
  int interruptedBy = 0;
  /// This rank stopped because rank 0 could not write --metrics-out (rank
  /// 0 throws the MetricsError): exit non-zero without a message.
  bool failedOnLeader = false;
};

/// Runs the training on one process: loads options.program; throws
/// std::runtime_error subclasses with one-line messages on bad input.
TrainResult train(const TrainOptions &options);

/// Runs `program` (loaded from options.program) as rank world.rank() of
/// world.size(), which must be its device count (checkWorldSize). Every
/// rank initialises the same logical parameters (keeping its block of
/// sharded ones) and checks that its replicas agree; data-parallel rank r
/// feeds rows [r*B/dp, (r+1)*B/dp) of each global batch; rank 0 alone
/// prints, writes metrics and writes checkpoints of logical tensors (every
/// rank takes part in gathering the sharded ones). Throws like
/// train(options); the caller aborts the job when world.size() > 1, since
/// the other ranks would wait for this one.
///
/// After every step the ranks agree (one all-reduce of a flag) whether to
/// stop: a pending SIGINT / SIGTERM on any rank (pendingInterrupt()) or a
/// failed --metrics-out write on rank 0. Every rank then stops after that
/// same step, the checkpoint is saved (with --save) and the metrics summary
/// written; an interruption returns, a metrics failure throws MetricsError.
TrainResult train(const TrainOptions &options, const Program &program,
                  comm::Communicator &world);

/// Throws ProgramError, saying how to launch it, unless `program` was
/// compiled for `worldSize` devices.
void checkWorldSize(const Program &program, const std::string &path,
                    int worldSize);

/// The backend this rank would use for `requested` (auto, cpu or cuda),
/// with `nodeRanks` ranks of the job on its node: auto is the CUDA backend
/// when this build has it and the node has a CUDA device for each of those
/// ranks (NCCL refuses two ranks on one device), else the CPU backend
/// (saying why when devices are visible); cuda is the CUDA backend, or a
/// one-line error naming why not (no usable device, with the CUDA
/// runtime's reason; fewer devices than ranks on the node; or a build
/// without the CUDA backend). Throws ProgramError; returns "cpu" or "cuda".
/// train() makes every rank agree (CPU if any rank's auto chose it).
std::string chooseBackend(const std::string &requested, bool quiet,
                          int nodeRanks = 1);

/// True when this build has the CUDA backend (runtime/backend/cuda).
bool haveCudaBackend();

/// The learning rate of (0-based) step `step` of `steps`.
double scheduledLearningRate(const TrainOptions &options, int64_t step);

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_TRAINER_H
