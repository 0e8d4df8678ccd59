//===- CudaCollectives.cpp - NCCL collectives and pipeline transfers ------===//
//
// Compiles a collective or a send/receive into a call on its communicator's
// stream, with the byte ranges it touches so that the stream plan
// (StreamPlan.h) orders it against the kernels on the compute stream (see
// CudaBackend.cpp for the streams and events).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/CountedExchange.h"
#include "runtime/backend/cuda/CudaBackendImpl.h"

#include <algorithm>

namespace partition::runtime::cudabackend {

namespace {

/// Makes `commStream` start after everything enqueued so far on
/// `computeStream` (recorded into `ready`) and after `others`: the
/// collectives of other groups it overlaps.
void startAfterCompute(cudaStream_t commStream, cudaStream_t computeStream,
                       cudaEvent_t ready,
                       const std::vector<cudaEvent_t> &others,
                       const std::string &what) {
  checkCuda(cudaEventRecord(ready, computeStream), "cudaEventRecord", what);
  checkCuda(cudaStreamWaitEvent(commStream, ready, 0), "cudaStreamWaitEvent",
            what);
  for (cudaEvent_t other : others)
    checkCuda(cudaStreamWaitEvent(commStream, other, 0), "cudaStreamWaitEvent",
              what);
}

} // namespace

CudaBackend::CollectivePlan
CudaBackend::compileCollective(const Program &program,
                               const Instruction &instruction,
                               const std::string &where) {
  const Collective &collective = *instruction.collective;
  std::string what = collectiveName(instruction, where);
  comm::Communicator *group =
      &collectiveGroup(program, instruction, communicators, where);
#ifndef PARTITION_HAVE_NCCL
  (void)group;
  throw ProgramError(what + " needs NCCL, but this CUDA backend was built "
                            "without it");
#else
  auto *nccl = dynamic_cast<comm::NcclCommunicator *>(group);
  if (!nccl)
    throw ProgramError(what +
                       ": the CUDA backend needs NCCL communicators "
                       "for mesh axes '" +
                       communicators->groupName(collective.axes) + "'");
  if (nccl->device() != device)
    throw ProgramError(what + ": the communicator is on device " +
                       std::to_string(nccl->device()) + ", the backend on " +
                       std::to_string(device));
  CollectivePlan plan;
  plan.communicator = nccl;
  plan.stream = nccl->stream();
  cudaStream_t commStream = nccl->stream();
  cudaStream_t computeStream = compute;
  cudaEvent_t ready = computeReady;
  comm::ReduceOp op = reduceOpOf(collective.reduce);
  std::string label = collective.label;
  // The communication stream starts after everything enqueued so far on
  // the compute stream, and after overlapping collectives of other groups.
  auto startAfter = [=](const std::vector<cudaEvent_t> &others) {
    startAfterCompute(commStream, computeStream, ready, others, what);
  };

  DType dtype = program.buffers[instruction.args[0]].dtype;
  for (uint32_t arg : instruction.args)
    plan.ranges.push_back(rangeOf(program.buffers[arg]));

  if (collective.kind == CollectiveKind::AllReduce) {
    std::vector<comm::NcclCommunicator::Span> spans;
    for (uint32_t arg : instruction.args) {
      const BufferInfo &buffer = program.buffers[arg];
      if (buffer.dtype != dtype)
        throw ProgramError(what + ": a bucket of " + dtypeName(dtype) +
                           " and " + dtypeName(buffer.dtype) +
                           " buffers; a bucket holds one type");
      spans.push_back({arena + buffer.offset, size_t(buffer.elements)});
    }
    comm::DataType type = commType(dtype);
    // One NCCL group per bucket: no packing copy, one launch.
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueAllReduceBucket(spans.data(), spans.size(), type, op,
                                   {label.c_str(), currentStep});
    };
    return plan;
  }

