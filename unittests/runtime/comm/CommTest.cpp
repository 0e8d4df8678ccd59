//===- CommTest.cpp - MpiCommunicator under mpirun ------------------------===//
//
// A plain program run by ctest under mpirun with 2 and 4 ranks:
//   comm-test collectives  every collective's exact values, split into a
//                          mesh of 2 columns; exits non-zero if any rank
//                          saw a wrong value.
//   comm-test fault        the last rank skips an all-reduce; the others
//                          must abort within the 2 s timeout with the
//                          one-line message (checked by RunExpectAbort.cmake).
//   comm-test stopped      the last rank stops itself (SIGSTOP) instead:
//                          every line the others print names it.
//   comm-test fault-large, stopped-large
//                          the same over an all-reduce large enough for
//                          the ring (MpiRing.cpp).
//   comm-test mpi-error    rank 0 sends with an invalid tag: the MPI error
//                          becomes the one-line message and an abort.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/MpiCommunicator.h"

#include <algorithm>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

using namespace partition::runtime::comm;

namespace {

int failures = 0;
int worldRank = 0;

#define EXPECT_EQ_F(actual, expected, what)                                    \
  do {                                                                         \
    float a_ = (actual), e_ = (expected);                                      \
    if (a_ != e_) {                                                            \
      ++failures;                                                              \
      std::fprintf(stderr, "rank %d: %s:%d: %s: got %g, expected %g\n",        \
                   worldRank, __FILE__, __LINE__, std::string(what).c_str(),   \
                   a_, e_);                                                    \
    }                                                                          \
  } while (0)

#define EXPECT_TRUE(cond)                                                      \
  do {                                                                         \
    if (!(cond)) {                                                             \
      ++failures;                                                              \
      std::fprintf(stderr, "rank %d: %s:%d: expected %s\n", worldRank,         \
                   __FILE__, __LINE__, #cond);                                 \
    }                                                                          \
  } while (0)

// A value every rank can compute: rank r's element i.
float value(int r, size_t i) { return static_cast<float>(r * 100 + i); }

// Checks every collective on `comm`, whose rank r is world rank members[r].
void testCollectives(Communicator &comm, const std::vector<int> &members,
                     const std::string &label) {
  const int n = comm.size(), me = comm.rank();
  EXPECT_TRUE(static_cast<size_t>(n) == members.size());
  EXPECT_TRUE(members[me] == worldRank);
  const size_t count = 5;
  auto v = [&](int r, size_t i) { return value(members[r], i); };

  // all-reduce, in place and out of place, sum / avg / max; small (MPI's
  // own schedule) and large (the ring, MpiRing.cpp: blocks of unequal
  // length, of one segment and of several).
  for (size_t count : {count, size_t(40003), size_t(1200007)})
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    std::vector<float> in(count), out(count), inPlace(count);
    for (size_t i = 0; i < count; ++i)
      in[i] = inPlace[i] = v(me, i);
    comm.allReduce(in.data(), out.data(), count, op, {"out of place", 1});
    comm.allReduce(inPlace.data(), count, op, {"in place", 1});
    for (size_t i = 0; i < count; ++i) {
      float sum = 0, max = v(0, i);
      for (int r = 0; r < n; ++r) {
        sum += v(r, i);
        max = std::max(max, v(r, i));
      }
      float expected = op == ReduceOp::Sum   ? sum
                       : op == ReduceOp::Avg ? sum / static_cast<float>(n)
                                             : max;
      std::string what = label + " all_reduce " + reduceOpName(op);
      EXPECT_EQ_F(out[i], expected, what);
      EXPECT_EQ_F(inPlace[i], expected, what + " in place");
      EXPECT_EQ_F(in[i], v(me, i), what + " input kept");
    }
  }

  // all-gather: block r from rank r.
  {
    std::vector<float> send(count), recv(count * n, -1);
    for (size_t i = 0; i < count; ++i)
      send[i] = v(me, i);
    comm.allGather(send.data(), recv.data(), count, {"gather", 2});
    for (int r = 0; r < n; ++r)
      for (size_t i = 0; i < count; ++i)
        EXPECT_EQ_F(recv[r * count + i], v(r, i), label + " all_gather");
  }

  // reduce-scatter: block me of the sum / avg / max over ranks; small and
  // large (the ring: one segment per block, and several).
  for (size_t count : {count, size_t(20001), size_t(300007)})
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    std::vector<float> send(count * n), recv(count, -1);
    for (size_t i = 0; i < count * n; ++i)
      send[i] = v(me, i);
    comm.reduceScatter(send.data(), recv.data(), count, op, {"scatter", 3});
    for (size_t i = 0; i < count; ++i) {
      size_t j = me * count + i;
      float sum = 0, max = v(0, j);
      for (int r = 0; r < n; ++r) {
        sum += v(r, j);
        max = std::max(max, v(r, j));
      }
      float expected = op == ReduceOp::Sum   ? sum
                       : op == ReduceOp::Avg ? sum / static_cast<float>(n)
                                             : max;
      EXPECT_EQ_F(recv[i], expected,
                  label + " reduce_scatter " + reduceOpName(op));
    }
  }

