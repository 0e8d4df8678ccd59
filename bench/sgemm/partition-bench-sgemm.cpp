//===- partition-bench-sgemm.cpp - OpenBLAS sgemm GFLOP/s -----------------===//
//
// The reference for the CPU step benchmark (bench/cpu_step/run.py): how fast
// OpenBLAS's own cblas_sgemm is on this machine, with a given number of
// threads,
//   - on square matrices (its peak), and
//   - on the GEMMs of one GPT-2 training step of `tokens` tokens, with the
//     transposes the CPU runtime uses (runtime/backend/cpu/Linear.cpp):
//       forward      y [M,N]  = x [M,K] W^T      (NoTrans, Trans)
//       grad input   dx[M,K]  = dy[M,N] W        (NoTrans, NoTrans)
//       grad weight  dW[N,K]  = dy^T x           (Trans, NoTrans)
//     and their FLOP-weighted mix: the GEMM time of one step if every GEMM
//     ran at OpenBLAS's best speed for its shape.
// Every case reports the best (and the median) of --repeats samples; a
// sample repeats the call for at least --min-time seconds. Like partition-run
// it first makes sure OpenBLAS runs the best kernels this CPU has
// (runtime/backend/cpu/BlasCore.h), so the peak is the machine's, and says
// which kernels measured it (and whether OPENBLAS_CORETYPE chose them).
// --bf16 also times, per case, the ways to multiply bf16 operands: the CPU
// backend's two (widen both to fp32 copies, then cblas_sgemm; or oneDNN's
// bf16 matmul, runtime/backend/cpu/Bf16Gemm.h, which partition-run uses where
// it may run on AMX: timed wherever the build has oneDNN) and OpenBLAS's
// cblas_sbgemm (bf16 in, fp32 accumulation and out; AVX512-BF16 kernels on
// Cooperlake), and checks that sbgemm agrees. cblas.h declares cblas_sbgemm
// whether or not the library was built with it (Debian's 0.3.21 was not:
// BUILD_BFLOAT16 off), so it is looked up at run time and reported missing.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Bf16Gemm.h"
#include "runtime/backend/cpu/BlasCore.h"
#include "runtime/backend/cpu/Kernels.h"

#include <cblas.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <ctime>
#include <functional>
#include <memory>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

namespace {

struct Options {
  int threads = 2;
  int repeats = 5;
  double minTime = 0.05;
  std::vector<int> square = {512, 1024, 2048};
  bool model = true;
  long tokens = 256, hidden = 768, ffn = 3072, vocab = 50257, layers = 12;
  std::string json;
  bool bf16 = false;
};

struct Case {
  std::string group; // "square" or "model"
  std::string name;
  bool transA, transB;
  int m, n, k;
  int perStep; // calls per training step ("model" cases)
  double best = 0, median = 0; // seconds per call
  // The least CPU time of this process per call over the samples (all its
  // threads): on a machine shared with other work, GFLOP per CPU-second
  // compares kernels where wall time cannot (with 1 thread: no spinning).
  double cpuBest = 0;
  // --bf16: widen + sgemm, and sbgemm (seconds per call, best); the largest
  // difference between their results, relative to the largest |result|.
  double widenBest = 0, sbgemmBest = 0, bf16Difference = 0, oneDnnBest = 0;
  double flops() const { return 2.0 * double(m) * double(n) * double(k); }
};

[[noreturn]] void usage(const char *message) {
  std::fprintf(stderr,
               "partition-bench-sgemm: %s\n"
               "usage: partition-bench-sgemm [--threads N] [--repeats N] "
               "[--min-time S]\n"
               "         [--square 512,1024,2048 | --square none] [--no-model]\n"
               "         [--tokens 256 --hidden 768 --ffn 3072 --vocab 50257 "
               "--layers 12]\n"
               "         [--bf16] [--json FILE]\n",
               message);
  std::exit(2);
}

Options parse(int argc, char **argv) {
  Options options;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc)
        usage((arg + " needs a value").c_str());
      return argv[++i];
    };
    auto number = [&]() {
      std::string text = value();
      char *end = nullptr;
      long v = std::strtol(text.c_str(), &end, 10);
      if (!end || *end || v <= 0)
        usage((arg + ": not a positive integer: " + text).c_str());
      return v;
    };
    if (arg == "--threads")
      options.threads = int(number());
    else if (arg == "--repeats")
      options.repeats = int(number());
    else if (arg == "--min-time")
      options.minTime = std::atof(value().c_str());
    else if (arg == "--square") {
      options.square.clear();
      std::string list = value();
      if (list != "none") {
        std::stringstream stream(list);
        std::string item;
        while (std::getline(stream, item, ','))
          options.square.push_back(std::atoi(item.c_str()));
      }
    } else if (arg == "--no-model")
      options.model = false;
    else if (arg == "--tokens")
      options.tokens = number();
    else if (arg == "--hidden")
      options.hidden = number();
    else if (arg == "--ffn")
      options.ffn = number();
    else if (arg == "--vocab")
      options.vocab = number();
    else if (arg == "--layers")
      options.layers = number();
    else if (arg == "--json")
      options.json = value();
    else if (arg == "--bf16")
      options.bf16 = true;
    else if (arg == "--help" || arg == "-h")
      usage("OpenBLAS cblas_sgemm GFLOP/s");
    else
      usage(("unknown argument " + arg).c_str());
  }
  return options;
}

