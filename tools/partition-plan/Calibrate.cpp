//===- Calibrate.cpp - measure this machine into a cluster profile --------===//

#include "tools/partition-plan/Calibrate.h"

#include "planner/Cluster.h"
#include "runtime/backend/cpu/Bf16Gemm.h"
#include "runtime/offload/Bandwidth.h"

#include <cblas.h>
#include <mpi.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <optional>
#include <thread>
#include <tuple>
#include <vector>

#include <unistd.h>

namespace partition::planner {
namespace {

double now() {
  return std::chrono::duration<double>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

/// The median of `repeats` runs of `work` (after one warm-up run): what a
/// training step meets, on a quiet machine and on a shared one alike (the
/// minimum would describe a machine the steps never see).
template <typename F> double medianTime(int repeats, F &&work) {
  work();
  std::vector<double> times;
  for (int i = 0; i < repeats; ++i) {
    double start = now();
    work();
    times.push_back(now() - start);
  }
  std::nth_element(times.begin(), times.begin() + times.size() / 2,
                   times.end());
  return times[times.size() / 2];
}

double sgemmRate(int M, int N, int K) {
  std::vector<float> a(size_t(M) * K, 0.5f), b(size_t(K) * N, 0.25f),
      c(size_t(M) * N, 0.0f);
  double t = medianTime(5, [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, M, N, K, 1.0f,
                a.data(), K, b.data(), K, 0.0f, c.data(), N);
  });
  return 2.0 * M * N * K / t;
}

/// The best rate of the runtime's bf16 GEMMs (Bf16Gemm.h) on the peak's
/// shapes, where this process runs them with oneDNN; else 0 (they widen to
/// fp32 sgemm, whose peak is theirs).
double bf16GemmPeak() {
  namespace cpu = partition::runtime::cpu;
  if (cpu::bf16GemmChoice().engine != cpu::Bf16GemmEngine::OneDnn)
    return 0;
  cpu::Bf16Gemms gemms;
  double peak = 0;
  for (auto [M, N, K] : {std::tuple{1024, 1024, 1024},
                         std::tuple{2048, 2048, 2048},
                         std::tuple{4096, 768, 768},
                         std::tuple{4096, 3072, 768}}) {
    // 0x3f00 is 0.5 in bf16.
    std::vector<std::uint16_t> a(size_t(M) * K, 0x3f00),
        b(size_t(K) * N, 0x3f00), c(size_t(M) * N);
    std::function<void()> gemm =
        gemms.compile(cpu::LinearProduct::Forward, a.data(), b.data(),
                      nullptr, c.data(), M, K, N);
    if (!gemm)
      continue;
    gemm(); // the first call allocates the scratchpad
    peak = std::max(peak, 2.0 * M * N * K / medianTime(5, gemm));
  }
  return peak;
}

double triadBandwidth() {
  size_t n = size_t(32) << 20; // 3 x 128 MiB, beyond any cache
  std::vector<float> a(n, 1.0f), b(n, 2.0f), c(n, 0.0f);
  double t = medianTime(5, [&] {
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < n; ++i)
      c[i] = a[i] + 0.5f * b[i];
  });
  return 3.0 * sizeof(float) * double(n) / t;
}

/// The host tier's "link" on CPU ranks: a rank's memcpy of 256 MiB (each
/// byte read and written once; one direction, as the link's figure is).
double memcpyBandwidth() {
  size_t n = size_t(256) << 20;
  std::vector<char> from(n, 1), to(n, 0);
  double t = medianTime(5, [&] { std::memcpy(to.data(), from.data(), n); });
  return double(n) / t;
}

double parallelRegionCost() {
  volatile int sink = 0;
  double t = medianTime(5, [&] {
    for (int i = 0; i < 1000; ++i) {
#pragma omp parallel
      {
        if (omp_get_thread_num() == 0)
          sink = sink + 1;
      }
    }
  });
  return t / 1000;
}

/// The sgemm peak (returned) and `c`'s packing rate of CPU GEMMs
/// (gemm_pack_bandwidth, gemm_pack_cached_bytes).
double calibrateGemms(Cluster &c) {
  // Large square and transformer-shaped GEMMs; the best is the peak.
  double peak = 0;
  std::tuple<int, int, int> best;
  for (auto [M, N, K] : {std::tuple{1024, 1024, 1024},
                         std::tuple{2048, 2048, 2048},
                         std::tuple{4096, 768, 768},
                         std::tuple{4096, 3072, 768}})
    if (double rate = sgemmRate(M, N, K); rate > peak) {
      peak = rate;
      best = {M, N, K};
    }
  // The packing of the operands: a thin GEMM (the LM head of a 64-token
  // micro-batch against a 32768-row weight, 100 MB) spends most of its
  // time there. Its time and the best one's, each F / P + X / W (F the
  // FLOPs, X the operands' bytes), give the packing rate W. The peak stays
  // the best GEMM's measured rate, packing included: the kernel's own P
  // (about 8% higher here) priced the cache-resident GEMMs of small models
  // too fast (bench/planner/cpu_check.py's dp2 x tp2 at -25.5%).
  {
    auto [M, N, K] = best;
    const int thinM = 64, thinN = 32768, thinK = 768;
    double flopsBig = 2.0 * M * N * K, flopsThin = 2.0 * thinM * thinN * thinK;
    double bytesBig = 4.0 * (double(M) * K + double(K) * N);
    double bytesThin = 4.0 * (double(thinM) * thinK + double(thinK) * thinN);
    double timeBig = flopsBig / peak;
    double timeThin = flopsThin / sgemmRate(thinM, thinN, thinK);
    double perByte = (timeThin - flopsThin / flopsBig * timeBig) /
                     (bytesThin - flopsThin / flopsBig * bytesBig);
    double perFlop = (timeBig - bytesBig * perByte) / flopsBig;
    if (perByte > 0 && perFlop > 0) {
      c.gemmPackBandwidth = 1 / perByte;
      long cache = sysconf(_SC_LEVEL2_CACHE_SIZE);
      c.gemmPackCachedBytes = cache > 0 ? double(cache) : 1 << 20;
    }
  }
  return peak;
}

} // namespace

