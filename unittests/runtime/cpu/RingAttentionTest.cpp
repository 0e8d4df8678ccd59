//===- RingAttentionTest.cpp - attention blocks, merge, block backward ----===//
//
// The ring attention kernels against the attention kernels and a
// double-precision reference written from the op descriptions (RoPE at each
// row's position with Rope.h's frequencies, whose agreement with
// transformers AttentionTest checks): one block holding every key is
// attention; blocks of the keys, contiguous, in the zigzag order of context
// parallelism or unsorted, merged, are attention to fp32 rounding; a query that
// sees no key of a block gets 0 and -inf; and the blocks' backward, summed
// over query ranks and key blocks, is attention_grad.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <string>
#include <tuple>
#include <vector>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;
using partition::runtime::ropeAttentionFactor;
using partition::runtime::ropeFrequency;
using partition::runtime::RopeScaling;
using partition::runtime::RopeScalingKind;

namespace {

using Positions = std::vector<std::int32_t>;
constexpr float kMinusInf = -std::numeric_limits<float>::infinity();

struct Case {
  Index batch, seq, heads, kvHeads, dim;
  bool causal;
  double theta; // 0: no RoPE
  RopeScaling scaling = {};
  Index window = 0;
};

std::string describe(const Case &c) {
  std::ostringstream os;
  os << "B=" << c.batch << " T=" << c.seq << " H=" << c.heads
     << " Hkv=" << c.kvHeads << " D=" << c.dim
     << (c.causal ? " causal" : " full") << " theta=" << c.theta
     << " scaling=" << int(c.scaling.kind) << " window=" << c.window;
  return os.str();
}

/// The config of `c` with `queries` query rows.
AttentionConfig config(const Case &c, Index queries) {
  AttentionConfig cfg;
  cfg.batch = c.batch;
  cfg.seq = queries;
  cfg.numHeads = c.heads;
  cfg.numKvHeads = c.kvHeads;
  cfg.headDim = c.dim;
  cfg.causal = c.causal;
  cfg.ropeTheta = float(c.theta);
  cfg.ropeScaling = c.scaling;
  cfg.window = c.window;
  return cfg;
}

const Case kCases[] = {
    // GQA + RoPE + causal; longer than a 64-row block.
    {2, 80, 4, 2, 8, true, 10000.0},
    // No mask, no RoPE (every block sees every query).
    {2, 24, 3, 3, 4, false, 0.0},
    // llama3-scaled RoPE (three frequency bands at D = 16, context 100).
    {1, 40, 2, 1, 16, true, 10000.0,
     {RopeScalingKind::Llama3, 8.0, 1.0, 4.0, 100.0}},
    // A sliding window narrower than a block, with linear scaling.
    {2, 32, 4, 2, 8, true, 10000.0, {RopeScalingKind::Linear, 4.0}, 5},
    // yarn, a window wider than the block of a 4-way split.
    {1, 48, 2, 2, 16, true, 10000.0, RopeScaling::yarn(4.0, 32.0, 1.0, 32.0),
     20},
};

/// Rows `rows` (in that order) of x [B, T, C] as [B, rows, C].
FVec gatherRows(const FVec &x, Index batch, Index seq,
                const Positions &rows) {
  const Index c = Index(x.size()) / (batch * seq);
  FVec y;
  for (Index b = 0; b < batch; ++b)
    for (std::int32_t t : rows)
      y.insert(y.end(), x.begin() + (b * seq + t) * c,
               x.begin() + (b * seq + t + 1) * c);
  return y;
}

/// Adds y [B, rows, C] into rows `rows` of x [B, T, C].
void scatterAddRows(DVec &x, const FVec &y, Index batch, Index seq,
                    const Positions &rows) {
  const Index c = Index(x.size()) / (batch * seq);
  for (Index b = 0; b < batch; ++b)
    for (size_t r = 0; r < rows.size(); ++r)
      for (Index f = 0; f < c; ++f)
        x[(b * seq + rows[r]) * c + f] +=
            y[(b * Index(rows.size()) + Index(r)) * c + f];
}

/// Columns `rows` of lse [B, H, T] as [B, H, rows].
FVec gatherLse(const FVec &lse, Index batch, Index heads, Index seq,
               const Positions &rows) {
  FVec y;
  for (Index bh = 0; bh < batch * heads; ++bh)
    for (std::int32_t t : rows)
      y.push_back(lse[bh * seq + t]);
  return y;
}

Positions iota(std::int32_t begin, std::int32_t end) {
  Positions p(end - begin);
  std::iota(p.begin(), p.end(), begin);
  return p;
}

/// How the keys of a block are laid out: contiguous; zigzag (chunks r and
/// 2n - 1 - r of 2n, which balances the causal work), ascending; or the
/// zigzag chunks swapped, so that the kernels cannot rely on sorted keys.
enum class Layout { Contiguous, Zigzag, Unsorted };

const char *name(Layout layout) {
  return layout == Layout::Contiguous ? " contiguous"
         : layout == Layout::Zigzag   ? " zigzag"
                                      : " unsorted";
}

/// The positions of block r of n over T.
Positions blockPositions(Index seq, Index n, Index r, Layout layout) {
  if (layout == Layout::Contiguous)
    return iota(std::int32_t(r * seq / n), std::int32_t((r + 1) * seq / n));
  const Index chunk = seq / (2 * n);
  Positions p = iota(std::int32_t(r * chunk), std::int32_t((r + 1) * chunk));
  Positions second = iota(std::int32_t((2 * n - 1 - r) * chunk),
                          std::int32_t((2 * n - r) * chunk));
  p.insert(layout == Layout::Zigzag ? p.end() : p.begin(), second.begin(),
           second.end());
  return p;
}

/// Double-precision attention of queries at `qpos` over keys at `kpos`
/// ([B, Tq, H*D], [B, Tk, Hkv*D]): out and lse [B, H, Tq] (-inf where no
/// key is visible).
void blockRef(const FVec &q, const FVec &k, const FVec &v,
              const Positions &qpos, const Positions &kpos, const Case &c,
              DVec &out, DVec &lse) {
  const Index Tq = Index(qpos.size()), Tk = Index(kpos.size()), D = c.dim;
  const Index ldq = c.heads * D, ldk = c.kvHeads * D,
              group = c.heads / c.kvHeads, half = D / 2;
  auto rotate = [&](const float *x, std::int32_t pos) {
    DVec y(x, x + D);
    if (c.theta == 0.0)
      return y;
    const double amplitude = ropeAttentionFactor(c.scaling);
    for (Index i = 0; i < half; ++i) {
      const double angle =
          double(pos) * ropeFrequency(i, D, c.theta, c.scaling);
      y[i] = amplitude * (x[i] * std::cos(angle) - x[i + half] * std::sin(angle));
      y[i + half] =
          amplitude * (x[i + half] * std::cos(angle) + x[i] * std::sin(angle));
    }
    return y;
  };
  out.assign(c.batch * Tq * ldq, 0.0);
  lse.assign(c.batch * c.heads * Tq, -INFINITY);
  for (Index b = 0; b < c.batch; ++b)
    for (Index h = 0; h < c.heads; ++h)
      for (Index t = 0; t < Tq; ++t) {
        const DVec qt = rotate(&q[(b * Tq + t) * ldq + h * D], qpos[t]);
        DVec scores;
        std::vector<Index> seen;
        for (Index s = 0; s < Tk; ++s) {
          const bool visible =
              !c.causal || (kpos[s] <= qpos[t] &&
                            (c.window == 0 || kpos[s] > qpos[t] - c.window));
          if (!visible)
            continue;
          const DVec ks =
              rotate(&k[(b * Tk + s) * ldk + (h / group) * D], kpos[s]);
          double score = 0.0;
          for (Index d = 0; d < D; ++d)
            score += qt[d] * ks[d];
          scores.push_back(score / std::sqrt(double(D)));
          seen.push_back(s);
        }
        if (seen.empty())
          continue;
        double m = *std::max_element(scores.begin(), scores.end()), sum = 0.0;
        for (double &score : scores)
          sum += (score = std::exp(score - m));
        lse[(b * c.heads + h) * Tq + t] = m + std::log(sum);
        for (size_t i = 0; i < seen.size(); ++i)
          for (Index d = 0; d < D; ++d)
            out[(b * Tq + t) * ldq + h * D + d] +=
                scores[i] / sum *
                v[(b * Tk + seen[i]) * ldk + (h / group) * D + d];
      }
}

struct Inputs {
  FVec q, k, v;
};

Inputs randomInputs(const Case &c, unsigned seed) {
  std::mt19937 rng(seed);
  return {randomFloats(c.batch * c.seq * c.heads * c.dim, rng),
          randomFloats(c.batch * c.seq * c.kvHeads * c.dim, rng),
          randomFloats(c.batch * c.seq * c.kvHeads * c.dim, rng)};
}

struct Partial {
  FVec out, lse;
};

/// attention_block of the queries at `qpos` over the keys at `kpos`.
Partial runBlock(const Case &c, const Inputs &in, const Positions &qpos,
                 const Positions &kpos) {
  const FVec q = gatherRows(in.q, c.batch, c.seq, qpos);
  const FVec k = gatherRows(in.k, c.batch, c.seq, kpos);
  const FVec v = gatherRows(in.v, c.batch, c.seq, kpos);
  Partial p{FVec(q.size(), NAN), FVec(c.batch * c.heads * qpos.size(), NAN)};
  attentionBlock(q.data(), k.data(), v.data(), qpos.data(), kpos.data(),
                 p.out.data(), p.lse.data(), config(c, Index(qpos.size())),
                 Index(kpos.size()));
  return p;
}

Partial merge(const Case &c, const Partial &a, const Partial &b, Index seq) {
  Partial m{FVec(a.out.size(), NAN), FVec(a.lse.size(), NAN)};
  attentionMerge(a.out.data(), a.lse.data(), b.out.data(), b.lse.data(),
                 m.out.data(), m.lse.data(), c.batch, seq, c.heads, c.dim);
  return m;
}

TEST(RingAttention, OneBlockOfAllKeysIsAttention) {
  for (const Case &c : kCases) {
    SCOPED_TRACE(describe(c));
    const Inputs in = randomInputs(c, 7);
    FVec whole(in.q.size());
    attention(in.q.data(), in.k.data(), in.v.data(), whole.data(),
              config(c, c.seq));
    const Positions all = iota(0, std::int32_t(c.seq));
    const Partial block = runBlock(c, in, all, all);
    EXPECT_TRUE(allClose(block.out, toDouble(whole), 1e-5, 1e-6));
    DVec out, lse;
    blockRef(in.q, in.k, in.v, all, all, c, out, lse);
    EXPECT_TRUE(allClose(block.out, out, 1e-5, 1e-6));
    EXPECT_TRUE(allClose(block.lse, lse, 1e-6, 1e-6));
  }
}

TEST(RingAttention, MergedBlocksAreAttention) {
  for (const Case &c : kCases)
    for (Index n : {2, 4})
      for (Layout layout :
           {Layout::Contiguous, Layout::Zigzag, Layout::Unsorted}) {
        SCOPED_TRACE(describe(c) + " blocks=" + std::to_string(n) +
                     name(layout));
        const Inputs in = randomInputs(c, 11);
        FVec whole(in.q.size());
        attention(in.q.data(), in.k.data(), in.v.data(), whole.data(),
                  config(c, c.seq));
        const Positions all = iota(0, std::int32_t(c.seq));
        DVec out, lse;
        blockRef(in.q, in.k, in.v, all, all, c, out, lse);
        // The ring's order: a rank meets its own block first, then the
        // others; here from the last, so that merges meet -inf on both
        // sides (the first causal rows see nothing of the later blocks).
        Partial merged =
            runBlock(c, in, all, blockPositions(c.seq, n, n - 1, layout));
        for (Index r = n - 2; r >= 0; --r)
          merged = merge(
              c, merged,
              runBlock(c, in, all, blockPositions(c.seq, n, r, layout)),
              c.seq);
        EXPECT_TRUE(allClose(merged.out, toDouble(whole), 1e-5, 1e-6));
        EXPECT_TRUE(allClose(merged.lse, lse, 1e-6, 1e-6));

        // A rank's zigzag queries (Tq != Tk) against the reference.
        const Positions queries = blockPositions(c.seq, 2, 1, Layout::Zigzag);
        const Positions keys = blockPositions(c.seq, n, 0, layout);
        const Partial part = runBlock(c, in, queries, keys);
        blockRef(gatherRows(in.q, c.batch, c.seq, queries),
                 gatherRows(in.k, c.batch, c.seq, keys),
                 gatherRows(in.v, c.batch, c.seq, keys), queries, keys, c,
                 out, lse);
        EXPECT_TRUE(allClose(part.out, out, 1e-5, 1e-6));
        for (size_t i = 0; i < lse.size(); ++i)
          if (std::isinf(lse[i]))
            EXPECT_EQ(part.lse[i], kMinusInf) << i;
          else
            EXPECT_NEAR(part.lse[i], lse[i], 1e-6 + 1e-6 * std::abs(lse[i]))
                << i;
      }
}

TEST(RingAttention, BlockWithNoVisibleKey) {
  const Case c{2, 16, 4, 2, 8, true, 10000.0};
  const Inputs in = randomInputs(c, 3);
  // Every key after every query: out 0 and lse exactly -inf.
  const Partial hidden = runBlock(c, in, iota(0, 8), iota(8, 16));
  for (float x : hidden.out)
    EXPECT_EQ(x, 0.0f);
  for (float x : hidden.lse)
    EXPECT_EQ(x, kMinusInf);
  // Queries 0..7 over keys 4..11: rows 0..3 see nothing, the rest some.
  const Partial some = runBlock(c, in, iota(0, 8), iota(4, 12));
  for (Index bh = 0; bh < c.batch * c.heads; ++bh)
    for (Index t = 0; t < 8; ++t)
      EXPECT_EQ(std::isinf(some.lse[bh * 8 + t]), t < 4) << bh << " " << t;
  // Merging with an empty block changes nothing; two empty blocks stay
  // empty.
  const Partial own = runBlock(c, in, iota(0, 8), iota(0, 8));
  const Partial same = merge(c, own, hidden, 8);
  EXPECT_TRUE(allClose(same.out, toDouble(own.out), 0, 0));
  EXPECT_TRUE(allClose(same.lse, toDouble(own.lse), 0, 0));
  const Partial none = merge(c, hidden, hidden, 8);
  for (float x : none.out)
    EXPECT_EQ(x, 0.0f);
  for (float x : none.lse)
    EXPECT_EQ(x, kMinusInf);
}

// The ring backward: queries split over `ranks` (layout), keys into `n`
// blocks; attention_block_grad of every (rank, block) pair from the final
// out and lse, dq summed into the rank's rows and dk, dv into the block's,
// is attention_grad.
TEST(RingAttention, BlockGradsSumToAttentionGrad) {
  for (const Case &c : kCases)
    for (auto [ranks, n, layout] :
         {std::tuple{1, 4, Layout::Zigzag}, std::tuple{2, 4, Layout::Zigzag},
          std::tuple{2, 2, Layout::Contiguous},
          std::tuple{2, 4, Layout::Unsorted}}) {
      SCOPED_TRACE(describe(c) + " ranks=" + std::to_string(ranks) +
                   " blocks=" + std::to_string(n) + name(layout));
      const Inputs in = randomInputs(c, 5);
      std::mt19937 rng(17);
      const FVec grad = randomFloats(in.q.size(), rng);
      const AttentionConfig whole = config(c, c.seq);
      FVec out(in.q.size()), dq(in.q.size()), dk(in.k.size()),
          dv(in.v.size());
      attention(in.q.data(), in.k.data(), in.v.data(), out.data(), whole);
      attentionGrad(grad.data(), in.q.data(), in.k.data(), in.v.data(),
                    dq.data(), dk.data(), dv.data(), whole);
      const Positions all = iota(0, std::int32_t(c.seq));
      const FVec lse = runBlock(c, in, all, all).lse;

      DVec sumDq(dq.size(), 0.0), sumDk(dk.size(), 0.0),
          sumDv(dv.size(), 0.0);
      for (Index r = 0; r < ranks; ++r) {
        const Positions queries =
            ranks == 1 ? all
                       : blockPositions(c.seq, ranks, r, Layout::Zigzag);
        const Index Tq = Index(queries.size());
        const FVec q = gatherRows(in.q, c.batch, c.seq, queries);
        const FVec g = gatherRows(grad, c.batch, c.seq, queries);
        const FVec o = gatherRows(out, c.batch, c.seq, queries);
        const FVec l = gatherLse(lse, c.batch, c.heads, c.seq, queries);
        for (Index j = 0; j < n; ++j) {
          const Positions keys = blockPositions(c.seq, n, j, layout);
          const FVec k = gatherRows(in.k, c.batch, c.seq, keys);
          const FVec v = gatherRows(in.v, c.batch, c.seq, keys);
          FVec bq(q.size(), NAN), bk(k.size(), NAN), bv(v.size(), NAN);
          attentionBlockGrad(g.data(), q.data(), k.data(), v.data(),
                             queries.data(), keys.data(), o.data(), l.data(),
                             bq.data(), bk.data(), bv.data(), config(c, Tq),
                             Index(keys.size()));
          scatterAddRows(sumDq, bq, c.batch, c.seq, queries);
          scatterAddRows(sumDk, bk, c.batch, c.seq, keys);
          scatterAddRows(sumDv, bv, c.batch, c.seq, keys);
        }
      }
      auto asFloat = [](const DVec &x) { return FVec(x.begin(), x.end()); };
      EXPECT_TRUE(allClose(asFloat(sumDq), toDouble(dq), 1e-4, 2e-6));
      EXPECT_TRUE(allClose(asFloat(sumDk), toDouble(dk), 1e-4, 2e-6));
      EXPECT_TRUE(allClose(asFloat(sumDv), toDouble(dv), 1e-4, 2e-6));
    }
}

} // namespace
