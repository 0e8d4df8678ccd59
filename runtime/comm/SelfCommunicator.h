//===- SelfCommunicator.h - the group of one process ------------*- C++ -*-===//
//
// The world of a process started without a launcher: every collective over
// one rank is the identity (avg divides by 1), so a program compiled for a
// one-device mesh runs its collectives without MPI.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_RUNTIME_COMM_SELFCOMMUNICATOR_H
#define PARTITION_RUNTIME_COMM_SELFCOMMUNICATOR_H

#include "runtime/comm/Communicator.h"

namespace partition::runtime::comm {

class SelfCommunicator final : public Communicator {
public:
  int rank() const override { return 0; }
  int size() const override { return 1; }
  /// Nothing is shared between its operations.
  bool concurrentThreads() const override { return true; }

  void allReduce(float *, size_t, ReduceOp, const Context &) override {}
  void allReduce(const float *send, float *recv, size_t count, ReduceOp,
                 const Context &) override;
  void allGather(const float *send, float *recv, size_t countPerRank,
                 const Context &) override;
  void reduceScatter(const float *send, float *recv, size_t countPerRank,
                     ReduceOp, const Context &) override;
  void allToAll(const float *send, float *recv, size_t countPerRank,
                const Context &) override;
  void allToAllRows(const float *send, const std::vector<int64_t> &sendRows,
                    float *recv, const std::vector<int64_t> &recvRows,
                    size_t rowElements, const Context &ctx) override;
  void broadcast(float *, size_t, int root, const Context &ctx) override;
  /// There is no peer: send and recv throw std::logic_error.
  void send(const float *, size_t, int peer, int, const Context &ctx) override;
  void recv(float *, size_t, int peer, int, const Context &ctx) override;
  void barrier(const Context &) override {}
  std::unique_ptr<Communicator> split(int color, int key,
                                      const Context &ctx) override;
};

} // namespace partition::runtime::comm

#endif // PARTITION_RUNTIME_COMM_SELFCOMMUNICATOR_H
