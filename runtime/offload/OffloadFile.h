//===- OffloadFile.h - a rank's preallocated offload file -------*- C++ -*-===//
//
// The NVMe tier of the offload (docs/offload.md) keeps each rank's state in
// one file under the plan's offload path, created before step 1 at its full
// size (so a disk too small is said then, with the bytes needed, not in
// the middle of a step), opened with O_DIRECT where the filesystem allows
// (tmpfs does not: then through the page cache), and removed when the run
// ends. Files of runs that died are found by their process id in the name
// and removed by the next run, as checkpoints' temporaries are.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_OFFLOAD_OFFLOADFILE_H
#define PARTITION_RUNTIME_OFFLOAD_OFFLOADFILE_H

#include "runtime/offload/IoEngine.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace partition::runtime::offload {

/// Memory for transfers: aligned to kIoAlignment, its size rounded up to
/// it (what O_DIRECT needs).
class AlignedBuffer {
public:
  AlignedBuffer() = default;
  explicit AlignedBuffer(std::size_t bytes);
  void *data() const { return memory.get(); }
  std::size_t size() const { return bytes; }

private:
  struct Free {
    void operator()(void *p) const;
  };
  std::unique_ptr<void, Free> memory;
  std::size_t bytes = 0;
};

/// `bytes` rounded up to kIoAlignment.
std::uint64_t alignedBytes(std::uint64_t bytes);

class OffloadFile {
public:
  /// Creates DIRECTORY/partition-offload-PID-TAG.bin holding `bytes`
  /// (rounded up to kIoAlignment), preallocated. Throws IoError with one
  /// line naming the path and what to do when the directory is missing or
  /// not writable, or the disk lacks room (the bytes needed and free).
  OffloadFile(const std::string &directory, const std::string &tag,
              std::uint64_t bytes);
  /// Closes and removes the file.
  ~OffloadFile();
  OffloadFile(const OffloadFile &) = delete;
  OffloadFile &operator=(const OffloadFile &) = delete;

  int fd() const { return descriptor; }
  const std::string &path() const { return name; }
  std::uint64_t bytes() const { return size; }
  /// Opened with O_DIRECT (buffers, offsets and sizes aligned).
  bool direct() const { return isDirect; }

  /// A request on this file, for an IoEngine.
  IoRequest read(std::uint64_t offset, void *buffer, std::size_t bytes) const;
  IoRequest write(std::uint64_t offset, const void *buffer,
                  std::size_t bytes) const;

  /// Removes DIRECTORY's offload files whose process no longer runs;
  /// returns their paths.
  static std::vector<std::string> removeStale(const std::string &directory);

private:
  IoRequest request(IoRequest::Kind kind, std::uint64_t offset, void *buffer,
                    std::size_t bytes) const;
  std::string name;
  int descriptor = -1;
  std::uint64_t size = 0;
  bool isDirect = false;
};

} // namespace partition::runtime::offload

#endif // PARTITION_RUNTIME_OFFLOAD_OFFLOADFILE_H
