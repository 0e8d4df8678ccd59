//===- NcclCommunicatorTest.cpp - NcclCommunicator on a GPU ---------------===//
//
// Runs under ctest as `mpirun -n 1` (label `gpu`); any number of ranks works
// where there are as many GPUs (`mpirun -n N`, one device per node-local
// rank), and every expected value is computed for the group size.
//
// Without a usable GPU (cudaGetDeviceCount fails, e.g. no driver, or finds
// none) every test is skipped with the reason, and main prints one line
// starting "partition-nccl-test: skipped:" that ctest turns into a skipped
// test.
//
// With a GPU:
//  - NcclTest.*: each collective's exact values on device buffers, over a
//    world communicator bootstrapped through MPI (the NCCL unique id
//    broadcast), split() into groups (and kNoColor), the enqueue-only forms
//    ordered on stream(), sendRecv (a rank sending to itself when alone).
//  - NcclCommunicatorDeathTest.*: one-rank communicators from create() (no
//    MPI): a recv that nobody matches, an init waiting for a missing rank
//    and an invalid peer each print the contract's one line and abort.
// `NcclCommunicatorTest bad-device` (no GPU needed) checks the failure path
// of the MPI bootstrap: see main.
//
//===----------------------------------------------------------------------===//

#include "runtime/comm/NcclCommunicator.h"
#include "runtime/comm/MpiCommunicator.h"

#include <gtest/gtest.h>

#include <cuda_runtime_api.h>
#include <nccl.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

using namespace partition::runtime::comm;

namespace {

// Empty when a GPU is usable; otherwise why not.
const std::string &noGpuReason() {
  static const std::string reason = [] {
    int count = 0;
    cudaError_t error = cudaGetDeviceCount(&count);
    if (error != cudaSuccess)
      return std::string("cudaGetDeviceCount failed: ") +
             cudaGetErrorName(error) + " (" + cudaGetErrorString(error) +
             "); no usable GPU";
    if (count == 0)
      return std::string("no CUDA device");
    return std::string();
  }();
  return reason;
}

#define SKIP_WITHOUT_GPU()                                                     \
  do {                                                                         \
    if (!noGpuReason().empty())                                                \
      GTEST_SKIP() << noGpuReason();                                           \
  } while (0)

// MPI (and its world) only once a test needs it, so that death tests' child
// processes never start MPI.
MpiCommunicator &mpiWorld() {
  static std::unique_ptr<MpiCommunicator> world =
      MpiCommunicator::world(nullptr, nullptr, MpiOptions{60.0});
  return *world;
}

// One device per node-local rank.
int localDevice() {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Comm_split_type(mpiWorld().handle(), MPI_COMM_TYPE_SHARED, 0,
                      MPI_INFO_NULL, &node);
  int localRank = 0;
  MPI_Comm_rank(node, &localRank);
  MPI_Comm_free(&node);
  int devices = 1;
  cudaGetDeviceCount(&devices);
  return localRank % devices;
}

// A value every rank can compute: rank r's element i (exact in float).
float value(int r, size_t i) {
  return static_cast<float>(r * 100 + static_cast<int>(i % 1000));
}

class DeviceBuffer {
public:
  explicit DeviceBuffer(size_t count) : count_(count) {
    EXPECT_EQ(cudaMalloc(reinterpret_cast<void **>(&data_),
                         (count ? count : 1) * sizeof(float)),
              cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<float> &host)
      : DeviceBuffer(host.size()) {
    upload(host);
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer &) = delete;
  DeviceBuffer &operator=(const DeviceBuffer &) = delete;

  float *get() const { return data_; }
  void upload(const std::vector<float> &host) {
    EXPECT_EQ(host.size(), count_);
    EXPECT_EQ(cudaMemcpy(data_, host.data(), count_ * sizeof(float),
                         cudaMemcpyHostToDevice),
              cudaSuccess);
  }
  std::vector<float> download() const {
    std::vector<float> host(count_);
    EXPECT_EQ(cudaMemcpy(host.data(), data_, count_ * sizeof(float),
                         cudaMemcpyDeviceToHost),
              cudaSuccess);
    return host;
  }

private:
  float *data_ = nullptr;
  size_t count_;
};

// Rank r's buffer of `count` values value(r, offset + i).
std::vector<float> values(int r, size_t count, size_t offset = 0) {
  std::vector<float> v(count);
  for (size_t i = 0; i < count; ++i)
    v[i] = value(r, offset + i);
  return v;
}

class NcclTest : public ::testing::Test {
protected:
  void SetUp() override {
    SKIP_WITHOUT_GPU();
    if (!world_)
      world_ =
          NcclCommunicator::world(mpiWorld(), localDevice(), NcclOptions{60.0});
    comm = world_.get();
    n = comm->size();
    me = comm->rank();
  }
  // NCCL communicators go before MPI_Finalize (at exit).
  static void TearDownTestSuite() { world_.reset(); }

