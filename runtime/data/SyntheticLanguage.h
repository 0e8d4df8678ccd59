//===- SyntheticLanguage.h - the built-in dataset, entropy known -*- C++ -*-===//
//
// The default training data: a seeded first-order Markov chain over `vocab`
// tokens. Each token has `successors` distinct possible next tokens, with
// integer weights in [1, 64] drawn from the seed. Two of the successors of
// every token follow a hidden random cyclic order of the vocabulary (its next
// and next-but-one token), which makes the chain irreducible and aperiodic;
// the others are drawn uniformly. Its exact entropy rate
//
//   H = sum_i pi_i H(row_i)   (nats; pi = stationary distribution)
//
// is the loss floor of a model trained on it: next-token cross-entropy cannot
// go below H in expectation, and a model that learns the bigram table reaches
// it (every position, even the first of a window, has its full context: the
// previous token).
//
// Everything that decides tokens is integer arithmetic on splitmix64, so a
// (vocab, seed, successors) gives the same tokens on every platform; only
// entropyRateNats() and stationary() use floating point.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_DATA_SYNTHETICLANGUAGE_H
#define PARTITION_RUNTIME_DATA_SYNTHETICLANGUAGE_H

#include "runtime/data/BatchLoader.h"
#include "runtime/data/TokenData.h"

#include <cstdint>
#include <vector>

namespace partition::runtime::data {

class SyntheticLanguage {
public:
  static constexpr uint64_t kDefaultSeed = 1337;
  static constexpr int64_t kDefaultSuccessors = 6;
  static constexpr uint32_t kMaxWeight = 64;
  /// Independent sample paths of one language.
  static constexpr uint64_t kTrainStream = 0;
  static constexpr uint64_t kEvalStream = 1;

  /// Throws DataError unless 3 <= vocab <= 65536 and
  /// 3 <= successors <= min(vocab, 256). (With only the two cycle successors
  /// the chain would mix in ~vocab^2 steps; a third, random one makes it
  /// mix in a few dozen.)
  explicit SyntheticLanguage(int64_t vocab, uint64_t seed = kDefaultSeed,
                             int64_t successors = kDefaultSuccessors);

  int64_t vocab() const { return vocab_; }
  uint64_t seed() const { return seed_; }
  int64_t successors() const { return successors_; }

  /// The exact entropy rate in nats per token: 0 < H < log(vocab) (strictly
  /// below when successors < vocab).
  double entropyRateNats() const { return entropyRate_; }
  /// The stationary distribution pi (pi P = pi), by power iteration.
  const std::vector<double> &stationary() const { return stationary_; }
  /// Successor j (0 <= j < successors()) of `token` and its probability.
  int64_t successor(int64_t token, int64_t j) const;
  double probability(int64_t token, int64_t j) const;
  /// -sum_j p_j log p_j of the next-token distribution after `token`.
  double rowEntropyNats(int64_t token) const;

  /// `count` tokens of sample path `stream` (kTrainStream, kEvalStream or
  /// any other number): the first uniform, the rest following the chain.
  /// Deterministic for (vocab, seed, successors, stream, count), and a
  /// shorter path is a prefix of a longer one. Throws DataError if count < 1.
  TokenStream generate(int64_t count, uint64_t stream = kTrainStream) const;

private:
  int64_t vocab_;
  uint64_t seed_;
  int64_t successors_;
  /// Row-major [vocab, successors]: next tokens and cumulative weights.
  std::vector<uint16_t> next_;
  std::vector<uint32_t> cumulative_;
  std::vector<double> stationary_;
  double entropyRate_ = 0.0;
};

/// The built-in dataset: `trainTokens` of the train path and `evalTokens` of
/// the held-out eval path of `language` (same chain, same entropy rate,
/// independent samples).
Split makeSyntheticSplit(const SyntheticLanguage &language, int64_t trainTokens,
                         int64_t evalTokens);

} // namespace partition::runtime::data

#endif // PARTITION_RUNTIME_DATA_SYNTHETICLANGUAGE_H
