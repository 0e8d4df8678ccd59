//===- RunState.cpp - a run's state: initialise, checkpoint, compare -----===//
//
// The parameters and AdamW moments of a Run (TrainerRun.h): initialised as
// one device would (each rank keeps its block), saved as logical tensors
// whatever the plan (gathered from the ranks that hold the blocks, every
// tensor once over the pipeline stages), restored or taken from another
// run's checkpoint (--resume, --init-from), and compared between the
// data-parallel replicas.
//
//===----------------------------------------------------------------------===//

#include "runtime/train/TrainerRun.h"

#include "runtime/train/Init.h"
#include "runtime/train/Sharding.h"
#include "runtime/checkpoint/Checkpoint.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>

namespace partition::runtime::detail {

namespace ckpt = partition::runtime::checkpoint;

namespace {

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

/// FNV-1a over the bytes of a buffer, continuing from `hash`.
uint64_t fnv1a(const std::vector<uint8_t> &bytes, uint64_t hash) {
  for (uint8_t byte : bytes)
    hash = (hash ^ byte) * 0x100000001b3ull;
  return hash;
}

} // namespace

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
                                      int64_t step, const char *purpose) {
  std::vector<uint32_t> axes = buffer.stateGroup();
  comm::Communicator &group = *mesh->group(axes);
  std::vector<float> blocks(size_t(buffer.elements) * group.size());
  std::string what = "gather '" + buffer.name + "' for " + purpose;
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
  // --evaluate reads no training data: there is no position to restore.
  if (trainLoader)
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

void Run::checkSaveReplaces() const {
  if (options.force)
    return;
  const std::string &dir = options.save;
  std::error_code error;
  switch (ckpt::existingCheckpoint(dir)) {
  case ckpt::ExistingCheckpoint::None:
  case ckpt::ExistingCheckpoint::Training:
    return;
  case ckpt::ExistingCheckpoint::WeightsOnly:
    // Fine-tuning in place: the weights this run starts from.
    if (!options.initFrom.empty() &&
        std::filesystem::equivalent(ckpt::checkpointFile(dir),
                                    ckpt::checkpointFile(options.initFrom),
                                    error))
      return;
    throw ProgramError(ckpt::checkpointFile(dir) +
                       " holds a weights-only checkpoint (as partition-import "
                       "writes), which --save would replace with a training "
                       "checkpoint; save elsewhere, start from it with "
                       "--init-from " + dir + ", or give --force to replace "
                       "it");
  case ckpt::ExistingCheckpoint::Unreadable:
    throw ProgramError(ckpt::checkpointFile(dir) +
                       " exists and is not a checkpoint partition can read, "
                       "which --save would replace; save elsewhere, or give "
                       "--force to replace it");
  }
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
  std::vector<uint32_t> dataAxes = program.dataAxisIndices();
  for (Role role : {Role::Param, Role::Moment1, Role::Moment2, Role::Step})
    for (size_t index : program.withRole(role)) {
      const BufferInfo &buffer = program.buffers[index];
      std::vector<uint32_t> axes = buffer.stateGroup();
      if (std::any_of(axes.begin(), axes.end(), [&](uint32_t axis) {
            return std::find(dataAxes.begin(), dataAxes.end(), axis) !=
                   dataAxes.end();
          }))
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

} // namespace partition::runtime::detail