int runCollectivesWorker() {
  MPI_Init(nullptr, nullptr);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  auto time = [&](size_t bytes, int repeats) {
    std::vector<float> send(std::max<size_t>(1, bytes / 4), 1.0f),
        recv(send.size());
    // The median over repeats of the slowest rank's time.
    std::vector<double> times;
    for (int i = 0; i < repeats; ++i) {
      MPI_Barrier(MPI_COMM_WORLD);
      double start = MPI_Wtime();
      MPI_Allreduce(send.data(), recv.data(), int(send.size()), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
      double local = MPI_Wtime() - start, slowest = 0;
      MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX,
                    MPI_COMM_WORLD);
      times.push_back(slowest);
    }
    std::nth_element(times.begin(), times.begin() + times.size() / 2,
                     times.end());
    return times[times.size() / 2];
  };
  double small = time(8, 200);
  size_t large = size_t(16) << 20;
  double big = time(large, 10);
  // The latency a collective costs inside a training step, where the ranks
  // come to it from their own compute rather than from a barrier: each
  // rank computes the same ~0.3 ms, then all-reduces 8 bytes; the slowest
  // rank's wait counts (the step waits for it). On a quiet machine this is
  // the back-to-back latency; on one shared with other processes a rank
  // preempted during its compute delays the other, and a waiting rank
  // may lose its core: what each of a step's many small collectives then
  // costs. The mean, not the median: a step pays every one of them.
  double inStep = 0;
  const int inStepRepeats = 200;
  volatile float sink = 1.0f;
  for (int i = 0; i < inStepRepeats; ++i) {
    MPI_Barrier(MPI_COMM_WORLD);
    float x = sink;
    for (int j = 0; j < 100000; ++j)
      x = x * 0.999999f + 1e-6f;
    sink = x;
    float one = 1.0f, sum = 0.0f;
    double start = MPI_Wtime();
    MPI_Allreduce(&one, &sum, 1, MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
    double local = MPI_Wtime() - start, slowest = 0;
    MPI_Allreduce(&local, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    inStep += slowest / inStepRepeats;
  }
  if (rank == 0) {
    // Ring: 2(n-1) steps of latency plus bytes/n each.
    double n = size;
    double latency = std::max(small, inStep) / (2 * (n - 1));
    double bandwidth =
        2 * (n - 1) / n * double(large) / std::max(1e-9, big - small);
    std::printf("{\"latency\": %.9g, \"bandwidth\": %.9g, "
                "\"back_to_back_latency\": %.9g}\n",
                latency, bandwidth, small / (2 * (n - 1)));
  }
  MPI_Finalize();
  return 0;
}

int runCalibration(const char *self, int ranks, const std::string &output,
                   const std::string &diskDirectory, std::size_t diskBytes) {
  Cluster c = *getProfile("cpu-local");
  int threads = omp_get_max_threads();
  std::fprintf(stderr, "calibrating with %d threads...\n", threads);
  double peak = calibrateGemms(c);
  c.peakFlopsFp32 = peak;
  // bf16 kernels load bf16 and compute in fp32 (the same peak), except the
  // GEMMs where oneDNN runs them (AMX).
  const double bf16Peak = bf16GemmPeak();
  c.peakFlopsBf16 = std::max(peak, bf16Peak);
  c.gemmEfficiency = 1.0;
  c.computeUnits = threads;
  c.memoryBandwidth = triadBandwidth();
  c.memoryEfficiency = 1.0;
  c.kernelLatency = parallelRegionCost();
  // Physical memory (all ranks of the node share it: shared_node).
  long pages = sysconf(_SC_PHYS_PAGES), pageSize = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && pageSize > 0)
    c.memoryBytes = double(pages) * double(pageSize);
  char packing[96] = "no packing rate: the thin sgemm ran at the peak";
  if (c.gemmPackBandwidth > 0)
    std::snprintf(packing, sizeof packing, "its operands packed at %.2f GB/s",
                  c.gemmPackBandwidth / 1e9);
  std::fprintf(stderr,
               "sgemm %.1f GFLOP/s (%s), triad %.2f GB/s, parallel region "
               "%.2f us\n",
               peak / 1e9, packing, c.memoryBandwidth / 1e9,
               c.kernelLatency * 1e6);
  if (bf16Peak > 0)
    std::fprintf(stderr, "bf16 GEMMs %.1f GFLOP/s (%s)\n", bf16Peak / 1e9,
                 partition::runtime::cpu::bf16GemmChoice().describe.c_str());

  // Offload: the host tier is a memcpy of the rank's; the nvme tier the
  // disk under `diskDirectory`, through the runtime's own I/O engine.
  c.hostLinkBandwidth = memcpyBandwidth();
  std::string diskError;
  std::optional<runtime::offload::DiskBandwidth> disk =
      runtime::offload::measureDiskBandwidth(diskDirectory, diskBytes,
                                             /*repeats=*/3, diskError);
  if (!disk) {
    std::fprintf(stderr,
                 "partition-plan: error: cannot measure the disk "
                 "in '%s' for the offload's nvme tier: %s (give "
                 "another directory with --calibrate-dir)\n",
                 diskDirectory.c_str(), diskError.c_str());
    return 1;
  }
  c.diskReadBandwidth = disk->read;
  c.diskWriteBandwidth = disk->write;
  // What the kernels lose while the disk moves the offload's bytes: an
  // sgemm and a triad on all threads, as the steps' kernels run.
  std::vector<float> a(size_t(1024) * 1024, 0.5f), b(a.size(), 0.25f),
      product(a.size(), 0.0f);
  std::vector<float> x(size_t(8) << 20, 1.0f), y(x.size(), 2.0f),
      z(x.size(), 0.0f);
  auto kernels = [&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, 1024, 1024, 1024,
                1.0f, a.data(), 1024, b.data(), 1024, 0.0f, product.data(),
                1024);
#pragma omp parallel for schedule(static)
    for (size_t i = 0; i < x.size(); ++i)
      z[i] = x[i] + 0.5f * y[i];
  };
  std::optional<double> slowdown = runtime::offload::measureComputeBesideDisk(
      diskDirectory, diskBytes, kernels, /*repeats=*/5, diskError);
  if (!slowdown) {
    std::fprintf(stderr,
                 "partition-plan: error: cannot measure the compute beside "
                 "the disk in '%s': %s (give another directory with "
                 "--calibrate-dir)\n",
                 diskDirectory.c_str(), diskError.c_str());
    return 1;
  }
  c.diskComputeSlowdown = *slowdown;
  std::fprintf(stderr,
               "memcpy %.2f GB/s; disk in '%s' (%zu MiB, %s, %s engine): "
               "write %.2f GB/s, read %.2f GB/s; kernels beside its "
               "transfers %.0f%% slower\n",
               c.hostLinkBandwidth / 1e9, diskDirectory.c_str(),
               diskBytes >> 20,
               disk->direct ? "O_DIRECT" : "page cache: no O_DIRECT there",
               disk->engine.c_str(), c.diskWriteBandwidth / 1e9,
               c.diskReadBandwidth / 1e9, 100 * c.diskComputeSlowdown);

  // Collectives under mpirun.
  std::string command = std::string("mpirun -n ") + std::to_string(ranks) +
                        " --oversubscribe " + self +
                        " --calibrate-collectives-worker";
  if (const char *mpirun = std::getenv("PARTITION_MPIRUN"))
    command = std::string(mpirun) + command.substr(6);
  FILE *pipe = popen(command.c_str(), "r");
  std::string line;
  if (pipe) {
    char buffer[512];
    while (std::fgets(buffer, sizeof(buffer), pipe))
      line += buffer;
    if (pclose(pipe) != 0)
      line.clear();
  }
  nlohmann::json measured =
      nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (measured.is_discarded() || !measured.is_object() ||
      !measured["latency"].is_number() || !measured["bandwidth"].is_number()) {
    std::fprintf(stderr, "partition-plan: error: cannot time collectives "
                         "with '%s'; is MPI installed?\n",
                 command.c_str());
    return 1;
  }
  c.intraNodeLatency = measured["latency"].get<double>();
  c.intraNodeBandwidth = measured["bandwidth"].get<double>();
  std::fprintf(stderr, "MPI_Allreduce on %d ranks: latency %.1f us "
                       "between compute (%.1f us back to back), "
                       "bandwidth %.2f GB/s\n",
               ranks, c.intraNodeLatency * 1e6,
               measured.value("back_to_back_latency", 0.0) * 1e6,
               c.intraNodeBandwidth / 1e9);

  std::string json = clusterToJson(c);
  if (output.empty() || output == "-") {
    std::cout << json;
    return 0;
  }
  std::ofstream out(output);
  if (!(out << json)) {
    std::fprintf(stderr, "partition-plan: error: cannot write '%s'\n",
                 output.c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s\n", output.c_str());
  return 0;
}

} // namespace partition::planner
