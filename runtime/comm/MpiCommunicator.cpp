//===- MpiCommunicator.cpp - Communicator over MPI ------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include "runtime/comm/PeerWatch.h"

#include <chrono>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <thread>

namespace partition::runtime::comm {

std::string failureLine(int worldRank, const std::string &group, int rank,
                        int size, const char *op, const Context &ctx,
                        const std::string &detail) {
  std::string line = "rank " + std::to_string(worldRank);
  if (!group.empty())
    line += " (" + group + " rank " + std::to_string(rank) + " of " +
            std::to_string(size) + ")";
  line += ": ";
  line += op;
  line += " '";
  line += ctx.what ? ctx.what : "";
  line += "'";
  if (ctx.step >= 0)
    line += " at step " + std::to_string(ctx.step);
  if (ctx.peer && *ctx.peer)
    line += std::string(" ") + ctx.peer;
  return line + " " + detail + "\n";
}

const char *reduceOpName(ReduceOp op) {
  switch (op) {
  case ReduceOp::Sum:
    return "sum";
  case ReduceOp::Avg:
    return "avg";
  case ReduceOp::Max:
    return "max";
  }
  return "?";
}

namespace {

MPI_Op mpiOp(ReduceOp op) {
  return op == ReduceOp::Max ? MPI_MAX : MPI_SUM; // Avg: sum, then divide
}

void divideBy(float *data, size_t count, int size) {
  float n = static_cast<float>(size);
  for (size_t i = 0; i < count; ++i)
    data[i] /= n;
}

void finalizeAtExit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  PeerWatch::stop();
  if (!finalized)
    MPI_Finalize();
}

} // namespace

std::unique_ptr<MpiCommunicator>
MpiCommunicator::world(int *argc, char ***argv, MpiOptions options) {
  int initialized = 0;
  MPI_Initialized(&initialized);
  if (!initialized) {
    int provided = 0;
    // MULTIPLE: started collectives run on a communication thread (each on
    // a communicator of its own) while the main thread runs the rest. A
    // library that provides less gets them run synchronously instead
    // (concurrentThreads()).
    if (MPI_Init_thread(argc, argv, MPI_THREAD_MULTIPLE, &provided) !=
        MPI_SUCCESS) {
      std::fprintf(stderr, "MPI_Init_thread failed\n");
      std::exit(1);
    }
    std::atexit(finalizeAtExit);
  }
  // Errors on the world communicator itself (e.g. in MPI_Comm_dup) return
  // too, so they get the one-line message rather than MPI's default abort.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm comm = MPI_COMM_NULL;
  int rc = MPI_Comm_dup(MPI_COMM_WORLD, &comm);
  if (rc != MPI_SUCCESS) {
    int worldRank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
    std::fprintf(stderr, "rank %d: MPI_Comm_dup of MPI_COMM_WORLD failed\n",
                 worldRank);
    std::fflush(stderr);
    MPI_Abort(MPI_COMM_WORLD, 1);
  }
  PeerWatch::start();
  return std::unique_ptr<MpiCommunicator>(
      new MpiCommunicator(comm, "", options));
}

MpiCommunicator::MpiCommunicator(MPI_Comm comm, std::string group,
                                 MpiOptions options)
    : comm_(comm), group_(std::move(group)), options_(options) {
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  MPI_Comm_rank(comm_, &rank_);
  MPI_Comm_size(comm_, &size_);
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank_);
}

MpiCommunicator::NodeRanks MpiCommunicator::nodeRanks() const {
  MPI_Comm local = MPI_COMM_NULL;
  MPI_Comm_split_type(comm_, MPI_COMM_TYPE_SHARED, rank_, MPI_INFO_NULL,
                      &local);
  NodeRanks ranks;
  MPI_Comm_rank(local, &ranks.rank);
  MPI_Comm_size(local, &ranks.size);
  MPI_Comm_free(&local);
  return ranks;
}

MpiCommunicator::~MpiCommunicator() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized && ringComm_ != MPI_COMM_NULL)
    MPI_Comm_free(&ringComm_);
  if (!finalized && comm_ != MPI_COMM_NULL)
    MPI_Comm_free(&comm_);
}

void MpiCommunicator::fail(const char *op, const Context &ctx,
                           const std::string &detail) const {
  say(op, ctx, detail);
  abortJob();
}

