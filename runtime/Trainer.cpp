//===- Trainer.cpp - the training loop of partition-run -------------------===//

#include "runtime/Trainer.h"

#include "runtime/ReplicaGradients.h"

#include "runtime/Backend.h"
#include "runtime/Init.h"
#include "runtime/Interrupt.h"
#include "runtime/MetricsFile.h"
#include "runtime/Program.h"
#include "runtime/Sharding.h"
#include "runtime/Trace.h"
#include "runtime/checkpoint/Checkpoint.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/comm/SelfCommunicator.h"
#include "runtime/device/CudaProbe.h"
#include "runtime/data/BatchLoader.h"
#include "runtime/data/DataError.h"
#include "runtime/data/SyntheticLanguage.h"
#ifdef PARTITION_HAVE_CUDA_BACKEND
#include "runtime/cuda/CudaBackend.h"
#include <cuda_runtime_api.h>
#ifdef PARTITION_HAVE_NCCL
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"
#endif
#endif

#include <nlohmann/json.hpp>

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <set>

namespace partition::runtime {

bool haveCudaBackend() {
#ifdef PARTITION_HAVE_CUDA_BACKEND
  return true;
#else
  return false;
#endif
}

std::string chooseBackend(const std::string &requested, bool quiet,
                          int nodeRanks) {
  if (requested == "cpu")
    return "cpu";
  device::CudaDevices cuda = device::probeCudaDevices();
  std::string tooFew =
      std::to_string(nodeRanks) + " ranks on this node but " +
      std::to_string(cuda.count) +
      " CUDA device(s): NCCL needs a device per rank";
  if (requested == "cuda") {
    if (cuda.count == 0)
      throw ProgramError("--backend cuda: no usable CUDA device (" +
                         cuda.reason + "); run with --backend cpu");
    if (!haveCudaBackend())
      throw ProgramError("--backend cuda: " + std::to_string(cuda.count) +
                         " CUDA device(s) visible, but this partition-run "
                         "was built without the CUDA backend (no CUDA "
                         "toolkit at build time); run with --backend cpu");
    if (cuda.count < nodeRanks)
      throw ProgramError("--backend cuda: " + tooFew + "; launch at most " +
                         std::to_string(cuda.count) +
                         " ranks per node, or run with --backend cpu");
    return "cuda";
  }
  if (cuda.count == 0)
    return "cpu";
  if (haveCudaBackend() && cuda.count >= nodeRanks)
    return "cuda";
  if (!quiet)
    std::fprintf(stderr, "partition-run: %s; running on the CPU\n",
                 haveCudaBackend()
                     ? tooFew.c_str()
                     : (std::to_string(cuda.count) +
                        " CUDA device(s) visible, but this partition-run "
                        "was built without the CUDA backend")
                           .c_str());
  return "cpu";
}

double scheduledLearningRate(const TrainOptions &options, int64_t step) {
  int64_t warmup = options.warmup >= 0 ? options.warmup : options.steps / 10;
  if (step < warmup)
    return options.lr * double(step + 1) / double(warmup);
  int64_t decaySteps = std::max<int64_t>(options.steps - warmup - 1, 1);
  double progress = std::min(1.0, double(step - warmup) / double(decaySteps));
  double cosine = 0.5 * (1.0 + std::cos(M_PI * progress));
  double minLr = options.lr * options.minLrRatio;
  return minLr + (options.lr - minLr) * cosine;
}

namespace {

namespace data = partition::runtime::data;
namespace ckpt = partition::runtime::checkpoint;

/// Tokens the built-in language generates for training and evaluation: a
/// fixed amount, so that runs of any length read the same data.
constexpr int64_t kSyntheticTrainTokens = 1 << 21;
constexpr int64_t kSyntheticEvalTokens = 1 << 16;

data::Split loadData(const TrainOptions &options, int64_t vocab,
                     int64_t windowTokens) {
  if (!options.data.empty() && !options.text.empty())
    throw data::DataError("give --data or --text, not both");
  if (options.data.empty() && options.text.empty()) {
    data::SyntheticLanguage language(vocab);
    int64_t train = std::max(kSyntheticTrainTokens, 4 * windowTokens);
    int64_t eval = std::max(kSyntheticEvalTokens, 2 * windowTokens);
    return data::makeSyntheticSplit(language, train, eval);
  }
  auto stream = std::make_shared<data::TokenStream>(
      options.text.empty()
          ? data::readTokenFile(options.data,
                                data::parseFormat(options.dataFormat))
          : data::readTextFile(options.text));
  data::validateVocab(*stream, vocab);
  return data::splitTrainEval(stream, options.evalFraction);
}

/// The stop flag of a failed --metrics-out write: above every signal
/// number, so that it wins the all-reduce (max) over an interruption.
constexpr int kStopForMetrics = 1000;

/// The groups of mesh axes the run needs: those of the program's
/// collectives, those that hold the blocks of a sharded buffer (gathered
/// for --save), and the dp axis's, over which the replicas are compared.
/// Communicators are split from the world by every rank alike, so the
/// groups are those of every stage's stream, not only this rank's.
std::vector<std::vector<uint32_t>> neededGroups(const Program &program) {
  std::vector<std::vector<uint32_t>> groups;
  for (const Stream &stream : program.streams) {
    for (const Function &function : stream.functions)
      for (const Instruction &instruction : function.instructions)
        if (instruction.collective)
          groups.push_back(instruction.collective->axes);
    for (const BufferInfo &buffer : stream.buffers)
      if (buffer.sharded())
        groups.push_back(buffer.stateGroup());
  }
  if (int dp = program.dataAxisIndex(); dp >= 0)
    groups.push_back({static_cast<uint32_t>(dp)});
  return groups;
}

/// The groups the program's collectives run over (the device
/// communicators' splits).
std::vector<std::vector<uint32_t>> collectiveGroups(const Program &program) {
  std::vector<std::vector<uint32_t>> groups;
  for (const Stream &stream : program.streams)
    for (const Function &function : stream.functions)
      for (const Instruction &instruction : function.instructions)
        if (instruction.collective)
          groups.push_back(instruction.collective->axes);
  return groups;
}

/// The ordered pairs of stages (sender, receiver) that any stream's
/// transfers connect: each gets a communicator of its own.
std::vector<std::pair<int64_t, int64_t>> transferPairs(const Program &program) {
  std::vector<std::pair<int64_t, int64_t>> pairs;
  for (size_t k = 0; k < program.streams.size(); ++k)
    for (const Function &function : program.streams[k].functions)
      for (const Instruction &instruction : function.instructions)
        if (const auto &transfer = instruction.transfer)
          pairs.push_back(transfer->send
                              ? std::make_pair(int64_t(k), transfer->peer)
                              : std::make_pair(transfer->peer, int64_t(k)));
  return pairs;
}

std::vector<comm::MeshAxisSize> meshSizes(const Program &program);

/// The communicators of a program: the groups its collectives and sharded
/// state need, and a pair per connected pair of stages.
std::unique_ptr<comm::MeshCommunicators>
meshCommunicators(comm::Communicator &world, const Program &program,
                  const std::vector<std::vector<uint32_t>> &groups) {
  auto mesh = std::make_unique<comm::MeshCommunicators>(
      world, meshSizes(program), groups);
  if (int pp = program.pipelineAxisIndex(); pp >= 0)
    mesh->addTransferPairs(static_cast<uint32_t>(pp), transferPairs(program));
  return mesh;
}

/// The program with the stream of `rank`'s pipeline stage selected: its
/// coordinate on the pipeline axis (stream 0 without one).
Program stageProgram(const Program &loaded, const std::string &path,
                     int rank, int worldSize) {
  checkWorldSize(loaded, path, worldSize);
  Program program = loaded;
  if (int pp = program.pipelineAxisIndex(); pp >= 0) {
    std::vector<int64_t> sizes;
    for (const MeshAxis &axis : program.mesh)
      sizes.push_back(axis.size);
    program.selectStream(size_t(comm::meshCoordinates(rank, sizes)[pp]));
  }
  return program;
}

/// The one buffer of `role` in `buffers`, or null.
const BufferInfo *findRole(const std::vector<BufferInfo> &buffers, Role role) {
  for (const BufferInfo &buffer : buffers)
    if (buffer.role == role)
      return &buffer;
  return nullptr;
}

/// A checkpointed tensor: its name, the first stage that holds it (which
/// saves it) and its buffer there, and this rank's own buffer of it (null
/// when this rank's stage does not hold it).
struct CheckpointEntry {
  std::string name;
  size_t holder = 0;
  const BufferInfo *holderBuffer = nullptr;
  const BufferInfo *mine = nullptr;
};

std::vector<comm::MeshAxisSize> meshSizes(const Program &program) {
  std::vector<comm::MeshAxisSize> sizes;
  for (const MeshAxis &axis : program.mesh)
    sizes.push_back({axis.name, axis.size});
  return sizes;
}

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
      const ReplicaRun *replicaRun = nullptr)
      : options(options),
        program(stageProgram(loaded, options.program, world.rank(),
                             world.size())),
        world(world), global(global), replicaRun(replicaRun),
        leader(global.rank() == 0),
        quiet(options.quiet || !leader),
        tokens(findRole(program.buffers, Role::Tokens)),
        targets(findRole(program.buffers, Role::Targets)),
        loss(findRole(program.buffers, Role::Loss)),
        batchShape(*findRole(program.streams.front().buffers, Role::Tokens)) {
    if (batchShape.shape.size() != 2)
      throw ProgramError(options.program + ": the tokens buffer is not [B, T]");
    stageRoot = leader;
    // A step without an optimizer outputs gradients and never changes the
    // parameters: training with it would print a flat loss curve.
    if (!program.withRole(Role::Gradient).empty() ||
        program.withRole(Role::LearningRate).empty())
      throw ProgramError(options.program +
                         ": the program has no optimizer (compiled with "
                         "--optimizer none, it outputs gradients); compile "
                         "it with --optimizer adamw to train");
    if (!program.mesh.empty())
      mesh = meshCommunicators(world, program, neededGroups(program));
    std::string chosen = agreeOnBackend();
    // The gradient sum across replicas goes through host memory over MPI
    // and has not run on GPUs yet: refused there rather than untested.
    if (chosen == "cuda" && replicaRun)
      throw ProgramError(options.program +
                         ": nonuniform replicas run on the CPU backend only "
                         "(their gradient sum is not tested on GPUs); run "
                         "it with --backend cpu");
    if (chosen == "cuda")
      createCuda();
    else
      backend = createCpuBackend(program, mesh.get());
    if (mesh) {
      for (const comm::MeshAxisSize &axis : mesh->mesh())
        meshShape.push_back(axis.size);
      // The data axis is found by its role (#dist.plan), not its name.
      if (int dp = program.dataAxisIndex(); dp >= 0) {
        const std::string &axis = program.mesh[dp].name;
        dpRank = mesh->coordinate(axis);
        dpSize = mesh->axisSize(axis);
        dpGroup = mesh->group({static_cast<uint32_t>(dp)});
      }
      // Pipeline stages: the loss comes from the last one. Its rank with
      // every other coordinate 0 broadcasts it.
      if (int pp = program.pipelineAxisIndex(); pp >= 0) {
        std::vector<int64_t> coordinates(meshShape.size(), 0);
        coordinates[pp] = meshShape[pp] - 1;
        lossRoot = int(comm::meshRank(coordinates, meshShape));
        lossPeer = "(stage " + std::to_string(program.stream) +
                   ", from stage " + std::to_string(meshShape[pp] - 1) +
                   " = rank " + std::to_string(lossRoot) + ")";
        std::vector<int64_t> mine = mesh->coordinates();
        mine[pp] = 0;
        stageRoot =
            std::all_of(mine.begin(), mine.end(), [](int64_t c) { return c == 0; });
      }
    }
    // The tokens buffer (the first stage's: a later stage may have none)
    // holds this rank's block of the global batch the loader yields: its
    // rows for data parallelism (by the program's recorded layout, which
    // may split the sequence too).
    localBatch = batchShape.shape[0];
    batch = batchShape.sharded() ? batchShape.logicalShape()[0]
                                 : localBatch * dpSize;
    seq = batchShape.sharded() ? batchShape.logicalShape()[1]
                               : batchShape.shape[1];
    vocab = program.modelInt("vocab");
    layers = program.modelInt("layers");
    if (replicaRun) {
      // The loader yields global batches; feed() takes the replica's rows.
      const ReplicaProgram &replica = replicaRun->loaded.replicas[replicaRun->index];
      batch = 0;
      for (const ReplicaProgram &each : replicaRun->loaded.replicas)
        batch += each.batchRows;
      replicaRows = {replica.batchOffset, replica.batchRows};
      replicaWeight = double(replica.batchRows) / double(batch);
      replicaSum = std::make_unique<ReplicaGradientSum>(replicaRun->loaded,
                                                        program, global);
    }
    if (!program.function("eval_step") && options.evalEvery > 0 && !quiet)
      std::fprintf(stderr, "partition-run: the program has no eval_step; "
                           "no evaluation\n");
  }

