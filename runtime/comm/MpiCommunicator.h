//===- MpiCommunicator.h - Communicator over MPI ----------------*- C++ -*-===//
//
// The CPU implementation of Communicator: MPI's C API, non-blocking calls
// polled with MPI_Test against a deadline (see the error contract in
// Communicator.h); a timeout names the rank that stopped (PeerWatch.h). Communicators use MPI_ERRORS_RETURN; an MPI error, a
// timeout or an invalid argument prints one line and calls MPI_Abort on
// MPI_COMM_WORLD.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_COMM_MPICOMMUNICATOR_H
#define PARTITION_RUNTIME_COMM_MPICOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

#include <mpi.h>

#include <cstdint>
#include <deque>
#include <functional>
#include <string>
#include <vector>

namespace partition::runtime::comm {

struct MpiOptions {
  /// Longest time any blocking operation may take before the job is aborted.
  double timeoutSeconds = 300.0;
};

class MpiCommunicator final : public Communicator {
public:
  /// Initialises MPI once (MPI_Init_thread asking for MPI_THREAD_MULTIPLE,
  /// so that the CPU backend's communication thread may run collectives
  /// while the main thread runs others; MPI_Finalize runs at exit) and returns a communicator over all processes (a duplicate
  /// of MPI_COMM_WORLD). May be called again; later calls return new
  /// duplicates and ignore argc/argv.
  static std::unique_ptr<MpiCommunicator> world(int *argc, char ***argv,
                                                MpiOptions options = {});

  ~MpiCommunicator() override;
  MpiCommunicator(const MpiCommunicator &) = delete;
  MpiCommunicator &operator=(const MpiCommunicator &) = delete;

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  /// The rank of this process in MPI_COMM_WORLD (named in messages).
  int worldRank() const { return worldRank_; }
  MPI_Comm handle() const { return comm_; }

  /// This process's rank among the ranks of this communicator on the same
  /// node, and their number (MPI_Comm_split_type SHARED); collective. The
  /// CUDA backend gives each of them a device of its own.
  struct NodeRanks {
    int rank = 0;
    int size = 1;
  };
  NodeRanks nodeRanks() const;

  double timeoutSeconds() const { return options_.timeoutSeconds; }
  void setTimeoutSeconds(double seconds) { options_.timeoutSeconds = seconds; }

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
  /// MPI_Isend of a copy; the request is completed by later sends,
  /// completeSends(), or at the latest when the communicator is destroyed.
  void sendEager(const void *data, size_t bytes, int peer, int tag,
                 const Context &ctx) override;
  void recvBytes(void *data, size_t bytes, int peer, int tag,
                 const Context &ctx) override;
  void completeSends(const Context &ctx) override;
  void barrier(const Context &ctx) override;
  /// MPI_THREAD_MULTIPLE was provided (MPI_Query_thread).
  bool concurrentThreads() const override;
  std::unique_ptr<Communicator> split(int color, int key,
                                      const Context &ctx) override;

private:
  MpiCommunicator(MPI_Comm comm, std::string group, MpiOptions options);

  /// Prints "rank R[ (group r of n)]: OP 'what'[ at step S] DETAIL" and
  /// aborts the job.
  [[noreturn]] void fail(const char *op, const Context &ctx,
                         const std::string &detail) const;
  /// Prints fail()'s line only.
  void say(const char *op, const Context &ctx,
           const std::string &detail) const;
  /// Ends every rank of the job (MPI_Abort).
  [[noreturn]] static void abortJob();
  /// Fails with the MPI error string unless rc is MPI_SUCCESS.
  void check(int rc, const char *op, const Context &ctx) const;
  /// Waits for request until the deadline; fails on timeout or error, or
  /// as soon as another rank of the node has timed out (PeerWatch). `peer`
  /// (a rank of this communicator, or -1 for a collective) is who the
  /// operation waits for, blamed first when it is the one that stopped.
  void wait(MPI_Request &request, const char *op, const Context &ctx,
            int peer = -1) const;
  /// The world rank of this communicator's rank `peer`; -1 for none.
  int worldRankOf(int peer) const;
  /// Checks count fits MPI's int counts.
  int toInt(size_t count, const char *op, const Context &ctx) const;
  void checkPeer(int peer, const char *what, const char *op,
                 const Context &ctx) const;

