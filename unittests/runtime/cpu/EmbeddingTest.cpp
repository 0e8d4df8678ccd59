//===- EmbeddingTest.cpp - token and position embedding kernels -----------===//

#include "runtime/backend/cpu/Kernels.h"
#include "unittests/runtime/cpu/KernelTestUtils.h"

#include <stdexcept>

using namespace partition::runtime::cpu;
using namespace partition::runtime::cpu::testing;

namespace {

// Gathers are copies: exact equality.
TEST(EmbeddingTest, ForwardGathersRows) {
  std::mt19937 rng(1);
  const Index vocab = 7, channels = 5;
  const std::vector<std::int32_t> tokens = {3, 0, 6, 3, 3, 1};
  FVec table = randomFloats(vocab * channels, rng);
  FVec out(tokens.size() * channels, -1.0f);
  embedding(tokens.data(), table.data(), out.data(), Index(tokens.size()),
            vocab, channels);
  for (std::size_t r = 0; r < tokens.size(); ++r)
    for (Index c = 0; c < channels; ++c)
      EXPECT_EQ(out[r * channels + c], table[tokens[r] * channels + c])
          << "row " << r << " channel " << c;
}

// Hand-computed scatter-add: token 3 appears three times, 2 and 4 never.
// The sums of small integers are exact in fp32: exact equality.
TEST(EmbeddingTest, GradSumsRepeatedTokens) {
  const Index vocab = 5, channels = 2;
  const std::vector<std::int32_t> tokens = {3, 1, 3, 0, 3};
  const FVec grad = {1, 2, 10, 20, 100, 200, 1000, 2000, 4, 8};
  FVec out(vocab * channels, 123.0f); // garbage that must be overwritten
  embeddingGrad(grad.data(), tokens.data(), out.data(), Index(tokens.size()),
                vocab, channels);
  const FVec expected = {1000, 2000, 10, 20, 0, 0, 105, 210, 0, 0};
  EXPECT_EQ(out, expected);

  // accumulate = true adds onto what is there.
  embeddingGrad(grad.data(), tokens.data(), out.data(), Index(tokens.size()),
                vocab, channels, /*accumulate=*/true);
  for (std::size_t i = 0; i < expected.size(); ++i)
    EXPECT_EQ(out[i], 2 * expected[i]);
}

// Finite differences of J(table) = sum(embedding(table) * R). J is linear, so
// the differences are exact up to rounding: rtol 1e-6 covers fp32 sums of
// up to ~10 terms.
TEST(EmbeddingTest, GradMatchesFiniteDifferences) {
  std::mt19937 rng(2);
  const Index vocab = 6, channels = 4, rows = 12;
  auto tokens = randomIds(rows, std::int32_t(vocab - 1), rng); // v = 5 unused
  tokens[0] = tokens[1] = tokens[2];
  FVec tableF = randomFloats(vocab * channels, rng);
  FVec r = randomFloats(rows * channels, rng);
  DVec table = toDouble(tableF), rd = toDouble(r);
  auto objective = [&] {
    double j = 0;
    for (Index i = 0; i < rows; ++i)
      for (Index c = 0; c < channels; ++c)
        j += table[tokens[i] * channels + c] * rd[i * channels + c];
    return j;
  };
  DVec expected = finiteDifference(table, objective);
  FVec out(vocab * channels);
  embeddingGrad(r.data(), tokens.data(), out.data(), rows, vocab, channels);
  EXPECT_TRUE(allClose(out, expected, 1e-6, 1e-6));
  for (Index c = 0; c < channels; ++c)
    EXPECT_EQ(out[5 * channels + c], 0.0f);
}

// Large enough to run the threaded, channel-sliced path (with a channel
// count that is not a multiple of the slices); against a double scatter.
// fp32 sums of ~30 terms of size 1: atol 1e-5.
TEST(EmbeddingTest, GradParallelMatchesReference) {
  std::mt19937 rng(3);
  const Index vocab = 97, channels = 200, rows = 3000;
  auto tokens = randomIds(rows, std::int32_t(vocab), rng);
  FVec grad = randomFloats(rows * channels, rng);
  DVec expected(vocab * channels, 0.0);
  for (Index i = 0; i < rows; ++i)
    for (Index c = 0; c < channels; ++c)
      expected[tokens[i] * channels + c] += grad[i * channels + c];
  FVec out(vocab * channels, 7.0f);
  embeddingGrad(grad.data(), tokens.data(), out.data(), rows, vocab, channels);
  EXPECT_TRUE(allClose(out, expected, 1e-6, 1e-5));
}

TEST(EmbeddingTest, RejectsOutOfRangeTokens) {
  const FVec table(4 * 2, 1.0f);
  FVec out(3 * 2, 0.0f);
  const std::vector<std::int32_t> tooBig = {0, 4, 1};
  EXPECT_THROW(embedding(tooBig.data(), table.data(), out.data(), 3, 4, 2),
               std::invalid_argument);
  const std::vector<std::int32_t> negative = {0, -1, 1};
  FVec grad(3 * 2, 1.0f), tableGrad(4 * 2);
  EXPECT_THROW(embeddingGrad(grad.data(), negative.data(), tableGrad.data(), 3,
                             4, 2),
               std::invalid_argument);
}

TEST(PositionEmbeddingTest, ForwardAddsTableRowT) {
  std::mt19937 rng(4);
  const Index batch = 3, seq = 4, positions = 6, channels = 5;
  FVec x = randomFloats(batch * seq * channels, rng);
  FVec table = randomFloats(positions * channels, rng);
  FVec out(x.size());
  positionEmbedding(x.data(), table.data(), out.data(), batch, seq, channels);
  for (Index b = 0; b < batch; ++b)
    for (Index t = 0; t < seq; ++t)
      for (Index c = 0; c < channels; ++c) {
        const Index i = (b * seq + t) * channels + c;
        EXPECT_EQ(out[i], x[i] + table[t * channels + c]);
      }
  // In place.
  FVec inPlace = x;
  positionEmbedding(inPlace.data(), table.data(), inPlace.data(), batch, seq,
                    channels);
  EXPECT_EQ(inPlace, out);
}

// FD of J(table) = sum(position_embedding(x, table) * R): rows t >= T get
// exactly zero. Sums of B = 3 terms: rtol 1e-6.
TEST(PositionEmbeddingTest, GradMatchesFiniteDifferences) {
  std::mt19937 rng(5);
  const Index batch = 3, seq = 4, positions = 6, channels = 5;
  FVec xF = randomFloats(batch * seq * channels, rng);
  FVec tableF = randomFloats(positions * channels, rng);
  FVec r = randomFloats(xF.size(), rng);
  DVec x = toDouble(xF), table = toDouble(tableF), rd = toDouble(r);
  auto objective = [&] {
    double j = 0;
    for (Index b = 0; b < batch; ++b)
      for (Index t = 0; t < seq; ++t)
        for (Index c = 0; c < channels; ++c) {
          const Index i = (b * seq + t) * channels + c;
          j += (x[i] + table[t * channels + c]) * rd[i];
        }
    return j;
  };
  DVec expected = finiteDifference(table, objective);
  FVec out(positions * channels, 9.0f);
  positionEmbeddingGrad(r.data(), out.data(), batch, seq, positions, channels);
  EXPECT_TRUE(allClose(out, expected, 1e-6, 1e-6));
  for (Index i = seq * channels; i < positions * channels; ++i)
    EXPECT_EQ(out[i], 0.0f);

  FVec tooShort(3 * channels);
  EXPECT_THROW(positionEmbeddingGrad(r.data(), tooShort.data(), batch, seq, 3,
                                     channels),
               std::invalid_argument);
}

} // namespace
