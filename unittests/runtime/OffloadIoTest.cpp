//===- OffloadIoTest.cpp - offload files and the I/O engines --------------===//
//
// Every engine this build has (threads, uring) writes and reads back data
// through a preallocated offload file, in chunks smaller than the request
// and with several requests in flight; a read past the file's end, a write
// past a file-size limit (what a full disk looks like to the writer) and a
// request outside the file fail with one line naming the file and the
// offset. Files are removed when closed, and stale ones of dead processes
// by removeStale. measureDiskBandwidth (partition-plan --calibrate) times
// the preferred engine on a temporary file and says a bad directory in one
// line.
//
//===----------------------------------------------------------------------===//

#include "runtime/offload/Bandwidth.h"
#include "runtime/offload/IoEngine.h"
#include "runtime/offload/OffloadFile.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <csignal>
#include <cstring>
#include <fcntl.h>
#include <filesystem>
#include <fstream>
#include <numeric>
#include <optional>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

namespace {

using namespace partition::runtime::offload;
namespace fs = std::filesystem;

class OffloadIo : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    directory = fs::temp_directory_path() /
                ("partition-offload-test-" + std::to_string(::getpid()));
    fs::create_directories(directory);
  }
  void TearDown() override { fs::remove_all(directory); }
  std::unique_ptr<IoEngine> engine(std::size_t chunk = 64 * 1024) {
    IoEngineOptions options;
    options.kind = GetParam();
    options.threads = 3;
    options.queueDepth = 3;
    options.chunkBytes = chunk;
    return makeIoEngine(options);
  }
  fs::path directory;
};

TEST_P(OffloadIo, WritesAndReadsBackInChunks) {
  constexpr std::size_t bytes = 1 << 20; // 16 chunks of 64 KiB
  OffloadFile file(directory.string(), "rank0", 3 * bytes);
  EXPECT_EQ(file.bytes(), 3 * bytes);
  EXPECT_TRUE(fs::exists(file.path()));
  auto io = engine();
  AlignedBuffer a(bytes), b(bytes), back(2 * bytes);
  auto *pa = static_cast<std::uint32_t *>(a.data());
  auto *pb = static_cast<std::uint32_t *>(b.data());
  std::iota(pa, pa + bytes / 4, 0u);
  std::iota(pb, pb + bytes / 4, 7u << 20);
  // Two writes in flight at once, to non-adjacent places.
  IoEngine::Ticket wa = io->submit(file.write(0, a.data(), bytes));
  IoEngine::Ticket wb = io->submit(file.write(2 * bytes, b.data(), bytes));
  io->wait(wb);
  io->wait(wa);
  IoEngine::Ticket ra = io->submit(file.read(2 * bytes, back.data(), bytes));
  IoEngine::Ticket rb = io->submit(
      file.read(0, static_cast<char *>(back.data()) + bytes, bytes));
  io->wait(ra);
  io->wait(rb);
  EXPECT_EQ(std::memcmp(back.data(), b.data(), bytes), 0);
  EXPECT_EQ(std::memcmp(static_cast<char *>(back.data()) + bytes, a.data(),
                        bytes),
            0);
}

TEST_P(OffloadIo, ReadingPastTheEndNamesTheFile) {
  // A file opened by hand, shorter than the read (an offload file is
  // always as long as its state: this is a truncated one).
  fs::path path = directory / "short.bin";
  std::ofstream(path) << std::string(4096, 'x');
  int fd = ::open(path.c_str(), O_RDONLY);
  ASSERT_GE(fd, 0);
  AlignedBuffer buffer(3 * 4096);
  IoRequest request;
  request.kind = IoRequest::Kind::Read;
  request.fd = fd;
  request.path = path.string();
  request.buffer = buffer.data();
  request.bytes = buffer.size();
  auto io = engine(4096);
  IoEngine::Ticket ticket = io->submit(request);
  try {
    io->wait(ticket);
    ADD_FAILURE() << "a read past the end succeeded";
  } catch (const IoError &error) {
    // The thread pool reads the 4 KiB chunks side by side: the chunk at
    // byte 4096 or the one at 8192 may fail first; either is past the end.
    std::string what = error.what(), named = "reading '" + path.string() +
                                             "' at byte ";
    EXPECT_TRUE(what.find(named + "4096") != std::string::npos ||
                what.find(named + "8192") != std::string::npos)
        << what;
    EXPECT_NE(std::string(error.what()).find("ends before"),
              std::string::npos)
        << error.what();
  }
  ::close(fd);
}

