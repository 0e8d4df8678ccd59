//===- PeerWatch.cpp - which rank of the node stopped responding ----------===//

#include "runtime/comm/PeerWatch.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <cstdio>
#include <mutex>
#include <new>
#include <thread>

namespace partition::runtime::comm {

namespace {

// The node's table, in node rank 0's segment of the window. Atomics are
// lock-free on every target MPI runs on, so they work across processes.
struct Slot {
  std::atomic<int64_t> beatNs{0};
  std::atomic<int32_t> worldRank{-1};
};

struct Table {
  // 0 while no rank has timed out; 1 while the first one writes its
  // verdict; 2 once the fields below hold it.
  std::atomic<int32_t> state{0};
  int32_t detector = -1, silent = -1;
  int64_t silentNs = 0;
  int32_t ranks = 0;
  Slot slots[1]; // `ranks` of them
};

static_assert(std::atomic<int64_t>::is_always_lock_free,
              "PeerWatch needs lock-free 64-bit atomics in shared memory");

int64_t nowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

struct Watch {
  MPI_Comm node = MPI_COMM_NULL;
  MPI_Win window = MPI_WIN_NULL;
  Table *table = nullptr;
  Slot *own = nullptr;
  std::thread beater;
  std::mutex mutex;
  std::condition_variable wake;
  bool stopping = false;

  void beat() {
    std::unique_lock<std::mutex> lock(mutex);
    while (!stopping) {
      own->beatNs.store(nowNs(), std::memory_order_relaxed);
      wake.wait_for(lock, std::chrono::milliseconds(100));
    }
  }
};

Watch *watch = nullptr;

} // namespace

void PeerWatch::start() {
  if (watch)
    return;
  int worldRank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &worldRank);
  auto created = std::make_unique<Watch>();
  if (MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, worldRank,
                          MPI_INFO_NULL, &created->node) != MPI_SUCCESS)
    return;
  MPI_Comm_set_errhandler(created->node, MPI_ERRORS_RETURN);
  int nodeRank = 0, nodeSize = 1;
  MPI_Comm_rank(created->node, &nodeRank);
  MPI_Comm_size(created->node, &nodeSize);
  MPI_Aint bytes =
      nodeRank == 0 ? MPI_Aint(sizeof(Table) + nodeSize * sizeof(Slot)) : 0;
  void *base = nullptr;
  int rc = MPI_Win_allocate_shared(bytes, alignof(Table), MPI_INFO_NULL,
                                   created->node, &base, &created->window);
  if (rc != MPI_SUCCESS) {
    MPI_Comm_free(&created->node);
    return; // No shared memory: messages name what each rank waited for.
  }
  MPI_Aint size = 0;
  int unit = 0;
  MPI_Win_shared_query(created->window, 0, &size, &unit, &base);
  created->table = static_cast<Table *>(base);
  if (nodeRank == 0) {
    new (created->table) Table();
    created->table->ranks = nodeSize;
    for (int r = 0; r < nodeSize; ++r)
      new (&created->table->slots[r]) Slot();
  }
  MPI_Barrier(created->node); // the table is built before anyone uses it
  created->own = &created->table->slots[nodeRank];
  created->own->worldRank.store(worldRank);
  created->own->beatNs.store(nowNs());
  MPI_Barrier(created->node); // every rank has a slot and a first beat
  watch = created.release();
  watch->beater = std::thread([] { watch->beat(); });
}

void PeerWatch::stop() {
  if (!watch)
    return;
  {
    std::lock_guard<std::mutex> lock(watch->mutex);
    watch->stopping = true;
  }
  watch->wake.notify_all();
  watch->beater.join();
  // Freeing the window is collective: a rank that leaves early (an error
  // on its own) must not wait for the others, so the window and the node
  // communicator are left to MPI_Finalize.
  delete watch;
  watch = nullptr;
}

std::optional<PeerWatch::Verdict> PeerWatch::posted() {
  if (!watch)
    return std::nullopt;
  const Table &table = *watch->table;
  if (table.state.load(std::memory_order_acquire) != 2)
    return std::nullopt;
  Verdict verdict;
  verdict.detector = table.detector;
  verdict.silent = table.silent;
  verdict.silentSeconds = double(table.silentNs) / 1e9;
  return verdict;
}

std::optional<PeerWatch::Verdict> PeerWatch::judge(int worldRank,
                                                   int expected) {
  if (!watch)
    return std::nullopt;
  if (auto verdict = posted())
    return verdict;
  int64_t now = nowNs();
  int64_t limit = int64_t(kSilentSeconds * 1e9);
  int silent = -1;
  int64_t silentNs = 0;
  for (int r = 0; r < watch->table->ranks; ++r) {
    const Slot &slot = watch->table->slots[r];
    int rank = slot.worldRank.load();
    int64_t age = now - slot.beatNs.load(std::memory_order_relaxed);
    if (rank == worldRank || age <= limit)
      continue;
    bool better = silent < 0 || (rank == expected) ||
                  (silent != expected && rank < silent);
    if (better)
      silent = rank, silentNs = age;
  }
  if (silent < 0)
    return std::nullopt;
  Table &table = *watch->table;
  int32_t none = 0;
  if (table.state.compare_exchange_strong(none, 1)) {
    table.detector = worldRank;
    table.silent = silent;
    table.silentNs = silentNs;
    table.state.store(2, std::memory_order_release);
  }
  // Another rank may be writing its verdict: it takes microseconds.
  while (table.state.load(std::memory_order_acquire) != 2)
    std::this_thread::yield();
  return posted();
}

namespace {

// Prints "%g" without a trailing ".0": 300 -> "300", 2.5 -> "2.5".
std::string formatSeconds(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof(buffer), "%g", seconds);
  return buffer;
}

std::string timedOut(int rank, double timeoutSeconds) {
  return (rank >= 0 ? "rank " + std::to_string(rank) + " " : "") +
         "timed out after " + formatSeconds(timeoutSeconds) + " s; ";
}

std::string silence(const PeerWatch::Verdict &verdict) {
  char seconds[32];
  std::snprintf(seconds, sizeof(seconds), "%.1f", verdict.silentSeconds);
  return "rank " + std::to_string(verdict.silent) +
         " has shown no sign of life for " + seconds + " s (stopped or dead)";
}

} // namespace

std::string PeerWatch::timeoutDetail(int worldRank, int expected,
                                     double timeoutSeconds) {
  std::optional<Verdict> verdict = judge(worldRank, expected);
  if (!verdict)
    return timedOut(-1, timeoutSeconds) + "a peer is missing or stuck";
  if (verdict->detector != worldRank)
    return abandonDetail(*verdict, timeoutSeconds);
  return timedOut(-1, timeoutSeconds) + silence(*verdict);
}

std::string PeerWatch::abandonDetail(const Verdict &verdict,
                                     double timeoutSeconds) {
  return "abandoned: " + timedOut(verdict.detector, timeoutSeconds) +
         silence(verdict);
}

} // namespace partition::runtime::comm
