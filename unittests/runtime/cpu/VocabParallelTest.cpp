//===- VocabParallelTest.cpp - vocabulary-parallel embedding and loss -----===//
//
// Simulates tensor parallelism over the vocabulary in one process: the table
// and the logits are cut into tp shards of Vl = V / tp rows / columns, the
// kernels run once per shard with shard = 0..tp-1, and their results are
// combined as the all-reduces between them would (sum of embeddings, max of
// maxes, sums of target logits and of sum_exps taken with the global max).
// The combination must match the unsharded kernels (embedding,
// embedding_grad, softmax_cross_entropy, softmax_cross_entropy_grad) and the
// double-precision references, with tokens and targets on every shard's
// first and last id.
//
//===----------------------------------------------------------------------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <limits>
#include <stdexcept>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

using Ids = std::vector<std::int32_t>;

/// Random ids below `vocab`, with the first and last id of each of the `tp`
/// shards placed at distinct random positions (rows >= 2 tp).
Ids idsWithShardBoundaries(Index rows, Index vocab, Index tp,
                           std::mt19937 &rng) {
  Ids ids = randomIds(rows, std::int32_t(vocab), rng);
  std::vector<std::size_t> positions = sampleIndices(rows, 2 * tp, rng);
  std::shuffle(positions.begin(), positions.end(), rng);
  const Index localVocab = vocab / tp;
  for (Index s = 0; s < tp; ++s) {
    ids[positions[2 * s]] = std::int32_t(s * localVocab);
    ids[positions[2 * s + 1]] = std::int32_t((s + 1) * localVocab - 1);
  }
  return ids;
}

/// Columns [s Vl, (s+1) Vl) of row-major logits [rows, V]: shard s's.
FVec columnShard(const FVec &matrix, Index rows, Index vocab, Index tp,
                 Index s) {
  const Index localVocab = vocab / tp;
  FVec shard(rows * localVocab);
  for (Index r = 0; r < rows; ++r)
    std::copy_n(matrix.begin() + r * vocab + s * localVocab, localVocab,
                shard.begin() + r * localVocab);
  return shard;
}

/// Rows [s Vl, (s+1) Vl) of a table [V, C].
FVec rowShard(const FVec &table, Index vocab, Index channels, Index tp,
              Index s) {
  const Index localVocab = vocab / tp;
  return FVec(table.begin() + s * localVocab * channels,
              table.begin() + (s + 1) * localVocab * channels);
}

/// -mean_r log softmax(logits[r])[targets[r]] in double, max-subtracted.
double lossRef(const DVec &logits, const Ids &targets, Index rows,
               Index vocab) {
  double total = 0;
  for (Index r = 0; r < rows; ++r) {
    const double *x = &logits[r * vocab];
    double m = x[0];
    for (Index i = 1; i < vocab; ++i)
      m = std::max(m, x[i]);
    double s = 0;
    for (Index i = 0; i < vocab; ++i)
      s += std::exp(x[i] - m);
    total += std::log(s) + m - x[targets[r]];
  }
  return total / double(rows);
}

/// What every rank holds after the forward kernels and the all-reduces.
struct VocabParallelLoss {
  FVec max, sumExp, targetLogit;
  float loss = 0;
};

/// The vocabulary-parallel loss of `logits` [rows, vocab] over tp shards:
/// vocab_parallel_max, all_reduce max, vocab_parallel_target_logit and
/// vocab_parallel_sum_exp, all_reduce sums (in rank order), then
/// vocab_parallel_loss.
VocabParallelLoss shardedLoss(const FVec &logits, const Ids &targets,
                              Index rows, Index vocab, Index tp) {
  const Index localVocab = vocab / tp;
  VocabParallelLoss out;
  out.max.assign(rows, -std::numeric_limits<float>::infinity());
  out.sumExp.assign(rows, 0.0f);
  out.targetLogit.assign(rows, 0.0f);
  std::vector<FVec> shards;
  for (Index s = 0; s < tp; ++s)
    shards.push_back(columnShard(logits, rows, vocab, tp, s));
  FVec local(rows);
  for (Index s = 0; s < tp; ++s) {
    vocabParallelMax(shards[s].data(), local.data(), rows, localVocab);
    for (Index r = 0; r < rows; ++r)
      out.max[r] = std::max(out.max[r], local[r]);
  }
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    vocabParallelTargetLogit(shards[s].data(), targets.data(), &shard,
                             local.data(), rows, localVocab);
    for (Index r = 0; r < rows; ++r)
      out.targetLogit[r] += local[r];
    vocabParallelSumExp(shards[s].data(), out.max.data(), local.data(), rows,
                        localVocab);
    for (Index r = 0; r < rows; ++r)
      out.sumExp[r] += local[r];
  }
  vocabParallelLoss(out.max.data(), out.sumExp.data(), out.targetLogit.data(),
                    &out.loss, rows);
  return out;
}

