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
// MPI's own schedule is as good. A step's block travels as one message per
// MiB (kRingSegment), added up on arrival while the next one comes: the
// scratch stays at two segments, not a block (half a bucket), and each
// segment is added while it is in cache.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <algorithm>
#include <cstring>
#include <vector>

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

void MpiCommunicator::reduceStep(const float *send, size_t sendCount, int to,
                                 size_t recvCount, int from,
                                 const SegmentSink &sink, const char *name,
                                 const Context &ctx) {
  MPI_Comm comm = ringComm(name, ctx);
  auto segments = [](size_t count) {
    return (count + kRingSegment - 1) / kRingSegment;
  };
  auto length = [](size_t count, size_t k) {
    return std::min(kRingSegment, count - k * kRingSegment);
  };
  // The whole block is sent at once; the receiver takes it segment by
  // segment (one segment arrives while the last one is added up), so
  // that the scratch is two segments and each is added while in cache.
  // The sender's segments are the receiver's: one block, one length.
  size_t sends = segments(sendCount), receives = segments(recvCount);
  std::vector<MPI_Request> sent(sends);
  for (size_t k = 0; k < sends; ++k)
    check(MPI_Isend(send + k * kRingSegment,
                    toInt(length(sendCount, k), name, ctx), MPI_FLOAT, to, 0,
                    comm, &sent[k]),
          name, ctx);
  float *buffers[2] = {scratch(2 * kRingSegment),
                       scratch(2 * kRingSegment) + kRingSegment};
  MPI_Request received[2];
  auto post = [&](size_t k) {
    check(MPI_Irecv(buffers[k % 2], toInt(length(recvCount, k), name, ctx),
                    MPI_FLOAT, from, 0, comm, &received[k % 2]),
          name, ctx);
  };
  if (receives > 0)
    post(0);
  for (size_t k = 0; k < receives; ++k) {
    if (k + 1 < receives)
      post(k + 1);
    wait(received[k % 2], name, ctx, from);
    sink(buffers[k % 2], k * kRingSegment, length(recvCount, k));
  }
  for (MPI_Request &request : sent)
    wait(request, name, ctx, to);
}

void MpiCommunicator::ringReduceScatterInPlace(float *data, size_t count,
                                               ReduceOp op, const char *name,
                                               const Context &ctx) {
  const int p = size_, next = (rank_ + 1) % p, prev = (rank_ + p - 1) % p;
  auto blockAt = [&](int steps) { // block (rank - steps) mod p
    return ringBlock(count, p, ((rank_ - steps) % p + p) % p);
  };
  // Step s sends the partial sum of block rank - s - 1 (this rank's own
  // values at s = 0) and adds this rank's values to the partial sum of
  // block rank - s - 2 it receives: after p - 1 steps, block rank.
  for (int s = 0; s + 1 < p; ++s) {
    Block out = blockAt(s + 1), in = blockAt(s + 2);
    float *sum = data + in.begin;
    reduceStep(
        data + out.begin, out.size, next, in.size, prev,
        [&](const float *incoming, size_t at, size_t n) {
          combine(sum + at, sum + at, incoming, n, op);
        },
        name, ctx);
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
  // sums of blocks passed on (p > 2) alternate between two blocks of their
  // own (one is sent while the other fills), the last one is `recv`.
  std::vector<float> &partials = partials_;
  if (p > 2 && partials.size() < 2 * c)
    partials.resize(2 * c);
  const float *outgoing = blockAt(1);
  for (int s = 0; s + 1 < p; ++s) {
    float *sum = s + 2 == p ? recv : partials.data() + size_t(s % 2) * c;
    const float *own = blockAt(s + 2);
    reduceStep(
        outgoing, c, next, c, prev,
        [&](const float *incoming, size_t at, size_t n) {
          combine(sum + at, incoming, own + at, n, op);
        },
        name, ctx);
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