  /// Drops the eager sends that have completed, oldest first.
  void reapSends(const Context &ctx);

  // The ring collectives (MpiRing.cpp): large all-reduces and
  // reduce-scatters as p - 1 exchanges with the ring's neighbours, each
  // rank adding up 1/p of the data, instead of the library's non-blocking
  // schedule (Open MPI 4.1's libnbc reduces an in-place all-reduce, and
  // every reduce-scatter, on one rank).

  /// Whether a collective over `count` elements in all takes the ring.
  bool usesRing(size_t count) const;
  /// Reduces `data` (count elements in `size()` blocks, the first count %
  /// size() one element longer) in place over the ring: afterwards block
  /// rank() holds the reduction (an average divided); the other blocks
  /// hold partial results.
  void ringReduceScatterInPlace(float *data, size_t count, ReduceOp op,
                                const char *name, const Context &ctx);
  /// Reduces `send` (countPerRank elements per rank) and writes block
  /// rank() of the reduction (an average divided) into `recv`; `send` is
  /// left unchanged.
  void ringReduceScatter(const float *send, float *recv, size_t countPerRank,
                         ReduceOp op, const char *name, const Context &ctx);
  /// Completes an all-reduce whose block b is reduced on rank b: every
  /// rank's block sent around the ring.
  void ringAllGatherInPlace(float *data, size_t count, const char *name,
                            const Context &ctx);
  /// Sends `sendCount` elements to `to` while receiving `recvCount` from
  /// `from`, both waited for (against the deadline).
  void exchange(const float *send, size_t sendCount, int to, float *recv,
                size_t recvCount, int from, const char *name,
                const Context &ctx);
  /// Elements per message of a reduction step: 1 MiB.
  static constexpr size_t kRingSegment = size_t(1) << 18;
  /// Where a reduction step's received elements go: `n` of them, from
  /// element `at` of the block, in a scratch segment.
  using SegmentSink =
      std::function<void(const float *incoming, size_t at, size_t n)>;
  /// One step of a ring reduction: sends `sendCount` elements to `to`, and
  /// hands the `recvCount` received from `from` to `sink` a segment
  /// (kRingSegment) at a time, while the next one arrives.
  void reduceStep(const float *send, size_t sendCount, int to,
                  size_t recvCount, int from, const SegmentSink &sink,
                  const char *name, const Context &ctx);
  /// A communicator of the same group for the ring's messages, so that
  /// they never match the program's own sends and receives (duplicated at
  /// the first ring collective, which every rank of the group reaches in
  /// the same order).
  MPI_Comm ringComm(const char *name, const Context &ctx);
  /// `count` floats of scratch, kept between collectives (a communicator
  /// is used by one thread at a time).
  float *scratch(size_t count);
  MPI_Comm ringComm_ = MPI_COMM_NULL;
  std::vector<float> scratch_;
  /// An out-of-place reduce-scatter's partial sums on more than 2 ranks.
  std::vector<float> partials_;

  /// An eager send in flight: its request, the copy MPI reads, and what
  /// names it if it never completes.
  struct PendingSend {
    MPI_Request request = MPI_REQUEST_NULL;
    std::vector<uint8_t> bytes;
    std::string what, peer;
    int64_t step = -1;
    int peerRank = -1;
  };
  std::deque<PendingSend> pending_;

  MPI_Comm comm_;
  std::string group_; // empty for the world communicator
  MpiOptions options_;
  int rank_ = 0;
  int size_ = 1;
  int worldRank_ = 0;
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_MPICOMMUNICATOR_H