  // all-to-all: block j of rank i's send is block i of rank j's recv.
  {
    auto block = [&](int from, int to, size_t i) {
      return static_cast<float>(members[from] * 1000 + members[to] * 10 + i);
    };
    std::vector<float> send(count * n), recv(count * n, -1);
    for (int to = 0; to < n; ++to)
      for (size_t i = 0; i < count; ++i)
        send[to * count + i] = block(me, to, i);
    comm.allToAll(send.data(), recv.data(), count, {"all to all", 4});
    for (int from = 0; from < n; ++from)
      for (size_t i = 0; i < count; ++i)
        EXPECT_EQ_F(recv[from * count + i], block(from, me, i),
                    label + " all_to_all");
  }

  // all-to-all of counted rows: rank i sends (i + j) % 3 rows of 3 floats
  // to rank j (none to some), and rank j receives them in rank order.
  {
    const size_t row = 3;
    auto rows = [](int from, int to) { return int64_t((from + to) % 3); };
    auto element = [&](int from, int to, size_t i) {
      return static_cast<float>(members[from] * 1000 + members[to] * 10 + i);
    };
    std::vector<int64_t> sendRows(n), recvRows(n);
    std::vector<float> send, expected;
    for (int to = 0; to < n; ++to) {
      sendRows[to] = rows(me, to);
      for (size_t i = 0; i < size_t(sendRows[to]) * row; ++i)
        send.push_back(element(me, to, i));
    }
    for (int from = 0; from < n; ++from) {
      recvRows[from] = rows(from, me);
      for (size_t i = 0; i < size_t(recvRows[from]) * row; ++i)
        expected.push_back(element(from, me, i));
    }
    std::vector<float> recv(expected.size() + 1, -1);
    comm.allToAllRows(send.data(), sendRows, recv.data(), recvRows, row,
                      {"counted all to all", 4});
    for (size_t i = 0; i < expected.size(); ++i)
      EXPECT_EQ_F(recv[i], expected[i], label + " all_to_all rows");
    EXPECT_EQ_F(recv.back(), -1.0f, label + " all_to_all rows past the end");
  }

  // broadcast from the last (non-zero) rank and from rank 0.
  for (int root : {n - 1, 0}) {
    std::vector<float> data(count);
    for (size_t i = 0; i < count; ++i)
      data[i] = me == root ? v(root, i) + 0.5f : -1;
    comm.broadcast(data.data(), count, root, {"broadcast", 5});
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ_F(data[i], v(root, i) + 0.5f,
                  label + " broadcast root " + std::to_string(root));
  }

  // ring: send to the right, receive from the left; even ranks send first
  // so the blocking calls cannot deadlock.
  if (n > 1) {
    int right = (me + 1) % n, left = (me + n - 1) % n;
    std::vector<float> out(count), in(count, -1);
    for (size_t i = 0; i < count; ++i)
      out[i] = v(me, i);
    if (me % 2 == 0) {
      comm.send(out.data(), count, right, 7, {"ring", 6});
      comm.recv(in.data(), count, left, 7, {"ring", 6});
    } else {
      comm.recv(in.data(), count, left, 7, {"ring", 6});
      comm.send(out.data(), count, right, 7, {"ring", 6});
    }
    for (size_t i = 0; i < count; ++i)
      EXPECT_EQ_F(in[i], v(left, i), label + " ring recv");
  }

