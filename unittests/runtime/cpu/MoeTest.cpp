//===- MoeTest.cpp - routing, dispatch, combine, expert GEMMs, aux loss ---===//
//
// Values against double references written from the ops' definitions
// (dialects/Xfmr/XfmrMoeOps.td), gradients against central differences of
// those references with the routing held fixed (it is piecewise constant),
// and the capacity's priority order on routings built to overflow.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <numeric>
#include <stdexcept>

using namespace partition::runtime;
using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

using Ids = std::vector<std::int32_t>;

/// The routing of one shape and its results.
struct Routed {
  MoeShape shape;
  FVec logits, gates;
  Ids experts, slots, counts;
};

Routed route(MoeShape s, MoeScoring scoring, std::mt19937 &rng,
             const float *bias = nullptr) {
  Routed r;
  r.shape = s;
  r.logits = randomFloats(s.batch * s.seq * s.experts, rng, -2.0f, 2.0f);
  r.gates.resize(s.batch * s.seq * s.topK);
  r.experts.resize(r.gates.size());
  r.slots.resize(r.gates.size());
  r.counts.resize(s.batch * s.experts);
  moeRoute(r.logits.data(), bias, r.gates.data(), r.experts.data(),
           r.slots.data(), r.counts.data(), s, scoring);
  return r;
}

/// The gates of one token's chosen experts, in double.
DVec gatesRef(const double *logits, const std::int32_t *chosen, int64_t k,
              MoeScoring scoring) {
  DVec g(k);
  double total = 0;
  for (int64_t j = 0; j < k; ++j) {
    double l = logits[chosen[j]];
    g[j] = scoring == MoeScoring::Sigmoid ? 1.0 / (1.0 + std::exp(-l))
                                          : std::exp(l);
    total += g[j];
  }
  for (double &v : g)
    v /= total;
  return g;
}

/// The normalised scores of one token (softmax, or sigmoids over their
/// sum), in double.
DVec probsRef(const double *logits, int64_t experts, MoeScoring scoring) {
  DVec p(experts);
  double total = 0;
  for (int64_t i = 0; i < experts; ++i) {
    p[i] = scoring == MoeScoring::Sigmoid ? 1.0 / (1.0 + std::exp(-logits[i]))
                                          : std::exp(logits[i]);
    total += p[i];
  }
  for (double &v : p)
    v /= total;
  return p;
}

double auxLossRef(const DVec &logits, const Ids &experts, const MoeShape &s,
                  MoeScoring scoring, double auxCoef, double zCoef) {
  double balance = 0, z = 0;
  for (int64_t b = 0; b < s.batch; ++b) {
    DVec f(s.experts, 0.0), P(s.experts, 0.0);
    for (int64_t t = 0; t < s.seq; ++t) {
      const double *l = logits.data() + (b * s.seq + t) * s.experts;
      DVec p = probsRef(l, s.experts, scoring);
      double lse = 0;
      for (int64_t i = 0; i < s.experts; ++i)
        lse += std::exp(l[i]);
      z += std::log(lse) * std::log(lse);
      for (int64_t i = 0; i < s.experts; ++i)
        P[i] += p[i] / s.seq;
      for (int64_t j = 0; j < s.topK; ++j)
        f[experts[(b * s.seq + t) * s.topK + j]] += 1.0 / s.seq;
    }
    balance += s.experts * dot(f, P);
  }
  return auxCoef * balance / s.batch + zCoef * z / (s.batch * s.seq);
}

const MoeScoring kScorings[] = {MoeScoring::Softmax, MoeScoring::SoftmaxTopK,
                                MoeScoring::Sigmoid};

