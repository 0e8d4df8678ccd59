//===- TrainerRun.h - one rank's training run (private) ---------*- C++ -*-===//
//
// The Run class that partition-run's training loop is: Trainer.cpp creates
// it (communicators, backend, batch shape), RunLoop.cpp runs the steps
// (execute), RunState.cpp initialises, checkpoints and compares its state,
// Logits.cpp dumps the logits. Private to those files; the public entry points are in Trainer.h.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_TRAINERRUN_H
#define PARTITION_RUNTIME_TRAINERRUN_H

#include "runtime/backend/Backend.h"
#include "runtime/program/Program.h"
#include "runtime/train/ReplicaGradients.h"
#include "runtime/backend/Trace.h"
#include "runtime/train/Trainer.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/data/BatchLoader.h"

#include <fstream>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace partition::runtime::detail {

namespace data = partition::runtime::data;

/// What to change when --evaluate's (and --dump-logits') data is too small
/// for one batch.
inline constexpr const char *kEvaluateAdvice =
    "use more data or a smaller batch or sequence length";

/// The stop flag of a failed --metrics-out write: above every signal
/// number, so that it wins the all-reduce (max) over an interruption.
constexpr int kStopForMetrics = 1000;

/// The one buffer of `role` in `buffers`, or null.
const BufferInfo *findRole(const std::vector<BufferInfo> &buffers, Role role);

/// A checkpointed tensor: its name, the first stage that holds it (which
/// saves it) and its buffer there, and this rank's own buffer of it (null
/// when this rank's stage does not hold it).
struct CheckpointEntry {
  std::string name;
  size_t holder = 0;
  const BufferInfo *holderBuffer = nullptr;
  const BufferInfo *mine = nullptr;
};

/// NTP: the whole program and the replica this rank runs. The Run then
/// executes the replica's program on the replica's ranks (its `world`) and
/// uses the job's world for what spans the replicas: the exact gradient
/// sum, the weighted loss, stopping, reports and the trace.
struct ReplicaRun {
  const Program &loaded;
  size_t index;
};

class Run {
public:
  Run(const TrainOptions &options, const Program &loaded,
      comm::Communicator &world, comm::Communicator &global,
      const ReplicaRun *replicaRun = nullptr);

  TrainResult execute();