/// Every shard's logits gradient, concatenated back to [rows, vocab].
FVec shardedLossGrad(float lossGrad, const FVec &logits, const Ids &targets,
                     const VocabParallelLoss &stats, Index rows, Index vocab,
                     Index tp) {
  const Index localVocab = vocab / tp;
  FVec grad(rows * vocab, std::nanf(""));
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    FVec local = columnShard(logits, rows, vocab, tp, s);
    FVec localGrad(rows * localVocab, std::nanf(""));
    vocabParallelCrossEntropyGrad(&lossGrad, local.data(), targets.data(),
                                  &shard, stats.max.data(),
                                  stats.sumExp.data(), localGrad.data(), rows,
                                  localVocab);
    for (Index r = 0; r < rows; ++r)
      std::copy_n(localGrad.begin() + r * localVocab, localVocab,
                  grad.begin() + r * vocab + s * localVocab);
  }
  return grad;
}

class VocabParallelTest : public ::testing::TestWithParam<Index> {};

// Embedding: the sum over shards of the local lookups (one copy plus zeros)
// is exactly the full lookup. Embedding gradient: each shard's scatter-add
// adds the same rows in the same order as the unsharded one on those table
// rows, so the concatenation is exactly the full gradient.
TEST_P(VocabParallelTest, EmbeddingShardsSumToTheFullLookup) {
  const Index tp = GetParam();
  std::mt19937 rng(70 + tp);
  const Index batch = 3, seq = 5, rows = batch * seq, channels = 7;
  const Index vocab = 24, localVocab = vocab / tp;
  Ids tokens = idsWithShardBoundaries(rows, vocab, tp, rng);
  tokens[rows - 1] = tokens[0]; // a repeated token sums two rows
  FVec table = randomFloats(vocab * channels, rng);
  FVec grad = randomFloats(rows * channels, rng);

  FVec expected(rows * channels);
  embedding(tokens.data(), table.data(), expected.data(), rows, vocab,
            channels);
  FVec expectedGrad(vocab * channels);
  embeddingGrad(grad.data(), tokens.data(), expectedGrad.data(), rows, vocab,
                channels);

  FVec combined(rows * channels, 0.0f), combinedGrad;
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    FVec localTable = rowShard(table, vocab, channels, tp, s);
    FVec local(rows * channels, std::nanf("")); // must be overwritten
    vocabParallelEmbedding(tokens.data(), localTable.data(), &shard,
                           local.data(), rows, localVocab, channels);
    for (Index r = 0; r < rows; ++r) {
      const bool mine = tokens[r] / localVocab == s;
      for (Index c = 0; c < channels; ++c) {
        if (!mine) {
          EXPECT_EQ(local[r * channels + c], 0.0f)
              << "shard " << s << " row " << r << " (token " << tokens[r]
              << ") channel " << c;
        }
        combined[r * channels + c] += local[r * channels + c];
      }
    }
    FVec localGrad(localVocab * channels, std::nanf(""));
    vocabParallelEmbeddingGrad(grad.data(), tokens.data(), &shard,
                               localGrad.data(), rows, localVocab, channels);
    combinedGrad.insert(combinedGrad.end(), localGrad.begin(),
                        localGrad.end());
  }
  EXPECT_EQ(combined, expected);
  EXPECT_EQ(combinedGrad, expectedGrad);
}