  TrainResult execute();

  /// --trace: checks (rank 0) that the file can be written, then starts
  /// every rank's clock after one world barrier and records from now on.
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
    backend->setTrace(trace.get());
  }
  /// Rank 0 gathers every rank's spans and writes the trace.
  void finishTrace() {
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
  /// for the program's collectives.
  void createCuda();
  void initialise();
  void restore(const std::string &dir);
  /// --init-from: the parameters of the checkpoint in `dir`; moments and
  /// step stay zero.
  void initialiseFrom(const std::string &dir);
  void save(const std::string &dir, int64_t completed);
  /// Throws unless every data-parallel replica holds the same state.
  void checkReplicas(const char *after);
  /// This rank's block of `logical`, the whole of `buffer`'s tensor.
  std::vector<float> ownBlock(const BufferInfo &buffer,
                              std::vector<float> logical) const;
  /// The whole tensor of a sharded `buffer`, gathered from the ranks that
  /// hold its blocks (collective over them).
  std::vector<float> gatherLogical(const BufferInfo &buffer,
                                   const std::vector<float> &block,
                                   int64_t step);
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
  double evaluate(int64_t step);
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
  std::unique_ptr<data::BatchLoader> trainLoader;
  data::TokenRange evalRange;
  int64_t startStep = 0;
};

