//===- NcclCommunicator.cpp - Communicator over NCCL ----------------------===//

#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/NcclInternal.h"

#include "runtime/comm/MpiCommunicator.h"
#include "runtime/comm/PeerWatch.h"

#include <mpi.h>

#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace partition::runtime::comm {

namespace {

// NCCL's last-error text may span lines; the error contract wants one.
std::string oneLine(const char *text) {
  std::string line = text ? text : "";
  for (char &c : line)
    if (c == '\n' || c == '\r')
      c = ' ';
  while (!line.empty() && line.back() == ' ')
    line.pop_back();
  return line;
}

std::string ncclErrorText(ncclResult_t rc, ncclComm_t comm) {
  std::string text = ncclGetErrorString(rc);
  std::string last = oneLine(ncclGetLastError(comm));
  if (!last.empty())
    text += " (" + last + ")";
  return text;
}

// Spin briefly for low latency, then back off so that a rank sharing cores
// leaves the CPU to the work it waits for (as MpiCommunicator does).
void backOff(unsigned polls) {
  if (polls < 1000)
    std::this_thread::yield();
  else
    std::this_thread::sleep_for(std::chrono::microseconds(50));
}

// The unique id travels through MpiCommunicator::broadcast, which moves
// float32 buffers: 128 bytes are 32 floats, copied bit for bit (MPI does not
// convert floats between ranks of one architecture, and the bytes are only
// memcpy'd, never used as floats).
static_assert(sizeof(ncclUniqueId) % sizeof(float) == 0,
              "ncclUniqueId must be a whole number of floats");

} // namespace

size_t dataTypeBytes(DataType type) { return type == DataType::BF16 ? 2 : 4; }

const char *dataTypeName(DataType type) {
  switch (type) {
  case DataType::F32:
    return "f32";
  case DataType::BF16:
    return "bf16";
  case DataType::I32:
    return "i32";
  }
  return "?";
}

//===----------------------------------------------------------------------===//
// Bootstrap and teardown
//===----------------------------------------------------------------------===//

std::unique_ptr<NcclCommunicator>
NcclCommunicator::world(MpiCommunicator &mpi, int device, NcclOptions options) {
  Context ctx("nccl world", -1);
  std::unique_ptr<NcclCommunicator> comm(
      new NcclCommunicator(mpi.worldRank(), "", device, options));
  comm->rank_ = mpi.rank();
  comm->size_ = mpi.size();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  if (mpi.rank() == 0) {
    ncclResult_t rc = ncclGetUniqueId(&id);
    if (rc != ncclSuccess)
      comm->fail("init", ctx,
                 std::string("failed: ncclGetUniqueId: ") +
                     ncclErrorText(rc, nullptr));
  }
  float words[sizeof(ncclUniqueId) / sizeof(float)];
  std::memcpy(words, &id, sizeof(id));
  mpi.broadcast(words, sizeof(words) / sizeof(float), 0,
                {"nccl unique id", -1});
  std::memcpy(&id, words, sizeof(id));
  comm->init(id, mpi.rank(), mpi.size(), ctx);
  return comm;
}

std::unique_ptr<NcclCommunicator>
NcclCommunicator::single(int device, NcclOptions options) {
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  ncclResult_t rc = ncclGetUniqueId(&id);
  if (rc != ncclSuccess) {
    std::unique_ptr<NcclCommunicator> comm(
        new NcclCommunicator(0, "", device, options));
    comm->fail("init", {"nccl world", -1},
               std::string("failed: ncclGetUniqueId: ") +
                   ncclErrorText(rc, nullptr));
  }
  return create(id, 0, 1, device, options);
}

std::unique_ptr<NcclCommunicator>
NcclCommunicator::create(const ncclUniqueId &id, int rank, int size, int device,
                         NcclOptions options) {
  Context ctx("nccl world", -1);
  std::unique_ptr<NcclCommunicator> comm(
      new NcclCommunicator(rank, "", device, options));
  comm->rank_ = rank;
  comm->size_ = size;
  comm->init(id, rank, size, ctx);
  return comm;
}

NcclCommunicator::NcclCommunicator(int worldRank, std::string group, int device,
                                   NcclOptions options)
    : group_(std::move(group)), options_(options), device_(device),
      worldRank_(worldRank) {}