// J(table) = sum(sum over shards of vocab_parallel_embedding(table_s) * R),
// in double: linear in the table, so the central differences are exact up
// to rounding, and dJ/dtable_s is shard s's vocab_parallel_embedding_grad
// of R. rtol 1e-6 covers fp32 sums of a few terms.
TEST_P(VocabParallelTest, EmbeddingGradMatchesFiniteDifferences) {
  const Index tp = GetParam();
  std::mt19937 rng(80 + tp);
  const Index rows = 12, channels = 4, vocab = 16, localVocab = vocab / tp;
  Ids tokens = idsWithShardBoundaries(rows, vocab, tp, rng);
  tokens[1] = tokens[0];
  FVec tableF = randomFloats(vocab * channels, rng);
  FVec rF = randomFloats(rows * channels, rng);
  DVec table = toDouble(tableF), r = toDouble(rF);
  auto objective = [&] {
    double j = 0;
    for (Index s = 0; s < tp; ++s)
      for (Index i = 0; i < rows; ++i) {
        const Index local = Index(tokens[i]) - s * localVocab;
        if (local < 0 || local >= localVocab)
          continue;
        for (Index c = 0; c < channels; ++c)
          j += table[(s * localVocab + local) * channels + c] *
               r[i * channels + c];
      }
    return j;
  };
  DVec fd = finiteDifference(table, objective);
  FVec grad;
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    FVec local(localVocab * channels);
    vocabParallelEmbeddingGrad(rF.data(), tokens.data(), &shard, local.data(),
                               rows, localVocab, channels);
    grad.insert(grad.end(), local.begin(), local.end());
  }
  EXPECT_TRUE(allClose(grad, fd, 1e-6, 1e-9));
}

// Logits spread over [-8, 8]; row 1 shifted by +60 and row 4 by -60 (a naive
// exp overflows / underflows there), and in row 6 the first shard's columns
// lie 100 below the rest (its local sum_exp underflows to 0 against the
// global max). Loss vs the unsharded kernel and the double reference: rtol
// 1e-6. Gradient vs the unsharded kernel: rtol 1e-5, atol 1e-7 / rows (the
// sum_exps are added in another order); vs central differences of the loss
// (loss_grad = 0.7): rtol 2e-5, atol 2e-6 * max|grad|, as LossTest.
TEST_P(VocabParallelTest, LossAndGradMatchTheUnshardedKernels) {
  const Index tp = GetParam();
  std::mt19937 rng(90 + tp);
  const Index batch = 2, seq = 5, rows = batch * seq, vocab = 24;
  FVec logitsF = randomFloats(rows * vocab, rng, -8.0f, 8.0f);
  for (Index i = 0; i < vocab; ++i) {
    logitsF[1 * vocab + i] += 60.0f;
    logitsF[4 * vocab + i] -= 60.0f;
  }
  for (Index i = 0; i < vocab / tp; ++i)
    logitsF[6 * vocab + i] -= 100.0f;
  Ids targets = idsWithShardBoundaries(rows, vocab, tp, rng);
  DVec logits = toDouble(logitsF);

  VocabParallelLoss stats = shardedLoss(logitsF, targets, rows, vocab, tp);
  float unsharded = 0;
  softmaxCrossEntropy(logitsF.data(), targets.data(), &unsharded, rows, vocab);
  const double expected = lossRef(logits, targets, rows, vocab);
  EXPECT_NEAR(stats.loss, unsharded, 1e-6 * std::abs(expected));
  EXPECT_NEAR(stats.loss, expected, 1e-6 * std::abs(expected));
  for (Index r = 0; r < rows; ++r)
    EXPECT_EQ(stats.targetLogit[r], logitsF[r * vocab + targets[r]])
        << "row " << r << " target " << targets[r];

  const float lossGrad = 0.7f;
  FVec grad = shardedLossGrad(lossGrad, logitsF, targets, stats, rows, vocab,
                              tp);
  FVec unshardedGrad(rows * vocab);
  softmaxCrossEntropyGrad(&lossGrad, logitsF.data(), targets.data(),
                          unshardedGrad.data(), rows, vocab);
  EXPECT_TRUE(allClose(grad, toDouble(unshardedGrad), 1e-5, 1e-7 / rows));
  DVec fd = finiteDifference(
      logits, [&] { return lossGrad * lossRef(logits, targets, rows, vocab); });
  EXPECT_TRUE(allClose(grad, fd, 2e-5, 2e-6 * maxAbs(fd)));
}