std::string Run::agreeOnBackend() {
  std::string choice = chooseBackend(options.backend, quiet, options.nodeRanks);
  if (global.size() == 1 || options.backend != "auto")
    return choice;
  float cpu = choice == "cpu" ? 1.0f : 0.0f;
  global.allReduce(&cpu, 1, comm::ReduceOp::Max, {"backend choice", -1});
  if (cpu > 0 && choice == "cuda" && leader && !options.quiet)
    std::fprintf(stderr, "partition-run: another node has too few CUDA "
                         "devices for its ranks; every rank runs on the "
                         "CPU\n");
  return cpu > 0 ? "cpu" : "cuda";
}

void Run::createCuda() {
#ifdef PARTITION_HAVE_CUDA_BACKEND
  device::CudaDevices devices = device::probeCudaDevices();
  // chooseBackend checked that the node has a device per rank.
  int device = options.nodeRank % std::max(devices.count, 1);
  if (program.hasCollectives()) {
#ifdef PARTITION_HAVE_NCCL
    comm::NcclOptions ncclOptions;
    ncclOptions.timeoutSeconds = options.commTimeoutSeconds;
    if (auto *mpi = dynamic_cast<comm::MpiCommunicator *>(&world))
      deviceWorld = comm::NcclCommunicator::world(*mpi, device, ncclOptions);
    else if (world.size() == 1)
      deviceWorld = comm::NcclCommunicator::single(device, ncclOptions);
    else
      throw ProgramError("the CUDA backend needs an MPI world for NCCL");
    deviceMesh =
        meshCommunicators(*deviceWorld, program, collectiveGroups(program));
#else
    throw ProgramError(options.program + " has collectives, but this "
                       "partition-run was built without NCCL; run it with "
                       "--backend cpu");
#endif
  }
  backend = createCudaBackend(program, deviceMesh.get(), device);
  cudaDeviceProp properties{};
  std::string name = "?";
  if (cudaGetDeviceProperties(&properties, device) == cudaSuccess)
    name = properties.name;
  backendDescription = "cuda device " + std::to_string(device) + " (" + name +
                       ")";
  if (world.size() > 1)
    backendDescription = "cuda (rank 0 on device " + std::to_string(device) +
                         ", " + name + "; each rank on the device of its "
                         "rank within its node)";
#else
  throw ProgramError("--backend cuda: this partition-run was built without "
                     "the CUDA backend");
#endif
}

/// The model description without what the plan decides (the padding of a
/// padded vocabulary), as checkpoints record it.
nlohmann::json planIndependent(nlohmann::json model) {
  model.erase("padded_vocab");
  model.erase("padded_params");
  return model;
}

int64_t elementsOf(const std::vector<int64_t> &shape) {
  int64_t elements = 1;
  for (int64_t dim : shape)
    elements *= dim;
  return elements;
}

/// `tensor` (buffer.tensorShape()) with the zero padding rows of a padded
/// vocabulary appended: buffer.logicalShape(). Rows are the first
/// dimension, so the padding is a suffix.
std::vector<float> padded(const BufferInfo &buffer,
                          std::vector<float> tensor) {
  tensor.resize(elementsOf(buffer.logicalShape()), 0.0f);
  return tensor;
}

std::vector<float> Run::ownBlock(const BufferInfo &buffer,
                                 std::vector<float> logical) const {
  if (!buffer.sharded())
    return logical;
  std::vector<float> block = std::move(logical);
  if (!buffer.sharding.empty()) {
    std::vector<float> part(elementsOf(buffer.blockShape()));
    extractBlock(block.data(), buffer.logicalShape(), buffer.blockShape(),
                 blockIndices(buffer.sharding, mesh->coordinates(), meshShape),
                 part.data());
    block = std::move(part);
  }
  if (!buffer.flat())
    return block;
  // ZeRO: this device's chunk of the flattened block, zero past its end.
  int64_t chunk = buffer.elements;
  int64_t index =
      blockIndices({buffer.flatAxes}, mesh->coordinates(), meshShape)[0];
  std::vector<float> shard(chunk, 0.0f);
  for (int64_t i = 0; i < chunk && index * chunk + i < int64_t(block.size());
       ++i)
    shard[i] = block[index * chunk + i];
  return shard;
}