  comm.barrier({"end of collectives", 7});
}

int runCollectives(int argc, char **argv) {
  auto world = MpiCommunicator::world(&argc, &argv, {30.0});
  worldRank = world->rank();
  const int n = world->size();
  std::vector<int> all(n);
  for (int r = 0; r < n; ++r)
    all[r] = r;
  testCollectives(*world, all, "world");

  if (n % 2 != 0) {
    std::fprintf(stderr, "rank %d: the mesh test needs an even size\n",
                 worldRank);
    ++failures;
  } else {
    // A (n/2) x 2 mesh: rank = row * 2 + col.
    int row = worldRank / 2, col = worldRank % 2;
    auto rowComm = world->split(row, col, {"row"});
    auto colComm = world->split(col, row, {"col"});
    EXPECT_TRUE(rowComm && rowComm->size() == 2 && rowComm->rank() == col);
    EXPECT_TRUE(colComm && colComm->size() == n / 2 && colComm->rank() == row);
    if (rowComm && colComm) {
      testCollectives(*rowComm, {row * 2, row * 2 + 1}, "row");
      std::vector<int> colMembers;
      for (int r = 0; r < n / 2; ++r)
        colMembers.push_back(r * 2 + col);
      testCollectives(*colComm, colMembers, "col");
    }

    // The key orders the group: reversed keys reverse the ranks.
    auto reversed = world->split(0, -worldRank, {"reversed"});
    EXPECT_TRUE(reversed && reversed->rank() == n - 1 - worldRank);
    if (reversed) {
      std::vector<int> members(n);
      for (int r = 0; r < n; ++r)
        members[r] = n - 1 - r;
      testCollectives(*reversed, members, "reversed");
    }

    // kNoColor: rank 0 stays out and gets no communicator.
    auto partial = world->split(worldRank == 0 ? Communicator::kNoColor : 1,
                                worldRank, {"partial"});
    EXPECT_TRUE((worldRank == 0) == (partial == nullptr));
    if (partial) {
      std::vector<int> members;
      for (int r = 1; r < n; ++r)
        members.push_back(r);
      testCollectives(*partial, members, "partial");
    }
  }

  // Every rank reports; the job fails if any rank failed.
  float mine = static_cast<float>(failures), total = 0;
  world->allReduce(&mine, &total, 1, ReduceOp::Sum, {"failure count"});
  if (worldRank == 0)
    std::printf("comm-test: %d ranks, %g failure(s)\n", n, total);
  return total == 0 ? 0 : 1;
}

/// `large`: the all-reduce the last rank skips is over 100,000 elements,
/// which take the ring (MpiRing.cpp), whose waits name a neighbour.
int runFault(int argc, char **argv, bool large) {
  auto world = MpiCommunicator::world(&argc, &argv, {2.0});
  worldRank = world->rank();
  float x = 1;
  world->allReduce(&x, 1, ReduceOp::Sum, {"warm up", 6});
  if (worldRank == world->size() - 1) {
    // The missing peer: never joins; the others' abort ends this process.
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::fprintf(stderr, "rank %d: was not aborted\n", worldRank);
    return 0;
  }
  std::vector<float> bucket(large ? 100000 : 1, 1.0f);
  world->allReduce(bucket.data(), bucket.size(), ReduceOp::Sum,
                   {"grads bucket 3", 7});
  std::fprintf(stderr, "rank %d: all_reduce returned without its peer\n",
               worldRank);
  return 0;
}

/// The last rank stops itself (SIGSTOP) before an all-reduce: every other
/// rank names it as the one that stopped, whichever times out first.
int runStopped(int argc, char **argv, bool large) {
  auto world = MpiCommunicator::world(&argc, &argv, {2.0});
  worldRank = world->rank();
  float x = 1;
  world->allReduce(&x, 1, ReduceOp::Sum, {"warm up", 6});
  if (worldRank == world->size() - 1)
    raise(SIGSTOP); // mpirun's abort kills it stopped
  std::vector<float> bucket(large ? 100000 : 1, 1.0f);
  world->allReduce(bucket.data(), bucket.size(), ReduceOp::Sum,
                   {"grads bucket 3", 7});
  std::fprintf(stderr, "rank %d: all_reduce returned without its peer\n",
               worldRank);
  return 0;
}

