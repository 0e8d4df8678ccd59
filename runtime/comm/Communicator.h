//===- Communicator.h - Collectives over a group of ranks -------*- C++ -*-===//
//
// The runtime's communicator layer: one abstract interface for the collective
// and point-to-point operations a partitioned training step needs, with one
// implementation per transport (MPI on CPU, runtime/comm/MpiCommunicator.h;
// NCCL on GPU, later).
//
// Design
//  - A Communicator is a group of `size()` ranks numbered 0..size()-1; this
//    process is `rank()`. The world communicator holds every process; split()
//    derives one communicator per mesh axis (e.g. on a dp x tp mesh, split by
//    the dp coordinate gives the tp groups and vice versa), like
//    MPI_Comm_split: ranks passing the same color share a group, ordered by
//    key (ties by rank in the parent).
//  - All operations are blocking from the caller's view and must be called by
//    every rank of the group in the same order (send/recv: by the two peers).
//    Buffers are float32 (host memory for MPI; device memory for NCCL) and
//    counts are element counts. Collectives over blocks (allGather,
//    reduceScatter, allToAll) lay blocks out by rank: block r of a buffer is
//    elements [r * countPerRank, (r + 1) * countPerRank).
//  - Avg is sum divided by size() (each element x / size, not x * (1/size)).
//
// Error contract
//  - Every operation takes a Context (what, step) that names it in messages:
//    `comm.allReduce(buf, n, ReduceOp::Sum, {"grads bucket 3", 12})`.
//  - A failure never hangs silently and is never returned to the caller: an
//    operation that does not complete within the implementation's timeout, a
//    transport error, or an invalid argument (peer out of range, ...) prints
//    ONE line to stderr naming this process's rank, the operation, the
//    context and the step, e.g.
//      rank 1: all_reduce 'grads bucket 3' at step 12 timed out after 300 s;
//      rank 3 has shown no sign of life for 300.2 s (stopped or dead)
//    (on one line; PeerWatch.h names the rank that stopped, the same on
//    every rank), then aborts the whole job so every rank exits non-zero.
//    A distributed step cannot be resumed once a rank is lost, so there is
//    nothing useful a caller could do with an error code.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_COMM_COMMUNICATOR_H
#define PARTITION_RUNTIME_COMM_COMMUNICATOR_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace partition::runtime::comm {

enum class ReduceOp { Sum, Avg, Max };

/// Returns "sum", "avg" or "max".
const char *reduceOpName(ReduceOp op);


/// Names an operation for error messages: what it is for and the training
/// step (negative: no step, e.g. during start-up). `what` must stay valid for
/// the duration of the call only.
struct Context {
  Context(const char *what = "", int64_t step = -1, const char *peer = nullptr)
      : what(what), step(step), peer(peer) {}
  const char *what;
  int64_t step;
  /// Optional: who the operation waits for, after the step in messages
  /// ("(stage 1, from stage 0 = rank 0)"); null for none.
  const char *peer;
};

/// The one line a failing operation prints (see the error contract above):
/// "rank W[ (GROUP rank R of N)]: OP 'what'[ at step S] DETAIL\n". `group`
/// is empty for the world communicator.
std::string failureLine(int worldRank, const std::string &group, int rank,
                        int size, const char *op, const Context &ctx,
                        const std::string &detail);

class Communicator {
public:
  /// Pass as split()'s color to take part in the split without joining any
  /// group; split() then returns null.
  static constexpr int kNoColor = -1;

  virtual ~Communicator() = default;

  virtual int rank() const = 0;
  virtual int size() const = 0;

  /// In place: data[i] = op over ranks of data[i].
  virtual void allReduce(float *data, size_t count, ReduceOp op,
                         const Context &ctx) = 0;
  /// Out of place: recv[i] = op over ranks of send[i]. send and recv must not
  /// overlap (pass the same pointer for the in-place form).
  virtual void allReduce(const float *send, float *recv, size_t count,
                         ReduceOp op, const Context &ctx) = 0;
  /// recv (size() * countPerRank) = every rank's send, block r from rank r.
  virtual void allGather(const float *send, float *recv, size_t countPerRank,
                         const Context &ctx) = 0;
  /// send holds size() blocks; recv (countPerRank) = op over ranks of block
  /// rank() of their send.
  virtual void reduceScatter(const float *send, float *recv,
                             size_t countPerRank, ReduceOp op,
                             const Context &ctx) = 0;
  /// send and recv hold size() blocks; block j of rank i's send arrives as
  /// block i of rank j's recv.
  virtual void allToAll(const float *send, float *recv, size_t countPerRank,
                        const Context &ctx) = 0;
  /// An all-to-all of variable sizes, in rows of `rowElements` floats:
  /// send holds sendRows[j] rows for rank j, then the next rank's; recv
  /// receives recvRows[i] rows from rank i, in rank order. Every rank's
  /// recvRows[i] must be rank i's sendRows for it. The default throws
  /// std::logic_error (a communicator that cannot).
  virtual void allToAllRows(const float *send,
                            const std::vector<int64_t> &sendRows, float *recv,
                            const std::vector<int64_t> &recvRows,
                            size_t rowElements, const Context &ctx) {
    (void)send, (void)sendRows, (void)recv, (void)recvRows, (void)rowElements;
    throw std::logic_error(std::string(ctx.what ? ctx.what : "all_to_all") +
                           ": this communicator does not move counted rows");
  }
  /// data on every rank = data on root.
  virtual void broadcast(float *data, size_t count, int root,
                         const Context &ctx) = 0;
  /// Point to point; a send matches the recv with the same peer pair and tag
  /// (tag >= 0), in order.
  virtual void send(const float *data, size_t count, int peer, int tag,
                    const Context &ctx) = 0;
  virtual void recv(float *data, size_t count, int peer, int tag,
                    const Context &ctx) = 0;
  /// Pipeline transfers, in bytes (any element type). sendEager returns
  /// without waiting for the receiver: `data` may be overwritten at once
  /// (the communicator keeps what it needs until the bytes are delivered).
  /// Sends to one peer arrive in order. completeSends waits (under the
  /// timeout) until every eager send has been delivered. The defaults send
  /// and receive whole floats synchronously.
  virtual void sendEager(const void *data, size_t bytes, int peer, int tag,
                         const Context &ctx) {
    send(static_cast<const float *>(data), floatCount(bytes), peer, tag, ctx);
  }
  virtual void recvBytes(void *data, size_t bytes, int peer, int tag,
                         const Context &ctx) {
    recv(static_cast<float *>(data), floatCount(bytes), peer, tag, ctx);
  }
  virtual void completeSends(const Context &) {}
  virtual void barrier(const Context &ctx) = 0;
  /// Whether two threads may each drive a communicator of this transport
  /// at once (MPI: MPI_THREAD_MULTIPLE was provided). The CPU backend runs
  /// started collectives on a thread of their own only then.
  virtual bool concurrentThreads() const { return false; }
  /// Collective over this communicator: returns the group of the ranks that
  /// passed the same color (>= 0), ranked by key then by rank(); null for
  /// kNoColor. ctx.what names the new group in its error messages (e.g.
  /// "tp"). The result is independent of this communicator's lifetime.
  virtual std::unique_ptr<Communicator> split(int color, int key,
                                              const Context &ctx) = 0;

private:
  static size_t floatCount(size_t bytes) {
    if (bytes % sizeof(float) != 0)
      throw std::invalid_argument("this communicator moves whole floats; " +
                                  std::to_string(bytes) +
                                  " bytes are not a multiple of 4");
    return bytes / sizeof(float);
  }
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_COMMUNICATOR_H
