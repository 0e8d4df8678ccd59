//===- AttentionPositionsTest.cpp - attention and embeddings at positions -===//
//
// The kernels of explicit positions (context parallelism):
// - attentionPositions(Grad) against a double-precision reference written
//   from the op description (query t sees key s iff kp[s] <= qp[t], within
//   the window; RoPE at the positions), with Tq != Tk, GQA, windows, RoPE
//   scaling, and query/key blocks that straddle the 64-row blocking;
// - the properties context parallelism relies on: attention over a
//   sequence permuted into the zigzag layout, with its positions, is the
//   plain attention's rows permuted (gradients too); and a rank's local
//   queries against all the keys are those rows of the whole attention,
//   its dK / dV one part of a sum over ranks;
// - sequencePositions' zigzag order and the positioned position embedding.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <cmath>
#include <numeric>
#include <stdexcept>
#include <vector>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;
using partition::runtime::ropeAttentionFactor;
using partition::runtime::ropeFrequency;
using partition::runtime::RopeScaling;
using partition::runtime::RopeScalingKind;

namespace {

using Ints = std::vector<std::int32_t>;

struct Case {
  Index batch, tq, tk, heads, kvHeads, dim;
  bool causal;
  double theta;
  Index window = 0;
  RopeScaling scaling = {};
};

AttentionConfig config(const Case &c) {
  AttentionConfig cfg;
  cfg.batch = c.batch;
  cfg.seq = c.tq;
  cfg.numHeads = c.heads;
  cfg.numKvHeads = c.kvHeads;
  cfg.headDim = c.dim;
  cfg.causal = c.causal;
  cfg.ropeTheta = float(c.theta);
  cfg.ropeScaling = c.scaling;
  cfg.window = c.window;
  return cfg;
}

struct Grads {
  DVec dq, dk, dv;
};

/// Rotates (or, inverse, un-rotates) row x of D at position p.
void rotate(const Case &c, double *x, std::int32_t p, bool inverse) {
  if (c.theta <= 0)
    return;
  const Index half = c.dim / 2;
  const double amplitude = ropeAttentionFactor(c.scaling);
  for (Index i = 0; i < half; ++i) {
    const double angle = p * ropeFrequency(i, c.dim, c.theta, c.scaling);
    const double co = amplitude * std::cos(angle),
                 si = amplitude * std::sin(angle);
    const double a = x[i], b = x[i + half];
    if (!inverse) {
      x[i] = a * co - b * si;
      x[i + half] = b * co + a * si;
    } else {
      x[i] = a * co + b * si;
      x[i + half] = b * co - a * si;
    }
  }
}

/// Forward (and, with dout, backward) in double, straight from the
/// definition.
DVec reference(const Case &c, const DVec &q, const DVec &k, const DVec &v,
               const Ints &qp, const Ints &kp, const DVec *dout = nullptr,
               Grads *grads = nullptr) {
  const Index D = c.dim, ldq = c.heads * D, ldk = c.kvHeads * D;
  const double scale = 1.0 / std::sqrt(double(D));
  DVec out(c.batch * c.tq * ldq, 0.0);
  if (grads) {
    grads->dq.assign(q.size(), 0.0);
    grads->dk.assign(k.size(), 0.0);
    grads->dv.assign(v.size(), 0.0);
  }
  auto visible = [&](Index t, Index s) {
    return !c.causal ||
           (kp[s] <= qp[t] && (c.window == 0 || kp[s] > qp[t] - c.window));
  };
  for (Index b = 0; b < c.batch; ++b)
    for (Index h = 0; h < c.heads; ++h) {
      const Index kvh = h / (c.heads / c.kvHeads);
      std::vector<DVec> qr(c.tq, DVec(D)), kr(c.tk, DVec(D));
      for (Index t = 0; t < c.tq; ++t) {
        for (Index d = 0; d < D; ++d)
          qr[t][d] = q[(b * c.tq + t) * ldq + h * D + d];
        rotate(c, qr[t].data(), qp[t], false);
      }
      for (Index s = 0; s < c.tk; ++s) {
        for (Index d = 0; d < D; ++d)
          kr[s][d] = k[(b * c.tk + s) * ldk + kvh * D + d];
        rotate(c, kr[s].data(), kp[s], false);
      }
      for (Index t = 0; t < c.tq; ++t) {
        DVec p(c.tk, 0.0);
        double m = -1e300;
        for (Index s = 0; s < c.tk; ++s)
          if (visible(t, s)) {
            p[s] = scale * dot(qr[t], kr[s]);
            m = std::max(m, p[s]);
          }
        double sum = 0;
        for (Index s = 0; s < c.tk; ++s) {
          p[s] = visible(t, s) ? std::exp(p[s] - m) : 0.0;
          sum += p[s];
        }
        if (sum == 0)
          continue; // sees no key: zeros
        for (double &x : p)
          x /= sum;
        const Index o = (b * c.tq + t) * ldq + h * D;
        for (Index s = 0; s < c.tk; ++s)
          for (Index d = 0; d < D; ++d)
            out[o + d] += p[s] * v[(b * c.tk + s) * ldk + kvh * D + d];
        if (!grads)
          continue;
        DVec dp(c.tk, 0.0);
        double rowDot = 0;
        for (Index s = 0; s < c.tk; ++s) {
          for (Index d = 0; d < D; ++d)
            dp[s] += (*dout)[o + d] * v[(b * c.tk + s) * ldk + kvh * D + d];
          rowDot += p[s] * dp[s];
        }
        DVec dqr(D, 0.0);
        for (Index s = 0; s < c.tk; ++s) {
          const double ds = scale * p[s] * (dp[s] - rowDot);
          DVec dkr(D);
          for (Index d = 0; d < D; ++d) {
            dqr[d] += ds * kr[s][d];
            dkr[d] = ds * qr[t][d];
            grads->dv[(b * c.tk + s) * ldk + kvh * D + d] +=
                p[s] * (*dout)[o + d];
          }
          rotate(c, dkr.data(), kp[s], true);
          for (Index d = 0; d < D; ++d)
            grads->dk[(b * c.tk + s) * ldk + kvh * D + d] += dkr[d];
        }
        rotate(c, dqr.data(), qp[t], true);
        for (Index d = 0; d < D; ++d)
          grads->dq[o + d] = dqr[d];
      }
    }
  return out;
}

struct Outputs {
  FVec out, dq, dk, dv;
};

Outputs run(const Case &c, const FVec &q, const FVec &k, const FVec &v,
        const Ints &qp, const Ints &kp, const FVec &dout) {
  Outputs r;
  r.out.assign(q.size(), -7.0f);
  attentionPositions(q.data(), k.data(), v.data(), qp.data(), kp.data(),
                     r.out.data(), c.tk, config(c));
  r.dq.assign(q.size(), -7.0f);
  r.dk.assign(k.size(), -7.0f);
  r.dv.assign(v.size(), -7.0f);
  attentionPositionsGrad(dout.data(), q.data(), k.data(), v.data(), qp.data(),
                         kp.data(), r.dq.data(), r.dk.data(), r.dv.data(),
                         c.tk, config(c));
  return r;
}

Ints zigzag(Index length, Index chunks) {
  Ints p(length);
  sequencePositions(p.data(), length, chunks);
  return p;
}

/// Rows of a [B, T, C] tensor in layout order: layout row i is original
/// row positions[i].
template <typename Vec>
Vec permuteRows(const Vec &x, Index batch, Index seq, const Ints &positions) {
  const Index channels = Index(x.size()) / (batch * seq);
  Vec y(x.size());
  for (Index b = 0; b < batch; ++b)
    for (Index i = 0; i < seq; ++i)
      std::copy_n(x.begin() + (b * seq + positions[i]) * channels, channels,
                  y.begin() + (b * seq + i) * channels);
  return y;
}

/// Rows [r0, r1) of the sequence of a [B, T, C] tensor.
FVec sliceRows(const FVec &x, Index batch, Index seq, Index r0, Index r1) {
  const Index channels = Index(x.size()) / (batch * seq);
  FVec y;
  for (Index b = 0; b < batch; ++b)
    y.insert(y.end(), x.begin() + (b * seq + r0) * channels,
             x.begin() + (b * seq + r1) * channels);
  return y;
}

class AttentionPositionsTest : public ::testing::TestWithParam<int> {};

TEST(SequencePositions, ZigzagOrder) {
  EXPECT_EQ(zigzag(8, 1), (Ints{0, 1, 2, 3, 4, 5, 6, 7}));
  EXPECT_EQ(zigzag(8, 4), (Ints{0, 1, 6, 7, 2, 3, 4, 5}));
  EXPECT_EQ(zigzag(16, 8),
            (Ints{0, 1, 14, 15, 2, 3, 12, 13, 4, 5, 10, 11, 6, 7, 8, 9}));
  Ints p(6);
  EXPECT_THROW(sequencePositions(p.data(), 6, 3), std::exception);
  EXPECT_THROW(sequencePositions(p.data(), 6, 4), std::exception);
}

TEST(AttentionPositions, MatchesReference) {
  RopeScaling llama3;
  llama3.kind = RopeScalingKind::Llama3;
  llama3.factor = 8;
  llama3.lowFreqFactor = 1;
  llama3.highFreqFactor = 4;
  llama3.originalContext = 32;
  const Case cases[] = {
      {2, 80, 80, 2, 2, 8, true, 0},           // natural-ish, 2 blocks
      {1, 70, 150, 4, 2, 8, true, 10000},      // Tq != Tk, GQA, RoPE
      {1, 40, 130, 2, 1, 8, true, 10000, 24},  // window
      {2, 33, 90, 2, 2, 4, false, 100},        // not causal
      {1, 66, 100, 4, 1, 8, true, 500000, 0, llama3},
  };
  std::mt19937 rng(7);
  for (const Case &c : cases) {
    SCOPED_TRACE("Tq=" + std::to_string(c.tq) + " Tk=" + std::to_string(c.tk));
    const Index ldq = c.heads * c.dim, ldk = c.kvHeads * c.dim;
    FVec q = randomFloats(c.batch * c.tq * ldq, rng),
         k = randomFloats(c.batch * c.tk * ldk, rng),
         v = randomFloats(c.batch * c.tk * ldk, rng),
         dout = randomFloats(c.batch * c.tq * ldq, rng);
    // Keys at a shuffled 0..Tk-1; queries at random positions among them
    // (some with few or no visible keys).
    Ints kp(c.tk);
    std::iota(kp.begin(), kp.end(), 0);
    std::shuffle(kp.begin(), kp.end(), rng);
    Ints qp = randomIds(c.tq, std::int32_t(c.tk + 5), rng);
    Outputs r = run(c, q, k, v, qp, kp, dout);
    DVec dd = toDouble(dout);
    Grads g;
    DVec out = reference(c, toDouble(q), toDouble(k), toDouble(v), qp, kp,
                         &dd, &g);
    EXPECT_TRUE(allClose(r.out, out, 1e-4, 1e-5));
    EXPECT_TRUE(allClose(r.dq, g.dq, 1e-3, 1e-5));
    EXPECT_TRUE(allClose(r.dk, g.dk, 1e-3, 1e-5));
    EXPECT_TRUE(allClose(r.dv, g.dv, 1e-3, 1e-5));
  }
}

/// The zigzag property for a few shapes and threads: positioned attention
/// over the permuted sequence is the plain attention's rows permuted.
TEST_P(AttentionPositionsTest, PermutedSequenceEqualsPermutedRows) {
  ScopedOmpThreads pin(GetParam());
  const Case cases[] = {
      {2, 256, 256, 4, 2, 16, true, 10000},
      {1, 192, 192, 2, 2, 8, true, 10000, 40},
      {1, 128, 128, 2, 1, 8, false, 0},
  };
  std::mt19937 rng(11);
  for (const Case &c : cases)
    for (Index chunks : {Index(1), Index(4), Index(8)}) {
      SCOPED_TRACE("T=" + std::to_string(c.tq) +
                   " chunks=" + std::to_string(chunks));
      const Index ldq = c.heads * c.dim, ldk = c.kvHeads * c.dim;
      FVec q = randomFloats(c.batch * c.tq * ldq, rng),
           k = randomFloats(c.batch * c.tk * ldk, rng),
           v = randomFloats(c.batch * c.tk * ldk, rng),
           dout = randomFloats(c.batch * c.tq * ldq, rng);
      AttentionConfig plain = config(c);
      FVec out(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
      attention(q.data(), k.data(), v.data(), out.data(), plain);
      attentionGrad(dout.data(), q.data(), k.data(), v.data(), dq.data(),
                    dk.data(), dv.data(), plain);
      const Ints pos = zigzag(c.tq, chunks);
      auto perm = [&](const FVec &x) {
        return permuteRows(x, c.batch, c.tq, pos);
      };
      Outputs r = run(c, perm(q), perm(k), perm(v), pos, pos, perm(dout));
      EXPECT_TRUE(allClose(r.out, toDouble(perm(out)), 1e-5, 1e-6));
      EXPECT_TRUE(allClose(r.dq, toDouble(perm(dq)), 1e-4, 1e-6));
      EXPECT_TRUE(allClose(r.dk, toDouble(perm(dk)), 1e-4, 1e-6));
      EXPECT_TRUE(allClose(r.dv, toDouble(perm(dv)), 1e-4, 1e-6));
    }
}

/// Llama 3's all-gather context parallelism: rank r's queries (its block of
/// the zigzag layout, with their positions) against all the keys give those
/// rows of the whole attention and dQ; dK and dV are the sum over ranks.
TEST_P(AttentionPositionsTest, LocalQueriesAgainstGatheredKeys) {
  ScopedOmpThreads pin(GetParam());
  const Case whole{2, 256, 256, 4, 2, 16, true, 10000, 100};
  const Index cp = 4, local = whole.tq / cp;
  std::mt19937 rng(5);
  const Index ldq = whole.heads * whole.dim, ldk = whole.kvHeads * whole.dim;
  FVec q = randomFloats(whole.batch * whole.tq * ldq, rng),
       k = randomFloats(whole.batch * whole.tk * ldk, rng),
       v = randomFloats(whole.batch * whole.tk * ldk, rng),
       dout = randomFloats(whole.batch * whole.tq * ldq, rng);
  const Ints pos = zigzag(whole.tq, 2 * cp);
  Outputs all = run(whole, q, k, v, pos, pos, dout);
  DVec dkSum(k.size(), 0.0), dvSum(v.size(), 0.0);
  for (Index rank = 0; rank < cp; ++rank) {
    SCOPED_TRACE("rank " + std::to_string(rank));
    Case c = whole;
    c.tq = local;
    const Index r0 = rank * local, r1 = r0 + local;
    Ints qp(pos.begin() + r0, pos.begin() + r1);
    Outputs r = run(c, sliceRows(q, c.batch, whole.tq, r0, r1), k, v, qp, pos,
                sliceRows(dout, c.batch, whole.tq, r0, r1));
    EXPECT_TRUE(allClose(
        r.out, toDouble(sliceRows(all.out, c.batch, whole.tq, r0, r1)), 1e-5,
        1e-6));
    EXPECT_TRUE(allClose(
        r.dq, toDouble(sliceRows(all.dq, c.batch, whole.tq, r0, r1)), 1e-5,
        1e-6));
    for (std::size_t i = 0; i < dkSum.size(); ++i) {
      dkSum[i] += r.dk[i];
      dvSum[i] += r.dv[i];
    }
  }
  EXPECT_TRUE(allClose(all.dk, dkSum, 1e-4, 1e-6));
  EXPECT_TRUE(allClose(all.dv, dvSum, 1e-4, 1e-6));
}

INSTANTIATE_TEST_SUITE_P(Threads, AttentionPositionsTest,
                         ::testing::Values(1, 2));

TEST(PositionEmbeddingAt, GathersAndScatters) {
  const Index B = 2, T = 6, P = 9, C = 5;
  std::mt19937 rng(3);
  FVec x = randomFloats(B * T * C, rng), table = randomFloats(P * C, rng),
       grad = randomFloats(B * T * C, rng);
  const Ints pos{4, 0, 8, 4, 2, 1}; // 4 twice: its row sums both
  FVec y(x.size()), dtable(P * C, -3.0f);
  positionEmbeddingAt(x.data(), table.data(), pos.data(), y.data(), B, T, P, C);
  positionEmbeddingAtGrad(grad.data(), pos.data(), dtable.data(), B, T, P, C);
  DVec yRef(x.size()), dRef(P * C, 0.0);
  for (Index b = 0; b < B; ++b)
    for (Index t = 0; t < T; ++t)
      for (Index c = 0; c < C; ++c) {
        yRef[(b * T + t) * C + c] =
            double(x[(b * T + t) * C + c]) + table[pos[t] * C + c];
        dRef[pos[t] * C + c] += grad[(b * T + t) * C + c];
      }
  EXPECT_TRUE(allClose(y, yRef, 0, 1e-6));
  EXPECT_TRUE(allClose(dtable, dRef, 1e-6, 1e-6));
  const Ints bad{0, 1, 2, 9, 3, 4};
  EXPECT_THROW(positionEmbeddingAt(x.data(), table.data(), bad.data(),
                                   y.data(), B, T, P, C),
               std::exception);
}

} // namespace
