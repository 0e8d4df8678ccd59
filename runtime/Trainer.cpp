//===- Trainer.cpp - the training loop of partition-run -------------------===//
//
// A rank's Run (TrainerRun.h): its communicators, backend and batch shape,
// the step loop (data, learning rate, evaluation, checkpoints, stopping
// together) and its reports. Initialising and checkpointing the state is
// RunState.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/Trainer.h"
#include "runtime/TrainerRun.h"

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

namespace detail {

namespace {

/// What to change when the held-out split is too small for one batch.
const char *const kEvalAdvice =
    "use more data, a smaller batch or sequence length, a larger "
    "--eval-fraction, or --eval-every 0 to evaluate nothing";

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

std::vector<comm::MeshAxisSize> meshSizes(const Program &program) {
  std::vector<comm::MeshAxisSize> sizes;
  for (const MeshAxis &axis : program.mesh)
    sizes.push_back({axis.name, axis.size});
  return sizes;
}

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

} // namespace

/// The one buffer of `role` in `buffers`, or null.
const BufferInfo *findRole(const std::vector<BufferInfo> &buffers, Role role) {
  for (const BufferInfo &buffer : buffers)
    if (buffer.role == role)
      return &buffer;
  return nullptr;
}


Run::Run(const TrainOptions &options, const Program &loaded,
         comm::Communicator &world, comm::Communicator &global,
         const ReplicaRun *replicaRun)
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
  data::BatchLoader loader(evalRange, batch, seq, kEvalAdvice);
  double total = 0;
  evaluated = true;
  for (int64_t i = 0; i < options.evalBatches; ++i) {
    feed(loader.nextBatch());
    auto start = TraceRecorder::Clock::now();
    backend->run(eval, step);
    if (trace)
      trace->add("eval_step", "function", start, step, {}, 0, /*tid=*/1);
    total += readLoss(step);
    // An interrupt is acted on after the batch in progress, not after all
    // of them (2^20 batches took 640 s): every rank agrees, one float.
    if (i + 1 < options.evalBatches)
      if (int stop = agreeToStop(pendingInterrupt(), step)) {
        evalStop = stop;
        return std::numeric_limits<double>::quiet_NaN();
      }
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
  // A warm-up beyond the steps never reaches --lr. Warned, not refused:
  // running the first part of a longer schedule this way is a workflow
  // (test/e2e/resume.test), although --stop-after says it better.
  if (leader && options.warmup > options.steps)
    std::fprintf(stderr,
                 "partition-run: warning: --warmup %lld is more than --steps "
                 "%lld: the learning rate never reaches --lr in this run (to "
                 "run the first part of a longer schedule, give its --steps "
                 "and --stop-after)\n",
                 static_cast<long long>(options.warmup),
                 static_cast<long long>(options.steps));
  if (leader && !options.save.empty()) {
    ckpt::checkSaveDirectory(options.save);
    checkSaveReplaces();
  }
  data::Split split = loadData(options, vocab, batch * seq + 1);
  trainLoader = std::make_unique<data::BatchLoader>(
      split.train, batch, seq,
      "use more data, a smaller batch or sequence length, or a smaller "
      "--eval-fraction");
  evalRange = split.eval;
  bool canEvaluate = program.function("eval_step") && options.evalEvery > 0 &&
                     options.evalBatches > 0;
  if (canEvaluate)
    data::BatchLoader(evalRange, batch, seq, kEvalAdvice); // Fails early.

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
    if (canEvaluate && ((s + 1) % options.evalEvery == 0 || last)) {
      double evalLoss = evaluate(s + 1);
      if (evalStop) {
        // Interrupted: no mean of part of the batches.
        record["eval_interrupted"] = true;
        stop = std::max(stop, evalStop);
      } else {
        record["eval_loss"] = evalLoss;
      }
    }
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

} // namespace detail

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
    return detail::Run(options, program, world, world).execute();
  // NTP: ranks are numbered replica by replica; each runs its replica's
  // program on the replica's ranks, split from the world by every rank.
  checkWorldSize(program, options.program, world.size());
  auto [index, local] = program.replicaOf(world.rank());
  std::unique_ptr<comm::Communicator> replicaWorld =
      world.split(int(index), local, {"replica groups", -1});
  Program mine = splitAtOptimizer(*program.replicas[index].program);
  detail::ReplicaRun replica{program, index};
  return detail::Run(options, mine, *replicaWorld, world, &replica)
      .execute();
}

TrainResult train(const TrainOptions &options) {
  Program program = Program::load(options.program);
  comm::SelfCommunicator self;
  return train(options, program, self);
}

} // namespace partition::runtime
