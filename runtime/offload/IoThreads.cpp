//===- IoThreads.cpp - the "threads" I/O engine: pread / pwrite in a pool -===//
//
// Each request is cut into chunks; the pool's threads take chunks in
// order and move them with pread / pwrite, continuing short transfers.
// The first error of a request is kept and thrown by wait().
//
//===----------------------------------------------------------------------===//

#include "runtime/offload/IoEngine.h"

#include <cerrno>
#include <condition_variable>
#include <deque>
#include <map>
#include <mutex>
#include <thread>
#include <unistd.h>

namespace partition::runtime::offload {
namespace {

struct Pending {
  IoRequest request;
  std::size_t chunksLeft = 0;
  std::string error;
};

struct Chunk {
  Pending *pending;
  std::uint64_t offset;
  char *buffer;
  std::size_t bytes;
};

/// Moves one chunk; "" or the failure's message.
std::string transfer(const Chunk &chunk) {
  const IoRequest &request = chunk.pending->request;
  std::size_t done = 0;
  while (done < chunk.bytes) {
    ssize_t moved =
        request.kind == IoRequest::Kind::Read
            ? ::pread(request.fd, chunk.buffer + done, chunk.bytes - done,
                      off_t(chunk.offset + done))
            : ::pwrite(request.fd, chunk.buffer + done, chunk.bytes - done,
                       off_t(chunk.offset + done));
    if (moved < 0 && errno == EINTR)
      continue;
    if (moved <= 0)
      return ioFailure(request, chunk.offset + done, moved < 0 ? errno : 0);
    done += std::size_t(moved);
  }
  return "";
}

class ThreadPoolEngine final : public IoEngine {
public:
  explicit ThreadPoolEngine(const IoEngineOptions &options)
      : chunkBytes(options.chunkBytes) {
    for (unsigned i = 0; i < options.threads; ++i)
      workers.emplace_back([this] { work(); });
  }
  ~ThreadPoolEngine() override {
    {
      std::lock_guard<std::mutex> lock(mutex);
      stopping = true;
    }
    queued.notify_all();
    for (std::thread &worker : workers)
      worker.join();
  }
  const char *name() const override { return "threads"; }

  Ticket submit(const IoRequest &request) override {
    std::lock_guard<std::mutex> lock(mutex);
    Ticket ticket = next++;
    Pending &pending = pendings[ticket];
    pending.request = request;
    char *buffer = static_cast<char *>(request.buffer);
    for (std::size_t at = 0; at < request.bytes; at += chunkBytes) {
      std::size_t bytes = std::min(chunkBytes, request.bytes - at);
      chunks.push_back({&pending, request.offset + at, buffer + at, bytes});
      ++pending.chunksLeft;
    }
    queued.notify_all();
    return ticket;
  }

  void wait(Ticket ticket) override {
    std::unique_lock<std::mutex> lock(mutex);
    auto it = pendings.find(ticket);
    if (it == pendings.end())
      throw std::logic_error("wait for an unknown I/O ticket");
    finished.wait(lock, [&] { return it->second.chunksLeft == 0; });
    std::string error = std::move(it->second.error);
    pendings.erase(it);
    if (!error.empty())
      throw IoError(error);
  }

private:
  void work() {
    std::unique_lock<std::mutex> lock(mutex);
    for (;;) {
      queued.wait(lock, [&] { return stopping || !chunks.empty(); });
      if (chunks.empty())
        return;
      Chunk chunk = chunks.front();
      chunks.pop_front();
      lock.unlock();
      std::string error = transfer(chunk);
      lock.lock();
      Pending &pending = *chunk.pending;
      if (!error.empty() && pending.error.empty())
        pending.error = std::move(error);
      if (--pending.chunksLeft == 0)
        finished.notify_all();
    }
  }

  const std::size_t chunkBytes;
  std::mutex mutex;
  std::condition_variable queued, finished;
  std::deque<Chunk> chunks;
  /// std::map: a Pending's address stays valid while others come and go.
  std::map<Ticket, Pending> pendings;
  Ticket next = 1;
  bool stopping = false;
  std::vector<std::thread> workers;
};

} // namespace

std::unique_ptr<IoEngine> makeThreadPoolEngine(const IoEngineOptions &options) {
  return std::make_unique<ThreadPoolEngine>(options);
}

} // namespace partition::runtime::offload
