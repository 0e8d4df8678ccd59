//===- AtomicFile.h - write a file so that it appears whole or not at all -===//
//
// AtomicFile writes into a temporary file beside the target
// (`<path>.tmp.<pid>.<n>`, same directory, hence same filesystem) and, on
// commit(), fsyncs it, renames it over the target and fsyncs the directory.
// Until commit() returns, the target keeps its previous content (or stays
// absent); if the process dies first, at most a stray `*.tmp.*` file is left
// beside it, never a partial file under the final name (the next
// removeStaleTemporaries cleans it up). Destroying an
// AtomicFile that was not committed (an exception while writing, say) removes
// the temporary file.
//
//   AtomicFile file("out/state.bin");
//   file.write(header, headerBytes);
//   file.write(payload, payloadBytes);
//   file.commit();
//
// Errors throw CheckpointError naming the target.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_CHECKPOINT_ATOMICFILE_H
#define PARTITION_RUNTIME_CHECKPOINT_ATOMICFILE_H

#include <cstddef>
#include <string>
#include <vector>

namespace partition::runtime::checkpoint {

class AtomicFile {
public:
  /// Creates the temporary file; the directory of `path` must exist.
  explicit AtomicFile(std::string path);
  /// Removes the temporary file unless commit() succeeded.
  ~AtomicFile();
  AtomicFile(const AtomicFile &) = delete;
  AtomicFile &operator=(const AtomicFile &) = delete;

  /// Appends `bytes` bytes (all of them, or throws).
  void write(const void *data, size_t bytes);
  /// fsync, rename over the target, fsync the directory. At most once.
  void commit();

  const std::string &path() const { return path_; }
  const std::string &temporaryPath() const { return tmpPath_; }

private:
  [[noreturn]] void fail(const std::string &problem, int error);
  void discard() noexcept;

  std::string path_;
  std::string tmpPath_;
  int fd_ = -1;
  bool committed_ = false;
};

/// Removes the temporary files `<path>.tmp.<pid>.<n>` beside `path` whose
/// writer, process <pid> of this host, is gone: left by a process killed
/// mid-write. Those of live processes (perhaps writing right now, this one
/// included) stay. Returns the paths removed. A file that cannot be removed
/// is left alone: it does not keep the next write from succeeding.
std::vector<std::string> removeStaleTemporaries(const std::string &path);

/// fsyncs directory `dir` so that renames and creations inside it are
/// durable. Filesystems that cannot fsync a directory (EINVAL) are accepted.
void syncDirectory(const std::string &dir);

} // namespace partition::runtime::checkpoint

#endif // PARTITION_RUNTIME_CHECKPOINT_ATOMICFILE_H
