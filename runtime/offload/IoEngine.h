//===- IoEngine.h - asynchronous file reads and writes ----------*- C++ -*-===//
//
// The offload tier's I/O (docs/offload.md): the optimizer state and, under
// ZeRO-3, the parameters of a rank live in one preallocated file
// (OffloadFile.h) and move between it and bounded staging buffers while
// the step computes. An IoEngine starts reads and writes and waits for
// them; two implement it, so that the choice is measured rather than
// assumed (bench/offload/partition-bench-io):
//
//  - "threads": a pool of threads, each request split into chunks that
//    the threads pread / pwrite (DeepSpeed's aio library does the same);
//  - "uring": Linux io_uring through liburing, the chunks queued to the
//    kernel up to a queue depth, no thread of our own.
//
// Requests are whole: a short transfer is continued until every byte has
// moved, and an error (a full disk, an I/O error, a file shorter than the
// read) is thrown by wait() as an IoError naming the file, the offset and
// the system's reason. Buffers and offsets must be aligned to
// kIoAlignment when the file was opened with O_DIRECT.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_OFFLOAD_IOENGINE_H
#define PARTITION_RUNTIME_OFFLOAD_IOENGINE_H

#include <cstddef>
#include <cstdint>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace partition::runtime::offload {

/// O_DIRECT's alignment of buffers, offsets and sizes (the logical block
/// size of every disk this runs on is at most 4 KiB).
inline constexpr std::size_t kIoAlignment = 4096;

/// A failed transfer: "reading 'FILE' at byte N (M bytes): REASON".
class IoError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

struct IoRequest {
  enum class Kind { Read, Write };
  Kind kind = Kind::Read;
  int fd = -1;
  /// For messages only.
  std::string path;
  std::uint64_t offset = 0;
  void *buffer = nullptr;
  std::size_t bytes = 0;
};

class IoEngine {
public:
  using Ticket = std::uint64_t;
  virtual ~IoEngine() = default;
  /// "threads" or "uring".
  virtual const char *name() const = 0;
  /// Starts `request`; its buffer must stay valid until wait() returns.
  virtual Ticket submit(const IoRequest &request) = 0;
  /// Returns once the request has completed; throws IoError if it failed.
  /// Each ticket is waited for once.
  virtual void wait(Ticket ticket) = 0;
};

struct IoEngineOptions {
  /// "threads" or "uring".
  std::string kind = "threads";
  /// "threads": the pool's threads, each moving one chunk at a time.
  unsigned threads = 4;
  /// "uring": the chunks in the kernel at once. Nothing of ours runs
  /// while the caller computes, so chunks beyond it wait for the caller's
  /// next submit() or wait(): the offload keeps a bucket's chunks within
  /// it (measured: with 8 of 32 in flight, 8% of the I/O hid behind an
  /// update; with all of them, all of it).
  unsigned queueDepth = 64;
  /// Requests are cut into chunks of this many bytes (a multiple of
  /// kIoAlignment) that run in parallel.
  std::size_t chunkBytes = 4u << 20;
};

/// The engines this build has ("threads", and "uring" where liburing was
/// found and the kernel allows io_uring).
std::vector<std::string> availableIoEngines();

/// Throws std::invalid_argument naming the kinds when `options.kind` is
/// unknown or unavailable here.
std::unique_ptr<IoEngine> makeIoEngine(const IoEngineOptions &options);

/// The message of a failed transfer.
std::string ioFailure(const IoRequest &request, std::uint64_t at,
                      int error);

/// Implementations (IoThreads.cpp, IoUring.cpp).
std::unique_ptr<IoEngine> makeThreadPoolEngine(const IoEngineOptions &);
#ifdef PARTITION_HAVE_LIBURING
std::unique_ptr<IoEngine> makeUringEngine(const IoEngineOptions &);
bool uringUsable();
#endif

} // namespace partition::runtime::offload

#endif // PARTITION_RUNTIME_OFFLOAD_IOENGINE_H
