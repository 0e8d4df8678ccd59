//===- InOrderParallel.h - one task per function, reported in order -*- C++ -*-===//
//
// The lowering passes after the pipeline cut work on each stage's functions
// independently (a pipeline of pp stages has 2 pp of them: each stage's
// train and evaluation steps), so they run them on the context's threads.
// mlir::failableParallelForEach reports the diagnostics of whichever tasks
// ran before it noticed a failure, which depends on the threads' timing;
// a loop over the functions stopped at the first failure, so a bad input
// (a buffer too large to address) gave one error, not one per function.
// This runs every task and reports what that loop would have: the
// diagnostics of the tasks up to and including the first that failed, in
// task order.
//
//===----------------------------------------------------------------------===//

#ifndef PARTITION_LOWERING_INORDERPARALLEL_H
#define PARTITION_LOWERING_INORDERPARALLEL_H

#include "mlir/IR/MLIRContext.h"
#include "mlir/Support/LLVM.h"
#include "llvm/ADT/STLFunctionalExtras.h"

#include <cstddef>

namespace partition {

/// Runs task(0) ... task(count - 1) on `context`'s threads and fails when
/// one fails. The diagnostics reach the context's handlers after all have
/// run, as a loop stopping at the first failure would have emitted them;
/// where the context's threading is off, it is that loop. Each task must
/// touch its own IR (one function), and create nothing in shared places
/// but attributes and types (which MLIR uniques under a lock).
mlir::LogicalResult
failableParallelForEachInOrder(mlir::MLIRContext *context, size_t count,
                               llvm::function_ref<mlir::LogicalResult(size_t)> task);

} // namespace partition

#endif // PARTITION_LOWERING_INORDERPARALLEL_H