  static std::unique_ptr<NcclCommunicator> world_;
  NcclCommunicator *comm = nullptr;
  int n = 1, me = 0;
};

std::unique_ptr<NcclCommunicator> NcclTest::world_;

TEST_F(NcclTest, WorldMatchesMpi) {
  EXPECT_EQ(comm->size(), mpiWorld().size());
  EXPECT_EQ(comm->rank(), mpiWorld().rank());
  EXPECT_EQ(comm->worldRank(), mpiWorld().worldRank());
  EXPECT_NE(comm->handle(), nullptr);
  EXPECT_NE(comm->stream(), nullptr);
  int version = 0;
  ASSERT_EQ(ncclGetVersion(&version), ncclSuccess);
  EXPECT_GE(version, NCCL_VERSION(2, 18, 0));
}

TEST_F(NcclTest, AllReduceSumAvgMax) {
  // Odd and large counts, in place and out of place.
  for (size_t count : {size_t(37), size_t(1) << 20}) {
    SCOPED_TRACE("count " + std::to_string(count));
    std::vector<float> sum(count), max(count);
    for (size_t i = 0; i < count; ++i) {
      for (int r = 0; r < n; ++r)
        sum[i] += value(r, i);
      max[i] = value(n - 1, i);
    }
    DeviceBuffer data(values(me, count));
    comm->allReduce(data.get(), count, ReduceOp::Sum, {"sum", 1});
    std::vector<float> got = data.download();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[i], sum[i]) << "sum, element " << i;

    DeviceBuffer send(values(me, count)), recv(count);
    comm->allReduce(send.get(), recv.get(), count, ReduceOp::Avg, {"avg", 2});
    got = recv.download();
    // ncclAvg pre-multiplies by 1/n: exact for powers of two, else 4 ulps.
    for (size_t i = 0; i < count; ++i)
      ASSERT_FLOAT_EQ(got[i], sum[i] / static_cast<float>(n))
          << "avg, element " << i;
    EXPECT_EQ(send.download(), values(me, count)) << "send was modified";

    data.upload(values(me, count));
    comm->allReduce(data.get(), count, ReduceOp::Max, {"max", 3});
    got = data.download();
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[i], max[i]) << "max, element " << i;
  }
}

TEST_F(NcclTest, AllGather) {
  const size_t count = 13;
  DeviceBuffer send(values(me, count)), recv(count * n);
  comm->allGather(send.get(), recv.get(), count, {"gather", 4});
  std::vector<float> got = recv.download();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[r * count + i], value(r, i)) << "block " << r;
}

TEST_F(NcclTest, ReduceScatter) {
  const size_t count = 11;
  for (ReduceOp op : {ReduceOp::Sum, ReduceOp::Avg, ReduceOp::Max}) {
    SCOPED_TRACE(reduceOpName(op));
    // Rank r's block b holds value(r, b * count + i).
    DeviceBuffer send(values(me, count * n)), recv(count);
    comm->reduceScatter(send.get(), recv.get(), count, op, {"scatter", 5});
    std::vector<float> got = recv.download();
    for (size_t i = 0; i < count; ++i) {
      float sum = 0;
      for (int r = 0; r < n; ++r)
        sum += value(r, me * count + i);
      float expected = op == ReduceOp::Sum   ? sum
                       : op == ReduceOp::Avg ? sum / static_cast<float>(n)
                                             : value(n - 1, me * count + i);
      ASSERT_FLOAT_EQ(got[i], expected) << "element " << i;
    }
  }
}