void MpiCommunicator::say(const char *op, const Context &ctx,
                          const std::string &detail) const {
  std::string line =
      failureLine(worldRank_, group_, rank_, size_, op, ctx, detail);
  std::fputs(line.c_str(), stderr);
  std::fflush(stderr);
}

void MpiCommunicator::abortJob() {
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort(); // MPI_Abort does not return; keeps [[noreturn]] honest
}

void MpiCommunicator::check(int rc, const char *op, const Context &ctx) const {
  if (rc == MPI_SUCCESS)
    return;
  char text[MPI_MAX_ERROR_STRING];
  int length = 0;
  if (MPI_Error_string(rc, text, &length) != MPI_SUCCESS)
    std::snprintf(text, sizeof(text), "MPI error %d", rc);
  fail(op, ctx, std::string("failed: ") + text);
}

void MpiCommunicator::wait(MPI_Request &request, const char *op,
                           const Context &ctx, int peer) const {
  using Clock = std::chrono::steady_clock;
  Clock::duration timeout = std::chrono::duration_cast<Clock::duration>(
      std::chrono::duration<double>(options_.timeoutSeconds));
  Clock::time_point last = Clock::now(), deadline = last + timeout;
  for (unsigned polls = 0;; ++polls) {
    int done = 0;
    MPI_Status status;
    check(MPI_Test(&request, &done, &status), op, ctx);
    if (done)
      return;
    Clock::time_point now = Clock::now();
    // A gap between two polls means this process was stopped (SIGSTOP, a
    // debugger): the time it spent stopped is not its peers' fault.
    if (now - last > std::chrono::duration<double>(PeerWatch::kSilentSeconds))
      deadline += now - last;
    last = now;
    // Another rank of the node timed out and named the culprit: say the
    // same at once (unless it names this rank, stopped and continued), and
    // leave the abort to that rank, so that its line is not cut short.
    if (std::optional<PeerWatch::Verdict> verdict = PeerWatch::posted()) {
      if (verdict->silent != worldRank_)
        say(op, ctx, PeerWatch::abandonDetail(*verdict,
                                              options_.timeoutSeconds));
      // One MPI_Abort (and one banner from mpirun) is enough; should that
      // rank be gone before its abort, this one's ends the job instead.
      std::this_thread::sleep_for(std::chrono::seconds(5));
      abortJob();
    }
    if (now >= deadline) {
      say(op, ctx,
          PeerWatch::timeoutDetail(worldRank_, worldRankOf(peer),
                                   options_.timeoutSeconds));
      // The other waiting ranks print their line within a poll; give them
      // that before MPI_Abort takes the job down.
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      abortJob();
    }
    // Spin briefly for low latency, then back off so oversubscribed ranks
    // (more ranks than cores) leave the CPU to the peers they wait for.
    if (polls < 1000)
      std::this_thread::yield();
    else
      std::this_thread::sleep_for(std::chrono::microseconds(50));
  }
}

int MpiCommunicator::worldRankOf(int peer) const {
  if (peer < 0)
    return -1;
  MPI_Group group, world;
  MPI_Comm_group(comm_, &group);
  MPI_Comm_group(MPI_COMM_WORLD, &world);
  int rank = MPI_UNDEFINED;
  MPI_Group_translate_ranks(group, 1, &peer, world, &rank);
  MPI_Group_free(&group);
  MPI_Group_free(&world);
  return rank == MPI_UNDEFINED ? -1 : rank;
}

int MpiCommunicator::toInt(size_t count, const char *op,
                           const Context &ctx) const {
  if (count > static_cast<size_t>(INT_MAX))
    fail(op, ctx,
         "failed: count " + std::to_string(count) +
             " exceeds MPI's int counts");
  return static_cast<int>(count);
}

void MpiCommunicator::checkPeer(int peer, const char *what, const char *op,
                                const Context &ctx) const {
  if (peer < 0 || peer >= size_)
    fail(op, ctx,
         std::string("failed: invalid ") + what + " " + std::to_string(peer) +
             " (communicator size " + std::to_string(size_) + ")");
}

void MpiCommunicator::allReduce(float *data, size_t count, ReduceOp op,
                                const Context &ctx) {
  allReduce(data, data, count, op, ctx);
}

