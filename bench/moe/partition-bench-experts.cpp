//===- partition-bench-experts.cpp - grouped expert GEMMs vs sgemm --------===//
//
// How fast the CPU backend's grouped expert GEMMs (runtime/backend/cpu/
// Moe.cpp: one cblas_sgemm per (sequence, expert) block of routed rows) run
// against OpenBLAS's sgemm on the same work, in one run on one machine:
//
//   - grouped: cpu::expertLinear / expertLinearGradInput /
//     expertLinearGradWeight on the dropless buffers [B, E, S, H] of a real
//     routing (cpu::moeRoute of random logits, top-k of E);
//   - dense: one cblas_sgemm over all B x S x k routed rows at once, the
//     same FLOPs in the best shape sgemm can get (an upper bound no grouping
//     reaches: each expert's weight is a different matrix);
//   - blocks: cblas_sgemm on one block of the mean routed rows (B S k /
//     (B E) rows), timed alone: the speed sgemm has for the blocks' own
//     shape.
//
// Reports GFLOP/s of each and the ratios grouped / dense and grouped /
// blocks (issue 26's target: grouped at >= 70% of sgemm for their shapes).
// The FLOPs counted are the routed rows' (2 x rows x K x N), never the
// buffer's padding.
//
//   partition-bench-experts [--threads 2] [--groups 4] [--seq 256]
//       [--experts 8] [--top-k 2] [--hidden 512] [--ffn 1024] [--repeats 5]
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/BlasCore.h"
#include "runtime/backend/cpu/Kernels.h"

#include <cblas.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <vector>

namespace {

namespace cpu = partition::runtime::cpu;
using partition::runtime::MoeScoring;

struct Options {
  int threads = 2, repeats = 5;
  long groups = 4, seq = 256, experts = 8, topK = 2, hidden = 512,
       ffn = 1024;
};

Options parse(int argc, char **argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string flag = argv[i];
    if (i + 1 >= argc) {
      std::fprintf(stderr, "partition-bench-experts: %s needs a value\n",
                   flag.c_str());
      std::exit(2);
    }
    long value = std::atol(argv[++i]);
    if (value <= 0) {
      std::fprintf(stderr, "partition-bench-experts: %s must be positive\n",
                   flag.c_str());
      std::exit(2);
    }
    if (flag == "--threads") o.threads = int(value);
    else if (flag == "--repeats") o.repeats = int(value);
    else if (flag == "--groups") o.groups = value;
    else if (flag == "--seq") o.seq = value;
    else if (flag == "--experts") o.experts = value;
    else if (flag == "--top-k") o.topK = value;
    else if (flag == "--hidden") o.hidden = value;
    else if (flag == "--ffn") o.ffn = value;
    else {
      std::fprintf(stderr, "partition-bench-experts: unknown flag %s\n",
                   flag.c_str());
      std::exit(2);
    }
  }
  if (o.topK > o.experts) {
    std::fprintf(stderr, "partition-bench-experts: --top-k exceeds --experts\n");
    std::exit(2);
  }
  return o;
}

/// The best of `repeats` samples, each the mean over calls filling 50 ms.
double bestSeconds(int repeats, const std::function<void()> &call) {
  call(); // warm-up
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    int calls = 0;
    auto start = std::chrono::steady_clock::now();
    double elapsed = 0;
    do {
      call();
      ++calls;
      elapsed = std::chrono::duration<double>(
                    std::chrono::steady_clock::now() - start)
                    .count();
    } while (elapsed < 0.05);
    best = std::min(best, elapsed / calls);
  }
  return best;
}

std::vector<float> randoms(size_t n, std::mt19937 &rng) {
  std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
  std::vector<float> v(n);
  for (float &x : v)
    x = dist(rng);
  return v;
}

} // namespace