TEST_F(NcclTest, AllToAll) {
  const size_t count = 5;
  // Block j of rank r's send: r * 1000 + j * 10 + i.
  std::vector<float> host(count * n);
  for (int j = 0; j < n; ++j)
    for (size_t i = 0; i < count; ++i)
      host[j * count + i] = static_cast<float>(me * 1000 + j * 10 + i);
  DeviceBuffer send(host), recv(count * n);
  comm->allToAll(send.get(), recv.get(), count, {"all to all", 6});
  std::vector<float> got = recv.download();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[r * count + i], static_cast<float>(r * 1000 + me * 10 + i))
          << "block " << r;
}

// Counted rows (a mixture of experts' filled rows): rank r sends
// (r + j) % 3 rows of 4 floats to rank j, none to some.
TEST_F(NcclTest, AllToAllRows) {
  const size_t row = 4;
  auto rows = [](int from, int to) { return int64_t((from + to) % 3); };
  auto element = [](int from, int to, size_t i) {
    return static_cast<float>(from * 1000 + to * 10 + i);
  };
  std::vector<int64_t> sendRows(n), recvRows(n);
  std::vector<float> host, expected;
  for (int to = 0; to < n; ++to) {
    sendRows[to] = rows(me, to);
    for (size_t i = 0; i < size_t(sendRows[to]) * row; ++i)
      host.push_back(element(me, to, i));
  }
  for (int from = 0; from < n; ++from) {
    recvRows[from] = rows(from, me);
    for (size_t i = 0; i < size_t(recvRows[from]) * row; ++i)
      expected.push_back(element(from, me, i));
  }
  host.push_back(0); // never an empty buffer
  DeviceBuffer send(host), recv(expected.size() + 1);
  comm->allToAllRows(send.get(), sendRows, recv.get(), recvRows, row,
                     {"counted all to all", 6});
  std::vector<float> got = recv.download();
  got.pop_back();
  EXPECT_EQ(got, expected);
}

TEST_F(NcclTest, Broadcast) {
  const size_t count = 17;
  for (int root : {n - 1, 0}) {
    DeviceBuffer data(values(me, count));
    comm->broadcast(data.get(), count, root, {"broadcast", 7});
    EXPECT_EQ(data.download(), values(root, count)) << "root " << root;
  }
}

TEST_F(NcclTest, SendRecvRing) {
  // To the next rank, from the previous one, as one group: alone, a rank
  // sends to itself.
  const size_t count = 9;
  int next = (me + 1) % n, previous = (me + n - 1) % n;
  DeviceBuffer send(values(me, count)), recv(count);
  comm->sendRecv(send.get(), count, next, recv.get(), count, previous,
                 {"ring", 8});
  EXPECT_EQ(recv.download(), values(previous, count));
}

TEST_F(NcclTest, BlockingSendRecvPairs) {
  if (n < 2)
    GTEST_SKIP() << "needs 2 ranks (a blocking send to oneself waits for a "
                    "recv that never comes; see SendRecvRing)";
  const size_t count = 7;
  int partner = me ^ 1;
  if (partner >= n)
    return; // the odd rank out
  DeviceBuffer mine(values(me, count)), theirs(count);
  if (me % 2 == 0) {
    comm->send(mine.get(), count, partner, 0, {"pair", 9});
    comm->recv(theirs.get(), count, partner, 0, {"pair", 9});
  } else {
    comm->recv(theirs.get(), count, partner, 0, {"pair", 9});
    comm->send(mine.get(), count, partner, 0, {"pair", 9});
  }
  EXPECT_EQ(theirs.download(), values(partner, count));
}

