//===- BatchLoader.h - consecutive [B,T] windows of a token stream -*- C++ -*-//
//
// A BatchLoader walks a token range in consecutive windows of B*T+1 tokens:
// inputs are the first B*T tokens of the window as a row-major [B,T] int32
// array, targets the same window shifted by one. Each batch advances the
// position by B*T (windows overlap by one token, as in llm.c); when fewer than
// B*T+1 tokens remain the loader drops the tail, returns to the start of the
// range and counts an epoch.
//
// nextBatch() always yields the *global* batch; data-parallel rank r of n
// takes rankSlice(batch, r, n) = rows [r*B/n, (r+1)*B/n), so every plan sees
// the same global batch for the same (position, epoch).
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_DATA_BATCHLOADER_H
#define PARTITION_RUNTIME_DATA_BATCHLOADER_H

#include "runtime/data/TokenData.h"

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace partition::runtime::data {

/// A contiguous range [begin, end) of a shared token stream; copying it does
/// not copy tokens.
class TokenRange {
public:
  TokenRange() = default;
  /// The whole stream.
  explicit TokenRange(std::shared_ptr<const TokenStream> stream);
  /// Throws DataError unless 0 <= begin <= end <= stream->size().
  TokenRange(std::shared_ptr<const TokenStream> stream, int64_t begin,
             int64_t end);

  int64_t size() const { return end_ - begin_; }
  bool empty() const { return size() == 0; }
  /// Token `i` of the range (0 <= i < size(), unchecked).
  uint32_t operator[](int64_t i) const { return stream_->tokens[begin_ + i]; }
  int64_t begin() const { return begin_; }
  int64_t end() const { return end_; }
  const std::shared_ptr<const TokenStream> &stream() const { return stream_; }
  /// "'path'" for a whole stream, "'path' tokens [b, e)" for a part of it.
  std::string describe() const;

private:
  std::shared_ptr<const TokenStream> stream_;
  int64_t begin_ = 0;
  int64_t end_ = 0;
};

/// The part a model trains on and the held-out part it is evaluated on.
struct Split {
  TokenRange train;
  TokenRange eval;
};

inline constexpr double kDefaultEvalFraction = 0.1;

/// The first tokens of `stream` for training and the last
/// round(evalFraction * size) for evaluation. Throws DataError unless
/// 0 <= evalFraction < 1.
Split splitTrainEval(std::shared_ptr<const TokenStream> stream,
                     double evalFraction = kDefaultEvalFraction);

/// One batch: row-major [batch, seq] int32 inputs and targets, where
/// targets(b, t) is the token after inputs(b, t).
struct Batch {
  int64_t batch = 0;
  int64_t seq = 0;
  /// Where the window of row 0 started in the loader's range, and the epoch.
  int64_t position = 0;
  int64_t epoch = 0;
  std::vector<int32_t> inputs;
  std::vector<int32_t> targets;

  int32_t input(int64_t b, int64_t t) const { return inputs[b * seq + t]; }
  int32_t target(int64_t b, int64_t t) const { return targets[b * seq + t]; }
  /// Rows [begin, end) as a batch of end-begin rows; throws DataError unless
  /// 0 <= begin <= end <= batch.
  Batch rows(int64_t begin, int64_t end) const;
};

/// Rows [rank*B/worldSize, (rank+1)*B/worldSize) of a global batch: the part
/// data-parallel rank `rank` of `worldSize` trains on. When worldSize does not
/// divide B the slices differ in size by at most one row. Throws DataError
/// unless 0 <= rank < worldSize.
Batch rankSlice(const Batch &global, int64_t rank, int64_t worldSize);

class BatchLoader {
public:
  /// Throws DataError unless batch, seq >= 1 and the range holds at least
  /// batch*seq+1 tokens; `advice` ends that message (what the caller's
  /// user can change: the training and the evaluation split differ).
  BatchLoader(TokenRange tokens, int64_t batch, int64_t seq,
              const std::string &advice =
                  "use more data, or a smaller batch or sequence length");

  /// The global batch at position(); then advances (and wraps) the position.
  Batch nextBatch();

  /// Offset in the range of the first token of the next batch; always leaves
  /// room for a whole window (position() + B*T + 1 <= range size).
  int64_t position() const { return position_; }
  /// How many times the loader has wrapped to the start of the range.
  int64_t epoch() const { return epoch_; }
  /// Continues from a saved (position(), epoch()): the following batches are
  /// those the saved loader would have produced. Throws DataError unless
  /// 0 <= position, position + B*T + 1 <= range size and epoch >= 0.
  void seek(int64_t position, int64_t epoch = 0);
  /// Continues as if `index` batches had been taken since the start (index =
  /// the training step): epoch = index / batchesPerEpoch(), position =
  /// (index % batchesPerEpoch()) * B * T.
  void seekToBatch(int64_t index);

  int64_t batch() const { return batch_; }
  int64_t seq() const { return seq_; }
  int64_t tokensPerBatch() const { return batch_ * seq_; }
  /// Batches before the loader wraps: floor((size - 1) / (B*T)).
  int64_t batchesPerEpoch() const;
  const TokenRange &tokens() const { return tokens_; }

private:
  TokenRange tokens_;
  int64_t batch_;
  int64_t seq_;
  int64_t position_ = 0;
  int64_t epoch_ = 0;
};

} // namespace partition::runtime::data

#endif // PARTITION_RUNTIME_DATA_BATCHLOADER_H