std::vector<Case> cases(const Options &o) {
  std::vector<Case> all;
  for (int s : o.square)
    all.push_back({"square", "NN " + std::to_string(s), false, false, s, s, s,
                   0});
  if (!o.model)
    return all;
  // One linear layer [out, in], `count` times per step: its forward, input
  // gradient and weight gradient GEMMs, named M x N x K of the C result.
  auto linear = [&](const std::string &what, long in, long out, int count) {
    int t = int(o.tokens), k = int(in), n = int(out);
    auto name = [](const char *kind, const std::string &what, int m, int n,
                   int k) {
      return std::string(kind) + " " + what + " " + std::to_string(m) + "x" +
             std::to_string(n) + "x" + std::to_string(k);
    };
    all.push_back({"model", name("fwd NT", what, t, n, k), false, true, t, n,
                   k, count});
    all.push_back({"model", name("dx  NN", what, t, k, n), false, false, t, k,
                   n, count});
    all.push_back({"model", name("dW  TN", what, n, k, t), true, false, n, k,
                   t, count});
  };
  int layers = int(o.layers);
  linear("qkv", o.hidden, 3 * o.hidden, layers);
  linear("attn.proj", o.hidden, o.hidden, layers);
  linear("fc", o.hidden, o.ffn, layers);
  linear("fc.proj", o.ffn, o.hidden, layers);
  linear("lm_head", o.hidden, o.vocab, 1);
  return all;
}

using Clock = std::chrono::steady_clock;

using SbgemmFunction = void (*)(CBLAS_ORDER, CBLAS_TRANSPOSE, CBLAS_TRANSPOSE,
                                blasint, blasint, blasint, float,
                                const bfloat16 *, blasint, const bfloat16 *,
                                blasint, float, float *, blasint);

/// OpenBLAS's cblas_sbgemm where the library has it, else null.
SbgemmFunction findSbgemm() {
  return reinterpret_cast<SbgemmFunction>(
      dlsym(RTLD_DEFAULT, "cblas_sbgemm"));
}

double processCpuSeconds() {
  timespec t{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
  return double(t.tv_sec) + 1e-9 * double(t.tv_nsec);
}

/// {best, median} seconds per call of `call` over o.repeats samples; the
/// least process CPU seconds per call in *cpuBest when given.
template <typename F>
std::pair<double, double> timeCalls(const Options &o, F &&call,
                                    double *cpuBest = nullptr) {
  call(); // Warm-up: pages, OpenBLAS's buffers and threads.
  std::vector<double> samples, cpuSamples;
  for (int r = 0; r < o.repeats; ++r) {
    int calls = 0;
    Clock::time_point start = Clock::now();
    double cpuStart = processCpuSeconds();
    double elapsed = 0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < o.minTime);
    samples.push_back(elapsed / calls);
    cpuSamples.push_back((processCpuSeconds() - cpuStart) / calls);
  }
  std::sort(samples.begin(), samples.end());
  if (cpuBest)
    *cpuBest = *std::min_element(cpuSamples.begin(), cpuSamples.end());
  return {samples.front(), samples[samples.size() / 2]};
}