// Every token gets its top-k experts by score (descending), gates that sum
// to one and match the reference; dropless, every choice has a slot and the
// counts are the choices per expert.
TEST(MoeRouteTest, TopKGatesAndDroplessSlots) {
  std::mt19937 rng(1);
  MoeShape s{3, 17, 0, 6, 2, 17};
  for (MoeScoring scoring : kScorings) {
    Routed r = route(s, scoring, rng);
    Ids perExpert(s.batch * s.experts, 0);
    for (int64_t token = 0; token < s.batch * s.seq; ++token) {
      const float *l = r.logits.data() + token * s.experts;
      std::vector<int> order(s.experts);
      std::iota(order.begin(), order.end(), 0);
      std::stable_sort(order.begin(), order.end(),
                       [&](int a, int b) { return l[a] > l[b]; });
      DVec ld(l, l + s.experts);
      const std::int32_t *chosen = r.experts.data() + token * s.topK;
      DVec expected = gatesRef(ld.data(), chosen, s.topK, scoring);
      for (int64_t j = 0; j < s.topK; ++j) {
        EXPECT_EQ(chosen[j], order[j]) << "token " << token << " choice " << j;
        EXPECT_NEAR(r.gates[token * s.topK + j], expected[j], 1e-6);
        EXPECT_GE(r.slots[token * s.topK + j], 0);
        ++perExpert[(token / s.seq) * s.experts + chosen[j]];
      }
    }
    EXPECT_EQ(r.counts, perExpert);
  }
}

// A capacity of 3 with every token preferring expert 0, then expert 1:
// expert 0 takes the first 3 tokens' first choices; expert 1 takes the
// first choices nobody... none, so the first 3 second choices. The rest
// drop (slot -1) and the counts stop at the capacity.
TEST(MoeRouteTest, CapacityFillsFirstChoicesFirst) {
  MoeShape s{2, 8, 0, 4, 2, 3};
  FVec logits(s.batch * s.seq * s.experts, 0.0f);
  for (int64_t token = 0; token < s.batch * s.seq; ++token) {
    logits[token * 4 + 0] = 3.0f;
    logits[token * 4 + 1] = 2.0f;
  }
  // Token 5 of each sequence prefers expert 1 first: it takes expert 1's
  // first slot, ahead of every second choice.
  for (int64_t b = 0; b < s.batch; ++b)
    logits[(b * s.seq + 5) * 4 + 1] = 4.0f;
  FVec gates(s.batch * s.seq * 2);
  Ids experts(gates.size()), slots(gates.size()), counts(s.batch * 4);
  moeRoute(logits.data(), nullptr, gates.data(), experts.data(), slots.data(),
           counts.data(), s, MoeScoring::Softmax);
  for (int64_t b = 0; b < s.batch; ++b) {
    auto slot = [&](int64_t t, int64_t j) { return slots[(b * s.seq + t) * 2 + j]; };
    EXPECT_EQ(slot(0, 0), 0);
    EXPECT_EQ(slot(1, 0), 1);
    EXPECT_EQ(slot(2, 0), 2);
    EXPECT_EQ(slot(3, 0), -1);
    EXPECT_EQ(slot(5, 0), 0);  // expert 1, first
    EXPECT_EQ(slot(0, 1), 1);  // expert 1, after token 5's first choice
    EXPECT_EQ(slot(1, 1), 2);
    EXPECT_EQ(slot(2, 1), -1);
    EXPECT_EQ(slot(5, 1), -1); // expert 0 full
    EXPECT_EQ(counts[b * 4 + 0], 3);
    EXPECT_EQ(counts[b * 4 + 1], 3);
    EXPECT_EQ(counts[b * 4 + 2], 0);
  }
}

// The bias moves the selection, not the gates.
TEST(MoeRouteTest, BiasSelectsButDoesNotWeigh) {
  std::mt19937 rng(2);
  MoeShape s{1, 9, 0, 5, 2, 9};
  FVec bias = {0.0f, 0.0f, 0.0f, 100.0f, 0.0f};
  for (MoeScoring scoring : kScorings) {
    Routed r = route(s, scoring, rng, bias.data());
    for (int64_t token = 0; token < s.seq; ++token) {
      EXPECT_EQ(r.experts[token * 2], 3);
      DVec ld(r.logits.begin() + token * 5, r.logits.begin() + token * 5 + 5);
      DVec expected = gatesRef(ld.data(), &r.experts[token * 2], 2, scoring);
      EXPECT_NEAR(r.gates[token * 2], expected[0], 1e-6);
    }
  }
}

