//===- partition-bench-io.cpp - the offload's I/O engines, side by side ---===//
//
//   partition-bench-io [--dir DIR] [--mib N] [--chunk-kib K] [--threads T]
//                      [--queue-depth D] [--repeats R]
//
// Writes and reads back N MiB (default 256) of an offload file under DIR
// (default: the current directory; give a path on the disk the offload
// will use) with each I/O engine this build has, and with one plain
// synchronous pwrite / pread loop as the peer, R times each (best kept):
// GB/s and the ratio to the peer. Then the overlap the offload relies on:
// an AdamW-like pass over 64 MiB of state timed alone and while a write
// and a read of the same size are in flight, per engine: how much the
// compute slows down, and what part of the I/O hides behind it.
// O_DIRECT is used where the filesystem allows (the first line says);
// without it the page cache answers the reads and the figures mean little.
//
//===----------------------------------------------------------------------===//

#include "runtime/offload/OffloadFile.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <unistd.h>
#include <vector>

using namespace partition::runtime::offload;
using Clock = std::chrono::steady_clock;

namespace {

double seconds(Clock::time_point since) {
  return std::chrono::duration<double>(Clock::now() - since).count();
}

/// One synchronous pass over the file in chunks: the peer.
double plainPass(const OffloadFile &file, void *buffer, std::size_t bytes,
                 std::size_t chunk, bool write) {
  auto start = Clock::now();
  for (std::size_t at = 0; at < bytes; at += chunk) {
    std::size_t n = std::min(chunk, bytes - at);
    char *p = static_cast<char *>(buffer) + at;
    ssize_t moved = write ? ::pwrite(file.fd(), p, n, off_t(at))
                          : ::pread(file.fd(), p, n, off_t(at));
    if (moved != ssize_t(n)) {
      std::perror("partition-bench-io: pread/pwrite");
      std::exit(1);
    }
  }
  if (write)
    ::fdatasync(file.fd());
  return seconds(start);
}

double enginePass(IoEngine &io, const OffloadFile &file, void *buffer,
                  std::size_t bytes, bool write) {
  auto start = Clock::now();
  io.wait(io.submit(write ? file.write(0, buffer, bytes)
                          : file.read(0, buffer, bytes)));
  if (write)
    ::fdatasync(file.fd());
  return seconds(start);
}

/// AdamW's arithmetic over n parameters (p, g, m, v): memory-bound, as the
/// offloaded update is.
void adamw(float *p, const float *g, float *m, float *v, std::size_t n) {
  for (std::size_t i = 0; i < n; ++i) {
    m[i] = 0.9f * m[i] + 0.1f * g[i];
    v[i] = 0.999f * v[i] + 0.001f * g[i] * g[i];
    p[i] -= 1e-3f * (m[i] / (std::sqrt(v[i]) + 1e-8f) + 0.01f * p[i]);
  }
}

} // namespace

