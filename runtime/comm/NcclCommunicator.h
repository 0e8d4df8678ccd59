//===- NcclCommunicator.h - Communicator over NCCL --------------*- C++ -*-===//
//
// The GPU implementation of Communicator: NCCL collectives on device buffers
// (float32 through the Communicator interface; the enqueue forms also take
// bfloat16 and int32, see DataType; device memory of this communicator's
// device), bootstrapped over MPI. Built only where the CUDA toolkit and NCCL
// >= 2.18 are found (cmake/CUDA.cmake: PARTITION_HAVE_NCCL, target
// PartitionCommNccl).
//
// Communicators are non-blocking NCCL communicators (ncclConfig_t.blocking =
// 0), so nothing inside NCCL can block the host: every operation enqueues on
// this communicator's CUDA stream, then polls cudaStreamQuery and
// ncclCommGetAsyncError against a deadline (default 300 s), as
// MpiCommunicator polls MPI_Test. Initialisation and split() are polled the
// same way. On timeout, a CUDA or NCCL error, or an invalid argument, it
// prints the one line of Communicator.h's error contract, e.g.
//   rank 3 (tp rank 1 of 2): all_reduce 'grads bucket 3' at step 7 timed out
//   after 300 s; a peer is missing or stuck
// calls ncclCommAbort, then MPI_Abort (std::abort where MPI is not
// initialised, e.g. a communicator made by create()).
//
// Differences from MpiCommunicator a caller may notice:
//  - ReduceOp::Avg is ncclAvg. For float NCCL multiplies every contribution
//    by 1/size() before summing; with a power-of-two size() that equals
//    sum / size() exactly, otherwise it may differ in the last bit.
//  - NCCL has no tags: send/recv check tag >= 0 but match in posting order
//    per peer pair only. A blocking send waits for its recv, so two ranks
//    that exchange must order their calls (or use sendRecv()).
//  - Every operation makes this communicator's device current for its
//    duration and restores the caller's device afterwards.
//
// For the CUDA backend, the enqueue*() forms return once the operation is on
// stream() and leave completion to the caller (an event on stream(), or
// synchronize()), so communication can overlap compute.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_COMM_NCCLCOMMUNICATOR_H
#define PARTITION_RUNTIME_COMM_NCCLCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <string>

namespace partition::runtime::comm {

class MpiCommunicator;

/// Element types of the typed enqueue forms (the CUDA backend's buffers).
enum class DataType { F32, BF16, I32 };
/// Bytes per element: 4, 2, 4.
size_t dataTypeBytes(DataType type);
/// "f32", "bf16", "i32".
const char *dataTypeName(DataType type);

struct NcclOptions {
  /// Longest time any operation (initialisation and split included) may take
  /// before the job is aborted.
  double timeoutSeconds = 300.0;
};

class NcclCommunicator final : public Communicator {
public:
  /// Collective over `mpi`: one NCCL rank per MPI rank, with mpi's rank
  /// numbering, on CUDA device `device` (usually the node-local rank modulo
  /// the device count; two ranks must not share a device). Rank 0 creates
  /// the NCCL unique id and broadcasts it through mpi.broadcast (under mpi's
  /// timeout and error contract).
  static std::unique_ptr<NcclCommunicator>
  world(MpiCommunicator &mpi, int device, NcclOptions options = {});

  /// One rank alone, without MPI (a single-device program that still has
  /// collectives, e.g. over a mesh of size 1).
  static std::unique_ptr<NcclCommunicator> single(int device,
                                                  NcclOptions options = {});

  /// Lower-level bootstrap without MPI: rank `rank` of `size` ranks that
  /// share `id` (from ncclGetUniqueId on one of them). Error messages name
  /// `rank`. For single-process use and tests.
  static std::unique_ptr<NcclCommunicator> create(const ncclUniqueId &id,
                                                  int rank, int size,
                                                  int device,
                                                  NcclOptions options = {});

  /// Flushes outstanding work (ncclCommFinalize, polled against the
  /// timeout), then destroys the NCCL communicator and the stream.
  ~NcclCommunicator() override;
  NcclCommunicator(const NcclCommunicator &) = delete;
  NcclCommunicator &operator=(const NcclCommunicator &) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// The rank named in messages (the world rank of the bootstrap).
  int worldRank() const { return worldRank_; }
  int device() const { return device_; }
  ncclComm_t handle() const { return comm_; }
  /// Every operation of this communicator runs on this stream (created
  /// non-blocking with respect to the legacy default stream).
  cudaStream_t stream() const { return stream_; }