// d(sum_j R_j gates_j) / d logits against central differences of the
// reference gates at the chosen experts.
TEST(MoeRouteTest, GradientMatchesFiniteDifferences) {
  std::mt19937 rng(3);
  MoeShape s{2, 7, 0, 5, 3, 7};
  for (MoeScoring scoring : kScorings) {
    Routed r = route(s, scoring, rng);
    FVec weights = randomFloats(r.gates.size(), rng);
    FVec grad(r.logits.size());
    moeRouteGrad(weights.data(), r.logits.data(), r.experts.data(),
                 grad.data(), s, scoring);
    DVec x = toDouble(r.logits);
    auto objective = [&] {
      double total = 0;
      for (int64_t token = 0; token < s.batch * s.seq; ++token) {
        DVec g = gatesRef(x.data() + token * s.experts,
                          r.experts.data() + token * s.topK, s.topK, scoring);
        for (int64_t j = 0; j < s.topK; ++j)
          total += g[j] * weights[token * s.topK + j];
      }
      return total;
    };
    EXPECT_TRUE(allClose(grad, finiteDifference(x, objective), 1e-4, 1e-6))
        << "scoring " << int(scoring);
  }
}

// combine(dispatch(x)) with unit gates is x times the kept choices; the
// dispatch gradient is dispatch's adjoint; the combine gradients match
// central differences.
TEST(MoeDispatchTest, DispatchCombineAndGradients) {
  std::mt19937 rng(4);
  MoeShape s{2, 9, 5, 4, 2, 3}; // capacity 3 < 9: choices drop
  Routed r = route(s, MoeScoring::Softmax, rng);
  s.channels = 5;
  const size_t tokens = s.batch * s.seq, rows = s.batch * s.experts * s.capacity;
  FVec x = randomFloats(tokens * s.channels, rng);
  FVec buffer(rows * s.channels);
  moeDispatch(x.data(), r.experts.data(), r.slots.data(), buffer.data(), s);
  int64_t dropped = 0;
  for (std::int32_t slot : r.slots)
    dropped += slot < 0;
  EXPECT_GT(dropped, 0);
  // <dispatch(x), G> == <x, dispatch_grad(G)>.
  FVec G = randomFloats(buffer.size(), rng), dx(x.size());
  moeDispatchGrad(G.data(), r.experts.data(), r.slots.data(), dx.data(), s);
  EXPECT_NEAR(dot(toDouble(buffer), toDouble(G)), dot(toDouble(x), toDouble(dx)),
              1e-4);
  // Rows past the counts are zero.
  for (int64_t group = 0; group < s.batch * s.experts; ++group)
    for (int64_t c = r.counts[group]; c < s.capacity; ++c)
      for (int64_t h = 0; h < s.channels; ++h)
        EXPECT_EQ(buffer[(group * s.capacity + c) * s.channels + h], 0.0f);
  // Combine: value and gradients.
  FVec y(x.size());
  moeCombine(buffer.data(), r.gates.data(), r.experts.data(), r.slots.data(),
             y.data(), s);
  DVec expected(x.size(), 0.0);
  for (size_t token = 0; token < tokens; ++token)
    for (int64_t j = 0; j < s.topK; ++j)
      if (r.slots[token * s.topK + j] >= 0)
        for (int64_t h = 0; h < s.channels; ++h)
          expected[token * s.channels + h] +=
              r.gates[token * s.topK + j] * x[token * s.channels + h];
  EXPECT_TRUE(allClose(y, expected, 1e-6, 1e-7));
  FVec R = randomFloats(y.size(), rng), dBuffer(buffer.size()),
       dGates(r.gates.size());
  moeCombineGrad(R.data(), buffer.data(), r.gates.data(), r.experts.data(),
                 r.slots.data(), dBuffer.data(), dGates.data(), s);
  DVec bd = toDouble(buffer), gd = toDouble(r.gates);
  auto objective = [&] {
    double total = 0;
    for (size_t token = 0; token < tokens; ++token)
      for (int64_t j = 0; j < s.topK; ++j) {
        int64_t choice = token * s.topK + j;
        if (r.slots[choice] < 0)
          continue;
        int64_t row = ((token / s.seq) * s.experts + r.experts[choice]) *
                          s.capacity + r.slots[choice];
        for (int64_t h = 0; h < s.channels; ++h)
          total += gd[choice] * bd[row * s.channels + h] *
                   R[token * s.channels + h];
      }
    return total;
  };
  EXPECT_TRUE(allClose(dBuffer, finiteDifference(bd, objective), 1e-5, 1e-6));
  EXPECT_TRUE(allClose(dGates, finiteDifference(gd, objective), 1e-5, 1e-6));
}