/// oneDNN's GEMMs (one Bf16Gemms for the run), or null in a build without
/// oneDNN.
partition::runtime::cpu::Bf16Gemms *oneDnnGemms() {
  namespace cpu = partition::runtime::cpu;
  static std::unique_ptr<cpu::Bf16Gemms> gemms = [] {
    try {
      return std::make_unique<cpu::Bf16Gemms>();
    } catch (const std::runtime_error &) {
      return std::unique_ptr<cpu::Bf16Gemms>();
    }
  }();
  return gemms.get();
}

/// Best seconds of the case as the CPU backend's oneDNN bf16 GEMM: the
/// linear layer's product with the case's layout (NT forward, NN input
/// gradient, TN weight gradient); 0 without oneDNN or a bf16 matmul here.
double timeOneDnn(const Case &c, const Options &o,
                  const std::vector<uint16_t> &a16,
                  const std::vector<uint16_t> &b16) {
  namespace cpu = partition::runtime::cpu;
  cpu::Bf16Gemms *gemms = oneDnnGemms();
  if (!gemms || (c.transA && c.transB))
    return 0;
  std::vector<uint16_t> result(size_t(c.m) * c.n);
  std::function<void()> call;
  if (!c.transA && c.transB) // x [m, k] W[n, k]^T
    call = gemms->compile(cpu::LinearProduct::Forward, a16.data(), b16.data(),
                          nullptr, result.data(), c.m, c.k, c.n);
  else if (!c.transA) // dy [m, k] W [k, n]
    call = gemms->compile(cpu::LinearProduct::GradInput, a16.data(),
                          b16.data(), nullptr, result.data(), c.m, c.n, c.k);
  else // dy [k, m]^T x [k, n]
    call = gemms->compile(cpu::LinearProduct::GradWeight, a16.data(),
                          b16.data(), nullptr, result.data(), c.k, c.n, c.m);
  return call ? timeCalls(o, call).first : 0;
}

void measure(Case &c, const Options &o) {
  // Row-major operands as the runtime passes them.
  int rowsA = c.transA ? c.k : c.m, colsA = c.transA ? c.m : c.k;
  int rowsB = c.transB ? c.n : c.k, colsB = c.transB ? c.k : c.n;
  std::vector<float> a(size_t(rowsA) * colsA), b(size_t(rowsB) * colsB),
      out(size_t(c.m) * c.n);
  std::mt19937 rng(42);
  std::uniform_real_distribution<float> uniform(-1.0f, 1.0f);
  for (float &x : a)
    x = uniform(rng);
  for (float &x : b)
    x = uniform(rng);
  auto sgemm = [&] {
    cblas_sgemm(CblasRowMajor, c.transA ? CblasTrans : CblasNoTrans,
                c.transB ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, 1.0f,
                a.data(), colsA, b.data(), colsB, 0.0f, out.data(), c.n);
  };
  std::tie(c.best, c.median) = timeCalls(o, sgemm, &c.cpuBest);
  if (!o.bf16)
    return;
  namespace cpu = partition::runtime::cpu;
  std::vector<uint16_t> a16(a.size()), b16(b.size());
  cpu::roundToBFloat16(a.data(), a16.data(), cpu::Index(a.size()));
  cpu::roundToBFloat16(b.data(), b16.data(), cpu::Index(b.size()));
  // The CPU backend's way: fp32 copies of the bf16 operands, then sgemm.
  auto widened = [&] {
    cpu::widenBFloat16(a16.data(), a.data(), cpu::Index(a.size()));
    cpu::widenBFloat16(b16.data(), b.data(), cpu::Index(b.size()));
    sgemm();
  };
  c.widenBest = timeCalls(o, widened).first;
  c.oneDnnBest = timeOneDnn(c, o, a16, b16);
  static const SbgemmFunction sbgemmFunction = findSbgemm();
  if (!sbgemmFunction)
    return;
  std::vector<float> sbOut(out.size());
  auto sbgemm = [&] {
    sbgemmFunction(CblasRowMajor, c.transA ? CblasTrans : CblasNoTrans,
                 c.transB ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, 1.0f,
                 a16.data(), colsA, b16.data(), colsB, 0.0f, sbOut.data(),
                 c.n);
  };
  c.sbgemmBest = timeCalls(o, sbgemm).first;
  widened(); // `out` from the same bf16 operands
  double largest = 0, difference = 0;
  for (size_t i = 0; i < out.size(); ++i) {
    largest = std::max(largest, double(std::fabs(out[i])));
    difference = std::max(difference, double(std::fabs(out[i] - sbOut[i])));
  }
  c.bf16Difference = largest > 0 ? difference / largest : difference;
}

} // namespace

