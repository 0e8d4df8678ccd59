//===- ContextBalance.h - attention work per context-parallel rank -*- C++ -*-//
//
// With context parallelism each rank runs attention for its block of the
// sequence's queries against every key they may see. Under a causal mask
// the later positions see more keys, so contiguous blocks leave the last
// rank with most of the work (2 cp - 1 times the first's); the zigzag
// layout (each rank holding chunk r and chunk 2 cp - 1 - r of 2 cp) evens
// it out. This counts the (query, key) pairs each rank computes, which the
// attention FLOPs are proportional to, for the memory report and the tests.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_PASSES_ANALYSIS_CONTEXTBALANCE_H
#define PARTITION_PASSES_ANALYSIS_CONTEXTBALANCE_H

#include <cstdint>
#include <vector>

namespace partition {

/// The (query, key) pairs of one sequence of `seqLen` that each of `cp`
/// ranks computes when the sequence is laid out in `chunks` zigzag chunks
/// (1: natural order) and split into cp contiguous blocks of that order:
/// with a causal mask the keys at or before each query (within the last
/// `window` positions when window > 0), else every key.
std::vector<int64_t> contextAttentionPairs(int64_t seqLen, int64_t chunks,
                                           int64_t cp, bool causal,
                                           int64_t window);

/// The largest count over the smallest (1 when balanced).
double imbalance(const std::vector<int64_t> &perRank);

} // namespace partition

#endif // PARTITION_PASSES_ANALYSIS_CONTEXTBALANCE_H
