//===- CpuAllToAll.cpp - the CPU backend's all_to_all ---------------------===//
//
// An rt.all_to_all through the group's communicator: whole blocks (an
// MPI_Alltoall of the input cut along split_dim), or, for mixture-of-experts
// buffers with counts (rows_dim), only the filled rows of each cell (an
// MPI_Alltoallv), the output's other rows zeroed.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/CpuBackendImpl.h"

#include "runtime/backend/CountedExchange.h"

namespace partition::runtime {
namespace cpubackend {

// The communicator's all-to-all sends contiguous blocks by rank: the input
// cut along split_dim is packed as [N, outer, block, inner] (unless the cut
// is along the outermost dimensions), and the blocks received, each the
// input's shape with split_dim divided, are unpacked along concat_dim.
std::function<void()>
CpuBackend::compileAllToAll(const Program &program,
                            const Instruction &instruction,
                            comm::Communicator &group, float *in, float *out,
                            std::vector<float> *pack) {
  const Collective &collective = *instruction.collective;
  if (collective.rowsDim)
    return compileCountedAllToAll(program, instruction, group, in, out, pack);
  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  int64_t blocks = group.size();
  auto [sendOuter, sendInner] = outerAndInner(input.shape, collective.dim);
  int64_t sendDim = input.shape[collective.dim] / blocks;
  auto [recvOuter, recvInner] =
      outerAndInner(output.shape, collective.concatDim);
  int64_t recvDim = output.shape[collective.concatDim] / blocks;
  size_t count = size_t(input.elements);
  if (pack->size() < 2 * count)
    pack->resize(2 * count);
  comm::Communicator *communicator = &group;
  std::string label = collective.label;
  return [this, communicator, in, out, count, blocks, label, pack,
          sendOuter = sendOuter, sendInner = sendInner, sendDim,
          recvOuter = recvOuter, recvInner = recvInner, recvDim] {
    float *send = pack->data(), *recv = pack->data() + count;
    const float *from = in;
    if (sendOuter > 1) {
      cpu::packBlocks(in, send, sendOuter, sendDim, sendInner, blocks);
      from = send;
    }
    float *to = recvOuter > 1 ? recv : out;
    communicator->allToAll(from, to, count / size_t(blocks),
                           {label.c_str(), currentStep});
    if (recvOuter > 1)
      cpu::unpackBlocks(recv, out, recvOuter, recvDim, recvInner, blocks);
    routing.exchangedBytes +=
        double(count / size_t(blocks)) * double(blocks - 1) * 4.0;
  };
}

// The sender walks its input's cells in row-major order and packs, per
// destination rank, the filled rows of the cells that rank takes (the
// block of split_dim it owns); the receiver walks its output's cells in
// row-major order, which visits each source rank's cells (its block of
// concat_dim) in the order that rank packed them, and unpacks the rows
// its counts say, zeroing the rest. Both counts are the step's own
// (the routing's and their exchanged copy), so the sizes agree.
std::function<void()> CpuBackend::compileCountedAllToAll(
    const Program &program, const Instruction &instruction,
    comm::Communicator &group, float *in, float *out,
    std::vector<float> *pack) {
  const Collective &collective = *instruction.collective;
  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  const auto *sendCounts = reinterpret_cast<const int32_t *>(
      arena.get() + program.buffers[instruction.args[2]].offset);
  const auto *recvCounts = reinterpret_cast<const int32_t *>(
      arena.get() + program.buffers[instruction.args[3]].offset);
  int64_t ranks = group.size();
  CountedCells from =
      countedCells(input, collective.rowsDim, collective.dim, ranks);
  CountedCells to =
      countedCells(output, collective.rowsDim, collective.concatDim, ranks);
  size_t count = size_t(input.elements), outCount = size_t(output.elements);
  if (pack->size() < count + outCount)
    pack->resize(count + outCount);
  comm::Communicator *communicator = &group;
  std::string label = collective.label;
  std::string name = input.name, outputName = output.name;
  return [this, communicator, in, out, sendCounts, recvCounts, from, to,
          ranks, count, pack, label, name, outputName] {
    comm::Context context{label.c_str(), currentStep};
    // The rows per rank, each count checked against its cell's rows.
    std::vector<int64_t> sendRows =
        rowsPerRank(sendCounts, from, ranks, label, name);
    std::vector<int64_t> recvRows =
        rowsPerRank(recvCounts, to, ranks, label, outputName);
    // Pack: per rank, its cells' filled rows, in cell order.
    std::vector<int64_t> sendAt(size_t(ranks), 0);
    for (int64_t r = 1; r < ranks; ++r)
      sendAt[size_t(r)] = sendAt[size_t(r - 1)] + sendRows[size_t(r - 1)];
    float *packed = pack->data();
    size_t cellElements = size_t(from.rows * from.inner);
    for (int64_t c = 0; c < from.count; ++c) {
      int64_t rank = rankOf(from, c);
      size_t rows = size_t(sendCounts[c]);
      std::memcpy(packed + size_t(sendAt[size_t(rank)]) * size_t(from.inner),
                  in + size_t(c) * cellElements,
                  rows * size_t(from.inner) * sizeof(float));
      sendAt[size_t(rank)] += int64_t(rows);
    }
    float *received = pack->data() + count;
    communicator->allToAllRows(packed, sendRows, received, recvRows,
                               size_t(from.inner), context);
    std::vector<int64_t> recvAt(size_t(ranks), 0);
    for (int64_t r = 1; r < ranks; ++r)
      recvAt[size_t(r)] = recvAt[size_t(r - 1)] + recvRows[size_t(r - 1)];
    size_t outCellElements = size_t(to.rows * to.inner);
    for (int64_t c = 0; c < to.count; ++c) {
      int64_t rank = rankOf(to, c);
      size_t rows = size_t(recvCounts[c]);
      float *cell = out + size_t(c) * outCellElements;
      std::memcpy(cell,
                  received + size_t(recvAt[size_t(rank)]) * size_t(to.inner),
                  rows * size_t(to.inner) * sizeof(float));
      std::memset(cell + rows * size_t(to.inner), 0,
                  (outCellElements - rows * size_t(to.inner)) * sizeof(float));
      recvAt[size_t(rank)] += int64_t(rows);
    }
    int64_t mine = communicator->rank(), sent = 0;
    for (int64_t r = 0; r < ranks; ++r)
      if (r != mine)
        sent += sendRows[size_t(r)];
    routing.exchangedBytes += double(sent) * double(from.inner) * 4.0;
  };
}

} // namespace cpubackend
} // namespace partition::runtime
