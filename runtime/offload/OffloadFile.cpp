//===- OffloadFile.cpp - a rank's preallocated offload file ---------------===//

#include "runtime/offload/OffloadFile.h"

#include <cerrno>
#include <csignal>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <unistd.h>

namespace partition::runtime::offload {

constexpr const char *kPrefix = "partition-offload-";

void AlignedBuffer::Free::operator()(void *p) const { std::free(p); }

std::uint64_t alignedBytes(std::uint64_t bytes) {
  return (bytes + kIoAlignment - 1) / kIoAlignment * kIoAlignment;
}

AlignedBuffer::AlignedBuffer(std::size_t size)
    : bytes(std::size_t(alignedBytes(size))) {
  void *p = std::aligned_alloc(kIoAlignment, bytes == 0 ? kIoAlignment : bytes);
  if (!p)
    throw std::bad_alloc();
  memory.reset(p);
}

namespace {
std::string freeBytes(const std::string &directory) {
  struct statvfs fs {};
  if (::statvfs(directory.c_str(), &fs) != 0)
    return "unknown";
  return std::to_string(std::uint64_t(fs.f_bavail) * fs.f_frsize);
}
} // namespace

OffloadFile::OffloadFile(const std::string &directory, const std::string &tag,
                         std::uint64_t bytes)
    : size(alignedBytes(bytes)) {
  struct stat info {};
  if (::stat(directory.c_str(), &info) != 0 || !S_ISDIR(info.st_mode))
    throw IoError("the offload path '" + directory +
                  "' is not a directory: create it or give another path");
  name = directory + "/" + kPrefix + std::to_string(::getpid()) + "-" + tag +
         ".bin";
  int flags = O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC;
  descriptor = ::open(name.c_str(), flags | O_DIRECT, 0600);
  isDirect = descriptor >= 0;
  if (descriptor < 0 && errno == EINVAL)
    descriptor = ::open(name.c_str(), flags, 0600);
  if (descriptor < 0)
    throw IoError("cannot create the offload file '" + name +
                  "': " + std::strerror(errno) +
                  " (give a writable offload path)");
  int error = size ? ::posix_fallocate(descriptor, 0, off_t(size)) : 0;
  if (error != 0) {
    ::close(descriptor);
    ::unlink(name.c_str());
    descriptor = -1;
    std::string message = "cannot preallocate the offload file '" + name +
                          "' of " + std::to_string(size) +
                          " bytes: " + std::strerror(error);
    if (error == ENOSPC || error == EDQUOT || error == EFBIG)
      message += " (" + freeBytes(directory) +
                 " bytes free there: free space or give another path)";
    throw IoError(message);
  }
}

OffloadFile::~OffloadFile() {
  if (descriptor >= 0) {
    ::close(descriptor);
    ::unlink(name.c_str());
  }
}

IoRequest OffloadFile::request(IoRequest::Kind kind, std::uint64_t offset,
                               void *buffer, std::size_t bytes) const {
  if (offset + bytes > size)
    throw IoError(std::string(kind == IoRequest::Kind::Read ? "reading"
                                                            : "writing") +
                  " bytes " + std::to_string(offset) + "-" +
                  std::to_string(offset + bytes) + " of the offload file '" +
                  name + "', which holds " + std::to_string(size));
  IoRequest r;
  r.kind = kind;
  r.fd = descriptor;
  r.path = name;
  r.offset = offset;
  r.buffer = buffer;
  r.bytes = bytes;
  return r;
}

IoRequest OffloadFile::read(std::uint64_t offset, void *buffer,
                            std::size_t bytes) const {
  return request(IoRequest::Kind::Read, offset, buffer, bytes);
}

IoRequest OffloadFile::write(std::uint64_t offset, const void *buffer,
                             std::size_t bytes) const {
  return request(IoRequest::Kind::Write, offset, const_cast<void *>(buffer),
                 bytes);
}

std::vector<std::string> OffloadFile::removeStale(const std::string &directory) {
  std::vector<std::string> removed;
  DIR *dir = ::opendir(directory.c_str());
  if (!dir)
    return removed;
  std::size_t prefix = std::strlen(kPrefix);
  while (dirent *entry = ::readdir(dir)) {
    std::string file = entry->d_name;
    if (file.compare(0, prefix, kPrefix) != 0)
      continue;
    char *end = nullptr;
    long pid = std::strtol(file.c_str() + prefix, &end, 10);
    if (end == file.c_str() + prefix || *end != '-' || pid <= 0)
      continue;
    // A process that no longer exists (not one we may not signal).
    if (::kill(pid_t(pid), 0) == 0 || errno != ESRCH)
      continue;
    std::string path = directory + "/" + file;
    if (::unlink(path.c_str()) == 0)
      removed.push_back(path);
  }
  ::closedir(dir);
  return removed;
}

} // namespace partition::runtime::offload
