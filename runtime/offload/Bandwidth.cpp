//===- Bandwidth.cpp - the offload tier's disk, measured ------------------===//

#include "runtime/offload/Bandwidth.h"

#include "runtime/offload/IoEngine.h"
#include "runtime/offload/OffloadFile.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include <unistd.h>

namespace partition::runtime::offload {

std::string preferredIoEngine() {
  std::string kind = "threads";
  for (const std::string &available : availableIoEngines())
    if (available == "uring")
      kind = "uring";
  return kind;
}

std::optional<DiskBandwidth> measureDiskBandwidth(const std::string &directory,
                                                  std::size_t bytes,
                                                  int repeats,
                                                  std::string &error) {
  try {
    bytes = std::size_t(alignedBytes(std::max<std::size_t>(bytes, 1)));
    IoEngineOptions options;
    options.kind = preferredIoEngine();
    std::unique_ptr<IoEngine> io = makeIoEngine(options);
    OffloadFile file(directory, "calibrate", bytes);
    AlignedBuffer buffer(bytes);
    std::memset(buffer.data(), 1, bytes);
    using Clock = std::chrono::steady_clock;
    auto pass = [&](bool write) {
      auto start = Clock::now();
      io->wait(io->submit(write ? file.write(0, buffer.data(), bytes)
                                : file.read(0, buffer.data(), bytes)));
      if (write)
        ::fdatasync(file.fd());
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    auto median = [&](bool write) {
      std::vector<double> times;
      for (int r = 0; r < std::max(1, repeats); ++r)
        times.push_back(pass(write));
      std::nth_element(times.begin(), times.begin() + times.size() / 2,
                       times.end());
      return double(bytes) / times[times.size() / 2];
    };
    DiskBandwidth out;
    // The writes first: a fresh file reads as zeros without touching the
    // disk on some filesystems.
    out.write = median(true);
    out.read = median(false);
    out.engine = io->name();
    out.path = file.path();
    out.direct = file.direct();
    return out;
  } catch (const std::exception &failure) {
    error = failure.what();
    return std::nullopt;
  }
}

std::optional<double> measureComputeBesideDisk(const std::string &directory,
                                               std::size_t bytes,
                                               const std::function<void()> &work,
                                               int repeats, std::string &error) {
  try {
    bytes = std::size_t(alignedBytes(std::max<std::size_t>(bytes, 2 * 4096)));
    std::size_t half = bytes / 2 / 4096 * 4096;
    IoEngineOptions options;
    options.kind = preferredIoEngine();
    std::unique_ptr<IoEngine> io = makeIoEngine(options);
    OffloadFile file(directory, "calibrate", bytes);
    AlignedBuffer out(half), in(half);
    std::memset(out.data(), 1, half);
    using Clock = std::chrono::steady_clock;
    auto since = [](Clock::time_point start) {
      return std::chrono::duration<double>(Clock::now() - start).count();
    };
    // The second half written once, so that its read reaches the disk.
    io->wait(io->submit(file.write(half, out.data(), half)));
    ::fdatasync(file.fd());
    auto median = [](std::vector<double> times) {
      std::nth_element(times.begin(), times.begin() + times.size() / 2,
                       times.end());
      return times[times.size() / 2];
    };
    repeats = std::max(1, repeats);
    work(); // warm-up
    std::vector<double> alone;
    for (int r = 0; r < repeats; ++r) {
      auto start = Clock::now();
      work();
      alone.push_back(since(start));
    }
    double once = std::max(1e-9, median(alone));
    // The transfers alone, to size the work beside them.
    auto start = Clock::now();
    io->wait(io->submit(file.write(0, out.data(), half)));
    io->wait(io->submit(file.read(half, in.data(), half)));
    double transfers = since(start);
    int runs = std::max(1, int(0.5 * transfers / once));
    std::vector<double> beside;
    for (int r = 0; r < repeats; ++r) {
      auto a = io->submit(file.write(0, out.data(), half));
      auto b = io->submit(file.read(half, in.data(), half));
      auto computeStart = Clock::now();
      for (int k = 0; k < runs; ++k)
        work();
      beside.push_back(since(computeStart) / runs);
      io->wait(a);
      io->wait(b);
    }
    return std::max(0.0, median(beside) / once - 1);
  } catch (const std::exception &failure) {
    error = failure.what();
    return std::nullopt;
  }
}

} // namespace partition::runtime::offload