void MpiCommunicator::allReduce(const float *send, float *recv, size_t count,
                                ReduceOp op, const Context &ctx) {
  const char *name = "all_reduce";
  if (usesRing(count)) { // MpiRing.cpp
    if (send != recv)
      std::memcpy(recv, send, count * sizeof(float));
    ringReduceScatterInPlace(recv, count, op, name, ctx);
    ringAllGatherInPlace(recv, count, name, ctx);
    return;
  }
  int n = toInt(count, name, ctx);
  MPI_Request request;
  check(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, n, MPI_FLOAT,
                       mpiOp(op), comm_, &request),
        name, ctx);
  wait(request, name, ctx);
  if (op == ReduceOp::Avg)
    divideBy(recv, count, size_);
}

void MpiCommunicator::allGather(const float *send, float *recv,
                                size_t countPerRank, const Context &ctx) {
  const char *name = "all_gather";
  int n = toInt(countPerRank, name, ctx);
  toInt(countPerRank * size_, name, ctx);
  MPI_Request request;
  check(MPI_Iallgather(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm_,
                       &request),
        name, ctx);
  wait(request, name, ctx);
}

void MpiCommunicator::reduceScatter(const float *send, float *recv,
                                    size_t countPerRank, ReduceOp op,
                                    const Context &ctx) {
  const char *name = "reduce_scatter";
  int n = toInt(countPerRank, name, ctx);
  toInt(countPerRank * size_, name, ctx);
  if (usesRing(countPerRank * size_)) { // MpiRing.cpp
    ringReduceScatter(send, recv, countPerRank, op, name, ctx);
    return;
  }
  MPI_Request request;
  check(MPI_Ireduce_scatter_block(send, recv, n, MPI_FLOAT, mpiOp(op), comm_,
                                  &request),
        name, ctx);
  wait(request, name, ctx);
  if (op == ReduceOp::Avg)
    divideBy(recv, countPerRank, size_);
}

void MpiCommunicator::allToAll(const float *send, float *recv,
                               size_t countPerRank, const Context &ctx) {
  const char *name = "all_to_all";
  int n = toInt(countPerRank, name, ctx);
  toInt(countPerRank * size_, name, ctx);
  MPI_Request request;
  check(MPI_Ialltoall(send, n, MPI_FLOAT, recv, n, MPI_FLOAT, comm_, &request),
        name, ctx);
  wait(request, name, ctx);
}

void MpiCommunicator::allToAllRows(const float *send,
                                   const std::vector<int64_t> &sendRows,
                                   float *recv,
                                   const std::vector<int64_t> &recvRows,
                                   size_t rowElements, const Context &ctx) {
  const char *name = "all_to_all";
  if (sendRows.size() != size_t(size_) || recvRows.size() != size_t(size_))
    throw std::logic_error(std::string(name) + ": rows for " +
                           std::to_string(sendRows.size()) + " ranks, not " +
                           std::to_string(size_));
  // Counted in rows (a contiguous type), so that the ints MPI takes hold
  // them whatever the rows' size.
  std::vector<int> sendCounts(size_), sendAt(size_), recvCounts(size_),
      recvAt(size_);
  size_t sent = 0, received = 0;
  for (int r = 0; r < size_; ++r) {
    sendCounts[r] = toInt(size_t(sendRows[r]), name, ctx);
    recvCounts[r] = toInt(size_t(recvRows[r]), name, ctx);
    sendAt[r] = toInt(sent, name, ctx);
    recvAt[r] = toInt(received, name, ctx);
    sent += size_t(sendRows[r]);
    received += size_t(recvRows[r]);
  }
  MPI_Datatype row;
  check(MPI_Type_contiguous(toInt(rowElements, name, ctx), MPI_FLOAT, &row),
        name, ctx);
  check(MPI_Type_commit(&row), name, ctx);
  MPI_Request request;
  check(MPI_Ialltoallv(send, sendCounts.data(), sendAt.data(), row, recv,
                       recvCounts.data(), recvAt.data(), row, comm_,
                       &request),
        name, ctx);
  wait(request, name, ctx);
  MPI_Type_free(&row);
}

void MpiCommunicator::broadcast(float *data, size_t count, int root,
                                const Context &ctx) {
  const char *name = "broadcast";
  checkPeer(root, "root", name, ctx);
  int n = toInt(count, name, ctx);
  MPI_Request request;
  check(MPI_Ibcast(data, n, MPI_FLOAT, root, comm_, &request), name, ctx);
  wait(request, name, ctx);
}

