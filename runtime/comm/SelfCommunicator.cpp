//===- SelfCommunicator.cpp - the group of one process --------------------===//

#include "runtime/comm/SelfCommunicator.h"

#include <cstring>
#include <stdexcept>
#include <string>

namespace partition::runtime::comm {

namespace {

void copy(const float *send, float *recv, size_t count) {
  if (send != recv && count)
    std::memmove(recv, send, count * sizeof(float));
}

[[noreturn]] void noPeer(const char *op, int peer, const Context &ctx) {
  throw std::logic_error(std::string(op) + " '" + (ctx.what ? ctx.what : "") +
                         "' names peer " + std::to_string(peer) +
                         " in a group of one rank");
}

} // namespace

void SelfCommunicator::allReduce(const float *send, float *recv, size_t count,
                                 ReduceOp, const Context &) {
  copy(send, recv, count);
}

void SelfCommunicator::allGather(const float *send, float *recv,
                                 size_t countPerRank, const Context &) {
  copy(send, recv, countPerRank);
}

void SelfCommunicator::reduceScatter(const float *send, float *recv,
                                     size_t countPerRank, ReduceOp,
                                     const Context &) {
  copy(send, recv, countPerRank);
}

void SelfCommunicator::allToAll(const float *send, float *recv,
                                size_t countPerRank, const Context &) {
  copy(send, recv, countPerRank);
}

void SelfCommunicator::allToAllRows(const float *send,
                                    const std::vector<int64_t> &sendRows,
                                    float *recv,
                                    const std::vector<int64_t> &recvRows,
                                    size_t rowElements, const Context &ctx) {
  if (sendRows.size() != 1 || recvRows.size() != 1 ||
      sendRows[0] != recvRows[0])
    throw std::logic_error(std::string(ctx.what ? ctx.what : "all_to_all") +
                           ": one rank sends itself what it receives");
  copy(send, recv, size_t(sendRows[0]) * rowElements);
}

void SelfCommunicator::broadcast(float *, size_t, int root,
                                 const Context &ctx) {
  if (root != 0)
    noPeer("broadcast", root, ctx);
}

void SelfCommunicator::send(const float *, size_t, int peer, int,
                            const Context &ctx) {
  noPeer("send", peer, ctx);
}

void SelfCommunicator::recv(float *, size_t, int peer, int,
                            const Context &ctx) {
  noPeer("recv", peer, ctx);
}

std::unique_ptr<Communicator> SelfCommunicator::split(int color, int,
                                                      const Context &) {
  if (color == kNoColor)
    return nullptr;
  return std::make_unique<SelfCommunicator>();
}

} // namespace partition::runtime::comm