std::vector<float> Run::gatherLogical(const BufferInfo &buffer,
                                      const std::vector<float> &block,
                                      int64_t step) {
  std::vector<uint32_t> axes = buffer.stateGroup();
  comm::Communicator &group = *mesh->group(axes);
  std::vector<float> blocks(size_t(buffer.elements) * group.size());
  std::string what = "gather '" + buffer.name + "' for --save";
  group.allGather(block.data(), blocks.data(), buffer.elements,
                  {what.c_str(), step});
  int64_t logicalElements = 1;
  for (int64_t dim : buffer.logicalShape())
    logicalElements *= dim;
  std::vector<float> logical(logicalElements);
  // A flat shard's members first rebuild their blocks from the chunks.
  int64_t blockElements = elementsOf(buffer.blockShape());
  std::map<std::vector<int64_t>, std::vector<float>> flatBlocks;
  for (int member = 0; member < group.size(); ++member) {
    std::vector<int64_t> coordinates = groupMemberCoordinates(
        mesh->coordinates(), axes, meshShape, member);
    std::vector<int64_t> index =
        blockIndices(buffer.sharding, coordinates, meshShape);
    const float *piece = blocks.data() + size_t(member) * buffer.elements;
    if (!buffer.flat()) {
      insertBlock(piece, buffer.shape, index, buffer.logicalShape(),
                  logical.data());
      continue;
    }
    std::vector<float> &block = flatBlocks[index];
    block.resize(blockElements);
    int64_t chunk = buffer.elements;
    int64_t at = blockIndices({buffer.flatAxes}, coordinates, meshShape)[0];
    for (int64_t i = 0; i < chunk && at * chunk + i < blockElements; ++i)
      block[at * chunk + i] = piece[i];
  }
  for (const auto &[index, block] : flatBlocks)
    insertBlock(block.data(), buffer.blockShape(), index,
                buffer.logicalShape(), logical.data());
  return logical;
}

void Run::initialise() {
  // Every rank computes the whole tensor, as one device does, and keeps its
  // block: every plan starts from the single-device parameters.
  for (size_t index : program.withRole(Role::Param)) {
    const BufferInfo &param = program.buffers[index];
    // A padded vocabulary's table: its real rows as one device has them,
    // then zero rows (which training keeps zero).
    std::vector<float> values = ownBlock(
        param, padded(param, initialParameter(param.name, param.tensorShape(),
                                              layers, options.seed)));
    backend->write(param, values.data());
  }
  // Moments and the step start at zero: the backend zeroes its arena.
}

std::vector<CheckpointEntry> Run::checkpointEntries() const {
  // Parameters, then AdamW moments, each named as checkpoints name them;
  // a tensor several stages hold (a tied embedding) once, from the first.
  std::vector<CheckpointEntry> entries;
  std::map<std::string, size_t> seen;
  for (Role role : {Role::Param, Role::Moment1, Role::Moment2}) {
    auto nameOf = [&](const BufferInfo &buffer) {
      return role == Role::Param     ? buffer.name
             : role == Role::Moment1 ? ckpt::adamMName(buffer.name)
                                     : ckpt::adamVName(buffer.name);
    };
    for (auto [stage, index] : program.withRoleInStreams(role)) {
      const BufferInfo &buffer = program.streams[stage].buffers[index];
      std::string name = nameOf(buffer);
      if (seen.emplace(name, entries.size()).second)
        entries.push_back({name, stage, &buffer, nullptr});
    }
    for (size_t index : program.withRole(role))
      entries[seen.at(nameOf(program.buffers[index]))].mine =
          &program.buffers[index];
  }
  return entries;
}

void Run::restore(const std::string &dir) {
  ckpt::Checkpoint checkpoint = ckpt::openCheckpoint(dir);
  if (!checkpoint.checksummed() && leader)
    std::fprintf(stderr,
                 "partition-run: warning: %s is a version %lld checkpoint, "
                 "written before checksums: its bytes cannot be verified "
                 "(its values are checked); the next --save writes them\n",
                 ckpt::checkpointFile(dir).c_str(),
                 static_cast<long long>(checkpoint.version));
  // The checkpoint holds each whole (logical) tensor, whatever the plan that
  // saved it: exactly the parameters and moments of this model, nothing
  // more (a checkpoint of a deeper model would otherwise lose its extra
  // layers silently).
  std::vector<CheckpointEntry> entries = checkpointEntries();
  // A padded vocabulary's table is saved without its padding rows
  // (tensorShape), and the model without what the plan decides.
  std::vector<ckpt::ExpectedTensor> expected;
  for (const CheckpointEntry &entry : entries)
    expected.push_back(
        {entry.name, ckpt::DType::F32, entry.holderBuffer->tensorShape()});
  ckpt::checkSameModel(checkpoint, planIndependent(program.model).dump());
  // A weights-only checkpoint (partition-import's) has no optimizer state
  // to continue: say how to start from it instead.
  if (!entries.empty() && checkpoint.tensors.contains(entries.front().name) &&
      !checkpoint.tensors.contains(ckpt::adamMName(entries.front().name)))
    throw ProgramError(ckpt::checkpointFile(dir) +
                       " holds weights only, no optimizer state to resume; "
                       "start from it with --init-from " + dir);
  ckpt::checkSameTensors(checkpoint, expected);
  // Every stage that holds a tensor loads it (both copies of a tied one).
  for (const CheckpointEntry &entry : entries) {
    const BufferInfo *buffer = entry.mine;
    if (!buffer)
      continue;
    std::vector<float> values(elementsOf(buffer->tensorShape()));
    // Verifies the tensor's checksum and that its values are finite.
    checkpoint.read(entry.name, ckpt::DType::F32, buffer->tensorShape(),
                    values.data(), values.size() * sizeof(float));
    backend->write(*buffer,
                   ownBlock(*buffer, padded(*buffer, std::move(values))).data());
  }
  startStep = checkpoint.state.step;
  for (size_t index : program.withRole(Role::Step)) {
    int32_t step = static_cast<int32_t>(startStep);
    backend->write(program.buffers[index], &step);
  }
  const ckpt::Metadata &metadata = checkpoint.tensors.metadata();
  trainLoader->seek(checkpoint.state.dataPosition,
                    metadata.count("data_epoch")
                        ? ckpt::integerMetadata(checkpoint.tensors,
                                                "data_epoch")
                        : 0);
  if (!quiet)
    std::printf("resumed from %s at step %lld\n", dir.c_str(),
                static_cast<long long>(startStep));
}