TEST_F(NcclTest, Barrier) {
  // Line the ranks up, then hold rank 0 back: no rank may leave the second
  // barrier before rank 0 has entered it (the clock starts on each rank
  // after the first barrier, so a rank's wait includes rank 0's sleep).
  using Clock = std::chrono::steady_clock;
  constexpr auto kHold = std::chrono::milliseconds(200);
  comm->barrier({"barrier", 10});
  Clock::time_point start = Clock::now();
  if (me == 0)
    std::this_thread::sleep_for(kHold);
  comm->barrier({"barrier", 11});
  auto waited = std::chrono::duration_cast<std::chrono::milliseconds>(
      Clock::now() - start);
  EXPECT_GE(waited.count(), 150)
      << "rank " << me << " left the barrier before rank 0 entered";
}

TEST_F(NcclTest, SplitByParityReversed) {
  // Groups of equal parity, ordered by descending world rank (key).
  int color = me % 2, key = n - 1 - me;
  std::vector<int> members; // world ranks by rank in the group
  for (int r = n - 1; r >= 0; --r)
    if (r % 2 == color)
      members.push_back(r);
  std::unique_ptr<Communicator> group = comm->split(color, key, {"parity"});
  ASSERT_NE(group, nullptr);
  ASSERT_EQ(group->size(), static_cast<int>(members.size()));
  ASSERT_EQ(members[group->rank()], me);
  auto *nccl = dynamic_cast<NcclCommunicator *>(group.get());
  ASSERT_NE(nccl, nullptr);
  EXPECT_NE(nccl->stream(), comm->stream());
  EXPECT_EQ(nccl->device(), comm->device());

  const size_t count = 21;
  DeviceBuffer data(values(me, count));
  group->allReduce(data.get(), count, ReduceOp::Sum, {"group sum", 12});
  std::vector<float> got = data.download();
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r : members)
      sum += value(r, i);
    ASSERT_EQ(got[i], sum) << "element " << i;
  }
  DeviceBuffer gathered(count * members.size());
  DeviceBuffer mine(values(me, count));
  group->allGather(mine.get(), gathered.get(), count, {"group gather", 13});
  got = gathered.download();
  for (size_t g = 0; g < members.size(); ++g)
    for (size_t i = 0; i < count; ++i)
      ASSERT_EQ(got[g * count + i], value(members[g], i)) << "block " << g;
  group->barrier({"group barrier", 14});
}

TEST_F(NcclTest, SplitNoColor) {
  // The last rank stays out; the others form one group.
  bool out = me == n - 1;
  std::unique_ptr<Communicator> group =
      comm->split(out ? Communicator::kNoColor : 0, me, {"all but last"});
  if (out) {
    EXPECT_EQ(group, nullptr);
    return;
  }
  ASSERT_NE(group, nullptr);
  EXPECT_EQ(group->size(), n - 1);
  EXPECT_EQ(group->rank(), me);
  DeviceBuffer data(values(me, 3));
  group->allReduce(data.get(), 3, ReduceOp::Max, {"max", 15});
  EXPECT_EQ(data.download(), values(n - 2, 3));
}