int runMpiError(int argc, char **argv) {
  auto world = MpiCommunicator::world(&argc, &argv, {2.0});
  worldRank = world->rank();
  float x = 1;
  if (worldRank == 0)
    world->send(&x, 1, 1 % world->size(), -5, {"bad tag", 3});
  std::this_thread::sleep_for(std::chrono::seconds(20));
  return 0;
}

/// Pipeline transfers between ranks 0 and 1: eager sends return before
/// their receiver has posted anything, so both ranks can send (more than
/// MPI's eager limit) before either receives, as 1F1B's stages do; the
/// sender overwrites its buffer at once; any byte count moves.
int runTransfers(int argc, char **argv) {
  auto world = MpiCommunicator::world(&argc, &argv, {30.0});
  worldRank = world->rank();
  int peer = 1 - worldRank;
  if (world->size() != 2) {
    std::fprintf(stderr, "transfers: needs 2 ranks\n");
    return 1;
  }
  const size_t large = size_t(1) << 22; // 4 MiB: past any eager limit
  std::vector<uint8_t> out(large), in(large);
  for (int round = 0; round < 3; ++round) {
    for (size_t i = 0; i < large; ++i)
      out[i] = uint8_t(i * 7 + round + 13 * worldRank);
    world->sendEager(out.data(), large, peer, 11, {"F activations", round});
    // The buffer is the sender's again at once.
    std::fill(out.begin(), out.end(), uint8_t(0xee));
  }
  // An odd byte count (bf16 [3]).
  uint8_t odd[6] = {1, 2, 3, 4, 5, uint8_t(worldRank)};
  world->sendEager(odd, sizeof(odd), peer, 11, {"odd"});
  for (int round = 0; round < 3; ++round) {
    world->recvBytes(in.data(), large, peer, 11, {"F activations", round});
    bool intact = true;
    for (size_t i = 0; i < large && intact; ++i)
      intact = in[i] == uint8_t(i * 7 + round + 13 * peer);
    EXPECT_TRUE(intact);
  }
  uint8_t got[6] = {};
  world->recvBytes(got, sizeof(got), peer, 11, {"odd"});
  EXPECT_TRUE(got[0] == 1 && got[4] == 5 && got[5] == uint8_t(peer));
  world->completeSends({"end of transfers"});
  float mine = static_cast<float>(failures), total = 0;
  world->allReduce(&mine, &total, 1, ReduceOp::Sum, {"failure count"});
  if (worldRank == 0)
    std::printf("comm-test: transfers, %g failure(s)\n", total);
  return total == 0 ? 0 : 1;
}

/// A stage that stalls: rank 1 never sends; rank 0's receive gives up
/// after the 2 s timeout with one line naming the transfer, its stage and
/// its peer.
int runTransferFault(int argc, char **argv) {
  auto world = MpiCommunicator::world(&argc, &argv, {2.0});
  worldRank = world->rank();
  float x = 1;
  world->allReduce(&x, 1, ReduceOp::Sum, {"warm up", 3});
  if (worldRank != 0) {
    std::this_thread::sleep_for(std::chrono::seconds(20));
    std::fprintf(stderr, "rank %d: was not aborted\n", worldRank);
    return 0;
  }
  world->recvBytes(
      &x, sizeof(x), 1, 11,
      {"B mb0 gradients stage1->0", 4, "(stage 0, from stage 1 = rank 1)"});
  std::fprintf(stderr, "rank 0: recv returned without its peer\n");
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  std::string mode = argc > 1 ? argv[1] : "";
  if (mode == "collectives")
    return runCollectives(argc, argv);
  if (mode == "fault" || mode == "fault-large")
    return runFault(argc, argv, mode == "fault-large");
  if (mode == "stopped" || mode == "stopped-large")
    return runStopped(argc, argv, mode == "stopped-large");
  if (mode == "mpi-error")
    return runMpiError(argc, argv);
  if (mode == "transfers")
    return runTransfers(argc, argv);
  if (mode == "transfer-fault")
    return runTransferFault(argc, argv);
  std::fprintf(stderr,
               "usage: %s collectives|fault|stopped|mpi-error|transfers|"
               "transfer-fault\n",
               argv[0]);
  return 2;
}
