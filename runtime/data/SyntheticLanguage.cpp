//===- SyntheticLanguage.cpp - the built-in dataset, entropy known --------===//

#include "runtime/data/SyntheticLanguage.h"

#include <algorithm>
#include <cmath>
#include <memory>

namespace partition::runtime::data {
namespace {

/// splitmix64 (Steele, Lea, Flood 2014): one 64-bit state, fully specified,
/// so the same seed gives the same numbers everywhere (unlike the standard
/// library's distributions).
class SplitMix64 {
public:
  explicit SplitMix64(uint64_t seed) : state(seed) {}
  uint64_t next() {
    uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
  /// In [0, n); the modulo bias is below n / 2^64, far under anything a
  /// model or a test can see.
  uint64_t below(uint64_t n) { return next() % n; }

private:
  uint64_t state;
};

/// The seed of an independent generator for `purpose` under `seed`.
uint64_t deriveSeed(uint64_t seed, uint64_t purpose) {
  return SplitMix64(seed ^ (purpose * 0xD1B54A32D192ED03ULL + 1)).next();
}

constexpr uint64_t kStructurePurpose = 0;
constexpr uint64_t kMaxVocab = 65536;
constexpr int64_t kMaxSuccessors = 256;
constexpr int kMaxPowerIterations = 100000;
constexpr double kPowerTolerance = 1e-14;

} // namespace

SyntheticLanguage::SyntheticLanguage(int64_t vocab, uint64_t seed,
                                     int64_t successors)
    : vocab_(vocab), seed_(seed), successors_(successors) {
  if (vocab < 3 || vocab > static_cast<int64_t>(kMaxVocab))
    throw DataError("synthetic language vocabulary " + std::to_string(vocab) +
                    " is not in [3, 65536]; pick a vocab_size in that range");
  if (successors < 3 || successors > std::min(vocab, kMaxSuccessors))
    throw DataError("synthetic language with " + std::to_string(successors) +
                    " successors per token is not possible for vocabulary " +
                    std::to_string(vocab) + "; pick 3 <= successors <= " +
                    std::to_string(std::min(vocab, kMaxSuccessors)));
  const int64_t k = successors;
  SplitMix64 rng(deriveSeed(seed, kStructurePurpose));

  // A hidden cyclic order of the vocabulary (Fisher-Yates).
  std::vector<int64_t> order(vocab), place(vocab);
  for (int64_t i = 0; i < vocab; ++i)
    order[i] = i;
  for (int64_t i = vocab - 1; i > 0; --i)
    std::swap(order[i], order[rng.below(i + 1)]);
  for (int64_t i = 0; i < vocab; ++i)
    place[order[i]] = i;

  next_.resize(vocab * k);
  cumulative_.resize(vocab * k);
  for (int64_t token = 0; token < vocab; ++token) {
    uint16_t *next = &next_[token * k];
    // Following the cycle makes every token reachable (irreducible); cycles
    // of length vocab and vocab-1 have gcd 1 (aperiodic), so pi is unique and
    // the power iteration converges.
    next[0] = static_cast<uint16_t>(order[(place[token] + 1) % vocab]);
    next[1] = static_cast<uint16_t>(order[(place[token] + 2) % vocab]);
    for (int64_t j = 2; j < k;) {
      const auto candidate = static_cast<uint16_t>(rng.below(vocab));
      if (std::find(next, next + j, candidate) == next + j)
        next[j++] = candidate;
    }
    uint32_t total = 0;
    for (int64_t j = 0; j < k; ++j) {
      total += 1 + static_cast<uint32_t>(rng.below(kMaxWeight));
      cumulative_[token * k + j] = total;
    }
  }

  // Stationary distribution by power iteration (sparse: vocab * k per step).
  std::vector<double> pi(vocab, 1.0 / static_cast<double>(vocab));
  std::vector<double> nextPi(vocab);
  for (int iteration = 0; iteration < kMaxPowerIterations; ++iteration) {
    std::fill(nextPi.begin(), nextPi.end(), 0.0);
    for (int64_t token = 0; token < vocab; ++token)
      for (int64_t j = 0; j < k; ++j)
        nextPi[next_[token * k + j]] += pi[token] * probability(token, j);
    double sum = 0.0;
    for (double p : nextPi)
      sum += p;
    double change = 0.0;
    for (int64_t token = 0; token < vocab; ++token) {
      nextPi[token] /= sum;
      change += std::fabs(nextPi[token] - pi[token]);
    }
    pi.swap(nextPi);
    if (change < kPowerTolerance)
      break;
  }
  stationary_ = std::move(pi);

  entropyRate_ = 0.0;
  for (int64_t token = 0; token < vocab; ++token)
    entropyRate_ += stationary_[token] * rowEntropyNats(token);
}

int64_t SyntheticLanguage::successor(int64_t token, int64_t j) const {
  return next_[token * successors_ + j];
}

double SyntheticLanguage::probability(int64_t token, int64_t j) const {
  const uint32_t *cumulative = &cumulative_[token * successors_];
  const uint32_t weight = cumulative[j] - (j == 0 ? 0 : cumulative[j - 1]);
  return static_cast<double>(weight) /
         static_cast<double>(cumulative[successors_ - 1]);
}

double SyntheticLanguage::rowEntropyNats(int64_t token) const {
  double entropy = 0.0;
  for (int64_t j = 0; j < successors_; ++j) {
    const double p = probability(token, j);
    entropy -= p * std::log(p);
  }
  return entropy;
}

TokenStream SyntheticLanguage::generate(int64_t count, uint64_t stream) const {
  if (count < 1)
    throw DataError("cannot generate " + std::to_string(count) +
                    " tokens of the synthetic language; ask for at least 1");
  const int64_t k = successors_;
  SplitMix64 rng(deriveSeed(seed_, stream + 1));
  TokenStream result;
  result.source = "synthetic language (vocab " + std::to_string(vocab_) +
                  ", seed " + std::to_string(seed_) + ", " +
                  std::to_string(k) + " successors, " +
                  (stream == kTrainStream  ? std::string("train")
                   : stream == kEvalStream ? std::string("eval")
                                           : std::to_string(stream)) +
                  " stream)";
  result.format = Format::Raw;
  result.tokens.resize(count);
  uint16_t token = static_cast<uint16_t>(rng.below(vocab_));
  result.tokens[0] = token;
  for (int64_t t = 1; t < count; ++t) {
    const uint32_t *cumulative = &cumulative_[token * k];
    const uint32_t r = static_cast<uint32_t>(rng.below(cumulative[k - 1]));
    int64_t j = 0;
    while (r >= cumulative[j])
      ++j;
    token = next_[token * k + j];
    result.tokens[t] = token;
  }
  return result;
}

Split makeSyntheticSplit(const SyntheticLanguage &language, int64_t trainTokens,
                         int64_t evalTokens) {
  auto train = std::make_shared<const TokenStream>(
      language.generate(trainTokens, SyntheticLanguage::kTrainStream));
  if (evalTokens < 0)
    throw DataError("cannot generate " + std::to_string(evalTokens) +
                    " eval tokens of the synthetic language; ask for 0 or "
                    "more");
  std::shared_ptr<const TokenStream> eval;
  if (evalTokens > 0) {
    eval = std::make_shared<const TokenStream>(
        language.generate(evalTokens, SyntheticLanguage::kEvalStream));
  } else {
    TokenStream empty;
    empty.source = "synthetic language (no eval stream)";
    eval = std::make_shared<const TokenStream>(std::move(empty));
  }
  return Split{TokenRange(std::move(train)), TokenRange(std::move(eval))};
}

} // namespace partition::runtime::data
