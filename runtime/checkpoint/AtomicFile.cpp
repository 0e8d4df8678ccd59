//===- AtomicFile.cpp - write a file so that it appears whole or not at all
//===//

#include "runtime/checkpoint/AtomicFile.h"

#include "runtime/checkpoint/CheckpointError.h"

#include <atomic>
#include <cerrno>
#include <charconv>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <string_view>
#include <system_error>

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

/// The decimal number `text` is, whole, or nothing.
std::optional<uint64_t> decimal(std::string_view text) {
  uint64_t value = 0;
  auto [end, error] =
      std::from_chars(text.data(), text.data() + text.size(), value);
  if (text.empty() || error != std::errc() || end != text.data() + text.size())
    return std::nullopt;
  return value;
}

/// Whether process `pid` of this host exists (EPERM: it does, another
/// user's).
bool processAlive(pid_t pid) {
  return ::kill(pid, 0) == 0 || errno == EPERM;
}

} // namespace

std::vector<std::string> removeStaleTemporaries(const std::string &path) {
  namespace fs = std::filesystem;
  std::vector<std::string> removed;
  const std::string prefix = fs::path(path).filename().string() + ".tmp.";
  std::error_code error;
  fs::directory_iterator it(parentDirectory(path), error), end;
  for (; !error && it != end; it.increment(error)) {
    std::string name = it->path().filename().string();
    if (name.compare(0, prefix.size(), prefix) != 0)
      continue;
    // "<pid>.<n>", both decimal: anything else is not ours to remove.
    std::string_view rest = std::string_view(name).substr(prefix.size());
    size_t dot = rest.find('.');
    if (dot == std::string_view::npos)
      continue;
    std::optional<uint64_t> pid = decimal(rest.substr(0, dot));
    if (!pid || !decimal(rest.substr(dot + 1)) || *pid == 0 ||
        *pid > uint64_t(std::numeric_limits<pid_t>::max()))
      continue;
    if (pid_t(*pid) == ::getpid() || processAlive(pid_t(*pid)))
      continue;
    std::error_code ignored;
    if (fs::remove(it->path(), ignored))
      removed.push_back(it->path().string());
  }
  return removed;
}

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