// Rows of a GPT-2-like length, over the kernels' threading threshold, one of
// them shifted by 1e4 (must not overflow). Loss rtol 1e-6; gradient vs the
// unsharded kernel rtol 2e-5, atol 1e-7 / rows, as LossTest's closed form.
TEST_P(VocabParallelTest, LongRowsAreStableAndMatchTheUnshardedKernels) {
  const Index tp = GetParam();
  std::mt19937 rng(100 + tp);
  const Index rows = 8, vocab = 4 * 1251;
  FVec logitsF = randomFloats(rows * vocab, rng, -4.0f, 4.0f);
  for (Index i = 0; i < vocab; ++i)
    logitsF[2 * vocab + i] += 1e4f;
  Ids targets = idsWithShardBoundaries(rows, vocab, tp, rng);
  VocabParallelLoss stats = shardedLoss(logitsF, targets, rows, vocab, tp);
  const double expected = lossRef(toDouble(logitsF), targets, rows, vocab);
  EXPECT_NEAR(stats.loss, expected, 1e-6 * std::abs(expected));

  const float lossGrad = 1.0f;
  FVec grad = shardedLossGrad(lossGrad, logitsF, targets, stats, rows, vocab,
                              tp);
  FVec unshardedGrad(rows * vocab);
  softmaxCrossEntropyGrad(&lossGrad, logitsF.data(), targets.data(),
                          unshardedGrad.data(), rows, vocab);
  EXPECT_TRUE(allClose(grad, toDouble(unshardedGrad), 2e-5, 1e-7 / rows));
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, VocabParallelTest,
                         ::testing::Values(Index(2), Index(4)),
                         [](const ::testing::TestParamInfo<Index> &info) {
                           return "tp" + std::to_string(info.param);
                         });

// Ids are global: an id of another shard (or beyond every shard) gives zero
// rows and a zero target logit, a negative id or shard is an error.
TEST(VocabParallelKernelsTest, IdsOutsideTheShardContributeZero) {
  const Index localVocab = 4, channels = 2;
  const std::int32_t shard = 1; // ids 4..7
  const Ids tokens = {3, 4, 7, 8, 100};
  const FVec table = {1, 2, 3, 4, 5, 6, 7, 8};
  FVec out(tokens.size() * channels, -1.0f);
  vocabParallelEmbedding(tokens.data(), table.data(), &shard, out.data(),
                         Index(tokens.size()), localVocab, channels);
  EXPECT_EQ(out, (FVec{0, 0, 1, 2, 7, 8, 0, 0, 0, 0}));

  const FVec logits = {0, 1, 2, 3, 10, 11, 12, 13};
  const Ids targets = {4, 3};
  FVec target(2, -1.0f);
  vocabParallelTargetLogit(logits.data(), targets.data(), &shard,
                           target.data(), 2, localVocab);
  EXPECT_EQ(target, (FVec{0, 0}));
}

TEST(VocabParallelKernelsTest, RejectsNegativeIdsAndShards) {
  const FVec table(8, 0.0f);
  FVec out(4, 0.0f);
  const Ids good = {0, 5}, bad = {0, -1};
  const std::int32_t shard = 0, negative = -1;
  EXPECT_THROW(vocabParallelEmbedding(bad.data(), table.data(), &shard,
                                      out.data(), 2, 4, 2),
               std::invalid_argument);
  EXPECT_THROW(vocabParallelEmbedding(good.data(), table.data(), &negative,
                                      out.data(), 2, 4, 2),
               std::invalid_argument);
  FVec grad(8, 0.0f);
  EXPECT_THROW(vocabParallelEmbeddingGrad(out.data(), bad.data(), &shard,
                                          grad.data(), 2, 4, 2),
               std::invalid_argument);
  FVec target(2);
  EXPECT_THROW(vocabParallelTargetLogit(table.data(), bad.data(), &shard,
                                        target.data(), 2, 4),
               std::invalid_argument);
  const float lossGrad = 1.0f;
  const FVec stats = {0.0f, 0.0f}, ones = {1.0f, 1.0f};
  EXPECT_THROW(vocabParallelCrossEntropyGrad(&lossGrad, table.data(),
                                             good.data(), &negative,
                                             stats.data(), ones.data(),
                                             grad.data(), 2, 4),
               std::invalid_argument);
}

// A vocabulary of 21 ids padded, as Megatron-LM pads it, to a multiple of
// tp x 4 (tp = 2, 3: 24; tp = 4: 32, so shard 3 holds padding only). The
// padding columns hold logits of +50 (never the zeros the compiler's
// zero-initialised padding rows give, so a kernel that reads them fails):
// with `vocab` = 21 the loss equals the unsharded kernel's on the 21 real
// columns (rtol 1e-6), the gradient equals its gradient there (rtol 1e-5,
// atol 1e-7 / rows) and is exactly zero on every padding column, and a
// padding shard's max is -inf.
class PaddedVocabParallelTest : public ::testing::TestWithParam<Index> {};

