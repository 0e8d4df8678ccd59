//===- BatchLoader.cpp - consecutive [B,T] windows of a token stream ------===//

#include "runtime/data/BatchLoader.h"

#include <cmath>
#include <utility>

namespace partition::runtime::data {

TokenRange::TokenRange(std::shared_ptr<const TokenStream> stream)
    : stream_(std::move(stream)) {
  if (!stream_)
    throw DataError("a token range needs a token stream; load the data first");
  end_ = stream_->size();
}

TokenRange::TokenRange(std::shared_ptr<const TokenStream> stream, int64_t begin,
                       int64_t end)
    : stream_(std::move(stream)), begin_(begin), end_(end) {
  if (!stream_)
    throw DataError("a token range needs a token stream; load the data first");
  if (begin < 0 || begin > end || end > stream_->size())
    throw DataError("token range [" + std::to_string(begin) + ", " +
                    std::to_string(end) + ") is outside '" + stream_->source +
                    "', which holds " + std::to_string(stream_->size()) +
                    " tokens; pass a range inside it");
}

std::string TokenRange::describe() const {
  if (!stream_)
    return "an empty token range";
  std::string text = "'" + stream_->source + "'";
  if (begin_ != 0 || end_ != stream_->size())
    text += " tokens [" + std::to_string(begin_) + ", " + std::to_string(end_) +
            ")";
  return text;
}

Split splitTrainEval(std::shared_ptr<const TokenStream> stream,
                     double evalFraction) {
  if (!(evalFraction >= 0.0 && evalFraction < 1.0))
    throw DataError("eval fraction " + std::to_string(evalFraction) +
                    " is not in [0, 1); pass e.g. 0.1 to hold out the last "
                    "10% of the tokens");
  const int64_t size = stream ? stream->size() : 0;
  // Rounded, so that 0.95 of 100 tokens is 95 although 0.95 * 100 < 95.
  const auto evalTokens = static_cast<int64_t>(
      std::llround(evalFraction * static_cast<double>(size)));
  const int64_t cut = size - evalTokens;
  return Split{TokenRange(stream, 0, cut), TokenRange(stream, cut, size)};
}

Batch Batch::rows(int64_t begin, int64_t end) const {
  if (begin < 0 || begin > end || end > batch)
    throw DataError("rows [" + std::to_string(begin) + ", " +
                    std::to_string(end) + ") are outside a batch of " +
                    std::to_string(batch) + " rows; pass rows inside it");
  Batch part;
  part.batch = end - begin;
  part.seq = seq;
  part.position = position + begin * seq;
  part.epoch = epoch;
  part.inputs.assign(inputs.begin() + begin * seq, inputs.begin() + end * seq);
  part.targets.assign(targets.begin() + begin * seq,
                      targets.begin() + end * seq);
  return part;
}

Batch rankSlice(const Batch &global, int64_t rank, int64_t worldSize) {
  if (worldSize < 1 || rank < 0 || rank >= worldSize)
    throw DataError("rank " + std::to_string(rank) + " of " +
                    std::to_string(worldSize) +
                    " is not a data-parallel rank; need 0 <= rank < world "
                    "size");
  return global.rows(rank * global.batch / worldSize,
                     (rank + 1) * global.batch / worldSize);
}

BatchLoader::BatchLoader(TokenRange tokens, int64_t batch, int64_t seq,
                         const std::string &advice)
    : tokens_(std::move(tokens)), batch_(batch), seq_(seq) {
  if (batch < 1 || seq < 1)
    throw DataError("batch " + std::to_string(batch) + " x sequence " +
                    std::to_string(seq) +
                    " is not a batch shape; both must be at least 1");
  const int64_t needed = batch * seq + 1;
  if (tokens_.size() < needed)
    throw DataError(tokens_.describe() + " holds " +
                    std::to_string(tokens_.size()) +
                    " tokens, too few for one batch of " +
                    std::to_string(batch) + " x " + std::to_string(seq) +
                    " (needs " + std::to_string(needed) + "); " + advice);
}

Batch BatchLoader::nextBatch() {
  const int64_t count = tokensPerBatch();
  Batch result;
  result.batch = batch_;
  result.seq = seq_;
  result.position = position_;
  result.epoch = epoch_;
  result.inputs.resize(count);
  result.targets.resize(count);
  for (int64_t i = 0; i < count; ++i) {
    // validateVocab has checked the ids against a vocabulary that fits int32.
    result.inputs[i] = static_cast<int32_t>(tokens_[position_ + i]);
    result.targets[i] = static_cast<int32_t>(tokens_[position_ + i + 1]);
  }
  position_ += count;
  if (position_ + count + 1 > tokens_.size()) {
    position_ = 0;
    ++epoch_;
  }
  return result;
}

void BatchLoader::seek(int64_t position, int64_t epoch) {
  const int64_t count = tokensPerBatch();
  if (position < 0 || position + count + 1 > tokens_.size() || epoch < 0)
    throw DataError("cannot seek " + tokens_.describe() + " to position " +
                    std::to_string(position) + " (epoch " +
                    std::to_string(epoch) + "): a batch of " +
                    std::to_string(count + 1) + " tokens must fit in its " +
                    std::to_string(tokens_.size()) +
                    "; resume with the same data, batch and sequence length");
  position_ = position;
  epoch_ = epoch;
}

void BatchLoader::seekToBatch(int64_t index) {
  if (index < 0)
    throw DataError("cannot seek " + tokens_.describe() + " to batch " +
                    std::to_string(index) + "; pass a batch index >= 0");
  const int64_t perEpoch = batchesPerEpoch();
  seek(index % perEpoch * tokensPerBatch(), index / perEpoch);
}

int64_t BatchLoader::batchesPerEpoch() const {
  return (tokens_.size() - 1) / tokensPerBatch();
}

} // namespace partition::runtime::data