int main(int argc, char **argv) {
  namespace cpu = partition::runtime::cpu;
  cpu::ensureBestBlasCore(argv);
  const cpu::BlasCoreReport &blas = cpu::blasCoreReport();
  Options o = parse(argc, argv);
  openblas_set_num_threads(o.threads);
  std::vector<Case> all = cases(o);
  std::printf("OpenBLAS %s, core %s, %d threads; best of %d samples of >= "
              "%.3f s\n%s; CPU: %s\n",
              openblas_get_config(), openblas_get_corename(),
              openblas_get_num_threads(), o.repeats, o.minTime,
              blas.describe().c_str(), blas.features.c_str());
  std::printf("%-34s %6s %10s %10s %10s %10s", "case (M x N x K)", "calls",
              "ms best", "GFLOP/s", "median", "GF/cpu-s");
  if (o.bf16)
    std::printf(" %12s %10s %10s %8s %9s", "widen+sgemm", "oneDNN", "sbgemm",
                "ratio", "max diff");
  std::printf("\n");
  double widenStep = 0, sbgemmStep = 0, oneDnnStep = 0;
  double peak = 0, cpuPeak = 0, stepSeconds = 0, stepFlops = 0;
  for (Case &c : all) {
    measure(c, o);
    double gflops = c.flops() / c.best / 1e9;
    std::printf("%-34s %6d %10.3f %10.1f %10.1f %10.1f",
                (c.group + " " + c.name).c_str(), c.perStep, 1e3 * c.best,
                gflops, c.flops() / c.median / 1e9,
                c.flops() / c.cpuBest / 1e9);
    // ms of the bf16 ways; widen+sgemm time / sbgemm time.
    if (o.bf16) {
      std::printf(" %12.3f", 1e3 * c.widenBest);
      if (c.oneDnnBest > 0)
        std::printf(" %10.3f", 1e3 * c.oneDnnBest);
      else
        std::printf(" %10s", "-");
      if (c.sbgemmBest > 0)
        std::printf(" %10.3f %7.2fx %9.1e", 1e3 * c.sbgemmBest,
                    c.widenBest / c.sbgemmBest, c.bf16Difference);
      else
        std::printf(" %10s", "-");
    }
    std::printf("\n");
    std::fflush(stdout);
    if (c.group == "model") {
      widenStep += c.perStep * c.widenBest;
      sbgemmStep += c.perStep * c.sbgemmBest;
      oneDnnStep += c.perStep * c.oneDnnBest;
    }
    if (c.group == "square") {
      peak = std::max(peak, gflops);
      cpuPeak = std::max(cpuPeak, c.flops() / c.cpuBest / 1e9);
    }
    else {
      stepSeconds += c.perStep * c.best;
      stepFlops += c.perStep * c.flops();
    }
  }
  if (peak > 0)
    std::printf("peak (best square): %.1f GFLOP/s with %s kernels (%.1f "
                "GFLOP per CPU-second)\n",
                peak, blas.core.c_str(), cpuPeak);
  if (stepFlops > 0)
    std::printf("model GEMMs of one step: %.1f GFLOP in %.1f ms at best: "
                "%.1f GFLOP/s\n",
                stepFlops / 1e9, 1e3 * stepSeconds,
                stepFlops / stepSeconds / 1e9);
  if (o.bf16 && !findSbgemm())
    std::printf("bf16 GEMMs of one step: widen + sgemm %.1f ms; no "
                "cblas_sbgemm in this OpenBLAS (built without "
                "BUILD_BFLOAT16)\n",
                1e3 * widenStep);
  if (o.bf16 && sbgemmStep > 0)
    std::printf("bf16 GEMMs of one step: widen + sgemm %.1f ms, sbgemm %.1f "
                "ms (%.2fx)\n",
                1e3 * widenStep, 1e3 * sbgemmStep, widenStep / sbgemmStep);
  if (o.bf16 && oneDnnStep > 0)
    std::printf("bf16 GEMMs of one step: widen + sgemm %.1f ms, oneDNN %.1f "
                "ms (%.2fx; partition-run uses %s)\n",
                1e3 * widenStep, 1e3 * oneDnnStep, widenStep / oneDnnStep,
                cpu::bf16GemmChoice().describe.c_str());
  if (!o.json.empty()) {
    std::FILE *file = std::fopen(o.json.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "partition-bench-sgemm: cannot write %s\n",
                   o.json.c_str());
      return 1;
    }
    std::fprintf(file,
                 "{\"openblas\": \"%s\", \"core\": \"%s\", "
                 "\"core_source\": \"%s\", \"core_library\": \"%s\", "
                 "\"core_cpu_best\": \"%s\", \"threads\": %d, "
                 "\"repeats\": %d, \"peak_gflops\": %.3f, "
                 "\"peak_gflops_per_cpu_second\": %.3f, "
                 "\"model_gemm_gflop\": %.6f, \"model_gemm_ms\": %.3f, "
                 "\"model_gemm_gflops\": %.3f, \"bf16\": %s, "
                 "\"model_widen_sgemm_ms\": %.3f, \"model_sbgemm_ms\": %.3f, "
                 "\"model_onednn_ms\": %.3f, \"bf16_gemm\": \"%s\", "
                 "\"cases\": [",
                 openblas_get_config(), openblas_get_corename(),
                 cpu::blasCoreSourceName(blas.source),
                 blas.libraryCore.c_str(), blas.cpuBest.c_str(),
                 openblas_get_num_threads(), o.repeats, peak, cpuPeak,
                 stepFlops / 1e9,
                 1e3 * stepSeconds,
                 stepSeconds > 0 ? stepFlops / stepSeconds / 1e9 : 0.0,
                 o.bf16 ? "true" : "false", 1e3 * widenStep, 1e3 * sbgemmStep,
                 1e3 * oneDnnStep, cpu::bf16GemmChoice().name.c_str());
    for (size_t i = 0; i < all.size(); ++i) {
      const Case &c = all[i];
      std::fprintf(file,
                   "%s{\"group\": \"%s\", \"name\": \"%s\", \"m\": %d, "
                   "\"n\": %d, \"k\": %d, \"trans_a\": %s, \"trans_b\": %s, "
                   "\"per_step\": %d, \"best_ms\": %.4f, \"median_ms\": %.4f, "
                   "\"gflops\": %.3f, \"widen_sgemm_ms\": %.4f, "
                   "\"sbgemm_ms\": %.4f, \"onednn_ms\": %.4f, "
                   "\"bf16_max_rel_diff\": %.3g}",
                   i ? ", " : "", c.group.c_str(), c.name.c_str(), c.m, c.n,
                   c.k, c.transA ? "true" : "false",
                   c.transB ? "true" : "false", c.perStep, 1e3 * c.best,
                   1e3 * c.median, c.flops() / c.best / 1e9,
                   1e3 * c.widenBest, 1e3 * c.sbgemmBest, 1e3 * c.oneDnnBest,
                   c.bf16Difference);
    }
    std::fprintf(file, "]}\n");
    std::fclose(file);
  }
  return 0;
}