void Run::initialiseFrom(const std::string &dir) {
  ckpt::Checkpoint checkpoint = ckpt::openCheckpoint(dir);
  if (!checkpoint.checksummed() && leader)
    std::fprintf(stderr,
                 "partition-run: warning: %s is a version %lld checkpoint, "
                 "written before checksums: its bytes cannot be verified "
                 "(its values are checked)\n",
                 ckpt::checkpointFile(dir).c_str(),
                 static_cast<long long>(checkpoint.version));
  // What to do differs from --resume's: compile the checkpoint's model.
  const char *otherModel =
      "the checkpoint was written for another model; start from it with the "
      "program of that model (partition-import writes its model.mlir), or "
      "without --init-from";
  ckpt::checkSameModel(checkpoint, planIndependent(program.model).dump(),
                       otherModel);
  // The parameters, and the moments too when the checkpoint has them (a
  // training checkpoint): they are left unread, but anything else means
  // another model.
  // With pipeline stages the model's parameters are those of every stage
  // (checkpointEntries); this rank loads the ones its stage holds.
  std::vector<ckpt::ExpectedTensor> expected;
  std::vector<const BufferInfo *> all, params;
  for (const CheckpointEntry &entry : checkpointEntries())
    if (entry.holderBuffer->role == Role::Param) {
      all.push_back(entry.holderBuffer);
      if (entry.mine)
        params.push_back(entry.mine);
      expected.push_back(
          {entry.name, ckpt::DType::F32, entry.holderBuffer->tensorShape()});
    }
  if (!all.empty() &&
      checkpoint.tensors.contains(ckpt::adamMName(all.front()->name)))
    for (const BufferInfo *param : all)
      for (const std::string &moment :
           {ckpt::adamMName(param->name), ckpt::adamVName(param->name)})
        expected.push_back({moment, ckpt::DType::F32, param->tensorShape()});
  ckpt::checkSameTensors(checkpoint, expected, otherModel);
  for (const BufferInfo *param : params) {
    std::vector<float> values(elementsOf(param->tensorShape()));
    checkpoint.read(param->name, ckpt::DType::F32, param->tensorShape(),
                    values.data(), values.size() * sizeof(float));
    backend->write(*param,
                   ownBlock(*param, padded(*param, std::move(values))).data());
  }
  // Moments and the step start at zero (the backend zeroes its arena), the
  // data at its beginning: a fresh run from these weights.
  if (!quiet)
    std::printf("initialised from %s (weights of step %lld; fresh optimizer "
                "state, step 0)\n",
                dir.c_str(), static_cast<long long>(checkpoint.state.step));
}

void Run::save(const std::string &dir, int64_t completed) {
  // NTP: every replica holds every logical tensor (the same values after
  // each step); replica 0, whose first rank is rank 0, saves them.
  if (replicaRun && replicaRun->index != 0)
    return;
  // Parameters and moments, each a whole logical tensor named after its
  // parameter, read to the host and written in one atomic file.
  std::vector<CheckpointEntry> entries = checkpointEntries();
  // Every rank of the stage that holds a tensor takes part in the gathers
  // of its sharded buffers, in this order; that stage's first rank hands
  // the whole tensor to rank 0, which alone writes.
  std::vector<std::vector<float>> storage(entries.size());
  std::vector<ckpt::TensorRef> tensors;
  constexpr int kCheckpointTag = 12;
  for (size_t i = 0; i < entries.size(); ++i) {
    const CheckpointEntry &entry = entries[i];
    std::string what = "'" + entry.name + "' to rank 0 for --save";
    if (entry.holder == program.stream) {
      const BufferInfo &buffer = *entry.mine;
      if (!stageRoot && !buffer.sharded())
        continue;
      storage[i].resize(buffer.elements);
      backend->read(buffer, storage[i].data());
      if (buffer.sharded())
        storage[i] = gatherLogical(buffer, storage[i], completed);
      // The padding rows of a padded vocabulary are the last: cut them.
      storage[i].resize(elementsOf(buffer.tensorShape()));
      if (stageRoot && !leader) {
        world.sendEager(storage[i].data(), storage[i].size() * sizeof(float),
                        0, kCheckpointTag, {what.c_str(), completed});
        world.completeSends({what.c_str(), completed});
      }
    } else if (leader) {
      storage[i].resize(elementsOf(entry.holderBuffer->tensorShape()));
      world.recvBytes(storage[i].data(), storage[i].size() * sizeof(float),
                      stageRootRank(entry.holder), kCheckpointTag,
                      {what.c_str(), completed});
    }
    if (leader)
      tensors.push_back({entry.name, ckpt::DType::F32,
                         entry.holderBuffer->tensorShape(), storage[i].data(),
                         storage[i].size() * sizeof(float)});
    else
      storage[i] = {};
  }
  if (!leader)
    return;
  ckpt::TrainingState state{completed, trainLoader->position(), options.seed};
  ckpt::Metadata extra{{"data_epoch", std::to_string(trainLoader->epoch())},
                       {"model", planIndependent(program.model).dump()}};
  ckpt::saveCheckpoint(dir, tensors, state, extra);
}

