//===- MoeScoring.h - the router's scoring functions ------------*- C++ -*-===//
//
// How moe_route turns a token's E logits into scores (the integer the
// routing kernels take; dialects/Xfmr/XfmrMoeOps.td has the semantics).
// Shared by the kernel checks and both backends.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_RUNTIME_PROGRAM_MOESCORING_H
#define PARTITION_RUNTIME_PROGRAM_MOESCORING_H

#include <cstdint>

namespace partition::runtime {

enum class MoeScoring : int64_t {
  /// softmax over the E logits, top-k, the k renormalised (Mixtral)
  Softmax = 0,
  /// top-k of the logits, softmax over the k
  SoftmaxTopK = 1,
  /// sigmoid per logit, top-k, the k normalised (DeepSeek-V3)
  Sigmoid = 2,
};

} // namespace partition::runtime

#endif // PARTITION_RUNTIME_PROGRAM_MOESCORING_H