  double timeoutSeconds() const { return options_.timeoutSeconds; }
  void setTimeoutSeconds(double seconds) { options_.timeoutSeconds = seconds; }

  // Communicator: enqueue, then wait for completion against the timeout.
  void allReduce(float *data, size_t count, ReduceOp op,
                 const Context &ctx) override;
  void allReduce(const float *send, float *recv, size_t count, ReduceOp op,
                 const Context &ctx) override;
  void allGather(const float *send, float *recv, size_t countPerRank,
                 const Context &ctx) override;
  void reduceScatter(const float *send, float *recv, size_t countPerRank,
                     ReduceOp op, const Context &ctx) override;
  void allToAll(const float *send, float *recv, size_t countPerRank,
                const Context &ctx) override;
  void allToAllRows(const float *send, const std::vector<int64_t> &sendRows,
                    float *recv, const std::vector<int64_t> &recvRows,
                    size_t rowElements, const Context &ctx) override;
  void broadcast(float *data, size_t count, int root,
                 const Context &ctx) override;
  void send(const float *data, size_t count, int peer, int tag,
            const Context &ctx) override;
  void recv(float *data, size_t count, int peer, int tag,
            const Context &ctx) override;
  /// An all-reduce of one float.
  void barrier(const Context &ctx) override;
  /// ncclCommSplit (same key/tie ordering as MPI_Comm_split). The new
  /// communicator has its own stream, the same device and the same options.
  std::unique_ptr<Communicator> split(int color, int key,
                                      const Context &ctx) override;

  /// Sends sendCount floats to sendPeer and receives recvCount floats from
  /// recvPeer as one NCCL group, so a pipeline's paired exchange (or a rank
  /// sending to itself) cannot deadlock. Blocking.
  void sendRecv(const float *send, size_t sendCount, int sendPeer, float *recv,
                size_t recvCount, int recvPeer, const Context &ctx);

  // Enqueue-only forms: they return once the operation is on stream() (after
  // NCCL has left its ncclInProgress state), with the same arguments,
  // checks and error contract as the blocking forms. The buffers must stay
  // valid until the stream has passed the operation.
  void enqueueAllReduce(const float *send, float *recv, size_t count,
                        ReduceOp op, const Context &ctx);
  void enqueueAllGather(const float *send, float *recv, size_t countPerRank,
                        const Context &ctx);
  void enqueueReduceScatter(const float *send, float *recv, size_t countPerRank,
                            ReduceOp op, const Context &ctx);
  // Typed forms: counts are elements of `type` (Max and Avg on I32 are
  // NCCL's integer max / truncating average).
  void enqueueAllReduce(const void *send, void *recv, size_t count,
                        DataType type, ReduceOp op, const Context &ctx);
  void enqueueAllGather(const void *send, void *recv, size_t countPerRank,
                        DataType type, const Context &ctx);
  void enqueueReduceScatter(const void *send, void *recv, size_t countPerRank,
                            DataType type, ReduceOp op, const Context &ctx);
  /// A bucket of buffers of one type, each all-reduced in place, as one
  /// NCCL group (one launch, no packing copy).
  struct Span {
    void *data;
    size_t count;
  };
  void enqueueAllReduceBucket(const Span *spans, size_t numSpans, DataType type,
                              ReduceOp op, const Context &ctx);
  void enqueueAllToAll(const float *send, float *recv, size_t countPerRank,
                       const Context &ctx);
  /// An all-to-all of variable sizes in bytes (device pointers): send
  /// holds sendBytes[j] bytes for rank j, then the next rank's; recv
  /// receives recvBytes[i] bytes from rank i, in rank order. One NCCL group
  /// of a send and a receive per peer with bytes to move (a mixture of
  /// experts' filled rows, runtime/backend/cuda/CudaCollectives.cpp).
  void enqueueAllToAllBytes(const void *send,
                            const std::vector<size_t> &sendBytes, void *recv,
                            const std::vector<size_t> &recvBytes,
                            const Context &ctx);
  void enqueueBroadcast(float *data, size_t count, int root,
                        const Context &ctx);
  void enqueueSend(const float *data, size_t count, int peer, int tag,
                   const Context &ctx);
  void enqueueRecv(float *data, size_t count, int peer, int tag,
                   const Context &ctx);
  void enqueueSendRecv(const float *send, size_t sendCount, int sendPeer,
                       float *recv, size_t recvCount, int recvPeer,
                       const Context &ctx);
  /// Pipeline transfers of raw bytes (any element type), enqueued on
  /// stream(); the buffer must stay valid until the stream has passed them.
  void enqueueSendBytes(const void *data, size_t bytes, int peer,
                        const Context &ctx);
  void enqueueRecvBytes(void *data, size_t bytes, int peer, const Context &ctx);
  /// Waits until everything enqueued on stream() has completed, polling
  /// against the timeout ("synchronize" in messages).
  void synchronize(const Context &ctx);
  /// Waits until everything enqueued on `stream` (another stream, which may
  /// wait for this communicator's work) has completed, polling it and this
  /// communicator's asynchronous error against the timeout: the CUDA
  /// backend's end of a step whose last collectives on stream() are
  /// carried into the next one.
  void synchronizeWith(cudaStream_t stream, const Context &ctx);

private:
  using Clock = std::chrono::steady_clock;
  /// Makes device_ current for one operation; restores the caller's device.
  class DeviceScope;