TEST_F(NcclTest, EnqueueOrdersOnStream) {
  // The enqueue-only form returns before completion; work the caller puts
  // on stream() afterwards (here a copy to pinned memory) sees its result.
  const size_t count = 1 << 16;
  DeviceBuffer data(values(me, count));
  float *host = nullptr;
  ASSERT_EQ(
      cudaMallocHost(reinterpret_cast<void **>(&host), count * sizeof(float)),
      cudaSuccess);
  comm->enqueueAllReduce(data.get(), data.get(), count, ReduceOp::Sum,
                         {"overlap", 16});
  ASSERT_EQ(cudaMemcpyAsync(host, data.get(), count * sizeof(float),
                            cudaMemcpyDeviceToHost, comm->stream()),
            cudaSuccess);
  comm->synchronize({"overlap", 16});
  for (size_t i = 0; i < count; ++i) {
    float sum = 0;
    for (int r = 0; r < n; ++r)
      sum += value(r, i);
    ASSERT_EQ(host[i], sum) << "element " << i;
  }
  cudaFreeHost(host);

  // All the enqueue forms, then one synchronize.
  const size_t small = 4;
  DeviceBuffer a(values(me, small * n)), b(small * n), c(small);
  comm->enqueueAllGather(a.get(), b.get(), small, {"q", 17});
  comm->enqueueReduceScatter(a.get(), c.get(), small, ReduceOp::Sum, {"q", 17});
  comm->enqueueAllToAll(a.get(), b.get(), small, {"q", 17});
  comm->enqueueBroadcast(a.get(), small, 0, {"q", 17});
  comm->enqueueSendRecv(a.get(), small, (me + 1) % n, c.get(), small,
                        (me + n - 1) % n, {"q", 17});
  comm->synchronize({"q", 17});
  // In stream order: all_to_all read a before the broadcast overwrote its
  // first block with rank 0's, which send_recv then passed on.
  std::vector<float> got = b.download();
  for (int r = 0; r < n; ++r)
    for (size_t i = 0; i < small; ++i)
      ASSERT_EQ(got[r * small + i], value(r, me * small + i)) << "block " << r;
  EXPECT_EQ(c.download(), values(0, small));
}

//===----------------------------------------------------------------------===//
// Failures: one line, then abort (death tests re-run this binary, without
// MPI; each child makes its own one-rank communicator).
//===----------------------------------------------------------------------===//

std::unique_ptr<NcclCommunicator> oneRank(double timeoutSeconds) {
  ncclUniqueId id;
  if (ncclGetUniqueId(&id) != ncclSuccess) {
    std::fprintf(stderr, "ncclGetUniqueId failed\n");
    std::abort();
  }
  return NcclCommunicator::create(id, 0, 1, 0, NcclOptions{timeoutSeconds});
}

TEST(NcclCommunicatorDeathTest, UnmatchedRecvTimesOutOrFails) {
  SKIP_WITHOUT_GPU();
  // A recv from oneself with no send: NCCL either waits (then the 1 s
  // deadline) or rejects it; both must be the one line.
  EXPECT_DEATH(
      {
        auto comm = oneRank(1.0);
        DeviceBuffer data(4);
        comm->recv(data.get(), 4, 0, 0, {"pipeline", 7});
      },
      "rank 0: recv 'pipeline' at step 7 (timed out after 1 s; a peer is "
      "missing or stuck|failed: )");
}

TEST(NcclCommunicatorDeathTest, InitWaitingForMissingRankTimesOut) {
  SKIP_WITHOUT_GPU();
  EXPECT_DEATH(
      {
        ncclUniqueId id;
        ncclGetUniqueId(&id);
        // Rank 0 of 2; rank 1 never comes.
        NcclCommunicator::create(id, 0, 2, 0, NcclOptions{2.0});
      },
      "rank 0: init 'nccl world' (timed out after 2 s; a peer is missing or "
      "stuck|failed: )");
}

TEST(NcclCommunicatorDeathTest, InvalidPeer) {
  SKIP_WITHOUT_GPU();
  EXPECT_DEATH(
      {
        auto comm = oneRank(5.0);
        DeviceBuffer data(4);
        comm->send(data.get(), 4, 1, 0, {"activations", 2});
      },
      "rank 0: send 'activations' at step 2 failed: invalid peer 1 "
      "\\(communicator size 1\\)");
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  // `bad-device`: with or without a GPU, bootstrap over MPI onto a device
  // that does not exist; every rank must print the one line ("rank R: init
  // 'nccl world' failed: ...") and the job abort (ctest checks it with
  // RunExpectAbort.cmake).
  if (argc > 1 && std::string(argv[1]) == "bad-device") {
    NcclCommunicator::world(mpiWorld(), 1000, NcclOptions{10.0});
    std::fprintf(stderr, "bad-device: world() returned\n");
    return 0;
  }
  // Re-execute for death tests rather than fork: CUDA and MPI do not
  // survive a fork.
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  if (!noGpuReason().empty())
    std::printf("partition-nccl-test: skipped: %s\n", noGpuReason().c_str());
  return RUN_ALL_TESTS();
}
