//===- ContextRing.h - context parallelism's ring, unrolled ------*- C++ -*-===//
//
// The partitionLocally of attention and attention_grad under context
// parallelism's ring method: see ContextRing.cpp.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_DIALECTS_XFMR_CONTEXTRING_H
#define PARTITION_DIALECTS_XFMR_CONTEXTRING_H

#include "dialects/Xfmr/ShardingRule.h"

#include "mlir/Support/LLVM.h"

namespace partition::xfmr {

class AttentionOp;
class AttentionGradOp;

/// Replaces `op`, whose queries and keys are split along the sequence like
/// `keyFactor` (heads already localized), by the forward ring.
mlir::LogicalResult ringAttention(AttentionOp op, LocalPartition &partition,
                                  int keyFactor);
/// The same for the backward: the forward ring for the output and its
/// log-sum-exp, then the ring of the key-value gradients.
mlir::LogicalResult ringAttentionGrad(AttentionGradOp op,
                                      LocalPartition &partition,
                                      int keyFactor);

} // namespace partition::xfmr

#endif // PARTITION_DIALECTS_XFMR_CONTEXTRING_H