TEST_P(PaddedVocabParallelTest, PaddingIsMaskedOutOfTheLossAndItsGradient) {
  const Index tp = GetParam();
  std::mt19937 rng(130 + tp);
  const Index rows = 10, vocab = 21, granule = 4;
  const Index padded = (vocab + tp * granule - 1) / (tp * granule) * (tp * granule);
  const Index localVocab = padded / tp;
  FVec logical = randomFloats(rows * vocab, rng, -8.0f, 8.0f);
  Ids targets = randomIds(rows, std::int32_t(vocab), rng);
  targets[0] = std::int32_t(vocab - 1); // the last real id
  FVec logits(rows * padded, 50.0f);
  for (Index r = 0; r < rows; ++r)
    std::copy_n(logical.begin() + r * vocab, vocab,
                logits.begin() + r * padded);

  FVec max(rows, -std::numeric_limits<float>::infinity()), sumExp(rows, 0.0f),
      target(rows, 0.0f), local(rows);
  std::vector<FVec> shards;
  for (Index s = 0; s < tp; ++s)
    shards.push_back(columnShard(logits, rows, padded, tp, s));
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    vocabParallelMax(shards[s].data(), local.data(), rows, localVocab, &shard,
                     vocab);
    for (Index r = 0; r < rows; ++r) {
      if (s * localVocab >= vocab)
        EXPECT_EQ(local[r], -std::numeric_limits<float>::infinity());
      max[r] = std::max(max[r], local[r]);
    }
  }
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    vocabParallelTargetLogit(shards[s].data(), targets.data(), &shard,
                             local.data(), rows, localVocab);
    for (Index r = 0; r < rows; ++r)
      target[r] += local[r];
    vocabParallelSumExp(shards[s].data(), max.data(), local.data(), rows,
                        localVocab, &shard, vocab);
    for (Index r = 0; r < rows; ++r)
      sumExp[r] += local[r];
  }
  float loss = 0, unsharded = 0;
  vocabParallelLoss(max.data(), sumExp.data(), target.data(), &loss, rows);
  softmaxCrossEntropy(logical.data(), targets.data(), &unsharded, rows, vocab);
  EXPECT_NEAR(loss, unsharded, 1e-6 * std::abs(unsharded));

  const float lossGrad = 0.7f;
  FVec expected(rows * vocab);
  softmaxCrossEntropyGrad(&lossGrad, logical.data(), targets.data(),
                          expected.data(), rows, vocab);
  FVec grad(rows * vocab);
  for (Index s = 0; s < tp; ++s) {
    const std::int32_t shard = std::int32_t(s);
    FVec localGrad(rows * localVocab, std::nanf(""));
    vocabParallelCrossEntropyGrad(&lossGrad, shards[s].data(), targets.data(),
                                  &shard, max.data(), sumExp.data(),
                                  localGrad.data(), rows, localVocab, vocab);
    for (Index r = 0; r < rows; ++r)
      for (Index v = 0; v < localVocab; ++v) {
        const Index id = s * localVocab + v;
        const float g = localGrad[r * localVocab + v];
        if (id >= vocab)
          EXPECT_EQ(g, 0.0f) << "padding id " << id << " row " << r;
        else
          grad[r * vocab + id] = g;
      }
  }
  EXPECT_TRUE(allClose(grad, toDouble(expected), 1e-5, 1e-7 / rows));
}

INSTANTIATE_TEST_SUITE_P(TensorParallel, PaddedVocabParallelTest,
                         ::testing::Values(Index(2), Index(3), Index(4)));

// A target among the padding ids is bad data, not a term to mask.
TEST(VocabParallelKernelsTest, RejectsTargetsAmongThePaddingIds) {
  const FVec logits(2 * 4, 0.0f), stats = {0.0f, 0.0f}, ones = {1.0f, 1.0f};
  const Ids targets = {1, 3};
  const std::int32_t shard = 0;
  const float lossGrad = 1.0f;
  FVec grad(8);
  EXPECT_THROW(vocabParallelCrossEntropyGrad(&lossGrad, logits.data(),
                                             targets.data(), &shard,
                                             stats.data(), ones.data(),
                                             grad.data(), 2, 4, /*vocab=*/3),
               std::invalid_argument);
}

} // namespace