// The grouped GEMMs: the filled rows against a double product, zeros past
// the counts (an empty expert included), and both gradients against central
// differences.
TEST(ExpertLinearTest, GroupedGemmsAndGradients) {
  std::mt19937 rng(5);
  ExpertGemmShape g{2, 3, 4, 5, 6};
  Ids counts = {4, 0, 2, 1, 3, 4};
  const size_t rows = g.batch * g.experts * g.capacity;
  FVec x = randomFloats(rows * g.inFeatures, rng);
  FVec w = randomFloats(g.experts * g.outFeatures * g.inFeatures, rng);
  FVec y(rows * g.outFeatures);
  expertLinear(x.data(), w.data(), counts.data(), y.data(), g);
  DVec xd = toDouble(x), wd = toDouble(w);
  auto forward = [&](const DVec &xv, const DVec &wv) {
    DVec out(rows * g.outFeatures, 0.0);
    for (int64_t group = 0; group < g.batch * g.experts; ++group) {
      int64_t e = group % g.experts;
      for (int64_t c = 0; c < counts[group]; ++c)
        for (int64_t n = 0; n < g.outFeatures; ++n)
          for (int64_t k = 0; k < g.inFeatures; ++k)
            out[(group * g.capacity + c) * g.outFeatures + n] +=
                xv[(group * g.capacity + c) * g.inFeatures + k] *
                wv[(e * g.outFeatures + n) * g.inFeatures + k];
    }
    return out;
  };
  EXPECT_TRUE(allClose(y, forward(xd, wd), 1e-5, 1e-6));
  FVec R = randomFloats(y.size(), rng);
  DVec Rd = toDouble(R);
  auto objective = [&] { return dot(forward(xd, wd), Rd); };
  FVec dx(x.size()), dw(w.size());
  expertLinearGradInput(R.data(), w.data(), counts.data(), dx.data(), g);
  expertLinearGradWeight(R.data(), x.data(), counts.data(), dw.data(), g);
  EXPECT_TRUE(allClose(dx, finiteDifference(xd, objective), 1e-5, 1e-6));
  EXPECT_TRUE(allClose(dw, finiteDifference(wd, objective), 1e-5, 1e-6));
}

// The load-balancing loss against the reference, its value at perfect
// balance (k: each expert gets k/E of the choices and 1/E of the score),
// and its gradient, with and without the z-loss.
TEST(MoeAuxLossTest, ValueBalanceAndGradient) {
  std::mt19937 rng(6);
  MoeShape s{2, 8, 0, 4, 2, 8};
  for (MoeScoring scoring : kScorings) {
    Routed r = route(s, scoring, rng);
    for (float zCoef : {0.0f, 0.05f}) {
      float loss = 0;
      moeAuxLoss(r.logits.data(), r.experts.data(), &loss, s, scoring, 0.3f,
                 zCoef);
      DVec x = toDouble(r.logits);
      EXPECT_NEAR(loss, auxLossRef(x, r.experts, s, scoring, 0.3, zCoef), 1e-6);
      float lossGrad = 1.7f;
      FVec grad(x.size());
      moeAuxLossGrad(&lossGrad, r.logits.data(), r.experts.data(),
                     grad.data(), s, scoring, 0.3f, zCoef);
      auto objective = [&] {
        return 1.7 * auxLossRef(x, r.experts, s, scoring, 0.3, zCoef);
      };
      EXPECT_TRUE(allClose(grad, finiteDifference(x, objective), 1e-4, 1e-7))
          << "scoring " << int(scoring) << " z " << zCoef;
    }
  }
  // Uniform scores and choices spread evenly: E * sum (k/E)(1/E) = k.
  MoeShape even{1, 4, 0, 4, 2, 4};
  FVec logits(16, 0.5f);
  Ids experts = {0, 1, 2, 3, 0, 1, 2, 3};
  float loss = 0;
  moeAuxLoss(logits.data(), experts.data(), &loss, even, MoeScoring::Softmax,
             1.0f, 0.0f);
  EXPECT_NEAR(loss, 2.0f, 1e-6);
}