TEST_P(OffloadIo, AFullDiskIsAnErrorNamingTheFile) {
  // A file-size limit makes writes past it fail with EFBIG, as a full
  // disk makes them fail with ENOSPC: run in a child, whose limit ends
  // with it.
  fs::path path = directory / "limited.bin";
  pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    std::signal(SIGXFSZ, SIG_IGN);
    rlimit limit{8192, 8192};
    ::setrlimit(RLIMIT_FSIZE, &limit);
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT, 0600);
    AlignedBuffer buffer(4 * 4096);
    IoRequest request;
    request.kind = IoRequest::Kind::Write;
    request.fd = fd;
    request.path = path.string();
    request.buffer = buffer.data();
    request.bytes = buffer.size();
    try {
      auto io = engine(4096);
      io->wait(io->submit(request));
    } catch (const IoError &error) {
      std::string message = error.what();
      bool named = message.find("writing '" + path.string() + "' at byte") !=
                   std::string::npos;
      std::_Exit(named ? 42 : 1);
    }
    std::_Exit(2);
  }
  int status = 0;
  ::waitpid(child, &status, 0);
  ASSERT_TRUE(WIFEXITED(status));
  EXPECT_EQ(WEXITSTATUS(status), 42)
      << "1: the message does not name the file, 2: the write succeeded";
}

TEST_P(OffloadIo, ARequestOutsideTheFileIsRefused) {
  OffloadFile file(directory.string(), "rank1", 4096);
  AlignedBuffer buffer(8192);
  EXPECT_THROW(file.write(0, buffer.data(), 8192), IoError);
  EXPECT_THROW(file.read(4096, buffer.data(), 4096), IoError);
}

INSTANTIATE_TEST_SUITE_P(Engines, OffloadIo,
                         ::testing::ValuesIn(availableIoEngines()),
                         [](const auto &info) { return info.param; });

TEST(OffloadFile, RemovedWhenClosedAndStaleOnesCleaned) {
  fs::path directory = fs::temp_directory_path() /
                       ("partition-offload-stale-" + std::to_string(::getpid()));
  fs::create_directories(directory);
  std::string path;
  {
    OffloadFile file(directory.string(), "rank0", 10000);
    path = file.path();
    EXPECT_EQ(fs::file_size(path), 12288u); // rounded up to 4 KiB
  }
  EXPECT_FALSE(fs::exists(path));
  // A dead process's file: a child that exits at once leaves its pid free.
  pid_t child = ::fork();
  if (child == 0)
    std::_Exit(0);
  ::waitpid(child, nullptr, 0);
  fs::path stale = directory / ("partition-offload-" + std::to_string(child) +
                                "-rank3.bin");
  std::ofstream(stale) << "x";
  OffloadFile alive(directory.string(), "rank0", 4096);
  std::vector<std::string> removed = OffloadFile::removeStale(directory);
  ASSERT_EQ(removed.size(), 1u);
  EXPECT_EQ(removed[0], stale.string());
  EXPECT_TRUE(fs::exists(alive.path()));
  fs::remove_all(directory);
}

TEST(DiskBandwidth, MeasuresThePreferredEngineAndLeavesNoFile) {
  fs::path directory = fs::temp_directory_path() /
                       ("partition-offload-bw-" + std::to_string(::getpid()));
  fs::create_directories(directory);
  std::string error;
  std::optional<DiskBandwidth> disk =
      measureDiskBandwidth(directory.string(), 1 << 20, 2, error);
  ASSERT_TRUE(disk.has_value()) << error;
  EXPECT_GT(disk->read, 0);
  EXPECT_GT(disk->write, 0);
  EXPECT_EQ(disk->engine, preferredIoEngine());
  std::vector<std::string> engines = availableIoEngines();
  EXPECT_NE(std::find(engines.begin(), engines.end(), disk->engine),
            engines.end());
  EXPECT_TRUE(fs::is_empty(directory)); // the file is removed
  fs::remove_all(directory);
  EXPECT_FALSE(measureDiskBandwidth("/nonexistent/offload", 4096, 1, error));
  EXPECT_NE(error.find("is not a directory"), std::string::npos) << error;
  EXPECT_EQ(error.find('\n'), std::string::npos);
}

TEST(OffloadFile, AMissingPathOrTooLittleRoomIsSaidFirst) {
  try {
    OffloadFile file("/nonexistent/offload", "rank0", 4096);
    ADD_FAILURE() << "created a file under a missing directory";
  } catch (const IoError &error) {
    EXPECT_NE(std::string(error.what()).find("is not a directory"),
              std::string::npos);
  }
  // More than any disk here holds: refused before anything is written,
  // with the bytes needed and free.
  try {
    OffloadFile file(fs::temp_directory_path().string(), "huge",
                     std::uint64_t(1) << 60);
    ADD_FAILURE() << "preallocated an exabyte";
  } catch (const IoError &error) {
    std::string message = error.what();
    EXPECT_NE(message.find(std::to_string(std::uint64_t(1) << 60)),
              std::string::npos)
        << message;
  }
}

TEST(IoEngines, UnknownKindNamesTheAvailableOnes) {
  IoEngineOptions options;
  options.kind = "aio";
  try {
    makeIoEngine(options);
    ADD_FAILURE();
  } catch (const std::invalid_argument &error) {
    EXPECT_NE(std::string(error.what()).find("available: threads"),
              std::string::npos);
  }
  options.kind = "threads";
  options.chunkBytes = 1000;
  EXPECT_THROW(makeIoEngine(options), std::invalid_argument);
}

} // namespace
