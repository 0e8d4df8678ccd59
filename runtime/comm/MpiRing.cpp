//===- MpiRing.cpp - Large all-reduces and reduce-scatters over a ring ---===//
//
// Every collective of MpiCommunicator is a non-blocking MPI call polled
// against a deadline, so Open MPI serves them from libnbc, whose schedules
// are built for latency rather than bandwidth: an in-place MPI_Iallreduce
// (the runtime's gradient buckets) is a binomial reduce to rank 0 and a
// broadcast back, and MPI_Ireduce_scatter_block (ZeRO's gradients) a
// binomial reduce to rank 0 and a linear scatter: one rank adds up the
// whole bucket while the others wait, and it moves every element twice.
// Measured on gpt2-124m dp2 (2 ranks x 1 thread, 16 buckets of ~31 MB):
// the step took 1330-1470 ms with libnbc's default, 1140-1200 ms with its
// reduce-scatter + all-gather schedule forced (`--mca
// coll_libnbc_iallreduce_algorithm 3`, which it never picks in place).
//
// So above kRingMinElements the collectives run the bandwidth-optimal ring
// here, over MPI's non-blocking point-to-point calls (the same deadline and
// PeerWatch as every other wait): a reduce-scatter in p - 1 exchanges with
// the ring's neighbours, each rank adding up one block of 1/p of the data,
// and for an all-reduce an all-gather of the reduced blocks in p - 1 more.
// The order of the additions is fixed by the ring (block b is summed
// starting from rank b + 1), and an all-reduce and a reduce-scatter of the
// same data give the same bits for the same block; every rank ends with
// the same values. Below the threshold a collective is latency-bound and
// MPI's own schedule is as good.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <algorithm>
#include <cstring>

namespace partition::runtime::comm {
namespace {

/// 64 KiB of floats: from here on the data, not the latency, dominates.
constexpr size_t kRingMinElements = 16384;

/// Block `b` of `count` elements split over `parts`: the first
/// count % parts blocks take one element more.
struct Block {
  size_t begin, size;
};
Block ringBlock(size_t count, int parts, int b) {
  size_t base = count / parts, extra = count % parts, index = size_t(b);
  return {index * base + std::min(index, extra), base + (index < extra)};
}

/// out[i] = a[i] (op) b[i], where `out` may be `a`.
void combine(float *out, const float *a, const float *b, size_t count,
             ReduceOp op) {
  if (op == ReduceOp::Max) {
    for (size_t i = 0; i < count; ++i)
      out[i] = std::max(a[i], b[i]);
    return;
  }
  for (size_t i = 0; i < count; ++i) // Sum, and Avg before its division
    out[i] = a[i] + b[i];
}

/// An average's division, on the one block this rank reduced.
void finish(float *block, size_t count, ReduceOp op, int ranks) {
  if (op != ReduceOp::Avg)
    return;
  float n = static_cast<float>(ranks);
  for (size_t i = 0; i < count; ++i)
    block[i] /= n;
}

} // namespace

bool MpiCommunicator::usesRing(size_t count) const {
  return size_ > 1 && count >= kRingMinElements;
}

MPI_Comm MpiCommunicator::ringComm(const char *name, const Context &ctx) {
  if (ringComm_ != MPI_COMM_NULL)
    return ringComm_;
  MPI_Request request;
  check(MPI_Comm_idup(comm_, &ringComm_, &request), name, ctx);
  wait(request, name, ctx);
  MPI_Comm_set_errhandler(ringComm_, MPI_ERRORS_RETURN);
  return ringComm_;
}

float *MpiCommunicator::scratch(size_t count) {
  if (scratch_.size() < count)
    scratch_.resize(count);
  return scratch_.data();
}

void MpiCommunicator::exchange(const float *send, size_t sendCount, int to,
                               float *recv, size_t recvCount, int from,
                               const char *name, const Context &ctx) {
  MPI_Comm comm = ringComm(name, ctx);
  MPI_Request received, sent;
  check(MPI_Irecv(recv, toInt(recvCount, name, ctx), MPI_FLOAT, from, 0, comm,
                  &received),
        name, ctx);
  check(MPI_Isend(send, toInt(sendCount, name, ctx), MPI_FLOAT, to, 0, comm,
                  &sent),
        name, ctx);
  wait(received, name, ctx, from);
  wait(sent, name, ctx, to);
}

void MpiCommunicator::ringReduceScatterInPlace(float *data, size_t count,
                                               ReduceOp op, const char *name,
                                               const Context &ctx) {
  const int p = size_, next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  auto blockAt = [&](int steps) { // block (rank - steps) mod p
    return ringBlock(count, p, ((rank_ - steps) % p + p) % p);
  };
  float *incoming = scratch(ringBlock(count, p, 0).size);
  // Step s sends the partial sum of block rank - s - 1 (this rank's own
  // values at s = 0) and adds this rank's values to the partial sum of
  // block rank - s - 2 it receives: after p - 1 steps, block rank.
  for (int s = 0; s + 1 < p; ++s) {
    Block out = blockAt(s + 1), in = blockAt(s + 2);
    exchange(data + out.begin, out.size, next, incoming, in.size, prev, name,
             ctx);
    combine(data + in.begin, data + in.begin, incoming, in.size, op);
  }
  Block mine = blockAt(0);
  finish(data + mine.begin, mine.size, op, p);
}

void MpiCommunicator::ringReduceScatter(const float *send, float *recv,
                                        size_t countPerRank, ReduceOp op,
                                        const char *name, const Context &ctx) {
  const int p = size_, next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  const size_t c = countPerRank;
  auto blockAt = [&](int steps) { // block (rank - steps) mod p
    return send + size_t(((rank_ - steps) % p + p) % p) * c;
  };
  // As ringReduceScatterInPlace, with `send` left as it is: the partial
  // sums alternate between two scratch blocks (one is sent while the other
  // receives), and the last one is written into `recv`.
  float *partials[2] = {scratch(2 * c), scratch(2 * c) + c};
  const float *outgoing = blockAt(1);
  for (int s = 0; s + 1 < p; ++s) {
    float *incoming = partials[s % 2];
    exchange(outgoing, c, next, incoming, c, prev, name, ctx);
    float *sum = s + 2 == p ? recv : incoming;
    combine(sum, incoming, blockAt(s + 2), c, op);
    outgoing = sum;
  }
  finish(recv, c, op, p);
}

void MpiCommunicator::ringAllGatherInPlace(float *data, size_t count,
                                           const char *name,
                                           const Context &ctx) {
  const int p = size_, next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  auto blockAt = [&](int steps) {
    return ringBlock(count, p, ((rank_ - steps) % p + p) % p);
  };
  // Step s passes on block rank - s (this rank's own at s = 0) and
  // receives block rank - s - 1.
  for (int s = 0; s + 1 < p; ++s) {
    Block out = blockAt(s), in = blockAt(s + 1);
    exchange(data + out.begin, out.size, next, data + in.begin, in.size, prev,
             name, ctx);
  }
}

} // namespace partition::runtime::comm