// Corrupt routing is refused before anything is read out of bounds.
TEST(MoeDispatchTest, RejectsOutOfRangeChoices) {
  MoeShape s{1, 2, 3, 4, 1, 2};
  FVec x(6, 1.0f), buffer(1 * 4 * 2 * 3);
  Ids experts = {0, 4}, slots = {0, 0};
  EXPECT_THROW(moeDispatch(x.data(), experts.data(), slots.data(),
                           buffer.data(), s),
               std::invalid_argument);
  experts = {0, 1};
  slots = {0, 2};
  EXPECT_THROW(moeDispatch(x.data(), experts.data(), slots.data(),
                           buffer.data(), s),
               std::invalid_argument);
  ExpertGemmShape g{1, 4, 2, 3, 3};
  Ids counts = {0, 3, 0, 0};
  FVec w(4 * 9), y(buffer.size());
  EXPECT_THROW(expertLinear(buffer.data(), w.data(), counts.data(), y.data(), g),
               std::invalid_argument);
}

// A bias smaller than the scores' gaps still reorders close experts: the
// routing with it differs from the routing without, and its gates are the
// unbiased scores' of the experts it picked.
TEST(MoeRouteTest, BiasChangesThePicks) {
  MoeShape s{1, 2, 0, 3, 1, 2};
  // Token 0 prefers expert 0 by a hair, token 1 expert 2 by a lot.
  FVec logits = {0.30f, 0.29f, -1.0f, -1.0f, 0.0f, 2.0f};
  FVec gates(2), bias = {0.0f, 0.05f, 0.0f};
  std::vector<std::int32_t> experts(2), slots(2), counts(3);
  for (MoeScoring scoring : kScorings) {
    moeRoute(logits.data(), nullptr, gates.data(), experts.data(),
             slots.data(), counts.data(), s, scoring);
    EXPECT_EQ(experts, (std::vector<std::int32_t>{0, 2}));
    moeRoute(logits.data(), bias.data(), gates.data(), experts.data(),
             slots.data(), counts.data(), s, scoring);
    EXPECT_EQ(experts, (std::vector<std::int32_t>{1, 2}));
    EXPECT_EQ(counts, (std::vector<std::int32_t>{0, 1, 1}));
    // top-1: the normalised gate of the one choice is 1, the bias unseen.
    EXPECT_FLOAT_EQ(gates[0], 1.0f);
  }
}

// DeepSeek-V3's update on a hand example: loads 6, 2, 4, 4 over two groups
// (mean 4): the busy expert's bias goes down by the rate, the idle one's
// up, the two at the mean keep theirs; in place gives the same.
TEST(MoeBiasTest, UpdateMovesAgainstTheLoadError) {
  std::vector<std::int32_t> counts = {4, 1, 3, 0,   // group 0
                                      2, 1, 1, 4};  // group 1
  FVec load(4);
  moeExpertLoad(counts.data(), load.data(), 2, 4);
  EXPECT_EQ(load, (FVec{6.0f, 2.0f, 4.0f, 4.0f}));
  FVec bias = {0.5f, -0.25f, 0.0f, 1.0f}, next(4);
  moeBiasUpdate(bias.data(), load.data(), next.data(), 4, 0.125f);
  EXPECT_EQ(next, (FVec{0.375f, -0.125f, 0.0f, 1.0f}));
  moeBiasUpdate(bias.data(), load.data(), bias.data(), 4, 0.125f);
  EXPECT_EQ(bias, next);
  // A balanced load leaves the bias alone; a negative rate is refused.
  FVec even = {3.0f, 3.0f, 3.0f, 3.0f};
  moeBiasUpdate(next.data(), even.data(), bias.data(), 4, 0.125f);
  EXPECT_EQ(bias, next);
  EXPECT_THROW(moeBiasUpdate(next.data(), even.data(), bias.data(), 4, -1.0f),
               std::exception);
}

} // namespace
