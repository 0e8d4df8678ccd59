//===- MetricsFile.cpp - --metrics-out, every write checked ---------------===//

#include "runtime/train/MetricsFile.h"

#include <cerrno>
#include <cstring>

namespace partition::runtime {

MetricsFile::MetricsFile(std::string path) : path_(std::move(path)) {
  file_ = std::fopen(path_.c_str(), "w");
  if (!file_)
    throw MetricsError(path_ + ": cannot write the metrics file (" +
                       std::strerror(errno) +
                       "); check that its directory exists and is writable");
}

MetricsFile::~MetricsFile() {
  if (file_)
    std::fclose(file_);
}

void MetricsFile::fail(int error) {
  bool full = error == ENOSPC || error == EDQUOT || error == EFBIG;
  throw MetricsError(path_ + ": cannot write the metrics file (" +
                     std::strerror(error) + "); " +
                     (full ? "free disk space or give --metrics-out a file "
                             "on another disk"
                           : "give --metrics-out a regular file you can "
                             "write"));
}

void MetricsFile::writeLine(const std::string &line) {
  if (!file_)
    fail(EBADF);
  errno = 0;
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() ||
      std::fputc('\n', file_) == EOF || std::fflush(file_) != 0)
    fail(errno ? errno : EIO);
}

void MetricsFile::close() {
  if (!file_)
    return;
  std::FILE *file = file_;
  file_ = nullptr;
  errno = 0;
  if (std::fclose(file) != 0)
    fail(errno ? errno : EIO);
}

} // namespace partition::runtime
