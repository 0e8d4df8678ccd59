//===- DataParallelByHand.h - a program made data parallel ------*- C++ -*-===//
//
// Tests only: what the data-parallel pass does, applied to a decoded
// single-device program, so the runtime's multi-rank paths can be tested
// without (and against) the compiler.
//
//===----------------------------------------------------------------------===//
#ifndef PARTITION_UNITTESTS_RUNTIME_DATAPARALLELBYHAND_H
#define PARTITION_UNITTESTS_RUNTIME_DATAPARALLELBYHAND_H

#include "runtime/program/Program.h"

namespace partition::testprograms {

/// The mesh becomes [dp, pp=1, tp=1]; in train_step the gradients every
/// AdamW reads are all-reduced (avg over dp) in buckets of about
/// `bucketBytes`, latest first, just before the first AdamW; every function
/// ends with an all-reduce (avg over dp) of the loss. `program` must have
/// been compiled for the local batch (global batch / dp rows).
void makeDataParallel(runtime::Program &program, int64_t dp,
                      uint64_t bucketBytes = 256 * 1024);

} // namespace partition::testprograms

#endif // PARTITION_UNITTESTS_RUNTIME_DATAPARALLELBYHAND_H