  if (collective.kind == CollectiveKind::RingShift) {
    const BufferInfo &input = program.buffers[instruction.args[0]];
    const BufferInfo &output = program.buffers[instruction.args[1]];
    // NCCL moves the bytes as floats: every element type the loader allows
    // (f32, i32, bf16 in pairs) is a whole number of them.
    if (input.bytes % sizeof(float) != 0)
      throw ProgramError(what + ": a ring shift of " +
                         std::to_string(input.bytes) +
                         " bytes, not a whole number of 4-byte words");
    const float *in = reinterpret_cast<const float *>(arena + input.offset);
    float *out = reinterpret_cast<float *>(arena + output.offset);
    size_t count = size_t(input.bytes) / sizeof(float);
    int size = nccl->size(), rank = nccl->rank();
    int next = (rank + 1) % size, previous = (rank + size - 1) % size;
    // One NCCL group: the send and the receive of every rank together.
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueSendRecv(in, count, next, out, count, previous,
                            {label.c_str(), currentStep});
    };
    return plan;
  }

  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  if (output.dtype != dtype)
    throw ProgramError(what + ": input " + dtypeName(dtype) + ", output " +
                       dtypeName(output.dtype));
  uint8_t *in = arena + input.offset;
  uint8_t *out = arena + output.offset;
  if (collective.kind == CollectiveKind::AllToAll && collective.rowsDim)
    return compileCountedAllToAll(program, instruction, plan, nccl, what,
                                  startAfter);
  if (collective.kind == CollectiveKind::AllToAll) {
    // The input cut along split_dim, packed as [N, outer, block, inner] on
    // the compute stream; NCCL's grouped send/recv; the blocks received
    // unpacked along concat_dim on the communication stream. NCCL moves
    // 4-byte words (a bf16 buffer of an even size, i32 and f32).
    if (input.bytes % sizeof(float) != 0)
      throw ProgramError(what + ": an all_to_all of " +
                         std::to_string(input.bytes) +
                         " bytes, not a whole number of 4-byte words");
    int64_t blocks = nccl->size();
    int elementBytes = int(dtypeBytes(dtype));
    auto [sendOuter, sendInner] = outerAndInner(input.shape, collective.dim);
    int64_t sendDim = input.shape[collective.dim] / blocks;
    auto [recvOuter, recvInner] =
        outerAndInner(output.shape, collective.concatDim);
    int64_t recvDim = output.shape[collective.concatDim] / blocks;
    size_t bytes = size_t(input.bytes);
    uint8_t *send = staging, *recv = staging + bytes;
    ByteRange stagingRange{arenaSize, arenaSize + 2 * bytes};
    plan.ranges.push_back(stagingRange);
    plan.computeRanges = {rangeOf(input), stagingRange};
    size_t words = bytes / sizeof(float) / size_t(blocks);
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      const uint8_t *from = in;
      if (sendOuter > 1) {
        cuda::packBlocks(in, send, sendOuter, sendDim, sendInner, blocks,
                         elementBytes, computeStream);
        from = send;
      }
      startAfter(others);
      uint8_t *to = recvOuter > 1 ? recv : out;
      nccl->enqueueAllToAll(reinterpret_cast<const float *>(from),
                            reinterpret_cast<float *>(to), words,
                            {label.c_str(), currentStep});
      routingExchanged += double(words) * double(blocks - 1) * sizeof(float);
      if (recvOuter > 1)
        cuda::unpackBlocks(recv, out, recvOuter, recvDim, recvInner, blocks,
                           elementBytes, commStream);
    };
    return plan;
  }
  bool gather = collective.kind == CollectiveKind::AllGather;
  const BufferInfo &block = gather ? input : output;
  int64_t outer = 1, inner = 1;
  for (uint32_t d = 0; d < collective.dim; ++d)
    outer *= block.shape[d];
  for (size_t d = collective.dim + 1; d < block.shape.size(); ++d)
    inner *= block.shape[d];
  int64_t blockDim = block.shape[collective.dim];
  int64_t blocks = nccl->size();
  size_t count = size_t(block.elements);
  comm::DataType type = commType(dtype);
  int elementBytes = int(dtypeBytes(dtype));
  if (outer == 1) {
    if (gather)
      plan.call = [=](const std::vector<cudaEvent_t> &others) {
        startAfter(others);
        nccl->enqueueAllGather(in, out, count, type,
                               {label.c_str(), currentStep});
      };
    else
      plan.call = [=](const std::vector<cudaEvent_t> &others) {
        startAfter(others);
        nccl->enqueueReduceScatter(in, out, count, type, op,
                                   {label.c_str(), currentStep});
      };
    return plan;
  }
  // Blocks along an inner dimension go through the staging buffer, which
  // takes part in the overlap checks as the range just past the arena.
  uint8_t *packed = staging;
  ByteRange stagingRange{arenaSize, arenaSize + count * size_t(blocks) *
                                                    size_t(elementBytes)};
  plan.ranges.push_back(stagingRange);
  if (gather) {
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueAllGather(in, packed, count, type,
                             {label.c_str(), currentStep});
      cuda::unpackBlocks(packed, out, outer, blockDim, inner, blocks,
                         elementBytes, commStream);
    };
    return plan;
  }
  // The packing runs on the compute stream, before the collective starts.
  plan.computeRanges = {rangeOf(input), stagingRange};
  plan.call = [=](const std::vector<cudaEvent_t> &others) {
    cuda::packBlocks(in, packed, outer, blockDim, inner, blocks, elementBytes,
                     computeStream);
    startAfter(others);
    nccl->enqueueReduceScatter(packed, out, count, type, op,
                               {label.c_str(), currentStep});
  };
  return plan;