/// FNV-1a over the bytes of a buffer, continuing from `hash`.
uint64_t fnv1a(const std::vector<uint8_t> &bytes, uint64_t hash) {
  for (uint8_t byte : bytes)
    hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

void Run::checkReplicas(const char *after) {
  // Initialisation depends only on (seed, name, shape), so replicas agree by
  // construction; a difference means ranks were given other seeds,
  // checkpoints or binaries. Comparing a hash (one all-reduce of 8 floats)
  // finds that, where broadcasting rank 0's state, as PyTorch DDP does,
  // would cost a copy of the whole state and hide the mistake.
  // NTP: the holders of each logical box, across replicas of different
  // degrees, compare it group by group.
  if (replicaSum && !replicaSum->sameState(*backend, startStep))
    throw ProgramError(
        std::string("the nonuniform replicas hold different parameters "
                    "after ") +
        after +
        "; start every rank with the same --seed, --resume checkpoint and "
        "partition-run binary");
  if (!dpGroup || dpGroup->size() == 1)
    return;
  uint64_t hash = 0xcbf29ce484222325ull;
  // A block split over dp differs between replicas by design: leave it out.
  // Blocks split over other axes are the same block on every replica.
  int dpAxis = program.dataAxisIndex();
  for (Role role : {Role::Param, Role::Moment1, Role::Moment2, Role::Step})
    for (size_t index : program.withRole(role)) {
      const BufferInfo &buffer = program.buffers[index];
      std::vector<uint32_t> axes = buffer.stateGroup();
      if (std::find(axes.begin(), axes.end(), uint32_t(dpAxis)) != axes.end())
        continue;
      std::vector<uint8_t> bytes(buffer.bytes);
      backend->read(buffer, bytes.data());
      hash = fnv1a(bytes, hash);
    }
  // 16-bit pieces are exact in a float; max of x and of -x give the
  // largest and the smallest value over the group.
  float pieces[8];
  for (int i = 0; i < 4; ++i) {
    pieces[i] = float((hash >> (16 * i)) & 0xffff);
    pieces[4 + i] = -pieces[i];
  }
  dpGroup->allReduce(pieces, 8, comm::ReduceOp::Max,
                     {"replica check", startStep});
  for (int i = 0; i < 4; ++i)
    if (pieces[i] != -pieces[4 + i])
      throw ProgramError(
          std::string("the data-parallel replicas hold different parameters "
                      "after ") +
          after +
          "; start every rank with the same --seed, --resume checkpoint and "
          "partition-run binary");
}

void Run::feed(const data::Batch &whole) {
  // NTP: this replica's rows, which its program sees as its whole batch.
  const data::Batch &global =
      replicaRun ? whole.rows(replicaRows.first,
                              replicaRows.first + replicaRows.second)
                 : whole;
  if (!batchShape.sharded()) {
    data::Batch next =
        dpSize == 1 ? global : data::rankSlice(global, dpRank, dpSize);
    if (tokens)
      backend->write(*tokens, next.inputs.data());
    if (targets)
      backend->write(*targets, next.targets.data());
    return;
  }
  // This rank's [rows, positions] block, as the program lays it out.
  auto block = [&](const BufferInfo &buffer,
                   const std::vector<int32_t> &whole) {
    std::vector<int64_t> index =
        blockIndices(buffer.sharding, mesh->coordinates(), meshShape);
    int64_t rows = buffer.shape[0], columns = buffer.shape[1];
    std::vector<int32_t> local(rows * columns);
    for (int64_t r = 0; r < rows; ++r)
      std::copy_n(whole.begin() + (index[0] * rows + r) * global.seq +
                      index[1] * columns,
                  columns, local.begin() + r * columns);
    return local;
  };
  if (tokens)
    backend->write(*tokens, block(*tokens, global.inputs).data());
  if (targets)
    backend->write(*targets, block(*targets, global.targets).data());
}

double Run::evaluate(int64_t step) {
  size_t eval = functionIndex("eval_step");
  data::BatchLoader loader(evalRange, batch, seq);
  double total = 0;
  evaluated = true;
  for (int64_t i = 0; i < options.evalBatches; ++i) {
    feed(loader.nextBatch());
    auto start = TraceRecorder::Clock::now();
    backend->run(eval, step);
    if (trace)
      trace->add("eval_step", "function", start, step, {}, 0, /*tid=*/1);
    total += readLoss(step);
  }
  return total / double(options.evalBatches);
}

int64_t Run::arenaUsed() const {
  constexpr uint64_t kLine = 64;
  uint64_t end = 0;
  for (const Function &function : program.functions) {
    if (function.name != "train_step" &&
        !(evaluated && function.name == "eval_step"))
      continue;
    for (const Instruction &instruction : function.instructions)
      for (uint32_t arg : instruction.args) {
        const BufferInfo &buffer = program.buffers[arg];
        end = std::max(end, buffer.offset + buffer.bytes);
      }
  }
  return int64_t((end + kLine - 1) / kLine * kLine);
}

std::vector<int64_t> Run::gatherBytes(int64_t bytes, const char *what) {
  // Two 24-bit halves: exact in floats up to 256 TiB.
  float mine[2] = {float(bytes >> 24), float(bytes & 0xffffff)};
  std::vector<float> all(2 * size_t(global.size()));
  global.allGather(mine, all.data(), 2, {what, -1});
  std::vector<int64_t> result;
  for (int r = 0; r < global.size(); ++r)
    result.push_back((int64_t(all[2 * r]) << 24) + int64_t(all[2 * r + 1]));
  return result;
}

std::vector<std::pair<int64_t, int64_t>> Run::gatherPeaks(int64_t rss,
                                                          int64_t device) {
  // Two 24-bit halves per value: exact in floats up to 256 TiB.
  float mine[4] = {float(rss >> 24), float(rss & 0xffffff),
                   float(device >> 24), float(device & 0xffffff)};
  std::vector<float> all(4 * size_t(global.size()));
  global.allGather(mine, all.data(), 4, {"peak memory", -1});
  std::vector<std::pair<int64_t, int64_t>> result;
  for (int r = 0; r < global.size(); ++r)
    result.push_back(
        {(int64_t(all[4 * r]) << 24) + int64_t(all[4 * r + 1]),
         (int64_t(all[4 * r + 2]) << 24) + int64_t(all[4 * r + 3])});
  return result;
}

int Run::agreeToStop(int local, int64_t step) {
  if (global.size() == 1)
    return local;
  float flag = float(local);
  global.allReduce(&flag, 1, comm::ReduceOp::Max, {"stop flag", step});
  return int(flag);
}

TrainResult Run::execute() {
  // An unusable --save directory fails now, not after the training.
  if (leader && !options.save.empty())
    ckpt::checkSaveDirectory(options.save);
  data::Split split = loadData(options, vocab, batch * seq + 1);
  trainLoader = std::make_unique<data::BatchLoader>(split.train, batch, seq);
  evalRange = split.eval;
  bool canEvaluate = program.function("eval_step") && options.evalEvery > 0 &&
                     options.evalBatches > 0;
  if (canEvaluate)
    data::BatchLoader(evalRange, batch, seq); // Fails early if too small.

  if (!options.resume.empty())
    restore(options.resume);
  else if (!options.initFrom.empty())
    initialiseFrom(options.initFrom);
  else
    initialise();
  checkReplicas(!options.resume.empty()     ? "--resume"
                : !options.initFrom.empty() ? "--init-from"
                                            : "initialisation");

  int64_t end = options.stopAfter > 0
                    ? std::min(options.steps, options.stopAfter)
                    : options.steps;
  if (!options.resume.empty() && startStep >= end) {
    // A finished job started again (a scheduler retrying a script): there
    // is nothing to do, and saving or truncating --metrics-out would only
    // lose what the earlier run wrote.
    bool byStopAfter = options.stopAfter > 0 && options.stopAfter < options.steps;
    std::fflush(stdout);
    if (leader)
      std::fprintf(stderr,
                   "partition-run: nothing to train: the checkpoint in %s is "
                   "at step %lld and %s is %lld; raise %s to train further\n",
                   options.resume.c_str(), static_cast<long long>(startStep),
                   byStopAfter ? "--stop-after" : "--steps",
                   static_cast<long long>(end),
                   byStopAfter ? "--stop-after" : "--steps");
    return {};
  }

  std::unique_ptr<MetricsFile> metrics =
      leader && !options.metricsOut.empty()
          ? std::make_unique<MetricsFile>(options.metricsOut)
          : nullptr;
  if (!options.trace.empty())
    startTrace();
  size_t step = functionIndex("train_step");
  // NTP: the step stops before the optimizer, which runs once the
  // gradients are summed across the replicas.
  size_t update = replicaSum ? functionIndex("train_step_update") : step;
  const BufferInfo *lrBuffer = nullptr;
  if (!program.withRole(Role::LearningRate).empty())
    lrBuffer = &program.single(Role::LearningRate);

  std::string where = backendDescription;
  if (global.size() > 1 || !program.mesh.empty())
    where += " x " + std::to_string(global.size()) +
             (global.size() == 1 ? " rank (" : " ranks (") +
             (replicaRun ? replicaRun->loaded.describeMesh()
                         : program.describeMesh()) +
             ")";
  if (!quiet)
    std::printf("partition-run: %s on %s, %lld steps of %lld x %lld tokens, "
                "%zu parameter tensors\n",
                options.program.c_str(), where.c_str(),
                static_cast<long long>(options.steps),
                static_cast<long long>(batch), static_cast<long long>(seq),
                program.withRoleInStreams(Role::Param).size() -
                    tiedCopies());

  int64_t completed = startStep;
  // The agreed stop flag (agreeToStop) and, on rank 0, why its metrics
  // file failed.
  int stop = 0;
  std::string metricsFailure;
  for (int64_t s = startStep; s < end; ++s) {
    float lr = static_cast<float>(scheduledLearningRate(options, s));
    feed(trainLoader->nextBatch());
    if (lrBuffer)
      backend->write(*lrBuffer, &lr);
    auto start = std::chrono::steady_clock::now();
    backend->run(step, s + 1);
    if (replicaSum) {
      auto summing = TraceRecorder::Clock::now();
      replicaSum->sum(*backend, s + 1);
      if (trace)
        trace->add("replica gradient sum", "collective", summing, s + 1,
                   std::to_string(replicaSum->groupsOfRank()) + " of " +
                       std::to_string(replicaSum->groups()) + " groups");
      backend->run(update, s + 1);
    }
    if (trace)
      trace->add("train_step", "function", start, s + 1, {}, 0, /*tid=*/1);
    // With pipeline stages the step ends when the last stage's loss
    // arrives: the time includes the pipeline's drain. The same world
    // collective agrees on stopping (agreeToStop without a pipeline), so
    // that the only waits of a rank on another stage are its transfers and
    // this one, each named after the stage it waits for.
    float value = 0;
    if (program.streams.size() > 1) {
      // Max over ranks: the stop flag, the loss (the others give -inf), and
      // whether it is NaN (which a max would not carry).
      float agreed[3] = {float(metricsFailure.empty() ? pendingInterrupt()
                                                      : kStopForMetrics),
                         -std::numeric_limits<float>::infinity(), 0.0f};
      if (loss) {
        backend->read(*loss, &agreed[1]);
        if (std::isnan(agreed[1]))
          agreed[1] = -std::numeric_limits<float>::infinity(), agreed[2] = 1;
      }
      world.allReduce(agreed, 3, comm::ReduceOp::Max,
                      {"loss from the last stage", s + 1, lossPeer.c_str()});
      stop = int(agreed[0]);
      value = agreed[2] > 0 ? std::numeric_limits<float>::quiet_NaN()
                            : agreed[1];
    } else {
      value = readLoss(s + 1);
    }
    double ms = std::chrono::duration<double, std::milli>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    if (!std::isfinite(value))
      throw ProgramError("the loss is " + std::to_string(value) +
                         " at step " + std::to_string(s + 1) +
                         "; lower --lr");
    double tokensPerSecond = double(batch * seq) / (ms / 1000.0);

    nlohmann::json record = {{"step", s + 1},
                             {"loss", value},
                             {"lr", lr},
                             {"step_ms", ms},
                             {"tokens_per_s", tokensPerSecond}};
    bool last = s + 1 == end;
    if (canEvaluate && ((s + 1) % options.evalEvery == 0 || last))
      record["eval_loss"] = evaluate(s + 1);
    if (metrics && metricsFailure.empty()) {
      try {
        metrics->writeLine(record.dump());
      } catch (const MetricsError &error) {
        metricsFailure = error.what();
      }
    }
    if (!quiet) {
      std::printf("step %5lld/%lld | loss %.4f | lr %.2e | %8.1f ms | %9.0f "
                  "tok/s",
                  static_cast<long long>(s + 1),
                  static_cast<long long>(options.steps), value, lr, ms,
                  tokensPerSecond);
      if (record.contains("eval_loss"))
        std::printf(" | eval %.4f", record["eval_loss"].get<double>());
      std::printf("\n");
      std::fflush(stdout);
    }
    completed = s + 1;
    if (program.streams.size() == 1)
      stop = agreeToStop(metricsFailure.empty() ? pendingInterrupt()
                                                : kStopForMetrics,
                         completed);
    if (stop)
      break;
    // Every rank saves: sharded buffers are gathered from their holders.
    // Rank 0 writes; the others wait for it at the next collective.
    if (!options.save.empty() && options.saveEvery > 0 &&
        (s + 1) % options.saveEvery == 0 && !last)
      save(options.save, s + 1);
  }
  if (!options.save.empty())
    save(options.save, completed);
  if (trace)
    finishTrace();
  std::string saved = options.save.empty()
                          ? std::string("no checkpoint (no --save)")
                          : "the checkpoint of step " +
                                std::to_string(completed) + " is in " +
                                options.save;
  if (stop == kStopForMetrics) {
    // Only rank 0 knows the reason; the others end quietly, non-zero.
    if (leader)
      throw MetricsError(metricsFailure + "; stopped after step " +
                         std::to_string(completed) + ", " + saved);
    return {0, true};
  }

  struct rusage usage;
  getrusage(RUSAGE_SELF, &usage);
  int64_t peakRss = static_cast<int64_t>(usage.ru_maxrss) * 1024;
  int64_t deviceBytes = static_cast<int64_t>(backend->deviceBytes());
  std::vector<std::pair<int64_t, int64_t>> peaks =
      gatherPeaks(peakRss, deviceBytes);
  // Pipeline stages and replicas have arenas of their own sizes: each
  // rank's, and the part of it its instructions really address.
  std::vector<int64_t> arenas, used;
  if (program.streams.size() > 1 || replicaRun) {
    arenas = gatherBytes(int64_t(program.arenaBytes), "arena bytes");
    used = gatherBytes(arenaUsed(), "arena used");
  }
  nlohmann::json ranks = nlohmann::json::array();
  for (size_t r = 0; r < peaks.size(); ++r) {
    nlohmann::json entry = {{"rank", r}, {"peak_rss_bytes", peaks[r].first}};
    if (!arenas.empty()) {
      entry["arena_bytes"] = arenas[r];
      entry["arena_used_bytes"] = used[r];
    }
    if (deviceBytes > 0)
      entry["device_bytes"] = peaks[r].second;
    ranks.push_back(entry);
  }
  nlohmann::json summary = {{"summary", true},
                            {"rank", 0},
                            {"world_size", global.size()},
                            {"backend", backend->name()},
                            {"arena_bytes", program.arenaBytes},
                            {"workspace_bytes", backend->workspaceBytes()},
                            {"peak_rss_bytes", peakRss},
                            {"ranks", ranks}};
  if (deviceBytes > 0)
    summary["device_bytes"] = deviceBytes;
  if (stop) {
    summary["interrupted"] = interruptName(stop);
    summary["steps_done"] = completed;
  }
  if (metrics) {
    metrics->writeLine(summary.dump());
    metrics->close();
  }
  if (!quiet) {
    std::printf("peak memory: arena %llu B, workspace %llu B, process RSS "
                "%lld B",
                static_cast<unsigned long long>(program.arenaBytes),
                static_cast<unsigned long long>(backend->workspaceBytes()),
                static_cast<long long>(peakRss));
    if (deviceBytes > 0)
      std::printf(", device %lld B (arena + workspaces)",
                  static_cast<long long>(deviceBytes));
    if (peaks.size() == 2)
      std::printf(" (rank 0); rank 1:");
    else if (peaks.size() > 2)
      std::printf(" (rank 0); ranks 1-%zu:", peaks.size() - 1);
    if (peaks.size() > 1) {
      for (size_t r = 1; r < peaks.size(); ++r) {
        std::printf(" %lld", static_cast<long long>(peaks[r].first));
        if (deviceBytes > 0)
          std::printf("/%lld", static_cast<long long>(peaks[r].second));
      }
      std::printf(deviceBytes > 0 ? " B (RSS/device)" : " B");
    }
    std::printf("\n");
    // Per pipeline stage: the arena its ranks' instructions address (every
    // rank of a stage runs the same stream; the largest if they differed).
    if (!used.empty()) {
      std::vector<int64_t> stages(program.streams.size(), 0);
      int pp = program.pipelineAxisIndex();
      for (size_t r = 0; r < used.size(); ++r) {
        size_t stage = pp < 0 ? 0
                              : size_t(comm::meshCoordinates(int64_t(r),
                                                             meshShape)[pp]);
        stages[stage] = std::max(stages[stage], used[r]);
      }
      std::printf("peak memory per pipeline stage (measured: the arena its "
                  "instructions address):");
      for (size_t stage = 0; stage < stages.size(); ++stage)
        std::printf("%s stage %zu arena %lld B", stage ? "," : "", stage,
                    static_cast<long long>(stages[stage]));
      std::printf("\n");
    }
  }
  if (stop && leader) {
    std::fflush(stdout);
    std::fprintf(stderr,
                 "partition-run: interrupted by %s: stopped after step %lld "
                 "of %lld, %s%s%s%s\n",
                 interruptName(stop), static_cast<long long>(completed),
                 static_cast<long long>(options.steps), saved.c_str(),
                 metrics ? ", metrics in " : "",
                 metrics ? options.metricsOut.c_str() : "",
                 options.save.empty()
                     ? ""
                     : ("; continue with --resume " + options.save).c_str());
    std::fflush(stderr);
  }
  // mpirun ends the job at the first non-zero exit: no rank exits 128 + N
  // before rank 0 has written its summary and its line.
  if (stop && global.size() > 1)
    global.barrier({"interrupted", completed});
  return {stop, false};
}

} // namespace

