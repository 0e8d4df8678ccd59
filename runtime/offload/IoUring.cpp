//===- IoUring.cpp - the "uring" I/O engine: io_uring via liburing --------===//
//
// Requests are cut into chunks queued to one io_uring, at most `depth` in
// the kernel at once. There is no thread of ours: the kernel moves the
// queued chunks while the caller computes, and the caller's submit() and
// wait() reap completions and queue the chunks still waiting for room. A
// short transfer is queued again for its rest.
//
//===----------------------------------------------------------------------===//

#include "runtime/offload/IoEngine.h"

#include <liburing.h>

#include <cerrno>
#include <cstring>
#include <deque>
#include <map>

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

class UringEngine final : public IoEngine {
public:
  explicit UringEngine(const IoEngineOptions &options)
      : chunkBytes(options.chunkBytes), depth(options.queueDepth) {
    int error = io_uring_queue_init(depth, &ring, 0);
    if (error < 0)
      throw IoError(std::string("cannot set up io_uring: ") +
                    std::strerror(-error));
  }
  ~UringEngine() override {
    // Chunks still in the kernel write into buffers about to be freed:
    // let them finish first.
    while (inFlight > 0) {
      io_uring_cqe *cqe = nullptr;
      if (io_uring_wait_cqe(&ring, &cqe) < 0)
        break;
      delete static_cast<Chunk *>(io_uring_cqe_get_data(cqe));
      io_uring_cqe_seen(&ring, cqe);
      --inFlight;
    }
    io_uring_queue_exit(&ring);
  }
  const char *name() const override { return "uring"; }

  Ticket submit(const IoRequest &request) override {
    Ticket ticket = next++;
    Pending &pending = pendings[ticket];
    pending.request = request;
    char *buffer = static_cast<char *>(request.buffer);
    for (std::size_t at = 0; at < request.bytes; at += chunkBytes) {
      std::size_t bytes = std::min(chunkBytes, request.bytes - at);
      waiting.push_back({&pending, request.offset + at, buffer + at, bytes});
      ++pending.chunksLeft;
    }
    reap(/*block=*/false);
    queue();
    return ticket;
  }

  void wait(Ticket ticket) override {
    auto it = pendings.find(ticket);
    if (it == pendings.end())
      throw std::logic_error("wait for an unknown I/O ticket");
    while (it->second.chunksLeft > 0) {
      queue();
      reap(/*block=*/true);
    }
    std::string error = std::move(it->second.error);
    pendings.erase(it);
    if (!error.empty())
      throw IoError(error);
  }

private:
  /// Moves waiting chunks into the ring while it has room.
  void queue() {
    unsigned added = 0;
    while (!waiting.empty() && inFlight < depth) {
      io_uring_sqe *sqe = io_uring_get_sqe(&ring);
      if (!sqe)
        break;
      Chunk *chunk = new Chunk(waiting.front());
      waiting.pop_front();
      const IoRequest &request = chunk->pending->request;
      if (request.kind == IoRequest::Kind::Read)
        io_uring_prep_read(sqe, request.fd, chunk->buffer,
                           unsigned(chunk->bytes), chunk->offset);
      else
        io_uring_prep_write(sqe, request.fd, chunk->buffer,
                            unsigned(chunk->bytes), chunk->offset);
      io_uring_sqe_set_data(sqe, chunk);
      ++inFlight;
      ++added;
    }
    if (added == 0)
      return;
    int submitted;
    do
      submitted = io_uring_submit(&ring);
    while (submitted == -EINTR);
    if (submitted < 0)
      throw IoError(std::string("io_uring_submit: ") +
                    std::strerror(-submitted));
  }

  /// Handles the completions there are (waiting for one if `block`).
  void reap(bool block) {
    io_uring_cqe *cqe = nullptr;
    if (block && inFlight > 0) {
      int error;
      do
        error = io_uring_wait_cqe(&ring, &cqe);
      while (error == -EINTR);
      if (error < 0)
        throw IoError(std::string("io_uring_wait_cqe: ") +
                      std::strerror(-error));
    }
    while (inFlight > 0 && io_uring_peek_cqe(&ring, &cqe) == 0 && cqe) {
      std::unique_ptr<Chunk> chunk(
          static_cast<Chunk *>(io_uring_cqe_get_data(cqe)));
      int result = cqe->res;
      io_uring_cqe_seen(&ring, cqe);
      --inFlight;
      Pending &pending = *chunk->pending;
      if (result <= 0) {
        // 0: a read past the end of the file.
        if (pending.error.empty())
          pending.error =
              ioFailure(pending.request, chunk->offset, result < 0 ? -result : 0);
        --pending.chunksLeft;
      } else if (std::size_t(result) < chunk->bytes) {
        // Short: the rest goes first in the queue.
        waiting.push_front({&pending, chunk->offset + std::uint64_t(result),
                            chunk->buffer + result,
                            chunk->bytes - std::size_t(result)});
      } else {
        --pending.chunksLeft;
      }
    }
  }

  const std::size_t chunkBytes;
  const unsigned depth;
  io_uring ring{};
  unsigned inFlight = 0;
  std::deque<Chunk> waiting;
  std::map<Ticket, Pending> pendings;
  Ticket next = 1;
};

} // namespace

bool uringUsable() {
  // Containers may forbid io_uring (seccomp): ask once.
  static const bool usable = [] {
    io_uring ring{};
    if (io_uring_queue_init(2, &ring, 0) < 0)
      return false;
    io_uring_queue_exit(&ring);
    return true;
  }();
  return usable;
}

std::unique_ptr<IoEngine> makeUringEngine(const IoEngineOptions &options) {
  return std::make_unique<UringEngine>(options);
}

} // namespace partition::runtime::offload