  /// --trace: checks (rank 0) that the file can be written, then starts
  /// every rank's clock after one world barrier and records from now on
  /// (each training step then as --trace-steps says: traceStep).
  void startTrace() {
    if (leader) {
      std::ofstream probe(options.trace, std::ios::trunc);
      if (!probe)
        throw ProgramError(options.trace +
                           ": cannot write the trace (--trace); check that "
                           "its directory exists and is writable");
    }
    if (global.size() > 1)
      global.barrier({"trace start", -1});
    trace = std::make_unique<TraceRecorder>(TraceRecorder::Clock::now());
    tracing = trace.get();
    backend->setTrace(tracing);
  }
  /// Records training step `step` (and the evaluation after it) when
  /// --trace-steps includes it: the trace of a long run holds its window,
  /// not every step (each rank keeps its spans until the end).
  void traceStep(int64_t step) {
    if (!trace)
      return;
    bool inWindow = step >= options.traceFirst &&
                    (options.traceLast == 0 || step <= options.traceLast);
    tracing = inWindow ? trace.get() : nullptr;
    backend->setTrace(tracing);
  }
  /// Rank 0 gathers every rank's spans and writes the trace.
  void finishTrace() {
    tracing = nullptr;
    backend->setTrace(nullptr);
    std::string name = "rank " + std::to_string(global.rank());
    if (program.streams.size() > 1)
      name += " (stage " + std::to_string(program.stream) + ")";
    if (replicaRun)
      name += " (replica " + std::to_string(replicaRun->index) + ")";
    try {
      writeTrace(options.trace, *trace, name, global);
    } catch (const std::runtime_error &error) {
      throw ProgramError(error.what());
    }
    if (!quiet)
      std::printf("trace: %s (%d rank%s, open it in ui.perfetto.dev)\n",
                  options.trace.c_str(), global.size(),
                  global.size() == 1 ? "" : "s");
  }

private:
  /// chooseBackend on every rank, then the same answer everywhere: the CPU
  /// when any rank's auto chose it (a node with too few devices).
  std::string agreeOnBackend();
  /// The CUDA backend on device options.nodeRank, with NCCL communicators
  /// for the program's collectives, the offload's tiers as `offload` says.
  void createCuda(const OffloadOptions &offload);
  void initialise();
  void restore(const std::string &dir);
  /// --init-from: the parameters of the checkpoint in `dir`; moments and
  /// step stay zero.
  void initialiseFrom(const std::string &dir);
  void save(const std::string &dir, int64_t completed);
  /// Throws unless --save may replace what its directory holds: nothing, a
  /// training checkpoint, or (with --init-from that directory) the weights
  /// this run starts from; --force allows anything.
  void checkSaveReplaces() const;
  /// Throws unless every data-parallel replica holds the same state.
  void checkReplicas(const char *after);
  /// This rank's block of `logical`, the whole of `buffer`'s tensor.
  std::vector<float> ownBlock(const BufferInfo &buffer,
                              std::vector<float> logical) const;
  /// The whole tensor of a sharded `buffer`, gathered from the ranks that
  /// hold its blocks (collective over them).
  std::vector<float> gatherLogical(const BufferInfo &buffer,
                                   const std::vector<float> &block,
                                   int64_t step,
                                   const char *purpose = "--save");
  void feed(const data::Batch &global);
  /// The loss of the function just run: this rank's loss buffer, or with
  /// pipeline stages the last stage's, broadcast to every rank.
  float readLoss(int64_t step) {
    float value = 0;
    if (loss)
      backend->read(*loss, &value);
    if (replicaRun) {
      // Each replica's loss is the mean over its rows: the global batch's
      // is their sum weighted by the replicas' shares (one rank of each).
      value = world.rank() == 0 ? float(replicaWeight * value) : 0.0f;
      global.allReduce(&value, 1, comm::ReduceOp::Sum,
                       {"loss of the replicas", step});
      return value;
    }
    if (program.streams.size() > 1)
      world.broadcast(&value, 1, lossRoot,
                      {"loss from the last stage", step, lossPeer.c_str()});
    return value;
  }
  /// What a checkpoint holds: every logical tensor once, parameters then
  /// AdamW moments, over every stage.
  std::vector<CheckpointEntry> checkpointEntries() const;
  /// The world rank of stage `stage`'s rank with every other coordinate 0.
  /// Parameters held by more than one stage, counted once per extra copy.
  size_t tiedCopies() const {
    std::set<std::string> names;
    size_t copies = 0;
    for (auto [stage, index] : program.withRoleInStreams(Role::Param))
      copies += !names.insert(program.streams[stage].buffers[index].name).second;
    return copies;
  }
  int stageRootRank(size_t stage) const {
    int pp = program.pipelineAxisIndex();
    if (pp < 0)
      return 0;
    std::vector<int64_t> coordinates(meshShape.size(), 0);
    coordinates[pp] = int64_t(stage);
    return int(comm::meshRank(coordinates, meshShape));
  }
  /// execute()'s steps (RunLoop.cpp), sharing a Session: the data and the
  /// state (false: a finished job resumed, nothing to train); the metrics
  /// file, the trace and the opening line; one training step (false: the
  /// ranks agreed to stop); its loss, agreed with the last stage and the
  /// stop flag under pipeline stages; its metrics record and line; the
  /// final checkpoint and the report.
  struct Session;
  bool startUp(Session &session);
  void openOutputs(Session &session);
  bool trainStep(Session &session, int64_t s);
  float stepLoss(Session &session, int64_t s);
  void reportStep(Session &session, int64_t s, float lr, float value,
                  double ms, double cpuMs, bool last);
  /// A MoE model's routing in the step just run, summed over every rank
  /// (a world collective, on every rank alike): the metrics record's
  /// moe_dropped_fraction and moe_expert_tokens; null when the backend
  /// does not observe its routing (CUDA) or the model is dense.
  nlohmann::json routingRecord(int64_t step);
  TrainResult finish(Session &session);
  /// Every rank's peak memory: this rank's RSS and device bytes, every
  /// rank's (RSS, device), and with stages or replicas every rank's
  /// arenaUsed().
  struct MemoryPeaks {
    int64_t rss = 0, device = 0;
    std::vector<std::pair<int64_t, int64_t>> ranks;
    std::vector<int64_t> used;
  };
  /// The summary record in --metrics-out and the peak-memory lines
  /// (collective: every rank gathers the peaks).
  void writeSummary(Session &session);
  void printPeakMemory(const MemoryPeaks &memory) const;
  /// The mean eval loss over --eval-batches batches; NaN, with evalStop
  /// set, when an interrupt stopped it after a batch (all ranks agree after
  /// each batch, so that a long evaluation does not delay it).
  double evaluate(int64_t step);
  /// Rank 0: one warning line when `batches` exceeds the distinct batches
  /// of the held-out `loader` (an evaluation would wrap around).
  void warnIfEvalWraps(const data::BatchLoader &loader, int64_t batches) const;
  /// --evaluate and --dump-logits: the logits of the first batch (with
  /// --dump-logits), one evaluation of evalBatches batches at the start
  /// state with its line and metrics record (with --evaluate), the
  /// summary; no update, no checkpoint.
  TrainResult evaluateOnly(Session &session);
  /// --dump-logits: runs logits_step on the first batch of the data and
  /// writes it, its targets and the gathered logits to the .npz (rank 0).
  void dumpLogits(int64_t step);
  /// The logical [batch, seq, vocab] logits of the logits_step just run
  /// (a padded vocabulary cut back), in the batch's row order, on rank 0:
  /// every micro-batch's buffer gathered on the last pipeline stage, whose
  /// first rank hands them to rank 0; under NTP, each replica's rows from
  /// its first rank.
  std::vector<float> gatherLogits(int64_t step);
  /// "cpu", or "cpu x 4 ranks (mesh dp=2 pp=1 tp=2)": where the run runs.
  std::string describeWhere() const;
  /// Batches per evaluation: --eval-batches, or with --evaluate and no
  /// --eval-batches every whole batch of the data once.
  int64_t evalBatches = 0;
  /// The signal that cut the last evaluation short, or 0.
  int evalStop = 0;
  /// After step `step`: the largest of every rank's `local` stop flag (0:
  /// carry on; a signal number; kStopForMetrics), so that all ranks stop
  /// after the same step. One all-reduce of one float on many ranks.
  int agreeToStop(int local, int64_t step);
  /// Every rank's (peak RSS, device bytes), gathered on all ranks.
  std::vector<std::pair<int64_t, int64_t>> gatherPeaks(int64_t rss,
                                                       int64_t device);
  /// Every rank's `bytes` (at most 2^48), gathered on all ranks; `what`
  /// names the collective in traces and errors.
  std::vector<int64_t> gatherBytes(int64_t bytes, const char *what);
  /// The arena this rank's instructions really address: the end of the
  /// highest buffer an instruction of a function that ran reads or writes,
  /// in the memory plan's 64-byte lines (every buffer starts on one). With
  /// a right memory plan, its stage's arena_peak.
  int64_t arenaUsed() const;
  /// Whether eval_step ran (its buffers count in arenaUsed).
  bool evaluated = false;
  size_t functionIndex(const char *name) const {
    for (size_t i = 0; i < program.functions.size(); ++i)
      if (program.functions[i].name == name)
        return i;
    throw ProgramError(options.program + ": no function " + name);
  }

