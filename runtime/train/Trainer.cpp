//===- Trainer.cpp - a rank's training run: backend and communicators -----===//
//
// A rank's Run (TrainerRun.h): choosing the backend, its communicators,
// backend and batch shape, feeding a batch; and the entry points train()
// and checkWorldSize(). The step loop (data, learning rate, evaluation,
// checkpoints, stopping together) and its reports are RunLoop.cpp;
// initialising and checkpointing the state is RunState.cpp.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/Trainer.h"
#include "runtime/train/TrainerRun.h"

#include "runtime/backend/Backend.h"
#include "runtime/train/Init.h"
#include "runtime/program/Program.h"
#include "runtime/train/Sharding.h"
#include "runtime/backend/Trace.h"
#include "runtime/comm/MeshCommunicators.h"
#include "runtime/comm/SelfCommunicator.h"
#include "runtime/backend/CudaProbe.h"
#include "runtime/data/BatchLoader.h"
#include "runtime/data/SequenceLayout.h"
#ifdef PARTITION_HAVE_CUDA_BACKEND
#include "runtime/backend/cuda/CudaBackend.h"
#include <cuda_runtime_api.h>
#ifdef PARTITION_HAVE_NCCL
#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/NcclCommunicator.h"
#endif
#endif

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
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
  if (std::vector<uint32_t> data = program.dataAxisIndices(); !data.empty())
    groups.push_back(data);
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

/// The groups of the program's started collectives (every stream's): each
/// gets a second communicator for the CPU backend's communication thread.
std::vector<std::vector<uint32_t>> startedGroups(const Program &program) {
  std::vector<std::vector<uint32_t>> groups;
  for (const Stream &stream : program.streams)
    for (const Function &function : stream.functions)
      for (const Instruction &instruction : function.instructions)
        if (instruction.collective && instruction.collective->started)
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
  // The offload's files, one per rank (under mpirun each rank is a
  // process of its own; the tag tells a node's files apart).
  OffloadOptions offload;
  offload.path = options.offloadPath;
  offload.tag = "rank" + std::to_string(global.rank());
  if (chosen == "cuda")
    createCuda(offload);
  else {
    // Started collectives run on a thread of their own, each group's on a
    // communicator of its own (split by every rank alike: all agree on the
    // backend, and the groups are every stream's).
    if (mesh)
      if (std::vector<std::vector<uint32_t>> started = startedGroups(program);
          !started.empty())
        mesh->addStartedGroups(started);
    backend = createCpuBackend(program, mesh.get(), offload);
  }
  if (mesh) {
    for (const comm::MeshAxisSize &axis : mesh->mesh())
      meshShape.push_back(axis.size);
    // The data axes are found by their roles (#dist.plan), not their
    // names: the data axis and, with expert parallelism, the expert axis;
    // a rank's data-parallel index is its position in their group.
    if (std::vector<uint32_t> data = program.dataAxisIndices();
        !data.empty()) {
      dpGroup = mesh->group(data);
      dpRank = dpGroup->rank();
      dpSize = dpGroup->size();
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
  if (program.model.contains("experts")) {
    experts = program.modelInt("experts");
    topK = program.modelInt("top_k");
    moeLayers = layers / std::max<int64_t>(program.modelInt("moe_every"), 1);
  }
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
  if (options.evaluate && !program.function("eval_step"))
    throw ProgramError(options.program +
                       " has no eval_step (a program compiled with "
                       "--optimizer none?); recompile it with "
                       "partition-compile to --evaluate");
  if (!options.dumpLogits.empty() && !program.function("logits_step"))
    throw ProgramError(options.program +
                       " has no logits_step; recompile it with "
                       "partition-compile --logits (a checkpoint of any plan "
                       "loads into it with --resume or --init-from)");
  if (!program.function("eval_step") && options.evalEvery > 0 && !quiet &&
      !options.inspects())
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

void Run::createCuda(const OffloadOptions &offload) {
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
  backend = createCudaBackend(program, deviceMesh.get(), device, offload);
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
  (void)offload;
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
  // This rank's [rows, positions] block, as the program lays it out (with
  // context parallelism's zigzag, the sequence in its layout order).
  auto block = [&](const BufferInfo &buffer,
                   const std::vector<int32_t> &natural) {
    const std::vector<int32_t> whole = data::reorderSequences(
        natural, global.seq, 1, program.sequenceChunks, /*toLayout=*/true);
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
