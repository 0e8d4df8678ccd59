//===- AtomicFile.cpp - write a file so that it appears whole or not at all
//===//

#include "runtime/checkpoint/AtomicFile.h"

#include "runtime/checkpoint/CheckpointError.h"

#include <atomic>
#include <cerrno>
#include <cstring>

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace partition::runtime::checkpoint {

namespace {

std::string errnoText(int error) { return std::strerror(error); }

std::string parentDirectory(const std::string &path) {
  size_t slash = path.find_last_of('/');
  if (slash == std::string::npos)
    return ".";
  if (slash == 0)
    return "/";
  return path.substr(0, slash);
}

} // namespace

void syncDirectory(const std::string &dir) {
  int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0)
    throw CheckpointError("cannot open directory '" + dir +
                          "' to make a checkpoint durable: " +
                          errnoText(errno) + "; check the directory");
  int rc = ::fsync(fd);
  int error = errno;
  ::close(fd);
  if (rc != 0 && error != EINVAL)
    throw CheckpointError("cannot fsync directory '" + dir +
                          "': " + errnoText(error) +
                          "; the checkpoint may not survive a power loss, "
                          "check the filesystem");
}

AtomicFile::AtomicFile(std::string path) : path_(std::move(path)) {
  static std::atomic<unsigned> counter{0};
  // O_EXCL: never write into a file somebody else (another writer of the
  // same target in this process, a stale file of a dead process that had our
  // pid) may hold; take the next name instead.
  for (int attempt = 0; attempt < 1000; ++attempt) {
    tmpPath_ = path_ + ".tmp." + std::to_string(::getpid()) + "." +
               std::to_string(counter.fetch_add(1));
    fd_ =
        ::open(tmpPath_.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd_ >= 0)
      return;
    if (errno != EEXIST)
      break;
  }
  int error = errno;
  tmpPath_.clear();
  throw CheckpointError(
      "cannot write '" + path_ +
      "': cannot create a temporary file beside it: " + errnoText(error) +
      "; check that the directory exists and is writable");
}

AtomicFile::~AtomicFile() {
  if (!committed_)
    discard();
}

void AtomicFile::discard() noexcept {
  if (fd_ >= 0) {
    ::close(fd_);
    fd_ = -1;
  }
  if (!tmpPath_.empty()) {
    ::unlink(tmpPath_.c_str());
    tmpPath_.clear();
  }
}

void AtomicFile::fail(const std::string &problem, int error) {
  discard();
  throw CheckpointError("cannot write '" + path_ + "': " + problem + ": " +
                        errnoText(error) +
                        "; the previous file, if any, is unchanged");
}

void AtomicFile::write(const void *data, size_t bytes) {
  if (committed_ || fd_ < 0)
    throw CheckpointError("cannot write '" + path_ +
                          "': the file was already committed or abandoned; "
                          "this is a bug in the caller");
  const char *p = static_cast<const char *>(data);
  while (bytes > 0) {
    // Linux transfers at most about 2 GiB per call.
    size_t chunk = bytes < (size_t(1) << 30) ? bytes : (size_t(1) << 30);
    ssize_t n = ::write(fd_, p, chunk);
    if (n < 0) {
      int error = errno;
      if (error == EINTR)
        continue;
      fail("write failed", error);
    }
    if (n == 0)
      fail("write made no progress", EIO);
    p += n;
    bytes -= static_cast<size_t>(n);
  }
}

void AtomicFile::commit() {
  if (committed_ || fd_ < 0)
    throw CheckpointError("cannot commit '" + path_ +
                          "': the file was already committed or abandoned; "
                          "this is a bug in the caller");
  if (::fsync(fd_) != 0) {
    int error = errno;
    fail("fsync failed", error);
  }
  int rc = ::close(fd_);
  int error = errno;
  fd_ = -1;
  if (rc != 0)
    fail("close failed", error);
  if (::rename(tmpPath_.c_str(), path_.c_str()) != 0) {
    error = errno;
    fail("cannot rename '" + tmpPath_ + "' over it", error);
  }
  committed_ = true;
  tmpPath_.clear();
  syncDirectory(parentDirectory(path_));
}

} // namespace partition::runtime::checkpoint