  const TrainOptions &options;
  /// The loaded program with this rank's stream selected.
  Program program;
  /// The ranks that run `program` (NTP: this rank's replica), and every
  /// rank of the job (the same communicator without replicas).
  comm::Communicator &world;
  comm::Communicator &global;
  const ReplicaRun *replicaRun;
  /// NTP: this replica's rows of each global batch (first, count), its
  /// share of the batch, and the gradient sum across replicas.
  std::pair<int64_t, int64_t> replicaRows{0, 0};
  double replicaWeight = 1;
  std::unique_ptr<ReplicaGradientSum> replicaSum;
  /// Rank 0 prints, writes metrics and checkpoints.
  bool leader;
  bool quiet;
  /// This stage's buffers of each role; null where its stream has none (a
  /// later pipeline stage takes no tokens, an earlier one no targets and
  /// no loss).
  const BufferInfo *tokens, *targets, *loss;
  /// The first stage's tokens buffer: the batch's shape and layout.
  const BufferInfo &batchShape;
  /// Pipeline: the world rank that broadcasts the last stage's loss, and
  /// whether this rank is its stage's rank with every other coordinate 0
  /// (the one that hands its stage's tensors to rank 0 for --save).
  int lossRoot = 0;
  bool stageRoot = true;
  /// Names the last stage in the messages of the loss's collective.
  std::string lossPeer;
  /// --trace: every rank's spans (rank 0 writes them at the end).
  std::unique_ptr<TraceRecorder> trace;
  /// `trace` while the step being run is in --trace-steps' window, else null.
  TraceRecorder *tracing = nullptr;
  std::unique_ptr<comm::MeshCommunicators> mesh;
  /// CUDA backend: the NCCL world and its groups for the program's
  /// collectives (host-side checks keep using `mesh`); declared before
  /// `backend`, which uses them, so they outlive it.
  std::unique_ptr<comm::Communicator> deviceWorld;
  std::unique_ptr<comm::MeshCommunicators> deviceMesh;
  /// "cpu", or "cuda device D (NAME)".
  std::string backendDescription = "cpu";
  /// The sizes of the mesh's axes; empty without a mesh.
  std::vector<int64_t> meshShape;
  std::unique_ptr<Backend> backend;
  int64_t dpRank = 0, dpSize = 1;
  comm::Communicator *dpGroup = nullptr;
  int64_t localBatch = 0, batch = 0, seq = 0, vocab = 0, layers = 0;
  /// A mixture-of-experts model's experts, top-k and MoE layers (0: dense).
  int64_t experts = 0, topK = 0, moeLayers = 0;
  std::unique_ptr<data::BatchLoader> trainLoader;
  data::TokenRange evalRange;
  int64_t startStep = 0;
};

} // namespace partition::runtime::detail

#endif // PARTITION_RUNTIME_TRAINERRUN_H
