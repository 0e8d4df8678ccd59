//===- AttentionTest.cpp - attention forward and backward -----------------===//
//
// Against a double-precision reference written from the op description
// (rotate-half RoPE with frequency theta^(-2i/D) at position t, GQA head
// h / (H / Hkv), scores / sqrt(D), optional causal mask, optional sliding
// window: query t sees keys t - W < s <= t), and its central
// finite differences. Each case runs with 1 and with 2 OpenMP threads, which
// between them exercise both threading modes of the kernels (units in
// parallel with serial sgemm; units in sequence with threaded sgemm and
// parallel row loops).
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;
using partition::runtime::ropeAttentionFactor;
using partition::runtime::ropeFrequency;
using partition::runtime::RopeScaling;
using partition::runtime::RopeScalingKind;

namespace {

struct Case {
  Index batch, seq, heads, kvHeads, dim;
  bool causal;
  double theta;          // 0: no RoPE
  std::size_t fdSamples; // FD entries checked per tensor (0 = all)
  RopeScaling scaling = {};
  Index window = 0; // sliding window; 0: none
};

std::string describe(const Case &c) {
  std::ostringstream os;
  os << "B=" << c.batch << " T=" << c.seq << " H=" << c.heads
     << " Hkv=" << c.kvHeads << " D=" << c.dim
     << (c.causal ? " causal" : " full") << " theta=" << c.theta
     << " scaling=" << int(c.scaling.kind) << " window=" << c.window;
  return os.str();
}

AttentionConfig config(const Case &c) {
  AttentionConfig cfg;
  cfg.batch = c.batch;
  cfg.seq = c.seq;
  cfg.numHeads = c.heads;
  cfg.numKvHeads = c.kvHeads;
  cfg.headDim = c.dim;
  cfg.causal = c.causal;
  cfg.ropeTheta = float(c.theta);
  cfg.ropeScaling = c.scaling;
  cfg.window = c.window;
  return cfg;
}

/// The scaled frequency of pair i of D, written from transformers'
/// rope_type "linear", "llama3" (_compute_llama3_parameters) and "yarn"
/// (_compute_yarn_parameters) independently of Rope.h.
double scaledFrequency(double freq, const RopeScaling &s, double theta = 0,
                       Index i = 0, Index dim = 0) {
  if (s.kind == RopeScalingKind::Linear)
    return freq / s.factor;
  if (s.kind == RopeScalingKind::Yarn) {
    auto correctionDim = [&](double rotations) {
      return dim * std::log(s.originalContext / (rotations * 2 * M_PI)) /
             (2 * std::log(theta));
    };
    double low = std::max(std::floor(correctionDim(s.betaFast)), 0.0);
    double high = std::min(std::ceil(correctionDim(s.betaSlow)), dim - 1.0);
    if (low == high)
      high += 0.001;
    double extrapolation =
        1 - std::clamp((double(i) - low) / (high - low), 0.0, 1.0);
    return freq / s.factor * (1 - extrapolation) + freq * extrapolation;
  }
  if (s.kind != RopeScalingKind::Llama3)
    return freq;
  const double wavelen = 2 * M_PI / freq;
  const double low = s.originalContext / s.lowFreqFactor;
  const double high = s.originalContext / s.highFreqFactor;
  double llama = wavelen > low ? freq / s.factor : freq;
  const double smooth = (s.originalContext / wavelen - s.lowFreqFactor) /
                        (s.highFreqFactor - s.lowFreqFactor);
  const double smoothed = (1 - smooth) * llama / s.factor + smooth * llama;
  const bool medium = !(wavelen < high) && !(wavelen > low);
  return medium ? smoothed : llama;
}

/// Rotate-half RoPE of x [B, T, heads * D] in double.
DVec ropeRef(const DVec &x, const Case &c, Index heads) {
  if (c.theta == 0.0)
    return x;
  DVec y = x;
  const Index half = c.dim / 2;
  for (Index b = 0; b < c.batch; ++b)
    for (Index t = 0; t < c.seq; ++t)
      for (Index h = 0; h < heads; ++h) {
        const Index base = ((b * c.seq + t) * heads + h) * c.dim;
        for (Index i = 0; i < half; ++i) {
          const double freq = scaledFrequency(
              std::pow(c.theta, -2.0 * double(i) / c.dim), c.scaling,
              c.theta, i, c.dim);
          const double angle = double(t) * freq;
          // yarn's attention factor (0.1 ln factor + 1) scales cos and sin.
          const double m = c.scaling.kind == RopeScalingKind::Yarn
                               ? 0.1 * std::log(c.scaling.factor) + 1
                               : 1.0;
          const double x1 = x[base + i], x2 = x[base + i + half];
          y[base + i] = m * (x1 * std::cos(angle) - x2 * std::sin(angle));
          y[base + i + half] =
              m * (x2 * std::cos(angle) + x1 * std::sin(angle));
        }
      }
  return y;
}

DVec attentionRef(const DVec &q, const DVec &k, const DVec &v, const Case &c) {
  const DVec qr = ropeRef(q, c, c.heads), kr = ropeRef(k, c, c.kvHeads);
  const Index T = c.seq, D = c.dim, group = c.heads / c.kvHeads;
  const Index ldq = c.heads * D, ldk = c.kvHeads * D;
  DVec out(q.size(), 0.0), p(T);
  for (Index b = 0; b < c.batch; ++b)
    for (Index h = 0; h < c.heads; ++h) {
      const Index kvh = h / group;
      for (Index t = 0; t < T; ++t) {
        const Index visible = c.causal ? t + 1 : T;
        // transformers' sliding_window_overlay: kv_idx > q_idx - window.
        Index first = 0;
        while (c.window > 0 && !(first > t - c.window))
          ++first;
        const double *qt = &qr[(b * T + t) * ldq + h * D];
        double m = -1e300;
        for (Index s = first; s < visible; ++s) {
          const double *ks = &kr[(b * T + s) * ldk + kvh * D];
          double score = 0;
          for (Index d = 0; d < D; ++d)
            score += qt[d] * ks[d];
          p[s] = score / std::sqrt(double(D));
          m = std::max(m, p[s]);
        }
        double sum = 0;
        for (Index s = first; s < visible; ++s)
          sum += (p[s] = std::exp(p[s] - m));
        double *o = &out[(b * T + t) * ldq + h * D];
        for (Index s = first; s < visible; ++s) {
          const double *vs = &v[(b * T + s) * ldk + kvh * D];
          for (Index d = 0; d < D; ++d)
            o[d] += p[s] / sum * vs[d];
        }
      }
    }
  return out;
}

const Case kCases[] = {
    // GQA + RoPE + causal, every entry by FD.
    {2, 5, 4, 2, 6, true, 10000.0, 0},
    // Plain multi-head, no mask, no RoPE.
    {2, 6, 3, 3, 4, false, 0.0, 0},
    // GQA + RoPE, no mask.
    {3, 9, 6, 2, 8, false, 100.0, 0},
    // Longer than the 64-row causal block (two blocks, a ragged one); one kv
    // unit, so the backward runs its units in sequence.
    {1, 70, 2, 1, 4, true, 500.0, 40},
    // One head: the forward runs its single unit in sequence too.
    {1, 67, 1, 1, 8, false, 10000.0, 40},
    // The rotary bases of Llama 3 (500000) and Mistral / Qwen2 (1e6): the
    // low frequencies nearly stop turning, the high ones as before.
    {2, 33, 4, 2, 8, true, 500000.0, 40},
    {1, 40, 2, 1, 16, true, 1000000.0, 40},
    // RoPE scaling: linear, and llama3 with an original context of 100 so
    // that a head of 16 has pairs in each of its three bands (kept,
    // interpolated, divided by the factor).
    {2, 33, 4, 2, 8, true, 10000.0, 40, {RopeScalingKind::Linear, 4.0}},
    {1, 40, 2, 1, 16, true, 10000.0, 40,
     {RopeScalingKind::Llama3, 8.0, 1.0, 4.0, 100.0}},
    // Sliding windows: of one key (each query sees itself only), every
    // entry by FD; one narrower than a 64-row block over two blocks (GQA,
    // a kv unit in sequence); one wider than a block, whose first key
    // block of a row block is rounded down (T = 150: three blocks); with
    // RoPE scaling (the attention_scaled row's two features together).
    {2, 5, 4, 2, 6, true, 10000.0, 0, {}, 1},
    {1, 70, 2, 1, 4, true, 500.0, 40, {}, 7},
    {1, 150, 2, 2, 8, true, 10000.0, 40, {}, 100},
    {2, 33, 4, 2, 8, true, 10000.0, 40, {RopeScalingKind::Linear, 4.0}, 9},
    // yarn with an original context of 32: at D = 16 pair 0 is kept, pair
    // 1 on the ramp, the rest divided by the factor.
    {1, 40, 2, 1, 16, true, 10000.0, 40,
     RopeScaling::yarn(4.0, 32.0, 1.0, 32.0)},
};

// transformers' own yarn frequencies and attention factor, printed once
// (transformers 5.25.0, torch 2.15.0, float32) by
//   cfg = LlamaConfig(hidden_size=H, num_attention_heads=4,
//       max_position_embeddings=P, rope_parameters={"rope_type": "yarn",
//       "rope_theta": THETA, "factor": F,
//       "original_max_position_embeddings": C, "beta_fast": BF,
//       "beta_slow": BS})
//   inv_freq, attention_factor = modeling_rope_utils
//       ._compute_yarn_parameters(cfg)
// for the two configurations below: Rope.h must give the same (within
// float32's rounding of transformers' values).
TEST(AttentionRopeScaling, YarnMatchesTransformers) {
  struct Reference {
    Index dim;
    double theta;
    RopeScaling scaling;
    std::vector<double> frequencies;
    double attentionFactor;
  };
  const Reference references[] = {
      // H 64 (D 16), P 128, theta 1e4, F 4, C 32, BF 32, BS 1.
      {16, 10000.0, RopeScaling::yarn(4.0, 32.0, 1.0, 32.0),
       {1.0, 0.19764235615730286, 0.02500000037252903, 0.007905694656074047,
        0.0024999999441206455, 0.0007905694656074047, 0.0002500000118743628,
        7.905694656074047e-05},
       1.138629436111989},
      // H 128 (D 32), P 4096, theta 1e6, F 8, C 512, BF 16, BS 2.
      {32, 1000000.0, RopeScaling::yarn(8.0, 16.0, 2.0, 512.0),
       {1.0, 0.4216965138912201, 0.13892807066440582, 0.04218154773116112,
        0.010870330035686493, 0.0016669018659740686, 0.0007029266562312841,
        0.00029642172739841044, 0.0001250000059371814, 5.271206100587733e-05,
        2.2228492525755428e-05, 9.373678039992228e-06, 3.9528467823402025e-06,
        1.6669017668391461e-06, 7.029266839708725e-07,
        2.964217173939687e-07},
       1.2079441541679836},
  };
  for (const Reference &r : references) {
    SCOPED_TRACE("D=" + std::to_string(r.dim));
    for (Index i = 0; i < r.dim / 2; ++i) {
      const double ours = ropeFrequency(i, r.dim, r.theta, r.scaling);
      EXPECT_NEAR(ours, r.frequencies[i], 2e-7 * r.frequencies[i]) << i;
      // And the test's own reference, which the attention cases use.
      EXPECT_NEAR(ours,
                  scaledFrequency(std::pow(r.theta, -2.0 * i / r.dim),
                                  r.scaling, r.theta, i, r.dim),
                  1e-15 * r.frequencies[i]);
    }
    EXPECT_NEAR(ropeAttentionFactor(r.scaling), r.attentionFactor, 1e-15);
  }
  // No other scaling scales cos and sin.
  EXPECT_EQ(ropeAttentionFactor({RopeScalingKind::Llama3, 8.0, 1.0, 4.0,
                                 100.0}),
            1.0);
}

// The llama3 rule really has three bands at the last case's sizes, so the
// case above checks each (wavelength 2 pi / theta^(-2i/D), i < 8).
TEST(AttentionRopeScaling, Llama3CaseCoversEveryBand) {
  const RopeScaling s{RopeScalingKind::Llama3, 8.0, 1.0, 4.0, 100.0};
  int kept = 0, smoothed = 0, divided = 0;
  for (int i = 0; i < 8; ++i) {
    const double freq = std::pow(10000.0, -2.0 * i / 16.0);
    const double scaled = ropeFrequency(i, 16, 10000.0, s);
    EXPECT_NEAR(scaled, scaledFrequency(freq, s), 1e-15 * freq);
    kept += scaled == freq;
    divided += scaled == freq / 8.0;
    smoothed += scaled != freq && scaled != freq / 8.0;
  }
  EXPECT_GT(kept, 0);
  EXPECT_GT(smoothed, 0);
  EXPECT_GT(divided, 0);
}

// Forward vs double reference: rtol 1e-5, atol 1e-5 (outputs are convex
// combinations of values in [-1, 1]). Gradients vs FD: rtol 2e-5, atol
// 2e-5 * max|grad| (fp32 softmax backward over up to 70 positions; the
// worst error seen is ~15x below that).
TEST(AttentionTest, ForwardAndGradMatchReferenceAndFiniteDifferences) {
  std::mt19937 rng(60);
  for (const Case &c : kCases) {
    SCOPED_TRACE(describe(c));
    const Index qSize = c.batch * c.seq * c.heads * c.dim;
    const Index kSize = c.batch * c.seq * c.kvHeads * c.dim;
    FVec qF = randomFloats(qSize, rng, -2.0f, 2.0f);
    FVec kF = randomFloats(kSize, rng, -2.0f, 2.0f);
    FVec vF = randomFloats(kSize, rng);
    FVec r = randomFloats(qSize, rng);
    DVec q = toDouble(qF), k = toDouble(kF), v = toDouble(vF),
         rd = toDouble(r);
    const DVec outRef = attentionRef(q, k, v, c);

    auto objective = [&] { return dot(attentionRef(q, k, v, c), rd); };
    auto qIdx = sampleIndices(q.size(), c.fdSamples ? c.fdSamples : q.size(), rng);
    auto kIdx = sampleIndices(k.size(), c.fdSamples ? c.fdSamples : k.size(), rng);
    auto vIdx = sampleIndices(v.size(), c.fdSamples ? c.fdSamples : v.size(), rng);
    const DVec fdq = finiteDifference(q, objective, qIdx);
    const DVec fdk = finiteDifference(k, objective, kIdx);
    const DVec fdv = finiteDifference(v, objective, vIdx);

    for (int threads : {1, 2}) {
      SCOPED_TRACE("threads " + std::to_string(threads));
      ScopedOmpThreads pin(threads);
      FVec out(qSize, 42.0f);
      attention(qF.data(), kF.data(), vF.data(), out.data(), config(c));
      EXPECT_TRUE(allClose(out, outRef, 1e-5, 1e-5));

      FVec dq(qSize, 42.0f), dk(kSize, 42.0f), dv(kSize, 42.0f);
      attentionGrad(r.data(), qF.data(), kF.data(), vF.data(), dq.data(),
                    dk.data(), dv.data(), config(c));
      EXPECT_TRUE(allCloseAt(dq, qIdx, fdq, 2e-5, 2e-5 * maxAbs(fdq)));
      EXPECT_TRUE(allCloseAt(dk, kIdx, fdk, 2e-5, 2e-5 * maxAbs(fdk)));
      EXPECT_TRUE(allCloseAt(dv, vIdx, fdv, 2e-5, 2e-5 * maxAbs(fdv)));
    }
  }
}

// The causal mask is real: with it, output row t must not change when
// keys/values at positions > t change.
TEST(AttentionTest, CausalOutputIgnoresTheFuture) {
  std::mt19937 rng(61);
  const Case c{1, 80, 2, 2, 8, true, 10000.0, 0};
  const Index size = c.seq * c.heads * c.dim;
  FVec q = randomFloats(size, rng), k = randomFloats(size, rng),
       v = randomFloats(size, rng);
  FVec out1(size), out2(size);
  attention(q.data(), k.data(), v.data(), out1.data(), config(c));
  const Index cut = 40, row = c.heads * c.dim;
  for (Index i = (cut + 1) * row; i < size; ++i) {
    k[i] += 1.0f;
    v[i] -= 3.0f;
  }
  attention(q.data(), k.data(), v.data(), out2.data(), config(c));
  for (Index i = 0; i < (cut + 1) * row; ++i)
    ASSERT_EQ(out1[i], out2[i]) << "position " << i / row;
  EXPECT_NE(out1[size - 1], out2[size - 1]);
}

// The window is real: output row t must not change when the keys and
// values at positions <= t - W change, and must when the last of them in
// its window does.
TEST(AttentionTest, WindowOutputIgnoresThePast) {
  std::mt19937 rng(63);
  Case c{1, 150, 2, 2, 8, true, 10000.0, 0};
  c.window = 20;
  const Index size = c.seq * c.heads * c.dim, row = c.heads * c.dim;
  FVec q = randomFloats(size, rng), k = randomFloats(size, rng),
       v = randomFloats(size, rng);
  FVec out1(size), out2(size);
  attention(q.data(), k.data(), v.data(), out1.data(), config(c));
  const Index cut = 70; // positions <= cut change
  for (Index i = 0; i < (cut + 1) * row; ++i) {
    k[i] += 1.0f;
    v[i] -= 3.0f;
  }
  attention(q.data(), k.data(), v.data(), out2.data(), config(c));
  for (Index i = (cut + c.window) * row; i < size; ++i)
    ASSERT_EQ(out1[i], out2[i]) << "position " << i / row;
  EXPECT_NE(out1[(cut + c.window - 1) * row], out2[(cut + c.window - 1) * row]);
}

// A window of at least the sequence masks nothing beyond causality: the
// same bits as none, forward and backward.
TEST(AttentionTest, WindowOfTheWholeSequenceIsNone) {
  std::mt19937 rng(64);
  ScopedOmpThreads pin(2);
  Case c{2, 70, 4, 2, 8, true, 10000.0, 0};
  const Index qSize = c.batch * c.seq * c.heads * c.dim;
  const Index kSize = c.batch * c.seq * c.kvHeads * c.dim;
  FVec q = randomFloats(qSize, rng), k = randomFloats(kSize, rng),
       v = randomFloats(kSize, rng), g = randomFloats(qSize, rng);
  auto run = [&](Index window) {
    c.window = window;
    FVec out(qSize), dq(qSize), dk(kSize), dv(kSize);
    attention(q.data(), k.data(), v.data(), out.data(), config(c));
    attentionGrad(g.data(), q.data(), k.data(), v.data(), dq.data(),
                  dk.data(), dv.data(), config(c));
    return std::vector<FVec>{out, dq, dk, dv};
  };
  const std::vector<FVec> none = run(0);
  EXPECT_EQ(run(70), none);
  EXPECT_EQ(run(1000), none);
  EXPECT_NE(run(69), none);
}

struct FreeDeleter {
  void operator()(void *p) const { std::free(p); }
};

// A caller-provided workspace of the advertised size gives the same bits as
// the thread-local one; one thread's slice still works (fewer threads); less
// than that throws.
TEST(AttentionTest, CallerWorkspace) {
  std::mt19937 rng(62);
  ScopedOmpThreads pin(2);
  const Case c{2, 33, 4, 2, 8, true, 10000.0, 0};
  const AttentionConfig cfg = config(c);
  const Index qSize = c.batch * c.seq * c.heads * c.dim;
  const Index kSize = c.batch * c.seq * c.kvHeads * c.dim;
  FVec q = randomFloats(qSize, rng), k = randomFloats(kSize, rng),
       v = randomFloats(kSize, rng), g = randomFloats(qSize, rng);
  FVec out(qSize), dq(qSize), dk(kSize), dv(kSize);
  attention(q.data(), k.data(), v.data(), out.data(), cfg);
  attentionGrad(g.data(), q.data(), k.data(), v.data(), dq.data(), dk.data(),
                dv.data(), cfg);

  const std::size_t bytes = attentionGradWorkspaceSize(cfg);
  ASSERT_GE(bytes, attentionWorkspaceSize(cfg));
  std::unique_ptr<void, FreeDeleter> ws(
      std::aligned_alloc(64, (bytes + 63) / 64 * 64));
  FVec out2(qSize), dq2(qSize), dk2(kSize), dv2(kSize);
  attention(q.data(), k.data(), v.data(), out2.data(), cfg, ws.get(),
            attentionWorkspaceSize(cfg));
  attentionGrad(g.data(), q.data(), k.data(), v.data(), dq2.data(),
                dk2.data(), dv2.data(), cfg, ws.get(), bytes);
  EXPECT_EQ(out, out2);
  EXPECT_EQ(dq, dq2);
  EXPECT_EQ(dk, dk2);
  EXPECT_EQ(dv, dv2);

  // Half the size: one thread's slice.
  attentionGrad(g.data(), q.data(), k.data(), v.data(), dq2.data(),
                dk2.data(), dv2.data(), cfg, ws.get(), bytes / 2);
  EXPECT_TRUE(allClose(dq2, DVec(dq.begin(), dq.end()), 1e-5, 1e-6));
  EXPECT_TRUE(allClose(dk2, DVec(dk.begin(), dk.end()), 1e-5, 1e-6));
  EXPECT_TRUE(allClose(dv2, DVec(dv.begin(), dv.end()), 1e-5, 1e-6));

  EXPECT_THROW(attentionGrad(g.data(), q.data(), k.data(), v.data(),
                             dq2.data(), dk2.data(), dv2.data(), cfg, ws.get(),
                             64),
               std::invalid_argument);
}

TEST(AttentionTest, RejectsBadHeadCounts) {
  AttentionConfig cfg;
  cfg.batch = 1;
  cfg.seq = 4;
  cfg.numHeads = 6;
  cfg.numKvHeads = 4;
  cfg.headDim = 8;
  EXPECT_THROW(attentionWorkspaceSize(cfg), std::invalid_argument);
  cfg.numKvHeads = 3;
  cfg.headDim = 7;
  cfg.ropeTheta = 10000.0f;
  EXPECT_THROW(attentionWorkspaceSize(cfg), std::invalid_argument);
}

TEST(AttentionTest, RejectsAWindowWithoutCausality) {
  AttentionConfig cfg;
  cfg.batch = 1;
  cfg.seq = 4;
  cfg.numHeads = cfg.numKvHeads = 1;
  cfg.headDim = 8;
  cfg.window = 2;
  EXPECT_NO_THROW(attentionWorkspaceSize(cfg));
  cfg.causal = false;
  EXPECT_THROW(attentionWorkspaceSize(cfg), std::invalid_argument);
  cfg.causal = true;
  cfg.window = -1;
  EXPECT_THROW(attentionWorkspaceSize(cfg), std::invalid_argument);
}

} // namespace