void MpiCommunicator::send(const float *data, size_t count, int peer, int tag,
                           const Context &ctx) {
  const char *name = "send";
  checkPeer(peer, "peer", name, ctx);
  int n = toInt(count, name, ctx);
  MPI_Request request;
  check(MPI_Isend(data, n, MPI_FLOAT, peer, tag, comm_, &request), name, ctx);
  wait(request, name, ctx, peer);
}

void MpiCommunicator::recv(float *data, size_t count, int peer, int tag,
                           const Context &ctx) {
  const char *name = "recv";
  checkPeer(peer, "peer", name, ctx);
  int n = toInt(count, name, ctx);
  MPI_Request request;
  check(MPI_Irecv(data, n, MPI_FLOAT, peer, tag, comm_, &request), name, ctx);
  wait(request, name, ctx, peer);
}

void MpiCommunicator::sendEager(const void *data, size_t bytes, int peer,
                                int tag, const Context &ctx) {
  const char *name = "send";
  checkPeer(peer, "peer", name, ctx);
  int n = toInt(bytes, name, ctx);
  reapSends(ctx);
  // MPI may read the buffer until the request completes; the caller may
  // overwrite it now, so MPI gets a copy of its own.
  PendingSend &pending = pending_.emplace_back();
  pending.bytes.assign(static_cast<const uint8_t *>(data),
                       static_cast<const uint8_t *>(data) + bytes);
  pending.what = ctx.what ? ctx.what : "";
  pending.peer = ctx.peer ? ctx.peer : "";
  pending.step = ctx.step;
  pending.peerRank = peer;
  check(MPI_Isend(pending.bytes.data(), n, MPI_BYTE, peer, tag, comm_,
                  &pending.request),
        name, ctx);
}

void MpiCommunicator::reapSends(const Context &ctx) {
  while (!pending_.empty()) {
    int done = 0;
    check(MPI_Test(&pending_.front().request, &done, MPI_STATUS_IGNORE),
          "send", ctx);
    if (!done)
      return;
    pending_.pop_front();
  }
}

void MpiCommunicator::recvBytes(void *data, size_t bytes, int peer, int tag,
                                const Context &ctx) {
  const char *name = "recv";
  checkPeer(peer, "peer", name, ctx);
  int n = toInt(bytes, name, ctx);
  MPI_Request request;
  check(MPI_Irecv(data, n, MPI_BYTE, peer, tag, comm_, &request), name, ctx);
  wait(request, name, ctx, peer);
}

void MpiCommunicator::completeSends(const Context &ctx) {
  (void)ctx;
  while (!pending_.empty()) {
    PendingSend &pending = pending_.front();
    wait(pending.request, "send",
         {pending.what.c_str(), pending.step, pending.peer.c_str()},
         pending.peerRank);
    pending_.pop_front();
  }
}

void MpiCommunicator::barrier(const Context &ctx) {
  const char *name = "barrier";
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), name, ctx);
  wait(request, name, ctx);
}

bool MpiCommunicator::concurrentThreads() const {
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  return provided == MPI_THREAD_MULTIPLE;
}

std::unique_ptr<Communicator> MpiCommunicator::split(int color, int key,
                                                     const Context &ctx) {
  const char *name = "split";
  if (color < 0 && color != kNoColor)
    fail(name, ctx,
         "failed: invalid color " + std::to_string(color) +
             " (colors are >= 0, or kNoColor)");
  // MPI_Comm_split has no non-blocking form: a timed barrier first makes
  // sure every rank has arrived, so the split itself cannot hang on a
  // missing peer.
  MPI_Request request;
  check(MPI_Ibarrier(comm_, &request), name, ctx);
  wait(request, name, ctx);
  MPI_Comm child = MPI_COMM_NULL;
  check(MPI_Comm_split(comm_, color == kNoColor ? MPI_UNDEFINED : color, key,
                       &child),
        name, ctx);
  if (child == MPI_COMM_NULL)
    return nullptr;
  std::string group = ctx.what && *ctx.what ? ctx.what : "group";
  return std::unique_ptr<Communicator>(
      new MpiCommunicator(child, std::move(group), options_));
}

} // namespace partition::runtime::comm