#endif
}

// A mixture of experts' exchange with counts (docs/moe.md): only the filled
// rows move, as on CPU ranks (CpuAllToAll.cpp), in the same layout. NCCL
// needs every transfer's size on the host, so the counts are read back
// first: one small copy and one host synchronisation of the communication
// stream per exchange, against the communicator's timeout (as dropless MoE
// implementations do for their variable-size all-to-alls). Then, on that
// stream, a kernel packs the filled rows by destination into staging, one NCCL
// group sends and receives each peer's bytes, and a kernel unpacks them into
// the output's cells, zeroing the rows past the counts.
CudaBackend::CollectivePlan CudaBackend::compileCountedAllToAll(
    const Program &program, const Instruction &instruction, CollectivePlan plan,
    comm::NcclCommunicator *nccl, const std::string &what,
    const std::function<void(const std::vector<cudaEvent_t> &)> &startAfter) {
  const Collective &collective = *instruction.collective;
  const BufferInfo &input = program.buffers[instruction.args[0]];
  const BufferInfo &output = program.buffers[instruction.args[1]];
  const BufferInfo &sendCountsBuffer = program.buffers[instruction.args[2]];
  const BufferInfo &recvCountsBuffer = program.buffers[instruction.args[3]];
  int64_t ranks = nccl->size();
  cuda::CountedCells send =
      countedCells(input, collective.rowsDim, collective.dim, ranks);
  cuda::CountedCells recv =
      countedCells(output, collective.rowsDim, collective.concatDim, ranks);
  int elementBytes = int(dtypeBytes(input.dtype));
  // The loader checked the counts: i32, one per cell.
  const auto *sendCounts =
      reinterpret_cast<const int32_t *>(arena + sendCountsBuffer.offset);
  const auto *recvCounts =
      reinterpret_cast<const int32_t *>(arena + recvCountsBuffer.offset);
  void *pinned = nullptr;
  size_t countBytes = size_t(send.count + recv.count) * sizeof(int32_t);
  checkCuda(cudaMallocHost(&pinned, std::max<size_t>(countBytes, 1)),
            "cudaMallocHost", what + " (its counts on the host)");
  pinnedCounts.push_back(pinned);
  auto *hostSend = static_cast<int32_t *>(pinned);
  int32_t *hostRecv = hostSend + send.count;
  uint8_t *in = arena + input.offset, *out = arena + output.offset;
  uint8_t *packed = staging, *received = staging + size_t(input.bytes);
  ByteRange stagingRange{arenaSize, arenaSize + size_t(input.bytes) +
                                        size_t(output.bytes)};
  plan.ranges.push_back(stagingRange);
  cudaStream_t commStream = nccl->stream();
  size_t rowBytes = size_t(send.inner) * size_t(elementBytes);
  std::string label = collective.label, name = input.name,
              outputName = output.name;
  plan.call = [=](const std::vector<cudaEvent_t> &others) {
    startAfter(others);
    checkCuda(cudaMemcpyAsync(hostSend, sendCounts,
                              size_t(send.count) * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, commStream),
              "cudaMemcpyAsync", what);
    checkCuda(cudaMemcpyAsync(hostRecv, recvCounts,
                              size_t(recv.count) * sizeof(int32_t),
                              cudaMemcpyDeviceToHost, commStream),
              "cudaMemcpyAsync", what);
    // The one host synchronization per exchange. Against the
    // communicator's timeout, polling NCCL's asynchronous errors: the
    // stream also holds the counts' own all-to-all, which a lost peer
    // would otherwise leave this wait blocked on forever.
    nccl->synchronize({label.c_str(), currentStep});
    std::vector<int64_t> sendRows =
        rowsPerRank(hostSend, send, ranks, what, name);
    std::vector<int64_t> recvRows =
        rowsPerRank(hostRecv, recv, ranks, what, outputName);
    std::vector<size_t> sendBytes, recvBytes;
    for (int64_t r = 0; r < ranks; ++r) {
      sendBytes.push_back(size_t(sendRows[size_t(r)]) * rowBytes);
      recvBytes.push_back(size_t(recvRows[size_t(r)]) * rowBytes);
      if (r != nccl->rank())
        routingExchanged += double(sendBytes.back());
    }
    cuda::packCountedRows(in, sendCounts, packed, send, elementBytes,
                          commStream);
    nccl->enqueueAllToAllBytes(packed, sendBytes, received, recvBytes,
                               {label.c_str(), currentStep});
    cuda::unpackCountedRows(received, recvCounts, out, recv, elementBytes,
                            commStream);
  };
  return plan;
}

