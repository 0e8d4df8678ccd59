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
// sample repeats the call for at least --min-time seconds.
//
//===----------------------------------------------------------------------===//

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <sstream>
#include <string>
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
};

struct Case {
  std::string group; // "square" or "model"
  std::string name;
  bool transA, transB;
  int m, n, k;
  int perStep; // calls per training step ("model" cases)
  double best = 0, median = 0; // seconds per call
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
               "         [--json FILE]\n",
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
  auto call = [&] {
    cblas_sgemm(CblasRowMajor, c.transA ? CblasTrans : CblasNoTrans,
                c.transB ? CblasTrans : CblasNoTrans, c.m, c.n, c.k, 1.0f,
                a.data(), colsA, b.data(), colsB, 0.0f, out.data(), c.n);
  };
  call(); // Warm-up: pages, OpenBLAS's buffers and threads.
  std::vector<double> samples;
  for (int r = 0; r < o.repeats; ++r) {
    int calls = 0;
    Clock::time_point start = Clock::now();
    double elapsed = 0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    } while (elapsed < o.minTime);
    samples.push_back(elapsed / calls);
  }
  std::sort(samples.begin(), samples.end());
  c.best = samples.front();
  c.median = samples[samples.size() / 2];
}

} // namespace

int main(int argc, char **argv) {
  Options o = parse(argc, argv);
  openblas_set_num_threads(o.threads);
  std::vector<Case> all = cases(o);
  std::printf("OpenBLAS %s, core %s, %d threads; best of %d samples of >= "
              "%.3f s\n",
              openblas_get_config(), openblas_get_corename(),
              openblas_get_num_threads(), o.repeats, o.minTime);
  std::printf("%-34s %6s %10s %10s %10s\n", "case (M x N x K)", "calls",
              "ms best", "GFLOP/s", "median");
  double peak = 0, stepSeconds = 0, stepFlops = 0;
  for (Case &c : all) {
    measure(c, o);
    double gflops = c.flops() / c.best / 1e9;
    std::printf("%-34s %6d %10.3f %10.1f %10.1f\n",
                (c.group + " " + c.name).c_str(), c.perStep, 1e3 * c.best,
                gflops, c.flops() / c.median / 1e9);
    std::fflush(stdout);
    if (c.group == "square")
      peak = std::max(peak, gflops);
    else {
      stepSeconds += c.perStep * c.best;
      stepFlops += c.perStep * c.flops();
    }
  }
  if (peak > 0)
    std::printf("peak (best square): %.1f GFLOP/s\n", peak);
  if (stepFlops > 0)
    std::printf("model GEMMs of one step: %.1f GFLOP in %.1f ms at best: "
                "%.1f GFLOP/s\n",
                stepFlops / 1e9, 1e3 * stepSeconds,
                stepFlops / stepSeconds / 1e9);
  if (!o.json.empty()) {
    std::FILE *file = std::fopen(o.json.c_str(), "w");
    if (!file) {
      std::fprintf(stderr, "partition-bench-sgemm: cannot write %s\n",
                   o.json.c_str());
      return 1;
    }
    std::fprintf(file,
                 "{\"openblas\": \"%s\", \"core\": \"%s\", \"threads\": %d, "
                 "\"repeats\": %d, \"peak_gflops\": %.3f, "
                 "\"model_gemm_gflop\": %.6f, \"model_gemm_ms\": %.3f, "
                 "\"model_gemm_gflops\": %.3f, \"cases\": [",
                 openblas_get_config(), openblas_get_corename(),
                 openblas_get_num_threads(), o.repeats, peak, stepFlops / 1e9,
                 1e3 * stepSeconds,
                 stepSeconds > 0 ? stepFlops / stepSeconds / 1e9 : 0.0);
    for (size_t i = 0; i < all.size(); ++i) {
      const Case &c = all[i];
      std::fprintf(file,
                   "%s{\"group\": \"%s\", \"name\": \"%s\", \"m\": %d, "
                   "\"n\": %d, \"k\": %d, \"trans_a\": %s, \"trans_b\": %s, "
                   "\"per_step\": %d, \"best_ms\": %.4f, \"median_ms\": %.4f, "
                   "\"gflops\": %.3f}",
                   i ? ", " : "", c.group.c_str(), c.name.c_str(), c.m, c.n,
                   c.k, c.transA ? "true" : "false",
                   c.transB ? "true" : "false", c.perStep, 1e3 * c.best,
                   1e3 * c.median, c.flops() / c.best / 1e9);
    }
    std::fprintf(file, "]}\n");
    std::fclose(file);
  }
  return 0;
}