int main(int argc, char **argv) {
  std::string dir = ".";
  std::size_t mib = 256, chunkKib = 4096;
  unsigned threads = 4, queueDepth = 64;
  int repeats = 3;
  for (int i = 1; i + 1 < argc; i += 2) {
    std::string flag = argv[i];
    if (flag == "--dir")
      dir = argv[i + 1];
    else if (flag == "--mib")
      mib = std::stoul(argv[i + 1]);
    else if (flag == "--chunk-kib")
      chunkKib = std::stoul(argv[i + 1]);
    else if (flag == "--threads")
      threads = unsigned(std::stoul(argv[i + 1]));
    else if (flag == "--queue-depth")
      queueDepth = unsigned(std::stoul(argv[i + 1]));
    else if (flag == "--repeats")
      repeats = std::stoi(argv[i + 1]);
    else {
      std::fprintf(stderr, "partition-bench-io: unknown flag %s\n",
                   flag.c_str());
      return 2;
    }
  }
  const std::size_t bytes = mib << 20, chunk = chunkKib << 10;
  try {
    OffloadFile file(dir, "bench", bytes);
    AlignedBuffer buffer(bytes);
    std::memset(buffer.data(), 1, bytes);
    std::printf("partition-bench-io: %zu MiB in %s (%s), chunks of %zu KiB, "
                "%u threads, queue depth %u, best of %d\n",
                mib, file.path().c_str(),
                file.direct() ? "O_DIRECT" : "page cache: no O_DIRECT here",
                chunkKib, threads, queueDepth, repeats);
    auto best = [&](auto pass) {
      double t = 1e300;
      for (int r = 0; r < repeats; ++r)
        t = std::min(t, pass());
      return t;
    };
    double gb = double(bytes) / 1e9;
    double plainWrite = best([&] {
      return plainPass(file, buffer.data(), bytes, chunk, true);
    });
    double plainRead = best([&] {
      return plainPass(file, buffer.data(), bytes, chunk, false);
    });
    std::printf("%-10s write %6.2f GB/s  read %6.2f GB/s\n", "pwrite/pread",
                gb / plainWrite, gb / plainRead);

    // The compute the I/O should hide behind.
    const std::size_t n = (64u << 20) / sizeof(float);
    std::vector<float> p(n, 1.0f), g(n, 0.5f), m(n), v(n);
    double computeAlone = best([&] {
      auto start = Clock::now();
      adamw(p.data(), g.data(), m.data(), v.data(), n);
      return seconds(start);
    });
    AlignedBuffer second(bytes / 2);
    for (const std::string &kind : availableIoEngines()) {
      IoEngineOptions options;
      options.kind = kind;
      options.threads = threads;
      options.queueDepth = queueDepth;
      options.chunkBytes = chunk;
      std::unique_ptr<IoEngine> io = makeIoEngine(options);
      double w = best([&] {
        return enginePass(*io, file, buffer.data(), bytes, true);
      });
      double r = best([&] {
        return enginePass(*io, file, buffer.data(), bytes, false);
      });
      std::printf("%-10s write %6.2f GB/s  read %6.2f GB/s  (%.2fx, %.2fx "
                  "the peer)\n",
                  kind.c_str(), gb / w, gb / r, plainWrite / w, plainRead / r);
      // A write of one half and a read of the other in flight while the
      // update runs; then the wait for what is left.
      double io2 = best([&] {
        auto start = Clock::now();
        auto a = io->submit(file.write(0, buffer.data(), bytes / 2));
        auto b = io->submit(file.read(bytes / 2, second.data(), bytes / 2));
        io->wait(a);
        io->wait(b);
        return seconds(start);
      });
      double computeDuring = 0, total = 1e300;
      for (int rep = 0; rep < repeats; ++rep) {
        auto start = Clock::now();
        auto a = io->submit(file.write(0, buffer.data(), bytes / 2));
        auto b = io->submit(file.read(bytes / 2, second.data(), bytes / 2));
        auto computeStart = Clock::now();
        adamw(p.data(), g.data(), m.data(), v.data(), n);
        double c = seconds(computeStart);
        io->wait(a);
        io->wait(b);
        double t = seconds(start);
        if (t < total)
          total = t, computeDuring = c;
      }
      double serial = computeAlone + io2;
      // Noise can make the pair faster than the I/O alone: capped at all.
      double hidden = std::min(computeAlone, io2) > 0
                          ? (serial - total) / std::min(computeAlone, io2)
                          : 0;
      std::printf("%-10s overlap: update %.1f ms alone, %.1f ms beside the "
                  "I/O (%.1f ms alone); together %.1f ms of %.1f serial: "
                  "%.0f%% of the shorter hidden\n",
                  kind.c_str(), 1e3 * computeAlone, 1e3 * computeDuring,
                  1e3 * io2, 1e3 * total, 1e3 * serial,
                  100 * std::clamp(hidden, 0.0, 1.0));
    }
  } catch (const std::exception &error) {
    std::fprintf(stderr, "partition-bench-io: error: %s\n", error.what());
    return 1;
  }
  return 0;
}