CudaBackend::CollectivePlan
CudaBackend::compileTransfer(const Program &program,
                             const Instruction &instruction,
                             const std::string &where) {
  std::string what = transferName(instruction, where);
  TransferRoute route =
      transferRoute(program, instruction, communicators, where);
#ifndef PARTITION_HAVE_NCCL
  (void)route;
  throw ProgramError(what + " needs NCCL, but this CUDA backend was built "
                            "without it");
#else
  auto *nccl = dynamic_cast<comm::NcclCommunicator *>(route.group);
  if (!nccl)
    throw ProgramError(what + ": the CUDA backend needs an NCCL "
                              "communicator for its pair of stages");
  if (nccl->device() != device)
    throw ProgramError(what + ": the communicator is on device " +
                       std::to_string(nccl->device()) + ", the backend on " +
                       std::to_string(device));
  const BufferInfo &buffer = program.buffers[instruction.args[0]];
  CollectivePlan plan;
  plan.communicator = nccl;
  plan.stream = nccl->stream();
  cudaStream_t commStream = nccl->stream();
  cudaStream_t computeStream = compute;
  cudaEvent_t ready = computeReady;
  uint8_t *data = arena + buffer.offset;
  size_t bytes = buffer.bytes;
  int peer = route.peer;
  std::string label = instruction.transfer->label;
  std::string peerText = route.peerText;
  auto startAfter = [=](const std::vector<cudaEvent_t> &others) {
    startAfterCompute(commStream, computeStream, ready, others, what);
  };
  if (!instruction.transfer->send) {
    plan.ranges = {rangeOf(buffer)};
    plan.call = [=](const std::vector<cudaEvent_t> &others) {
      startAfter(others);
      nccl->enqueueRecvBytes(data, bytes, peer,
                             {label.c_str(), currentStep, peerText.c_str()});
    };
    return plan;
  }
  // The staging copy is this send's alone: only the next run of the same
  // instruction overwrites it, after run()'s join has waited for the send.
  void *copy = nullptr;
  checkCuda(cudaMalloc(&copy, std::max<size_t>(bytes, 1)), "cudaMalloc",
            what + " (staging copy)");
  sendStaging.push_back(copy);
  // A range of its own past the arena and the staging buffer, which no
  // kernel touches: nothing on the compute stream waits for the send.
  uint64_t base = arenaSize + stagingSize + sendStagingSize;
  sendStagingSize += bytes;
  plan.ranges = {ByteRange{base, base + bytes}};
  plan.computeRanges = {rangeOf(buffer)};
  plan.call = [=](const std::vector<cudaEvent_t> &others) {
    checkCuda(cudaMemcpyAsync(copy, data, bytes, cudaMemcpyDeviceToDevice,
                              computeStream),
              "cudaMemcpyAsync", what);
    startAfter(others);
    nccl->enqueueSendBytes(copy, bytes, peer,
                           {label.c_str(), currentStep, peerText.c_str()});
  };
  return plan;
#endif
}

} // namespace partition::runtime::cudabackend