void NcclCommunicator::init(const ncclUniqueId &id, int rank, int size,
                            const Context &ctx) {
  const char *name = "init";
  if (size < 1 || rank < 0 || rank >= size)
    fail(name, ctx,
         "failed: invalid rank " + std::to_string(rank) + " of " +
             std::to_string(size));
  int devices = 0;
  checkCuda(cudaGetDeviceCount(&devices), "cudaGetDeviceCount", name, ctx);
  if (device_ < 0 || device_ >= devices)
    fail(name, ctx,
         "failed: invalid device " + std::to_string(device_) + " (" +
             std::to_string(devices) + " CUDA devices)");
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags", name, ctx);
  checkCuda(cudaMalloc(reinterpret_cast<void **>(&scratch_), sizeof(float)),
            "cudaMalloc", name, ctx);
  checkCuda(cudaMemset(scratch_, 0, sizeof(float)), "cudaMemset", name, ctx);
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclResult_t rc = ncclCommInitRankConfig(&comm_, size, id, rank, &config);
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(name, ctx,
         std::string("failed: ncclCommInitRankConfig: ") +
             ncclErrorText(rc, comm_));
  // A peer that never calls init leaves the others in progress: the
  // deadline turns that into the one-line message.
  if (comm_)
    waitReady(comm_, name, ctx, until);
  else
    fail(name, ctx, "failed: ncclCommInitRankConfig returned no communicator");
}

void NcclCommunicator::adopt(ncclComm_t comm, const Context &ctx) {
  const char *name = "split";
  comm_ = comm;
  DeviceScope scope(*this, name, ctx);
  int count = 0, rank = 0;
  checkNccl(ncclCommCount(comm_, &count), comm_, name, ctx, deadline());
  checkNccl(ncclCommUserRank(comm_, &rank), comm_, name, ctx, deadline());
  size_ = count;
  rank_ = rank;
  checkCuda(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking),
            "cudaStreamCreateWithFlags", name, ctx);
  checkCuda(cudaMalloc(reinterpret_cast<void **>(&scratch_), sizeof(float)),
            "cudaMalloc", name, ctx);
  checkCuda(cudaMemset(scratch_, 0, sizeof(float)), "cudaMemset", name, ctx);
}

NcclCommunicator::~NcclCommunicator() {
  // Destroyed during exit, after the CUDA runtime has shut down (a static
  // communicator): the process is going away and the driver frees it all.
  int current = 0;
  if (cudaGetDevice(&current) == cudaErrorCudartUnloading)
    return;
  Context ctx("communicator teardown", -1);
  const char *name = "finalize";
  DeviceScope scope(*this, name, ctx);
  if (comm_) {
    // Finalize flushes what is still enqueued (it may need peers, hence the
    // deadline); destroy then frees locally without blocking.
    Clock::time_point until = deadline();
    checkNccl(ncclCommFinalize(comm_), comm_, name, ctx, until);
    waitReady(comm_, name, ctx, until);
    ncclCommDestroy(comm_);
    comm_ = nullptr;
  }
  if (scratch_)
    cudaFree(scratch_);
  if (stream_)
    cudaStreamDestroy(stream_);
}

//===----------------------------------------------------------------------===//
// Errors and waiting
//===----------------------------------------------------------------------===//

NcclCommunicator::Clock::time_point NcclCommunicator::deadline() const {
  return Clock::now() +
         std::chrono::duration_cast<Clock::duration>(
             std::chrono::duration<double>(options_.timeoutSeconds));
}

