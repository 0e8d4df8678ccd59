//===- MetricsFile.h - --metrics-out, every write checked -------*- C++ -*-===//
//
// One JSON object per line. A metrics file that silently stays empty (a full
// disk, /dev/full, a /proc file that takes no writes) loses the record of a
// run, so every write is flushed and checked, as is the close, and a
// failure throws MetricsError naming the file and the system's reason.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_METRICSFILE_H
#define PARTITION_RUNTIME_METRICSFILE_H

#include <cstdio>
#include <stdexcept>
#include <string>

namespace partition::runtime {

class MetricsError : public std::runtime_error {
public:
  using std::runtime_error::runtime_error;
};

class MetricsFile {
public:
  /// Creates or truncates `path`; throws MetricsError when it cannot.
  explicit MetricsFile(std::string path);
  /// Closes without checking (after an error has been reported).
  ~MetricsFile();
  MetricsFile(const MetricsFile &) = delete;
  MetricsFile &operator=(const MetricsFile &) = delete;

  /// Appends `line` and a newline and flushes them to the file, so that a
  /// run killed later keeps every line written so far.
  void writeLine(const std::string &line);
  /// Closes the file; a failure (a delayed write error) throws.
  void close();

  const std::string &path() const { return path_; }

private:
  [[noreturn]] void fail(int error);

  std::string path_;
  std::FILE *file_ = nullptr;
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_METRICSFILE_H