  NcclCommunicator(int worldRank, std::string group, int device,
                   NcclOptions options);

  Clock::time_point deadline() const;
  /// Prints "rank R[ (group r of n)]: OP 'what'[ at step S] DETAIL", aborts
  /// the NCCL communicator and the job.
  [[noreturn]] void fail(const char *op, const Context &ctx,
                         const std::string &detail) const;
  [[noreturn]] void timedOut(const char *op, const Context &ctx) const;
  void checkCuda(cudaError_t error, const char *call, const char *op,
                 const Context &ctx) const;
  /// Fails unless rc is ncclSuccess or ncclInProgress; on ncclInProgress
  /// waits (until `until`) for comm to leave that state.
  void checkNccl(ncclResult_t rc, ncclComm_t comm, const char *op,
                 const Context &ctx, Clock::time_point until) const;
  /// Polls ncclCommGetAsyncError until comm is no longer in progress.
  void waitReady(ncclComm_t comm, const char *op, const Context &ctx,
                 Clock::time_point until) const;
  /// Polls `stream` (and NCCL's asynchronous error) until it is idle.
  void waitStream(cudaStream_t stream, const char *op, const Context &ctx,
                  Clock::time_point until) const;
  void checkPeer(int peer, const char *what, const char *op,
                 const Context &ctx) const;
  void checkTag(int tag, const char *op, const Context &ctx) const;
  /// Creates the stream and initialises comm_ from id (polled).
  void init(const ncclUniqueId &id, int rank, int size, const Context &ctx);
  /// Takes over an initialised comm (from ncclCommSplit) and makes a stream.
  void adopt(ncclComm_t comm, const Context &ctx);

  void allReduceOn(const char *name, const void *send, void *recv, size_t count,
                   ncclDataType_t type, ReduceOp op, const Context &ctx,
                   Clock::time_point until);
  void allGatherOn(const char *name, const void *send, void *recv,
                   size_t countPerRank, ncclDataType_t type, const Context &ctx,
                   Clock::time_point until);
  void reduceScatterOn(const char *name, const void *send, void *recv,
                       size_t countPerRank, ncclDataType_t type, ReduceOp op,
                       const Context &ctx, Clock::time_point until);
  void allToAllOn(const char *name, const float *send, float *recv,
                  size_t countPerRank, const Context &ctx,
                  Clock::time_point until);
  void allToAllBytesOn(const char *name, const void *send,
                       const std::vector<size_t> &sendBytes, void *recv,
                       const std::vector<size_t> &recvBytes, const Context &ctx,
                       Clock::time_point until);
  void broadcastOn(const char *name, float *data, size_t count, int root,
                   const Context &ctx, Clock::time_point until);
  void sendOn(const char *name, const float *data, size_t count, int peer,
              int tag, const Context &ctx, Clock::time_point until);
  void recvOn(const char *name, float *data, size_t count, int peer, int tag,
              const Context &ctx, Clock::time_point until);
  void sendRecvOn(const char *name, const float *send, size_t sendCount,
                  int sendPeer, float *recv, size_t recvCount, int recvPeer,
                  const Context &ctx, Clock::time_point until);

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  float *scratch_ = nullptr; // one float on the device, for barrier()
  std::string group_;        // empty for the world communicator
  NcclOptions options_;
  int device_ = 0;
  int rank_ = 0;
  int size_ = 1;
  int worldRank_ = 0;
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_NCCLCOMMUNICATOR_H