void NcclCommunicator::fail(const char *op, const Context &ctx,
                            const std::string &detail) const {
  std::string line = failureLine(worldRank_, group_, rank_, size_, op, ctx,
                                 oneLine(detail.c_str()));
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
  // Unblocks this rank's NCCL kernels and proxy threads, so nothing of ours
  // keeps the device busy while the job goes down. Aborting a communicator
  // that is stuck (e.g. in its bootstrap) may itself take long: it gets a
  // few seconds on its own thread, then the job goes down regardless.
  if (comm_) {
    auto done = std::make_shared<std::atomic<bool>>(false);
    std::thread([comm = comm_, done] {
      ncclCommAbort(comm);
      done->store(true);
    }).detach();
    Clock::time_point until = Clock::now() + std::chrono::seconds(10);
    while (!done->load() && Clock::now() < until)
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (initialized && !finalized)
    MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();
}

void NcclCommunicator::timedOut(const char *op, const Context &ctx) const {
  fail(op, ctx,
       PeerWatch::timeoutDetail(worldRank_, -1, options_.timeoutSeconds));
}

void NcclCommunicator::checkCuda(cudaError_t error, const char *call,
                                 const char *op, const Context &ctx) const {
  if (error == cudaSuccess)
    return;
  fail(op, ctx,
       std::string("failed: ") + call + ": " + cudaGetErrorName(error) + " (" +
           cudaGetErrorString(error) + ")");
}

void NcclCommunicator::checkNccl(ncclResult_t rc, ncclComm_t comm,
                                 const char *op, const Context &ctx,
                                 Clock::time_point until) const {
  if (rc == ncclSuccess)
    return;
  if (rc == ncclInProgress) {
    // Non-blocking communicators: no other NCCL call on comm until it has
    // left the in-progress state.
    waitReady(comm, op, ctx, until);
    return;
  }
  fail(op, ctx, "failed: " + ncclErrorText(rc, comm));
}

void NcclCommunicator::waitReady(ncclComm_t comm, const char *op,
                                 const Context &ctx,
                                 Clock::time_point until) const {
  for (unsigned polls = 0;; ++polls) {
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(comm, &state);
    if (rc != ncclSuccess)
      fail(op, ctx,
           "failed: ncclCommGetAsyncError: " + ncclErrorText(rc, comm));
    if (state == ncclSuccess)
      return;
    if (state != ncclInProgress)
      fail(op, ctx, "failed: " + ncclErrorText(state, comm));
    if (Clock::now() >= until)
      timedOut(op, ctx);
    backOff(polls);
  }
}

void NcclCommunicator::waitStream(cudaStream_t stream, const char *op,
                                  const Context &ctx,
                                  Clock::time_point until) const {
  for (unsigned polls = 0;; ++polls) {
    cudaError_t done = cudaStreamQuery(stream);
    if (done != cudaSuccess && done != cudaErrorNotReady)
      checkCuda(done, "cudaStreamQuery", op, ctx);
    // A peer's failure (or a network error) shows up here, not on the
    // stream, which would otherwise wait until the deadline.
    ncclResult_t state = ncclSuccess;
    ncclResult_t rc = ncclCommGetAsyncError(comm_, &state);
    if (rc != ncclSuccess)
      fail(op, ctx,
           "failed: ncclCommGetAsyncError: " + ncclErrorText(rc, comm_));
    if (state != ncclSuccess && state != ncclInProgress)
      fail(op, ctx, "failed: " + ncclErrorText(state, comm_));
    if (done == cudaSuccess)
      return;
    if (Clock::now() >= until)
      timedOut(op, ctx);
    backOff(polls);
  }
}

void NcclCommunicator::checkPeer(int peer, const char *what, const char *op,
                                 const Context &ctx) const {
  if (peer < 0 || peer >= size_)
    fail(op, ctx,
         std::string("failed: invalid ") + what + " " + std::to_string(peer) +
             " (communicator size " + std::to_string(size_) + ")");
}

void NcclCommunicator::checkTag(int tag, const char *op,
                                const Context &ctx) const {
  if (tag < 0)
    fail(op, ctx,
         "failed: invalid tag " + std::to_string(tag) + " (tags are >= 0)");
}

//===----------------------------------------------------------------------===//
// Enqueueing
//===----------------------------------------------------------------------===//

void NcclCommunicator::allReduceOn(const char *name, const void *send,
                                   void *recv, size_t count,
                                   ncclDataType_t type, ReduceOp op,
                                   const Context &ctx,
                                   Clock::time_point until) {
  checkNccl(ncclAllReduce(send, recv, count, type, ncclOp(op), comm_, stream_),
            comm_, name, ctx, until);
}

void NcclCommunicator::allGatherOn(const char *name, const void *send,
                                   void *recv, size_t countPerRank,
                                   ncclDataType_t type, const Context &ctx,
                                   Clock::time_point until) {
  checkNccl(ncclAllGather(send, recv, countPerRank, type, comm_, stream_),
            comm_, name, ctx, until);
}

void NcclCommunicator::reduceScatterOn(const char *name, const void *send,
                                       void *recv, size_t countPerRank,
                                       ncclDataType_t type, ReduceOp op,
                                       const Context &ctx,
                                       Clock::time_point until) {
  checkNccl(ncclReduceScatter(send, recv, countPerRank, type, ncclOp(op), comm_,
                              stream_),
            comm_, name, ctx, until);
}

void NcclCommunicator::allToAllOn(const char *name, const float *send,
                                  float *recv, size_t countPerRank,
                                  const Context &ctx, Clock::time_point until) {
  // One group of a send and a recv per peer (self included): NCCL runs them
  // concurrently, so the order of peers cannot deadlock.
  checkNccl(ncclGroupStart(), comm_, name, ctx, until);
  for (int peer = 0; peer < size_; ++peer) {
    size_t offset = static_cast<size_t>(peer) * countPerRank;
    checkNccl(ncclSend(send + offset, countPerRank, ncclFloat32, peer, comm_,
                       stream_),
              comm_, name, ctx, until);
    checkNccl(ncclRecv(recv + offset, countPerRank, ncclFloat32, peer, comm_,
                       stream_),
              comm_, name, ctx, until);
  }
  checkNccl(ncclGroupEnd(), comm_, name, ctx, until);
}

void NcclCommunicator::allToAllBytesOn(const char *name, const void *send,
                                       const std::vector<size_t> &sendBytes,
                                       void *recv,
                                       const std::vector<size_t> &recvBytes,
                                       const Context &ctx,
                                       Clock::time_point until) {
  if (sendBytes.size() != size_t(size_) || recvBytes.size() != size_t(size_))
    fail(name, ctx,
         "failed: " + std::to_string(sendBytes.size()) + " send and " +
             std::to_string(recvBytes.size()) + " receive sizes for " +
             std::to_string(size_) + " ranks");
  // As allToAllOn, one group; a peer with nothing to move is left out, so
  // an expert that received no tokens costs no transfer.
  const auto *from = static_cast<const uint8_t *>(send);
  auto *to = static_cast<uint8_t *>(recv);
  checkNccl(ncclGroupStart(), comm_, name, ctx, until);
  for (int peer = 0; peer < size_; ++peer) {
    if (sendBytes[size_t(peer)] > 0)
      checkNccl(ncclSend(from, sendBytes[size_t(peer)], ncclUint8, peer, comm_,
                         stream_),
                comm_, name, ctx, until);
    if (recvBytes[size_t(peer)] > 0)
      checkNccl(ncclRecv(to, recvBytes[size_t(peer)], ncclUint8, peer, comm_,
                         stream_),
                comm_, name, ctx, until);
    from += sendBytes[size_t(peer)];
    to += recvBytes[size_t(peer)];
  }
  checkNccl(ncclGroupEnd(), comm_, name, ctx, until);
}

void NcclCommunicator::broadcastOn(const char *name, float *data, size_t count,
                                   int root, const Context &ctx,
                                   Clock::time_point until) {
  checkPeer(root, "root", name, ctx);
  checkNccl(ncclBroadcast(data, data, count, ncclFloat32, root, comm_, stream_),
            comm_, name, ctx, until);
}

void NcclCommunicator::sendOn(const char *name, const float *data, size_t count,
                              int peer, int tag, const Context &ctx,
                              Clock::time_point until) {
  checkPeer(peer, "peer", name, ctx);
  checkTag(tag, name, ctx);
  checkNccl(ncclSend(data, count, ncclFloat32, peer, comm_, stream_), comm_,
            name, ctx, until);
}

void NcclCommunicator::recvOn(const char *name, float *data, size_t count,
                              int peer, int tag, const Context &ctx,
                              Clock::time_point until) {
  checkPeer(peer, "peer", name, ctx);
  checkTag(tag, name, ctx);
  checkNccl(ncclRecv(data, count, ncclFloat32, peer, comm_, stream_), comm_,
            name, ctx, until);
}

void NcclCommunicator::sendRecvOn(const char *name, const float *send,
                                  size_t sendCount, int sendPeer, float *recv,
                                  size_t recvCount, int recvPeer,
                                  const Context &ctx, Clock::time_point until) {
  checkPeer(sendPeer, "peer", name, ctx);
  checkPeer(recvPeer, "peer", name, ctx);
  checkNccl(ncclGroupStart(), comm_, name, ctx, until);
  checkNccl(ncclSend(send, sendCount, ncclFloat32, sendPeer, comm_, stream_),
            comm_, name, ctx, until);
  checkNccl(ncclRecv(recv, recvCount, ncclFloat32, recvPeer, comm_, stream_),
            comm_, name, ctx, until);
  checkNccl(ncclGroupEnd(), comm_, name, ctx, until);
}

//===----------------------------------------------------------------------===//
// Blocking operations: enqueue, then wait for the stream
//===----------------------------------------------------------------------===//

void NcclCommunicator::allReduce(float *data, size_t count, ReduceOp op,
                                 const Context &ctx) {
  allReduce(data, data, count, op, ctx);
}

void NcclCommunicator::allReduce(const float *send, float *recv, size_t count,
                                 ReduceOp op, const Context &ctx) {
  const char *name = "all_reduce";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  allReduceOn(name, send, recv, count, ncclFloat32, op, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::allGather(const float *send, float *recv,
                                 size_t countPerRank, const Context &ctx) {
  const char *name = "all_gather";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  allGatherOn(name, send, recv, countPerRank, ncclFloat32, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::reduceScatter(const float *send, float *recv,
                                     size_t countPerRank, ReduceOp op,
                                     const Context &ctx) {
  const char *name = "reduce_scatter";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  reduceScatterOn(name, send, recv, countPerRank, ncclFloat32, op, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::allToAll(const float *send, float *recv,
                                size_t countPerRank, const Context &ctx) {
  const char *name = "all_to_all";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  allToAllOn(name, send, recv, countPerRank, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::allToAllRows(const float *send,
                                    const std::vector<int64_t> &sendRows,
                                    float *recv,
                                    const std::vector<int64_t> &recvRows,
                                    size_t rowElements, const Context &ctx) {
  const char *name = "all_to_all";
  DeviceScope scope(*this, name, ctx);
  auto bytesOf = [&](const std::vector<int64_t> &rows) {
    std::vector<size_t> bytes;
    for (int64_t n : rows) {
      if (n < 0)
        fail(name, ctx, "failed: a negative row count " + std::to_string(n));
      bytes.push_back(size_t(n) * rowElements * sizeof(float));
    }
    return bytes;
  };
  Clock::time_point until = deadline();
  allToAllBytesOn(name, send, bytesOf(sendRows), recv, bytesOf(recvRows), ctx,
                  until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::broadcast(float *data, size_t count, int root,
                                 const Context &ctx) {
  const char *name = "broadcast";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  broadcastOn(name, data, count, root, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::send(const float *data, size_t count, int peer, int tag,
                            const Context &ctx) {
  const char *name = "send";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  sendOn(name, data, count, peer, tag, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::recv(float *data, size_t count, int peer, int tag,
                            const Context &ctx) {
  const char *name = "recv";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  recvOn(name, data, count, peer, tag, ctx, until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::sendRecv(const float *send, size_t sendCount,
                                int sendPeer, float *recv, size_t recvCount,
                                int recvPeer, const Context &ctx) {
  const char *name = "send_recv";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  sendRecvOn(name, send, sendCount, sendPeer, recv, recvCount, recvPeer, ctx,
             until);
  waitStream(stream_, name, ctx, until);
}

void NcclCommunicator::barrier(const Context &ctx) {
  const char *name = "barrier";
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  allReduceOn(name, scratch_, scratch_, 1, ncclFloat32, ReduceOp::Sum, ctx,
              until);
  waitStream(stream_, name, ctx, until);
}

std::unique_ptr<Communicator> NcclCommunicator::split(int color, int key,
                                                      const Context &ctx) {
  const char *name = "split";
  if (color < 0 && color != kNoColor)
    fail(name, ctx,
         "failed: invalid color " + std::to_string(color) +
             " (colors are >= 0, or kNoColor)");
  DeviceScope scope(*this, name, ctx);
  Clock::time_point until = deadline();
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  ncclComm_t child = nullptr;
  ncclResult_t rc =
      ncclCommSplit(comm_, color == kNoColor ? NCCL_SPLIT_NOCOLOR : color, key,
                    &child, &config);
  if (rc != ncclSuccess && rc != ncclInProgress)
    fail(name, ctx, "failed: ncclCommSplit: " + ncclErrorText(rc, comm_));
  // The split is collective over this communicator: a missing peer leaves
  // both the parent and the child in progress until the deadline.
  waitReady(comm_, name, ctx, until);
  if (!child)
    return nullptr;
  waitReady(child, name, ctx, until);
  std::string group = ctx.what && *ctx.what ? ctx.what : "group";
  std::unique_ptr<NcclCommunicator> result(
      new NcclCommunicator(worldRank_, std::move(group), device_, options_));
  result->adopt(child, ctx);
  return result;
}

} // namespace partition::runtime::comm