int main(int argc, char **argv) {
  cpu::ensureBestBlasCore(argv);
  Options o = parse(argc, argv);
  openblas_set_num_threads(o.threads);
  std::mt19937 rng(7);
  const long B = o.groups, S = o.seq, E = o.experts, K = o.topK,
             H = o.hidden, F = o.ffn;

  // A real routing: random logits, top-k, dropless (capacity S).
  cpu::MoeShape route{B, S, H, E, K, S};
  std::vector<float> logits = randoms(size_t(B * S * E), rng);
  std::vector<float> gates(size_t(B * S * K));
  std::vector<int32_t> experts(gates.size()), slots(gates.size()),
      counts(size_t(B * E));
  cpu::moeRoute(logits.data(), nullptr, gates.data(), experts.data(),
                slots.data(), counts.data(), route, MoeScoring::Softmax);
  std::vector<float> x = randoms(size_t(B * S * H), rng);
  std::vector<float> buffer(size_t(B * E * S * H));
  cpu::moeDispatch(x.data(), experts.data(), slots.data(), buffer.data(),
                   route);
  long rows = 0, fullest = 0;
  for (int32_t n : counts) {
    rows += n;
    fullest = std::max<long>(fullest, n);
  }

  std::vector<float> w = randoms(size_t(E * F * H), rng);
  std::vector<float> out(size_t(B * E * S * F)), dx(buffer.size()),
      dw(w.size());
  std::vector<float> dy = randoms(out.size(), rng);
  cpu::ExpertGemmShape g{B, E, S, H, F};
  double flops = 2.0 * double(rows) * double(H) * double(F);

  struct Row {
    const char *name;
    double grouped, dense, blocks;
  };
  std::vector<Row> table;
  // Dense: all routed rows in one GEMM against one expert's weight.
  std::vector<float> denseIn = randoms(size_t(rows * H), rng),
                     denseOut(size_t(rows * F)),
                     denseDy = randoms(size_t(rows * F), rng);
  long mean = std::max<long>(1, rows / (B * E));
  auto sgemm = [&](long m, bool forward, bool gradInput) {
    if (forward)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, int(m), int(F),
                  int(H), 1.0f, denseIn.data(), int(H), w.data(), int(H),
                  0.0f, denseOut.data(), int(F));
    else if (gradInput)
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, int(m), int(H),
                  int(F), 1.0f, denseDy.data(), int(F), w.data(), int(H),
                  0.0f, denseIn.data(), int(H));
    else
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, int(F), int(H),
                  int(m), 1.0f, denseDy.data(), int(F), denseIn.data(),
                  int(H), 0.0f, dw.data(), int(H));
  };
  for (int kind = 0; kind < 3; ++kind) {
    bool forward = kind == 0, gradInput = kind == 1;
    double grouped = bestSeconds(o.repeats, [&] {
      if (forward)
        cpu::expertLinear(buffer.data(), w.data(), counts.data(), out.data(),
                          g);
      else if (gradInput)
        cpu::expertLinearGradInput(dy.data(), w.data(), counts.data(),
                                   dx.data(), g);
      else
        cpu::expertLinearGradWeight(dy.data(), buffer.data(), counts.data(),
                                    dw.data(), g);
    });
    double dense =
        bestSeconds(o.repeats, [&] { sgemm(rows, forward, gradInput); });
    double block =
        bestSeconds(o.repeats, [&] { sgemm(mean, forward, gradInput); }) *
        double(rows) / double(mean);
    table.push_back({forward     ? "forward  y = x W^T"
                     : gradInput ? "grad in  dx = dy W"
                                 : "grad w   dW = dy^T x",
                     grouped, dense, block});
  }

  const cpu::BlasCoreReport &blas = cpu::blasCoreReport();
  std::printf("expert GEMMs: %ld groups x %ld tokens, %ld experts, top-%ld, "
              "H %ld, F %ld: %ld routed rows (blocks of %ld on average, %ld "
              "at most); %d threads, %s\n",
              B, S, E, K, H, F, rows, mean, fullest, o.threads,
              blas.describe().c_str());
  std::printf("%-22s %12s %12s %12s %14s %14s\n", "GEMM", "grouped GF/s",
              "dense GF/s", "blocks GF/s", "grouped/dense", "grouped/blocks");
  for (const Row &r : table)
    std::printf("%-22s %12.1f %12.1f %12.1f %13.0f%% %13.0f%%\n", r.name,
                flops / r.grouped / 1e9, flops / r.dense / 1e9,
                flops / r.blocks / 1e9, 100 * r.dense / r.grouped,
                100 * r.blocks / r.grouped);
  return 0;
}