void checkWorldSize(const Program &program, const std::string &path,
                    int worldSize) {
  int64_t devices = program.devices();
  if (devices == worldSize)
    return;
  auto count = [](int64_t n, const char *one) {
    return std::to_string(n) + " " + one + (n == 1 ? "" : "s");
  };
  std::string message = path + " was compiled for " + count(devices, "device") +
                        " (" + program.describeMesh() + ") but runs on " +
                        count(worldSize, "rank") + "; ";
  if (devices == 1)
    message += "run it without a launcher, or compile it with --plan for " +
               count(worldSize, "device");
  else
    message += "launch it with mpirun -n " + std::to_string(devices) +
               " or partition-run --nproc " + std::to_string(devices);
  throw ProgramError(message);
}

TrainResult train(const TrainOptions &options, const Program &program,
                  comm::Communicator &world) {
  if (program.replicas.empty())
    return Run(options, program, world, world).execute();
  // NTP: ranks are numbered replica by replica; each runs its replica's
  // program on the replica's ranks, split from the world by every rank.
  checkWorldSize(program, options.program, world.size());
  auto [index, local] = program.replicaOf(world.rank());
  std::unique_ptr<comm::Communicator> replicaWorld =
      world.split(int(index), local, {"replica groups", -1});
  Program mine = splitAtOptimizer(*program.replicas[index].program);
  ReplicaRun replica{program, index};
  return Run(options, mine, *replicaWorld, world, &replica).execute();
}

TrainResult train(const TrainOptions &options) {
  Program program = Program::load(options.program);
  comm::SelfCommunicator self;
  return train(options, program, self);
}

} // namespace partition::runtime
