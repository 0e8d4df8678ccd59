//===- ReplicaGradients.cpp - exact gradient sums across NTP replicas -----===//

#include "runtime/train/ReplicaGradients.h"

#include "runtime/backend/Backend.h"
#include "runtime/train/Sharding.h"
#include "runtime/comm/MeshCommunicators.h"

#include <algorithm>
#include <set>

namespace partition::runtime {

int64_t ReplicaBox::elements() const {
  int64_t count = 1;
  for (size_t d = 0; d < lo.size(); ++d)
    count *= hi[d] - lo[d];
  return count;
}

namespace {

std::vector<int64_t> meshShape(const Program &program) {
  std::vector<int64_t> sizes;
  for (const MeshAxis &axis : program.mesh)
    sizes.push_back(axis.size);
  return sizes;
}

/// A rank's block of a parameter: [lo, hi) per dimension of the unpadded
/// tensor (a padded vocabulary's padding rows are left out: they are zero
/// and get no gradient).
struct Block {
  int world;
  std::vector<int64_t> lo, hi;
};

/// The blocks of `buffer` on the `tp` ranks of a replica whose first world
/// rank is `first`.
std::vector<Block> blocksOf(const Program &replica, const BufferInfo &buffer,
                            int first) {
  std::vector<int64_t> sizes = meshShape(replica);
  const std::vector<int64_t> &tensor = buffer.tensorShape();
  std::vector<Block> blocks;
  for (int64_t local = 0; local < replica.devices(); ++local) {
    Block block{first + int(local), {}, {}};
    std::vector<int64_t> index(buffer.shape.size(), 0);
    if (!buffer.sharding.empty())
      index = blockIndices(buffer.sharding,
                           comm::meshCoordinates(local, sizes), sizes);
    for (size_t d = 0; d < buffer.shape.size(); ++d) {
      block.lo.push_back(std::min(index[d] * buffer.shape[d], tensor[d]));
      block.hi.push_back(std::min((index[d] + 1) * buffer.shape[d], tensor[d]));
    }
    blocks.push_back(std::move(block));
  }
  return blocks;
}

bool contains(const Block &block, const std::vector<int64_t> &lo,
              const std::vector<int64_t> &hi) {
  for (size_t d = 0; d < lo.size(); ++d)
    if (lo[d] < block.lo[d] || hi[d] > block.hi[d])
      return false;
  return true;
}

const BufferInfo *paramNamed(const Program &program, const std::string &name) {
  for (const BufferInfo &buffer : program.buffers)
    if (buffer.role == Role::Param && buffer.name == name)
      return &buffer;
  return nullptr;
}

} // namespace

std::vector<ReplicaBox> replicaBoxes(const Program &program) {
  std::vector<ReplicaBox> boxes;
  const Program &first = *program.replicas.front().program;
  for (size_t r = 1; r < program.replicas.size(); ++r)
    if (program.replicas[r].program->withRole(Role::Param).size() !=
        first.withRole(Role::Param).size())
      throw ProgramError("replica " + std::to_string(r) +
                         " holds another number of parameters than replica "
                         "0; recompile the program");
  for (size_t index : first.withRole(Role::Param)) {
    const std::string &name = first.buffers[index].name;
    const std::vector<int64_t> &tensor = first.buffers[index].tensorShape();
    // Every replica's blocks, and per dimension every block boundary.
    std::vector<std::vector<Block>> replicas;
    std::vector<std::set<int64_t>> cuts(tensor.size());
    int start = 0;
    for (size_t r = 0; r < program.replicas.size(); ++r) {
      const Program &replica = *program.replicas[r].program;
      const BufferInfo *buffer = paramNamed(replica, name);
      if (!buffer || buffer->tensorShape() != tensor)
        throw ProgramError("replica " + std::to_string(r) + " has no '" +
                           name + "' of replica 0's shape; recompile the "
                           "program");
      replicas.push_back(blocksOf(replica, *buffer, start));
      for (const Block &block : replicas.back())
        for (size_t d = 0; d < tensor.size(); ++d) {
          cuts[d].insert(block.lo[d]);
          cuts[d].insert(block.hi[d]);
        }
      start += int(program.replicas[r].tp);
    }
    // The boxes between consecutive cuts, the last dimension fastest.
    std::vector<std::vector<int64_t>> points;
    size_t total = 1;
    for (const std::set<int64_t> &dim : cuts) {
      points.emplace_back(dim.begin(), dim.end());
      total *= points.back().size() < 2 ? 0 : points.back().size() - 1;
    }
    for (size_t n = 0; n < total; ++n) {
      ReplicaBox box{name, std::vector<int64_t>(tensor.size()),
                     std::vector<int64_t>(tensor.size()), {}, {}};
      size_t rest = n;
      for (size_t d = tensor.size(); d-- > 0;) {
        size_t at = rest % (points[d].size() - 1);
        rest /= points[d].size() - 1;
        box.lo[d] = points[d][at];
        box.hi[d] = points[d][at + 1];
      }
      for (const std::vector<Block> &blocks : replicas) {
        std::vector<int> holders;
        for (const Block &block : blocks)
          if (contains(block, box.lo, box.hi))
            holders.push_back(block.world);
        if (holders.empty())
          throw ProgramError("no rank of a replica holds a part of '" + name +
                             "'; recompile the program");
        // A replicated tensor's contributions spread over its holders,
        // box by box.
        box.contributors.push_back(holders[n % holders.size()]);
        box.holders.insert(box.holders.end(), holders.begin(), holders.end());
      }
      std::sort(box.holders.begin(), box.holders.end());
      boxes.push_back(std::move(box));
    }
  }
  return boxes;
}

ReplicaGradientSum::ReplicaGradientSum(const Program &program,
                                       const Program &replica,
                                       comm::Communicator &world)
    : replica(replica) {
  auto [index, local] = program.replicaOf(world.rank());
  (void)local;
  // Each replica's gradient is the mean over its rows: times its rows it
  // is their sum, and the sum over replicas divided by the batch is the
  // global batch's mean (Avg of a data-parallel all-reduce, the same way:
  // x / n).
  rows = float(program.replicas[index].batchRows);
  int64_t all = 0;
  for (const ReplicaProgram &replica : program.replicas)
    all += replica.batchRows;
  batch = float(all);
  // The optimizer reads each parameter's gradient: AdamW's second input.
  const Function *update = replica.function("train_step_update");
  if (!update)
    throw ProgramError("the replica's step has no optimizer part");
  for (const Instruction &instruction : update->instructions)
    if (instruction.isKernel() && instruction.kernel == KernelId::AdamW) {
      const BufferInfo &param = replica.buffers[instruction.args[0]];
      const BufferInfo &gradient = replica.buffers[instruction.args[1]];
      if (gradient.dtype != DType::F32 || gradient.shape != param.shape)
        throw ProgramError("the gradient of '" + param.name +
                           "' is not an f32 buffer of its block's shape");
      gradients[param.name] = instruction.args[1];
      states[param.name] = {instruction.args[0], instruction.args[2],
                            instruction.args[3]};
    }

  // Every rank computes every group (the same on all ranks), then splits
  // the world once per group, in the groups' order.
  std::map<std::vector<int>, Group> groups;
  for (const ReplicaBox &box : replicaBoxes(program)) {
    Group &group = groups[box.holders];
    size_t offset = group.elements;
    group.elements += size_t(box.elements());
    if (!std::binary_search(box.holders.begin(), box.holders.end(),
                            world.rank()))
      continue;
    auto found = gradients.find(box.param);
    if (found == gradients.end())
      throw ProgramError("the optimizer of this replica does not update '" +
                         box.param + "'");
    // The box in this rank's block: its offset from the block's origin.
    const BufferInfo *param = paramNamed(replica, box.param);
    std::vector<Block> blocks = blocksOf(replica, *param, 0);
    const Block &block = blocks[size_t(local)];
    Piece piece{found->second, states.at(box.param), {}, {}, offset,
                std::find(box.contributors.begin(), box.contributors.end(),
                          world.rank()) != box.contributors.end()};
    for (size_t d = 0; d < box.lo.size(); ++d) {
      piece.at.push_back(box.lo[d] - block.lo[d]);
      piece.shape.push_back(box.hi[d] - box.lo[d]);
    }
    group.pieces.push_back(std::move(piece));
  }
  allGroups = groups.size();
  for (auto &[ranks, group] : groups) {
    bool member =
        std::binary_search(ranks.begin(), ranks.end(), world.rank());
    std::string label = "replica gradients of ranks";
    for (int rank : ranks)
      label += " " + std::to_string(rank);
    auto communicator =
        world.split(member ? 0 : comm::Communicator::kNoColor, world.rank(),
                    {"replica gradient groups", -1});
    if (!member)
      continue;
    group.ranks = ranks;
    group.communicator = std::move(communicator);
    group.label = label;
    mine.push_back(std::move(group));
  }
}

ReplicaGradientSum::~ReplicaGradientSum() = default;

namespace {

/// Calls visit(bufferOffset, boxOffset, width) for each innermost row of a
/// box at `at` (shape `shape`) in a row-major tensor of shape `dims`.
template <typename Visit>
void forEachBoxRow(const std::vector<int64_t> &dims,
                   const std::vector<int64_t> &at,
                   const std::vector<int64_t> &shape, Visit visit) {
  size_t rank = dims.size();
  if (rank == 0) {
    visit(0, 0, 1);
    return;
  }
  int64_t rows = 1;
  for (size_t d = 0; d + 1 < rank; ++d)
    rows *= shape[d];
  std::vector<int64_t> index(rank, 0);
  for (int64_t row = 0; row < rows; ++row) {
    int64_t offset = 0;
    for (size_t d = 0; d < rank; ++d)
      offset = offset * dims[d] + at[d] + (d + 1 < rank ? index[d] : 0);
    visit(offset, row * shape[rank - 1], shape[rank - 1]);
    for (size_t d = rank - 1; d-- > 0;) {
      if (++index[d] < shape[d])
        break;
      index[d] = 0;
    }
  }
}

} // namespace

void ReplicaGradientSum::sum(Backend &backend, int64_t step) {
  // Host copies of the gradients this rank's groups touch.
  std::map<size_t, std::vector<float>> host;
  for (Group &group : mine)
    for (const Piece &piece : group.pieces)
      if (!host.count(piece.gradient)) {
        const BufferInfo &buffer = replica.buffers[piece.gradient];
        std::vector<float> &values = host[piece.gradient];
        values.resize(size_t(buffer.elements));
        backend.read(buffer, values.data());
      }
  std::vector<float> packed;
  for (Group &group : mine) {
    packed.assign(group.elements, 0.0f);
    for (const Piece &piece : group.pieces) {
      if (!piece.contributes)
        continue;
      const std::vector<float> &values = host[piece.gradient];
      forEachBoxRow(replica.buffers[piece.gradient].shape, piece.at,
                    piece.shape, [&](int64_t from, int64_t to, int64_t width) {
                      for (int64_t i = 0; i < width; ++i)
                        packed[piece.offset + size_t(to + i)] =
                            rows * values[size_t(from + i)];
                    });
    }
    group.communicator->allReduce(packed.data(), packed.size(),
                                  comm::ReduceOp::Sum,
                                  {group.label.c_str(), step});
    for (const Piece &piece : group.pieces) {
      std::vector<float> &values = host[piece.gradient];
      forEachBoxRow(replica.buffers[piece.gradient].shape, piece.at,
                    piece.shape, [&](int64_t to, int64_t from, int64_t width) {
                      for (int64_t i = 0; i < width; ++i)
                        values[size_t(to + i)] =
                            packed[piece.offset + size_t(from + i)] / batch;
                    });
    }
  }
  for (auto &[index, values] : host)
    backend.write(replica.buffers[index], values.data());
}

bool ReplicaGradientSum::sameState(Backend &backend, int64_t step) {
  std::map<size_t, std::vector<float>> host;
  auto values = [&](size_t index) -> const std::vector<float> & {
    std::vector<float> &copy = host[index];
    if (copy.empty()) {
      copy.resize(size_t(replica.buffers[index].elements));
      backend.read(replica.buffers[index], copy.data());
    }
    return copy;
  };
  bool same = true;
  for (Group &group : mine) {
    // FNV-1a over the bytes of every box's parameter and moments, in the
    // group's order (every member holds the same boxes).
    uint64_t hash = 0xcbf29ce484222325ull;
    for (const Piece &piece : group.pieces)
      for (size_t index : piece.state) {
        const std::vector<float> &all = values(index);
        forEachBoxRow(replica.buffers[index].shape, piece.at, piece.shape,
                      [&](int64_t from, int64_t, int64_t width) {
                        const auto *bytes = reinterpret_cast<const uint8_t *>(
                            all.data() + from);
                        for (size_t i = 0; i < size_t(width) * sizeof(float);
                             ++i)
                          hash = (hash ^ bytes[i]) * 0x100000001b3ull;
                      });
      }
    // 16-bit pieces are exact in a float; max of x and of -x give the
    // largest and the smallest over the group.
    float pieces[8];
    for (int i = 0; i < 4; ++i) {
      pieces[i] = float((hash >> (16 * i)) & 0xffff);
      pieces[4 + i] = -pieces[i];
    }
    std::string what = "state check of " + group.label;
    group.communicator->allReduce(pieces, 8, comm::ReduceOp::Max,
                                  {what.c_str(), step});
    for (int i = 0; i < 4; ++i)
      same = same && pieces[i] == -pieces[4 + i];
  }
  return same;
}

Program splitAtOptimizer(Program program) {
  for (Stream &stream : program.streams)
    for (size_t f = 0; f < stream.functions.size(); ++f) {
      if (stream.functions[f].name != "train_step")
        continue;
      std::vector<Instruction> &all = stream.functions[f].instructions;
      auto first = std::find_if(all.begin(), all.end(),
                                [](const Instruction &instruction) {
                                  return instruction.isKernel() &&
                                         instruction.kernel == KernelId::AdamW;
                                });
      if (first == all.end())
        throw ProgramError("the replica's train_step has no AdamW; compile "
                           "it with --optimizer adamw");
      Function update{"train_step_update",
                      std::vector<Instruction>(first, all.end())};
      all.erase(first, all.end());
      stream.functions.push_back(std::move(update));
      break;
    }
  program.selectStream(program.stream);
  return program;
}

} // namespace partition::runtime
