//===- Moe.cpp - mixture-of-experts routing, dispatch and expert GEMMs ----===//
//
// Routing is per token (top-k of E scores) and then per group (a sequence:
// the capacity is filled in GShard's priority, every first choice in
// sequence order before any second one), so it runs in parallel over the
// groups. Dispatch, combine and their gradients touch each token's k rows
// once, in parallel over tokens: every row of an expert buffer belongs to
// exactly one (token, choice), so no two threads write one row.
//
// The experts' linear layers are grouped GEMMs: one cblas_sgemm per (group,
// expert) over its filled rows only (counts), so a dropless buffer (C = S)
// costs the routed tokens. OpenBLAS has no grouped call (cblas_sgemm_batch
// came in 0.3.27, after Debian 12's): with at least as many GEMMs as threads
// they are spread over the team with sgemm single-threaded, as attention
// does; otherwise they run in turn on OpenBLAS's threads. The weight
// gradient sums over the groups in group order (beta = 1 after the first),
// one expert per task, so the sum's order never depends on the threads.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/KernelSupport.h"

#include <cblas.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

namespace partition::runtime::cpu {

using namespace detail;

namespace {

/// Up to 64 experts' worth of per-token scratch lives on the stack; more
/// go to the heap (DeepSeek-V3 has 256).
constexpr Index kStackExperts = 64;

/// A token's normalised scores (softmax, or sigmoids over their sum for
/// the aux loss) into `probs` [E]; returns log-sum-exp of the logits.
float tokenProbabilities(const float *logits, Index experts,
                         MoeScoring scoring, float *probs) {
  float max = -std::numeric_limits<float>::infinity();
  for (Index i = 0; i < experts; ++i)
    max = std::max(max, logits[i]);
  double sum = 0;
  for (Index i = 0; i < experts; ++i)
    sum += std::exp(double(logits[i] - max));
  float lse = max + float(std::log(sum));
  if (scoring == MoeScoring::Sigmoid) {
    double total = 0;
    for (Index i = 0; i < experts; ++i)
      total += probs[i] = 1.0f / (1.0f + std::exp(-logits[i]));
    for (Index i = 0; i < experts; ++i)
      probs[i] = float(probs[i] / total);
  } else {
    for (Index i = 0; i < experts; ++i)
      probs[i] = float(std::exp(double(logits[i] - max)) / sum);
  }
  return lse;
}

/// The gates of a token's chosen experts from its logits: softmax over the
/// chosen logits (softmax and softmax_topk agree) or the chosen sigmoids
/// over their sum. `sigmoids` receives the sigmoids when scoring is sigmoid.
void chosenGates(const float *logits, const std::int32_t *chosen, Index topK,
                 MoeScoring scoring, float *gates, float *sigmoids) {
  if (scoring == MoeScoring::Sigmoid) {
    double total = 0;
    for (Index j = 0; j < topK; ++j)
      total += sigmoids[j] = 1.0f / (1.0f + std::exp(-logits[chosen[j]]));
    for (Index j = 0; j < topK; ++j)
      gates[j] = float(sigmoids[j] / total);
    return;
  }
  float max = -std::numeric_limits<float>::infinity();
  for (Index j = 0; j < topK; ++j)
    max = std::max(max, logits[chosen[j]]);
  double sum = 0;
  for (Index j = 0; j < topK; ++j)
    sum += std::exp(double(logits[chosen[j]] - max));
  for (Index j = 0; j < topK; ++j)
    gates[j] = float(std::exp(double(logits[chosen[j]] - max)) / sum);
}

/// Per-token scratch of E floats: on the stack up to kStackExperts.
class ExpertScratch {
public:
  explicit ExpertScratch(Index experts) {
    if (experts > kStackExperts)
      heap.resize(experts);
  }
  float *get() { return heap.empty() ? stack : heap.data(); }

private:
  float stack[kStackExperts];
  std::vector<float> heap;
};

void checkShape(const char *kernel, const MoeShape &s) {
  checkNonNegative(kernel, {s.batch, s.seq, s.channels, s.experts, s.topK,
                            s.capacity});
  if (s.topK < 1 || s.topK > s.experts)
    fail(kernel, "top_k " + std::to_string(s.topK) + " is not in [1, " +
                     std::to_string(s.experts) + "]");
}

/// Throws unless every choice names an expert and a slot within the
/// buffer (or -1), so that no corrupt routing reads or writes out of
/// bounds.
void checkChoices(const char *kernel, const MoeShape &s,
                  const std::int32_t *experts, const std::int32_t *slots) {
  Index count = s.batch * s.seq * s.topK;
  checkIds(kernel, "expert id", experts, count, s.experts);
  for (Index i = 0; i < count; ++i)
    if (slots[i] < -1 || slots[i] >= s.capacity)
      fail(kernel, "slot " + std::to_string(slots[i]) + " at choice " +
                       std::to_string(i) + " is outside [-1, " +
                       std::to_string(s.capacity) + ")");
}

/// Throws unless 0 <= counts[i] <= capacity.
void checkCounts(const char *kernel, const std::int32_t *counts, Index groups,
                 Index capacity) {
  for (Index i = 0; i < groups; ++i)
    if (counts[i] < 0 || counts[i] > capacity)
      fail(kernel, "count " + std::to_string(counts[i]) + " of group " +
                       std::to_string(i) + " is outside [0, " +
                       std::to_string(capacity) + "]");
}

/// Runs `gemm(task)` for task in [0, tasks): over the team with sgemm
/// single-threaded when there are enough tasks, else in turn.
template <typename Gemm> void forEachGemm(Index tasks, Gemm gemm) {
  const Index threads = omp_get_max_threads();
  if (tasks >= threads && threads > 1) {
    SerialBlasScope serial(true);
#pragma omp parallel for schedule(dynamic, 1)
    for (Index task = 0; task < tasks; ++task)
      gemm(task);
    return;
  }
  for (Index task = 0; task < tasks; ++task)
    gemm(task);
}

} // namespace

void moeRoute(const float *logits, const float *bias, float *gates,
              std::int32_t *experts, std::int32_t *slots,
              std::int32_t *counts, const MoeShape &s, MoeScoring scoring) {
  const char *kernel = "moe_route";
  checkShape(kernel, s);
  if (s.capacity < 1 || s.capacity > s.seq)
    fail(kernel, "capacity " + std::to_string(s.capacity) +
                     " is not in [1, " + std::to_string(s.seq) + "]");
  const Index E = s.experts, K = s.topK;
#pragma omp parallel for schedule(static)
  for (Index b = 0; b < s.batch; ++b) {
    ExpertScratch scratch(E);
    float *score = scratch.get();
    for (Index t = 0; t < s.seq; ++t) {
      const Index token = b * s.seq + t;
      const float *l = logits + token * E;
      // The selection score: the probability (softmax), the logit
      // (softmax_topk) or the sigmoid, plus the bias.
      if (scoring == MoeScoring::Softmax)
        tokenProbabilities(l, E, scoring, score);
      for (Index i = 0; i < E; ++i) {
        float base = scoring == MoeScoring::Softmax     ? score[i]
                     : scoring == MoeScoring::Sigmoid   ? 1.0f / (1.0f + std::exp(-l[i]))
                                                        : l[i];
        score[i] = base + (bias ? bias[i] : 0.0f);
      }
      // Top-k by repeated selection (k is small), ties to the lower index.
      std::int32_t *chosen = experts + token * K;
      for (Index j = 0; j < K; ++j) {
        Index best = -1;
        for (Index i = 0; i < E; ++i) {
          bool taken = false;
          for (Index m = 0; m < j; ++m)
            taken |= chosen[m] == i;
          if (!taken && (best < 0 || score[i] > score[best] ||
                         (std::isnan(score[best]) && !std::isnan(score[i]))))
            best = i;
        }
        chosen[j] = std::int32_t(best);
      }
      float sigmoids[kStackExperts];
      std::vector<float> heapSigmoids;
      float *sig = sigmoids;
      if (K > kStackExperts) {
        heapSigmoids.resize(K);
        sig = heapSigmoids.data();
      }
      chosenGates(l, chosen, K, scoring, gates + token * K, sig);
    }
    // The capacity, in GShard's priority: choice j of every token before
    // choice j + 1 of any.
    std::int32_t *count = counts + b * E;
    std::fill(count, count + E, 0);
    for (Index j = 0; j < K; ++j)
      for (Index t = 0; t < s.seq; ++t) {
        const Index choice = (b * s.seq + t) * K + j;
        std::int32_t &filled = count[experts[choice]];
        slots[choice] = filled < s.capacity ? filled++ : -1;
      }
  }
}

void moeRouteGrad(const float *gatesGrad, const float *logits,
                  const std::int32_t *experts, float *logitsGrad,
                  const MoeShape &s, MoeScoring scoring) {
  const char *kernel = "moe_route_grad";
  checkShape(kernel, s);
  const Index E = s.experts, K = s.topK, tokens = s.batch * s.seq;
  checkIds(kernel, "expert id", experts, tokens * K, E);
#pragma omp parallel for schedule(static) if (tokens * E > kParallelThreshold)
  for (Index token = 0; token < tokens; ++token) {
    const float *l = logits + token * E;
    const std::int32_t *chosen = experts + token * K;
    const float *dg = gatesGrad + token * K;
    float *dl = logitsGrad + token * E;
    std::fill(dl, dl + E, 0.0f);
    ExpertScratch gateScratch(K), sigmoidScratch(K);
    float *g = gateScratch.get(), *sig = sigmoidScratch.get();
    chosenGates(l, chosen, K, scoring, g, sig);
    // g = normalise(x) over the chosen: dx_j = (dg_j - sum_m g_m dg_m) / Z,
    // Z the normaliser; for softmax x = exp(l) and dl_j = x_j dx_j, which
    // is g_j (dg_j - sum_m g_m dg_m).
    double dot = 0;
    for (Index j = 0; j < K; ++j)
      dot += double(g[j]) * dg[j];
    double total = 0;
    if (scoring == MoeScoring::Sigmoid)
      for (Index j = 0; j < K; ++j)
        total += sig[j];
    for (Index j = 0; j < K; ++j) {
      double centred = dg[j] - dot;
      dl[chosen[j]] = scoring == MoeScoring::Sigmoid
                          ? float(centred / total * sig[j] * (1.0f - sig[j]))
                          : float(g[j] * centred);
    }
  }
}

void moeDispatch(const float *input, const std::int32_t *experts,
                 const std::int32_t *slots, float *buffer, const MoeShape &s) {
  const char *kernel = "moe_dispatch";
  checkShape(kernel, s);
  checkChoices(kernel, s, experts, slots);
  const Index H = s.channels, tokens = s.batch * s.seq;
  std::memset(buffer, 0, sizeof(float) * s.batch * s.experts * s.capacity * H);
#pragma omp parallel for schedule(static) if (tokens * H > kParallelThreshold)
  for (Index token = 0; token < tokens; ++token) {
    const Index b = token / s.seq;
    for (Index j = 0; j < s.topK; ++j) {
      const Index choice = token * s.topK + j;
      if (slots[choice] < 0)
        continue;
      float *row = buffer + ((b * s.experts + experts[choice]) * s.capacity +
                             slots[choice]) * H;
      std::memcpy(row, input + token * H, sizeof(float) * H);
    }
  }
}

void moeDispatchGrad(const float *bufferGrad, const std::int32_t *experts,
                     const std::int32_t *slots, float *inputGrad,
                     const MoeShape &s) {
  moeCombine(bufferGrad, nullptr, experts, slots, inputGrad, s);
}

void moeCombine(const float *buffer, const float *gates,
                const std::int32_t *experts, const std::int32_t *slots,
                float *result, const MoeShape &s) {
  const char *kernel = gates ? "moe_combine" : "moe_dispatch_grad";
  checkShape(kernel, s);
  checkChoices(kernel, s, experts, slots);
  const Index H = s.channels, tokens = s.batch * s.seq;
#pragma omp parallel for schedule(static) if (tokens * H > kParallelThreshold)
  for (Index token = 0; token < tokens; ++token) {
    const Index b = token / s.seq;
    float *out = result + token * H;
    std::fill(out, out + H, 0.0f);
    for (Index j = 0; j < s.topK; ++j) {
      const Index choice = token * s.topK + j;
      if (slots[choice] < 0)
        continue;
      const float g = gates ? gates[choice] : 1.0f;
      const float *row =
          buffer + ((b * s.experts + experts[choice]) * s.capacity +
                    slots[choice]) * H;
#pragma omp simd
      for (Index c = 0; c < H; ++c)
        out[c] += g * row[c];
    }
  }
}

void moeCombineGrad(const float *resultGrad, const float *buffer,
                    const float *gates, const std::int32_t *experts,
                    const std::int32_t *slots, float *bufferGrad,
                    float *gatesGrad, const MoeShape &s) {
  const char *kernel = "moe_combine_grad";
  checkShape(kernel, s);
  checkChoices(kernel, s, experts, slots);
  const Index H = s.channels, tokens = s.batch * s.seq;
  std::memset(bufferGrad, 0,
              sizeof(float) * s.batch * s.experts * s.capacity * H);
#pragma omp parallel for schedule(static) if (tokens * H > kParallelThreshold)
  for (Index token = 0; token < tokens; ++token) {
    const Index b = token / s.seq;
    const float *dy = resultGrad + token * H;
    for (Index j = 0; j < s.topK; ++j) {
      const Index choice = token * s.topK + j;
      if (slots[choice] < 0) {
        gatesGrad[choice] = 0.0f;
        continue;
      }
      const Index row = ((b * s.experts + experts[choice]) * s.capacity +
                         slots[choice]) * H;
      const float g = gates[choice];
      float dot = 0.0f;
#pragma omp simd reduction(+ : dot)
      for (Index c = 0; c < H; ++c) {
        bufferGrad[row + c] = g * dy[c];
        dot += dy[c] * buffer[row + c];
      }
      gatesGrad[choice] = dot;
    }
  }
}

namespace {

/// The filled rows of every (group, expert) block times its expert's
/// weight [E, N, K]: `rows` [B, E, C, inner] -> `result` [B, E, C, outer],
/// with the weight transposed (forward: inner K, outer N) or not (input
/// gradient: inner N, outer K); the rows past the counts are zero.
void expertRowsTimesWeight(const char *kernel, const float *rows,
                           const float *weight, const std::int32_t *counts,
                           float *result, const ExpertGemmShape &g,
                           bool transposeWeight) {
  checkNonNegative(kernel, {g.batch, g.experts, g.capacity, g.inFeatures,
                            g.outFeatures});
  checkCounts(kernel, counts, g.batch * g.experts, g.capacity);
  // The weight's rows are K long whichever way it is read.
  blasInt(kernel, g.outFeatures);
  blasInt(kernel, g.capacity);
  const int k = blasInt(kernel, g.inFeatures);
  const Index inner = transposeWeight ? g.inFeatures : g.outFeatures;
  const Index outer = transposeWeight ? g.outFeatures : g.inFeatures;
  forEachGemm(g.batch * g.experts, [&](Index group) {
    const Index e = group % g.experts, filled = counts[group];
    const float *x = rows + group * g.capacity * inner;
    float *y = result + group * g.capacity * outer;
    const float *w = weight + e * g.outFeatures * g.inFeatures;
    if (filled > 0 && inner > 0)
      cblas_sgemm(CblasRowMajor, CblasNoTrans,
                  transposeWeight ? CblasTrans : CblasNoTrans, int(filled),
                  int(outer), int(inner), 1.0f, x, int(inner), w, k, 0.0f, y,
                  int(outer));
    else
      std::memset(y, 0, sizeof(float) * filled * outer);
    std::memset(y + filled * outer, 0,
                sizeof(float) * (g.capacity - filled) * outer);
  });
}

} // namespace

void expertLinear(const float *input, const float *weight,
                  const std::int32_t *counts, float *result,
                  const ExpertGemmShape &g) {
  expertRowsTimesWeight("expert_linear", input, weight, counts, result, g,
                        /*transposeWeight=*/true);
}

void expertLinearGradInput(const float *grad, const float *weight,
                           const std::int32_t *counts, float *inputGrad,
                           const ExpertGemmShape &g) {
  expertRowsTimesWeight("expert_linear_grad_input", grad, weight, counts,
                        inputGrad, g, /*transposeWeight=*/false);
}

void expertLinearGradWeight(const float *grad, const float *input,
                            const std::int32_t *counts, float *weightGrad,
                            const ExpertGemmShape &g) {
  const char *kernel = "expert_linear_grad_weight";
  checkNonNegative(kernel, {g.batch, g.experts, g.capacity, g.inFeatures,
                            g.outFeatures});
  checkCounts(kernel, counts, g.batch * g.experts, g.capacity);
  const int n = blasInt(kernel, g.outFeatures), k = blasInt(kernel, g.inFeatures);
  blasInt(kernel, g.capacity);
  forEachGemm(g.experts, [&](Index e) {
    float *dw = weightGrad + e * g.outFeatures * g.inFeatures;
    bool written = false;
    for (Index b = 0; b < g.batch; ++b) {
      const Index group = b * g.experts + e, rows = counts[group];
      if (rows == 0 || n == 0 || k == 0)
        continue;
      cblas_sgemm(CblasRowMajor, CblasTrans, CblasNoTrans, n, k, int(rows),
                  1.0f, grad + group * g.capacity * g.outFeatures, n,
                  input + group * g.capacity * g.inFeatures, k,
                  written ? 1.0f : 0.0f, dw, k);
      written = true;
    }
    if (!written)
      std::memset(dw, 0, sizeof(float) * g.outFeatures * g.inFeatures);
  });
}

// Per group b: E sum_i f_i P_i with f_i = (choices of expert i) / S and
// P_i the mean normalised score; the z-loss is lse^2 per token.
void moeAuxLoss(const float *logits, const std::int32_t *experts, float *loss,
                const MoeShape &s, MoeScoring scoring, float auxCoef,
                float zCoef) {
  const char *kernel = "moe_aux_loss";
  checkShape(kernel, s);
  const Index E = s.experts, K = s.topK;
  checkIds(kernel, "expert id", experts, s.batch * s.seq * K, E);
  double balance = 0, z = 0;
  std::vector<double> fraction(E), meanScore(E);
  ExpertScratch scratch(E);
  float *probs = scratch.get();
  for (Index b = 0; b < s.batch; ++b) {
    std::fill(fraction.begin(), fraction.end(), 0.0);
    std::fill(meanScore.begin(), meanScore.end(), 0.0);
    for (Index t = 0; t < s.seq; ++t) {
      const Index token = b * s.seq + t;
      float lse = tokenProbabilities(logits + token * E, E, scoring, probs);
      z += double(lse) * lse;
      for (Index i = 0; i < E; ++i)
        meanScore[i] += probs[i];
      for (Index j = 0; j < K; ++j)
        fraction[experts[token * K + j]] += 1.0;
    }
    double term = 0;
    for (Index i = 0; i < E; ++i)
      term += fraction[i] * meanScore[i];
    balance += double(E) * term / (double(s.seq) * double(s.seq));
  }
  const double groups = double(std::max<Index>(s.batch, 1));
  const double tokens = double(std::max<Index>(s.batch * s.seq, 1));
  *loss = float(auxCoef * balance / groups + zCoef * z / tokens);
}

void moeAuxLossGrad(const float *lossGrad, const float *logits,
                    const std::int32_t *experts, float *logitsGrad,
                    const MoeShape &s, MoeScoring scoring, float auxCoef,
                    float zCoef) {
  const char *kernel = "moe_aux_loss_grad";
  checkShape(kernel, s);
  const Index E = s.experts, K = s.topK;
  checkIds(kernel, "expert id", experts, s.batch * s.seq * K, E);
  const double groups = double(std::max<Index>(s.batch, 1));
  const double tokens = double(std::max<Index>(s.batch * s.seq, 1));
  const double seq = double(std::max<Index>(s.seq, 1));
#pragma omp parallel for schedule(static)
  for (Index b = 0; b < s.batch; ++b) {
    std::vector<double> fraction(E, 0.0);
    for (Index t = 0; t < s.seq * K; ++t)
      fraction[experts[b * s.seq * K + t]] += 1.0;
    ExpertScratch scratch(E);
    float *probs = scratch.get();
    for (Index t = 0; t < s.seq; ++t) {
      const Index token = b * s.seq + t;
      const float *l = logits + token * E;
      float *dl = logitsGrad + token * E;
      float lse = tokenProbabilities(l, E, scoring, probs);
      // dLoss/dP_i for this token's normalised scores.
      double dot = 0;
      for (Index i = 0; i < E; ++i) {
        double dp = auxCoef * double(E) * fraction[i] / (seq * seq * groups);
        dot += probs[i] * dp;
      }
      double zScale = zCoef * 2.0 * lse / tokens;
      double sigmoidTotal = 0;
      if (scoring == MoeScoring::Sigmoid)
        for (Index i = 0; i < E; ++i)
          sigmoidTotal += 1.0 / (1.0 + std::exp(-double(l[i])));
      for (Index i = 0; i < E; ++i) {
        double dp = auxCoef * double(E) * fraction[i] / (seq * seq * groups);
        double balance;
        if (scoring == MoeScoring::Sigmoid) {
          double sig = 1.0 / (1.0 + std::exp(-double(l[i])));
          balance = (dp - dot) / sigmoidTotal * sig * (1.0 - sig);
        } else {
          balance = probs[i] * (dp - dot);
        }
        // d lse / d l_i is softmax(l)_i whatever the scoring.
        double softmax = std::exp(double(l[i]) - lse);
        dl[i] = float(*lossGrad * (balance + zScale * softmax));
      }
    }
  }
}

} // namespace partition::runtime::cpu
